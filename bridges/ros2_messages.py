"""What travels on a ROS 2 topic of :mod:`bridges.ros2`: the :class:`JointState` record and the per-backend
codecs of an endpoint's message type, and the transport's error.

An endpoint carries ``sensor_msgs/msg/JointState`` as :class:`JointState` records (the hand-written codec of
:mod:`bridges.cdr`), or a :class:`bridges.msgs.Struct` type as nested dicts (:func:`codec_for`). A codec turns
a message into each backend's form and back: CDR bytes (in process), a cyclonedds sample, an rclpy message.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from dockbench.bridges import cdr
from dockbench.sim.errors import DockbenchError

ROS_TYPE_NAME = "sensor_msgs/msg/JointState"
"""The ROS 2 type every topic of this module carries."""
DDS_TYPE_NAME = "sensor_msgs::msg::dds_::JointState_"
"""The DDS type name of :data:`ROS_TYPE_NAME` under ROS 2's mapping."""
JOINT_STATE_TYPE_HASH = "RIHS01_a13ee3a330e346c9d87b5aa18d24e11690752bd33a0350f11c5882bc9179260e"
"""REP-2011 type hash of sensor_msgs/msg/JointState (ROS 2 Iron and later)."""
USER_DATA = f"typehash={JOINT_STATE_TYPE_HASH};".encode("ascii")
"""Endpoint USER_DATA that rmw_cyclonedds / rmw_fastrtps put on JointState readers and writers."""


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

