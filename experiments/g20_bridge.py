"""G20 hand bridge CLI: drive the kinematic G20 LEFT hand, self-test it, replay and record streams.

A thin command line over :mod:`hand.bridge`. Examples::

    python -m dockbench.experiments.g20_bridge --track-test  # track test (docs/theory/g20_hand.md §5), exit 0/1
    python -m dockbench.experiments.g20_bridge --track-test --pd-drive
    python -m dockbench.experiments.g20_bridge --preset half_fist --headless --max-steps 500 --record out.jsonl
    python -m dockbench.experiments.g20_bridge --commands cmds.jsonl --record states.jsonl --headless
    MUJOCO_GL=egl python -m dockbench.experiments.g20_bridge --preset fist --max-steps 800 --snapshot fist.png
    python -m dockbench.experiments.g20_bridge --ros2 --slew-rad 0.005 --phys-per-render 4 --colliders palm+distal \
        --on-nonfinite open --sim-state-topic /sim/g20/state      # the Isaac variant's options
    python -m dockbench.experiments.g20_bridge --engine physx --track-test            # the same on PhysX (ovphysx)
    python -m dockbench.experiments.g20_bridge --engine physx --track-test --pd-drive

The options of both seed bridges are accepted (docs/hand.md puts them side by side): the MuJoCo
seed's ``--slew-rad-s`` [rad/s] and the Isaac variant's ``--slew-rad`` [rad per physics step],
``--phys-per-render`` (viewer frames), ``--colliders`` (which links self-collide), ``--on-nonfinite
open`` (a NaN/Inf command resets the hand to open). ``--engine physx`` runs the hand on PhysX
(:mod:`hand.physx_backend`, NVIDIA's ovphysx on the CPU; the ``physx`` extra): dt 1/120 s,
``--slew-rad`` per physics step (default 0 = instant), selective colliders (palm + distal links),
``--no-self-collision``, ``--hand-gravity`` (PD mode), state topic ``/sim/isaac/g20/left/joint_state``.

``--commands`` replays JSON lines ``{"t": s, "sdk": [20 values]}`` or ``{"t": s, "joints": {name: rad}}``
on the bridge clock; ``--record`` writes one JSON line per published joint state
(``{"t", "step", "name", "position", "velocity"}``). With a display and without ``--headless`` a MuJoCo
passive viewer opens with the comparison camera (look-at (0.04, -0.04, 0.12) m in the hand frame,
distance 0.50 m, elevation -12°, azimuth 180°).

Exit codes: 0 success / PASS, 1 error or FAIL (the message, not a traceback, is printed).
"""

from __future__ import annotations

import os

if "MUJOCO_GL" not in os.environ and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    os.environ["MUJOCO_GL"] = "egl"  # headless offscreen rendering (read when mujoco is imported)

import argparse  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from dockbench.bridges.g20_ros2 import (  # noqa: E402
    DEFAULT_CMD_TOPIC,
    DEFAULT_ISAAC_STATE_TOPIC,
    DEFAULT_LEGACY_TOPIC,
    DEFAULT_NOMINAL_TOPIC,
    DEFAULT_STATE_TOPIC,
    G20Mode,
    run_g20_ros2,
)
from dockbench.bridges.ros2 import open_transport  # noqa: E402
from dockbench.hand.bridge import (  # noqa: E402
    ROOT_BODY,
    BridgeConfig,
    DriveMode,
    HandBridge,
    parse_command_stream,
    run_track_test,
    state_to_json,
)
from dockbench.hand.spec import load_spec  # noqa: E402
from dockbench.sim.errors import DockbenchError  # noqa: E402

from dockbench.cli import ArgumentParser  # noqa: E402

CAMERA_LOOKAT_IN_HAND = (0.04, -0.04, 0.12)
"""Comparison camera look-at point in the hand frame (g20_root) [m]."""
CAMERA_DISTANCE = 0.50
"""Comparison camera distance [m]."""
CAMERA_ELEVATION_DEG = -12.0
"""Comparison camera elevation [deg]."""
CAMERA_AZIMUTH_DEG = 180.0
"""Comparison camera azimuth [deg]."""

