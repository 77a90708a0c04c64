"""Backend ``inprocess`` of :mod:`bridges.ros2`: a synchronous in-process bus (no network), for tests and
single-process demos. Every message goes through the pure-Python CDR codec (:mod:`bridges.cdr`), so receivers
never alias the sender's data and the codec is exercised on every test message.
"""

from __future__ import annotations

import threading
from typing import Any

from dockbench.bridges import cdr
from dockbench.bridges.ros2_endpoints import Callback, Publisher, QoS, Subscription, Transport
from dockbench.bridges.ros2_messages import ROS_TYPE_NAME


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
