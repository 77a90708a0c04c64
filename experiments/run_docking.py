"""Run one docking (or tracking) scenario and write its run folder.

    python experiments/run_docking.py --scenario scenarios/iiwa14_docking.yaml
    python experiments/run_docking.py --scenario scenarios/iiwa14_docking.yaml --viewer --speed 0.5
    python experiments/run_docking.py --scenario scenarios/iiwa14_docking.yaml --rerun live.rrd
    python experiments/run_docking.py --scenario scenarios/iiwa14_docking.yaml --ros2 --speed 1
    python experiments/run_docking.py --scenario scenarios/fr3_docking.yaml --set controller.k=800 \
        --set "target.belief_offset.position=[0.003, 0, 0]" --set uncertainty.sensing_delay=2

``--set path.to.key=value`` (repeatable) overrides one key before the scenario is validated, exactly like
the file's own keys (sim/overrides.py: YAML values, list indices as ``[i]`` or ``.i``). ``--controller`` and
``--planner`` change the block's type and keep the keys the new type also has (a note says which were dropped).

Watching a run (docs/live.md): ``--viewer`` opens MuJoCo's viewer paced to real time (``--speed``);
closing it ends the run, whose folder is still written. ``--rerun [TARGET]`` streams to Rerun (no
TARGET: spawn a viewer; ``*.rrd``: a file; ``rerun+http://…``: a running viewer). ``--ros2`` publishes
joint states, EE and reference poses and the F/T and truth wrenches on ROS 2 topics.

Exit codes: 0 = all gates pass, 2 = a gate fails, the run is unstable (sustained torque saturation or a
velocity runaway, telemetry/gates.py) or incomplete, 1 = error (the message is printed without a
traceback; a diverged run, a run whose metrics fail and a run that fills the disk still write what
they recorded), 130 / 143 / 129 = interrupted by Ctrl-C (SIGINT) / SIGTERM / SIGHUP (all take the same path: the
telemetry recorded so far is written to a complete run folder with status ``interrupted``; a signal
before the first step leaves nothing), 64 = command-line usage error (an unknown option, a missing
``--scenario``, ``--set controller.k 800``). ``dockbench run`` is this same program (dockbench/cli.py).
"""

from __future__ import annotations

if __name__ == "__main__":  # as a program: hold a Ctrl-C / SIGTERM from the first line until main() handles it
    import signal as _signal

    _EARLY_SIGNALS: list[int] = []
    for _s in (_signal.SIGINT, _signal.SIGTERM, *((_signal.SIGHUP,) if hasattr(_signal, "SIGHUP") else ())):
        if _s != getattr(_signal, "SIGHUP", None) or _signal.getsignal(_s) is not _signal.SIG_IGN:  # nohup: stays
            _signal.signal(_s, lambda signum, frame: _EARLY_SIGNALS.append(signum))
else:
    _EARLY_SIGNALS = []

import argparse
import sys
from pathlib import Path

from dockbench.sim import interrupts  # noqa: E402
from dockbench.sim.errors import DockbenchError, ScenarioError  # noqa: E402

from dockbench.cli import ArgumentParser  # noqa: E402