DEFAULT_PHYS_PER_RENDER = 16
"""Viewer: physics (bridge) steps per rendered frame; 16 × 1 ms ≈ 60 Hz."""

COLLIDER_GROUPS: tuple[str, ...] = ("palm", "metacarpals", "proximal", "middle", "distal")
"""Link groups ``--colliders`` can name: ``palm`` is the palm's collision geom, the others the
``<finger>_<group>`` collision geoms of every finger (the thumb included)."""

DEFAULT_HEADLESS_STEPS = 1000
"""Steps of a headless run without --commands or --max-steps."""
REPLAY_TAIL_S = 1.0
"""A replay runs this long past the last command's time [s] (unless --max-steps says otherwise)."""

log = logging.getLogger("dockbench.experiments.g20_bridge")


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--track-test", action="store_true", help="track test (docs/theory/g20_hand.md §5): PASS/FAIL")
    p.add_argument("--engine", choices=("mujoco", "physx"), default="mujoco",
                   help="physics engine: mujoco (default) or physx (ovphysx on the CPU, the physx extra; "
                        "the design's Isaac bridge)")
    p.add_argument("--pd-drive", action="store_true", help="PD-drive mode (position actuators + mj_step)")
    p.add_argument("--no-self-collision", action="store_true", help="--engine physx: articulation self-collision off")
    p.add_argument("--hand-gravity", action="store_true",
                   help="--engine physx: gravity on the hand's links (matters in PD mode only)")
    p.add_argument("--limit-margin", type=float, default=None,
                   help="--engine physx: keep joints this far inside their ranges [rad]; default 0.05 (the "
                        "design's), 0 = the model range like the MuJoCo bridge")
    p.add_argument("--no-collision-project", action="store_true", help="kinematic mode without projection")
    slew = p.add_mutually_exclusive_group()
    slew.add_argument("--slew-rad-s", type=float, default=None, help="slew limit [rad/s] (0 = jump); default 5")
    slew.add_argument("--slew-rad", type=float, default=None,
                      help="slew limit [rad per physics step] (Isaac variant); = --slew-rad-s × --dt")
    p.add_argument("--phys-per-render", type=int, default=DEFAULT_PHYS_PER_RENDER,
                   help=f"viewer: physics steps per rendered frame (default {DEFAULT_PHYS_PER_RENDER}, "
                        f"about 60 Hz at dt = 1 ms)")
    p.add_argument("--colliders", default="all",
                   help="self-collision geoms: all, none, or links joined by '+' from "
                        f"{', '.join(COLLIDER_GROUPS)} (e.g. palm+distal, the Isaac variant's preset)")
    p.add_argument("--on-nonfinite", choices=("reject", "open"), default="reject",
                   help="a command with NaN/Inf: reject it (default) or reset the goal to open (Isaac variant)")
    p.add_argument(
        "--dt", type=float, default=None,
        help="control period = model timestep [s]; default 0.001 (MuJoCo); PhysX runs at 1/120 s only"
    )
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many bridge steps")
    p.add_argument("--headless", action="store_true", help="no viewer even if a display exists")
    p.add_argument("--preset", default=None, help="command this SDK preset at start (open, half_fist, fist)")
    p.add_argument("--commands", type=Path, default=None, help="replay a JSON-lines command stream")
    p.add_argument("--record", type=Path, default=None, help="write the joint-state stream (JSON lines)")
    p.add_argument("--state-rate-hz", type=float, default=100.0, help="joint-state readout rate [Hz]")
    p.add_argument("--snapshot", type=Path, default=None, help="render the final frame offscreen to a PNG")
    p.add_argument("--spec", type=Path, default=None, help="hand spec YAML (default: packaged G20 left)")
    p.add_argument("-v", "--verbose", action="store_true", help="log every refused/clipped command")
    ros = p.add_argument_group("ROS 2 topics (docs/ros2.md)")
    ros.add_argument("--ros2", action="store_true",
                     help="take commands from a ROS 2 topic and publish the joint state on one")
    mode = ros.add_mutually_exclusive_group()
    mode.add_argument("--plan-nominal", action="store_true",
                      help="--ros2: radians by joint name on --nominal-topic instead of SDK bytes")
    mode.add_argument("--legacy-sdk", action="store_true",
                      help=f"--ros2: SDK bytes on the vendor topic ({DEFAULT_LEGACY_TOPIC})")
    ros.add_argument("--cmd-topic", default=None,
                     help=f"--ros2: SDK command topic (default {DEFAULT_CMD_TOPIC}; with --legacy-sdk "
                          f"{DEFAULT_LEGACY_TOPIC})")
    ros.add_argument("--nominal-topic", default=None,
                     help=f"--ros2 --plan-nominal: command topic (default {DEFAULT_NOMINAL_TOPIC})")
    ros.add_argument("--sim-state-topic", default=None,
                     help=f"--ros2: joint-state topic (default {DEFAULT_STATE_TOPIC}; --engine physx: "
                          f"{DEFAULT_ISAAC_STATE_TOPIC})")
    ros.add_argument("--ros2-backend", default="auto",
                     help="--ros2: transport auto (rclpy, else cyclonedds), rclpy, cyclonedds, inprocess")
    ros.add_argument("--ros2-rate-hz", type=float, default=50.0, help="--ros2: state publication rate [Hz]")
    return p


