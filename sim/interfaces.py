"""Parametric docking geometry: the tool and target bases, the probe tool (male) and the targets (drogue, plate).

Tool frame P (``probe`` body): origin at the flange = F/T sensor site ``ft_sensor``; +z along the
probe axis, pointing away from the arm. The EE site ``ee`` is at the probe tip, z = L = L_shaft + L_nose,
with the same axes. The nose is ``round`` (default: a hemisphere of the shaft radius, L_nose = r_p;
the probe is one MuJoCo capsule, whose contacts with the box walls are MuJoCo's analytic
capsule–box routine) or ``cone`` (a truncated cone, L_nose = ``tip_length``; the probe is one
convex mesh, whose contacts go through MuJoCo's general convex (GJK/EPA) collider, ≈ 3× the cost
per nearby wall).

Drogue frame D (``target`` body): origin at the centre of the mouth, +z along the mating axis
pointing OUT of the drogue (towards an approaching tool). The funnel narrows from the mouth radius
R_m at z = 0 to the bore radius r_b at z = −h_f, h_f = (R_m − r_b) / tan(half_angle); the bore runs
to the seat (bottom plate) at z = −(h_f + L_bore). Funnel and bore walls are rings of N convex
segments (primitive boxes by default, or hexahedral convex meshes) whose flat inner faces have
their inscribed radius on the nominal surface, so a probe of radius r_p has exactly
``clearance = r_b − r_p`` of radial play.

The seated EE pose in D: tip at z = −depth_total + gap (gap ≥ 0 leaves the tip short of the seat,
negative preloads it), tool axis = −z_D, i.e. R_D_ee = Rx(π) = diag(1, −1, −1).

The keyed interface (``keyed_probe`` + ``keyed_drogue``: the same shaft, funnel and bore plus key lugs and
V-grooves, a kinematic seat that fixes the mating phase) lives in :mod:`sim.keyed`, the tight-clearance
peg-in-hole family in :mod:`sim.peg_hole`; both register here on first use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import mujoco
import numpy as np
from dockbench.sim.config import param
from dockbench.sim.errors import ScenarioError
from dockbench.sim.mounts import MountConfig, mount_target
from dockbench.sim.poses import PoseConfig, rpy_to_matrix  # noqa: F401 - re-exported: the targets' pose and its rotations
from dockbench.sim.registry import Registry

R_D_EE_SEATED = np.diag([1.0, -1.0, -1.0])

#: most convex segments per ring (drogue walls, probe mesh): bounds the model's size and build time
MAX_RING_SEGMENTS = 256


# ----------------------------------------------------------------------------------------- tools
@dataclass(frozen=True)
class ProbeConfig:
    radius: float = param(0.010, unit="m", ge=1e-4, le=0.1, doc="probe shaft radius r_p")
    shaft_length: float = param(0.12, unit="m", ge=1e-3, le=1.0, doc="cylindrical shaft length from the flange")
    nose: Literal["round", "cone"] = param(
        "round",
        doc="round: hemispherical nose of the shaft radius (one capsule, analytic contacts); "
        "cone: truncated cone of tip_length (one convex mesh, general convex contacts)",
    )
    tip_length: float = param(0.015, unit="m", ge=1e-4, le=0.2, doc="cone tip length (nose: cone only)")
    tip_radius_ratio: float = param(
        0.35, ge=0.01, le=1.0, doc="tip end radius / shaft radius (nose: cone only)"
    )
    mass: float = param(0.4, unit="kg", gt=0.0, le=50.0, doc="declared tool mass (beyond the F/T sensor)")
    friction: float = param(0.3, ge=0.0, le=10.0, doc="sliding friction coefficient of the probe")
    segments: int = param(
        32, ge=8, le=MAX_RING_SEGMENTS, doc="vertices per ring of the convex probe mesh (nose: cone only)"
    )


class Tool:
    """Base for end effectors built into the assembly. Subclasses implement :meth:`build`."""

    Config: ClassVar[type]
    type_name: ClassVar[str]
    #: names (without prefix) of the sites the loop needs
    sensor_site = "ft_sensor"
    ee_site = "ee"
    root_body = "tool"

    def __init__(self, config: Any):
        self.config = config

    def build(self, spec: mujoco.MjSpec, parent: Any, pos: np.ndarray, quat: np.ndarray) -> None:
        raise NotImplementedError

    @property
    def length(self) -> float:
        """Distance flange → EE along the tool z axis [m]."""
        raise NotImplementedError

    def lumping_qpos(self, model: mujoco.MjModel) -> np.ndarray | None:
        """Configuration at which the tool's own joints (if any) are frozen when its inertia is lumped
        into the arm's Pinocchio model; None = ``model.qpos0``. Rigid tools have no joints."""
        return None

    def make_runtime(self, model: mujoco.MjModel, data: mujoco.MjData, scenario: Any) -> ToolRuntime | None:
        """Per-step behaviour of an active end effector (e.g. a kinematic hand); None for rigid tools."""
        return None


