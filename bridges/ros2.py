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

The parts, one concept a module (every public name is importable from here):

* :mod:`bridges.ros2_messages` — the :class:`JointState` record, the codecs of an endpoint's message type,
  :class:`TransportError`;
* :mod:`bridges.ros2_endpoints` — QoS, topic names, ROS's environment, the abstract :class:`Publisher`,
  :class:`Subscription` and :class:`Transport`;
* :mod:`bridges.ros2_inprocess`, :mod:`bridges.ros2_cyclonedds`, :mod:`bridges.ros2_rclpy` — the backends;
* this module — the backend registry :data:`BACKENDS`, :func:`open_transport` and two small helpers.
"""


from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from dockbench.bridges.ros2_cyclonedds import (
    MAX_AUTO_PARTICIPANT_INDEX,
    SPDP_INTERVAL_S,
    CycloneTransport,
    cyclone_config,
    cyclone_joint_state_type,
)
from dockbench.bridges.ros2_endpoints import (
    INSTALL_HINT,
    QOS_DEFAULT,
    QOS_SENSOR_DATA,
    Callback,
    Discovery,
    Publisher,
    QoS,
    Reliability,
    Subscription,
    Transport,
    dds_topic_name,
    discovery_from_env,
    domain_id_from_env,
    validate_topic,
)
from dockbench.bridges.ros2_inprocess import InProcessBus, InProcessTransport, inprocess_bus
from dockbench.bridges.ros2_messages import (
    DDS_TYPE_NAME,
    JOINT_STATE_CODEC,
    JOINT_STATE_TYPE_HASH,
    ROS_TYPE_NAME,
    USER_DATA,
    JointState,
    TransportError,
    codec_for,
)
from dockbench.bridges.ros2_rclpy import RclpyTransport, rclpy_available

__all__ = [
    "BACKENDS", "DDS_TYPE_NAME", "INSTALL_HINT", "JOINT_STATE_CODEC", "JOINT_STATE_TYPE_HASH",
    "MAX_AUTO_PARTICIPANT_INDEX", "QOS_DEFAULT", "QOS_SENSOR_DATA", "ROS_TYPE_NAME", "SPDP_INTERVAL_S",
    "USER_DATA", "Callback", "CycloneTransport", "Discovery", "InProcessBus", "InProcessTransport", "JointState",
    "Publisher", "QoS", "RclpyTransport", "Reliability", "Subscription", "Transport", "TransportError",
    "all_finite", "codec_for", "cyclone_config", "cyclone_joint_state_type", "dds_topic_name",
    "discovery_from_env", "domain_id_from_env", "inprocess_bus", "open_transport", "rclpy_available",
    "validate_topic", "wait_until",
]

log = logging.getLogger("dockbench.bridges.ros2")  # one logger for the transport, whichever module logs


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
