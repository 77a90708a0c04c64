"""ROS 2 topics without requiring a ROS install: a small neutral transport with three backends.

The rest of dockbench talks to a :class:`Transport` and a plain :class:`JointState` record (the fields of
``sensor_msgs/msg/JointState``) and never imports a middleware itself. Backends (registry
:data:`BACKENDS`, chosen by :func:`open_transport`):

* ``rclpy``      a real ROS 2 node, used when ``rclpy`` and ``sensor_msgs`` import cleanly (a sourced ROS
                 install). The RMW and its discovery settings are ROS's own.
* ``cyclonedds`` the ``cyclonedds`` Python wheel speaking ROS 2's DDS mapping directly, so a plain
                 ``pip install -e '.[ros2]'`` talks to ROS 2 nodes (any RMW that uses UDP, see
                 ``docs/ros2.md``):

                 ============================  =============================================
                 ROS 2                          DDS
                 ============================  =============================================
                 topic ``/a/b``                 topic ``rt/a/b``
                 ``sensor_msgs/msg/JointState`` ``sensor_msgs::msg::dds_::JointState_``
                 encoding                       XCDR1 (plain CDR) little endian, ``@final``
                 ``ROS_DOMAIN_ID``              DDS domain id (default 0)
                 type hash (Iron+, REP-2011)    endpoint USER_DATA ``typehash=RIHS01_…;``
                 QoS default                    RELIABLE, VOLATILE, KEEP_LAST 10
                 ============================  =============================================

* ``inprocess``  a synchronous in-process bus (no network), for tests and single-process demos. Every
                 message goes through the pure-Python CDR codec (:mod:`bridges.cdr`), so receivers
                 never alias the sender's data and the codec is exercised on every test message.

Message types: by default an endpoint carries ``sensor_msgs/msg/JointState`` as the :class:`JointState`
record. ``create_publisher(..., msg_type=T)`` / ``create_subscription(..., msg_type=T)`` with a
:class:`bridges.msgs.Struct` (e.g. ``msgs.POSE_STAMPED``, ``msgs.WRENCH_STAMPED``) carry that type
instead, as nested dicts (:mod:`bridges.msgs`), on every backend: the type's CDR codec in process,
a cyclonedds ``IdlStruct`` built from the same schema (with its REP-2011 type hash in USER_DATA), or
the ``rclpy`` message class of that name.

``auto`` tries ``rclpy`` (any exception counts as "not available": an unsourced ROS install fails with
library errors, not ``ImportError``), then ``cyclonedds``. The two DDS stacks are never loaded into one
process on purpose.

Threading: subscription callbacks run on a backend thread (cyclonedds listener thread, the rclpy
executor thread) or, for ``inprocess``, synchronously inside :meth:`Publisher.publish`. Callbacks must
be short and must not block; an exception in a callback is logged (once per exception type and topic)
and swallowed so one bad message cannot stop the stream.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import logging
import math
import os
import re
import threading
import time
import types
from collections.abc import Callable, Sequence
from typing import Any

from dockbench.bridges import cdr
from dockbench.sim.errors import DockbenchError
from dockbench.sim.extras import install_hint

log = logging.getLogger(__name__)

ROS_TYPE_NAME = "sensor_msgs/msg/JointState"
"""The ROS 2 type every topic of this module carries."""
DDS_TYPE_NAME = "sensor_msgs::msg::dds_::JointState_"
"""The DDS type name of :data:`ROS_TYPE_NAME` under ROS 2's mapping."""
JOINT_STATE_TYPE_HASH = "RIHS01_a13ee3a330e346c9d87b5aa18d24e11690752bd33a0350f11c5882bc9179260e"
"""REP-2011 type hash of sensor_msgs/msg/JointState (ROS 2 Iron and later)."""
USER_DATA = f"typehash={JOINT_STATE_TYPE_HASH};".encode("ascii")
"""Endpoint USER_DATA that rmw_cyclonedds / rmw_fastrtps put on JointState readers and writers."""
INSTALL_HINT = install_hint("ros2")
"""How to get the cyclonedds backend (the optional extra declared in pyproject.toml)."""

_TOPIC_RE = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)+$")


class TransportError(DockbenchError):
    """A transport could not be created or used (backend missing, bad topic name, closed transport)."""


