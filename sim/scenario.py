"""Scenario schema and loader: one YAML file → one frozen, fully validated :class:`Scenario`.

Top-level keys::

    name, description, robot, sim, start, tool, target, planner, controller, wrench, insertion, telemetry, gates

``tool``, ``target``, ``planner`` and ``controller`` are typed blocks: a ``type`` string chosen from a
registry plus that type's own keys (its ``Config`` dataclass). Everything is checked at load time;
every error names the file, the key path and the allowed values (see ``docs/scenarios.md``, which is
generated from these records by ``python -m dockbench.sim.scenario --docs``).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dockbench.controllers.insertion import InsertionConfig
from dockbench.sim.config import config_to_dict, describe_config, param, parse_config, short_repr
from dockbench.sim.errors import ScenarioError
from dockbench.sim.mounts import BaseConfig
from dockbench.sim.plugins import load_entry_points, load_plugins
from dockbench.sim.robots import resolve_model_path, robot_for, robot_names
from dockbench.sim.uncertainty import UncertaintyConfig
from dockbench.sim.yamlio import read_yaml_file

_TWO_PI = 6.283185307179586
#: longest run [s] a scenario or --duration may ask for (the telemetry must also fit on disk)
MAX_DURATION = 86400.0
#: most MuJoCo substeps per control step (control_period / timestep)
MAX_SUBSTEPS = 1000
#: largest scenario file read [bytes]
MAX_FILE_BYTES = 1 << 20
#: longest scenario name [characters] (it names the run folder)
MAX_NAME_LENGTH = 100
#: most gates per scenario
MAX_GATES = 100
#: longest description [characters]
MAX_DESCRIPTION_LENGTH = 10000


#: most joints of a user's robot model (``robot.joints``)
MAX_USER_JOINTS = 64
#: the model-file keys of a user's own robot (``robot.model``; docs/robots.md)
USER_ROBOT_KEYS = ("model", "ee_site", "ee_body", "joints", "torque_limits", "velocity_limits", "home", "actuators")


@dataclass(frozen=True)
class RobotConfig:
    """The arm: a catalogue robot by name (``type``) or the user's own model file (``model`` and the keys
    after it; docs/robots.md). Exactly one of ``type`` and ``model``."""

    type: str | None = param(
        None, max_length=100, doc="catalogue robot: iiwa14 | fr3 (or give `model` for your own arm)"
    )
    model: str | None = param(
        None, max_length=4096,
        doc="your own arm: an MJCF (.xml) or URDF (.urdf) file, relative to the scenario file (docs/robots.md)",
    )
    ee_site: str | None = param(
        None, max_length=200, doc="with model: the site the tool is mounted on (its z axis = the tool axis)"
    )
    ee_body: str | None = param(
        None, max_length=200,
        doc="with model: instead of ee_site, the body whose origin and axes the tool is mounted on (URDF links)",
    )
    joints: tuple[str, ...] | None = param(
        None, min_length=1, max_length=MAX_USER_JOINTS,
        doc="with model: the hinge joints the controller drives, base to tip (every joint of the arm)",
    )
    torque_limits: tuple[float, ...] | None = param(
        None, unit="N·m", gt=0.0, le=1e4, max_length=MAX_USER_JOINTS,
        doc="with model: per-joint torque limit (the torque motors' ctrlrange ±τ), one per joint",
    )
    velocity_limits: tuple[float, ...] | None = param(
        None, unit="rad/s", gt=0.0, le=100.0, max_length=MAX_USER_JOINTS,
        doc="with model: per-joint velocity limit (used by the planners and controllers), one per joint",
    )
    home: tuple[float, ...] | None = param(
        None, unit="rad", ge=-_TWO_PI, le=_TWO_PI, max_length=MAX_USER_JOINTS,
        doc="with model: the home pose (IK seed, free-space start); null = 0 rad clamped into each joint's range",
    )
    actuators: Literal["auto", "replace"] = param(
        "auto",
        doc="with model: auto = use the model's torque motors (<motor>, gear 1) and add one (ctrlrange ±torque_limits) "
        "to each joint without an actuator; replace = remove the model's actuators on the joints (e.g. position "
        "servos) and add torque motors",
    )
    q_init: tuple[float, ...] | None = param(
        None, unit="rad", ge=-_TWO_PI, le=_TWO_PI,
        doc="initial joint configuration (within the model's joint ranges); null = solve IK for the start pose",
    )
    q_guess: tuple[float, ...] | None = param(
        None, unit="rad", ge=-_TWO_PI, le=_TWO_PI, doc="IK seed; null = the robot's home pose"
    )
    max_torque: float | None = param(
        None, unit="N·m", gt=0.0, le=1e4, doc="optional uniform torque limit, tighter than the actuators' own"
    )
    base: BaseConfig = field(default_factory=BaseConfig)  # fixed (bolted to the world) or free_floating (sim/mounts.py)

    def validate(self) -> None:
        if (self.type is None) == (self.model is None):
            raise ScenarioError(
                "give either type (a catalogue robot: " + ", ".join(robot_names()) + ") or model (your own MJCF/URDF "
                "file, docs/robots.md)" + (", not both" if self.type is not None else ""),
                key="type" if self.type is not None else None,
            )
        if self.type is not None:
            given = [k for k in USER_ROBOT_KEYS[1:] if getattr(self, k) != _USER_DEFAULTS[k]]
            if given:
                raise ScenarioError(
                    f"only with robot.model (your own arm); the catalogue robot {self.type!r} brings its own",
                    key=given[0],
                )
            return
        for key in ("joints", "torque_limits", "velocity_limits"):
            if getattr(self, key) is None:
                raise ScenarioError("required with robot.model (docs/robots.md)", key=key)
        if (self.ee_site is None) == (self.ee_body is None):
            raise ScenarioError(
                "give exactly one of ee_site (a site of the model) and ee_body (a body of the model)",
                key="ee_site",
            )
        n = len(self.joints)
        for key in ("torque_limits", "velocity_limits", "home"):
            v = getattr(self, key)
            if v is not None and len(v) != n:
                raise ScenarioError(f"expected {n} values (one per robot.joints entry), got {len(v)}", key=key)
        dup = sorted({j for j in self.joints if self.joints.count(j) > 1})
        if dup:
            raise ScenarioError(f"joints listed twice: {', '.join(dup)}", key="joints")


_USER_DEFAULTS = {f.name: f.default for f in dataclasses.fields(RobotConfig) if f.name in USER_ROBOT_KEYS}


#: smallest contact friction coefficient accepted with ``sim.cone: pyramidal`` (docs/theory/ft_pipeline.md)
PYRAMIDAL_MIN_FRICTION = 0.01


@dataclass(frozen=True)
class SimConfig:
    timestep: float = param(1e-3, unit="s", ge=1e-6, le=0.01, doc="MuJoCo integration step")
    control_period: float = param(
        1e-3, unit="s", ge=1e-6, le=0.1,
        doc=f"controller period, an integer multiple (1..{MAX_SUBSTEPS}) of timestep",
    )
    duration: float | None = param(
        None, unit="s", gt=0.0, le=MAX_DURATION,
        doc="run length; null = planner duration + settle_time (the telemetry it needs must fit on disk)",
    )
    settle_time: float = param(1.5, unit="s", ge=0.0, le=3600.0, doc="time simulated after the planner ends")
    end_after_seated: float | None = param(
        None, unit="s", ge=1.0, le=MAX_DURATION,
        doc="end the run once the tool tip has stayed seated this long: within 1 mm of the target's seat depth "
        "at every control step, the docking.time_to_seat criterion (status seated, a complete run; a fixed "
        "mating target only). For campaigns whose trials would otherwise spend most of their duration in a "
        "seated hold. At least the metrics' final window (1 s, and every gate's window), so that the "
        "window's values are of seated samples; null = run the whole duration",
    )
    gravity: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0), unit="m/s²", length=3, ge=-100.0, le=100.0, doc="gravity (both models)"
    )
    integrator: Literal["euler", "implicit", "implicitfast", "rk4"] = param(
        "implicitfast", doc="MuJoCo integrator"
    )
    cone: Literal["pyramidal", "elliptic"] = param(
        "elliptic",
        doc="friction cone: elliptic (the Coulomb cone) or pyramidal (its 4-edge approximation; rejected below "
        "a contact friction of 0.01, where it blows up; docs/theory/ft_pipeline.md)",
    )
    impratio: float = param(
        1.0, ge=1e-3, le=1e3,
        doc="MuJoCo's ratio of frictional to normal constraint impedance (elliptic cones): above 1 the "
        "friction is stiffer than the normal contact, so a sticking contact creeps less per step "
        "(docs/theory/ft_pipeline.md §4)",
    )
    noslip_iterations: int = param(
        0, ge=0, le=1000,
        doc="iterations of MuJoCo's no-slip pass after the main solve (0 = off): it re-solves the friction "
        "forces without the soft-constraint regularisation, so a contact that should stick does not creep; "
        "costs time only while there are contacts (docs/theory/ft_pipeline.md §4)",
    )
    iterations: int = param(50, ge=1, le=1000, doc="constraint solver iterations")
    ls_iterations: int = param(20, ge=1, le=1000, doc="solver line-search iterations")
    solver: Literal["newton", "cg", "pgs"] = param(
        "newton",
        doc="MuJoCo's constraint solver: newton and cg solve for the accelerations (primal), pgs for the "
        "constraint forces (dual: its accelerations follow from forces applied in equal and opposite pairs, "
        "so an unfinished solve still conserves momentum; docs/theory/floating_base.md)",
    )
    tolerance: float = param(
        1e-8, ge=0.0, lt=1.0,
        doc="constraint solver tolerance (MuJoCo's; 0 = always run every iteration). MuJoCo's default solver "
        "returns the accelerations, so an early stop leaves a small non-internal residual force: floating "
        "systems that must conserve momentum use 1e-12 (docs/theory/floating_base.md)",
    )
    seed: int = param(
        0, ge=0, le=2**32 - 1,
        doc="random seed of the uncertainty block's draws (F/T noise and bias, belief error; sim/uncertainty.py), "
        "recorded in meta.json; without uncertainty the run does not depend on it",
    )

    def validate(self) -> None:
        ratio = self.control_period / self.timestep
        if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
            raise ScenarioError(
                f"must be an integer multiple (≥ 1) of sim.timestep={self.timestep}, got {self.control_period}",
                key="control_period",
            )
        if round(ratio) > MAX_SUBSTEPS:
            raise ScenarioError(
                f"{self.control_period} s is {round(ratio)} substeps of sim.timestep={self.timestep} s; at most "
                f"{MAX_SUBSTEPS} allowed (shorten control_period or lengthen timestep)",
                key="control_period",
            )


@dataclass(frozen=True)
class StartConfig:
    standoff: float = param(
        0.10, unit="m", ge=-2.0, le=2.0, doc="start EE distance from the target mouth along its axis"
    )
    offset: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0), unit="m", length=3, ge=-2.0, le=2.0, doc="extra world-frame offset of the start EE position"
    )
    free_yaw: bool = param(
        True,
        doc="the seated rotation about the mating axis is free (axisymmetric probe): pick the one closest "
        "to the robot's home EE orientation, keeping the wrist mid-range (an N-fold keyed target: the closest "
        "of its N mating rotations)",
    )
    rpy_offset_deg: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0),
        unit="deg",
        length=3,
        ge=-360.0,
        le=360.0,
        doc="start orientation = goal orientation rotated by this roll/pitch/yaw (EE axes)",
    )


@dataclass(frozen=True)
class WrenchConfig:
    gravity_compensation: Literal["auto", "on", "off"] = param(
        "auto",
        doc="subtract the tool's weight (mass and centre of mass beyond the sensor, from the model) from the "
        "F/T signal; auto = on whenever sim.gravity is non-zero (docs/theory/ft_pipeline.md)",
    )
    inertial_compensation: bool = param(
        False, doc="subtract the tool's full inertial load m(a − g), Iα + ω×Iω (gravity included) from the F/T signal"
    )
    tare_time: float | None = param(
        None, unit="s", ge=0.0, le=MAX_DURATION,
        doc="tare the F/T sensor at this time (tool still and out of contact): the estimate is zeroed there "
        "and the bias removed from then on; null = no tare",
    )
    ft_bias: tuple[float, float, float, float, float, float] = param(
        (0.0, 0.0, 0.0, 0.0, 0.0, 0.0), unit="N | N·m", length=6, ge=-1e4, le=1e4,
        doc="simulated constant offset of the F/T sensor [f; n] in sensor axes (what a tare removes)",
    )
    sensor_sampling: Literal["mean", "last"] = param(
        "mean",
        doc="the F/T reading of a control period when the physics takes several substeps in it: mean = the "
        "mean of the substeps' readings (an integrating, anti-aliased sensor: the reading converges as "
        "sim.timestep shrinks), last = the last substep's (a point sample, whose bandwidth grows as the step "
        "shrinks). The same with one Euler-type substep per period (docs/theory/ft_pipeline.md §4)",
    )
    force_source: Literal["sensor", "truth", "observer"] = param(
        "sensor", doc="wrench fed to the controller: the F/T site sensor, the contact truth or the momentum observer"
    )
    observer_gain: float = param(50.0, unit="1/s", gt=0.0, lt=2000.0, doc="momentum-observer gain K_O")


@dataclass(frozen=True)
class TelemetryConfig:
    enabled: bool = param(True, doc="record telemetry channels every control step")


@dataclass(frozen=True)
class GateSpec:
    metric: str = param(doc="metric name (see docs/metrics.md)")
    max: float | None = param(None, ge=-1e12, le=1e12, doc="upper bound (inclusive)")
    min: float | None = param(
        None, ge=-1e12, le=1e12,
        doc="lower bound (inclusive); docking.depth without min and max is the seat gate (see tolerance)",
    )
    window: float | None = param(
        None, unit="s", ge=1e-3, le=MAX_DURATION, doc="final window for steady/docking metrics; null = 1 s"
    )
    tolerance: float | None = param(
        None, unit="m", gt=0.0, le=1.0,
        doc="seat gate only (docking.depth without min/max): seated within this distance of the seat depth "
        "computed from the target geometry; null = 0.001",
    )

    def validate(self) -> None:
        from dockbench.telemetry.gates import Gate

        Gate.from_spec(self).validate()


@dataclass(frozen=True)
class TypedBlock:
    """A registry-selected block: ``type`` plus that type's parsed ``config``. The config's keys read as the
    block's own attributes too: ``scenario.controller.k`` is ``scenario.controller.config.k``."""

    type: str
    config: Any

    def __getattr__(self, name: str) -> Any:
        # called only for names that are not ``type`` / ``config`` (or a method): the config's keys
        config = self.__dict__.get("config")
        if name.startswith("_") or config is None:
            raise AttributeError(name)
        try:
            return getattr(config, name)
        except AttributeError:
            keys = [f.name for f in dataclasses.fields(config)] if dataclasses.is_dataclass(config) else []
            raise AttributeError(
                f"the {self.__dict__.get('type')!r} block has no key {name!r}; its keys: {', '.join(keys) or '-'}"
            ) from None


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    robot: RobotConfig
    sim: SimConfig
    start: StartConfig
    tool: TypedBlock
    target: TypedBlock | None
    planner: TypedBlock
    controller: TypedBlock
    wrench: WrenchConfig
    telemetry: TelemetryConfig
    gates: tuple[GateSpec, ...]
    source_file: str = ""
    #: the plugins imported for this scenario (sim/plugins.py): module names as given, ``.py`` files as
    #: absolute paths
    plugins: tuple[str, ...] = ()
    #: F/T noise and bias, delays, target-pose estimate error (sim/uncertainty.py); all off by default
    uncertainty: UncertaintyConfig = field(default_factory=UncertaintyConfig)
    insertion: InsertionConfig = field(default_factory=InsertionConfig)

    def to_dict(self) -> dict[str, Any]:
        """The resolved scenario (defaults filled in), JSON/YAML-serialisable."""
        out: dict[str, Any] = {"name": self.name, "description": self.description}
        for key in ("robot", "sim", "start", "wrench", "telemetry", "uncertainty"):
            out[key] = config_to_dict(getattr(self, key))
        if self.insertion.active:  # written only when used, so older run folders and scenarios compare equal
            out["insertion"] = config_to_dict(self.insertion)
        for key in ("tool", "target", "planner", "controller"):
            block = getattr(self, key)
            out[key] = None if block is None else {"type": block.type, **config_to_dict(block.config)}
        out["gates"] = [config_to_dict(g) for g in self.gates]
        if self.plugins:
            out["plugins"] = list(self.plugins)
        return out

    def replace(self, overrides: Any = None, /, **changes: Any) -> Scenario:
        """A new scenario with ``changes`` applied and validated exactly like a file (same ScenarioError,
        naming :attr:`source_file`).

        Args:
            overrides: a mapping of key paths or nested mappings, or a list of ``"path=value"`` strings
                (sim/overrides.py), applied first.
            changes: top-level keys → a config record, a :class:`TypedBlock`, or a mapping merged into
                the block (``controller={"k": 500}`` keeps the block's other keys).

        Raises:
            ScenarioError: the result is not a valid scenario.
        """
        from dockbench.sim.overrides import merge_overrides

        file = self.source_file or "<scenario>"
        data, _ = merge_overrides(self.to_dict(), overrides)
        for key, value in changes.items():
            if key == "source_file":
                file = value
                continue
            if key not in _TOP_KEYS:
                raise ScenarioError(f"unknown top-level key {short_repr(key)}; allowed: {', '.join(_TOP_KEYS)}",
                                    file=file)
            data, _ = merge_overrides(data, {key: value})
        return scenario_from_dict(data, file=file)


