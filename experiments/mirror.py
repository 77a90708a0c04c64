"""Kinematic mirror CLI: show live joint states of the dual RM75 (or any URDF/MJCF) in MuJoCo.

A thin command line over :mod:`bridges.mirror`. The model is loaded directly from its URDF; each group's
``sensor_msgs/msg/JointState`` topic drives its joints by name; frames are validated whole; nothing is
displayed until every group has sent a valid frame; a silent group holds its last valid pose. Examples::

    python -m dockbench.experiments.mirror                                   # passive viewer, default config
    MUJOCO_GL=egl python -m dockbench.experiments.mirror --offscreen --duration 10 --snapshot mirror.png
    python -m dockbench.experiments.mock_joint_states --play &               # a source without a robot

Closing the viewer ends the display and this program only (publishers are not affected).
Exit codes: 0 display ended normally, 1 error (bad config/model, no GL, or --wait-timeout expired: the
message names the groups that never sent a valid frame).
"""

from __future__ import annotations

import os

if "MUJOCO_GL" not in os.environ and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    os.environ["MUJOCO_GL"] = "egl"  # headless offscreen rendering (read when mujoco is imported)

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import logging  # noqa: E402
from pathlib import Path  # noqa: E402

from dockbench.bridges.mirror import MirrorApp, load_mirror_config  # noqa: E402
from dockbench.bridges.ros2 import open_transport  # noqa: E402
from dockbench.sim.errors import DockbenchError, reports_errors  # noqa: E402

from dockbench.cli import ArgumentParser  # noqa: E402

log = logging.getLogger("dockbench.experiments.mirror")


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, default=None,
                   help="mirror YAML (default: assets/robots/dual_rm75/mirror.yaml)")
    p.add_argument("--backend", default="auto", help="transport: auto (rclpy, else cyclonedds), rclpy, "
                                                     "cyclonedds, inprocess")
    p.add_argument("--domain-id", type=int, default=None, help="ROS domain id (default: ROS_DOMAIN_ID or 0)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--offscreen", action="store_true", help="render offscreen (no window)")
    g.add_argument("--no-render", action="store_true", help="update the model only (no rendering)")
    p.add_argument("--render-rate-hz", type=float, default=None, help="override the config's render rate")
    p.add_argument("--duration", type=float, default=None, help="display for this many seconds, then exit")
    p.add_argument("--wait-timeout", type=float, default=None,
                   help="exit 1 if some group sent no valid frame within this many seconds")
    p.add_argument("--snapshot", type=Path, default=None, help="offscreen: write the last frame as PNG")
    p.add_argument("-v", "--verbose", action="store_true", help="log info messages")
    return p


def _write_png(pixels, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mpimg.imsave(str(path), pixels)
    except OSError as exc:
        raise DockbenchError(f"{path}: cannot write snapshot: {exc}") from None


@reports_errors
def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    config = load_mirror_config(args.config)
    if args.render_rate_hz is not None:
        if not 0 < args.render_rate_hz <= 1000:
            raise DockbenchError(f"--render-rate-hz must be in (0, 1000], got {args.render_rate_hz}")
        config = dataclasses.replace(config, render_rate_hz=args.render_rate_hz)
    if args.snapshot is not None and not args.offscreen:
        raise DockbenchError("--snapshot needs --offscreen")
    display = "offscreen" if args.offscreen else "none" if args.no_render else "viewer"
    with open_transport(args.backend, domain_id=args.domain_id) as transport:
        app = MirrorApp(config, transport)
        print(f"mirror over {transport.backend} (domain {transport.domain_id}): " + ", ".join(
            f"{g.name} <- {g.topic}" for g in config.groups) + f"; model {config.model}")
        try:
            report = app.run(display=display, duration=args.duration, wait_timeout=args.wait_timeout)
        finally:
            app.stop()
    for s in report.groups:
        rej = ", ".join(f"{k} {v}" for k, v in sorted(s.rejected.items())) or "none"
        print(f"  {s.name:<8} accepted {s.accepted}, rejected: {rej}")
    if not report.ready:
        missing = ", ".join(f"{g.name} ({g.topic})" for g in config.groups
                            if g.name in report.waiting_for)
        if report.ended_by == "wait_timeout":
            raise DockbenchError(f"no valid frame within {args.wait_timeout} s from: {missing}")
        print(f"ended ({report.ended_by}) while waiting for: {missing}")
        return 0
    print(f"displayed {report.frames} frames in {report.display_s:.2f} s = {report.fps:.1f} frames/s "
          f"({display}; target {config.render_rate_hz:g} Hz); ended by {report.ended_by}")
    if args.snapshot is not None and app.last_frame is not None:
        _write_png(app.last_frame, args.snapshot)
        print(f"snapshot written to {args.snapshot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
