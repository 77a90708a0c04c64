"""The G20 hand bridge on ROS 2 topics.

Commands in (one topic, by mode; all ``sensor_msgs/msg/JointState``):

* ``sdk`` (default): ``/g20/cb_left_hand_control_cmd``. ``position[]`` holds SDK bytes 0..255. With
  ``name[]`` empty the values are in channel order (at most 20; a short message is padded with the
  spec's pad value 255 = open). With names, each name picks its channel (:func:`sdk_channel_names`:
  the active joint a channel drives, or the mimic joint whose angle a tip channel carries, e.g.
  ``index_pip`` or ``index_dip`` → channel 16) and unnamed channels get 255.
* ``nominal``: ``/retarget/g20/left/joint_target_nominal``. Radians by joint name (names required); mimic
  joints not given follow their driver; joints not named keep their goal.
* ``legacy_sdk``: the vendor SDK topic ``/cb_left_hand_control_cmd``, same contents as ``sdk``.

Out-of-range SDK bytes are clamped to 0..255 and out-of-range angles clipped to the joint range, as the
hand module does for every command source. A message is rejected whole (the goal is unchanged) when
names and positions differ in length, a name is unknown or repeated, a value is NaN/Inf, an unnamed SDK
command has more than 20 values, or a nominal command has no names. Rejections are counted per reason
and logged once per reason. With ``nonfinite="open"`` (the Isaac variant's behaviour, ``--on-nonfinite
open``) a message with a NaN/Inf value instead commands the ``open`` preset (counted as
``not_finite_reset_open``).

State out: ``/sim/mujoco/g20/left/joint_state`` at ``rate_hz`` (50 Hz default): the 21 joint names of the
spec, ``position`` [rad], ``velocity`` [rad/s], empty ``effort``, stamped with the wall-clock time of
publication. A timer thread publishes it; it holds the bridge lock only while it fetches the bridge's
latest immutable :class:`~hand.bridge.HandState` (refreshed every ``1/state_rate_hz`` of the bridge, so
choose ``state_rate_hz >= rate_hz``).

Threads: the subscription callback only validates and calls ``bridge.command_*`` (which takes the bridge
lock briefly); :func:`run_g20_ros2` steps the bridge in the calling thread in real time.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import logging
import math
import statistics
import threading
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType

from dockbench.bridges.ros2 import QOS_DEFAULT, JointState, Transport, open_transport, wait_until
from dockbench.hand.bridge import HandBridge
from dockbench.hand.spec import N_CHANNELS, HandSpec
from dockbench.sim.errors import DockbenchError, HandCommandError, reports_errors

log = logging.getLogger(__name__)

DEFAULT_CMD_TOPIC = "/g20/cb_left_hand_control_cmd"
"""SDK command topic (``mode="sdk"``)."""
DEFAULT_LEGACY_TOPIC = "/cb_left_hand_control_cmd"
"""The vendor SDK's own command topic (``mode="legacy_sdk"``)."""
DEFAULT_NOMINAL_TOPIC = "/retarget/g20/left/joint_target_nominal"
"""Retargeted joint targets in radians (``mode="nominal"``)."""
DEFAULT_STATE_TOPIC = "/sim/mujoco/g20/left/joint_state"
"""Simulated joint state out."""
DEFAULT_ISAAC_STATE_TOPIC = "/sim/isaac/g20/left/joint_state"
"""Simulated joint state out of the PhysX (Isaac) bridge (``--engine physx``)."""
DEFAULT_RATE_HZ = 50.0
"""State publication rate [Hz]."""


class G20Mode(str, enum.Enum):
    """Which command topic and format the bridge listens to."""

    SDK = "sdk"
    NOMINAL = "nominal"
    LEGACY_SDK = "legacy_sdk"