_TOP_KEYS = (
    "name",
    "description",
    "robot",
    "sim",
    "start",
    "tool",
    "target",
    "planner",
    "controller",
    "wrench",
    "insertion",
    "telemetry",
    "gates",
    "plugins",
    "uncertainty",
)

#: top-level records besides the fixed ones (key → config class; sim/overrides.py reads their defaults)
EXTRA_BLOCKS: dict[str, type] = {"uncertainty": UncertaintyConfig}


def _registries() -> dict[str, Any]:
    # Imported here so every registered type is known (modules register on import).
    from dockbench.controllers.base import CONTROLLERS
    from dockbench.planners.base import PLANNERS
    from dockbench.sim.interfaces import TARGETS, TOOLS

    from dockbench import (
        controllers,  # noqa: F401
        planners,  # noqa: F401
    )

    # the G20 hand (its bridge and mapping, ≈ 0.1 s) is imported when a scenario names it
    TOOLS.register_lazy("g20_left", "dockbench.hand.effector")
    return {"tool": TOOLS, "target": TARGETS, "planner": PLANNERS, "controller": CONTROLLERS}


def parse_typed_block(kind: str, data: Any, file: str) -> TypedBlock:
    """Parse ``{type: ..., <that type's keys>}`` for one of tool/target/planner/controller."""
    reg = _registries()[kind]
    if not isinstance(data, dict):
        raise ScenarioError(
            f"expected a mapping with a 'type' key; known types: {', '.join(reg.names())}",
            file=file,
            key=kind,
        )
    if "type" not in data:
        raise ScenarioError(f"missing 'type'; known: {', '.join(reg.names())}", file=file, key=f"{kind}.type")
    type_name = data["type"]
    if not isinstance(type_name, str):
        raise ScenarioError(
            f"expected a string; known: {', '.join(reg.names())}", file=file, key=f"{kind}.type"
        )
    cls = reg.get(type_name, file=file, key=f"{kind}.type")
    rest = {k: v for k, v in data.items() if k != "type"}
    return TypedBlock(type_name, parse_config(cls.Config, rest, file=file, path=kind))