# ---------------------------------------------------------------------------------------------- records
def _floats(values: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


@dataclasses.dataclass(frozen=True)
class JointState:
    """The fields of ``sensor_msgs/msg/JointState`` as an immutable record.

    Attributes:
        name: joint names.
        position: joint positions [rad] (or [m] for prismatic joints).
        velocity: joint velocities [rad/s] (may be empty).
        effort: joint efforts [N·m] (may be empty).
        stamp_sec, stamp_nanosec: ``header.stamp`` (seconds since the epoch, ``0 <= nanosec < 1e9``).
        frame_id: ``header.frame_id``.

    Sequences are stored as tuples (lists and numpy arrays are converted); values are not validated
    here, so a receiver sees NaN or mismatched lengths exactly as they were sent and can reject them.
    """

    name: tuple[str, ...] = ()
    position: tuple[float, ...] = ()
    velocity: tuple[float, ...] = ()
    effort: tuple[float, ...] = ()
    stamp_sec: int = 0
    stamp_nanosec: int = 0
    frame_id: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", tuple(str(n) for n in self.name))
        for f in ("position", "velocity", "effort"):
            object.__setattr__(self, f, _floats(getattr(self, f)))

    @classmethod
    def now(
        cls,
        name: Sequence[str],
        position: Sequence[float],
        velocity: Sequence[float] = (),
        effort: Sequence[float] = (),
        frame_id: str = "",
    ) -> JointState:
        """A JointState stamped with the current wall-clock time (``time.time()``)."""
        sec, nsec = cdr.split_stamp(time.time())
        return cls(name, position, velocity, effort, sec, nsec, frame_id)

    @property
    def stamp(self) -> float:
        """``header.stamp`` as seconds [s]."""
        return self.stamp_sec + 1e-9 * self.stamp_nanosec

    def to_cdr(self) -> bytes:
        """XCDR1 little-endian payload (encapsulation header included), see :mod:`bridges.cdr`."""
        return cdr.encode_joint_state(
            sec=self.stamp_sec, nanosec=self.stamp_nanosec, frame_id=self.frame_id, name=self.name,
            position=self.position, velocity=self.velocity, effort=self.effort,
        )

    @classmethod
    def from_cdr(cls, payload: bytes) -> JointState:
        """Parse an XCDR1 payload (raises :class:`bridges.cdr.CdrError` on a malformed one)."""
        d = cdr.decode_joint_state(payload)
        return cls(d["name"], d["position"], d["velocity"], d["effort"], d["sec"], d["nanosec"],
                   d["frame_id"])



def _as_dict(struct: Any, msg: Any) -> dict:
    """A message object (cyclonedds sample or rclpy message: attributes named after the fields) as the plain
    dict of :mod:`bridges.msgs`, recursively over the nested structs of ``struct``."""
    out = {}
    for f in struct.fields:
        x = getattr(msg, f.name)
        if not isinstance(f.type, str):
            x = [_as_dict(f.type, e) for e in x] if f.sequence else _as_dict(f.type, x)
        elif f.sequence:
            x = list(x)
        out[f.name] = x
    return out

class _JointStateCodec:
    """The default endpoint type: :class:`JointState` records (the hand-written codec of bridges.cdr)."""

    type_name = ROS_TYPE_NAME
    dds_name = DDS_TYPE_NAME
    user_data = USER_DATA

    def check(self, msg: Any) -> None:
        if not isinstance(msg, JointState):
            raise TransportError(f"publish() takes a bridges.ros2.JointState, got {type(msg).__name__}")

    def to_cdr(self, msg: JointState) -> bytes:
        return msg.to_cdr()

    def from_cdr(self, payload: bytes) -> JointState:
        return JointState.from_cdr(payload)

    def cyclone_type(self, c: dict) -> type:
        return c["JointState_"]

    def to_cyclone(self, c: dict, msg: JointState) -> Any:
        return c["JointState_"](
            c["Header_"](c["Time_"](msg.stamp_sec, msg.stamp_nanosec), msg.frame_id),
            list(msg.name), list(msg.position), list(msg.velocity), list(msg.effort),
        )

    def from_cyclone(self, s: Any) -> JointState:
        h = s.header
        return JointState(s.name, s.position, s.velocity, s.effort, h.stamp.sec, h.stamp.nanosec, h.frame_id)

    def rclpy_class(self) -> type:
        from sensor_msgs.msg import JointState as Msg

        return Msg

    def to_rclpy(self, cls: type, msg: JointState) -> Any:
        m = cls()
        m.header.stamp.sec = msg.stamp_sec
        m.header.stamp.nanosec = msg.stamp_nanosec
        m.header.frame_id = msg.frame_id
        m.name = list(msg.name)
        m.position = list(msg.position)
        m.velocity = list(msg.velocity)
        m.effort = list(msg.effort)
        return m

    def from_rclpy(self, m: Any) -> JointState:
        return JointState(m.name, m.position, m.velocity, m.effort, m.header.stamp.sec, m.header.stamp.nanosec,
                          m.header.frame_id)


class _StructCodec:
    """Endpoints of a :class:`bridges.msgs.Struct` type: messages are nested dicts."""

    def __init__(self, struct_type: Any) -> None:
        from dockbench.bridges import msgs

        self._msgs = msgs
        self.type = struct_type
        self.type_name = struct_type.name
        self.dds_name = struct_type.dds_name
        self.user_data = f"typehash={struct_type.type_hash()};".encode("ascii")

    def check(self, msg: Any) -> None:
        if not isinstance(msg, dict):
            raise TransportError(f"publish() on a {self.type_name} topic takes a dict of its fields "
                                 f"(bridges.msgs), got {type(msg).__name__}")

    def to_cdr(self, msg: dict) -> bytes:
        return self._msgs.encode(self.type, msg)

    def from_cdr(self, payload: bytes) -> dict:
        return self._msgs.decode(self.type, payload)

    def cyclone_type(self, c: dict) -> type:
        return c["struct"](self.type)

    def to_cyclone(self, c: dict, msg: dict) -> Any:
        def build(s: Any, v: dict) -> Any:
            args = []
            for f in s.fields:
                x = v.get(f.name)
                if not isinstance(f.type, str):
                    cls = c["struct"](f.type)
                    x = [build(f.type, e) for e in (x or [])] if f.sequence else build(f.type, x or {})
                elif f.sequence:
                    x = list(x or [])
                elif x is None:
                    x = "" if f.type == "string" else 0
                args.append(x)
            cls = c["struct"](s)
            return cls(*args)

        return build(self.type, msg)

    def from_cyclone(self, sample: Any) -> dict:
        return _as_dict(self.type, sample)

    def rclpy_class(self) -> type:
        import importlib

        pkg, sub, base = self.type_name.split("/")
        return getattr(importlib.import_module(f"{pkg}.{sub}"), base)

    def to_rclpy(self, cls: type, msg: dict) -> Any:
        import importlib

        def cls_of(s: Any) -> type:
            pkg, sub, base = s.name.split("/")
            return getattr(importlib.import_module(f"{pkg}.{sub}"), base)

        def fill(s: Any, m: Any, v: dict) -> Any:
            for f in s.fields:
                if f.name not in v:
                    continue
                x = v[f.name]
                if not isinstance(f.type, str):
                    if f.sequence:
                        setattr(m, f.name, [fill(f.type, cls_of(f.type)(), e) for e in x])
                    else:
                        fill(f.type, getattr(m, f.name), x)
                elif f.sequence:
                    setattr(m, f.name, list(x))
                else:
                    setattr(m, f.name, float(x) if f.type == "float64" else x)
            return m

        return fill(self.type, cls(), msg)

    def from_rclpy(self, m: Any) -> dict:
        return _as_dict(self.type, m)


JOINT_STATE_CODEC = _JointStateCodec()


def codec_for(msg_type: Any) -> Any:
    """The codec of an endpoint type: None → :class:`JointState` records; a :class:`bridges.msgs.Struct`
    → dicts of that type."""
    if msg_type is None:
        return JOINT_STATE_CODEC
    from dockbench.bridges.msgs import Struct

    if not isinstance(msg_type, Struct):
        raise TransportError(f"msg_type must be a bridges.msgs.Struct (e.g. msgs.POSE_STAMPED) or None "
                             f"(JointState records), got {type(msg_type).__name__}")
    return _StructCodec(msg_type)


class Reliability(str, enum.Enum):
    """DDS reliability kind."""

    RELIABLE = "reliable"
    BEST_EFFORT = "best_effort"


@dataclasses.dataclass(frozen=True)
class QoS:
    """The QoS subset dockbench uses. Durability is always VOLATILE and history KEEP_LAST.

    Attributes:
        reliability: :class:`Reliability` (or its string value).
        depth: KEEP_LAST history depth (≥ 1).
    """

    reliability: Reliability = Reliability.RELIABLE
    depth: int = 10

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "reliability", Reliability(self.reliability))
        except ValueError:
            raise TransportError(
                f"QoS reliability {self.reliability!r}; allowed: {', '.join(r.value for r in Reliability)}"
            ) from None
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 1:
            raise TransportError(f"QoS depth must be an integer >= 1, got {self.depth!r}")

    def matches_writer(self, writer: QoS) -> bool:
        """DDS request/offered rule: a RELIABLE reader does not match a BEST_EFFORT writer."""
        return not (self.reliability is Reliability.RELIABLE
                    and writer.reliability is Reliability.BEST_EFFORT)


