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

**The reach.** From the tool's spatial velocity (ω, v) at its geom's origin, relative to the boxes' body
(itself moving on a floating or moving mount): every capsule point moves at most ‖v‖ + ‖ω‖ ρ_T
(ρ_T = ‖c‖ + l + r, c the capsule's centre in the geom frame), a box point of the body at most
‖v_B‖ + ‖ω_B‖ ρ_B (v_B at the body's origin, ρ_B the farthest box corner from it). Both velocities come from
MuJoCo's ``cvel`` moved to the point (:func:`spatial_speed`). Over the control period T_c the relative
displacement is bounded by

    δ = κ (‖v‖ + ‖ω‖ ρ_T + ‖v_B‖ + ‖ω_B‖ ρ_B) T_c + δ₀,   κ = 3, δ₀ = 20 µm

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
#: the compiled kernel's state slots and step() result bits (the enums of sim/_culling_kernel.c)
_K_SLACK, _K_MRU, _K_ACTIVE, _K_N = 19, 21, 22, 23
_K_CHANGED, _K_CHECK = 2, 4
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


def spatial_speed(cvel: np.ndarray, subtree_com: np.ndarray, body: int, root: int, point: np.ndarray
                  ) -> tuple[float, float]:
    """(‖v‖, ‖ω‖) [m/s, rad/s] of body ``body``'s motion at the world point ``point``: MuJoCo's ``cvel`` row
    [ω; v_c] is the body's spatial velocity with v_c at its tree root's subtree centre of mass c, so the
    point moves at v = v_c − (p − c) × ω (what ``mj_objectVelocity`` returns in world axes), on Python
    floats in the compiled kernel's order."""
    w0, w1, w2, v0, v1, v2 = (float(x) for x in cvel[body])
    c = subtree_com[root]
    d0, d1, d2 = float(point[0]) - float(c[0]), float(point[1]) - float(c[1]), float(point[2]) - float(c[2])
    v0 = v0 - (d1 * w2 - d2 * w1)
    v1 = v1 - (d2 * w0 - d0 * w2)
    v2 = v2 - (d0 * w1 - d1 * w0)
    return math.sqrt(v0 * v0 + v1 * v1 + v2 * v2), math.sqrt(w0 * w0 + w1 * w1 + w2 * w2)


def _rows_times(cols: tuple[np.ndarray, np.ndarray, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Σⱼ colsⱼ xⱼ, summed in the order j = 0, 1, 2 (a matrix–vector product written out, so that the compiled
    kernel's loop gives the same floats: a BLAS product may sum in another order or fuse)."""
    return cols[0] * x[0] + cols[1] * x[1] + cols[2] * x[2]


class BoxCulling:
    """Per control period, the boxes ``boxes`` of body ``body`` out of the tool geom's reach are left out of
    collision detection (module docstring). ``model`` must be the run's own copy: its ``geom_contype`` /
    ``geom_conaffinity`` of those boxes are rewritten.

    Compiled kernel: when ``sim._culling_kernel`` is built and current (sim/kernels.py, ``DOCKBENCH_KERNELS``)
    :meth:`update` is one call that computes what the Python path below computes, float for float (the
    capsule's ends, the speeds from ``cvel``, the reach, the test for a full pass and every box's bound g in
    the same operation order, compiled without fused multiply-add; tests/test_culling.py); the contact flags,
    the check of culled boxes against MuJoCo's exact distance and the counters stay here.

    Attributes:
        misses: culled boxes found in contact at a period's end (0 = the run is the unculled one).
        max_reach_use: the largest (actual displacement over a period) / (its reach δ).
        periods, active_sum: periods updated and the sum of boxes left in (mean = active_sum / periods).
        kernel: ``"compiled"`` or ``"python"``, the path :meth:`update` runs.
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
        self._E2cols = tuple(np.ascontiguousarray(self.E2[:, j]) for j in range(3))
        self.EC = np.einsum("nij,nj->ni", E, self.C)  # each box's centre in its own axes
        self.H = model.geom_size[self.boxes].copy()
        self.Hk, self.Hm = self.H[:, _PERM_K], self.H[:, _PERM_M]
        corners = np.linalg.norm(self.C, axis=1) + np.linalg.norm(self.H, axis=1)
        self.rho_body = float(corners.max())
        self.body_static = int(model.body_weldid[body]) == 0
        self.c_geom, self.u_geom, self.l, self.r = bounding_capsule(model, self.tool)
        # no point of the capsule is farther than this from the geom's origin, where its velocity is taken
        self.rho_tool = float(np.linalg.norm(self.c_geom)) + self.l + self.r
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
        self._Rb = np.eye(3)
        self._xb = np.empty(3)
        if self.body_static:  # the boxes' body does not move: its pose once
            self._Rb[:] = data.xmat[body].reshape(3, 3)
            self._xb[:] = data.xpos[body]
        self._lu = np.stack((-self.l * self.u_geom, self.l * self.u_geom)) + self.c_geom  # ends, geom frame
        self.tool_body = int(model.geom_bodyid[self.tool])
        self._roots = (int(model.body_rootid[self.tool_body]), int(model.body_rootid[self.body]))
        self._n_active = len(self.boxes)
        self.g = np.zeros(len(self.boxes))  # every box's bound at the last full pass [m]
        self._bind_kernel()

    def _capsule_ends(self) -> np.ndarray:
        """The bounding capsule's two end points (2, 3) in the boxes' body frame, from the current poses:
        x_W = R_geom x_geom + p_geom, then x_B = R_Bᵀ (x_W − p_B), each product written out (:func:`_rows_times`)."""
        d = self.d
        if not self.body_static:
            self._Rb[:] = d.xmat[self.body].reshape(3, 3)
            self._xb[:] = d.xpos[self.body]
        R = d.geom_xmat[self.tool].reshape(3, 3)
        lu = self._lu
        world = _rows_times((lu[:, 0:1], lu[:, 1:2], lu[:, 2:3]), (R[:, 0], R[:, 1], R[:, 2])) + d.geom_xpos[self.tool]
        rel = world - self._xb
        return _rows_times((rel[:, 0:1], rel[:, 1:2], rel[:, 2:3]), (self._Rb[0], self._Rb[1], self._Rb[2]))

    @staticmethod
    def _largest_norm(x: np.ndarray) -> float:
        """max over the rows of x (2, 3) of their Euclidean norms, the squares summed in column order."""
        return math.sqrt(float((x[:, 0] * x[:, 0] + x[:, 1] * x[:, 1] + x[:, 2] * x[:, 2]).max()))

    def update(self) -> None:
        """Before a control period: bound the period just run, then the boxes left in for the next.

        The full pass (every box's bound g) runs when the boxes culled at the last one may have come within
        reach: their distances are still ≥ g − (how far the capsule's ends moved since), so they stay out
        while that moved distance + this period's reach is below their smallest g − margin (``_slack``)."""
        if self._kernel is not None:
            self._update_compiled()
        else:
            self._update_python()
        self.periods += 1
        self.active_sum += self._n_active

    def _update_python(self) -> None:
        """:meth:`update` on the Python path (the reference)."""
        d = self.d
        ends = self._ends = self._capsule_ends()
        if self._ends_prev is not None and self._reach > 0.0:
            self.max_reach_use = max(self.max_reach_use, self._largest_norm(ends - self._ends_prev) / self._reach)
        self._ends_prev = ends
        v, w = spatial_speed(d.cvel, d.subtree_com, self.tool_body, self._roots[0], d.geom_xpos[self.tool])
        speed = v + w * self.rho_tool
        if not self.body_static:
            vb, wb = spatial_speed(d.cvel, d.subtree_com, self.body, self._roots[1], d.xpos[self.body])
            speed = speed + vb + wb * self.rho_body
        reach = self._reach = REACH_SPEED_FACTOR * speed * self.T_c + REACH_FLOOR
        if self._largest_norm(ends - self._ends_full) + reach >= self._slack:
            self._full(ends, reach)

    def _bounds(self, ends: np.ndarray) -> np.ndarray:
        """Every box's bound g [m] for the capsule with these end points (body frame): its centre and axis in
        each box's axes (P = E c − E C, W = E u), then :func:`box_distance_bound`."""
        c = 0.5 * (ends[0] + ends[1])
        if self.l > 0.0:
            u = (ends[1] - ends[0]) / (2.0 * self.l)
        else:  # a sphere-like tool: the capsule's axis from the geom's frame
            u = self._Rb.T @ (self.d.geom_xmat[self.tool].reshape(3, 3) @ self.u_geom)
        P = _rows_times(self._E2cols, c).reshape(-1, 3) - self.EC  # the capsule's centre in each box's axes
        W = _rows_times(self._E2cols, u).reshape(-1, 3)  # its axis in each box's axes
        return box_distance_bound(P, W, self.H, self.Hk, self.Hm, self.l, self.r)

    def _full(self, ends: np.ndarray, reach: float) -> None:
        """Every box's bound g; boxes with g > margin + reach out, the rest in; culled ones found in contact
        counted as misses (MuJoCo's exact distance)."""
        g = self.g = self._bounds(ends)
        self._check_culled(~self.active & (g <= self.margin))
        self._set_active(g <= self.margin + reach)
        self._slack = float(g[~self.active].min()) - self.margin if self._n_active < len(g) else math.inf
        self._ends_full = ends
        self.full_updates += 1

    def _check_culled(self, near: np.ndarray) -> None:
        """The boxes culled until now whose bound reached the margin: in contact at the state just reached?"""
        for j in np.flatnonzero(near):
            dist = mujoco.mj_geomDistance(self.m, self.d, self.tool, int(self.boxes[j]), 0.01, None)
            if dist < self.margin:
                self.misses += 1

    def _set_active(self, active: np.ndarray) -> None:
        """Boxes in (True) and out of collision detection from the next substep on: the flags of those that
        changed rewritten; ``active`` replaced (a new array) only when the set changed."""
        changed = active != self.active
        if changed.any():
            idx = self.boxes[changed]
            on = active[changed]
            self.m.geom_contype[idx] = np.where(on, self.contype[changed], 0)
            self.m.geom_conaffinity[idx] = np.where(on, self.conaffinity[changed], 0)
            self.active = active
        self._n_active = int(np.count_nonzero(active))

    # ------------------------------------------------------------------ the compiled path
    def _bind_kernel(self) -> None:
        """Bind ``sim._culling_kernel`` (when built, current and allowed; a tool with a bounding capsule of
        length 0 keeps the Python path) to this run's MjData rows and the culling's own arrays."""
        from dockbench.sim import kernels

        self._kernel = None
        self.kernel = "python"
        kmod = kernels.load("sim._culling_kernel")
        if kmod is None or not self.l > 0.0:
            return
        d = self.d
        #: the kernel's state: [ends (6), ends at the last full pass (6), previous ends (6), has previous,
        #: slack, reach, max_reach_use, boxes in] (sim/_culling_kernel.c)
        self._kstate = np.zeros(_K_N)
        self._kstate[_K_SLACK] = self._slack
        self._kactive = self.active.astype(float)  # the kernel's box set (1.0 = in), g ≤ margin + reach
        self._kernel = kmod.CullingKernel(
            geom_xpos=d.geom_xpos, geom_xmat=d.geom_xmat, xpos=d.xpos, xmat=d.xmat, cvel=d.cvel,
            subtree_com=d.subtree_com, E2=self.E2, EC=self.EC, H=self.H, lu=self._lu, g=self.g,
            active=self._kactive, state=self._kstate, tool_geom=self.tool, tool_body=self.tool_body,
            tool_root=self._roots[0], body=self.body, body_root=self._roots[1], body_static=self.body_static,
            control_period=self.T_c, half_length=self.l, radius=self.r, rho_tool=self.rho_tool,
            rho_body=self.rho_body, margin=self.margin, reach_speed_factor=REACH_SPEED_FACTOR,
            reach_floor=REACH_FLOOR,
        )
        self.kernel = "compiled"

    def _update_compiled(self) -> None:
        """:meth:`update` with the kernel: it moves the ends and the reach on and, on a full pass, fills g, its
        box set, the count and the slack; it says when the set changed (the flags are rewritten here, as on the
        Python path) and when a box out until now came within the margin (checked here)."""
        done = self._kernel.step()
        if done:
            if done & _K_CHECK:
                self._check_culled(~self.active & (self.g <= self.margin))
            if done & _K_CHANGED:
                self._set_active(self._kactive > 0.5)
            self._n_active = int(self._kstate[_K_ACTIVE])
            self.full_updates += 1

    @property
    def max_reach_use(self) -> float:
        """The largest (actual displacement over a period) / (its reach δ) so far."""
        return float(self._kstate[_K_MRU]) if self._kernel is not None else self._max_reach_use

    @max_reach_use.setter
    def max_reach_use(self, value: float) -> None:
        self._max_reach_use = value

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