class RejectedCommand(HandCommandError):
    """A command message rejected whole; ``kind`` is the short reason used for counting and logging."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


# ------------------------------------------------------------------------------------- message decoding
def sdk_channel_names(spec: HandSpec) -> Mapping[str, int]:
    """Names accepted in an SDK command's ``name[]`` → channel: each channel's active joint, and for tip
    channels also the mimic joint whose angle the channel carries (``thumb_ip``, ``*_dip``)."""
    out: dict[str, int] = {}
    for ch in spec.channels:
        if ch.joint is not None:
            out[ch.joint] = ch.channel
            if ch.angle_of is not None:
                out[ch.angle_of] = ch.channel
    return MappingProxyType(out)


def _check_common(msg: JointState) -> None:
    if msg.name and len(msg.name) != len(msg.position):
        raise RejectedCommand("length_mismatch",
                              f"{len(msg.name)} names but {len(msg.position)} positions")
    bad = [i for i, v in enumerate(msg.position) if not math.isfinite(v)]
    if bad:
        raise RejectedCommand("not_finite", f"position[{bad[0]}] = {msg.position[bad[0]]} is not finite")
    seen: set[str] = set()
    for n in msg.name:
        if n in seen:
            raise RejectedCommand("duplicate_name", f"joint name {n!r} appears twice")
        seen.add(n)


def sdk_values_from_msg(
    msg: JointState, spec: HandSpec, names: Mapping[str, int] | None = None
) -> list[float]:
    """The SDK command (channel order, ≤ 20 values; unnamed channels = ``spec.pad_value``) in ``msg``.

    Raises:
        RejectedCommand: empty message, names/positions length mismatch, a repeated or unknown name
            (the message lists the valid ones), a NaN/Inf, more than 20 unnamed values, or two names
            for one channel.
    """
    if not msg.position:
        raise RejectedCommand("empty", "no positions")
    _check_common(msg)
    if not msg.name:
        if len(msg.position) > N_CHANNELS:
            raise RejectedCommand("too_many_values",
                                  f"{len(msg.position)} values; at most {N_CHANNELS} SDK channels")
        return list(msg.position)
    names = names if names is not None else sdk_channel_names(spec)
    values = [float(spec.pad_value)] * N_CHANNELS
    used: dict[int, str] = {}
    for n, v in zip(msg.name, msg.position, strict=True):
        ch = names.get(n)
        if ch is None:
            raise RejectedCommand("unknown_name", f"unknown SDK joint name {n!r}; valid: {', '.join(names)}")
        if ch in used:
            raise RejectedCommand("duplicate_name", f"{n!r} and {used[ch]!r} both name SDK channel {ch}")
        used[ch] = n
        values[ch] = v
    return values


def joint_targets_from_msg(msg: JointState, spec: HandSpec) -> dict[str, float]:
    """``{joint name: rad}`` of a nominal command (mimic completion is left to the bridge).

    Raises:
        RejectedCommand: no names, names/positions length mismatch, a repeated or unknown name, NaN/Inf.
    """
    if not msg.name:
        raise RejectedCommand("no_names", "a nominal command needs joint names")
    _check_common(msg)
    valid = spec.joint_names
    unknown = [n for n in msg.name if n not in valid]
    if unknown:
        raise RejectedCommand("unknown_name", f"unknown joint name {unknown[0]!r}; valid: {', '.join(valid)}")
    return dict(zip(msg.name, msg.position, strict=True))


# ------------------------------------------------------------------------------------- the node
@dataclasses.dataclass(frozen=True)
class G20RosStats:
    """Counters of one :func:`run_g20_ros2` session.

    Attributes:
        received: command messages received. accepted: commands the bridge took. rejected: commands
            rejected whole. rejected_by_reason: ``{reason kind: count}``.
        states_published: joint-state messages sent. steps: bridge steps taken.
        late_steps: steps that started more than one period late (the loop then resynchronises).
        command_topic, state_topic: the topics used.
    """

    received: int
    accepted: int
    rejected: int
    rejected_by_reason: Mapping[str, int]
    states_published: int
    steps: int
    late_steps: int
    command_topic: str
    state_topic: str


NONFINITE_POLICIES: tuple[str, ...] = ("reject", "open")
"""What a command with a NaN/Inf value does: ``reject`` it whole (goal unchanged), or command the
``open`` preset (the Isaac variant's reset to open)."""


class G20RosNode:
    """Subscribes the command topic and publishes the state topic for a :class:`HandBridge`.

    :meth:`start` creates the endpoints and the state timer thread; :meth:`stop` ends them. Stepping the
    bridge is the caller's job (see :func:`run_g20_ros2`).
    """

    def __init__(
        self,
        bridge: HandBridge,
        transport: Transport,
        *,
        mode: G20Mode | str = G20Mode.SDK,
        cmd_topic: str | None = None,
        nominal_topic: str | None = None,
        sim_state_topic: str | None = None,
        rate_hz: float = DEFAULT_RATE_HZ,
        nonfinite: str = "reject",
    ) -> None:
        if nonfinite not in NONFINITE_POLICIES:
            raise DockbenchError(f"nonfinite policy {nonfinite!r}; allowed: {', '.join(NONFINITE_POLICIES)}")
        self.nonfinite = nonfinite
        try:
            self.mode = G20Mode(mode)
        except ValueError:
            raise DockbenchError(
                f"G20 ROS 2 mode {mode!r}; allowed: {', '.join(m.value for m in G20Mode)}"
            ) from None
        if not (rate_hz > 0 and math.isfinite(rate_hz)):
            raise DockbenchError(f"rate_hz must be > 0 Hz, got {rate_hz!r}")
        if self.mode is G20Mode.NOMINAL and cmd_topic is not None:
            raise DockbenchError("cmd_topic applies to the sdk/legacy_sdk modes; use nominal_topic in "
                                 "nominal mode")
        if self.mode is not G20Mode.NOMINAL and nominal_topic is not None:
            raise DockbenchError("nominal_topic applies to the nominal mode; use cmd_topic for SDK commands")
        if self.mode is G20Mode.NOMINAL:
            self.command_topic = nominal_topic or DEFAULT_NOMINAL_TOPIC
        elif self.mode is G20Mode.LEGACY_SDK:
            self.command_topic = cmd_topic or DEFAULT_LEGACY_TOPIC
        else:
            self.command_topic = cmd_topic or DEFAULT_CMD_TOPIC
        self.state_topic = sim_state_topic or DEFAULT_STATE_TOPIC
        self.bridge = bridge
        self.transport = transport
        self.rate_hz = float(rate_hz)
        if bridge.config.state_rate_hz < self.rate_hz:
            log.warning("bridge state_rate_hz %.1f < publication rate %.1f Hz: states repeat",
                        bridge.config.state_rate_hz, self.rate_hz)
        self._spec = bridge.spec
        self._sdk_names = sdk_channel_names(self._spec)
        self._lock = threading.Lock()
        self._received = self._accepted = self._published = 0
        self._by_reason: dict[str, int] = {}
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None
        self._sub = self._pub = None
        self.steps = 0
        self.late_steps = 0

    # --- commands (transport thread)
    def on_command(self, msg: JointState) -> None:
        """Validate one command message and hand it to the bridge (or count and log the rejection)."""
        with self._lock:
            self._received += 1
        try:
            if self.mode is G20Mode.NOMINAL:
                res = self.bridge.command_joints(joint_targets_from_msg(msg, self._spec))
            else:
                res = self.bridge.command_sdk(sdk_values_from_msg(msg, self._spec, self._sdk_names))
            if not res.accepted:  # the bridge's own validation (should not happen after ours)
                raise RejectedCommand("bridge_refused", res.reason)
        except RejectedCommand as exc:
            if exc.kind == "not_finite" and self.nonfinite == "open":
                res = self.bridge.command_preset("open")
                self._reject("not_finite_reset_open", f"{exc}; commanded the open preset instead")
                if res.accepted:
                    with self._lock:
                        self._accepted += 1
                return
            self._reject(exc.kind, str(exc))
            return
        with self._lock:
            self._accepted += 1

    def _reject(self, kind: str, message: str) -> None:
        with self._lock:
            first = kind not in self._by_reason
            self._by_reason[kind] = self._by_reason.get(kind, 0) + 1
        if first:
            log.warning("%s: command rejected (%s): %s [further '%s' rejections are only counted]",
                        self.command_topic, kind, message, kind)

    # --- state (timer thread)
    def publish_state(self) -> None:
        """Publish the bridge's latest state now (the bridge lock is held only to fetch it)."""
        st = self.bridge.latest_state()
        self._pub.publish(JointState.now(st.names, st.positions, st.velocities))
        with self._lock:
            self._published += 1

    def _timer_loop(self) -> None:
        period = 1.0 / self.rate_hz
        nxt = time.perf_counter()
        while not self._stop.is_set():
            self.publish_state()
            nxt += period
            delay = nxt - time.perf_counter()
            if delay < -period:  # fell behind by more than a period: resynchronise, do not burst
                nxt = time.perf_counter()
                delay = 0.0
            if delay > 0:
                self._stop.wait(delay)

    def start(self) -> None:
        """Create the subscription, the publisher and the state timer thread."""
        self._pub = self.transport.create_publisher(self.state_topic, QOS_DEFAULT)
        self._sub = self.transport.create_subscription(self.command_topic, self.on_command, QOS_DEFAULT)
        self._stop.clear()
        self._timer = threading.Thread(target=self._timer_loop, name="g20-state-timer", daemon=True)
        self._timer.start()
        log.info("G20 bridge on ROS 2 (%s): commands %s (%s), state %s at %.0f Hz", self.transport.backend,
                 self.command_topic, self.mode.value, self.state_topic, self.rate_hz)

    def stop(self) -> None:
        """Stop the timer and close the endpoints (idempotent)."""
        self._stop.set()
        if self._timer is not None:
            self._timer.join(timeout=2.0)
            self._timer = None
        for ep in (self._sub, self._pub):
            if ep is not None:
                ep.close()

    def stats(self) -> G20RosStats:
        """A snapshot of the counters."""
        with self._lock:
            return G20RosStats(
                received=self._received, accepted=self._accepted, rejected=sum(self._by_reason.values()),
                rejected_by_reason=MappingProxyType(dict(self._by_reason)), states_published=self._published,
                steps=self.steps, late_steps=self.late_steps, command_topic=self.command_topic,
                state_topic=self.state_topic,
            )


def run_g20_ros2(
    bridge: HandBridge,
    transport: Transport,
    *,
    mode: G20Mode | str = G20Mode.SDK,
    cmd_topic: str | None = None,
    nominal_topic: str | None = None,
    sim_state_topic: str | None = None,
    rate_hz: float = DEFAULT_RATE_HZ,
    stop_event: threading.Event | None = None,
    max_steps: int | None = None,
    on_step: Callable[[], bool] | None = None,
    nonfinite: str = "reject",
) -> G20RosStats:
    """Run the G20 bridge on ROS 2 topics until ``stop_event`` is set (or ``max_steps``, or Ctrl-C).

    Steps the bridge in the calling thread in real time (one ``bridge.step()`` per ``bridge.dt``; a loop
    that falls more than one period behind resynchronises instead of bursting), while the transport
    delivers commands and a timer thread publishes the state (see the module docstring).

    Args:
        bridge: the hand bridge (its stepping thread becomes the calling thread).
        transport: an open :class:`~bridges.ros2.Transport` (not closed here).
        mode: ``"sdk"``, ``"nominal"`` or ``"legacy_sdk"`` (:class:`G20Mode`).
        cmd_topic: SDK command topic (sdk: ``/g20/cb_left_hand_control_cmd``, legacy_sdk:
            ``/cb_left_hand_control_cmd``). nominal_topic: nominal-mode topic
            (``/retarget/g20/left/joint_target_nominal``). sim_state_topic: state topic
            (``/sim/mujoco/g20/left/joint_state``).
        rate_hz: state publication rate [Hz].
        stop_event: set it (from any thread) to stop; ``None`` = run until ``max_steps`` or Ctrl-C.
        max_steps: stop after this many bridge steps.
        on_step: called in the stepping thread after every step (e.g. to sync a viewer under its
            lock); returning ``False`` stops the run.
        nonfinite: a NaN/Inf command is ``reject``-ed or resets the goal to ``open``
            (:data:`NONFINITE_POLICIES`).

    Returns:
        :class:`G20RosStats` of the session.

    Raises:
        DockbenchError: bad mode, rate or topic combination; TransportError from the transport.
    """
    node = G20RosNode(bridge, transport, mode=mode, cmd_topic=cmd_topic, nominal_topic=nominal_topic,
                      sim_state_topic=sim_state_topic, rate_hz=rate_hz, nonfinite=nonfinite)
    stop = stop_event if stop_event is not None else threading.Event()
    dt = bridge.dt
    node.start()
    try:
        nxt = time.perf_counter()
        while not stop.is_set() and (max_steps is None or node.steps < max_steps):
            bridge.step()
            node.steps += 1
            if on_step is not None and on_step() is False:
                break
            nxt += dt
            delay = nxt - time.perf_counter()
            if delay < -dt:
                node.late_steps += 1
                nxt = time.perf_counter()
            elif delay > 0:
                stop.wait(delay)
    except KeyboardInterrupt:
        log.info("interrupted")
    finally:
        node.stop()
    return node.stats()


# ------------------------------------------------------------------------------------- latency probe
@dataclasses.dataclass(frozen=True)
class LatencyResult:
    """Command → state latency samples [s]: ``to_publish`` uses the state's header stamp (set when the
    bridge published it), ``to_receive`` the time the probe received it. Same host clock."""

    to_publish: tuple[float, ...]
    to_receive: tuple[float, ...]

    @staticmethod
    def _pct(xs: tuple[float, ...], q: float) -> float:
        s = sorted(xs)
        return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]

    def summary(self) -> dict[str, float]:
        """Median and p99 [ms] of both series, and the sample count."""
        return {
            "n": len(self.to_publish),
            "publish_median_ms": 1e3 * statistics.median(self.to_publish),
            "publish_p99_ms": 1e3 * self._pct(self.to_publish, 0.99),
            "receive_median_ms": 1e3 * statistics.median(self.to_receive),
            "receive_p99_ms": 1e3 * self._pct(self.to_receive, 0.99),
        }