def select_colliders(model: mujoco.MjModel, preset: str) -> list[str]:
    """Keep only the hand's collision geoms (``*_col``) of the groups in ``preset`` colliding (contype
    and conaffinity 1), switch the rest off (0); returns the names kept.

    ``preset``: ``all`` (every collision geom, the model as shipped), ``none``, or groups of
    :data:`COLLIDER_GROUPS` joined by ``+`` (``palm+distal``: the palm and the five distal links).

    Raises:
        DockbenchError: an unknown group (the message lists the known ones).
    """
    text = preset.strip().lower()
    if text == "all":
        groups = set(COLLIDER_GROUPS)
    elif text == "none":
        groups = set()
    else:
        groups = {g.strip() for g in text.split("+") if g.strip()}
        unknown = sorted(groups - set(COLLIDER_GROUPS))
        if unknown or not groups:
            raise DockbenchError(f"--colliders {preset!r}: unknown group(s) {unknown or '(none given)'}; "
                                 f"known: all, none, or {'+'.join(COLLIDER_GROUPS)} (any subset joined by '+')")
    kept = []
    for g in range(model.ngeom):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or ""
        if not name.endswith("_col"):
            continue
        stem = name[: -len("_col")]
        group = "palm" if stem.endswith("palm") else stem.rsplit("_", 1)[-1]
        on = group in groups
        model.geom_contype[g] = model.geom_conaffinity[g] = 1 if on else 0
        if on:
            kept.append(name)
    return kept


def slew_rate(args: argparse.Namespace) -> float:
    """The slew limit [rad/s] from ``--slew-rad-s`` or ``--slew-rad`` (per physics step of ``--dt``)."""
    if args.slew_rad is not None:
        if not (math.isfinite(args.slew_rad) and args.slew_rad >= 0):
            raise DockbenchError(f"--slew-rad must be >= 0 rad per step, got {args.slew_rad}")
        return args.slew_rad / args.dt
    return 5.0 if args.slew_rad_s is None else args.slew_rad_s


def comparison_camera(model: mujoco.MjModel, data: mujoco.MjData, cam: mujoco.MjvCamera) -> None:
    """Point ``cam`` like the comparison camera; the look-at point is given in the hand frame."""
    root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, ROOT_BODY)
    p_hand = np.asarray(CAMERA_LOOKAT_IN_HAND)
    if root >= 0:
        p_world = data.xpos[root] + data.xmat[root].reshape(3, 3) @ p_hand
    else:
        p_world = p_hand
    cam.type = mujoco.mjtCamera.mjCAMERA_FREE
    cam.lookat[:] = p_world
    cam.distance = CAMERA_DISTANCE
    cam.elevation = CAMERA_ELEVATION_DEG
    cam.azimuth = CAMERA_AZIMUTH_DEG


