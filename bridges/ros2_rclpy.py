"""Backend ``rclpy`` of :mod:`bridges.ros2`: a real ROS 2 node, used when ``rclpy`` and ``sensor_msgs`` import
cleanly (a sourced ROS install). The RMW and its discovery settings are ROS's own.
"""

from __future__ import annotations

import threading
from typing import Any

from dockbench.bridges.ros2_endpoints import (
    INSTALL_HINT,
    Callback,
    Publisher,
    QoS,
    Reliability,
    Subscription,
    Transport,
)
from dockbench.bridges.ros2_messages import TransportError


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
