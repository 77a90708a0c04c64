"""Mock joint-state source for the kinematic mirror: both RM75 arms at 90 Hz, no robot needed.

Publishes one ``sensor_msgs/msg/JointState`` per mirror group (topics and names from the mirror config,
default ``assets/robots/dual_rm75/mirror.yaml``) from the initial pose of a YAML file (degrees in the
file, radians on the wire; default ``assets/robots/dual_rm75/mock_initial_pose.yaml``), and can play
the file's scripted trajectory. Commands take effect immediately (the new pose is published at once):

=========================  ======================================================================
stdin line                 command-topic ``name[]`` entry (``/xr_rm/mock/command``)
=========================  ======================================================================
``l`` / ``r`` / ``b``      ``reset_left`` / ``reset_right`` / ``reset_both``: back to the initial pose
                           and hold it (stops that arm's trajectory)
``p``                      ``play``: play the trajectory from its start on both arms
``s``                      ``stop``: hold the current poses
``1`` / ``2``              ``mute_left`` / ``mute_right``: toggle publishing of that arm (to show the
                           mirror holding a silent arm's last pose)
``q``                      ``quit``
=========================  ======================================================================

Examples::

    python -m dockbench.experiments.mock_joint_states --play                 # both arms, trajectory running
    python -m dockbench.experiments.mock_joint_states --only left            # mirror waits for 'right'
    ros2 topic pub --once /xr_rm/mock/command sensor_msgs/msg/JointState "{name: [reset_left]}"

Exit codes: 0 ok, 1 error (the message, not a traceback, is printed).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import yaml
from dockbench.bridges.mirror import MirrorConfig, load_mirror_config
from dockbench.bridges.ros2 import JointState, Publisher, Transport, open_transport
from dockbench.sim.errors import DockbenchError, ScenarioError, reports_errors

from dockbench.cli import ArgumentParser

log = logging.getLogger("dockbench.experiments.mock_joint_states")

DEFAULT_POSE_RESOURCE = ("robots", "dual_rm75", "mock_initial_pose.yaml")
"""Package resource (inside ``assets``) of the default initial pose and trajectory."""
DEFAULT_COMMAND_TOPIC = "/xr_rm/mock/command"
"""Command topic (JointState whose ``name[]`` carries command words)."""
KEYS = {"l": "reset_left", "r": "reset_right", "b": "reset_both", "p": "play", "s": "stop",
        "1": "mute_left", "2": "mute_right", "q": "quit"}
"""stdin line → command word."""


@dataclasses.dataclass(frozen=True)
class MockPlan:
    """Initial pose and scripted trajectory, in radians.

    Attributes:
        rate_hz: publication rate [Hz].
        initial: ``{group: (n,) rad}``.
        times: waypoint times [s], strictly increasing from 0 (empty: no trajectory).
        waypoints: ``{group: (len(times), n) rad}``.
        loop: restart the trajectory after its last waypoint.
    """

    rate_hz: float
    initial: Mapping[str, np.ndarray]
    times: np.ndarray
    waypoints: Mapping[str, np.ndarray]
    loop: bool

    def pose_at(self, group: str, t: float) -> np.ndarray:
        """Trajectory pose of ``group`` at time ``t`` [s] since play: cosine blend between waypoints
        ``q = q_k + (q_{k+1} - q_k)(1 - cos(π s))/2``, ``s = (t - t_k)/(t_{k+1} - t_k)``; holds the last
        waypoint at the end unless ``loop``."""
        times, w = self.times, self.waypoints[group]
        if len(times) == 0:
            return self.initial[group].copy()
        if self.loop and times[-1] > 0:
            t = t % times[-1]
        if t <= times[0]:
            return w[0].copy()
        if t >= times[-1]:
            return w[-1].copy()
        k = int(np.searchsorted(times, t, side="right")) - 1
        s = (t - times[k]) / (times[k + 1] - times[k])
        return w[k] + (w[k + 1] - w[k]) * 0.5 * (1.0 - math.cos(math.pi * s))


def _deg_vector(value: Any, n: int, source: str, key: str) -> np.ndarray:
    if not isinstance(value, list) or len(value) != n:
        raise ScenarioError(f"expected a list of {n} angles [deg], got {value!r}", file=source, key=key)
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ScenarioError(f"expected a finite number [deg], got {v!r}", file=source, key=f"{key}[{i}]")
        out.append(math.radians(v))
    return np.array(out)


def _keys(data: Any, allowed: tuple[str, ...], source: str, key: str) -> Mapping:
    if not isinstance(data, Mapping):
        raise ScenarioError(f"expected a mapping, got {data!r}", file=source, key=key or None)
    for k in data:
        if k not in allowed:
            raise ScenarioError(f"unknown key {k!r}; allowed keys: {', '.join(allowed)}", file=source,
                                key=f"{key}.{k}" if key else str(k))
    return data


def load_mock_plan(config: MirrorConfig, path: str | Path | None = None) -> MockPlan:
    """Parse the mock YAML (``None``: the packaged one) against the mirror config's groups.

    Raises:
        ScenarioError: unreadable file, unknown key, a group missing or unknown, wrong vector length,
            non-finite angle, waypoint times not increasing from 0.
    """
    if path is None:
        source = "assets/" + "/".join(DEFAULT_POSE_RESOURCE)
        text = resources.files("dockbench.assets").joinpath(*DEFAULT_POSE_RESOURCE).read_text(encoding="utf-8")
    else:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ScenarioError(f"cannot read: {exc}", file=source) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(f"invalid YAML: {exc}", file=source) from None
    data = _keys(data, ("rate_hz", "initial_pose_deg", "trajectory"), source, "")
    sizes = {g.name: len(g.joints) for g in config.groups}
    rate = data.get("rate_hz", 90.0)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1000:
        raise ScenarioError(f"must be a number in (0, 1000] Hz, got {rate!r}", file=source, key="rate_hz")
    init_raw = _keys(data.get("initial_pose_deg"), tuple(sizes), source, "initial_pose_deg")
    initial = {}
    for g, n in sizes.items():
        if g not in init_raw:
            raise ScenarioError(f"missing group {g!r}", file=source, key="initial_pose_deg")
        initial[g] = _deg_vector(init_raw[g], n, source, f"initial_pose_deg.{g}")
    traj = _keys(data.get("trajectory") or {}, ("loop", "waypoints"), source, "trajectory")
    loop = traj.get("loop", False)
    if not isinstance(loop, bool):
        raise ScenarioError(f"expected true/false, got {loop!r}", file=source, key="trajectory.loop")
    times: list[float] = []
    rows: dict[str, list[np.ndarray]] = {g: [] for g in sizes}
    for i, wp in enumerate(traj.get("waypoints") or []):
        key = f"trajectory.waypoints[{i}]"
        wp = _keys(wp, ("t",) + tuple(sizes), source, key)
        t = wp.get("t")
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            raise ScenarioError(f"expected a time [s], got {t!r}", file=source, key=f"{key}.t")
        if (not times and t != 0) or (times and t <= times[-1]):
            raise ScenarioError("waypoint times must start at 0 and increase", file=source, key=f"{key}.t")
        times.append(float(t))
        for g, n in sizes.items():
            rows[g].append(_deg_vector(wp[g], n, source, f"{key}.{g}") if g in wp else
                           (rows[g][-1] if rows[g] else initial[g]))
    waypoints = {g: np.array(r).reshape(len(times), sizes[g]) for g, r in rows.items()}
    return MockPlan(float(rate), MappingProxyType(initial), np.array(times), MappingProxyType(waypoints),
                    loop)


class MockSource:
    """Publishes the mirror groups' joint states from a :class:`MockPlan`.

    Args:
        transport: an open transport. config: mirror config (topics, wire names). plan: poses.
        only: publish only these groups (default all).

    Thread-safe: :meth:`command` may come from stdin, the command topic or a test while
    :meth:`tick` runs in the publishing loop.
    """

    def __init__(self, transport: Transport, config: MirrorConfig, plan: MockPlan, *,
                 only: tuple[str, ...] | None = None) -> None:
        self.config = config
        self.plan = plan
        names = [g.name for g in config.groups]
        unknown = [g for g in (only or ()) if g not in names]
        if unknown:
            raise DockbenchError(f"unknown group(s) {', '.join(unknown)}; known: {', '.join(names)}")
        self._groups = {g.name: g for g in config.groups}
        self._pubs: dict[str, Publisher] = {
            g.name: transport.create_publisher(g.topic)
            for g in config.groups if only is None or g.name in only
        }
        self._lock = threading.Lock()
        self._pose = {g: plan.initial[g].copy() for g in names}
        self._prev = {g: plan.initial[g].copy() for g in names}
        self._play_t0: dict[str, float | None] = {g: None for g in names}
        self._muted: set[str] = set()
        self.quit = threading.Event()
        self.published = 0

    def _pose_now(self, g: str, now: float) -> np.ndarray:
        t0 = self._play_t0[g]
        return self._pose[g] if t0 is None else self.plan.pose_at(g, now - t0)

    def command(self, word: str) -> bool:
        """Apply one command word (see the module docstring); returns False for an unknown word.
        Resets publish the new pose immediately."""
        now = time.monotonic()
        groups = tuple(self._pose)
        with self._lock:
            if word.startswith("reset_"):
                which = groups if word == "reset_both" else (word[len("reset_"):],)
                if not all(g in self._pose for g in which):
                    return False
                for g in which:
                    self._pose[g] = self.plan.initial[g].copy()
                    self._play_t0[g] = None
                self._publish_locked(now, which)
            elif word == "play":
                if len(self.plan.times) == 0:
                    log.warning("the pose file has no trajectory; 'play' ignored")
                for g in groups:
                    self._play_t0[g] = now
            elif word == "stop":
                for g in groups:
                    self._pose[g] = self._pose_now(g, now)
                    self._play_t0[g] = None
            elif word.startswith("mute_") and word[len("mute_"):] in self._pose:
                g = word[len("mute_"):]
                self._muted ^= {g}
                log.info("%s %s", g, "muted" if g in self._muted else "publishing again")
            elif word == "quit":
                self.quit.set()
            else:
                return False
        log.info("command: %s", word)
        return True

    def on_command_msg(self, msg: JointState) -> None:
        """Command-topic callback: each entry of ``name[]`` is a command word."""
        for word in msg.name:
            if not self.command(word):
                log.warning("unknown mock command %r; known: %s", word, ", ".join(sorted(set(KEYS.values()))))

    def _publish_locked(self, now: float, groups: tuple[str, ...]) -> None:
        for g in groups:
            if g not in self._pubs or g in self._muted:
                continue
            q = self._pose_now(g, now)
            v = (q - self._prev[g]) * self.plan.rate_hz
            self._prev[g] = q.copy()
            self._pubs[g].publish(JointState.now(self._groups[g].wire_names, q, v))
            self.published += 1

    def tick(self) -> None:
        """Publish every (unmuted) group's current pose once."""
        with self._lock:
            self._publish_locked(time.monotonic(), tuple(self._pose))

    def run(self, *, duration: float | None = None, stop_event: threading.Event | None = None) -> int:
        """Publish at ``plan.rate_hz`` until ``duration`` [s], ``stop_event``, 'quit' or Ctrl-C; returns
        the number of messages published."""
        stop = stop_event if stop_event is not None else threading.Event()
        period = 1.0 / self.plan.rate_hz
        t_end = None if duration is None else time.monotonic() + duration
        nxt = time.perf_counter()
        try:
            while not (stop.is_set() or self.quit.is_set()):
                if t_end is not None and time.monotonic() >= t_end:
                    break
                self.tick()
                nxt += period
                delay = nxt - time.perf_counter()
                if delay < -period:
                    nxt = time.perf_counter()
                elif delay > 0:
                    stop.wait(delay)
        except KeyboardInterrupt:
            pass
        return self.published