_UNSAFE_NAME_CHARS = frozenset('<>:"/\\|?*')
#: Unicode categories a name may not contain: control (Cc: C0, DEL, C1 such as U+0085), format (Cf: U+200B,
#: U+FEFF, bidi overrides), surrogate (Cs), private use (Co), unassigned (Cn), line/paragraph separators
_REFUSED_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))


def _refused_char(c: str) -> bool:
    import unicodedata

    return unicodedata.category(c) in _REFUSED_CATEGORIES


def _visible(c: str) -> bool:
    """A letter, digit, punctuation or symbol (not a space, a mark alone or a refused character)."""
    import unicodedata

    return unicodedata.category(c)[0] in "LNPS"


def check_name(name: Any, *, file: str | None = None, key: str = "name") -> str:
    """The scenario ``name`` if it can name a run folder: a non-empty string of at most
    :data:`MAX_NAME_LENGTH` characters that is one path component (not ``.`` or ``..``, no ``/``,
    ``\\``), with no control, format, surrogate, private-use, unassigned or line/paragraph-separator
    character (Unicode categories Cc, Cf, Cs, Co, Cn, Zl, Zp: NUL, U+0085, U+200B, U+FEFF, U+2028, …) and
    at least one visible character (a letter, digit, punctuation or symbol).

    Raises:
        ScenarioError: naming ``file`` and ``key``.
    """
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"expected a non-empty string, got {short_repr(name)}", file=file, key=key)
    if len(name) > MAX_NAME_LENGTH:
        raise ScenarioError(
            f"{len(name)} characters; at most {MAX_NAME_LENGTH} allowed (the name is the run folder's)",
            file=file,
            key=key,
        )
    bad = sorted({c for c in name if c in "/\\" or _refused_char(c)})
    if bad or name.strip(". ") == "" or not any(_visible(c) for c in name):
        shown = (", ".join(f"U+{ord(c):04X}" if _refused_char(c) else repr(c) for c in bad[:5]) if bad
                 else "only dots/spaces" if name.strip(". ") == "" else "no visible character")
        raise ScenarioError(
            f"{ascii(name[:40])} cannot name a folder ({shown}); use letters, digits, '_', '-', '.'",
            file=file,
            key=key,
        )
    return name