QOS_DEFAULT = QoS()
"""ROS 2 default (``rclpy`` depth 10): RELIABLE, VOLATILE, KEEP_LAST 10."""
QOS_SENSOR_DATA = QoS(Reliability.BEST_EFFORT, 5)
"""ROS 2 ``qos_profile_sensor_data``: BEST_EFFORT, VOLATILE, KEEP_LAST 5."""


class Discovery(str, enum.Enum):
    """Where the cyclonedds backend looks for peers (rclpy follows ROS's own environment)."""

    LOCALHOST = "localhost"
    """Unicast to 127.0.0.1 only, no multicast (works where loopback has no multicast)."""
    SUBNET = "subnet"
    """Cyclone's default interface selection with multicast discovery (the LAN)."""


def validate_topic(topic: str) -> str:
    """Check an absolute ROS 2 topic name (``/a/b_c``); returns it unchanged.

    Raises:
        TransportError: relative, empty, trailing ``/``, ``//``, or characters other than ``[A-Za-z0-9_/]``
            (tokens may not start with a digit).
    """
    if not isinstance(topic, str) or not _TOPIC_RE.match(topic):
        raise TransportError(
            f"topic {topic!r} is not an absolute ROS 2 name: expected '/token/token...', tokens of "
            f"[A-Za-z0-9_] not starting with a digit"
        )
    return topic


def dds_topic_name(topic: str) -> str:
    """ROS 2 topic → DDS topic: ``/g20/cmd`` → ``rt/g20/cmd``."""
    return "rt" + validate_topic(topic)


def domain_id_from_env() -> int:
    """``ROS_DOMAIN_ID`` as an int (default 0).

    Raises:
        TransportError: not an integer in 0..232 (the range ROS 2 documents for UDP port mapping).
    """
    raw = os.environ.get("ROS_DOMAIN_ID", "").strip()
    if not raw:
        return 0
    try:
        value = int(raw)
    except ValueError:
        raise TransportError(f"ROS_DOMAIN_ID={raw!r} is not an integer (allowed: 0..232)") from None
    if not 0 <= value <= 232:
        raise TransportError(f"ROS_DOMAIN_ID={value} out of range (allowed: 0..232)")
    return value


def discovery_from_env() -> Discovery:
    """The discovery range from ROS's environment variables, defaulting to :attr:`Discovery.LOCALHOST`.

    ``ROS_AUTOMATIC_DISCOVERY_RANGE`` (Iron+): ``LOCALHOST``/``OFF`` → localhost, ``SUBNET``/
    ``SYSTEM_DEFAULT`` → subnet; else ``ROS_LOCALHOST_ONLY`` (Humble): ``1`` → localhost, ``0`` → subnet;
    neither set → localhost (dockbench's default; ROS's own default is the subnet).
    """
    rng = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "").strip().upper()
    if rng in ("LOCALHOST", "OFF"):
        return Discovery.LOCALHOST
    if rng in ("SUBNET", "SYSTEM_DEFAULT"):
        return Discovery.SUBNET
    only = os.environ.get("ROS_LOCALHOST_ONLY", "").strip()
    if only == "0":
        return Discovery.SUBNET
    return Discovery.LOCALHOST