def render_snapshot(bridge: HandBridge, path: Path) -> None:
    """Render the current frame offscreen with the comparison camera and write a PNG.

    Raises:
        DockbenchError: rendering is unavailable (no OpenGL/EGL/OSMesa) or the file cannot be written.
    """
    m, d = bridge.model, bridge.data
    m.vis.headlight.ambient[:] = 0.35  # the model file carries no lights (it gets attached to arms)
    m.vis.headlight.diffuse[:] = 0.75
    try:
        renderer = mujoco.Renderer(m, height=480, width=640)
    except Exception as exc:  # noqa: BLE001 - GL back-ends raise assorted types
        raise DockbenchError(
            f"offscreen rendering unavailable ({type(exc).__name__}: {exc}); set MUJOCO_GL=egl or "
            f"MUJOCO_GL=osmesa (current: {os.environ.get('MUJOCO_GL', 'unset')})"
        ) from None
    try:
        cam = mujoco.MjvCamera()
        comparison_camera(m, d, cam)
        renderer.update_scene(d, cam)
        pixels = renderer.render()
    finally:
        renderer.close()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mpimg.imsave(str(path), pixels)
    except OSError as exc:
        raise DockbenchError(f"{path}: cannot write snapshot: {exc}") from None


def _has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def build_bridge(args: argparse.Namespace) -> HandBridge:
    """The bridge the options ask for: MuJoCo (default) or PhysX (``--engine physx``)."""
    mode = DriveMode.PD if args.pd_drive else DriveMode.KINEMATIC
    spec = load_spec(args.spec)
    if args.engine == "physx":
        from dockbench.hand import physx_backend as px

        wrong = [f for f, v in (("--no-collision-project", args.no_collision_project),
                                ("--colliders", args.colliders != "all")) if v]
        if wrong:
            raise DockbenchError(f"{', '.join(wrong)}: MuJoCo engine only (PhysX has no collision projection "
                                 f"and collides the palm and the distal links only)")
        if args.dt is not None and abs(args.dt - px.PHYSX_DT) > 1e-12:
            raise DockbenchError(f"--dt {args.dt}: the PhysX bridge runs at dt = 1/120 s only")
        args.dt = px.PHYSX_DT
        slew_rad = args.slew_rad if args.slew_rad is not None else (
            0.0 if args.slew_rad_s is None else args.slew_rad_s * px.PHYSX_DT)
        config = px.config_for(mode, slew_rad, args.state_rate_hz)
        margin = px.LIMIT_MARGIN if args.limit_margin is None else args.limit_margin
        options = px.PhysXOptions(self_collision=not args.no_self_collision, hand_gravity=args.hand_gravity,
                                  limit_margin=margin)
        return px.PhysXHandBridge.create(config, spec, options)
    physx_only = [f for f, v in (("--no-self-collision", args.no_self_collision),
                                 ("--hand-gravity", args.hand_gravity),
                                 ("--limit-margin", args.limit_margin is not None)) if v]
    if physx_only:
        raise DockbenchError(f"{', '.join(physx_only)}: only with --engine physx")
    if args.dt is None:
        args.dt = 0.001
    config = BridgeConfig(
        mode=mode,
        slew_rad_s=slew_rate(args),
        collision_project=not args.no_collision_project,
        state_rate_hz=args.state_rate_hz,
    )
    bridge = HandBridge.standalone(config, spec, timestep=args.dt)
    kept = select_colliders(bridge.model, args.colliders)
    if args.colliders != "all":
        log.info("self-collision geoms (%s): %s", args.colliders, ", ".join(kept) or "none")
    return bridge


