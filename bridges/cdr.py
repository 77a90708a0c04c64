"""Plain CDR (XCDR1, little endian) for ``sensor_msgs/msg/JointState``, in pure Python.

This is the byte layout ROS 2 puts on the wire for a JointState (DDS type
``sensor_msgs::msg::dds_::JointState_``, see ``docs/ros2.md``). It is independent of any DDS library:
the in-process transport round-trips every message through it, and the tests pin it against a
hand-computed reference and, where ``cyclonedds`` is installed, against Cyclone's own serializer.

Layout (OMG DDS-XTypes 1.3 §7.4.3 "XCDR1"; all structs ``@final``, no keys, no optionals)::

    encapsulation header   00 01 00 00          CDR_LE (0x0001), options 0
    -- body; every primitive is aligned to its own size (8 for double) from the body start --
    header.stamp.sec       int32
    header.stamp.nanosec   uint32
    header.frame_id        string   = uint32 length incl. NUL, UTF-8 bytes, NUL
    name                   sequence<string> = uint32 count, then each string (aligned 4)
    position               sequence<double> = uint32 count, then (aligned 8) count doubles
    velocity, effort       as position

An empty sequence is only its count: no alignment padding follows it (Cyclone DDS and Fast-CDR both
align lazily, before the first element). The encoder pads the whole payload to a multiple of 4 bytes,
like Cyclone's writer; the decoder accepts after the last field only that padding (at most 3 bytes,
ending the body on a multiple of 4) and rejects anything more (``trailing``): a payload with extra
bytes is not a JointState.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

from dockbench.sim.errors import DockbenchError

ENCAPSULATION_CDR_LE = b"\x00\x01\x00\x00"
"""XCDR1 (plain CDR) little-endian encapsulation header: representation id 0x0001, options 0."""
ENCAPSULATION_CDR_BE = b"\x00\x00\x00\x00"
"""XCDR1 big-endian encapsulation header (decoded, never produced)."""

MAX_SEQUENCE = 1 << 16
"""Largest sequence or string length the decoder accepts (a bound against corrupt lengths)."""


class CdrError(DockbenchError):
    """A CDR buffer is truncated, has an unsupported encapsulation, an impossible length or trailing
    bytes. ``kind``: ``no_header``, ``encapsulation``, ``truncated``, ``length``, ``string``,
    ``utf8``, ``trailing`` (encoder errors: ``value``), for counting rejections per reason."""

    def __init__(self, message: str, kind: str = "value"):
        super().__init__(message)
        self.kind = kind


class _Writer:
    """Append-only XCDR1 little-endian body writer (alignment relative to the body start)."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def _align(self, n: int) -> None:
        pad = -len(self.buf) % n
        if pad:
            self.buf += b"\x00" * pad

    def u32(self, v: int) -> None:
        self._align(4)
        self.buf += struct.pack("<I", v)

    def i32(self, v: int) -> None:
        self._align(4)
        self.buf += struct.pack("<i", v)

    def string(self, s: str) -> None:
        data = s.encode("utf-8")
        if b"\x00" in data:
            raise CdrError(f"string {s!r} contains a NUL character")
        self.u32(len(data) + 1)
        self.buf += data + b"\x00"

    def strings(self, items: Sequence[str]) -> None:
        self.u32(len(items))
        for s in items:
            self.string(s)

    def doubles(self, values: Sequence[float]) -> None:
        n = len(values)
        self.u32(n)
        if n:
            self._align(8)
            self.buf += struct.pack(f"<{n}d", *values)


