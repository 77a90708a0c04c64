"""G20 command mapping: SDK bytes 0..255 <-> joint angles [rad], mimic completion, validation.

Equations (docs/theory/g20_hand.md §2), for SDK channel ``i`` with table ``MIN[i], MAX[i], DIR[i]``:

    v   = clamp(val, 0, 255)
    DIR = -1:  arc = MAX + (MIN - MAX) * v / 255          (0 -> MAX, 255 -> MIN)
    DIR = +1:  arc = MIN + (MAX - MIN) * v / 255          (0 -> MIN, 255 -> MAX)
    q_joint = arc / r     where r is the mimic ratio of the channel's ``angle_of`` joint
                          (SDK15: thumb_mcp = arc / 1.02; SDK16..19: *_pip = arc / 0.89), else r = 1
    mimic:  q_thumb_ip = 1.02 q_thumb_mcp,  q_*_dip = 0.89 q_*_pip   (never overwriting a given value)

Commands are validated whole at this boundary; a bad command raises
:class:`~sim.errors.HandCommandError` with the reason and nothing of it is used:

* SDK (index-based, channel order): a 1-D sequence of 1 to 20 numbers. Short commands are padded
  with ``spec.pad_value`` (255 = open). Out-of-range bytes are clamped to 0..255 (reported in
  :attr:`SdkCommand.clamped`). An empty command (it would silently open the hand), longer than 20,
  non-numeric (strings, bools, None, nested), NaN/Inf values or integers too large for a float are
  rejected.
* name-based: a mapping ``joint name -> angle [rad]``. Unknown names, non-numeric, NaN/Inf or
  too-large values are rejected. Joint-range clipping needs the model and is done by the bridge.

Every rejection carries a short ``kind`` (:attr:`HandCommandError.kind`: ``not_a_sequence``,
``bad_shape``, ``empty``, ``too_many_values``, ``not_a_number``, ``not_finite``, ``not_a_mapping``,
``unknown_name``) that the bridge counts per reason.

All angles are joint coordinates [rad] of the hand model (frames: see ``assets/hands/g20_left.xml``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from dockbench.hand.spec import N_CHANNELS, SDK_MAX_VALUE, HandSpec
from dockbench.sim.errors import HandCommandError

_NUMBER_TYPES = (int, float, np.integer, np.floating)


@dataclasses.dataclass(frozen=True)
class SdkCommand:
    """A validated SDK command.

    Attributes:
        values: the 20 channel values after padding and clamping, float64 in 0..255 (read-only).
        padded: how many channels were missing and padded with the spec's pad value.
        clamped: channels whose value was outside 0..255 and was clamped.
    """

    values: np.ndarray
    padded: int
    clamped: tuple[int, ...]


def _is_number(v: Any) -> bool:
    return isinstance(v, _NUMBER_TYPES) and not isinstance(v, (bool, np.bool_))


def _finite_float(v: Any, where: str, unit: str = "") -> float:
    """``float(v)`` for a finite number ``v``; a HandCommandError otherwise (never OverflowError)."""
    if not _is_number(v):
        raise HandCommandError(f"{where}: expected a number{unit}, got {_short(v)}", kind="not_a_number")
    try:
        f = float(v)
    except (OverflowError, ValueError, TypeError):
        raise HandCommandError(f"{where}: value {_short(v)} is too large for a number", kind="not_finite") from None
    if not math.isfinite(f):
        raise HandCommandError(f"{where}: value {f} is not finite", kind="not_finite")
    return f


def _short(v: Any) -> str:
    from dockbench.sim.config import short_repr

    return short_repr(v)


def validate_sdk_values(values: Any, spec: HandSpec) -> SdkCommand:
    """Validate, pad and clamp an index-based SDK command.

    Args:
        values: up to 20 numbers in channel order (list, tuple or 1-D array).
        spec: the hand spec (pad value).

    Returns:
        The :class:`SdkCommand` with 20 values in 0..255.

    Raises:
        HandCommandError: not a flat sequence, empty, more than 20 values, a non-numeric entry, NaN, Inf or
            an integer too large for a float (``kind`` says which).
    """
    # raw bytes in any of Python's byte types (bytes, bytearray, memoryview) are a wire frame, not a list of
    # channel values: refused alike (a bytearray and a memoryview are Sequences and used to pass)
    if isinstance(values, (str, bytes, bytearray, memoryview, Mapping)) or not isinstance(
            values, (Sequence, np.ndarray)):
        raise HandCommandError(
            f"SDK command must be a sequence of 1 to {N_CHANNELS} numbers, got {type(values).__name__}",
            kind="not_a_sequence",
        )
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise HandCommandError(f"SDK command must be 1-D, got shape {values.shape}", kind="bad_shape")
        if values.dtype.kind not in "iuf":
            raise HandCommandError(f"SDK command must be numeric, got dtype {values.dtype}", kind="not_a_number")
        if values.size > N_CHANNELS:
            raise HandCommandError(
                f"SDK command has {values.size} values; at most {N_CHANNELS} allowed", kind="too_many_values"
            )
        items = values.tolist()
    else:
        n = len(values)
        if n > N_CHANNELS:
            raise HandCommandError(f"SDK command has {n} values; at most {N_CHANNELS} allowed", kind="too_many_values")
        items = list(values)
    n = len(items)
    if n == 0:
        raise HandCommandError("SDK command is empty (it would open the hand fully)", kind="empty")
    out = np.full(N_CHANNELS, float(spec.pad_value))
    for i, v in enumerate(items):
        out[i] = _finite_float(v, f"SDK channel {i}")
    clamped = tuple(int(i) for i in np.flatnonzero((out < 0.0) | (out > SDK_MAX_VALUE)))
    np.clip(out, 0.0, SDK_MAX_VALUE, out=out)
    out.setflags(write=False)
    return SdkCommand(values=out, padded=N_CHANNELS - n, clamped=clamped)


def range_to_arc(values: Any, spec: HandSpec) -> np.ndarray:
    """SDK bytes -> channel arcs [rad] (docs/theory/g20_hand.md).

    ``arc = MAX + (MIN - MAX) v/255`` for DIR -1, ``arc = MIN + (MAX - MIN) v/255`` for DIR +1, with
    ``v = clamp(val, 0, 255)`` after padding to 20 channels. Reserved channels (DIR 0) give 0.

    Returns:
        (20,) arcs in each channel's angle space [rad] (tip channels: the mimic joint's angle).

    Raises:
        HandCommandError: see :func:`validate_sdk_values`.
    """
    v = validate_sdk_values(values, spec).values / SDK_MAX_VALUE  # (20,) in 0..1
    arcs = np.zeros(N_CHANNELS)
    for ch in spec.channels:
        if ch.direction < 0:
            arcs[ch.channel] = ch.arc_max + (ch.arc_min - ch.arc_max) * v[ch.channel]
        elif ch.direction > 0:
            arcs[ch.channel] = ch.arc_min + (ch.arc_max - ch.arc_min) * v[ch.channel]
    return arcs


def arc_to_range(arcs: Sequence[float] | np.ndarray, spec: HandSpec) -> np.ndarray:
    """Channel arcs [rad] -> SDK values in 0..255 (float; the inverse of :func:`range_to_arc`).

    ``v = 255 (arc - MIN)/(MAX - MIN)`` for DIR +1 and ``v = 255 - 255 (arc - MIN)/(MAX - MIN)`` for
    DIR -1, clipped to 0..255; reserved channels give ``spec.pad_value``.
    """
    a = np.asarray(arcs, dtype=float)
    out = np.full(N_CHANNELS, float(spec.pad_value))
    for ch in spec.channels:
        if ch.direction == 0:
            continue
        span = ch.arc_max - ch.arc_min
        frac = (a[ch.channel] - ch.arc_min) / span if span > 0 else 0.0
        out[ch.channel] = SDK_MAX_VALUE * (frac if ch.direction > 0 else 1.0 - frac)
    return np.clip(out, 0.0, SDK_MAX_VALUE)


def complete_mimic(positions: Mapping[str, float], spec: HandSpec) -> dict[str, float]:
    """Add each missing mimic joint as ``ratio * driver`` when its driver is given.

    A value the caller gave for a mimic joint is never overwritten; a mimic joint whose driver is
    absent stays absent. Returns a new dict (the input is not modified).
    """
    out = dict(positions)
    for j in spec.joints:
        if j.mimic_of is not None and j.name not in out and j.mimic_of in out:
            out[j.name] = j.ratio * out[j.mimic_of]
    return out


def sdk_to_joint_positions(values: Any, spec: HandSpec) -> dict[str, float]:
    """SDK command -> angles of all joints [rad], mimic joints completed.

    Channel ``i`` sets its joint to ``range_to_arc(values)[i] / divisor`` (divisor = the mimic ratio of
    the channel's ``angle_of`` joint: SDK15 -> thumb_mcp = arc/1.02, SDK16..19 -> *_pip = arc/0.89),
    then :func:`complete_mimic` adds thumb_ip and the *_dip. No joint-range clipping here.

    Raises:
        HandCommandError: see :func:`validate_sdk_values`.
    """
    arcs = range_to_arc(values, spec)
    q = {ch.joint: float(arcs[ch.channel] / ch.divisor) for ch in spec.channels if ch.joint is not None}
    return complete_mimic(q, spec)


def joint_positions_to_sdk(positions: Mapping[str, float], spec: HandSpec) -> np.ndarray:
    """Joint angles [rad] -> SDK values (float, 0..255) for the channels whose joint is given.

    ``arc = q_joint * divisor`` then :func:`arc_to_range`. Channels whose joint is missing get the
    spec's pad value.
    """
    arcs = np.zeros(N_CHANNELS)
    given = np.zeros(N_CHANNELS, dtype=bool)
    for ch in spec.channels:
        if ch.joint is not None and ch.joint in positions:
            arcs[ch.channel] = positions[ch.joint] * ch.divisor
            given[ch.channel] = True
    out = arc_to_range(arcs, spec)
    out[~given] = spec.pad_value
    return out


def validate_joint_command(positions: Any, spec: HandSpec) -> dict[str, float]:
    """Validate a name-based command ``{joint name: angle [rad]}`` and complete its mimic joints.

    Returns:
        A new dict of floats containing the given joints plus the mimic joints of given drivers.

    Raises:
        HandCommandError: not a mapping, empty, an unknown joint name (the message lists the valid
            ones), a non-numeric value, NaN or Inf.
    """
    if not isinstance(positions, Mapping):
        raise HandCommandError(
            f"joint command must be a mapping name -> rad, got {type(positions).__name__}", kind="not_a_mapping"
        )
    if not positions:
        raise HandCommandError("joint command is empty", kind="empty")
    if len(positions) > 4 * len(spec.joint_names):
        raise HandCommandError(f"joint command has {len(positions)} entries", kind="too_many_values")
    names = spec.joint_names
    unknown = [k for k in positions if not isinstance(k, str) or k not in names]
    if unknown:
        raise HandCommandError(
            f"unknown joint name(s) {', '.join(_short(k) for k in unknown[:5])}; valid: {', '.join(names)}",
            kind="unknown_name",
        )
    out: dict[str, float] = {}
    for k, v in positions.items():
        out[k] = _finite_float(v, f"joint {k}", " [rad]")
    return complete_mimic(out, spec)