def _progress_bar(stream):
    state = {"last": -1}

    def cb(t: float, duration: float) -> None:
        pct = int(100 * t / duration) if duration > 0 else 100
        if pct != state["last"]:
            state["last"] = pct
            bar = "#" * (pct // 4)
            stream.write(f"\r  [{bar:<25}] {pct:3d}%  t = {t:6.2f} / {duration:.2f} s")
            stream.flush()

    return cb


def _kernel_note(meta: dict) -> str:
    """"  (compiled kernels)", "  (Python reference paths)" or the mix (sim/kernels.py), and what the kernel
    guard found when a kernel disagreed with its Python reference."""
    from dockbench.sim.kernels import describe

    paths = meta.get("kernels", {})
    if not paths:
        return ""
    text = describe(paths)
    note = {"compiled": "compiled kernels", "python": "Python reference paths"}.get(text, text)
    mismatches = meta.get("kernel_mismatch") or []
    if mismatches:
        where = ", ".join(f"{m['component']} at step {m['step']}" for m in mismatches)
        note += f"; KERNEL MISMATCH ({where}): the Python reference ran from there"
    return f"  ({note})"


def format_summary(result, scenario) -> str:
    """The end-of-run table: timing, key metrics, gate verdicts."""
    lines = []
    tm = result.timing
    robot = scenario.robot.type or Path(scenario.robot.model).name  # a catalogue name or the user's model file
    lines.append(
        f"scenario   {scenario.name}  ({robot}, planner {scenario.planner.type}, "
        f"controller {scenario.controller.type})"
    )
    lines.append(
        f"status     {result.status}   simulated {tm.get('sim_s', 0):.3f} s in {tm.get('wall_s', 0):.2f} s "
        f"wall  →  {tm.get('real_time_factor', 0):.1f}× real time{_kernel_note(result.meta)}"
    )
    if result.status == "interrupted" and result.message:
        lines.append(f"           {result.message}")
    from dockbench.telemetry.metrics import HEADLINE_METRICS, METRICS

    keys = (*HEADLINE_METRICS, "tracking.pos_peak", "tracking.rot_rms_deg", "safety.saturation_ratio")

    for k in keys:
        if k in result.metrics:
            lines.append(f"  {k:<36} {result.metrics[k]:>12.6g} {METRICS[k][0]}")
    if result.gates:
        lines.append("gates")
        for g in result.gates:
            bound = " ".join(
                x
                for x in (
                    f"min {g['min']:.6g}" if g["min"] is not None else "",
                    f"max {g['max']:.6g}" if g["max"] is not None else "",
                )
                if x
            )
            val = "n/a" if g["value"] is None else f"{g['value']:.6g}"
            lines.append(f"  {g['verdict']:<10} {g['metric']:<36} {val:>12}  ({bound}) {g['reason']}")
    if result.message:
        lines.append(f"message    {result.message}")
    lines.append(f"verdict    {result.verdict}")
    if result.run_dir:
        lines.append(f"run folder {result.run_dir}")
    return "\n".join(lines)


def _origin(key: str | None, sets: list[str]) -> str:
    """`` (the value comes from --set K=V)`` when an error's key path is one that ``--set`` gave."""
    if not key:
        return ""
    from dockbench.sim.overrides import format_path, parse_path

    for item in sets:
        path = item.partition("=")[0]
        try:
            p = format_path(parse_path(path))
        except ScenarioError:
            continue
        if key == p or key.startswith(p + ".") or key.startswith(p + "["):
            return f" (the value comes from --set {item})"
    return ""


def _parse_duration(text: str | None) -> float | None:
    """``--duration`` as seconds, validated like ``sim.duration`` (finite, in range)."""
    if text is None:
        return None
    from dockbench.sim.config import check_value
    from dockbench.sim.scenario import SimConfig

    try:
        value = float(text)
    except ValueError:
        raise DockbenchError(f"--duration: expected a number of seconds, got {text!r}") from None
    return check_value(SimConfig, "duration", value, key="--duration")


def _check_numbers(args: argparse.Namespace) -> None:
    """The CLI's other numbers are finite and bounded, like the scenario keys (the lower bounds are
    :func:`experiments.live_cli.check_args`'s and the guard's own)."""
    import math

    if args.kernel_check is not None and args.kernel_check < 0:
        raise ScenarioError(f"must be ≥ 0 (0 turns the guard off), got {args.kernel_check}", key="--kernel-check")
    if args.kernel_check is not None and args.kernel_check > 10**9:
        raise ScenarioError(f"must be ≤ 10^9 control steps, got {args.kernel_check}", key="--kernel-check")
    for key, value in (("--speed", args.speed), ("--live-rate-hz", args.live_rate_hz)):
        if value is not None and value > 0 and not (math.isfinite(value) and value <= 1e6):
            raise ScenarioError(f"must be a finite number ≤ 1e6, got {value}", key=key)


def main(argv: list[str] | None = None, *, exiting: bool = False) -> int:
    """The CLI (see the module docstring for the exit codes). SIGTERM is handled like Ctrl-C from the
    first line on; with ``exiting`` (the program, :func:`cli`) also after it returns, until the process
    ends (a signal then is ignored: the run folder is complete)."""
    with interrupts.guard(restore=not exiting):
        try:
            if _EARLY_SIGNALS:  # (the program) a signal while Python was still importing this module
                raise interrupts.Interrupted(_EARLY_SIGNALS[0])
            return _main(argv)
        except KeyboardInterrupt as exc:
            sig = interrupts.Interrupted(interrupts.signum_of(exc))
            print(f"interrupted ({sig.name}) before the first control step: nothing was recorded", file=sys.stderr)
            return sig.exit_code


def _main(argv: list[str] | None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", required=True,
                    help="scenario YAML file, or the name of a shipped one (iiwa14_docking, orbit/iiwa14_orbit_…)")
    ap.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_FILE",
                    help="import a module (my_pkg.my_controller) or a .py file before reading the scenario, so "
                    "that the types it registers can be named (repeatable; docs/extending.md)")
    ap.add_argument("--allow-plugins", action="store_true",
                    help="import the plugins the scenario (or --set) names: a plugin is Python code, run with "
                    "your rights; without this (or DOCKBENCH_ALLOW_PLUGINS=1) such a scenario is refused "
                    "(docs/extending.md)")
    ap.add_argument("--out", default="runs", help="parent folder of run folders (default: runs)")
    ap.add_argument("--duration", default=None, help="override the run length [s] (same bounds as sim.duration)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                    help="override a scenario key, e.g. controller.k=500 or target.pose.position[0]=0.56 (repeatable; "
                    "YAML values; validated like the file)")
    ap.add_argument("--controller", default=None,
                    help="override controller.type (keys the new type also has are kept; a note lists the dropped)")
    ap.add_argument("--planner", default=None,
                    help="override planner.type (keys the new type also has are kept; a note lists the dropped)")
    ap.add_argument(
        "--kernel-check",
        type=int,
        default=None,
        metavar="N",
        help="check each compiled kernel against its Python reference on the first step and every N steps "
        "(0 = off; default $DOCKBENCH_KERNEL_CHECK or 5000; docs/architecture.md, 'Compiled kernels')",
    )
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--plot", action="store_true", help="write figures into the run folder at the end")
    ap.add_argument("--video", default=None, help="render a video of the run to this .mp4/.gif path")
    live = ap.add_argument_group("watching the run (docs/live.md)")
    live.add_argument("--viewer", action="store_true",
                      help="MuJoCo viewer (needs a display); closing it ends the run, its folder is written")
    live.add_argument("--speed", type=float, default=None,
                      help="pace the run to this × real time (default 1 with --viewer, unpaced otherwise)")
    live.add_argument("--rerun", nargs="?", const="spawn", default=None, metavar="TARGET",
                      help="stream to Rerun: no TARGET = spawn a viewer, FILE.rrd, or a rerun+http:// URL")
    live.add_argument("--ros2", action="store_true",
                      help="publish joint states, EE/reference poses and F/T/truth wrenches on ROS 2 topics")
    live.add_argument("--ros2-backend", default="auto", help="--ros2 transport: auto, rclpy, cyclonedds, inprocess")
    live.add_argument("--ros2-prefix", default="/dockbench", help="--ros2 topic prefix (default /dockbench)")
    live.add_argument("--live-rate-hz", type=float, default=50.0,
                      help="--rerun/--ros2 samples per simulated second, and at most per wall second (default 50)")
    args = ap.parse_args(argv)

    with interrupts.deferred():  # a signal inside an extension module's import would become an ImportError
        from dockbench.sim.loop import run
        from dockbench.sim.plugins import load_plugins
        from dockbench.sim.scenario import load_scenario_notes, resolve_scenario

    progress = None
    try:
        duration = _parse_duration(args.duration)
        overrides = list(args.sets)
        if args.controller:
            overrides.insert(0, f"controller.type={args.controller}")
        if args.planner:
            overrides.insert(0, f"planner.type={args.planner}")
        cli_plugins = load_plugins(args.plugin, key="--plugin", allow=True)  # named on the command line: asked
        try:
            scenario, notes = load_scenario_notes(resolve_scenario(args.scenario), overrides or None,
                                                  allow_plugins=True if args.allow_plugins else None)
        except ScenarioError as exc:
            raise ScenarioError(exc.detail + _origin(exc.key, args.sets), file=exc.file, key=exc.key) from None
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        if cli_plugins:  # recorded with the scenario's own (meta.json), so that the run can be repeated
            scenario = scenario.replace(plugins=(*cli_plugins, *scenario.plugins))
        progress = None if args.no_progress or not sys.stderr.isatty() else _progress_bar(sys.stderr)
        from dockbench.experiments.live_cli import LiveSession, check_args

        _check_numbers(args)
        check_args(args)
        with LiveSession(args, scenario) as live:
            result = run(scenario, out_root=args.out, duration=duration, progress=progress,
                         kernel_check=args.kernel_check, step_observer=live.observer)
            _end_progress(progress)
            progress = None
            print(format_summary(result, scenario))
            live.report()
            if result.signal is None:
                try:
                    interrupts.arm()  # a Ctrl-C while the viewer is held ends the hold; the folder is complete
                    live.hold()
                except KeyboardInterrupt as exc:
                    result.signal = interrupts.signum_of(exc)
    except DockbenchError as exc:  # incl. SimulationDiverged, RunFolderError, InternalError: folder written
        _end_progress(progress)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if result.signal is not None:
        sig = interrupts.Interrupted(result.signal)
        if result.status != "interrupted":
            print(f"{sig.name} received after the run: its folder is complete", file=sys.stderr)
        else:
            print(f"interrupted: {result.message}", file=sys.stderr)
        return sig.exit_code
    try:
        interrupts.arm()  # plotting and the video may be interrupted; the run folder is complete
        if args.plot and result.run_dir is not None:
            from dockbench.experiments.plot_telemetry import plot_run

            files = plot_run(result.run_dir)
            print(f"figures    {len(files)} written to {result.run_dir}")
        if args.video and result.run_dir is not None:
            from dockbench.telemetry.video import render_run_video

            path = render_run_video(result.run_dir, args.video)
            print(f"video      {path}")
    except KeyboardInterrupt as exc:
        sig = interrupts.Interrupted(interrupts.signum_of(exc))
        print(f"interrupted ({sig.name}) while plotting; the run folder {result.run_dir} is complete", file=sys.stderr)
        return sig.exit_code
    except DockbenchError as exc:
        print(f"error: {exc} (the run folder {result.run_dir} is complete)", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a plotting bug must not hide that the run itself is saved
        print(f"error: plotting failed ({type(exc).__name__}: {exc}); the run folder {result.run_dir} is complete",
              file=sys.stderr)
        return 1
    return 0 if result.verdict == "PASS" else 2


def _end_progress(progress) -> None:
    if progress is not None:
        sys.stderr.write("\n")


def cli(argv: list[str] | None = None) -> int:
    """The ``dockbench-run`` program and ``dockbench run``: :func:`main` on ``argv`` (default ``sys.argv``),
    signals handled until the process exits."""
    try:
        return main(argv, exiting=True)
    except KeyboardInterrupt:  # a Ctrl-C before main() installed its handler
        sys.stderr.write("interrupted before the first control step: nothing was recorded\n")
        return 130


if __name__ == "__main__":
    raise SystemExit(cli())