def _stdin_reader(source: MockSource) -> None:
    for line in sys.stdin:
        key = line.strip()
        if not key:
            continue
        word = KEYS.get(key, key)
        if not source.command(word):
            print(f"unknown command {key!r}; keys: " + ", ".join(f"{k}={w}" for k, w in KEYS.items()),
                  file=sys.stderr)
        if source.quit.is_set():
            return


def _stdin_usable() -> bool:
    """stdin can be read without stopping the process: a pipe/file, or the terminal while this process
    is in the foreground (a background job reading its terminal would be stopped by SIGTTIN)."""
    if sys.stdin is None or sys.stdin.closed:
        return False
    try:
        if not sys.stdin.isatty():
            return True
        return os.getpgrp() == os.tcgetpgrp(sys.stdin.fileno())
    except (OSError, ValueError):
        return False


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, default=None, help="mirror config YAML (topics, names)")
    p.add_argument("--pose-file", type=Path, default=None, help="initial pose + trajectory YAML (degrees)")
    p.add_argument("--play", action="store_true", help="start playing the trajectory at once")
    p.add_argument("--only", action="append", default=None, metavar="GROUP", help="publish only this group")
    p.add_argument("--rate-hz", type=float, default=None, help="override the file's rate [Hz]")
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--backend", default="auto", help="transport: auto, rclpy, cyclonedds, inprocess")
    p.add_argument("--command-topic", default=DEFAULT_COMMAND_TOPIC, help="command topic")
    p.add_argument("--no-stdin", action="store_true", help="ignore stdin (commands via the topic only)")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