def folder_name(name: str) -> str:
    """``name`` as one safe path component on every OS: characters ``<>:"/\\|?*`` and the characters
    :func:`check_name` refuses become ``_``; leading dots and trailing dots/spaces are dropped."""
    out = "".join("_" if (c in _UNSAFE_NAME_CHARS or _refused_char(c)) else c for c in name)
    out = out.lstrip(".").rstrip(". ")
    return out or "_"


def scenario_from_dict(data: Any, file: str = "<scenario>", *, allow_plugins: bool | None = None) -> Scenario:
    """Validate a scenario mapping (already read from YAML). ``allow_plugins``: see :func:`load_scenario`."""
    if not isinstance(data, dict):
        raise ScenarioError("the scenario must be a YAML mapping", file=file)
    for key in data:
        if key not in _TOP_KEYS:
            raise ScenarioError(
                f"unknown top-level key {short_repr(key)}; allowed: {', '.join(_TOP_KEYS)}", file=file
            )
    for key in ("name", "robot", "planner", "controller"):
        if key not in data:
            raise ScenarioError("required key missing", file=file, key=key)
    # plugins first: they register the types the blocks below name (sim/plugins.py)
    load_entry_points()
    base_dir = Path(file).resolve().parent if Path(file).is_file() else None
    plugins = load_plugins(data.get("plugins") or [], base_dir=base_dir, file=file, allow=allow_plugins)
    name = check_name(data["name"], file=file)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ScenarioError(f"expected a string, got {short_repr(description)}", file=file, key="description")
    if len(description) > MAX_DESCRIPTION_LENGTH:
        raise ScenarioError(
            f"{len(description)} characters; at most {MAX_DESCRIPTION_LENGTH} allowed", file=file, key="description"
        )
    robot = parse_config(RobotConfig, data["robot"], file=file, path="robot")
    if robot.model is not None:  # the user's own arm: its path relative to the scenario file, made absolute
        robot = dataclasses.replace(robot, model=str(resolve_model_path(robot.model, file)))
    spec = robot_for(robot, file)
    for key in ("q_init", "q_guess"):
        q = getattr(robot, key)
        if q is not None and len(q) != len(spec.joint_names):
            raise ScenarioError(
                f"expected {len(spec.joint_names)} joint values for {spec.name}, got {len(q)}",
                file=file,
                key=f"robot.{key}",
            )
    gates_raw = data.get("gates", []) or []
    if not isinstance(gates_raw, list):
        raise ScenarioError("expected a list of {metric, max/min}", file=file, key="gates")
    if len(gates_raw) > MAX_GATES:
        raise ScenarioError(f"{len(gates_raw)} gates; at most {MAX_GATES} allowed", file=file, key="gates")
    gates = tuple(parse_config(GateSpec, g, file=file, path=f"gates[{i}]") for i, g in enumerate(gates_raw))
    tool_raw = data.get("tool", {"type": "probe"})
    target_raw = data.get("target")
    tool = parse_typed_block("tool", tool_raw, file)
    target = None if target_raw is None else parse_typed_block("target", target_raw, file)
    if target is not None:  # geometry that depends on both blocks is checked at load time too
        try:
            from dockbench.sim.interfaces import make_target

            make_target(_registries()["target"].get(target.type), target.config, getattr(tool.config, "radius", 0.0),
                        tool.config)
        except ScenarioError as exc:
            raise ScenarioError(str(exc), file=file) from None
    sim = parse_config(SimConfig, data.get("sim"), file=file, path="sim")
    if sim.cone == "pyramidal" and target is not None:
        # MuJoCo's contact friction is the larger of the two geoms' (tools without a friction key, such as
        # the G20 hand, keep MuJoCo's default of 1 on their geoms)
        mu_tool = getattr(tool.config, "friction", None)
        mu_target = getattr(target.config, "friction", None)
        if mu_tool is not None and mu_target is not None and max(mu_tool, mu_target) < PYRAMIDAL_MIN_FRICTION:
            raise ScenarioError(
                f"the pyramidal cone needs a contact friction ≥ {PYRAMIDAL_MIN_FRICTION} (got "
                f"max(tool.friction, target.friction) = {max(mu_tool, mu_target)}): near-frictionless contacts "
                "make its four edges n ± μt nearly parallel and the contact solution blows up (peak forces of "
                "40 N to 90 kN measured at μ ≤ 0.001); use `cone: elliptic` (the default)",
                file=file, key="sim.cone",
            )
    wrench = parse_config(WrenchConfig, data.get("wrench"), file=file, path="wrench")
    _check_mounts(robot, sim, target, wrench, file)
    if wrench.tare_time is not None and wrench.tare_time < sim.control_period - 1e-12:
        raise ScenarioError(
            f"must be ≥ one control period ({sim.control_period} s), got {wrench.tare_time}: the first control "
            "step reads the state before any torque was applied (with gravity on the arm is falling)",
            file=file, key="wrench.tare_time",
        )
    uncertainty = parse_config(UncertaintyConfig, data.get("uncertainty"), file=file, path="uncertainty")
    if target is None and (any(uncertainty.belief_position_std) or any(uncertainty.belief_rpy_std_deg)):
        raise ScenarioError(
            "a target-pose estimate error needs a target; remove belief_position_std / belief_rpy_std_deg",
            file=file, key="uncertainty",
        )
    return Scenario(
        name=name,
        description=description,
        robot=robot,
        sim=sim,
        start=parse_config(StartConfig, data.get("start"), file=file, path="start"),
        tool=tool,
        target=target,
        planner=parse_typed_block("planner", data["planner"], file),
        controller=parse_typed_block("controller", data["controller"], file),
        wrench=wrench,
        telemetry=parse_config(TelemetryConfig, data.get("telemetry"), file=file, path="telemetry"),
        gates=gates,
        source_file=file,
        plugins=plugins,
        uncertainty=uncertainty,
        insertion=parse_config(InsertionConfig, data.get("insertion"), file=file, path="insertion"),
    )


