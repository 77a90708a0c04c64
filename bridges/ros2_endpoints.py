"""The neutral interface of :mod:`bridges.ros2`: QoS, topic names, ROS's environment, and the abstract
:class:`Publisher`, :class:`Subscription` and :class:`Transport` every backend implements
(:mod:`bridges.ros2_inprocess`, :mod:`bridges.ros2_cyclonedds`, :mod:`bridges.ros2_rclpy`).

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
import os
import re
import threading
from collections.abc import Callable
from typing import Any

from dockbench.bridges.ros2_messages import JOINT_STATE_CODEC, JointState, TransportError, codec_for
from dockbench.sim.extras import install_hint

log = logging.getLogger("dockbench.bridges.ros2")  # one logger for the transport, whichever module logs

INSTALL_HINT = install_hint("ros2")
"""How to get the cyclonedds backend (the optional extra declared in pyproject.toml)."""

_TOPIC_RE = re.compile(r"^(/[A-Za-z_][A-Za-z0-9_]*)+$")


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
