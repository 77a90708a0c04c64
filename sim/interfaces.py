"""Parametric docking geometry: the probe tool (male) and the targets (drogue, plate).

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

Keyed interface (``keyed_probe`` + ``keyed_drogue``): the same shaft, funnel and bore, plus N radial key
lugs on the probe (capsules of radius r_l at height s_l above the tip, reaching R_l from the axis) and, on
the drogue, N radial V-grooves above the mouth (two slanted boxes each, faces at β from the horizontal,
apex at z_v, half-width w at the top, radial span R_in … R_out) with a flat deck between the grooves at the
grooves' top height z_v + w tan β. A lug that lands within ±w of a groove's centre line slides down the
V (yaw capture ±asin(w / r) at radius r); one that misses lands on the deck and stalls there. Seated, each
lug rests in its V with its axis at z_v + r_l / cos β: the N grooves are a kinematic seat (Maxwell's
coupling of N ≥ 3 cylinders in radial V-grooves) that fixes depth, tilt and the mating phase; the seat
depth of the tip is depth_total = s_l − z_v − r_l / cos β. Everything is convex (capsules and boxes, whose
contacts MuJoCo computes analytically). The mating phase is the probe's yaw about the mating axis,
measured from groove 0 to lug 0 and wrapped to (−180/N, 180/N] degrees (``docking.phase_deg``).
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


@dataclass(frozen=True)
class KeyedProbeConfig(ProbeConfig):
    lugs: int = param(3, ge=2, le=12, doc="number N of radial key lugs, evenly spaced about the probe axis")
    lug_radius: float = param(0.003, unit="m", gt=0.0, le=0.05, doc="lug (capsule) radius r_l")
    lug_reach: float = param(0.047, unit="m", gt=0.0, le=0.5, doc="radial reach R_l of each lug from the probe axis")
    lug_height: float = param(0.0744, unit="m", gt=0.0, le=1.0, doc="height s_l of the lug axes above the tip")
    lug_phase_deg: float = param(
        0.0, unit="deg", ge=-360.0, le=360.0, doc="azimuth of lug 0 about the tool z axis, from the tool x axis"
    )
    lug_mass: float = param(
        0.02, unit="kg", ge=0.0, le=10.0, doc="declared mass of each lug (a thin rod from the axis to R_l)"
    )

    def validate(self) -> None:
        L = self.shaft_length + (self.radius if self.nose == "round" else self.tip_length)
        if self.lug_reach <= self.radius + self.lug_radius:
            raise ScenarioError(
                f"must exceed radius + lug_radius = {self.radius + self.lug_radius:.4f} m, got {self.lug_reach}",
                key="lug_reach",
            )
        if not self.lug_radius < self.lug_height < L - self.lug_radius:
            raise ScenarioError(
                "the lugs must sit on the probe: lug_radius < lug_height < length − lug_radius = "
                f"{L - self.lug_radius:.4f} m "
                f"(length {L:.4f} m from the flange to the tip), got {self.lug_height}",
                key="lug_height",
            )


@TOOLS.register("keyed_probe")
class KeyedProbe(Probe):
    """The probe with N radial key lugs (module docstring): capsules from inside the shaft to the reach
    R_l, their axes at height s_l above the tip, lug k at azimuth φ_0 + 2πk/N about the tool z axis.

    Declared inertia: the shaft as a solid cylinder (mass m, length L, radius r_p) plus each lug as a thin
    rod of mass m_l from the axis to R_l (I about its own centre m_l R_l²/12 across the rod), combined about
    the common centre of mass with the parallel-axis theorem (``fullinertia``)."""

    Config = KeyedProbeConfig

    def lug_azimuths(self) -> np.ndarray:
        """(N,) azimuths [rad] of the lugs about the tool z axis."""
        c: KeyedProbeConfig = self.config
        return math.radians(c.lug_phase_deg) + 2.0 * math.pi * np.arange(c.lugs) / c.lugs

    def inertia(self) -> tuple[float, np.ndarray, np.ndarray]:
        """(total mass [kg], centre of mass (3,) in the tool frame [m], inertia (3, 3) about it [kg·m²])."""
        c: KeyedProbeConfig = self.config
        L = self.length
        parts = []  # (mass, centre, inertia about the part's own centre)
        ixx = c.mass * (3.0 * c.radius**2 + L**2) / 12.0
        parts.append((c.mass, np.array([0.0, 0.0, L / 2.0]), np.diag([ixx, ixx, c.mass * c.radius**2 / 2.0])))
        z = L - c.lug_height
        for a in self.lug_azimuths():
            e = np.array([math.cos(a), math.sin(a), 0.0])
            I_rod = c.lug_mass * c.lug_reach**2 / 12.0 * (np.eye(3) - np.outer(e, e))
            parts.append((c.lug_mass, np.array([0.0, 0.0, z]) + e * c.lug_reach / 2.0, I_rod))
        m = sum(p[0] for p in parts)
        com = sum(p[0] * p[1] for p in parts) / m
        I = np.zeros((3, 3))
        for mi, ci, Ii in parts:
            d = ci - com
            I += Ii + mi * (float(d @ d) * np.eye(3) - np.outer(d, d))
        return m, com, I

    def build(self, spec: mujoco.MjSpec, parent: Any, pos: np.ndarray, quat: np.ndarray) -> None:
        super().build(spec, parent, pos, quat)
        c: KeyedProbeConfig = self.config
        body = spec.body(self.root_body)
        m, com, I = self.inertia()
        body.mass = m
        body.ipos = com.tolist()
        body.inertia = [0.0, 0.0, 0.0]  # unset the shaft's diagonal inertia: the full one below replaces it
        body.fullinertia = [I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]]
        z = self.length - c.lug_height
        half = (c.lug_reach - c.lug_radius) / 2.0  # the capsule's axis runs from the probe axis to R_l − r_l
        for k, a in enumerate(self.lug_azimuths()):
            e = np.array([math.cos(a), math.sin(a), 0.0])
            # capsule axis = local z; rotate z onto the radial direction e
            R = np.stack([np.array([0.0, 0.0, 1.0]), np.cross(e, [0.0, 0.0, 1.0]), e], axis=1)
            body.add_geom(
                name=f"lug_{k}", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[c.lug_radius, half, 0.0],
                pos=(np.array([0.0, 0.0, z]) + e * half).tolist(), quat=list(matrix_to_quat(R)),
                friction=[c.friction, 0.005, 0.0001], rgba=[0.3, 0.5, 0.85, 1.0], mass=0.0,
            )


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


@dataclass(frozen=True)
class KeyedDrogueConfig(DrogueConfig):
    mouth_radius: float = param(0.030, unit="m", ge=1e-4, le=0.5, doc="funnel radius at the mouth R_m")
    bore_length: float = param(0.035, unit="m", ge=1e-4, le=1.0, doc="bore length below the funnel L_bore")
    keys: int = param(3, ge=2, le=12, doc="number N of radial V-grooves (must equal the probe's lugs)")
    key_phase_deg: float = param(
        0.0, unit="deg", ge=-360.0, le=360.0, doc="azimuth of groove 0 about the drogue z axis, from its x axis"
    )
    groove_inner_radius: float = param(0.035, unit="m", gt=0.0, le=1.0, doc="inner radial end R_in of the grooves")
    groove_outer_radius: float = param(0.045, unit="m", gt=0.0, le=1.0, doc="outer radial end R_out of the grooves")
    groove_height: float = param(0.006, unit="m", gt=0.0, le=0.5, doc="height z_v of the V apex above the mouth plane")
    groove_half_width: float = param(
        0.020, unit="m", gt=0.0, le=0.5,
        doc="half-width w of each V at its top (the yaw capture is ±asin(w / r) at radius r)",
    )
    petal_angle_deg: float = param(45.0, unit="deg", gt=10.0, lt=80.0, doc="slope β of the V faces from the horizontal")
    petal_thickness: float = param(0.003, unit="m", gt=0.0, le=0.1, doc="thickness of the V-face slabs and of the deck")


@TARGETS.register("keyed_drogue")
class KeyedDrogue(Drogue):
    """Funnel + bore of :class:`Drogue` plus N radial V-grooves and a deck above the mouth (module
    docstring). The lugs of a ``keyed_probe`` seat in the grooves; the tip then stands
    ``bottom_gap`` above the bore's bottom plate (which it never reaches)."""

    Config = KeyedDrogueConfig
    uses_tool_config = True
    #: the seated tip stays at least this far [m] above the bore's bottom plate (the grooves are the seat)
    min_tip_gap: ClassVar[float] = 0.002

    def __init__(self, config: KeyedDrogueConfig, tool_radius: float, tool_config: Any = None):
        super().__init__(config, tool_radius, tool_config)
        c = config
        if not isinstance(tool_config, KeyedProbeConfig):
            raise ScenarioError(
                "a keyed_drogue needs the keyed probe (tool.type: keyed_probe), whose lugs seat in its grooves",
                key="tool.type",
            )
        if tool_config.lugs != c.keys:
            raise ScenarioError(
                f"must equal the probe's lugs ({tool_config.lugs}), got {c.keys}", key="target.keys"
            )
        self.beta = math.radians(c.petal_angle_deg)
        self.lug_radius = tool_config.lug_radius
        #: height of a seated lug's axis above the mouth plane: apex + r_l / cos β
        self.lug_seat_height = c.groove_height + tool_config.lug_radius / math.cos(self.beta)
        self.seat_depth = tool_config.lug_height - self.lug_seat_height
        self.top_height = c.groove_height + c.groove_half_width * math.tan(self.beta)
        self.lug_phase = math.radians(tool_config.lug_phase_deg)
        rim = c.mouth_radius + c.wall_thickness
        checks = (
            (c.groove_inner_radius > rim, "target.groove_inner_radius",
             f"must exceed mouth_radius + wall_thickness = {rim:.4f} m (the grooves stand outside the funnel), "
             f"got {c.groove_inner_radius}"),
            (c.groove_outer_radius > c.groove_inner_radius, "target.groove_outer_radius",
             f"must exceed groove_inner_radius = {c.groove_inner_radius}, got {c.groove_outer_radius}"),
            (tool_config.lug_reach > c.groove_inner_radius + tool_config.lug_radius, "tool.lug_reach",
             "must exceed the grooves' inner radius + lug_radius = "
             f"{c.groove_inner_radius + tool_config.lug_radius:.4f} m "
             f"(the lugs must reach into the grooves), got {tool_config.lug_reach}"),
            (c.groove_half_width < c.groove_inner_radius * math.sin(math.pi / c.keys) - c.petal_thickness,
             "target.groove_half_width",
             f"must be < groove_inner_radius·sin(180°/N) − petal_thickness = "
             f"{c.groove_inner_radius * math.sin(math.pi / c.keys) - c.petal_thickness:.4f} m (neighbouring grooves "
             f"would overlap), got {c.groove_half_width}"),
            (self.seat_depth > self.funnel_depth, "tool.lug_height",
             f"seated, the tip must be inside the bore: lug_height − groove_height − lug_radius / cos β = "
             f"{self.seat_depth:.4f} m must exceed the funnel depth {self.funnel_depth:.4f} m"),
            (self.bottom_gap >= self.min_tip_gap, "target.bore_length",
             f"seated, the tip would stand {self.bottom_gap * 1e3:.2f} mm above the bore's bottom plate (< "
             f"{self.min_tip_gap * 1e3:g} mm; the grooves must be the seat): lengthen the bore to ≥ "
             f"{self.seat_depth + self.min_tip_gap - self.funnel_depth:.4f} m or raise the lugs"),
        )
        for ok, key, msg in checks:
            if not ok:
                raise ScenarioError(msg, key=key)

    @property
    def depth_total(self) -> float:
        """Mouth → tip distance with the lugs seated in the grooves [m]: s_l − z_v − r_l / cos β."""
        return self.seat_depth

    @property
    def bottom_gap(self) -> float:
        """Distance [m] from the seated tip to the bore's bottom plate."""
        return self.funnel_depth + self.config.bore_length - self.seat_depth

    @property
    def yaw_period(self) -> float:
        """The mating phase repeats every 2π/N [rad]."""
        return 2.0 * math.pi / self.config.keys

    @property
    def key_phase(self) -> float:
        """Azimuth ψ_k of groove 0 in D [rad]."""
        return math.radians(self.config.key_phase_deg)

    def goal_in_target(self) -> np.ndarray:
        """Seated pose with lug 0 in groove 0: R_D_ee = Rx(π) Rz(ψ), ψ = −ψ_k − φ_0 (Rx(π) maps the tool
        azimuth φ to −φ in D, so lug 0 lands at azimuth −(φ_0 + ψ) = ψ_k)."""
        T = super().goal_in_target()
        T[:3, :3] = R_D_EE_SEATED @ rpy_to_matrix(np.array([0.0, 0.0, -self.key_phase - self.lug_phase]))
        return T

    def groove_azimuths(self) -> np.ndarray:
        """(N,) azimuths [rad] of the groove centre lines in D."""
        return self.key_phase + self.yaw_period * np.arange(self.config.keys)

    def build(self, spec: mujoco.MjSpec) -> None:
        super().build(spec)
        c: KeyedDrogueConfig = self.config
        body = spec.body(self.body_name)
        kw = dict(
            friction=[c.friction, 0.005, 0.0001], solref=list(c.solref), solimp=list(c.solimp),
            rgba=[0.35, 0.7, 0.45, 0.8],
        )
        t, w, b = c.petal_thickness, c.groove_half_width, self.beta
        r_in, r_out = c.groove_inner_radius, c.groove_outer_radius
        r_mid, half_r = (r_in + r_out) / 2.0, (r_out - r_in) / 2.0
        ez = np.array([0.0, 0.0, 1.0])
        slant = w / math.cos(b)  # length of each V face
        # each face continues 2 r_l past the apex, under the other face, so that no slab edge lies where a seated
        # lug touches (a capsule on a box edge gets an edge normal: a sideways kick at the bottom of the V)
        ext = 2.0 * self.lug_radius / math.cos(b)
        for i, a in enumerate(self.groove_azimuths()):
            er = np.array([math.cos(a), math.sin(a), 0.0])
            et = np.cross(ez, er)
            apex = r_mid * er + c.groove_height * ez
            for side, name in ((1.0, "p"), (-1.0, "m")):
                s_dir = side * math.cos(b) * et + math.sin(b) * ez  # up the face, away from the centre line
                n = -side * math.sin(b) * et + math.cos(b) * ez  # the face's normal (out of the slab)
                R = np.stack([er, np.cross(n, er), n], axis=1)
                if np.dot(R[:, 1], s_dir) < 0:
                    R[:, 1] = -R[:, 1]
                    R[:, 0] = np.cross(R[:, 1], R[:, 2])
                center = apex + ((slant - ext) / 2.0) * s_dir - (t / 2.0) * n
                body.add_geom(
                    name=f"groove_{i}_{name}", type=mujoco.mjtGeom.mjGEOM_BOX,
                    size=[half_r, (slant + ext) / 2.0, t / 2.0],
                    pos=center.tolist(), quat=list(matrix_to_quat(R)), **kw,
                )
        for k, (center, R, size) in enumerate(self.deck_boxes()):
            body.add_geom(
                name=f"deck_{k}", type=mujoco.mjtGeom.mjGEOM_BOX, size=list(size), pos=center.tolist(),
                quat=list(matrix_to_quat(R)), **kw,
            )
        e_key = np.array([math.cos(self.key_phase), math.sin(self.key_phase), 0.0])
        body.add_site(name="target_key", pos=(r_mid * e_key + self.top_height * ez).tolist(), size=[0.002, 0, 0])

    def deck_boxes(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(centre (3,), rotation (3, 3), half-sizes (3,)) of the deck's boxes in D: between each pair of
        grooves, one box along each groove (tangentially from w to w + band, ``band`` = (R_out − R_in))
        and boxes at evenly spread azimuths filling the sector between those; top faces at the grooves'
        top height, none reaching into a V (``tests/test_keyed.py`` checks it)."""
        c: KeyedDrogueConfig = self.config
        t, w = c.petal_thickness, c.groove_half_width
        r_in, r_out = c.groove_inner_radius, c.groove_outer_radius
        band = r_out - r_in
        z = self.top_height - t / 2.0
        ez = np.array([0.0, 0.0, 1.0])
        out = []

        def frame(a: float) -> tuple[np.ndarray, np.ndarray]:
            er = np.array([math.cos(a), math.sin(a), 0.0])
            return er, np.cross(ez, er)

        for a in self.groove_azimuths():
            er, et = frame(a)
            R = np.stack([er, et, ez], axis=1)
            for side in (1.0, -1.0):
                center = (r_in + r_out) / 2.0 * er + side * (w + band / 2.0) * et + z * ez
                out.append((center, R, np.array([(r_out - r_in) / 2.0, band / 2.0, t / 2.0])))
        # the sector between the edge boxes: from the angle the edge box reaches at r_in (the widest) on
        for a in self.groove_azimuths():
            a0 = a + math.atan2(w + band, r_in) - math.radians(1.0)
            a1 = a + self.yaw_period - math.atan2(w + band, r_in) + math.radians(1.0)
            if a1 <= a0:
                continue
            n_box = max(1, math.ceil(math.degrees(a1 - a0) / 12.0))
            step = (a1 - a0) / n_box
            for j in range(n_box):
                am = a0 + (j + 0.5) * step
                er, et = frame(am)
                half_t = r_out * math.sin(step / 2.0) * 1.05
                lo = r_in * math.cos(step / 2.0)
                center = (lo + r_out) / 2.0 * er + z * ez
                out.append((center, np.stack([er, et, ez], axis=1), np.array([(r_out - lo) / 2.0, half_t, t / 2.0])))
        return out


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