# ---------------------------------------------------------------------------------------------- interface
Callback = Callable[[JointState], None]


class Publisher(abc.ABC):
    """Publishes :class:`JointState` (or the endpoint's ``msg_type``) on one topic. Thread-safe."""

    def __init__(self, topic: str, qos: QoS, codec: Any = None) -> None:
        self.topic = topic
        self.qos = qos
        self.codec = codec or JOINT_STATE_CODEC
        self._closed = False

    def publish(self, msg: Any) -> None:
        """Send ``msg``; :class:`TransportError` after :meth:`close` or for a message of the wrong type."""
        if self._closed:
            raise TransportError(f"publisher on {self.topic} is closed")
        self.codec.check(msg)
        self._publish(msg)

    @abc.abstractmethod
    def _publish(self, msg: JointState) -> None: ...

    @abc.abstractmethod
    def subscription_count(self) -> int:
        """Number of matched subscriptions (all processes)."""

    def close(self) -> None:
        """Stop publishing (idempotent)."""
        if not self._closed:
            self._closed = True
            self._close()

    def _close(self) -> None:  # noqa: B027 - optional hook
        pass


class Subscription(abc.ABC):
    """A callback subscription on one topic. Payloads that do not decode as the topic's type are
    dropped (the callback never sees them), counted per reason in :attr:`malformed_by_reason` and
    logged once per reason."""

    def __init__(self, topic: str, qos: QoS, codec: Any = None) -> None:
        self.topic = topic
        self.qos = qos
        self.codec = codec or JOINT_STATE_CODEC
        self._closed = False
        self._malformed: dict[str, int] = {}
        self._malformed_lock = threading.Lock()

    @property
    def malformed_by_reason(self) -> dict[str, int]:
        """Payloads dropped as malformed, per reason (:attr:`bridges.cdr.CdrError.kind`; a copy)."""
        with self._malformed_lock:
            return dict(self._malformed)

    def _count_malformed(self, kind: str, message: str) -> None:
        with self._malformed_lock:
            first = kind not in self._malformed
            self._malformed[kind] = self._malformed.get(kind, 0) + 1
        if first:
            log.warning("%s: malformed %s payload dropped (%s): %s [further '%s' payloads are only counted]",
                        self.topic, self.codec.type_name, kind, message, kind)

    @abc.abstractmethod
    def publisher_count(self) -> int:
        """Number of matched publishers on the topic (all processes, this one included)."""

    def close(self) -> None:
        """Stop receiving (idempotent); no callback starts after this returns."""
        if not self._closed:
            self._closed = True
            self._close()

    def _close(self) -> None:  # noqa: B027 - optional hook
        pass


class Transport(abc.ABC):
    """A connection to a ROS 2 graph (or the in-process bus) that creates publishers and subscriptions.

    The base class validates topic names and QoS, guards callbacks and tracks the endpoints it made so
    :meth:`close` releases them; a backend implements ``_create_publisher``/``_create_subscription``.
    Use as a context manager or call :meth:`close`.
    """

    backend: str = "?"
    """Registry name of the backend."""

    def __init__(self, domain_id: int | None = None) -> None:
        self.domain_id = domain_id_from_env() if domain_id is None else int(domain_id)
        self._endpoints: list[Publisher | Subscription] = []
        self._closed = False
        self._warned: set[tuple[str, str]] = set()

    def create_publisher(self, topic: str, qos: QoS = QOS_DEFAULT, msg_type: Any = None) -> Publisher:
        """A :class:`Publisher` on the absolute ROS 2 ``topic``: of JointState records, or of
        ``msg_type`` (a :class:`bridges.msgs.Struct`) as dicts."""
        self._check_open()
        pub = self._create_publisher(validate_topic(topic), qos, codec_for(msg_type))
        self._endpoints.append(pub)
        return pub

    def create_subscription(self, topic: str, callback: Callback, qos: QoS = QOS_DEFAULT,
                            msg_type: Any = None) -> Subscription:
        """Call ``callback(msg)`` for each message received on ``topic`` (on a backend thread): a
        JointState record, or a dict of ``msg_type``."""
        self._check_open()
        sub = self._create_subscription(validate_topic(topic), self._guard(topic, callback), qos,
                                        codec_for(msg_type))
        self._endpoints.append(sub)
        return sub

    def close(self) -> None:
        """Close every endpoint made by this transport, then the backend (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for ep in reversed(self._endpoints):
            ep.close()
        self._endpoints.clear()
        self._shutdown()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise TransportError(f"{self.backend} transport is closed")

    def _guard(self, topic: str, callback: Callback) -> Callback:
        def guarded(msg: JointState) -> None:
            try:
                callback(msg)
            except Exception as exc:  # noqa: BLE001 - a callback bug must not stop the stream
                key = (topic, type(exc).__name__)
                if key not in self._warned:
                    self._warned.add(key)
                    log.exception("callback on %s raised %s (logged once per type)", topic,
                                  type(exc).__name__)

        return guarded

    @abc.abstractmethod
    def _create_publisher(self, topic: str, qos: QoS, codec: Any) -> Publisher: ...

    @abc.abstractmethod
    def _create_subscription(self, topic: str, callback: Callback, qos: QoS, codec: Any) -> Subscription: ...

    def _shutdown(self) -> None:  # noqa: B027 - optional hook
        pass


# ---------------------------------------------------------------------------------------------- in-process
class InProcessBus:
    """The medium of the ``inprocess`` backend: topics → endpoints, one bus per domain id by default.

    Delivery is synchronous in the publisher's thread: the message is encoded to CDR once and decoded
    per matched subscription. DDS matching is mimicked (a RELIABLE reader ignores a BEST_EFFORT writer)
    so QoS mistakes show up in tests too.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subs: dict[str, list[_InProcSubscription]] = {}
        self._pubs: dict[str, list[_InProcPublisher]] = {}

    def _add(self, table: dict, ep: Any) -> None:
        with self._lock:
            table.setdefault(ep.topic, []).append(ep)

    def _remove(self, table: dict, ep: Any) -> None:
        with self._lock:
            eps = table.get(ep.topic, [])
            if ep in eps:
                eps.remove(ep)

    def publisher_count(self, topic: str, reader_qos: QoS | None = None, type_name: str | None = None) -> int:
        with self._lock:
            pubs = list(self._pubs.get(topic, ()))
        return sum(1 for p in pubs if (reader_qos is None or reader_qos.matches_writer(p.qos))
                   and (type_name is None or p.codec.type_name == type_name))

    def subscription_count(self, topic: str, writer_qos: QoS | None = None, type_name: str | None = None) -> int:
        with self._lock:
            subs = list(self._subs.get(topic, ()))
        return sum(1 for s in subs if (writer_qos is None or s.qos.matches_writer(writer_qos))
                   and (type_name is None or s.codec.type_name == type_name))

    def deliver(self, topic: str, writer_qos: QoS, payload: bytes, type_name: str = ROS_TYPE_NAME) -> None:
        """Hand ``payload`` to every matched subscription: same topic and type, QoS compatible (DDS
        matches endpoints by topic name and type)."""
        with self._lock:
            subs = [s for s in self._subs.get(topic, ())
                    if s.qos.matches_writer(writer_qos) and s.codec.type_name == type_name]
        for s in subs:
            s._deliver(payload)