def run(args: argparse.Namespace) -> int:
    if args.phys_per_render < 1:
        raise DockbenchError(f"--phys-per-render must be >= 1, got {args.phys_per_render}")
    try:
        record = open(args.record, "w", encoding="utf-8") if args.record else None  # noqa: SIM115
    except OSError as exc:
        raise DockbenchError(f"{args.record}: cannot write the state record: {exc}") from None
    try:
        bridge = build_bridge(args)
    except BaseException:
        if record is not None:
            record.close()
        raise
    try:
        if record is not None:
            bridge.on_state = lambda s: record.write(state_to_json(s) + "\n")
        if args.track_test:
            res = run_track_test(bridge)
            verdict = "PASS" if res.passed else "FAIL"
            print(
                f"{verdict}: track test ({res.mode}), max |q - q_nominal| over active joints at step "
                f"{res.check_step} = {res.max_error:.5f} rad (tolerance {res.tolerance} rad); "
                f"max |q - goal| = {res.goal_error:.5f} rad"
            )
            rc = 0 if res.passed else 1
        elif args.ros2:
            rc = _drive_ros2(bridge, args)
        else:
            rc = _drive(bridge, args)
        if args.snapshot is not None:
            render_snapshot(bridge, args.snapshot)
            print(f"snapshot written to {args.snapshot}")
        return rc
    finally:
        if record is not None:
            record.close()
        if hasattr(bridge, "close"):
            bridge.close()


def _drive(bridge: HandBridge, args: argparse.Namespace) -> int:
    bridge.reset("open")
    if args.preset is not None:
        res = bridge.command_preset(args.preset)
        if not res.accepted:
            raise DockbenchError(res.reason)
    commands = []
    if args.commands is not None:
        try:
            with open(args.commands, encoding="utf-8") as fh:
                commands, errors = parse_command_stream(fh, str(args.commands))
        except OSError as exc:
            raise DockbenchError(f"{args.commands}: cannot read command stream: {exc}") from None
        for e in errors:
            log.warning("skipped: %s", e)
    max_steps = args.max_steps
    if max_steps is None and commands:
        max_steps = int(math.ceil((max(c.time for c in commands) + REPLAY_TAIL_S) / bridge.dt))
    use_viewer = not args.headless and _has_display()
    if max_steps is None and not use_viewer:
        max_steps = DEFAULT_HEADLESS_STEPS
    viewer = None
    if use_viewer:
        try:
            import mujoco.viewer

            viewer = mujoco.viewer.launch_passive(bridge.model, bridge.data)
            with viewer.lock():
                comparison_camera(bridge.model, bridge.data, viewer.cam)
        except Exception as exc:  # noqa: BLE001 - no usable display: run headless
            log.warning("viewer unavailable (%s); running headless", exc)
            viewer = None
            max_steps = max_steps or DEFAULT_HEADLESS_STEPS
    nxt, accepted, refused, reset_open = 0, 0, 0, 0
    worst = math.inf
    step = 0
    t0 = time.perf_counter()
    try:
        while max_steps is None or step < max_steps:
            while nxt < len(commands) and commands[nxt].time <= bridge.time + 1e-12:
                res = bridge.command(commands[nxt].command)
                if not res.accepted and args.on_nonfinite == "open" and has_nonfinite(commands[nxt].command):
                    res = bridge.command_preset("open")
                    reset_open += 1
                accepted += res.accepted
                refused += not res.accepted
                nxt += 1
            if viewer is not None:
                with viewer.lock():
                    r = bridge.step()
                if not viewer.is_running():
                    break
                if step % args.phys_per_render == 0:
                    viewer.sync()
                    lag = bridge.time - (time.perf_counter() - t0)
                    if lag > 0:
                        time.sleep(lag)
            else:
                r = bridge.step()
            worst = min(worst, r.min_distance)
            step += 1
    finally:
        if viewer is not None:
            viewer.close()
    snap = bridge.snapshot()
    print(
        f"{step} steps ({bridge.time:.3f} s, {bridge.config.mode.value}); commands accepted {accepted}, "
        f"refused {refused}" + (f" ({reset_open} NaN/Inf commands reset to open)" if reset_open else "")
        + f"; tracking error {bridge.tracking_error:.4f} rad; "
        + (f"deepest contact {worst * 1e3:.3f} mm; " if math.isfinite(worst) else "no contact; ")
        + "final applied pose [rad]: "
        + ", ".join(f"{n}={v:.3f}" for n, v in zip(bridge.joint_names, snap.applied, strict=True))
    )
    return 0


