"""dockbench's Gymnasium environment against robosuite's Gymnasium wrapper, at the same 1 kHz physics.

    python3 -m venv ~/venv-robosuite && ~/venv-robosuite/bin/pip install robosuite==1.5.2 mujoco==3.9.0 gymnasium h5py
    python experiments/robosuite_compare.py --robosuite-python ~/venv-robosuite/bin/python [--invocations 5]

robosuite is never imported here: it runs in its own interpreter (``--robosuite-python``, a venv with
``robosuite==1.5.2 mujoco==3.9.0 gymnasium h5py``), and dockbench's side in this interpreter; each side is a
child process pinned to one core (``--cpu``, via ``os.sched_setaffinity``). The invocations alternate
(robosuite, dockbench, dockbench, robosuite, …) so that both sides see the same drift of the machine's load.
Both children run with one BLAS / numba thread. Each child builds its environment, runs one warm-up episode
(robosuite JIT-compiles some of its maths with numba on first use), then times ``--episodes`` episodes of
``--seconds`` simulated seconds with a zero action and reports its median episode, by wall time and by its own
CPU time (``time.process_time`` around each timed episode: time the machine's other jobs took from the child
does not count, so a shared machine's load shows less). The parent prints, by wall and by CPU time, the median
over invocations of each side and of the paired ratios, and the load average before and after.

What each side runs (docs/gym.md, "Against robosuite"):

* robosuite: ``robosuite.make(task, robots=robot, controller_configs=BASIC composite config of the robot``
  (its arm: ``OSC_POSE``), ``control_freq=policy rate, no renderer, no cameras, ignore_done)`` wrapped in
  ``robosuite.wrappers.GymWrapper``, with ``robosuite.macros.SIMULATION_TIMESTEP = 0.001`` set before
  ``make``: MuJoCo's timestep 1 ms, the OSC law evaluated every physics step (robosuite runs its controller
  at every substep of an env step), the policy every ``1 / control_freq`` s.
* dockbench: ``DockingEnv(scenario, policy_rate=…)`` in ``impedance`` mode, the scenario's law at its
  control period (iiwa14_docking: Khatib operational-space impedance, MuJoCo timestep = control period =
  1 ms), F/T pipeline, planner and telemetry as the scenario has them; no reward termination (the episode
  runs its full length).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

from dockbench.cli import ArgumentParser, child_env

#: the robosuite child (run with the robosuite venv's python: ``python -c ROBOSUITE_WORKER ARGS_JSON``)
ROBOSUITE_WORKER = r"""
import json, statistics, sys, time
import numpy as np
a = json.loads(sys.argv[1])
import robosuite
import robosuite.macros as macros
macros.SIMULATION_TIMESTEP = a["timestep"]
from robosuite.controllers import load_composite_controller_config
from robosuite.wrappers import GymWrapper
cfg = load_composite_controller_config(controller="BASIC", robot=a["robot"])
n = int(round(a["seconds"] * a["policy_rate"]))
env = GymWrapper(robosuite.make(
    a["task"], robots=a["robot"], controller_configs=cfg, has_renderer=False, has_offscreen_renderer=False,
    use_camera_obs=False, control_freq=a["policy_rate"], horizon=n + 1, ignore_done=True))
sim = env.unwrapped.sim
info = {"timestep": float(sim.model.opt.timestep), "control_timestep": float(env.unwrapped.control_timestep),
        "arm_controller": cfg["body_parts"]["right"]["type"], "nq": int(sim.model.nq),
        "robosuite": robosuite.__version__, "mujoco": __import__("mujoco").__version__}
zero = np.zeros(env.action_space.shape, dtype=env.action_space.dtype)
walls, cpus = [], []
for ep in range(a["episodes"] + 1):  # the first: warm-up
    env.reset(seed=ep)
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        env.step(zero)
    walls.append(time.perf_counter() - t0)
    cpus.append(time.process_time() - c0)