_BUSES: dict[int, InProcessBus] = {}
_BUSES_LOCK = threading.Lock()


def inprocess_bus(domain_id: int) -> InProcessBus:
    """The process-wide in-process bus of ``domain_id`` (created on first use)."""
    with _BUSES_LOCK:
        return _BUSES.setdefault(domain_id, InProcessBus())


class _InProcPublisher(Publisher):
    def __init__(self, bus: InProcessBus, topic: str, qos: QoS, codec: Any = None) -> None:
        super().__init__(topic, qos, codec)
        self._bus = bus
        bus._add(bus._pubs, self)

    def _publish(self, msg: Any) -> None:
        self._bus.deliver(self.topic, self.qos, self.codec.to_cdr(msg), self.codec.type_name)

    def subscription_count(self) -> int:
        return self._bus.subscription_count(self.topic, self.qos, self.codec.type_name)

    def _close(self) -> None:
        self._bus._remove(self._bus._pubs, self)


class _InProcSubscription(Subscription):
    def __init__(self, bus: InProcessBus, topic: str, callback: Callback, qos: QoS, codec: Any = None) -> None:
        super().__init__(topic, qos, codec)
        self._bus = bus
        self._callback = callback
        self._lock = threading.Lock()  # serialises callbacks like a single DDS listener thread
        bus._add(bus._subs, self)

    def _deliver(self, payload: bytes) -> None:
        try:
            msg = self.codec.from_cdr(payload)
        except cdr.CdrError as exc:
            self._count_malformed(exc.kind, str(exc))
            return
        with self._lock:
            if not self._closed:
                self._callback(msg)

    def publisher_count(self) -> int:
        return self._bus.publisher_count(self.topic, self.qos, self.codec.type_name)

    def _close(self) -> None:
        self._bus._remove(self._bus._subs, self)
        with self._lock:  # wait for a running callback
            pass


class InProcessTransport(Transport):
    """Backend ``inprocess``: no network; endpoints of one domain id in one process see each other.

    Args:
        domain_id: bus selector (default ``ROS_DOMAIN_ID`` or 0).
        bus: an explicit :class:`InProcessBus` (isolates tests from each other).
    """

    backend = "inprocess"

    def __init__(self, domain_id: int | None = None, *, bus: InProcessBus | None = None, **_: Any) -> None:
        super().__init__(domain_id)
        self.bus = bus if bus is not None else inprocess_bus(self.domain_id)

    def _create_publisher(self, topic: str, qos: QoS, codec: Any = None) -> Publisher:
        return _InProcPublisher(self.bus, topic, qos, codec)

    def _create_subscription(self, topic: str, callback: Callback, qos: QoS, codec: Any = None) -> Subscription:
        return _InProcSubscription(self.bus, topic, callback, qos, codec)


# ---------------------------------------------------------------------------------------------- cyclonedds
SPDP_INTERVAL_S = 1.0
"""Participant announcement period [s] (Cyclone's 30 s default misses late joiners on unicast)."""
MAX_AUTO_PARTICIPANT_INDEX = 32
"""Unicast discovery probes participant indices 0..this on each peer (Cyclone's default 9 is too few
for a mirror + mock + bridge + ROS tools on one host)."""


