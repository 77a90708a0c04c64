"""Backend ``cyclonedds`` of :mod:`bridges.ros2`: the ``cyclonedds`` Python wheel speaking ROS 2's DDS mapping
directly (topic ``/a/b`` → ``rt/a/b``, XCDR1 little endian, the REP-2011 type hash in the endpoints' USER_DATA;
the table is in :mod:`bridges.ros2`), so a plain ``pip install -e '.[ros2]'`` talks to ROS 2 nodes.
"""

from __future__ import annotations

import logging
import os
import threading
import types
from typing import Any

from dockbench.bridges.ros2_endpoints import (
    INSTALL_HINT,
    Callback,
    Discovery,
    Publisher,
    QoS,
    Reliability,
    Subscription,
    Transport,
    dds_topic_name,
    discovery_from_env,
)
from dockbench.bridges.ros2_messages import DDS_TYPE_NAME, JOINT_STATE_CODEC, USER_DATA, TransportError

log = logging.getLogger("dockbench.bridges.ros2")  # one logger for the transport, whichever module logs

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
