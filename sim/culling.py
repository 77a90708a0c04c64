"""Contact culling: boxes the tool cannot reach within the next control period are left out of MuJoCo's
collision detection (docs/theory/peg_hole.md §5).

The tight-clearance hole (sim/peg_hole.py) is 97 boxes, and a peg in its bore lies within a tenth of a
millimetre of most of them: MuJoCo's broad- and mid-phase (bounding spheres, bounding boxes) pass nearly every
box, and the exact capsule–box test then runs ≈ 60–90 times per physics substep to find one to three contacts.
That test was ≈ 80 % of MuJoCo's collision time and most of a control step's.

Before each control period :class:`BoxCulling` computes, for every box, a lower bound ``g`` on its distance to
the tool (a separating-axis bound, below), and a *reach* ``δ``: how far any point of the tool can move relative
to the boxes in one control period. A box with ``g > margin + δ`` cannot touch the tool during the period: its
``contype``/``conaffinity`` are set to 0 for the period, which removes it from MuJoCo's collision pipeline and
from nothing else. A culled box is one whose narrow-phase test against the tool would have returned no contact,
so the simulation is the same, bit for bit (tests/test_culling.py runs every shipped peg scenario with and
without) — provided no other geom (the arm's links) reaches a culled box: the bound covers the tool only.
The model is the run's own copy (``sim.loop.build`` copies it when a target culls), so a cached assembly
(``sim.model_cache``) is never changed.

**The distance bound.** Box i: centre C, orthonormal axes e₀ e₁ e₂ (rows of E), half sizes H, in the boxes'
body frame. The tool's bounding capsule: the segment of centre c, unit axis u, half-length l, and radius r.
In the box's axes, p = E (c − C), w = E u. For a unit axis a, the segment and the box project onto intervals
of half-widths l |a·u| and Σⱼ Hⱼ |a·eⱼ| around a·c and a·C; the gap between the intervals is a lower bound
on the distance between the two convex sets. Over the separating-axis candidates of a segment and a box
(the three face normals and the three edge directions u × eⱼ):

    face j:  |pⱼ| − Hⱼ − l |wⱼ|
    edge j:  (|w_m p_k − w_k p_m| − H_k |w_m| − H_m |w_k|) / √(w_k² + w_m²)      (j, k, m) cyclic

and g = max over the six − r (an edge axis with √(w_k² + w_m²) < 1e-9 is skipped: u ∥ eⱼ, the face test
covers it). The bound is never above the true distance; it equals it when a face separates the pair (a peg
beside a wall, above the deck) or an edge the capsule crosses (the chamfer's lower edge beside a peg in the
bore), and is lower for a capsule parallel to an edge past it (only the face axes are left).

**The reach.** From the tool's spatial velocity (ω, v) at its capsule centre, relative to the boxes' body
(itself moving on a floating or moving mount): every capsule point moves at most ‖v‖ + ‖ω‖ (l + r), a box
point of the body at most ‖v_B‖ + ‖ω_B‖ ρ_B (ρ_B the farthest box corner from the body origin). Over the
control period T_c the relative displacement is bounded by

    δ = κ (‖v‖ + ‖ω‖ (l + r) + ‖v_B‖ + ‖ω_B‖ ρ_B) T_c + δ₀,   κ = 3, δ₀ = 20 µm

— κ allows the speed to triple within a period, δ₀ a start from rest. The geometry is the state at the last
substep's collision pass (MuJoCo's ``geom_xpos`` after ``mj_step``), so the period's substeps see states up to
T_c later. Two checks keep the bound honest, both reported in the run's ``meta.json`` (``contact_culling``):
``misses`` counts culled boxes found in contact at the end of a period (the next update's bound of a box
culled over the period that is ≤ the margin is checked with MuJoCo's exact ``mj_geomDistance``); and
``max_reach_use`` is the largest ratio of the tool's actual displacement over a period (the capsule's end
points, relative to the boxes' body) to the δ allowed for it. A run with ``misses`` > 0 is not the same
simulation as without culling: turn it off with ``target.cull_contacts: false`` and report it.
"""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np

#: speed factor κ of the reach: the tool may move κ times as fast as at the period's start
REACH_SPEED_FACTOR = 3.0
#: reach floor δ₀ [m]: the reach of a tool at rest
REACH_FLOOR = 2e-5
_PERM_K = np.array([1, 2, 0])
_PERM_M = np.array([2, 0, 1])