def cyclone_config(discovery: Discovery) -> str:
    """The CYCLONEDDS_URI-style XML the cyclonedds backend uses when ``CYCLONEDDS_URI`` is not set.

    ``localhost``: interface 127.0.0.1, no multicast, unicast peer 127.0.0.1, automatic participant
    index up to :data:`MAX_AUTO_PARTICIPANT_INDEX`, SPDP every :data:`SPDP_INTERVAL_S`.
    ``subnet``: Cyclone's interface choice with multicast, the same index and SPDP settings.
    """
    spdp = f"<SPDPInterval>{SPDP_INTERVAL_S:g}s</SPDPInterval>"
    index = (f"<ParticipantIndex>auto</ParticipantIndex>"
             f"<MaxAutoParticipantIndex>{MAX_AUTO_PARTICIPANT_INDEX}</MaxAutoParticipantIndex>")
    if discovery is Discovery.LOCALHOST:
        general = ('<General><Interfaces><NetworkInterface address="127.0.0.1"/></Interfaces>'
                   "<AllowMulticast>false</AllowMulticast></General>")
        disc = f'<Discovery>{index}<Peers><Peer address="127.0.0.1"/></Peers>{spdp}</Discovery>'
    else:
        general = ""
        disc = f"<Discovery>{index}{spdp}</Discovery>"
    return f'<CycloneDDS><Domain Id="any">{general}{disc}</Domain></CycloneDDS>'


_CYCLONE: dict[str, Any] = {}
_CYCLONE_LOCK = threading.Lock()


def _cyclone() -> dict[str, Any]:
    """Import cyclonedds once and define the ROS 2 message types; TransportError if not installed."""
    with _CYCLONE_LOCK:
        if _CYCLONE:
            return _CYCLONE
        try:
            from dataclasses import dataclass

            from cyclonedds.core import Listener
            from cyclonedds.domain import Domain, DomainParticipant
            from cyclonedds.idl import IdlStruct
            from cyclonedds.idl.annotations import final
            from cyclonedds.idl.types import float64, int32, sequence, uint32
            from cyclonedds.pub import DataWriter
            from cyclonedds.qos import Policy, Qos
            from cyclonedds.sub import DataReader
            from cyclonedds.topic import Topic
            from cyclonedds.util import duration
        except ImportError as exc:
            raise TransportError(
                f"the cyclonedds backend needs the 'cyclonedds' package ({exc}); install the optional "
                f"extra with: {INSTALL_HINT}"
            ) from None

        def idl_struct(typename: str, fields: dict[str, Any]) -> type:
            # built with real annotation objects: this module's `from __future__ import annotations`
            # would turn class-body annotations into strings that cyclonedds cannot resolve
            def body(ns: dict) -> None:
                ns["__annotations__"] = dict(fields)

            cls = types.new_class(typename.split("::")[-1], (IdlStruct,), {"typename": typename}, body)
            return final(dataclass(cls))

        Time_ = idl_struct("builtin_interfaces::msg::dds_::Time_", {"sec": int32, "nanosec": uint32})
        Header_ = idl_struct("std_msgs::msg::dds_::Header_", {"stamp": Time_, "frame_id": str})
        JointState_ = idl_struct(DDS_TYPE_NAME, {
            "header": Header_, "name": sequence[str], "position": sequence[float64],
            "velocity": sequence[float64], "effort": sequence[float64],
        })

        prim = {"int32": int32, "uint32": uint32, "float64": float64, "string": str}
        built: dict[str, type] = {}

        def struct(s: Any) -> type:
            """The IdlStruct class of a bridges.msgs.Struct (built once per type name)."""
            if s.name not in built:
                fields = {}
                for f in s.fields:
                    t = prim[f.type] if isinstance(f.type, str) else struct(f.type)
                    fields[f.name] = sequence[t] if f.sequence else t
                built[s.name] = idl_struct(s.dds_name, fields)
            return built[s.name]

        _CYCLONE.update(
            Listener=Listener, Domain=Domain, DomainParticipant=DomainParticipant, DataWriter=DataWriter,
            DataReader=DataReader, Topic=Topic, Policy=Policy, Qos=Qos, duration=duration,
            Time_=Time_, Header_=Header_, JointState_=JointState_, domains={}, struct=struct,
        )
        return _CYCLONE


def cyclone_joint_state_type() -> type:
    """The cyclonedds ``IdlStruct`` class for ``sensor_msgs::msg::dds_::JointState_`` (for tests)."""
    return _cyclone()["JointState_"]


def _dds_delete(entity: Any) -> None:
    """Delete a cyclonedds entity now instead of at garbage collection (``Entity.__del__`` logic)."""
    ref = getattr(entity, "_ref", None)
    if ref is not None and ref in entity._entities:
        del entity._entities[ref]
        entity._delete(ref)


class _CyclonePublisher(Publisher):
    def __init__(self, t: CycloneTransport, topic: str, qos: QoS, codec: Any = None) -> None:
        super().__init__(topic, qos, codec)
        c = t._c
        self._c = c
        self._writer = c["DataWriter"](t._participant, t._topic(topic, self.codec),
                                       t._qos(qos, writer=True, user_data=self.codec.user_data))

    def _publish(self, msg: Any) -> None:
        self._writer.write(self.codec.to_cyclone(self._c, msg))

    def subscription_count(self) -> int:
        return int(self._writer.get_publication_matched_status().current_count)

    def _close(self) -> None:
        _dds_delete(self._writer)


class _CycloneSubscription(Subscription):
    def __init__(self, t: CycloneTransport, topic: str, callback: Callback, qos: QoS, codec: Any = None) -> None:
        super().__init__(topic, qos, codec)
        c = t._c
        self._callback = callback
        self._lock = threading.Lock()
        self._type = self.codec.cyclone_type(c)
        sub = self

        class _OnData(c["Listener"]):
            def on_data_available(self, reader: Any) -> None:
                sub._drain(reader)

        self._take = qos.depth
        self._reader = c["DataReader"](t._participant, t._topic(topic, self.codec),
                                       t._qos(qos, writer=False, user_data=self.codec.user_data),
                                       listener=_OnData())
        self._drain(self._reader)  # samples that arrived before the Python object existed

    def _drain(self, reader: Any) -> None:
        if reader is None:  # listener fired inside the DataReader constructor: not registered yet
            return
        with self._lock:
            if self._closed:
                return
            while True:
                samples = reader.take(N=self._take)
                if not samples:
                    return
                for s in samples:
                    if not isinstance(s, self._type):  # InvalidSample: a writer went away (no data)
                        continue
                    self._callback(self.codec.from_cyclone(s))

    def publisher_count(self) -> int:
        return int(self._reader.get_subscription_matched_status().current_count)

    def _close(self) -> None:
        # not under self._lock: dds_delete waits for a running listener, which may be waiting for the lock;
        # a listener that starts now sees _closed and returns
        _dds_delete(self._reader)


