"""The tight-clearance peg-in-hole interface (``tool.type: peg``, ``target.type: peg_hole``;
docs/theory/peg_hole.md).

Peg (tool frame P, as the probe of sim/interfaces.py): a cylinder of diameter d_p and length L from the flange
(z = 0) to the tip (z = L) along +z. The tip is ``round`` (the cylinder of length L − d_p/2 capped by a
hemisphere: one MuJoCo capsule, whose contacts with the hole's boxes are analytic) or ``chamfer`` (a flat end
with a 45° chamfer of width c_p: one convex mesh through MuJoCo's general convex collider). The EE site ``ee`` is
at the tip.

Hole (target frame D, as the drogue: origin at the centre of the mouth, +z out of the hole): a bore of diameter
d_h = d_p + δ (δ the diametral ``clearance``) and depth h from the mouth (z = 0) to its flat bottom (z = −h).
Its wall is a ring of N boxes whose flat inner faces are tangent to the circle of radius d_h / 2, so a round peg
has exactly δ/2 of radial play on every face (the ring's corners lie further out, at d_h / (2 cos(π/N))). A 45°
chamfer of radial width c widens the mouth to d_h/2 + c over its top c of depth (a second ring, a cone of boxes);
a flat deck (a third ring, z = 0, out to ``outer_radius``) is the block's top face, and a box under the bore is
the bottom. Everything is a box: MuJoCo's analytic box contacts.

Seated: the tip on the bottom, R_D_ee = Rx(π) (tool axis = −z_D); ``depth_total`` = h (mouth → bottom), so
``docking.seat_error`` is the tip's height above the bottom and Factory's success (peg within 4 % of the hole's
height of the bottom) is ``docking.seat_height_fraction ≤ 0.04``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import mujoco
import numpy as np
from dockbench.sim.config import param
from dockbench.sim.culling import BoxCulling
from dockbench.sim.errors import ScenarioError
from dockbench.sim.interfaces import (
    MAX_RING_SEGMENTS,
    R_D_EE_SEATED,
    TARGETS,
    TOOLS,
    OffsetConfig,
    Target,
    Tool,
    _ring,
    _wall_ring,
    matrix_to_quat,
)
from dockbench.sim.mounts import MountConfig, mount_target
from dockbench.sim.poses import PoseConfig

#: the peg's collision geom (sim/culling.py culls the hole's boxes against it)
PEG_GEOM = "peg_geom"


@dataclass(frozen=True)
class PegConfig:
    diameter: float = param(0.007986, unit="m", ge=1e-3, le=0.1, doc="peg diameter d_p (Factory's 8 mm peg: 7.986 mm)")
    length: float = param(0.050, unit="m", ge=5e-3, le=0.5, doc="flange → tip length L of the peg")
    tip: Literal["round", "chamfer"] = param(
        "round",
        doc="round: hemispherical end of the peg radius (one capsule, analytic contacts); chamfer: flat end with a "
        "45° chamfer (one convex mesh, general convex contacts)",
    )
    chamfer: float = param(0.0004, unit="m", gt=0.0, le=0.01, doc="radial width of the tip chamfer (tip: chamfer only)")
    mass: float = param(0.019, unit="kg", gt=0.0, le=10.0, doc="peg mass (Factory's peg: 19 g)")
    friction: float = param(0.3, ge=0.0, le=10.0, doc="sliding friction coefficient of the peg")
    segments: int = param(32, ge=8, le=MAX_RING_SEGMENTS, doc="vertices per ring of the peg mesh (tip: chamfer only)")

    @property
    def radius(self) -> float:
        """d_p / 2 [m] (what the assembly hands the target as the tool radius)."""
        return self.diameter / 2.0

    def validate(self) -> None:
        if self.length <= self.diameter:
            raise ScenarioError(f"must exceed the diameter {self.diameter} m, got {self.length}", key="length")
        if self.tip == "chamfer" and self.chamfer >= self.diameter / 2.0:
            raise ScenarioError(
                f"must be smaller than the peg radius {self.diameter / 2.0:.6g} m, got {self.chamfer}", key="chamfer"
            )


@TOOLS.register("peg")
class Peg(Tool):
    """A cylindrical peg (module docstring); declared inertia of a solid cylinder, I_xx = I_yy = m (3 r² + L²)/12,
    I_zz = m r²/2 about its centre at L/2. The round tip's capsule has its rear cap behind the flange (z < 0),
    inside the arm's last link."""

    Config = PegConfig

    @property
    def length(self) -> float:
        return self.config.length

    def build(self, spec: mujoco.MjSpec, parent: Any, pos: np.ndarray, quat: np.ndarray) -> None:
        c: PegConfig = self.config
        r, L = c.radius, c.length
        body = parent.add_body(name=self.root_body, pos=list(pos), quat=list(quat))
        body.explicitinertial = True
        body.mass = c.mass
        body.ipos = [0.0, 0.0, L / 2.0]
        ixx = c.mass * (3.0 * r**2 + L**2) / 12.0
        body.inertia = [ixx, ixx, c.mass * r**2 / 2.0]
        common = dict(name=PEG_GEOM, friction=[c.friction, 0.005, 0.0001], rgba=[0.75, 0.75, 0.8, 1.0], mass=0.0)
        if c.tip == "round":
            half = (L - r) / 2.0  # axis segment z ∈ [0, L − r]; the hemisphere ends at the tip z = L
            body.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[r, half, 0.0], pos=[0.0, 0.0, half], **common)
        else:
            verts = np.concatenate(
                [_ring(r, 0.0, c.segments), _ring(r, L - c.chamfer, c.segments), _ring(r - c.chamfer, L, c.segments)]
            )
            mesh = spec.add_mesh(name="peg_mesh")
            mesh.uservert = verts.ravel().tolist()
            body.add_geom(type=mujoco.mjtGeom.mjGEOM_MESH, meshname="peg_mesh", **common)
        body.add_site(name=self.sensor_site, pos=[0, 0, 0], size=[0.004, 0, 0])
        body.add_site(name=self.ee_site, pos=[0, 0, L], size=[0.002, 0, 0])


