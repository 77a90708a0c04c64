"""Benchmark the control loop: real-time factor, cost split per step, and the physics floor.

    python experiments/bench.py                       # default scenario list, 5 runs each
    python experiments/bench.py scenarios/iiwa14_docking.yaml --runs 7 --json bench.json

Each run happens in a FRESH process with single-threaded BLAS (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS,
MKL_NUM_THREADS = 1 in the child's environment), telemetry on. Per scenario the table gives the
median and min–max over runs of: wall time, simulated time, real-time factor (sim / wall), and µs per
control step split into physics (MuJoCo substeps), dynamics (the Pinocchio pass), controller
(wrench pipeline + planner + control law incl. QP + clipping), telemetry, and other (loop
bookkeeping), plus the per-step cost of an active end effector (the G20 hand's slew and projection).
The split comes from a second, profiled pass in the same process (timers cost a little,
so the unprofiled wall time is the headline). The **floor** is the cost of the same number of
``mj_step`` calls plus one Pinocchio pass per step (plus the hand's own step, when a hand is mounted)
with nothing else, on the same assembled model and
the same states (the run's applied torques are replayed open-loop, which reproduces its trajectory
and its contacts exactly, since the loop is deterministic);
``loop/floor`` is the unprofiled µs per step divided by the floor's. ``guard`` is the kernel guard's period
(``--kernel-check N``: each compiled kernel checked against its Python reference on the first step and
every N steps, 0 = off; sim/kernels.py); ``--kernel-check 0,5000`` measures both settings with their
runs interleaved (run 1 of each, then run 2 of each, …), so that the machine's load drifts through both
alike, and prints the median ratio of their real-time factors. The last column says which
implementation ran the snapshot kinematics, the controller and the wrench pipeline: ``compiled`` (the
C kernels), ``python`` (the reference paths; ``--kernels python`` measures them), or the mix
(sim/kernels.py). The default list ends with the
standalone G20 hand bridge's track test (``g20_track_test``, its own small table: it has no physics
and no floor); pass it by name to run it alone.

``--live none,ros2,rerun`` measures the cost of watching a run (docs/live.md): for each run index the
modes are run one after another (interleaved, so drifts of a shared machine hit every mode alike),
each with its observer attached to the unprofiled pass: ``none`` (no observer: the loop as it always
runs), ``null`` (an observer called every step that does nothing: the seam itself), ``ros2``
(--ros2 at 50 Hz over cyclonedds with no subscriber, or the in-process bus when cyclonedds is
missing), ``rerun`` (--rerun into a temporary .rrd at 50 Hz), ``viewer`` (the offscreen viewer at 60
frames per wall second, unpaced: the rendering cost).

Machines are shared and noisy: quote medians and ratios, never a single run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from dockbench.telemetry.progress import Progress

from dockbench.cli import ArgumentParser, child_env

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SCENARIOS = [
    "scenarios/iiwa14_docking.yaml",
    "scenarios/fr3_docking.yaml",
    "scenarios/iiwa14_docking_hqp.yaml",
    "scenarios/fr3_docking_hqp.yaml",
    "scenarios/iiwa14_docking_se3.yaml",
    "scenarios/fr3_docking_se3.yaml",
    "scenarios/iiwa14_tracking.yaml",
    "scenarios/fr3_tracking.yaml",
    "scenarios/fr3_g20_tracking.yaml",
]
#: the standalone G20 hand bridge's track test (docs/theory/g20_hand.md §5), benchmarked after the scenarios
HAND_TRACK_TEST = "g20_track_test"
SINGLE_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


LIVE_MODES = ("none", "null", "ros2", "rerun", "viewer")
"""Observers --live can attach (module docstring)."""


class _NullObserver:
    every, stop_reason = 1, "null"

    def start(self, setup, tel):
        pass

    def step(self, i, t):
        return False

    def finish(self, status):
        pass


def _live_observer(mode: str, tmp: Path):
    """(observer, cleanup) for a --live mode."""
    if mode == "none":
        return None, lambda: None
    if mode == "null":
        return _NullObserver(), lambda: None
    from dockbench.telemetry.live import MailboxStream

    if mode == "ros2":
        from dockbench.bridges.ros2 import open_transport

        try:
            transport = open_transport("cyclonedds")
        except Exception:  # noqa: BLE001 - no cyclonedds: the in-process bus
            transport = open_transport("inprocess")
        from dockbench.telemetry.live import Ros2Sink

        obs = MailboxStream(Ros2Sink(transport), rate_hz=50.0, policy="latest", max_rate_hz=50.0)
        return obs, transport.close
    if mode == "rerun":
        from dockbench.telemetry.live import RerunSink

        return MailboxStream(RerunSink(str(tmp / "bench.rrd")), rate_hz=50.0, policy="all"), lambda: None
    if mode == "viewer":
        from dockbench.telemetry.viewer import RunViewer, offscreen_launcher

        v = RunViewer(speed=None, launch=offscreen_launcher(width=640, height=480))
        return v, v.close
    raise SystemExit(f"unknown --live mode {mode!r}; known: {', '.join(LIVE_MODES)}")


def measure_once(scenario_path: str, live: str = "none") -> dict:
    """Run one scenario (unprofiled, then profiled) plus the floor; return the numbers. ``live``
    attaches a --live observer (:data:`LIVE_MODES`) to the unprofiled pass."""
    import tempfile

    from dockbench.sim.loop import build, kernel_paths, simulate
    from dockbench.sim.scenario import load_scenario

    sc = load_scenario(scenario_path, _sets())
    setup = build(sc)
    culling_log = record_culling(setup)
    with tempfile.TemporaryDirectory() as tmp:
        obs, cleanup = _live_observer(live, Path(tmp))
        try:
            outcome = simulate(setup, step_observer=obs, chunk_rows=_rows(setup))
            tel, status, _, timing = outcome
        finally:
            cleanup()
    steps = timing["steps"]
    out = {
        "scenario": sc.name,
        "live": live,
        "status": status,
        "wall_s": timing["wall_s"],
        "sim_s": timing["sim_s"],
        "rtf": timing["real_time_factor"],
        "us_per_step": timing["us_per_step"],
        "kernels": kernel_paths(setup),
        "kernel_check": outcome.guard.every,
    }
    setup = build(sc)
    _, _, _, prof = simulate(setup, profile=True, kernel_check=out["kernel_check"], chunk_rows=_rows(setup))
    n = max(prof["steps"], 1)
    parts = {k: 1e6 * prof[f"t_{k}"] / n for k in ("physics", "dynamics", "controller", "telemetry", "tool")}
    parts["other"] = max(prof["us_per_step"] - sum(parts.values()), 0.0)
    out["split_us"] = parts
    # floor: the same mj_step calls on the same states (the run's applied torques replayed
    # open-loop reproduce its trajectory, contacts included) + one Pinocchio pass per step
    floor = replay_floor(sc, tel.tau_applied[:steps].copy(), culling_log=culling_log)
    out["floor_us_per_step"] = 1e6 * floor / max(steps, 1)
    out["loop_over_floor"] = out["us_per_step"] / out["floor_us_per_step"]
    return out


def _rows(setup) -> int:
    """Telemetry rows that hold the whole run in one chunk: the floor replays every step's torques, and a
    run longer than one chunk (telemetry/log.py's CHUNK_ROWS) would hand back only its last chunk."""
    return int(round(setup.duration / setup.scenario.sim.control_period)) + 2


def _sets() -> list[str]:
    """The ``--set KEY=VALUE`` overrides the parent passed to its workers (DOCKBENCH_BENCH_SETS, JSON)."""
    return json.loads(os.environ.get("DOCKBENCH_BENCH_SETS", "[]"))


def record_culling(setup) -> list[tuple[int, np.ndarray]] | None:
    """Before ``simulate(setup)``: log the contact culling's box set (sim/culling.py) each time it changes, as
    (control step, the mask of boxes left in), for :func:`replay_floor` to cull the same boxes without running
    the culling's update (that update is the loop's work, not MuJoCo's). None for a target without culling.
    Costs the run one call and an identity test per step (the culling replaces its mask when it changes)."""
    cull = setup.culling
    if cull is None:
        return None
    log = [(0, cull.active.copy())]
    update, step = cull.update, [0]
    last = [cull.active]

    def recorded() -> None:
        update()
        if cull.active is not last[0]:
            last[0] = cull.active
            log.append((step[0], cull.active.copy()))
        step[0] += 1

    cull.update = recorded
    return log


def replay_floor(sc, tau_log, setup=None, culling_log=None) -> float:
    """Wall seconds of the floor: a fresh build of ``sc`` driven open-loop by the run's applied torques
    ``tau_log`` (steps × nv), one ``Dynamics.update`` (the Pinocchio pass) and one control period of
    ``mj_step`` per step (and the hand's own step when one is mounted), nothing else; on ``setup`` when given
    (a build of ``sc`` that has not run). The loop is deterministic, so the replay reproduces the run's states
    and contacts. With contact culling (``culling_log`` from :func:`record_culling` on the run) the replay
    leaves out of collision detection the boxes the run left out, at the steps it did, so MuJoCo tests the
    run's geom pairs — not every box, a slower floor than the run's physics."""
    import mujoco
    from dockbench.sim.loop import build, contiguous_slice

    setup = build(sc) if setup is None else setup
    m, d = setup.asm.model, setup.data
    nsub = int(round(sc.sim.control_period / sc.sim.timestep))
    # the arm's qpos/qvel/ctrl addressed as the loop addresses them (slices: no gather per step)
    qa, da, aa = (contiguous_slice(a) for a in (setup.asm.qpos_adr, setup.asm.dof_adr, setup.asm.act_ids))
    dyn = setup.dynamics
    runtime = setup.runtime  # an active end effector (hand) must move as in the run
    T_c = sc.sim.control_period
    changes: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    if culling_log is not None:  # the boxes' collision flags per change, computed before the timed loop
        cull = setup.culling
        for i, active in culling_log:
            changes[i] = (np.where(active, cull.contype, 0), np.where(active, cull.conaffinity, 0))
        boxes = cull.boxes
    t0 = time.perf_counter()
    for i in range(len(tau_log)):
        if i in changes:
            m.geom_contype[boxes], m.geom_conaffinity[boxes] = changes[i]
        dyn.update(d.qpos[qa], d.qvel[da])
        d.ctrl[aa] = tau_log[i]
        if runtime is not None:
            runtime.pre_step(i * T_c)
        mujoco.mj_step(m, d, nsub)
    return time.perf_counter() - t0


#: the three callgrind children of ``--instructions``: each builds the scenario twice; ``run`` then simulates
#: the first build, ``replay`` also replays that run's torques on the second (the floor)
CALLGRIND_MODES = ("base", "run", "replay")


def instructions_child(scenario_path: str, mode: str, kernel_check: int) -> dict:
    """One ``--instructions`` child (:data:`CALLGRIND_MODES`), run under callgrind by the parent: the steps,
    status and kernels of the run (none for ``base``)."""
    from dockbench.sim.loop import build, kernel_paths, simulate
    from dockbench.sim.scenario import load_scenario

    sc = load_scenario(scenario_path, _sets())
    first, second = build(sc), build(sc)
    if mode == "base":
        return {"scenario": sc.name, "steps": 0}
    culling_log = record_culling(first)  # in the run and the replay child alike: replay − run is the floor
    tel, status, _, timing = simulate(first, kernel_check=kernel_check, chunk_rows=_rows(first))
    steps = timing["steps"]
    if mode == "replay":
        replay_floor(sc, tel.tau_applied[:steps].copy(), setup=second, culling_log=culling_log)
    return {"scenario": sc.name, "steps": steps, "status": status, "kernels": kernel_paths(first)}


def callgrind_total(text: str) -> int:
    """The instructions executed (Ir) from a callgrind output file's ``summary:`` (or ``totals:``) line."""
    for line in text.splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise ValueError("no 'summary:' or 'totals:' line: not a callgrind output file")


def instructions_per_step(totals: dict[str, int], steps: int) -> dict:
    """Loop and floor per control step from the three children's totals: loop = (run − base) / steps (the
    control loop, builds and imports subtracted), floor = (replay − run) / steps (the same steps' Pinocchio
    pass and ``mj_step`` alone)."""
    if steps <= 0:
        raise ValueError(f"the run took {steps} steps")
    loop = (totals["run"] - totals["base"]) / steps
    floor = (totals["replay"] - totals["run"]) / steps
    return {"loop_instr_per_step": loop, "floor_instr_per_step": floor,
            "loop_over_floor": loop / floor if floor > 0 else float("nan")}


def measure_instructions(path: str, env: dict[str, str], kernel_check: int = 0, keep: Path | None = None) -> dict:
    """``--instructions``: the scenario's control loop and floor in instructions per step, counted by valgrind's
    callgrind in three fresh processes (:data:`CALLGRIND_MODES`). ``keep``: a folder for the callgrind
    output files (readable with callgrind_annotate or kcachegrind); default a temporary one."""
    import shutil
    import tempfile

    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("bench --instructions needs valgrind on PATH (e.g. `apt install valgrind`, "
                         "`brew install valgrind` on Linux hosts of Homebrew)")
    env = {**env, "PYTHONHASHSEED": "0"}  # the same dict layouts in the three children
    totals, info = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(keep) if keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for mode in CALLGRIND_MODES:
            out = folder / f"{Path(path).stem}-{mode}.callgrind"
            proc = subprocess.run(
                [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                 str(Path(__file__).resolve()), "--worker-instructions", mode, "--kernel-check", str(kernel_check),
                 path],
                capture_output=True, text=True, env=env, cwd=REPO,
            )
            if proc.returncode != 0:
                raise SystemExit(f"{path}: the callgrind child ({mode}) failed:\n{proc.stderr[-3000:]}")
            totals[mode] = callgrind_total(out.read_text())
            info[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    if info["run"]["steps"] != info["replay"]["steps"]:
        raise SystemExit(f"{path}: the run and the replay child took {info['run']['steps']} and "
                         f"{info['replay']['steps']} steps: the run is not deterministic")
    steps = info["run"]["steps"]
    return {"scenario": info["run"]["scenario"], "file": path, "steps": steps, "status": info["run"]["status"],
            "kernels": info["run"]["kernels"], "kernel_check": kernel_check, "totals": totals,
            **instructions_per_step(totals, steps)}


def format_instructions_table(results: list[dict]) -> str:
    """Markdown: per scenario the steps, loop and floor [k instructions per control step], loop/floor."""
    from dockbench.sim.kernels import describe

    rows = ["| scenario | steps | loop k instr/step | floor k instr/step | loop/floor | guard | kernels |",
            "|---|---:|---:|---:|---:|---|---|"]
    for r in results:
        rows.append(f"| {r['scenario']} | {r['steps']} | {r['loop_instr_per_step'] / 1e3:.1f} | "
                    f"{r['floor_instr_per_step'] / 1e3:.1f} | {r['loop_over_floor']:.3f} | {r['kernel_check']} | "
                    f"{describe(r['kernels'])} |")
    return "\n".join(rows)


def measure_hand_track_test() -> dict:
    """The G20 bridge's track test (``python -m dockbench.experiments.g20_bridge --track-test``: kinematic
    bridge at the hand model's timestep, slew and collision projection on, OPEN then half fist, checked at step 600),
    timed end to end; no physics, so no floor."""
    from dockbench.hand.bridge import BridgeConfig, HandBridge, run_track_test
    from dockbench.hand.spec import load_spec

    bridge = HandBridge.standalone(BridgeConfig(), load_spec(None))
    t0 = time.perf_counter()
    res = run_track_test(bridge)
    wall = time.perf_counter() - t0
    steps = res.check_step
    sim = steps * bridge.dt
    return {
        "scenario": HAND_TRACK_TEST,
        "status": "PASS" if res.passed else "FAIL",
        "wall_s": wall,
        "sim_s": sim,
        "rtf": sim / wall,
        "us_per_step": 1e6 * wall / steps,
        "max_error_rad": res.max_error,
    }


def _stats(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def run_live_bench(scenarios: list[str], runs: int, modes: list[str]) -> list[dict]:
    """Each scenario ``runs`` times per mode, the modes interleaved run by run (fresh processes)."""
    env = child_env({**os.environ, **SINGLE_THREAD_ENV})
    results = []
    for path in scenarios:
        samples: dict[str, list[dict]] = {m: [] for m in modes}
        for _ in range(runs):
            for mode in modes:
                got = _spawn_workers(path, 1, {**env, "DOCKBENCH_BENCH_LIVE": mode})
                samples[mode].extend(got)
        for mode in modes:
            if samples[mode]:
                s0 = samples[mode][0]
                results.append({"scenario": s0["scenario"], "live": mode, "runs": len(samples[mode]),
                                "us_per_step": _stats([x["us_per_step"] for x in samples[mode]]),
                                "rtf": _stats([x["rtf"] for x in samples[mode]]),
                                "samples_us": [x["us_per_step"] for x in samples[mode]]})
    return results


def format_live_table(results: list[dict]) -> str:
    """Median µs/step per mode and its ratio to ``none`` (medians of the interleaved runs)."""
    lines = ["| scenario | live | runs | µs/step median (min–max) | RTF median | × none |", "|---|---|---|---|---|---|"]
    base = {r["scenario"]: r["us_per_step"][0] for r in results if r["live"] == "none"}
    for r in results:
        med, lo, hi = r["us_per_step"]
        ratio = f"{med / base[r['scenario']]:.3f}" if r["scenario"] in base else "–"
        lines.append(f"| {r['scenario']} | {r['live']} | {r['runs']} | {med:.2f} ({lo:.2f}–{hi:.2f}) | "
                     f"{r['rtf'][0]:.1f} | {ratio} |")
    return "\n".join(lines)


def run_bench(
    scenarios: list[str], runs: int, kernels: str | None = None, checks: list[int | None] | None = None,
    progress: bool = False,
) -> list[dict]:
    """Measure each scenario ``runs`` times per kernel-guard period in ``checks`` (None: as set in the
    environment), the periods' runs interleaved; one result row per (scenario, period). ``progress``: a
    line counting the worker runs on a terminal (telemetry/progress.py)."""
    env = child_env({**os.environ, **SINGLE_THREAD_ENV})
    if kernels is not None:  # the compiled kernels or the Python reference paths (sim/kernels.py)
        env["DOCKBENCH_KERNELS"] = kernels
    checks = checks or [None]
    envs = []
    for c in checks:
        e = dict(env)
        if c is not None:
            e["DOCKBENCH_KERNEL_CHECK"] = str(c)
        envs.append(e)
    results = []
    n_runs = sum(s != HAND_TRACK_TEST for s in scenarios) * runs * len(checks)
    with Progress("bench runs", n_runs, enabled=None if progress else False) as bar:
        for path in scenarios:
            if path == HAND_TRACK_TEST:
                results.append(_run_hand(runs, env))
                continue
            if not (REPO / path).is_file() and not Path(path).is_file():
                print(f"skip {path}: not found", file=sys.stderr)
                continue
            per_check: list[list[dict]] = [[] for _ in checks]
            for _ in range(runs):  # interleaved: run r of every period before run r + 1 of any
                for samples, e in zip(per_check, envs, strict=True):
                    bar.step(Path(path).stem)
                    samples += _spawn_workers(path, 1, e)
            for c, samples in zip(checks, per_check, strict=True):
                if not samples:
                    continue
                agg = {
                    "scenario": samples[0]["scenario"], "file": path, "runs": len(samples),
                    "kernels": samples[0]["kernels"],
                    "kernel_check": samples[0]["kernel_check"] if c is None else c,
                    "rtf_samples": [s["rtf"] for s in samples],
                }
                for key in ("wall_s", "sim_s", "rtf", "us_per_step", "floor_us_per_step", "loop_over_floor"):
                    agg[key] = _stats([s[key] for s in samples])
                agg["split_us"] = {
                    k: statistics.median([s["split_us"][k] for s in samples]) for k in samples[0]["split_us"]
                }
                results.append(agg)
    return results


def _spawn_workers(name: str, runs: int, env: dict[str, str]) -> list[dict]:
    """Run ``name`` (a scenario file or :data:`HAND_TRACK_TEST`) ``runs`` times, each in a fresh
    worker process; return the measurements (fewer if a worker fails: its stderr is printed)."""
    samples = []
    for _ in range(runs):
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--worker", name],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
        )
        if proc.returncode != 0:
            print(f"{name}: worker failed:\n{proc.stderr}", file=sys.stderr)
            break
        samples.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return samples


def guard_ratios(results: list[dict]) -> list[str]:
    """For scenarios measured at several kernel-guard periods: the median over runs of each period's
    real-time factor divided by that of period 0 (the unguarded run), one line each."""
    lines = []
    by_scenario: dict[str, dict[int, dict]] = {}
    for r in results:
        if "kernel_check" in r:
            by_scenario.setdefault(r["scenario"], {})[r["kernel_check"]] = r
    for name, rows in by_scenario.items():
        if 0 not in rows or len(rows) < 2:
            continue
        base = rows[0]["rtf_samples"]
        for c, r in sorted(rows.items()):
            if c == 0:
                continue
            ratios = [a / b for a, b in zip(r["rtf_samples"], base, strict=False)]
            lines.append(
                f"{name}: real-time factor with the guard every {c} steps / without: median "
                f"{statistics.median(ratios):.4f} (min {min(ratios):.4f}, max {max(ratios):.4f}, {len(ratios)} pairs)"
            )
    return lines


def _run_hand(runs: int, env: dict[str, str]) -> dict:
    samples = _spawn_workers(HAND_TRACK_TEST, runs, env)
    agg = {"scenario": HAND_TRACK_TEST, "file": None, "runs": len(samples), "hand": True}
    if samples:
        agg["status"] = "PASS" if all(s["status"] == "PASS" for s in samples) else "FAIL"
        for key in ("wall_s", "sim_s", "rtf", "us_per_step", "max_error_rad"):
            agg[key] = _stats([s[key] for s in samples])
    return agg


def _med_range(stats: tuple[float, float, float], fmt: str) -> str:
    """(median, min, max) as "median (min–max)"."""
    med, lo, hi = stats
    return f"{fmt.format(med)} ({fmt.format(lo)}–{fmt.format(hi)})"


def format_table(results: list[dict]) -> str:
    from dockbench.sim.kernels import describe

    head = (
        "| scenario | runs | wall s | sim s | real-time factor | µs/step | physics | dynamics | controller "
        "| telemetry | tool (hand) | other | floor µs/step | loop/floor | guard | kernels |"
    )
    lines = [head, "|" + "---|" * 16]
    hands = [r for r in results if r.get("hand")]
    for r in results:
        if r.get("hand"):
            continue

        def mm(key, fmt="{:.2f}", r=r):
            return _med_range(r[key], fmt)

        sp = r["split_us"]
        lines.append(
            f"| {r['scenario']} | {r['runs']} | {mm('wall_s')} | {r['sim_s'][0]:.2f} | {mm('rtf', '{:.1f}')}× "
            f"| {mm('us_per_step', '{:.1f}')} | {sp['physics']:.1f} | {sp['dynamics']:.1f} | {sp['controller']:.1f} "
            f"| {sp['telemetry']:.1f} | {sp['tool']:.1f} | {sp['other']:.1f} | {mm('floor_us_per_step', '{:.1f}')} "
            f"| {mm('loop_over_floor', '{:.2f}')} | {r.get('kernel_check', '')} | {describe(r['kernels'])} |"
        )
    for r in hands:
        if not r["runs"]:
            continue
        lines += [
            "",
            "| standalone hand bridge | runs | result | wall s | sim s | real-time factor | µs/step |",
            "|---|---|---|---|---|---|---|",
            f"| {r['scenario']} | {r['runs']} | {r['status']} | {_med_range(r['wall_s'], '{:.3f}')} "
            f"| {r['sim_s'][0]:.2f} | {_med_range(r['rtf'], '{:.1f}')}× | {_med_range(r['us_per_step'], '{:.1f}')} |",
        ]
    return "\n".join(lines)


def _commit() -> str:
    """The checkout's short commit id, ``unknown`` outside a git checkout."""
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO)
    return rev.stdout.strip() or "unknown"


def _report(header: str, table: str, json_path: str | None, payload: dict) -> int:
    """Print a result's header line and table; write ``payload`` as JSON to ``json_path`` when given."""
    print(header)
    print(table)
    if json_path:
        Path(json_path).write_text(json.dumps(payload, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description="benchmark the dockbench control loop")
    ap.add_argument("scenarios", nargs="*", help="scenario files (default: the standard list)")
    ap.add_argument("--runs", type=int, default=5, help="runs per scenario, each in a fresh process")
    ap.add_argument("--json", default=None, help="write the results as JSON to this file")
    ap.add_argument(
        "--kernels",
        choices=("auto", "compiled", "python"),
        default=None,
        help="DOCKBENCH_KERNELS for the runs: compiled C kernels or the Python reference (default: as set, else auto)",
    )
    ap.add_argument(
        "--kernel-check",
        default=None,
        metavar="N[,N...]",
        help="kernel guard period(s) in control steps (0 = off); several values are measured interleaved and "
        "compared with 0 (default: as set, else 5000)",
    )
    ap.add_argument("--live", default=None,
                    help=f"comma-separated observer modes to compare, interleaved: {', '.join(LIVE_MODES)}")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                    help="override a scenario key in every run (repeatable), as run_docking.py --set "
                    "(e.g. sim.cone=pyramidal to compare with a tree whose default cone was pyramidal)")
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions instead of timing: loop and floor per control step under valgrind's "
                    "callgrind (load-independent; guard off unless --kernel-check; one count per scenario)")
    ap.add_argument("--keep-callgrind", default=None, metavar="DIR",
                    help="with --instructions: keep the callgrind output files in DIR")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker-instructions", default=None, choices=CALLGRIND_MODES, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    checks: list[int | None] | None = None
    if args.kernel_check is not None:
        try:
            checks = [int(v) for v in args.kernel_check.split(",")]
        except ValueError:
            ap.error(f"--kernel-check: whole numbers ≥ 0 separated by commas, got {args.kernel_check!r}")
        if any(c < 0 for c in checks):
            ap.error(f"--kernel-check: whole numbers ≥ 0, got {args.kernel_check!r}")
    if args.sets:
        from dockbench.sim.errors import ScenarioError
        from dockbench.sim.overrides import parse_assignment

        for item in args.sets:
            try:
                parse_assignment(item)
            except ScenarioError as exc:
                ap.error(str(exc))
        os.environ["DOCKBENCH_BENCH_SETS"] = json.dumps(args.sets)  # the workers inherit it
    if args.worker_instructions:
        check = int(checks[0]) if checks else 0
        print(json.dumps(instructions_child(args.scenarios[0], args.worker_instructions, check)))
        return 0
    if args.instructions:
        if checks is not None and len(checks) > 1:
            ap.error("--instructions takes one --kernel-check period")
        env = child_env({**os.environ, **SINGLE_THREAD_ENV})
        if args.kernels is not None:
            env["DOCKBENCH_KERNELS"] = args.kernels
        check = checks[0] if checks else 0
        scenarios = args.scenarios or DEFAULT_SCENARIOS[:6]
        results = [measure_instructions(p, env, check, args.keep_callgrind) for p in scenarios]
        rev = _commit()
        sets = f", --set {' '.join(args.sets)}" if args.sets else ""
        return _report(f"dockbench bench --instructions — commit {rev}, callgrind, BLAS single-threaded, "
                       f"kernels {args.kernels or os.environ.get('DOCKBENCH_KERNELS', 'auto')}{sets}",
                       format_instructions_table(results), args.json, {"commit": rev, "instructions": results})
    if args.worker:
        live = os.environ.get("DOCKBENCH_BENCH_LIVE", "none")
        print(json.dumps(measure_hand_track_test() if args.worker == HAND_TRACK_TEST
                         else measure_once(args.worker, live)))
        return 0
    if args.live:
        modes = [m.strip() for m in args.live.split(",") if m.strip()]
        unknown = [m for m in modes if m not in LIVE_MODES]
        if unknown:
            print(f"error: unknown --live mode(s) {unknown}; known: {', '.join(LIVE_MODES)}", file=sys.stderr)
            return 1
        scen = args.scenarios or ["scenarios/iiwa14_docking.yaml"]
        results = run_live_bench(scen, args.runs, modes)
        rev = _commit()
        return _report(f"dockbench bench --live — commit {rev}, {args.runs} runs/mode interleaved, "
                       f"BLAS single-threaded, µs per control step of the unprofiled pass",
                       format_live_table(results), args.json, {"commit": rev, "live": results})
    scenarios = args.scenarios or [*DEFAULT_SCENARIOS, HAND_TRACK_TEST]
    results = run_bench(scenarios, args.runs, args.kernels, checks, progress=True)
    rev = _commit()
    table = "\n".join([format_table(results), *guard_ratios(results)])
    return _report(f"dockbench bench — commit {rev}, {args.runs} runs/scenario, BLAS single-threaded, "
                   f"median (min–max); kernels {args.kernels or os.environ.get('DOCKBENCH_KERNELS', 'auto')}"
                   + (f"; --set {' '.join(args.sets)}" if args.sets else ""),
                   table, args.json, {"commit": rev, "results": results})


if __name__ == "__main__":
    raise SystemExit(main())
