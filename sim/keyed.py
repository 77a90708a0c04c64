"""The keyed docking interface: ``keyed_probe`` (tool) and ``keyed_drogue`` (target).

The same shaft, funnel and bore, plus N radial key
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

Frames, the probe's shaft and nose, the funnel and bore are those of :mod:`sim.interfaces` (the round
``probe`` and ``drogue`` these classes extend).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import mujoco
import numpy as np
from dockbench.sim.config import param
from dockbench.sim.errors import ScenarioError
from dockbench.sim.interfaces import (
    R_D_EE_SEATED,
    TARGETS,
    TOOLS,
    Drogue,
    DrogueConfig,
    Probe,
    ProbeConfig,
    matrix_to_quat,
)
from dockbench.sim.poses import rpy_to_matrix


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