def _check_mounts(
    robot: RobotConfig, sim: SimConfig, target: TypedBlock | None, wrench: WrenchConfig, file: str
) -> None:
    """Combinations of mounts (sim/mounts.py) that the physics or the estimators do not support."""
    gravity = any(g != 0.0 for g in sim.gravity)
    if robot.base.floating and gravity:
        raise ScenarioError(
            f"a free-floating base needs sim.gravity = [0, 0, 0] (got {list(sim.gravity)}): under gravity the whole "
            "spacecraft falls; in orbit chaser and target fall together and their relative motion is gravity-free",
            file=file, key="robot.base.type",
        )
    mount = getattr(target.config, "mount", None) if target is not None else None
    if mount is not None and mount.type == "floating" and gravity:
        raise ScenarioError(
            f"a floating target needs sim.gravity = [0, 0, 0] (got {list(sim.gravity)}): it would fall away; use "
            "type compliant for a test bed on the ground",
            file=file, key="target.mount.type",
        )
    if robot.base.floating and wrench.force_source == "observer":
        raise ScenarioError(
            "the momentum observer models a fixed-base arm (p = M q̇ with the base at rest); with a free-floating "
            "base use force_source sensor or truth",
            file=file, key="wrench.force_source",
        )


#: the shipped scenarios (a checkout's scenarios/ folder)
SHIPPED_SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