info["walls"] = walls[1:]
info["cpus"] = cpus[1:]
info["steps"] = n
info["sim_s"] = n * env.unwrapped.control_timestep
print("RESULT " + json.dumps(info))
"""


def _dockbench_worker(a: dict) -> dict:
    import numpy as np

    from dockbench.gym import DockingEnv

    env = DockingEnv(a["scenario"], max_time=a["seconds"], policy_rate=a["policy_rate"],
                     reward={"seat_hold": None, "jam": False, "force_limit": 1e9})
    zero = np.zeros(env.action_space.shape)
    walls, cpus, steps = [], [], 0
    for ep in range(a["episodes"] + 1):  # the first: warm-up
        env.reset(seed=ep)
        steps = 0
        c0, t0 = time.process_time(), time.perf_counter()
        while not env.done:
            env.step(zero)
            steps += 1
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    sc = env.scenario
    return {"walls": walls[1:], "cpus": cpus[1:], "steps": steps, "sim_s": env.i * sc.sim.control_period,
            "timestep": sc.sim.timestep, "control_period": sc.sim.control_period,
            "law": sc.controller.type, "nq": int(env.setup.plant.nv)}


def _pin(cpu: int | None):
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


#: both children: one thread for the BLAS and numba pools (one core each)
ONE_THREAD = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}


def _run(cmd: list[str], cpu: int | None, env: dict[str, str] | None = None) -> dict:
    env = {**(os.environ if env is None else env), **ONE_THREAD}
    out = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=_pin(cpu), check=False, env=env)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{cmd[0]} {cmd[1]} … exited {out.returncode}:\n{out.stderr[-2000:]}")


def _rates(r: dict, clock: str = "walls") -> tuple[float, float]:
    """(env steps, simulated seconds) per second of the child's median episode by ``clock``: ``walls`` (wall
    time) or ``cpus`` (the child's CPU time, ``time.process_time``: what the load of a shared machine changes
    less)."""
    wall = statistics.median(r[clock])
    return r["steps"] / wall, r["sim_s"] / wall


def main(argv: list[str] | None = None) -> None:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    default_python = os.environ.get("ROBOSUITE_PYTHON", os.path.expanduser("~/venv-robosuite/bin/python"))
    ap.add_argument("--robosuite-python", default=default_python,
                    help="the interpreter of the venv robosuite is installed in (env ROBOSUITE_PYTHON)")
    ap.add_argument("--task", default="Lift", help="robosuite task (default Lift)")
    ap.add_argument("--robot", default="IIWA", help="robosuite robot (default IIWA; e.g. Panda)")
    ap.add_argument("--scenario", default="iiwa14_docking", help="dockbench scenario (default iiwa14_docking)")
    ap.add_argument("--policy-rate", type=float, default=50.0, help="policy steps per second, both sides [Hz]")
    ap.add_argument("--seconds", type=float, default=5.0, help="simulated seconds per episode")
    ap.add_argument("--episodes", type=int, default=3, help="timed episodes per invocation (after one warm-up)")
    ap.add_argument("--invocations", type=int, default=5, help="invocations per side, alternating")
    ap.add_argument("--cpu", type=int, default=0, help="the core each child is pinned to (-1: not pinned)")
    ap.add_argument("--worker", choices=["dockbench"], help=argparse_suppress())
    ap.add_argument("--worker-args", help=argparse_suppress())
    args = ap.parse_args(argv)
    if args.worker == "dockbench":
        print("RESULT " + json.dumps(_dockbench_worker(json.loads(args.worker_args))), flush=True)
        return
    cpu = None if args.cpu < 0 else args.cpu
    common = {"policy_rate": args.policy_rate, "seconds": args.seconds, "episodes": args.episodes}
    rs_cmd = [args.robosuite_python, "-c", ROBOSUITE_WORKER,
              json.dumps({**common, "task": args.task, "robot": args.robot, "timestep": 0.001})]
    db_cmd = [sys.executable, os.path.abspath(__file__), "--worker", "dockbench",
              "--worker-args", json.dumps({**common, "scenario": args.scenario})]
    load0 = os.getloadavg()
    rs, db = [], []
    for i in range(args.invocations):
        order = ((rs, rs_cmd, None), (db, db_cmd, child_env())) if i % 2 == 0 else (
            (db, db_cmd, child_env()), (rs, rs_cmd, None))
        for acc, cmd, env in order:
            acc.append(_run(cmd, cpu, env))
        print(f"  invocation {i + 1}: robosuite {_rates(rs[-1])[1]:.3f}, dockbench {_rates(db[-1])[1]:.3f} "
              f"sim s per wall s; per CPU s {_rates(rs[-1], 'cpus')[1]:.3f}, {_rates(db[-1], 'cpus')[1]:.3f}",
              flush=True)
    load1 = os.getloadavg()
    r0, d0 = rs[0], db[0]
    print(f"robosuite {r0['robosuite']} / mujoco {r0['mujoco']}: {args.task} with {args.robot}, arm controller "
          f"{r0['arm_controller']}, timestep {r0['timestep'] * 1e3:g} ms, "
          f"env step {r0['control_timestep'] * 1e3:g} ms, nq {r0['nq']}")
    print(f"dockbench: {args.scenario} ({d0['law']}), timestep {d0['timestep'] * 1e3:g} ms, control period "
          f"{d0['control_period'] * 1e3:g} ms, env step {1e3 / args.policy_rate:g} ms, nv {d0['nq']}")
    print(f"{args.invocations} alternating invocations per side, each the median of {args.episodes} episodes of "
          f"{args.seconds:g} simulated s, pinned to cpu {cpu}; load average {load0[0]:.2f} before, "
          f"{load1[0]:.2f} after")
    for clock, unit in (("walls", "wall"), ("cpus", "CPU")):
        for name, acc in (("robosuite GymWrapper", rs), ("dockbench DockingEnv", db)):
            st = [_rates(r, clock)[0] for r in acc]
            ss = [_rates(r, clock)[1] for r in acc]
            print(f"  {name:22s} median {statistics.median(st):8.1f} env steps per {unit} s  "
                  f"{statistics.median(ss):7.3f} sim s per {unit} s  (range {min(ss):.3f}–{max(ss):.3f})")
        ratios = [_rates(d, clock)[1] / _rates(r, clock)[1] for r, d in zip(rs, db, strict=True)]
        print(f"  dockbench / robosuite per simulated second, by {unit} time: median of paired ratios "
              f"{statistics.median(ratios):.2f}× (range {min(ratios):.2f}–{max(ratios):.2f}×)")


def argparse_suppress() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
