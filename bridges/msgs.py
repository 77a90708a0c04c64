"""ROS 2 message types beyond JointState, from one schema each: the ``.msg`` text, the REP-2011 type
hash, an XCDR1 codec (one message, or a whole batch at once with numpy) and the ROS/DDS names.

A :class:`Struct` lists its fields in order; a field's type is a primitive (``int32``, ``uint32``,
``float64``, ``string``), a nested :class:`Struct`, or an unbounded sequence of either (``[]``).
Messages are nested dicts keyed by field name (``{"header": {"stamp": {"sec": 1, "nanosec": 0},
"frame_id": "world"}, "pose": {...}}``), the shape ``rclpy``'s ``message_to_ordereddict`` gives.

Layout on the wire: the same XCDR1 (plain CDR, little endian, ``@final``) rules as
:mod:`bridges.cdr`: every primitive aligned to its own size from the body start, a string as uint32
length including the NUL, UTF-8 bytes and the NUL; a sequence as a uint32 count then its elements
(doubles aligned to 8 only when the sequence is not empty). :func:`encode` and :func:`decode` cover one
message; :class:`BatchEncoder` encodes N messages whose strings and sequence lengths are the same
(e.g. every PoseStamped of a run with ``frame_id = "world"``): the layout is then fixed, so the
numbers of all N messages are written column by column into one (N, L) byte array.

Type hash (REP-2011, ROS 2 Iron and later): ``RIHS01_`` + SHA-256 of the JSON of the type description
(the type's fields and those of every type it references, sorted by name; field type ids from
``type_description_interfaces/msg/FieldType``). :func:`type_hash` computes it; it reproduces the
published hash of ``sensor_msgs/msg/JointState`` (a test pins this), so the hashes of the other types
are computed the same way rather than copied.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from dockbench.bridges.cdr import ENCAPSULATION_CDR_BE, ENCAPSULATION_CDR_LE, MAX_SEQUENCE, CdrError

#: primitive name → (struct format, size = alignment [bytes], REP-2011 field type id)
PRIMITIVES: dict[str, tuple[str, int, int]] = {
    "int32": ("i", 4, 6),
    "uint32": ("I", 4, 7),
    "float64": ("d", 8, 11),
    "string": ("", 4, 17),
}
_NESTED_TYPE_ID = 1
_SEQUENCE_OFFSET = 144  # FieldType: UNBOUNDED_SEQUENCE = base id + 144


@dataclass(frozen=True)
class Field:
    """One field: ``name`` and its type (a primitive name or a :class:`Struct`), ``sequence`` for
    ``T[]``."""

    name: str
    type: str | Struct
    sequence: bool = False


@dataclass(frozen=True)
class Struct:
    """A ROS 2 message type.

    Attributes:
        name: ``pkg/msg/Name``.
        fields: the fields in wire order.
    """

    name: str
    fields: tuple[Field, ...]

    @property
    def dds_name(self) -> str:
        """The DDS type name under ROS 2's mapping (``pkg::msg::dds_::Name_``)."""
        pkg, sub, base = self.name.split("/")
        return f"{pkg}::{sub}::dds_::{base}_"

    @property
    def short_name(self) -> str:
        """``pkg/Name`` (the form a ``.msg`` file refers to its dependencies by)."""
        pkg, _, base = self.name.split("/")
        return f"{pkg}/{base}"

    def dependencies(self) -> list[Struct]:
        """Every struct this one references, directly or not, each once, sorted by name."""
        seen: dict[str, Struct] = {}

        def walk(s: Struct) -> None:
            for f in s.fields:
                if isinstance(f.type, Struct) and f.type.name not in seen:
                    seen[f.type.name] = f.type
                    walk(f.type)

        walk(self)
        return [seen[k] for k in sorted(seen)]

    def msg_text(self) -> str:
        """This type's ``.msg`` definition (field lines only, no comments or defaults)."""
        lines = []
        for f in self.fields:
            t = f.type.short_name if isinstance(f.type, Struct) else f.type
            lines.append(f"{t}{'[]' if f.sequence else ''} {f.name}")
        return "\n".join(lines) + "\n"

    def definition(self) -> str:
        """The full definition as ROS 2 bags and MCAP's ``ros2msg`` schema encoding store it: the
        type's fields, then each dependency after a line of 80 ``=`` and ``MSG: pkg/Name``."""
        parts = [self.msg_text()]
        for dep in self.dependencies():
            parts.append("=" * 80 + f"\nMSG: {dep.short_name}\n" + dep.msg_text())
        return "\n".join(parts)

    def type_hash(self) -> str:
        """REP-2011 ``RIHS01_…`` hash (see the module docstring)."""
        return type_hash(self)