#: the folders of ``scenarios/`` that hold campaign files (docs/campaigns.md) and tuning studies (docs/tuning.md),
#: not scenarios
NOT_SCENARIO_FOLDERS = ("campaigns", "studies")


def shipped_scenarios() -> list[str]:
    """Names of the shipped scenarios (paths under :data:`SHIPPED_SCENARIOS` without ``.yaml``; not the
    campaign and study files of :data:`NOT_SCENARIO_FOLDERS`, docs/campaigns.md, docs/tuning.md)."""
    if not SHIPPED_SCENARIOS.is_dir():
        return []
    root = SHIPPED_SCENARIOS
    return sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.yaml")
                  if p.relative_to(root).parts[0] not in NOT_SCENARIO_FOLDERS)


def resolve_scenario(name_or_path: str | Path) -> Path:
    """``name_or_path`` if it is a file; else the shipped scenario of that name (``iiwa14_docking``,
    ``orbit/iiwa14_orbit_floating_target``, with or without ``.yaml``).

    Raises:
        ScenarioError: neither; the message lists the shipped names that come closest.
    """
    p = Path(name_or_path)
    if p.is_file():
        return p
    stem = str(name_or_path).removesuffix(".yaml")
    shipped = SHIPPED_SCENARIOS / f"{stem}.yaml"
    if stem and not p.is_absolute() and shipped.is_file():
        return shipped
    import difflib

    names = shipped_scenarios()
    close = difflib.get_close_matches(stem, names, n=5, cutoff=0.4)
    hint = f"; closest shipped scenarios: {', '.join(close)}" if close else f"; shipped: {', '.join(names)}"
    raise ScenarioError(f"no scenario file {str(name_or_path)!r} and no shipped scenario of that name{hint}",
                        file=str(name_or_path))


