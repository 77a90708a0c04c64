"""The ``--viewer`` / ``--speed`` / ``--rerun`` / ``--ros2`` options of ``experiments/run_docking.py``:
builds the step observers of :mod:`telemetry.live` and :mod:`telemetry.viewer` from the parsed
arguments, opens and closes what they need (the viewer window, the ROS 2 transport), and prints what
they did."""

from __future__ import annotations

import argparse
from typing import Any

from dockbench.sim.errors import DockbenchError

PACE_CHECK_HZ = 100.0
"""--speed without --viewer: pacing checks per wall-clock second."""


class LiveSession:
    """Context manager: ``observer`` is None when no live option was given (the loop then runs as it
    always does)."""

    def __init__(self, args: argparse.Namespace, scenario: Any, *, viewer_launch: Any = None) -> None:
        from dockbench.telemetry.live import MailboxStream, Observers, Pacer, RerunSink, Ros2Sink

        self.members: list[Any] = []
        self.streams: dict[str, MailboxStream] = {}
        self.viewer = None
        self.transport = None
        self.pacer = None
        speed = getattr(args, "speed", None)
        rate = float(getattr(args, "live_rate_hz", 50.0))
        if getattr(args, "viewer", False):
            from dockbench.telemetry.viewer import RunViewer

            self.viewer = RunViewer(speed=1.0 if speed is None else speed, launch=viewer_launch)
            self.members.append(self.viewer)
        elif speed is not None:
            self.pacer = Pacer(speed, check_hz=PACE_CHECK_HZ)
            self.members.append(self.pacer)
        target = getattr(args, "rerun", None)
        if target is not None:
            to_file = str(target).endswith(".rrd")
            sink = RerunSink(None if target == "spawn" else target)
            # a file records every sample (the loop waits for the writer); a viewer gets the newest
            self.streams["rerun"] = MailboxStream(sink, rate_hz=rate, policy="all" if to_file else "latest",
                                                  max_rate_hz=None if to_file else rate, name="dockbench-rerun")
        if getattr(args, "ros2", False):
            from dockbench.bridges.ros2 import open_transport

            self.transport = open_transport(getattr(args, "ros2_backend", "auto"))
            sink = Ros2Sink(self.transport, prefix=getattr(args, "ros2_prefix", None), stamp="wall")
            self.streams["ros2"] = MailboxStream(sink, rate_hz=rate, policy="latest", max_rate_hz=rate,
                                                 name="dockbench-ros2")
            self.ros2_sink = sink
        self.members.extend(self.streams.values())
        self.observer = Observers(self.members) if self.members else None

    def __enter__(self) -> LiveSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.viewer is not None:
            self.viewer.close()
        if self.transport is not None:
            self.transport.close()

    def report(self) -> None:
        """Print what the live options did (nothing when none was given)."""
        from dockbench.telemetry.live import stream_summary

        if self.viewer is not None:
            pace = self.viewer.pacer
            extra = (f", slept {pace.slept:.2f} s, at most {pace.behind * 1e3:.0f} ms behind"
                     if pace is not None else "")
            print(f"viewer     {self.viewer.frames} frames{extra}")
        if self.pacer is not None:
            print(f"paced      {self.pacer.speed:g}× real time: slept {self.pacer.slept:.2f} s, "
                  f"at most {self.pacer.behind * 1e3:.0f} ms behind")
        if self.streams:
            print(stream_summary(self.streams))
        if self.transport is not None:
            topics = ", ".join(sorted(self.ros2_sink.published))
            print(f"ros2       over {self.transport.backend} (domain {self.transport.domain_id}): {topics}")

    def hold(self) -> None:
        """With --viewer: keep the window on the final state until it is closed."""
        if self.viewer is not None and self.viewer.handle is not None and self.viewer.handle.is_running():
            print("viewer     the run is over; close the viewer window to exit")
            self.viewer.hold()


def check_args(args: argparse.Namespace) -> None:
    """Reject option combinations that cannot work, before anything is built."""
    if getattr(args, "speed", None) is not None and not args.speed > 0:
        raise DockbenchError(f"--speed must be > 0, got {args.speed}")
    if not getattr(args, "live_rate_hz", 50.0) > 0:
        raise DockbenchError(f"--live-rate-hz must be > 0, got {args.live_rate_hz}")