def _field_type_desc(f: Field) -> dict[str, Any]:
    if isinstance(f.type, Struct):
        tid, nested = _NESTED_TYPE_ID, f.type.name
    else:
        tid, nested = PRIMITIVES[f.type][2], ""
    if f.sequence:
        tid += _SEQUENCE_OFFSET
    return {"type_id": tid, "capacity": 0, "string_capacity": 0, "nested_type_name": nested}


def _type_desc(s: Struct) -> dict[str, Any]:
    return {"type_name": s.name, "fields": [{"name": f.name, "type": _field_type_desc(f)} for f in s.fields]}


def type_hash(s: Struct) -> str:
    """The REP-2011 type hash of ``s``: ``RIHS01_`` + SHA-256 of the JSON (separators ``", "`` and
    ``": "``, keys in the order of ``type_description_interfaces``) of the type's description and its
    sorted referenced descriptions."""
    desc = {"type_description": _type_desc(s),
            "referenced_type_descriptions": [_type_desc(d) for d in s.dependencies()]}
    text = json.dumps(desc, skipkeys=False, ensure_ascii=True, indent=None, separators=(", ", ": "), sort_keys=False)
    return "RIHS01_" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------------- the types
def _s(name: str, *fields: tuple) -> Struct:
    return Struct(name, tuple(Field(*f) for f in fields))


TIME = _s("builtin_interfaces/msg/Time", ("sec", "int32"), ("nanosec", "uint32"))
HEADER = _s("std_msgs/msg/Header", ("stamp", TIME), ("frame_id", "string"))
VECTOR3 = _s("geometry_msgs/msg/Vector3", ("x", "float64"), ("y", "float64"), ("z", "float64"))
POINT = _s("geometry_msgs/msg/Point", ("x", "float64"), ("y", "float64"), ("z", "float64"))
QUATERNION = _s("geometry_msgs/msg/Quaternion", ("x", "float64"), ("y", "float64"), ("z", "float64"),
                ("w", "float64"))
POSE = _s("geometry_msgs/msg/Pose", ("position", POINT), ("orientation", QUATERNION))
POSE_STAMPED = _s("geometry_msgs/msg/PoseStamped", ("header", HEADER), ("pose", POSE))
WRENCH = _s("geometry_msgs/msg/Wrench", ("force", VECTOR3), ("torque", VECTOR3))
WRENCH_STAMPED = _s("geometry_msgs/msg/WrenchStamped", ("header", HEADER), ("wrench", WRENCH))
TWIST = _s("geometry_msgs/msg/Twist", ("linear", VECTOR3), ("angular", VECTOR3))
TWIST_STAMPED = _s("geometry_msgs/msg/TwistStamped", ("header", HEADER), ("twist", TWIST))
TRANSFORM = _s("geometry_msgs/msg/Transform", ("translation", VECTOR3), ("rotation", QUATERNION))
TRANSFORM_STAMPED = _s("geometry_msgs/msg/TransformStamped", ("header", HEADER), ("child_frame_id", "string"),
                       ("transform", TRANSFORM))
TF_MESSAGE = _s("tf2_msgs/msg/TFMessage", ("transforms", TRANSFORM_STAMPED, True))
JOINT_STATE = _s("sensor_msgs/msg/JointState", ("header", HEADER), ("name", "string", True),
                 ("position", "float64", True), ("velocity", "float64", True), ("effort", "float64", True))

#: the standard types by ROS name
TYPES: dict[str, Struct] = {s.name: s for s in (
    TIME, HEADER, VECTOR3, POINT, QUATERNION, POSE, POSE_STAMPED, WRENCH, WRENCH_STAMPED, TWIST,
    TWIST_STAMPED, TRANSFORM, TRANSFORM_STAMPED, TF_MESSAGE, JOINT_STATE,
)}