@dataclass(frozen=True)
class PegHoleConfig:
    pose: PoseConfig = field(default_factory=PoseConfig)
    belief_offset: OffsetConfig = field(default_factory=OffsetConfig)
    clearance: float = param(
        0.000114, unit="m", gt=0.0, le=0.01,
        doc="diametral clearance δ = d_h − d_p (Factory's 8 mm peg-hole: 8.1 − 7.986 = 0.114 mm)",
    )
    depth: float = param(0.025, unit="m", ge=1e-3, le=0.5, doc="hole depth h, mouth → bottom (Factory: 25 mm)")
    chamfer: float = param(
        0.0005, unit="m", ge=0.0, le=0.02, doc="radial width c of the 45° chamfer at the mouth (0 = a sharp edge)"
    )
    outer_radius: float = param(0.03, unit="m", gt=0.0, le=0.5, doc="radius of the block's top face around the hole")
    wall_thickness: float = param(0.004, unit="m", ge=1e-4, le=0.1, doc="thickness of each wall box")
    segments: int = param(32, ge=8, le=MAX_RING_SEGMENTS, doc="boxes per ring (bore, chamfer, deck)")
    friction: float = param(0.3, ge=0.0, le=10.0, doc="sliding friction of the hole")
    solref: tuple[float, float] = param(
        (0.004, 1.0), length=2, gt=0.0, le=10.0, doc="contact solref (timeconst [s], dampratio)"
    )
    solimp: tuple[float, float, float, float, float] = param(
        (0.95, 0.99, 0.0001, 0.5, 2.0), length=5, gt=0.0, le=10.0,
        doc="contact solimp (dmin, dmax, width [m], midpoint, power)",
    )
    seat_gap: float = param(
        -0.001, unit="m", ge=-0.05, le=1.0, doc="goal tip distance above the bottom (negative = preload)"
    )
    mount: MountConfig = field(default_factory=MountConfig)
    cull_contacts: bool = param(
        True,
        doc="leave the boxes the peg cannot reach within the next control period out of MuJoCo's collision "
        "detection (sim/culling.py; the same simulation: in the bore MuJoCo's work −29 %, the control step −23 % by "
        "instructions, docs/performance.md); false = every box, every step",
    )