def load_scenario(path: str | Path, overrides: Any = None, *, allow_plugins: bool | None = None) -> Scenario:
    """Read and validate a scenario file.

    Args:
        path: the YAML file.
        overrides: applied before validation (sim/overrides.py): a mapping deep-merged into the file
            (``{"controller": {"k": 500}}``, or key paths ``{"controller.k": 500}``), or a list of
            ``"path=value"`` strings (``--set``). A changed ``type`` keeps the block's keys that the new type
            also has (:func:`load_scenario_notes` also returns what was dropped).
        allow_plugins: import the plugins the file (or an override) names: a plugin is code
            (sim/plugins.py). None = only when ``DOCKBENCH_ALLOW_PLUGINS=1`` is set.

    Raises:
        ScenarioError: missing file, YAML syntax error (sim/yamlio.py), any schema violation, or a plugin
            named without the opt-in.
    """
    return load_scenario_notes(path, overrides, allow_plugins=allow_plugins)[0]


def load_scenario_notes(path: str | Path, overrides: Any = None, *,
                        allow_plugins: bool | None = None) -> tuple[Scenario, list[str]]:
    """:func:`load_scenario`, and the notes of the overrides (typed blocks whose type changed: kept and
    dropped keys)."""
    from dockbench.sim.overrides import merge_overrides

    p = Path(path)
    file = str(path)
    if not p.is_file():
        raise ScenarioError(f"scenario file not found (looked at {p.resolve()})", file=file)
    data = read_yaml_file(p, what="a scenario file", max_bytes=MAX_FILE_BYTES)  # sim/yamlio.py's rules
    try:
        data, notes = merge_overrides(data, overrides, where="--set" if isinstance(overrides, (list, tuple)) else
                                      "overrides")
    except ScenarioError as exc:
        raise ScenarioError(exc.detail, file=file, key=exc.key) from None
    except RecursionError:
        raise ScenarioError("YAML nested too deeply", file=file) from None
    return scenario_from_dict(data, file=file, allow_plugins=allow_plugins), notes