class ToolRuntime:
    """Hook for end effectors that act every control step (the loop calls these in order).

    * :meth:`pre_step` runs after the controller and before the MuJoCo substeps, at time t [s].
    * :attr:`channels` declares extra telemetry channels: name → (per-step shape, unit);
      :meth:`record` writes step ``i`` into the preallocated arrays.
    """

    channels: dict[str, tuple[tuple[int, ...], str]] = {}

    def pre_step(self, t: float) -> None:
        raise NotImplementedError

    def record(self, i: int, arrays: dict[str, np.ndarray]) -> None:  # noqa: B027 - optional
        """Write telemetry row ``i`` (default: nothing)."""

    def bind_dynamics(self, dynamics: Any) -> None:  # noqa: B027 - optional
        """Called once by the loop's build with the run's :class:`sim.dynamics.Dynamics`, for end
        effectors whose motion changes the arm's model (the hand re-lumps its inertia). Default: nothing."""

    def summary(self) -> dict[str, Any]:
        return {}


TOOLS: Registry[Tool] = Registry("tool")


def _ring(radius: float, z: float, n: int, phase: float = 0.0) -> np.ndarray:
    a = phase + 2.0 * math.pi * np.arange(n) / n
    return np.stack([radius * np.cos(a), radius * np.sin(a), np.full(n, z)], axis=1)


@TOOLS.register("probe")
class Probe(Tool):
    """Male docking probe: cylinder shaft + nose (hemisphere → one capsule geom, or truncated cone
    → one convex mesh geom), declared inertia of a solid cylinder of the same length:
    I_xx = I_yy = m (3 r² + L²)/12, I_zz = m r²/2 about the COM at L/2.

    The capsule's rear hemisphere lies behind the flange (z < 0), inside the arm's last link, where
    nothing it can touch ever is; from z = 0 to the tip its surface is the probe's."""

    Config = ProbeConfig

    @property
    def length(self) -> float:
        """Flange → tip distance L [m]."""
        c = self.config
        return c.shaft_length + (c.radius if c.nose == "round" else c.tip_length)

    def build(self, spec: mujoco.MjSpec, parent: Any, pos: np.ndarray, quat: np.ndarray) -> None:
        c: ProbeConfig = self.config
        L = self.length
        body = parent.add_body(name=self.root_body, pos=list(pos), quat=list(quat))
        body.explicitinertial = True
        body.mass = c.mass
        body.ipos = [0.0, 0.0, L / 2.0]
        ixx = c.mass * (3.0 * c.radius**2 + L**2) / 12.0
        body.inertia = [ixx, ixx, c.mass * c.radius**2 / 2.0]
        common = dict(name="probe_geom", friction=[c.friction, 0.005, 0.0001], rgba=[0.75, 0.75, 0.8, 1.0], mass=0.0)
        if c.nose == "round":
            # axis segment z ∈ [0, L_shaft]; the front hemisphere ends at the tip z = L_shaft + r_p
            half = c.shaft_length / 2.0
            body.add_geom(
                type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[c.radius, half, 0.0], pos=[0.0, 0.0, half], **common
            )
        else:
            verts = np.concatenate(
                [
                    _ring(c.radius, 0.0, c.segments),
                    _ring(c.radius, c.shaft_length, c.segments),
                    _ring(c.radius * c.tip_radius_ratio, L, c.segments),
                ]
            )
            mesh = spec.add_mesh(name="probe_mesh")
            mesh.uservert = verts.ravel().tolist()
            body.add_geom(type=mujoco.mjtGeom.mjGEOM_MESH, meshname="probe_mesh", **common)
        body.add_site(name=self.sensor_site, pos=[0, 0, 0], size=[0.004, 0, 0])
        body.add_site(name=self.ee_site, pos=[0, 0, L], size=[0.003, 0, 0])