class _Reader:
    """XCDR1 body reader with bounds checks; ``little`` selects the byte order."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes, little: bool) -> None:
        self.buf = memoryview(buf)
        self.pos = 0
        self.end = "<" if little else ">"

    def _align(self, n: int) -> None:
        self.pos += -self.pos % n

    def _take(self, n: int, what: str) -> memoryview:
        if self.pos + n > len(self.buf):
            raise CdrError(f"truncated CDR buffer while reading {what} (need {n} bytes at body offset "
                           f"{self.pos}, have {len(self.buf) - self.pos})", "truncated")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def u32(self, what: str) -> int:
        self._align(4)
        return struct.unpack(self.end + "I", self._take(4, what))[0]

    def i32(self, what: str) -> int:
        self._align(4)
        return struct.unpack(self.end + "i", self._take(4, what))[0]

    def count(self, what: str) -> int:
        n = self.u32(what)
        if n > MAX_SEQUENCE:
            raise CdrError(f"{what}: length {n} exceeds the limit {MAX_SEQUENCE}", "length")
        return n

    def string(self, what: str) -> str:
        n = self.count(what)
        if n == 0:
            raise CdrError(f"{what}: string length 0 (a CDR string carries at least its NUL)", "string")
        raw = bytes(self._take(n, what))
        if raw[-1] != 0:
            raise CdrError(f"{what}: string is not NUL-terminated", "string")
        try:
            return raw[:-1].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CdrError(f"{what}: invalid UTF-8 ({exc.reason})", "utf8") from None

    def strings(self, what: str) -> tuple[str, ...]:
        n = self.count(what)
        return tuple(self.string(f"{what}[{i}]") for i in range(n))

    def doubles(self, what: str) -> tuple[float, ...]:
        n = self.count(what)
        if n == 0:
            return ()
        self._align(8)
        return struct.unpack(f"{self.end}{n}d", self._take(8 * n, what))


def encode_joint_state(
    *,
    sec: int,
    nanosec: int,
    frame_id: str,
    name: Sequence[str],
    position: Sequence[float],
    velocity: Sequence[float],
    effort: Sequence[float],
) -> bytes:
    """Serialize one JointState to XCDR1 little endian, encapsulation header included.

    Args:
        sec, nanosec: ``header.stamp`` (int32 seconds, uint32 nanoseconds < 1e9).
        frame_id: ``header.frame_id``.
        name: joint names. position [rad or m], velocity [rad/s or m/s], effort [N·m or N]: doubles;
            the lengths are not checked against each other (ROS allows empty vectors).

    Returns:
        The payload, padded with zeros to a multiple of 4 bytes.

    Raises:
        CdrError: sec/nanosec out of range, a NUL inside a string.
    """
    if not -(2**31) <= sec < 2**31:
        raise CdrError(f"stamp.sec {sec} does not fit int32")
    if not 0 <= nanosec < 2**32:
        raise CdrError(f"stamp.nanosec {nanosec} does not fit uint32")
    w = _Writer()
    w.i32(sec)
    w.u32(nanosec)
    w.string(frame_id)
    w.strings(name)
    w.doubles(position)
    w.doubles(velocity)
    w.doubles(effort)
    body = w.buf
    body += b"\x00" * (-len(body) % 4)
    return ENCAPSULATION_CDR_LE + bytes(body)


def decode_joint_state(payload: bytes) -> dict:
    """Parse an XCDR1 JointState payload (either byte order).

    Returns:
        ``{"sec", "nanosec", "frame_id", "name", "position", "velocity", "effort"}`` with tuples for
        the sequences. The alignment padding after the last field (≤ 3 bytes, to a multiple of 4) is
        skipped.

    Raises:
        CdrError: unknown encapsulation (e.g. XCDR2), truncated buffer, a length above
            :data:`MAX_SEQUENCE`, a string without its NUL or with invalid UTF-8, bytes after the
            last field beyond the alignment padding.
    """
    head = bytes(payload[:4])
    if len(head) < 4:
        raise CdrError(f"CDR payload of {len(payload)} bytes has no encapsulation header", "no_header")
    if head[:2] == ENCAPSULATION_CDR_LE[:2]:
        little = True
    elif head[:2] == ENCAPSULATION_CDR_BE[:2]:
        little = False
    else:
        raise CdrError(f"unsupported encapsulation {head[:2].hex()} (expected 0001 CDR_LE or 0000 CDR_BE; "
                       f"XCDR2 is not used by ROS 2)", "encapsulation")
    r = _Reader(payload[4:], little)
    out = {
        "sec": r.i32("header.stamp.sec"),
        "nanosec": r.u32("header.stamp.nanosec"),
        "frame_id": r.string("header.frame_id"),
        "name": r.strings("name"),
        "position": r.doubles("position"),
        "velocity": r.doubles("velocity"),
        "effort": r.doubles("effort"),
    }
    rest = len(r.buf) - r.pos
    if rest > -r.pos % 4:
        raise CdrError(f"{rest} bytes after the last field (effort ends at body offset {r.pos}; at most "
                       f"{-r.pos % 4} bytes of alignment padding may follow)", "trailing")
    return out


def split_stamp(t: float) -> tuple[int, int]:
    """A time [s] as ``(sec, nanosec)`` with ``0 <= nanosec < 1e9`` (floor semantics, like rclpy)."""
    if not math.isfinite(t):
        raise CdrError(f"time {t} is not finite")
    ns = int(round(t * 1e9))
    return ns // 1_000_000_000, ns % 1_000_000_000