class CycloneTransport(Transport):
    """Backend ``cyclonedds``: a bare DDS participant that speaks ROS 2's mapping.

    Args:
        domain_id: DDS domain (default ``ROS_DOMAIN_ID`` or 0).
        discovery: :class:`Discovery` (or its value); default :func:`discovery_from_env`. Ignored when
            ``CYCLONEDDS_URI`` is set: then that configuration is used unchanged.

    The participant shows its topics in ``ros2 topic list/echo`` but is not a node in ``ros2 node list``.

    Raises:
        TransportError: cyclonedds is not installed (the message gives :data:`INSTALL_HINT`), or the
            domain cannot be created.
    """

    backend = "cyclonedds"

    def __init__(self, domain_id: int | None = None, *, discovery: Discovery | str | None = None,
                 **_: Any) -> None:
        super().__init__(domain_id)
        self._c = c = _cyclone()
        self.discovery = Discovery(discovery) if discovery is not None else discovery_from_env()
        with _CYCLONE_LOCK:
            if self.domain_id not in c["domains"]:  # one Domain object per id and process, kept alive
                if os.environ.get("CYCLONEDDS_URI"):
                    log.info("cyclonedds: using CYCLONEDDS_URI; discovery=%s ignored", self.discovery.value)
                    c["domains"][self.domain_id] = None
                else:
                    try:
                        c["domains"][self.domain_id] = (
                            c["Domain"](self.domain_id, cyclone_config(self.discovery)), self.discovery
                        )
                    except Exception as exc:  # noqa: BLE001 - DDSException and friends
                        raise TransportError(
                            f"cyclonedds: cannot create domain {self.domain_id}: {exc}"
                        ) from None
            else:
                entry = c["domains"][self.domain_id]
                if entry is not None and entry[1] is not self.discovery:
                    log.warning("cyclonedds: domain %d already configured for %s in this process; "
                                "discovery=%s ignored", self.domain_id, entry[1].value, self.discovery.value)
        try:
            self._participant = c["DomainParticipant"](self.domain_id)
        except Exception as exc:  # noqa: BLE001
            raise TransportError(
                f"cyclonedds: cannot create a participant on domain {self.domain_id}: {exc}"
            ) from None
        self._topics: dict[str, Any] = {}

    def _topic(self, topic: str, codec: Any = None) -> Any:
        codec = codec or JOINT_STATE_CODEC
        if topic not in self._topics:
            self._topics[topic] = (self._c["Topic"](self._participant, dds_topic_name(topic),
                                                    codec.cyclone_type(self._c)), codec.type_name)
        entity, type_name = self._topics[topic]
        if type_name != codec.type_name:
            raise TransportError(f"topic {topic} already carries {type_name} in this transport, not {codec.type_name}")
        return entity

    def _qos(self, qos: QoS, *, writer: bool, user_data: bytes = USER_DATA) -> Any:
        P = self._c["Policy"]
        rel = (P.Reliability.Reliable(self._c["duration"](milliseconds=100))
               if qos.reliability is Reliability.RELIABLE else P.Reliability.BestEffort)
        # writers produce XCDR1 only (ROS 2 cannot read XCDR2); readers accept both
        rep = (P.DataRepresentation(use_cdrv0_representation=True) if writer else
               P.DataRepresentation(use_cdrv0_representation=True, use_xcdrv2_representation=True))
        return self._c["Qos"](rel, P.Durability.Volatile, P.History.KeepLast(qos.depth),
                              P.Userdata(user_data), rep)

    def _create_publisher(self, topic: str, qos: QoS, codec: Any = None) -> Publisher:
        return _CyclonePublisher(self, topic, qos, codec)

    def _create_subscription(self, topic: str, callback: Callback, qos: QoS, codec: Any = None) -> Subscription:
        return _CycloneSubscription(self, topic, callback, qos, codec)

    def _shutdown(self) -> None:
        for t, _ in self._topics.values():
            _dds_delete(t)
        self._topics.clear()
        _dds_delete(self._participant)


# ---------------------------------------------------------------------------------------------- rclpy
def rclpy_available() -> tuple[bool, str]:
    """Whether ``rclpy`` and ``sensor_msgs`` import cleanly; ``(False, reason)`` otherwise."""
    try:
        import rclpy  # noqa: F401
        from sensor_msgs.msg import JointState as _Ros  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - unsourced installs raise library errors, not ImportError
        return False, f"{type(exc).__name__}: {exc}"
    return True, ""


class _RclpyPublisher(Publisher):
    def __init__(self, t: RclpyTransport, topic: str, qos: QoS, codec: Any = None) -> None:
        super().__init__(topic, qos, codec)
        self._t = t
        self._cls = t._msg_class(self.codec)
        self._pub = t._node.create_publisher(self._cls, topic, t._profile(qos))

    def _publish(self, msg: Any) -> None:
        self._pub.publish(self.codec.to_rclpy(self._cls, msg))

    def subscription_count(self) -> int:
        return int(self._pub.get_subscription_count())

    def _close(self) -> None:
        self._t._node.destroy_publisher(self._pub)