# --------------------------------------------------------------------------------------- targets
@dataclass(frozen=True)
class OffsetConfig(PoseConfig):
    """A pose offset (the planner's belief error of a target): zero unless given, key by key."""

    position: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0), unit="m", length=3, ge=-1.0, le=1.0, doc="offset of the origin, in the target frame"
    )
    rpy_deg: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0), unit="deg", length=3, ge=-180.0, le=180.0,
        doc="rotation offset, fixed-axis roll/pitch/yaw (R = Rz Ry Rx)",
    )


def matrix_to_quat(R: np.ndarray) -> np.ndarray:
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R, dtype=float).ravel())
    return q


@dataclass(frozen=True)
class DrogueConfig:
    pose: PoseConfig = field(default_factory=PoseConfig)
    belief_offset: OffsetConfig = field(default_factory=OffsetConfig)
    mouth_radius: float = param(0.035, unit="m", ge=1e-4, le=0.5, doc="funnel radius at the mouth R_m")
    funnel_half_angle_deg: float = param(30.0, unit="deg", gt=5.0, lt=85.0, doc="funnel half-angle")
    clearance: float = param(
        0.0005, unit="m", ge=0.0, le=0.05, doc="radial play r_b − r_p (bore radius from the probe)"
    )
    bore_length: float = param(0.04, unit="m", ge=1e-4, le=1.0, doc="bore length below the funnel L_bore")
    wall_thickness: float = param(0.004, unit="m", ge=1e-4, le=0.1, doc="wall thickness of each segment")
    segments: int = param(16, ge=6, le=MAX_RING_SEGMENTS, doc="number of convex wall segments per ring")
    wall_shape: Literal["box", "mesh"] = param(
        "box", doc="segment geometry: primitive boxes or convex meshes"
    )
    friction: float = param(0.3, ge=0.0, le=10.0, doc="sliding friction of the drogue walls")
    solref: tuple[float, float] = param(
        (0.01, 1.0), length=2, gt=0.0, le=10.0, doc="contact solref (timeconst [s], dampratio)"
    )
    solimp: tuple[float, float, float, float, float] = param(
        (0.95, 0.99, 0.001, 0.5, 2.0), length=5, gt=0.0, le=10.0,
        doc="contact solimp (dmin, dmax, width [m], midpoint, power)",
    )
    seat_gap: float = param(
        0.001, unit="m", ge=-0.05, le=1.0, doc="goal tip distance above the seat (negative = preload)"
    )
    mount: MountConfig = field(default_factory=MountConfig)


@dataclass(frozen=True)
class PlateConfig:
    pose: PoseConfig = field(default_factory=PoseConfig)
    belief_offset: OffsetConfig = field(default_factory=OffsetConfig)
    size: tuple[float, float, float] = param(
        (0.10, 0.10, 0.01), unit="m", length=3, ge=1e-4, le=5.0, doc="box half-sizes"
    )
    friction: float = param(0.3, ge=0.0, le=10.0, doc="sliding friction")
    solref: tuple[float, float] = param(
        (0.004, 1.0), length=2, gt=0.0, le=10.0, doc="contact solref (timeconst [s], dampratio)"
    )
    solimp: tuple[float, float, float, float, float] = param(
        (0.95, 0.99, 0.001, 0.5, 2.0), length=5, gt=0.0, le=10.0,
        doc="contact solimp (dmin, dmax, width [m], midpoint, power)",
    )
    press_depth: float = param(
        0.005, unit="m", ge=-1.0, le=0.1, doc="goal tip depth below the plate surface (preload; negative = above)"
    )
    mount: MountConfig = field(default_factory=MountConfig)


class Target:
    """Base for docking targets. ``T_world_target`` is the TRUE pose (the initial one for a moving
    mount, sim/mounts.py); the planner's belief is the true pose composed with ``belief_offset`` (for
    misalignment studies)."""

    Config: ClassVar[type]
    type_name: ClassVar[str]
    body_name = "target"
    #: whether the constructor takes the tool's config as well (``tool_config=``; :func:`make_target`): a target
    #: whose geometry must match the tool's (the keyed drogue's grooves and the probe's lugs)
    uses_tool_config: ClassVar[bool] = False

    def __init__(self, config: Any, tool_radius: float, tool_config: Any = None):
        self.config = config
        self.tool_radius = tool_radius
        self.tool_config = tool_config
        self.T_world_target = config.pose.matrix()
        self.T_world_believed = self.T_world_target @ config.belief_offset.matrix()

    def build(self, spec: mujoco.MjSpec) -> None:
        raise NotImplementedError

    def goal_in_target(self) -> np.ndarray:
        """Seated EE pose in the target frame (4, 4)."""
        raise NotImplementedError

    @property
    def depth_total(self) -> float:
        raise NotImplementedError

    @property
    def culls_contacts(self) -> bool:
        """Whether :meth:`contact_culling` gives a culling (``sim.loop.build`` then gives the run its own copy
        of the MjModel, whose box contact flags the culling rewrites)."""
        return False

    def contact_culling(self, model: mujoco.MjModel, data: mujoco.MjData, control_period: float) -> Any:
        """The target's contact culling (e.g. sim/culling.BoxCulling: ``update()`` before each control
        period, ``stats()`` for meta.json), or None: every geom in every collision pass."""
        return None

    @property
    def yaw_period(self) -> float:
        """Rotation about the mating axis [rad] after which the mating repeats: 0 = any rotation mates
        (an axisymmetric interface; ``start.free_yaw`` then picks the one nearest the home pose), 2π/N
        for an N-fold keyed one (``free_yaw`` picks among those)."""
        return 0.0