@TARGETS.register("peg_hole")
class PegHole(Target):
    """A cylindrical hole with a chamfered mouth in a block (module docstring)."""

    Config = PegHoleConfig
    uses_tool_config = True

    def __init__(self, config: PegHoleConfig, tool_radius: float, tool_config: Any = None):
        super().__init__(config, tool_radius, tool_config)
        c = config
        if not isinstance(tool_config, PegConfig):
            raise ScenarioError("a peg_hole needs the peg (tool.type: peg), whose diameter sets the hole's",
                                key="tool.type")
        #: hole diameter d_h = d_p + δ [m]
        self.diameter = tool_config.diameter + c.clearance
        self.hole_radius = self.diameter / 2.0
        if c.chamfer >= c.depth:
            raise ScenarioError(f"must be smaller than the depth {c.depth} m, got {c.chamfer}", key="target.chamfer")
        mouth = self.hole_radius + c.chamfer
        if c.outer_radius <= mouth / math.cos(math.pi / c.segments) + 1e-4:
            raise ScenarioError(
                f"must exceed the chamfer's mouth radius {mouth:.6g} m (hole diameter / 2 + chamfer) by the ring's "
                f"corners, i.e. > {mouth / math.cos(math.pi / c.segments) + 1e-4:.6g} m, got {c.outer_radius}",
                key="target.outer_radius",
            )
        if tool_config.length <= c.depth + c.seat_gap:
            raise ScenarioError(
                f"the peg ({tool_config.length} m) must be longer than the hole's depth + seat_gap "
                f"({c.depth + c.seat_gap:.6g} m): seated, the flange would enter the block",
                key="tool.length",
            )

    @property
    def depth_total(self) -> float:
        """Mouth → bottom [m]: the hole depth h."""
        return self.config.depth

    def goal_in_target(self) -> np.ndarray:
        T = np.eye(4)
        T[:3, :3] = R_D_EE_SEATED
        T[2, 3] = -self.depth_total + self.config.seat_gap
        return T

    @property
    def culls_contacts(self) -> bool:
        return bool(self.config.cull_contacts)

    def contact_culling(self, model: mujoco.MjModel, data: mujoco.MjData, control_period: float) -> BoxCulling | None:
        """The culling of the hole's boxes against the peg (sim/culling.py), None with ``cull_contacts: false``.
        ``model`` must be the run's own copy (``sim.loop.build`` makes it)."""
        if not self.config.cull_contacts:
            return None
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, self.body_name)
        peg = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, PEG_GEOM)
        a, n = int(model.body_geomadr[body]), int(model.body_geomnum[body])
        boxes = [g for g in range(a, a + n) if int(model.geom_type[g]) == mujoco.mjtGeom.mjGEOM_BOX]
        return BoxCulling(model, data, peg, np.array(boxes), body, control_period)

    def build(self, spec: mujoco.MjSpec) -> None:
        c: PegHoleConfig = self.config
        T = self.T_world_target
        body = spec.worldbody.add_body(name=self.body_name, pos=list(T[:3, 3]), quat=list(matrix_to_quat(T[:3, :3])))
        mount_target(body, c.mount)
        kw = dict(friction=[c.friction, 0.005, 0.0001], solref=list(c.solref), solimp=list(c.solimp),
                  rgba=[0.55, 0.6, 0.7, 0.6])
        r, h, ch = self.hole_radius, c.depth, c.chamfer
        if ch > 0.0:
            _wall_ring(spec, body, "chamfer", c.segments, r + ch, 0.0, r, -ch, c.wall_thickness, "box", kw)
        _wall_ring(spec, body, "bore", c.segments, r, -ch, r, -h, c.wall_thickness, "box", kw)
        _wall_ring(spec, body, "deck", c.segments, c.outer_radius, 0.0, r + ch, 0.0, c.wall_thickness, "box", kw)
        plate = r + c.wall_thickness
        body.add_geom(name="bottom", type=mujoco.mjtGeom.mjGEOM_BOX, size=[plate, plate, c.wall_thickness / 2.0],
                      pos=[0.0, 0.0, -h - c.wall_thickness / 2.0], **kw)
        body.add_site(name="target_mouth", pos=[0, 0, 0], size=[0.002, 0, 0])
        body.add_site(name="target_seat", pos=[0, 0, -h], size=[0.002, 0, 0])


def max_tilt(peg_diameter: float, hole_diameter: float, engaged: float) -> float:
    """The largest tilt θ [rad] of a flat-ended cylinder of diameter d_p engaged to depth ℓ in a hole of diameter
    d_h > d_p before it touches both walls (two-point contact; docs/theory/peg_hole.md §2): the root in
    [0, π/2) of d_p cos θ + ℓ sin θ = d_h, θ = φ − arccos(d_h / √(d_p² + ℓ²)), φ = atan2(ℓ, d_p);
    π/2 when √(d_p² + ℓ²) ≤ d_h (the peg can lie across the hole). For small clearance θ ≈ (d_h − d_p) / ℓ."""
    if not hole_diameter > peg_diameter > 0.0 or engaged < 0.0:
        raise ValueError(f"need hole_diameter > peg_diameter > 0 and engaged ≥ 0, got {hole_diameter}, "
                         f"{peg_diameter}, {engaged}")
    diag = math.hypot(peg_diameter, engaged)
    if diag <= hole_diameter:
        return math.pi / 2.0
    return math.atan2(engaged, peg_diameter) - math.acos(hole_diameter / diag)


def ring_corner_radius(hole_radius: float, segments: int) -> float:
    """Distance [m] from the axis to where the inner faces of two neighbouring boxes of a ring meet: the faces are
    tangent to the circle of ``hole_radius`` at azimuths 2πi/N, so their intersection lies at r_h / cos(π/N)."""
    return hole_radius / math.cos(math.pi / segments)