def bounding_capsule(model: mujoco.MjModel, geom: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The tool geom's bounding capsule in its geom frame: (centre (3,), unit axis (3,), half-length l [m],
    radius r [m]). A capsule is its own; a mesh gets the capsule along its frame's z through the vertices'
    z range with their largest distance from the z axis as radius (it contains the mesh)."""
    gtype = int(model.geom_type[geom])
    size = model.geom_size[geom]
    if gtype == mujoco.mjtGeom.mjGEOM_CAPSULE:
        return np.zeros(3), np.array([0.0, 0.0, 1.0]), float(size[1]), float(size[0])
    if gtype == mujoco.mjtGeom.mjGEOM_MESH:
        mesh = int(model.geom_dataid[geom])
        a, n = int(model.mesh_vertadr[mesh]), int(model.mesh_vertnum[mesh])
        v = model.mesh_vert[a : a + n]  # in the geom's frame (MuJoCo moves mesh frames to the geom)
        z0, z1 = float(v[:, 2].min()), float(v[:, 2].max())
        r = float(np.sqrt(v[:, 0] ** 2 + v[:, 1] ** 2).max())
        return np.array([0.0, 0.0, 0.5 * (z0 + z1)]), np.array([0.0, 0.0, 1.0]), 0.5 * (z1 - z0), r
    raise ValueError(f"contact culling needs a capsule or mesh tool geom, geom {geom} has type {gtype}")


def box_distance_bound(p: np.ndarray, w: np.ndarray, H: np.ndarray, Hk: np.ndarray, Hm: np.ndarray,
                       half_length: float, radius: float) -> np.ndarray:
    """Lower bounds [m] on the distances between a capsule and n boxes (module docstring): ``p`` (n, 3) the
    capsule's centre and ``w`` (n, 3) its unit axis in each box's axes, ``H`` (n, 3) the half sizes and
    ``Hk``, ``Hm`` the same with columns (1, 2, 0) and (2, 0, 1). Negative where the bound cannot separate."""
    aw = np.abs(w)
    face = (np.abs(p) - H - half_length * aw).max(axis=1)
    pk, pm, wk, wm = p[:, _PERM_K], p[:, _PERM_M], w[:, _PERM_K], w[:, _PERM_M]
    s = np.sqrt(wk * wk + wm * wm)
    num = np.abs(wm * pk - wk * pm) - Hk * aw[:, _PERM_M] - Hm * aw[:, _PERM_K]
    edge = np.divide(num, s, out=np.full_like(num, -np.inf), where=s > 1e-9).max(axis=1)
    return np.maximum(face, edge) - radius


class BoxCulling:
    """Per control period, the boxes ``boxes`` of body ``body`` out of the tool geom's reach are left out of
    collision detection (module docstring). ``model`` must be the run's own copy: its ``geom_contype`` /
    ``geom_conaffinity`` of those boxes are rewritten.

    Attributes:
        misses: culled boxes found in contact at a period's end (0 = the run is the unculled one).
        max_reach_use: the largest (actual displacement over a period) / (its reach δ).
        periods, active_sum: periods updated and the sum of boxes left in (mean = active_sum / periods).
    """

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, tool_geom: int, boxes: np.ndarray,
                 body: int, control_period: float):
        self.m, self.d = model, data
        self.tool = int(tool_geom)
        self.boxes = np.asarray(boxes, dtype=int)
        if any(int(model.geom_type[b]) != mujoco.mjtGeom.mjGEOM_BOX for b in self.boxes):
            raise ValueError("contact culling: every culled geom must be a box")
        if any(int(model.geom_bodyid[b]) != body for b in self.boxes):
            raise ValueError(f"contact culling: every culled box must belong to body {body}")
        self.body = int(body)
        self.T_c = float(control_period)
        # the boxes in the body's frame (static): centres, axes (rows), half sizes
        self.C = model.geom_pos[self.boxes].copy()
        E = np.empty((len(self.boxes), 3, 3))
        for i, b in enumerate(self.boxes):
            R = np.empty(9)
            mujoco.mju_quat2Mat(R, model.geom_quat[b])
            E[i] = R.reshape(3, 3).T  # rows: the box's axes in the body frame
        self.E2 = E.reshape(-1, 3)  # (3n, 3): one product gives a point or direction in every box's axes
        self.EC = np.einsum("nij,nj->ni", E, self.C)  # each box's centre in its own axes
        self.H = model.geom_size[self.boxes].copy()
        self.Hk, self.Hm = self.H[:, _PERM_K], self.H[:, _PERM_M]
        corners = np.linalg.norm(self.C, axis=1) + np.linalg.norm(self.H, axis=1)
        self.rho_body = float(corners.max())
        self.body_static = int(model.body_weldid[body]) == 0
        self.c_geom, self.u_geom, self.l, self.r = bounding_capsule(model, self.tool)
        self.rho_tool = self.l + self.r
        self.margin = float(max(model.geom_margin[self.tool] + model.geom_margin[b] for b in self.boxes))
        self.margin += float(max(model.geom_gap[self.tool] + model.geom_gap[b] for b in self.boxes))
        self.contype = model.geom_contype[self.boxes].copy()
        self.conaffinity = model.geom_conaffinity[self.boxes].copy()
        self.active = np.ones(len(self.boxes), dtype=bool)
        self.misses = 0
        self.max_reach_use = 0.0
        self.periods = 0
        self.active_sum = 0
        self.full_updates = 0
        self._ends = np.zeros((2, 3))  # the capsule's end points at this update (body frame)
        self._ends_prev: np.ndarray | None = None  # … at the previous update
        self._ends_full = np.zeros((2, 3))  # … at the last full update
        self._slack = -math.inf  # min over the culled boxes of (g − margin) at the last full update
        self._reach = 0.0
        self._vel = np.zeros(6)
        self._Rb = np.eye(3)
        self._xb = np.empty(3)
        if self.body_static:  # the boxes' body does not move: its pose once
            self._Rb[:] = data.xmat[body].reshape(3, 3)
            self._xb[:] = data.xpos[body]
        self._lu = np.stack((-self.l * self.u_geom, self.l * self.u_geom)) + self.c_geom  # ends, geom frame

    def _capsule_ends(self) -> np.ndarray:
        """The bounding capsule's two end points (2, 3) in the boxes' body frame, from the current poses."""
        d = self.d
        if not self.body_static:
            self._Rb[:] = d.xmat[self.body].reshape(3, 3)
            self._xb[:] = d.xpos[self.body]
        world = self._lu @ d.geom_xmat[self.tool].reshape(3, 3).T + d.geom_xpos[self.tool]
        return (world - self._xb) @ self._Rb

    def _speed(self, obj: int, kind: int) -> tuple[float, float]:
        """(‖v‖, ‖ω‖) of a geom or body [m/s, rad/s], world frame, at its own origin."""
        mujoco.mj_objectVelocity(self.m, self.d, kind, obj, self._vel, 0)
        w, v = self._vel[:3], self._vel[3:]
        return math.sqrt(float(v @ v)), math.sqrt(float(w @ w))

    def update(self) -> None:
        """Before a control period: bound the period just run, then the boxes left in for the next.

        The full pass (every box's bound g) runs when the boxes culled at the last one may have come within
        reach: their distances are still ≥ g − (how far the capsule's ends moved since), so they stay out
        while that moved distance + this period's reach is below their smallest g − margin (``_slack``)."""
        ends = self._ends = self._capsule_ends()
        if self._ends_prev is not None and self._reach > 0.0:
            step = ends - self._ends_prev
            moved = math.sqrt(float((step * step).sum(axis=1).max()))
            self.max_reach_use = max(self.max_reach_use, moved / self._reach)
        self._ends_prev = ends
        v, w = self._speed(self.tool, mujoco.mjtObj.mjOBJ_GEOM)
        speed = v + w * self.rho_tool
        if not self.body_static:
            vb, wb = self._speed(self.body, mujoco.mjtObj.mjOBJ_BODY)
            speed += vb + wb * self.rho_body
        reach = self._reach = REACH_SPEED_FACTOR * speed * self.T_c + REACH_FLOOR
        moved = ends - self._ends_full
        if math.sqrt(float((moved * moved).sum(axis=1).max())) + reach >= self._slack:
            self._full(ends, reach)
        self.periods += 1
        self.active_sum += self._n_active

    def _full(self, ends: np.ndarray, reach: float) -> None:
        """Every box's bound g; boxes with g > margin + reach out, the rest in; culled ones found in contact
        counted as misses (MuJoCo's exact distance)."""
        c = 0.5 * (ends[0] + ends[1])
        u = (ends[1] - ends[0]) / (2.0 * self.l) if self.l > 0.0 else self._Rb.T @ (
            self.d.geom_xmat[self.tool].reshape(3, 3) @ self.u_geom)
        P = (self.E2 @ c).reshape(-1, 3) - self.EC  # the capsule's centre in each box's axes
        W = (self.E2 @ u).reshape(-1, 3)  # its axis in each box's axes
        g = box_distance_bound(P, W, self.H, self.Hk, self.Hm, self.l, self.r)
        culled = ~self.active
        if culled.any():  # culled until now: in contact at the state just reached?
            for j in np.flatnonzero(culled & (g <= self.margin)):
                dist = mujoco.mj_geomDistance(self.m, self.d, self.tool, int(self.boxes[j]), 0.01, None)
                if dist < self.margin:
                    self.misses += 1
        active = g <= self.margin + reach
        changed = active != self.active
        if changed.any():
            idx = self.boxes[changed]
            on = active[changed]
            self.m.geom_contype[idx] = np.where(on, self.contype[changed], 0)
            self.m.geom_conaffinity[idx] = np.where(on, self.conaffinity[changed], 0)
            self.active = active
        self._n_active = int(np.count_nonzero(active))
        self._slack = float(g[~active].min()) - self.margin if self._n_active < len(g) else math.inf
        self._ends_full = ends
        self.full_updates += 1

    def stats(self) -> dict[str, Any]:
        """What ``meta.json`` records (module docstring)."""
        return {
            "boxes": int(len(self.boxes)),
            "mean_active": self.active_sum / self.periods if self.periods else float(len(self.boxes)),
            "misses": int(self.misses),
            "max_reach_use": float(self.max_reach_use),
            "full_updates": int(self.full_updates),
            "target_static": bool(self.body_static),
            "reach_speed_factor": REACH_SPEED_FACTOR,
            "reach_floor_m": REACH_FLOOR,
        }