TARGETS: Registry[Target] = Registry("target")


def make_target(cls: type[Target], config: Any, tool_radius: float, tool_config: Any) -> Target:
    """``cls(config, tool_radius)``, plus ``tool_config=`` for a class with :attr:`Target.uses_tool_config`
    (a plugin's target with the two-argument constructor keeps working)."""
    if getattr(cls, "uses_tool_config", False):
        return cls(config, tool_radius, tool_config=tool_config)
    return cls(config, tool_radius)


def _wall_ring(
    spec: mujoco.MjSpec,
    body: Any,
    name: str,
    n: int,
    r_top: float,
    z_top: float,
    r_bot: float,
    z_bot: float,
    thickness: float,
    shape: str,
    geom_kw: dict,
) -> None:
    """A ring of n convex wall segments whose flat inner faces have inscribed radius r(z), linear
    from (r_top, z_top) to (r_bot, z_bot). ``shape`` = "box" (primitive boxes, fastest contacts;
    the inner face is the plane at the inscribed radius, widened 2% so neighbours overlap) or
    "mesh" (hexahedral convex meshes that tile the ring exactly)."""
    half = math.pi / n
    dr, dz = r_bot - r_top, z_bot - z_top
    L = math.hypot(dr, dz)
    sr, sz = dr / L, dz / L  # slant direction (radial, axial)
    nr, nz = -sz, sr  # outward face normal (radial, axial)
    k = 1.0 / math.cos(half)
    for i in range(n):
        a = 2 * half * i
        er = np.array([math.cos(a), math.sin(a), 0.0])
        et = np.array([-math.sin(a), math.cos(a), 0.0])
        ez = np.array([0.0, 0.0, 1.0])
        if shape == "box":
            s3 = sr * er + sz * ez
            y = np.cross(s3, et)
            R = np.stack([et, y, s3], axis=1)
            mid_r, mid_z = (r_top + r_bot) / 2.0, (z_top + z_bot) / 2.0
            center = mid_r * er + mid_z * ez + (thickness / 2.0) * (nr * er + nz * ez)
            half_w = 1.02 * max(r_top, r_bot) * math.tan(half)
            body.add_geom(
                name=f"{name}_{i}",
                type=mujoco.mjtGeom.mjGEOM_BOX,
                size=[half_w, thickness / 2.0, L / 2.0],
                pos=list(center),
                quat=list(matrix_to_quat(R)),
                **geom_kw,
            )
        else:
            a0, a1 = a - half, a + half
            pts = []
            for r, z in ((r_top, z_top), (r_bot, z_bot)):
                for rr, zz in ((r * k, z), ((r + thickness * nr) * k, z + thickness * nz)):
                    for ang in (a0, a1):
                        pts.append((rr * math.cos(ang), rr * math.sin(ang), zz))
            mesh = spec.add_mesh(name=f"{name}_{i}")
            mesh.uservert = np.array(pts).ravel().tolist()
            body.add_geom(
                name=f"{name}_{i}", type=mujoco.mjtGeom.mjGEOM_MESH, meshname=f"{name}_{i}", **geom_kw
            )


