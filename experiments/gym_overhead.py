"""The Gymnasium env layer's cost over the plain control cycle, in instructions (docs/gym.md, "Throughput").

    python experiments/gym_overhead.py [--scenario iiwa14_docking] [--policy-rate 50] [--steps 50 100]
    python experiments/gym_overhead.py --timing 5 [--no-count]

Counts, under valgrind's callgrind (``--valgrind``; a load-independent measure), the instructions of policy
steps of :class:`dockbench.gym.DockingEnv` with a zero ``impedance`` action and of the plain cycle
(:class:`dockbench.sim.cycle.Cycle`, the loop ``simulate`` runs) over the same control steps of the same
drawn scenario (the env's episode, built again), and prints instructions per policy step of each and their
ratio. How: one child process under callgrind with ``--dump-before=getppid``; the child calls
``os.getppid()`` between segments, so each segment's count is a dump of its own. Segments: the setup
(imports, builds, ``reset``) and a warm-up of ``--warmup`` policy steps on both sides (not counted), an empty
segment (two markers: their own cost, subtracted from every segment), then for each ``--steps`` length L the
next L policy steps of the env and the same L × (control steps per policy step) steps of the plain cycle.
Every length is reported (successive segments of the episode, so a drift of the per-step cost with the
episode's phase shows), and their sum. The kernel guard is off on both sides (``kernel_check=0``); the
telemetry is recorded on both. After the counted segments the child checks that both sides recorded the
same rows bit for bit (the zero action is the plain run).

``--action changing``: the env gets a new action every policy step (uniform in ±0.1 per component: a
reference offset and rotation and new gain scales each step), so it also pays the shaped plan stage, the
action's application and the law's gain update; the plain cycle runs the same number of control steps of
the zero action (not the same rollout: the row check is not expected to hold).

``--timing R``: R interleaved rounds (the order alternating) of one episode of the env against the plain
cycle over the same control steps, in this process: medians of CPU time (``time.process_time``) and wall
time per policy step and the median of the paired ratios. Load-dependent: quote the load average.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dockbench.cli import ArgumentParser, child_env


def _pair(scenario: str, rate: float, n_policy: int):
    """(env after reset(seed=0), the plain cycle of the same drawn scenario and length, its setup)."""
    from dockbench.sim.cycle import Cycle
    from dockbench.sim.loop import build

    from dockbench.gym import DockingEnv

    env = DockingEnv(scenario, max_time=n_policy / rate, policy_rate=rate, kernel_check=0,
                     reward={"seat_hold": None, "jam": False, "force_limit": 1e9})
    env.reset(seed=0)
    setup = build(env.scenario)
    cyc = Cycle(setup, env.n_steps, kernel_check=0)
    return env, cyc


def _count_worker(a: dict) -> dict:
    """The child under callgrind: the segments of the module docstring, separated by os.getppid()."""
    warm, lengths = a["warmup"], a["steps"]
    env, cyc = _pair(a["scenario"], a["policy_rate"], warm + sum(lengths) + 1)
    zero = np.zeros(env.action_space.shape)
    spa = env.steps_per_action
    changing = a["action"] == "changing"
    rng = np.random.default_rng(0)
    actions = rng.uniform(-0.1, 0.1, (sum(lengths), *zero.shape)) if changing else None
    k = 0
    step, env_step, marker = cyc.step, env.step, os.getppid
    for _ in range(warm):
        env_step(zero)
    for i in range(warm * spa):
        step(i)
    i0 = warm * spa
    marker()  # dump: setup + warm-up
    marker()  # dump: the markers' own cost
    for n in lengths:
        if changing:
            for _ in range(n):
                env_step(actions[k])
                k += 1
        else:
            for _ in range(n):
                env_step(zero)
        marker()  # dump: the env's n policy steps
        for i in range(i0, i0 + n * spa):
            step(i)
        marker()  # dump: the plain cycle's same control steps
        i0 += n * spa
    assert env.i == i0, (env.i, i0)
    env.cycle.telemetry.finish()
    cyc.telemetry.finish()
    got, want = env.cycle.telemetry.channels(), cyc.telemetry.channels()
    same = all(np.array_equal(got[c][:i0], want[c][:i0], equal_nan=True) for c in want)
    from dockbench.sim.cycle import kernel_paths

    return {"spa": spa, "same": same, "law": env.scenario.controller.type, "control_steps": i0,
            "kernels": kernel_paths(env.setup)}


def _totals(prefix: str) -> list[int]:
    """The instruction counts of the dumps prefix.1, prefix.2, … in order."""
    out = []
    k = 1
    while Path(f"{prefix}.{k}").is_file():
        for line in Path(f"{prefix}.{k}").read_text().splitlines():
            if line.startswith("totals:"):
                out.append(int(line.split()[1]))
                break
        k += 1
    return out


def count(args) -> None:
    spec = {"scenario": args.scenario, "policy_rate": args.policy_rate, "warmup": args.warmup, "steps": args.steps,
            "action": args.action}
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "cg.out")
        cmd = [args.valgrind, "--tool=callgrind", "--dump-before=getppid", f"--callgrind-out-file={prefix}",
               sys.executable, os.path.abspath(__file__), "--worker", json.dumps(spec)]
        env = {**child_env(), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        result = next((json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("RESULT ")), None)
        if result is None:
            raise SystemExit(f"the callgrind child exited {out.returncode}:\n{out.stderr[-3000:]}")
        totals = _totals(prefix)
    # dumps: setup + warm-up, the markers alone, then per length: env, plain
    n_len = len(args.steps)
    if len(totals) != 2 + 2 * n_len:
        raise SystemExit(f"expected {2 + 2 * n_len} callgrind dumps, got {len(totals)}")
    empty = totals[1]
    spa = result["spa"]
    what = "zero impedance action" if args.action == "zero" else "a new impedance action every policy step"
    print(f"{args.scenario} ({result['law']}), policy at {args.policy_rate:g} Hz = {spa} control steps per policy "
          f"step, {what}, after {args.warmup} warm-up policy steps; kernel guard off; "
          f"env and plain cycle recorded the same rows bit for bit: {result['same']}")
    print(f"  paths: {', '.join(f'{k} {v}' for k, v in sorted(result['kernels'].items()))}")
    print(f"  instructions per policy step (callgrind; the markers' own {empty} subtracted)")
    sums = [0, 0, 0]
    for k, n in enumerate(args.steps):
        e, p = totals[2 + 2 * k] - empty, totals[3 + 2 * k] - empty
        sums = [sums[0] + n, sums[1] + e, sums[2] + p]
        print(f"  {n:4d} steps: env {e / n:12.0f}  plain cycle {p / n:12.0f}  env - plain {(e - p) / n:10.0f}  "
              f"overhead {100.0 * (e / p - 1.0):+6.2f} %")
    n, e, p = sums
    print(f"  all {n:4d}:  env {e / n:12.0f}  plain cycle {p / n:12.0f}  env - plain {(e - p) / n:10.0f}  "
          f"overhead {100.0 * (e / p - 1.0):+6.2f} %")
    if args.action == "zero" and not result["same"]:
        raise SystemExit("the env's rows differ from the plain cycle's: the zero action is not the plain run")


def timing(args) -> None:
    load0 = os.getloadavg()
    n_pol = sum(args.steps)
    cpu_env, cpu_plain, wall_env, wall_plain, ratio_cpu, ratio_wall = [], [], [], [], [], []
    for r in range(args.timing + 1):  # the first round: warm-up
        env, cyc = _pair(args.scenario, args.policy_rate, n_pol)
        zero = np.zeros(env.action_space.shape)
        step, n = cyc.step, env.n_steps
        res = {}
        for which in (("env", "plain") if r % 2 == 0 else ("plain", "env")):
            c0, w0 = time.process_time(), time.perf_counter()
            if which == "env":
                while not env.done:
                    env.step(zero)
            else:
                for i in range(n):
                    step(i)
            res[which] = (time.process_time() - c0, time.perf_counter() - w0)
        if r == 0:
            continue
        cpu_env.append(res["env"][0] / n_pol)
        cpu_plain.append(res["plain"][0] / n_pol)
        wall_env.append(res["env"][1] / n_pol)
        wall_plain.append(res["plain"][1] / n_pol)
        ratio_cpu.append(res["env"][0] / res["plain"][0])
        ratio_wall.append(res["env"][1] / res["plain"][1])
    load1 = os.getloadavg()
    med = statistics.median
    print(f"timing: {args.timing} interleaved rounds of {n_pol} policy steps at {args.policy_rate:g} Hz; "
          f"load average {load0[0]:.2f} before, {load1[0]:.2f} after")
    print(f"  CPU  per policy step: env {1e6 * med(cpu_env):8.1f} µs  plain {1e6 * med(cpu_plain):8.1f} µs  "
          f"overhead (median of paired ratios) {100.0 * (med(ratio_cpu) - 1.0):+6.2f} % "
          f"(range {100.0 * (min(ratio_cpu) - 1.0):+.1f} … {100.0 * (max(ratio_cpu) - 1.0):+.1f} %)")
    print(f"  wall per policy step: env {1e6 * med(wall_env):8.1f} µs  plain {1e6 * med(wall_plain):8.1f} µs  "
          f"overhead (median of paired ratios) {100.0 * (med(ratio_wall) - 1.0):+6.2f} % "
          f"(range {100.0 * (min(ratio_wall) - 1.0):+.1f} … {100.0 * (max(ratio_wall) - 1.0):+.1f} %)")


def main(argv: list[str] | None = None) -> None:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="iiwa14_docking", help="a scenario file or shipped name")
    ap.add_argument("--policy-rate", type=float, default=50.0, help="policy steps per second [Hz]")
    ap.add_argument("--warmup", type=int, default=25, help="policy steps before the counted segments")
    ap.add_argument("--steps", type=int, nargs="+", default=[50, 100],
                    help="lengths of the counted segments [policy steps], successive in the episode")
    ap.add_argument("--action", choices=["zero", "changing"], default="zero",
                    help="zero: the zero impedance action (the env's rollout is the plain cycle's); changing: a new "
                         "action every policy step (uniform in ±0.1: offset, rotation, gain scales), the plain "
                         "cycle running the zero action's steps (the cost of a policy that acts, not the same "
                         "rollout)")
    ap.add_argument("--valgrind", default="valgrind", help="the valgrind executable")
    ap.add_argument("--no-count", action="store_true", help="skip the callgrind count")
    ap.add_argument("--timing", type=int, default=0, help="interleaved CPU/wall-time rounds (0: none)")
    ap.add_argument("--worker", help=_suppress())
    args = ap.parse_args(argv)
    if args.worker is not None:
        print("RESULT " + json.dumps(_count_worker(json.loads(args.worker))), flush=True)
        return
    if not args.no_count:
        count(args)
    if args.timing > 0:
        timing(args)


def _suppress() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