class _RclpySubscription(Subscription):
    def __init__(self, t: RclpyTransport, topic: str, callback: Callback, qos: QoS, codec: Any = None) -> None:
        super().__init__(topic, qos, codec)
        self._t = t
        codec = self.codec

        def on_msg(m: Any) -> None:
            if not self._closed:
                callback(codec.from_rclpy(m))

        self._sub = t._node.create_subscription(t._msg_class(codec), topic, on_msg, t._profile(qos))

    def publisher_count(self) -> int:
        return int(self._t._node.count_publishers(self.topic))

    def _close(self) -> None:
        self._t._node.destroy_subscription(self._sub)


class RclpyTransport(Transport):
    """Backend ``rclpy``: one ROS 2 node spun by a single-threaded executor on a daemon thread.

    Args:
        domain_id: default ``ROS_DOMAIN_ID`` or 0. node_name: the node's name.

    Discovery follows ROS's environment (``ROS_AUTOMATIC_DISCOVERY_RANGE`` / ``ROS_LOCALHOST_ONLY``,
    ``RMW_IMPLEMENTATION``).

    Raises:
        TransportError: rclpy or sensor_msgs does not import (the reason is in the message).
    """

    backend = "rclpy"

    def __init__(self, domain_id: int | None = None, *, node_name: str = "dockbench", **_: Any) -> None:
        super().__init__(domain_id)
        ok, why = rclpy_available()
        if not ok:
            raise TransportError(f"rclpy backend unavailable ({why}); source a ROS 2 install, or use the "
                                 f"cyclonedds backend ({INSTALL_HINT})")
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from sensor_msgs.msg import JointState as Msg

        self._rclpy = rclpy
        self._Msg = Msg
        self._context = rclpy.context.Context()
        rclpy.init(context=self._context, domain_id=self.domain_id)
        self._node = rclpy.create_node(node_name, context=self._context)
        self._executor = SingleThreadedExecutor(context=self._context)
        self._executor.add_node(self._node)
        self._thread = threading.Thread(target=self._spin, name=f"rclpy-{node_name}", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            self._executor.spin()
        except Exception:  # noqa: BLE001 - ExternalShutdownException on close
            pass

    def _profile(self, qos: QoS) -> Any:
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

        return QoSProfile(
            history=HistoryPolicy.KEEP_LAST, depth=qos.depth, durability=DurabilityPolicy.VOLATILE,
            reliability=(ReliabilityPolicy.RELIABLE if qos.reliability is Reliability.RELIABLE
                         else ReliabilityPolicy.BEST_EFFORT),
        )

    def _msg_class(self, codec: Any) -> type:
        try:
            return codec.rclpy_class()
        except Exception as exc:  # noqa: BLE001 - a missing message package fails with assorted errors
            raise TransportError(f"rclpy: message type {codec.type_name} is not importable ({exc}); install "
                                 f"its ROS package (e.g. ros-<distro>-common-interfaces)") from None

    def _create_publisher(self, topic: str, qos: QoS, codec: Any = None) -> Publisher:
        return _RclpyPublisher(self, topic, qos, codec)

    def _create_subscription(self, topic: str, callback: Callback, qos: QoS, codec: Any = None) -> Subscription:
        return _RclpySubscription(self, topic, callback, qos, codec)

    def _shutdown(self) -> None:
        self._executor.shutdown(timeout_sec=1.0)
        self._node.destroy_node()
        self._rclpy.shutdown(context=self._context)
        self._thread.join(timeout=2.0)


# ---------------------------------------------------------------------------------------------- selection
BACKENDS: dict[str, type[Transport]] = {
    "rclpy": RclpyTransport,
    "cyclonedds": CycloneTransport,
    "inprocess": InProcessTransport,
}
"""Registry of transport backends by name (``auto`` is resolved by :func:`open_transport`)."""


def open_transport(backend: str = "auto", *, domain_id: int | None = None, **options: Any) -> Transport:
    """Open a transport.

    Args:
        backend: ``auto`` (rclpy if it imports cleanly, else cyclonedds), or a name in :data:`BACKENDS`.
        domain_id: ROS domain id (default: ``ROS_DOMAIN_ID``, else 0).
        options: backend options (``discovery`` for cyclonedds, ``node_name`` for rclpy, ``bus`` for
            inprocess); options a backend does not use are ignored.

    Raises:
        TransportError: unknown backend (the message lists the known ones), or the backend is unavailable
            (the message says how to install it).
    """
    if backend == "auto":
        ok, why = rclpy_available()
        if ok:
            return RclpyTransport(domain_id, **options)
        log.debug("rclpy not usable (%s); trying cyclonedds", why)
        try:
            return CycloneTransport(domain_id, **options)
        except TransportError as exc:
            raise TransportError(
                f"no ROS 2 transport available: rclpy does not import ({why}) and {exc}"
            ) from None
    try:
        cls = BACKENDS[backend]
    except KeyError:
        raise TransportError(
            f"unknown transport backend {backend!r}; known: auto, {', '.join(sorted(BACKENDS))}"
        ) from None
    return cls(domain_id, **options)


def wait_until(predicate: Callable[[], bool], timeout: float, period: float = 0.01) -> bool:
    """Poll ``predicate`` every ``period`` [s] until it is true or ``timeout`` [s] passes; its last value."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(period)


def all_finite(values: Sequence[float]) -> bool:
    """True if every value is a finite float."""
    return all(math.isfinite(v) for v in values)