def measure_command_latency(
    transport: Transport,
    spec: HandSpec,
    *,
    trials: int = 50,
    cmd_topic: str = DEFAULT_CMD_TOPIC,
    state_topic: str = DEFAULT_STATE_TOPIC,
    presets: tuple[str, str] = ("open", "half_fist"),
    timeout: float = 2.0,
    settle: float = 0.5,
) -> LatencyResult:
    """Probe a running G20 ROS 2 bridge: alternate two SDK presets and time each command until the
    first published state that moved from the pose at rest.

    Each trial waits until the hand is at rest (two consecutive states equal), publishes the next preset
    at a random phase relative to the state timer, and records the first state whose position differs
    from the rest pose. Raises DockbenchError when the bridge does not answer within ``timeout`` [s].
    """
    import random

    lock = threading.Lock()
    states: list[tuple[float, JointState]] = []

    def on_state(msg: JointState) -> None:
        with lock:
            states.append((time.time(), msg))

    sub = transport.create_subscription(state_topic, on_state, QOS_DEFAULT)
    pub = transport.create_publisher(cmd_topic, QOS_DEFAULT)
    try:
        if not wait_until(lambda: pub.subscription_count() > 0 and bool(states), 10.0):
            raise DockbenchError(f"no G20 bridge answering on {cmd_topic} / {state_topic}")
        to_pub: list[float] = []
        to_recv: list[float] = []
        rng = random.Random(0)

        def at_rest() -> bool:
            with lock:
                return len(states) >= 2 and states[-1][1].position == states[-2][1].position

        def first_change(start: int, rest: tuple[float, ...]) -> tuple[float, JointState] | None:
            with lock:
                return next(((t, m) for t, m in states[start:] if m.position != rest), None)

        for k in range(trials):
            if not wait_until(at_rest, settle + timeout):
                raise DockbenchError("the hand did not come to rest between trials")
            time.sleep(rng.uniform(0.0, 0.03))  # a random phase against the state timer
            with lock:
                rest = states[-1][1].position
                start = len(states)
            t_cmd = time.time()
            pub.publish(JointState(position=spec.preset(presets[(k + 1) % 2])))
            if not wait_until(lambda s=start, r=rest: first_change(s, r) is not None, timeout, period=0.0005):
                raise DockbenchError(f"no state reflected command {k} within {timeout} s")
            t_rx, msg = first_change(start, rest)
            to_pub.append(msg.stamp - t_cmd)
            to_recv.append(t_rx - t_cmd)
        return LatencyResult(tuple(to_pub), tuple(to_recv))
    finally:
        sub.close()
        pub.close()


