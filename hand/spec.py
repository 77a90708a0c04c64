"""G20 hand specification: joint table, SDK channel tables, mimic ratios and presets, as data.

The data live in ``assets/hands/g20_left_spec.yaml`` (loaded through :mod:`importlib.resources`), so a
different calibration is one swapped file. :func:`load_spec` parses the YAML once into the frozen
:class:`HandSpec`; unknown keys, wrong lengths and dangling joint references are
:class:`~sim.errors.ModelError` naming the file and the key path.

Terminology (docs/theory/g20_hand.md):

* *active* joint: commanded directly (16 on the G20);
* *mimic* joint: follows its driver, ``q_mimic = ratio * q_driver`` (5 on the G20: ``thumb_ip`` and the
  four ``*_dip``);
* SDK channel ``i`` (0..19) carries a byte ``v`` in 0..255 that maps to an *arc* [rad] through
  ``min[i], max[i], dir[i]``; channels whose ``angle_of`` names a mimic joint carry that joint's
  angle, and the driver gets ``arc / ratio``.

Joint limits are *not* duplicated here: they belong to the model (``jnt_range`` of the MjModel).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dockbench.sim.errors import ModelError

DEFAULT_SPEC_RESOURCE = ("hands", "g20_left_spec.yaml")
"""Package resource (inside ``assets``) of the default G20 LEFT spec."""

DEFAULT_MODEL_RESOURCE = ("hands", "g20_left.xml")
"""Package resource (inside ``assets``) of the default G20 LEFT MJCF model."""

N_CHANNELS = 20
"""Number of SDK channels of a G20 command (11..14 reserved)."""

SDK_MAX_VALUE = 255
"""Largest SDK byte value; 0..255 is the valid command range."""


@dataclasses.dataclass(frozen=True)
class JointSpec:
    """One hinge of the hand.

    Attributes:
        name: joint name without any prefix (``"index_pip"``).
        index: position in the spec's joint table (0..20).
        mimic_of: name of the driving joint for a mimic joint, else ``None``.
        ratio: mimic ratio, ``q = ratio * q_driver`` [-]; 1.0 for active joints.
        channel: SDK channel that commands this joint, or ``None`` (mimic joints).
    """

    name: str
    index: int
    mimic_of: str | None = None
    ratio: float = 1.0
    channel: int | None = None

    @property
    def active(self) -> bool:
        """True for directly commanded joints (no ``mimic_of``)."""
        return self.mimic_of is None


@dataclasses.dataclass(frozen=True)
class ChannelSpec:
    """One SDK channel (docs/theory/g20_hand.md).

    Attributes:
        channel: channel number 0..19.
        joint: the active joint it drives, ``None`` for reserved channels.
        arc_min, arc_max: arc at the two ends of the byte range [rad].
        direction: -1 (0 -> arc_max, 255 -> arc_min), +1 (0 -> arc_min, 255 -> arc_max), 0 reserved.
        angle_of: mimic joint whose angle the arc is (tip channels), else ``None``.
        divisor: ``joint = arc / divisor``; the mimic ratio of ``angle_of``, else 1.0.
    """

    channel: int
    joint: str | None
    arc_min: float
    arc_max: float
    direction: int
    angle_of: str | None = None
    divisor: float = 1.0


@dataclasses.dataclass(frozen=True)
class HandSpec:
    """The parsed hand spec. Immutable; build it with :func:`load_spec`.

    Attributes:
        name: spec name (``"g20_left"``).
        model: file name of the MJCF model next to the spec (``"g20_left.xml"``).
        joints: the joint table, in table order (index == position).
        channels: the 20 SDK channels, in channel order.
        pad_value: value used for channels missing from a short SDK command (255 = open).
        presets: raw SDK presets by name, each 20 ints.
        source: where the spec was read from (for messages).
        base_dir: directory of a spec read from a file (its model is looked up there first);
            ``None`` for the packaged spec.
    """

    name: str
    model: str
    joints: tuple[JointSpec, ...]
    channels: tuple[ChannelSpec, ...]
    pad_value: int
    presets: Mapping[str, tuple[int, ...]]
    source: str = "<spec>"
    base_dir: Path | None = None

    # ---- derived lookups (cheap; the spec is tiny) ----
    @property
    def joint_names(self) -> tuple[str, ...]:
        """All 21 joint names in table order."""
        return tuple(j.name for j in self.joints)

    @property
    def active_names(self) -> tuple[str, ...]:
        """The 16 active joint names in table order."""
        return tuple(j.name for j in self.joints if j.active)

    @property
    def mimic_names(self) -> tuple[str, ...]:
        """The 5 mimic joint names in table order."""
        return tuple(j.name for j in self.joints if not j.active)

    def joint(self, name: str) -> JointSpec:
        """The joint called ``name``; ModelError listing the valid names otherwise."""
        for j in self.joints:
            if j.name == name:
                return j
        raise ModelError(f"{self.source}: unknown joint {name!r}; known: {', '.join(self.joint_names)}")

    def preset(self, name: str) -> tuple[int, ...]:
        """Raw SDK preset ``name`` (20 ints); ModelError listing the known presets otherwise."""
        try:
            return self.presets[name]
        except KeyError:
            raise ModelError(
                f"{self.source}: unknown preset {name!r}; known: {', '.join(sorted(self.presets))}"
            ) from None


def _err(source: str, key: str, msg: str) -> ModelError:
    return ModelError(f"{source}: {key}: {msg}")


def _check_keys(
    data: Any, allowed: tuple[str, ...], required: tuple[str, ...], source: str, key: str
) -> None:
    if not isinstance(data, Mapping):
        raise _err(source, key or "<root>", f"expected a mapping, got {data!r}")
    for k in data:
        if k not in allowed:
            raise _err(source, f"{key}.{k}" if key else str(k), f"unknown key; allowed: {', '.join(allowed)}")
    for k in required:
        if k not in data:
            raise _err(source, f"{key}.{k}" if key else k, "missing required key")


def _number(value: Any, source: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _err(source, key, f"expected a finite number, got {value!r}")
    return float(value)


def _vector(data: Mapping, name: str, source: str) -> list:
    value = data[name]
    if not isinstance(value, list) or len(value) != N_CHANNELS:
        raise _err(source, f"sdk.{name}", f"expected a list of {N_CHANNELS} entries, got {value!r}")
    return value


def parse_spec(data: Any, source: str = "<spec>") -> HandSpec:
    """Validate a YAML mapping (already loaded) and build the :class:`HandSpec`.

    Raises:
        ModelError: unknown or missing key, wrong length, unknown joint reference, bad direction,
            min > max, non-finite number, preset value outside 0..255.
    """
    _check_keys(
        data, ("name", "model", "joints", "sdk", "presets"), ("name", "model", "joints", "sdk"), source, ""
    )
    # ---- joints ----
    raw_joints = data["joints"]
    if not isinstance(raw_joints, list) or not raw_joints:
        raise _err(source, "joints", "expected a non-empty list")
    names: list[str] = []
    mimic: dict[str, tuple[str, float]] = {}
    for i, entry in enumerate(raw_joints):
        key = f"joints[{i}]"
        _check_keys(entry, ("name", "mimic"), ("name",), source, key)
        name = entry["name"]
        if not isinstance(name, str) or not name:
            raise _err(source, f"{key}.name", f"expected a joint name, got {name!r}")
        if name in names:
            raise _err(source, f"{key}.name", f"duplicate joint {name!r}")
        names.append(name)
        if "mimic" in entry:
            m = entry["mimic"]
            _check_keys(m, ("joint", "ratio"), ("joint", "ratio"), source, f"{key}.mimic")
            ratio = _number(m["ratio"], source, f"{key}.mimic.ratio")
            if ratio == 0.0:
                raise _err(source, f"{key}.mimic.ratio", "must be non-zero")
            mimic[name] = (m["joint"], ratio)
    for name, (driver, _) in mimic.items():
        if driver not in names:
            raise _err(
                source, f"joints.{name}.mimic.joint", f"unknown joint {driver!r}; known: {', '.join(names)}"
            )
        if driver in mimic:
            raise _err(source, f"joints.{name}.mimic.joint", f"{driver!r} is itself a mimic joint")

    # ---- sdk ----
    sdk = data["sdk"]
    _check_keys(
        sdk,
        ("pad_value", "joint", "angle_of", "min", "max", "dir"),
        ("joint", "min", "max", "dir"),
        source,
        "sdk",
    )
    pad = sdk.get("pad_value", SDK_MAX_VALUE)
    if isinstance(pad, bool) or not isinstance(pad, int) or not 0 <= pad <= SDK_MAX_VALUE:
        raise _err(source, "sdk.pad_value", f"expected an integer in 0..{SDK_MAX_VALUE}, got {pad!r}")
    ch_joint, ch_min, ch_max, ch_dir = (_vector(sdk, k, source) for k in ("joint", "min", "max", "dir"))
    angle_of = sdk.get("angle_of") or {}
    if not isinstance(angle_of, Mapping):
        raise _err(source, "sdk.angle_of", f"expected a mapping channel -> mimic joint, got {angle_of!r}")
    for c in angle_of:
        if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < N_CHANNELS:
            raise _err(source, f"sdk.angle_of.{c}", f"expected a channel number 0..{N_CHANNELS - 1}")
    channel_of: dict[str, int] = {}
    channels: list[ChannelSpec] = []
    for c in range(N_CHANNELS):
        joint = ch_joint[c]
        direction = ch_dir[c]
        if direction not in (-1, 0, 1) or isinstance(direction, bool):
            raise _err(source, f"sdk.dir[{c}]", f"expected -1, 0 or +1, got {direction!r}")
        lo = _number(ch_min[c], source, f"sdk.min[{c}]")
        hi = _number(ch_max[c], source, f"sdk.max[{c}]")
        if joint is None:
            if direction != 0:
                raise _err(source, f"sdk.dir[{c}]", "a reserved channel (joint null) must have dir 0")
            channels.append(ChannelSpec(c, None, lo, hi, 0))
            continue
        if joint not in names:
            raise _err(source, f"sdk.joint[{c}]", f"unknown joint {joint!r}; known: {', '.join(names)}")
        if joint in mimic:
            raise _err(source, f"sdk.joint[{c}]", f"{joint!r} is a mimic joint; channels drive active joints")
        if joint in channel_of:
            raise _err(source, f"sdk.joint[{c}]", f"{joint!r} already driven by channel {channel_of[joint]}")
        if direction == 0:
            raise _err(source, f"sdk.dir[{c}]", "a channel with a joint needs dir -1 or +1")
        if not lo <= hi:
            raise _err(source, f"sdk.min[{c}]", f"min {lo} > max {hi}")
        channel_of[joint] = c
        tip = angle_of.get(c)
        divisor = 1.0
        if tip is not None:
            if tip not in mimic or mimic[tip][0] != joint:
                raise _err(source, f"sdk.angle_of.{c}", f"{tip!r} is not a mimic joint of {joint!r}")
            divisor = mimic[tip][1]
        channels.append(ChannelSpec(c, joint, lo, hi, int(direction), tip, divisor))
    active = [n for n in names if n not in mimic]
    undriven = [n for n in active if n not in channel_of]
    if undriven:
        raise _err(source, "sdk.joint", f"active joints without a channel: {', '.join(undriven)}")

    # ---- presets ----
    presets: dict[str, tuple[int, ...]] = {}
    for pname, values in (data.get("presets") or {}).items():
        key = f"presets.{pname}"
        if not isinstance(values, list) or len(values) != N_CHANNELS:
            raise _err(source, key, f"expected a list of {N_CHANNELS} integers, got {values!r}")
        for i, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= SDK_MAX_VALUE:
                raise _err(source, f"{key}[{i}]", f"expected an integer in 0..{SDK_MAX_VALUE}, got {v!r}")
        presets[str(pname)] = tuple(values)

    joints = tuple(
        JointSpec(
            name=n,
            index=i,
            mimic_of=mimic[n][0] if n in mimic else None,
            ratio=mimic[n][1] if n in mimic else 1.0,
            channel=channel_of.get(n),
        )
        for i, n in enumerate(names)
    )
    if not isinstance(data["name"], str) or not isinstance(data["model"], str):
        raise _err(source, "name", "name and model must be strings")
    return HandSpec(
        name=data["name"],
        model=data["model"],
        joints=joints,
        channels=tuple(channels),
        pad_value=pad,
        presets=MappingProxyType(presets),
        source=source,
    )


def load_spec(path: str | Path | None = None) -> HandSpec:
    """Load a hand spec YAML.

    Args:
        path: a YAML file; ``None`` loads the packaged G20 LEFT spec
            (``assets/hands/g20_left_spec.yaml`` via :mod:`importlib.resources`).

    Raises:
        ModelError: unreadable file or invalid content (see :func:`parse_spec`).
    """
    if path is None:
        res = resources.files("dockbench.assets").joinpath(*DEFAULT_SPEC_RESOURCE)
        source, text, base_dir = "assets/hands/g20_left_spec.yaml", res.read_text(encoding="utf-8"), None
    else:
        source, base_dir = str(path), Path(path).parent
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ModelError(f"{source}: cannot read hand spec: {exc}") from None
    from dockbench.sim.errors import ScenarioError
    from dockbench.sim.yamlio import load_yaml

    try:  # the input files' strict reader: no aliases, no duplicate keys, YAML 1.2 numbers (sim/yamlio.py)
        data = load_yaml(text, file=None, what="a hand spec")
    except ScenarioError as exc:
        raise ModelError(f"{source}: invalid YAML: {exc}") from None
    return dataclasses.replace(parse_spec(data, source), base_dir=base_dir)


def default_model_xml() -> str:
    """The packaged G20 LEFT MJCF text (``assets/hands/g20_left.xml``)."""
    return resources.files("dockbench.assets").joinpath(*DEFAULT_MODEL_RESOURCE).read_text(encoding="utf-8")


def load_model(spec: HandSpec | None = None):
    """Compile the hand model named by ``spec.model`` into a standalone ``mujoco.MjModel``.

    The file is looked up next to the spec file first (a user's own spec + model pair), then among
    the packaged models in ``assets/hands`` (:mod:`importlib.resources`). For a hand attached to an
    arm, build the bigger model elsewhere (``MjSpec.attach``) and hand it to the bridge.

    Raises:
        ModelError: the model file is missing or does not compile.
    """
    import mujoco

    name = spec.model if spec is not None else DEFAULT_MODEL_RESOURCE[1]
    local = spec.base_dir / name if spec is not None and spec.base_dir is not None else None
    try:
        if local is not None and local.is_file():
            return mujoco.MjModel.from_xml_path(str(local))
        res = resources.files("dockbench.assets").joinpath("hands", name)
        return mujoco.MjModel.from_xml_string(res.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"{name}: cannot load hand model: {exc}") from None