# ------------------------------------------------------------------------------------------- one message
class _Writer:
    """XCDR1 little-endian body writer; ``leaves`` records (path, offset, format, count) of every
    number written (for :class:`BatchEncoder`)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.leaves: list[tuple[str, int, str, int]] = []

    def align(self, n: int) -> None:
        self.buf += b"\x00" * (-len(self.buf) % n)

    def number(self, path: str, kind: str, v: Any) -> None:
        fmt, size, _ = PRIMITIVES[kind]
        self.align(size)
        self.leaves.append((path, len(self.buf), fmt, 1))
        try:
            self.buf += struct.pack("<" + fmt, v)
        except struct.error as exc:
            raise CdrError(f"{path}: {v!r} does not fit {kind} ({exc})") from None

    def numbers(self, path: str, kind: str, values: Sequence[float]) -> None:
        fmt, size, _ = PRIMITIVES[kind]
        n = len(values)
        self.align(4)
        self.buf += struct.pack("<I", n)
        if n:
            self.align(size)
            self.leaves.append((path, len(self.buf), fmt, n))
            self.buf += struct.pack(f"<{n}{fmt}", *values)

    def string(self, path: str, s: str) -> None:
        if not isinstance(s, str):
            raise CdrError(f"{path}: expected a string, got {type(s).__name__}")
        data = s.encode("utf-8")
        if b"\x00" in data:
            raise CdrError(f"{path}: string {s!r} contains a NUL character")
        self.align(4)
        self.buf += struct.pack("<I", len(data) + 1) + data + b"\x00"


def _write(w: _Writer, s: Struct, msg: Mapping[str, Any], prefix: str) -> None:
    if not isinstance(msg, Mapping):
        raise CdrError(f"{prefix or s.name}: expected a mapping of the fields of {s.name}, got {type(msg).__name__}")
    unknown = set(msg) - {f.name for f in s.fields}
    if unknown:
        raise CdrError(f"{prefix or s.name}: unknown field(s) {sorted(unknown)}; {s.name} has "
                       f"{', '.join(f.name for f in s.fields)}")
    for f in s.fields:
        path = f"{prefix}.{f.name}" if prefix else f.name
        v = msg.get(f.name)
        if isinstance(f.type, Struct):
            if f.sequence:
                items = list(v or ())
                w.align(4)
                w.buf += struct.pack("<I", len(items))
                for k, item in enumerate(items):
                    _write(w, f.type, item, f"{path}[{k}]")
            else:
                _write(w, f.type, v or {}, path)
        elif f.type == "string":
            if f.sequence:
                items = list(v or ())
                w.align(4)
                w.buf += struct.pack("<I", len(items))
                for k, item in enumerate(items):
                    w.string(f"{path}[{k}]", item)
            else:
                w.string(path, "" if v is None else v)
        elif f.sequence:
            w.numbers(path, f.type, [] if v is None else list(v))
        else:
            w.number(path, f.type, 0 if v is None else v)


def encode(s: Struct, msg: Mapping[str, Any]) -> bytes:
    """One message of type ``s`` (a nested dict; missing fields are 0 / "" / empty) → XCDR1 little
    endian, encapsulation header included, padded to a multiple of 4 bytes.

    Raises:
        CdrError: an unknown field, a value that does not fit its type, a NUL inside a string.
    """
    w = _Writer()
    _write(w, s, msg, "")
    w.align(4)
    return ENCAPSULATION_CDR_LE + bytes(w.buf)


class _Reader:
    def __init__(self, buf: bytes, little: bool) -> None:
        self.buf, self.pos, self.end = memoryview(buf), 0, "<" if little else ">"

    def take(self, n: int, what: str) -> memoryview:
        if self.pos + n > len(self.buf):
            raise CdrError(f"truncated CDR buffer while reading {what} (need {n} bytes at body offset "
                           f"{self.pos}, have {len(self.buf) - self.pos})")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def align(self, n: int) -> None:
        self.pos += -self.pos % n

    def u32(self, what: str) -> int:
        self.align(4)
        return struct.unpack(self.end + "I", self.take(4, what))[0]

    def count(self, what: str) -> int:
        n = self.u32(what)
        if n > MAX_SEQUENCE:
            raise CdrError(f"{what}: length {n} exceeds the limit {MAX_SEQUENCE}")
        return n

    def string(self, what: str) -> str:
        n = self.count(what)
        if n == 0:
            raise CdrError(f"{what}: string length 0 (a CDR string carries at least its NUL)")
        raw = bytes(self.take(n, what))
        if raw[-1] != 0:
            raise CdrError(f"{what}: string is not NUL-terminated")
        try:
            return raw[:-1].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CdrError(f"{what}: invalid UTF-8 ({exc.reason})") from None


def _read(r: _Reader, s: Struct, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in s.fields:
        path = f"{prefix}.{f.name}" if prefix else f.name
        if isinstance(f.type, Struct):
            if f.sequence:
                out[f.name] = [_read(r, f.type, f"{path}[{k}]") for k in range(r.count(path))]
            else:
                out[f.name] = _read(r, f.type, path)
        elif f.type == "string":
            out[f.name] = ([r.string(f"{path}[{k}]") for k in range(r.count(path))] if f.sequence
                           else r.string(path))
        else:
            fmt, size, _ = PRIMITIVES[f.type]
            if f.sequence:
                n = r.count(path)
                if n:
                    r.align(size)
                    out[f.name] = list(struct.unpack(f"{r.end}{n}{fmt}", r.take(size * n, path)))
                else:
                    out[f.name] = []
            else:
                r.align(size)
                out[f.name] = struct.unpack(r.end + fmt, r.take(size, path))[0]
    return out


def decode(s: Struct, payload: bytes) -> dict[str, Any]:
    """An XCDR1 payload (either byte order) of type ``s`` → nested dict (sequences as lists).

    Raises:
        CdrError: unknown encapsulation, truncated buffer, impossible length, bad string, bytes after
            the last field beyond the alignment padding (``kind`` trailing, as :mod:`bridges.cdr`).
    """
    head = bytes(payload[:4])
    if len(head) < 4:
        raise CdrError(f"CDR payload of {len(payload)} bytes has no encapsulation header")
    if head[:2] == ENCAPSULATION_CDR_LE[:2]:
        little = True
    elif head[:2] == ENCAPSULATION_CDR_BE[:2]:
        little = False
    else:
        raise CdrError(f"unsupported encapsulation {head[:2].hex()} (expected 0001 CDR_LE or 0000 CDR_BE)")
    r = _Reader(payload[4:], little)
    out = _read(r, s, "")
    rest = len(r.buf) - r.pos
    if rest > -r.pos % 4:
        raise CdrError(f"{rest} bytes after the last field of {s.name} (it ends at body offset {r.pos}; at most "
                       f"{-r.pos % 4} bytes of alignment padding may follow)", "trailing")
    return out


# ------------------------------------------------------------------------------------------- batches
class BatchEncoder:
    """N messages of one type whose strings and sequence lengths are fixed, encoded at once.

    Args:
        s: the type.
        template: one message giving every string and every sequence's length (its numbers are
            placeholders).

    :meth:`encode` takes, for every number leaf of the template (path → array), an (N,) array (a
    scalar field) or an (N, k) array (a sequence of k numbers, or k scalar leaves given under a
    common prefix with :meth:`leaf_paths`), and returns an (N, L) uint8 array whose row i is exactly
    ``encode(s, message_i)`` (the tests compare against :func:`encode`).
    """

    def __init__(self, s: Struct, template: Mapping[str, Any]) -> None:
        w = _Writer()
        _write(w, s, template, "")
        w.align(4)
        self.type = s
        self.template = np.frombuffer(ENCAPSULATION_CDR_LE + bytes(w.buf), dtype=np.uint8)
        self.size = len(self.template)
        #: number leaf path → (byte offset in the payload, numpy dtype, count)
        self.leaves: dict[str, tuple[int, str, int]] = {
            path: (4 + off, "<" + fmt.replace("I", "u4").replace("i", "i4").replace("d", "f8"), n)
            for path, off, fmt, n in w.leaves
        }

    def encode(self, columns: Mapping[str, Any], n: int) -> np.ndarray:
        """(n, L) payloads; ``columns`` maps every leaf path to its (n,) or (n, count) values (a
        scalar broadcasts). Raises :class:`CdrError` for a missing or unknown leaf."""
        missing = set(self.leaves) - set(columns)
        extra = set(columns) - set(self.leaves)
        if missing or extra:
            raise CdrError(f"{self.type.name}: batch columns missing {sorted(missing)}, unknown {sorted(extra)}")
        out = np.empty((n, self.size), dtype=np.uint8)
        out[:] = self.template
        for path, (off, dt, count) in self.leaves.items():
            width = np.dtype(dt).itemsize * count
            view = out[:, off:off + width].view(dt)  # (n, count): the rows' bytes as numbers
            view[:] = np.asarray(columns[path]).reshape(n, count) if np.ndim(columns[path]) else columns[path]
        return out


def stamp_columns(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Times [s] (≥ 0) → (sec int32, nanosec uint32) columns, nanoseconds rounded to nearest."""
    ns = np.rint(np.asarray(t, dtype=float) * 1e9).astype(np.int64)
    return (ns // 1_000_000_000).astype(np.int32), (ns % 1_000_000_000).astype(np.uint32)