@reports_errors
def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    config = load_mirror_config(args.config)
    plan = load_mock_plan(config, args.pose_file)
    if args.rate_hz is not None:
        if not 0 < args.rate_hz <= 1000:
            raise DockbenchError(f"--rate-hz must be in (0, 1000], got {args.rate_hz}")
        plan = dataclasses.replace(plan, rate_hz=args.rate_hz)
    with open_transport(args.backend) as transport:
        source = MockSource(transport, config, plan, only=tuple(args.only) if args.only else None)
        transport.create_subscription(args.command_topic, source.on_command_msg)
        if args.play:
            source.command("play")
        if not args.no_stdin and _stdin_usable():
            threading.Thread(target=_stdin_reader, args=(source,), daemon=True).start()
            if sys.stdin.isatty():
                print("keys: " + ", ".join(f"{k}={w}" for k, w in KEYS.items()) + " (then Enter)")
        groups = ", ".join(f"{g.name} -> {g.topic}" for g in config.groups
                           if not args.only or g.name in args.only)
        print(f"mock joint states at {plan.rate_hz:g} Hz over {transport.backend} (domain "
              f"{transport.domain_id}): {groups}; commands on {args.command_topic}")
        t0 = time.monotonic()
        n = source.run(duration=args.duration)
        print(f"published {n} messages in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