def docs_markdown() -> str:
    """docs/scenarios.md, generated from the typed configs (cannot drift from the code)."""
    regs = _registries()
    lines = [
        "# Scenario reference",
        "",
        "Generated by `python -m dockbench.sim.scenario --docs > docs/scenarios.md` from the typed configs;",
        "`tests/test_scenario.py` fails when this file is out of date.",
        "",
        "Top-level keys: " + ", ".join(f"`{k}`" for k in _TOP_KEYS) + ".",
        f"`robot.type`: {', '.join(robot_names())}; or your own arm with `robot.model` (docs/robots.md).",
        "",
        "`plugins`: a list of modules (`my_pkg.my_controller`, searched first in the scenario's folder) or `.py`",
        "files (relative to the scenario) imported before the blocks are read, so that the types they register",
        "can be named (docs/extending.md). A plugin is Python code: it is imported only with an opt-in",
        "(`--allow-plugins`, `DOCKBENCH_ALLOW_PLUGINS=1`, or `allow_plugins=True`); without it the scenario is",
        "refused. The tables below list the built-in types only.",
        "",
        "The file is read by `sim/yamlio.py`: no aliases (`*name`), no duplicate keys, YAML 1.2 numbers (`1e-3`",
        "is a number; `5:00`, `010`, `0b1` and `1_000`, which YAML 1.1 reads as other numbers, are refused;",
        "`yes`/`no`/`on`/`off` are strings), at most 1 MiB and 50 levels of nesting. `--set` values follow the",
        "same rules.",
        "",
        "From Python, `load_scenario(path)` returns a frozen `Scenario` whose attributes follow these keys:",
        "`scenario.sim.timestep`, `scenario.robot.model`, and for a typed block (`tool`, `target`, `planner`,",
        "`controller`) its `type` and its keys directly, `scenario.controller.k` (the same value as",
        "`scenario.controller.config.k`; an unknown key is an AttributeError listing the block's keys). Change",
        "values with `scenario.replace({\"controller.k\": 800})`, validated like a file.",
        "",
    ]

    def table(title: str, cls: type, prefix: str) -> None:
        lines.extend(
            [
                f"## {title}",
                "",
                "| key | type / allowed | unit | default | meaning |",
                "|---|---|---|---|---|",
            ]
        )
        for key, allowed, unit, default, doc in describe_config(cls, prefix):
            lines.append(f"| `{key}` | {allowed} | {unit} | `{default}` | {doc} |")
        lines.append("")

    table("robot", RobotConfig, "robot.")
    table("sim", SimConfig, "sim.")
    table("start", StartConfig, "start.")
    table("wrench", WrenchConfig, "wrench.")
    table("insertion (docs/theory/insertion.md)", InsertionConfig, "insertion.")
    table("telemetry", TelemetryConfig, "telemetry.")
    table("uncertainty (sim/uncertainty.py, docs/theory/uncertainty.md)", UncertaintyConfig, "uncertainty.")
    table("gates (a list of)", GateSpec, "gates[].")
    for kind in ("tool", "target", "planner", "controller"):
        for name in regs[kind].names():
            if not regs[kind].get(name).__module__.startswith("dockbench."):
                continue  # a plugin's type (docs/extending.md)
            table(f"{kind}: type `{name}`", regs[kind].get(name).Config, f"{kind}.")
    from dockbench.telemetry.metrics import METRICS

    lines.extend(["## Metric names for gates", "", "| metric | unit | meaning |", "|---|---|---|"])
    for name, (unit, doc) in sorted(METRICS.items()):
        lines.append(f"| `{name}` | {unit} | {doc} |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - docs generator
    if "--docs" in sys.argv:
        sys.stdout.write(docs_markdown())
    else:
        print("usage: python -m dockbench.sim.scenario --docs > docs/scenarios.md")
        raise SystemExit(1)