@TARGETS.register("drogue")
class Drogue(Target):
    """Female funnel + bore + seat (see module docstring)."""

    Config = DrogueConfig

    def __init__(self, config: DrogueConfig, tool_radius: float, tool_config: Any = None):
        super().__init__(config, tool_radius, tool_config)
        self.bore_radius = tool_radius + config.clearance
        if self.bore_radius >= config.mouth_radius:
            raise ScenarioError(
                f"bore radius {self.bore_radius:.4f} m (probe radius + clearance) must be smaller than "
                f"mouth_radius {config.mouth_radius:.4f} m",
                key="target.mouth_radius",
            )
        self.funnel_depth = (config.mouth_radius - self.bore_radius) / math.tan(
            math.radians(config.funnel_half_angle_deg)
        )

    @property
    def depth_total(self) -> float:
        """Mouth → seat distance along the axis [m]."""
        return self.funnel_depth + self.config.bore_length

    def goal_in_target(self) -> np.ndarray:
        T = np.eye(4)
        T[:3, :3] = R_D_EE_SEATED
        T[2, 3] = -self.depth_total + self.config.seat_gap
        return T

    def build(self, spec: mujoco.MjSpec) -> None:
        c: DrogueConfig = self.config
        T = self.T_world_target
        body = spec.worldbody.add_body(
            name=self.body_name, pos=list(T[:3, 3]), quat=list(matrix_to_quat(T[:3, :3]))
        )
        mount_target(body, c.mount)  # fixed: static; floating / compliant: joints + declared inertia
        kw = dict(
            friction=[c.friction, 0.005, 0.0001],
            solref=list(c.solref),
            solimp=list(c.solimp),
            rgba=[0.85, 0.55, 0.2, 0.6],
        )
        _wall_ring(
            spec,
            body,
            "funnel",
            c.segments,
            c.mouth_radius,
            0.0,
            self.bore_radius,
            -self.funnel_depth,
            c.wall_thickness,
            c.wall_shape,
            kw,
        )
        _wall_ring(
            spec,
            body,
            "bore",
            c.segments,
            self.bore_radius,
            -self.funnel_depth,
            self.bore_radius,
            -(self.funnel_depth + c.bore_length),
            c.wall_thickness,
            c.wall_shape,
            kw,
        )
        # the seat plate: only its flat top face (z = −depth_total) can be reached through the bore,
        # so a square plate covering the bore is the same surface and collides analytically (box)
        seat_r = self.bore_radius + c.wall_thickness
        bottom = self.funnel_depth + c.bore_length  # the plate under the bore (the seat of the plain drogue)
        body.add_geom(
            name="seat",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[seat_r, seat_r, c.wall_thickness / 2.0],
            pos=[0, 0, -bottom - c.wall_thickness / 2.0],
            **kw,
        )
        body.add_site(name="target_mouth", pos=[0, 0, 0], size=[0.003, 0, 0])
        body.add_site(name="target_seat", pos=[0, 0, -self.depth_total], size=[0.003, 0, 0])


@TARGETS.register("plate")
class Plate(Target):
    """A flat box whose top face is the target frame's z = 0 plane (+z out of the plate)."""

    Config = PlateConfig

    @property
    def depth_total(self) -> float:
        return 0.0

    def goal_in_target(self) -> np.ndarray:
        T = np.eye(4)
        T[:3, :3] = R_D_EE_SEATED
        T[2, 3] = -self.config.press_depth
        return T

    def build(self, spec: mujoco.MjSpec) -> None:
        c: PlateConfig = self.config
        T = self.T_world_target
        body = spec.worldbody.add_body(
            name=self.body_name, pos=list(T[:3, 3]), quat=list(matrix_to_quat(T[:3, :3]))
        )
        mount_target(body, c.mount)
        body.add_geom(
            name="plate",
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=list(c.size),
            pos=[0, 0, -c.size[2]],
            friction=[c.friction, 0.005, 0.0001],
            solref=list(c.solref),
            solimp=list(c.solimp),
            rgba=[0.5, 0.6, 0.7, 1.0],
        )
        body.add_site(name="target_mouth", pos=[0, 0, 0], size=[0.003, 0, 0])


# The interface families in modules of their own register on first use (sim.registry.Registry.register_lazy).
TOOLS.register_lazy("keyed_probe", "dockbench.sim.keyed")
TARGETS.register_lazy("keyed_drogue", "dockbench.sim.keyed")
TOOLS.register_lazy("peg", "dockbench.sim.peg_hole")
TARGETS.register_lazy("peg_hole", "dockbench.sim.peg_hole")
_KEYED_NAMES = ("KeyedProbeConfig", "KeyedProbe", "KeyedDrogueConfig", "KeyedDrogue")


def __getattr__(name: str) -> Any:
    """``from dockbench.sim.interfaces import KeyedDrogue`` keeps working: the keyed family moved to sim.keyed."""
    if name in _KEYED_NAMES:
        from dockbench.sim import keyed

        return getattr(keyed, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