@reports_errors
def main(argv: list[str] | None = None) -> int:
    """``python -m dockbench.bridges.g20_ros2 serve|bench``: a standalone headless bridge on topics, or the
    latency probe against one. The full CLI is ``experiments/g20_bridge.py --ros2``."""
    from dockbench.hand.bridge import BridgeConfig
    from dockbench.hand.spec import load_spec

    p = argparse.ArgumentParser(prog="python -m dockbench.bridges.g20_ros2", description=main.__doc__.split("\n")[0])
    p.add_argument("what", choices=("serve", "bench"))
    p.add_argument("--backend", default="auto", help="auto, rclpy, cyclonedds (default auto)")
    p.add_argument("--mode", default="sdk", choices=[m.value for m in G20Mode])
    p.add_argument("--cmd-topic", default=None)
    p.add_argument("--sim-state-topic", default=None)
    p.add_argument("--rate-hz", type=float, default=DEFAULT_RATE_HZ, help="state rate [Hz] (serve)")
    p.add_argument("--state-rate-hz", type=float, default=1000.0, help="bridge readout rate [Hz] (serve)")
    p.add_argument("--duration", type=float, default=None, help="serve for this long [s]")
    p.add_argument("--trials", type=int, default=100, help="latency trials (bench)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    spec = load_spec()
    with open_transport(args.backend) as transport:
        if args.what == "serve":
            config = BridgeConfig(state_rate_hz=args.state_rate_hz)
            bridge = HandBridge.standalone(config, spec, timestep=0.001)
            bridge.reset("open")
            stop = threading.Event()
            if args.duration is not None:
                timer = threading.Timer(args.duration, stop.set)
                timer.daemon = True
                timer.start()
            stats = run_g20_ros2(bridge, transport, mode=args.mode, cmd_topic=args.cmd_topic,
                                 sim_state_topic=args.sim_state_topic, rate_hz=args.rate_hz,
                                 stop_event=stop)
            print(f"{stats.steps} steps ({stats.late_steps} late), commands {stats.received} received, "
                  f"{stats.accepted} accepted, {stats.rejected} rejected "
                  f"{dict(stats.rejected_by_reason)}, "
                  f"{stats.states_published} states published")
        else:
            res = measure_command_latency(
                transport, spec, trials=args.trials, cmd_topic=args.cmd_topic or DEFAULT_CMD_TOPIC,
                state_topic=args.sim_state_topic or DEFAULT_STATE_TOPIC,
            )
            s = res.summary()
            print(f"{transport.backend}: {s['n']} trials; command publish -> state publish: median "
                  f"{s['publish_median_ms']:.2f} ms, p99 {s['publish_p99_ms']:.2f} ms; "
                  f"-> state received: "
                  f"median {s['receive_median_ms']:.2f} ms, p99 {s['receive_p99_ms']:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