def has_nonfinite(cmd: object) -> bool:
    """True when an SDK list or a ``{joint: rad}`` command holds a NaN or an infinity."""
    values = cmd.values() if isinstance(cmd, dict) else cmd if isinstance(cmd, (list, tuple)) else ()
    for v in values:
        try:
            if not math.isfinite(float(v)):
                return True
        except (TypeError, ValueError):
            continue
    return False


def _drive_ros2(bridge: HandBridge, args: argparse.Namespace) -> int:
    """Commands from a ROS 2 topic, joint state to one (bridges.g20_ros2), until Ctrl-C or --max-steps."""
    if args.commands is not None:
        raise DockbenchError("--commands and --ros2 exclude each other (with --ros2 the topic is the source)")
    bridge.reset("open")
    if args.preset is not None:
        res = bridge.command_preset(args.preset)
        if not res.accepted:
            raise DockbenchError(res.reason)
    mode = G20Mode.NOMINAL if args.plan_nominal else G20Mode.LEGACY_SDK if args.legacy_sdk else G20Mode.SDK
    viewer = None
    if not args.headless and _has_display():
        try:
            import mujoco.viewer

            viewer = mujoco.viewer.launch_passive(bridge.model, bridge.data)
            with viewer.lock():
                comparison_camera(bridge.model, bridge.data, viewer.cam)
        except Exception as exc:  # noqa: BLE001 - no usable display: run headless
            log.warning("viewer unavailable (%s); running headless", exc)
            viewer = None
    steps = 0

    def on_step() -> bool:  # stepping thread; False ends the run (viewer closed)
        nonlocal steps
        if viewer is None:
            return True
        if not viewer.is_running():
            return False
        steps += 1
        if steps % args.phys_per_render == 0:
            viewer.sync()
        return True

    with open_transport(args.ros2_backend) as transport:
        print(f"G20 bridge on ROS 2 over {transport.backend} (domain {transport.domain_id}), "
              f"mode {mode.value}; Ctrl-C to stop")
        try:
            stats = run_g20_ros2(
                bridge, transport, mode=mode, cmd_topic=args.cmd_topic, nominal_topic=args.nominal_topic,
                sim_state_topic=args.sim_state_topic or _default_state_topic(args), rate_hz=args.ros2_rate_hz,
                max_steps=args.max_steps,
                on_step=on_step, nonfinite=args.on_nonfinite,
            )
        finally:
            if viewer is not None:
                viewer.close()
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(stats.rejected_by_reason.items()))
    print(f"{stats.steps} steps ({stats.late_steps} late); {stats.command_topic}: {stats.received} received, "
          f"{stats.accepted} accepted, {stats.rejected} rejected{f' ({reasons})' if reasons else ''}; "
          f"{stats.states_published} states published on {stats.state_topic}")
    return 0


def _default_state_topic(args: argparse.Namespace) -> str:
    """The engine's joint-state topic: MuJoCo's, or the Isaac bridge's for ``--engine physx``."""
    return DEFAULT_ISAAC_STATE_TOPIC if args.engine == "physx" else DEFAULT_STATE_TOPIC


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit code (0 ok/PASS, 1 error/FAIL)."""
    args = build_parser().parse_args(argv)
    ros_only = [f for f, v in (("--plan-nominal", args.plan_nominal), ("--legacy-sdk", args.legacy_sdk),
                               ("--cmd-topic", args.cmd_topic), ("--nominal-topic", args.nominal_topic),
                               ("--sim-state-topic", args.sim_state_topic)) if v]
    if ros_only and not args.ros2:
        print(f"error: {', '.join(ros_only)}: only valid with --ros2", file=sys.stderr)
        return 1
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return run(args)
    except DockbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
