"""Generalised-momentum observer for sensorless external-wrench estimation (docs/theory/hqp.md, "Sensorless mode").

Model (docs/theory/model.md §2, plus the plant's known joint dissipation τ_d(q̇) read from the MjModel)::

    M q̈ + C q̇ + g = τ − τ_d(q̇) + τ_ext,      τ_ext = Jᵀ F_ext,      p = M q̇,
    τ_d(q̇) = d q̇ (``model_damping``) + f tanh(q̇ / ε) (``model_friction``: sliding dry friction,
    f = ``dof_frictionloss``, ε = ``friction_eps``).

With Ṁ = C + Cᵀ, ṗ = τ − τ_d + Cᵀq̇ − g + τ_ext, and the observer (De Luca's residual)::

    r = K_O ( p − p(0) − ∫ (τ − τ_d + Cᵀq̇ − g + r) dt ),      ṙ = K_O (τ_ext − r),

so r is τ_ext seen through a first-order filter of bandwidth K_O [1/s].

How Cᵀq̇ and g are obtained (the Snapshot has neither C nor g, and this module does not call
Pinocchio): Cᵀq̇ = Ṁ q̇ − C q̇ and C q̇ = h − g with h = ``snap.h`` (Pinocchio ``nle``), hence

    τ + Cᵀq̇ − g = τ + Ṁ q̇ − h       (g cancels EXACTLY — gravity on or off, g is never needed).

Ṁ q̇ is taken from the finite difference of ``snap.M`` between consecutive updates. Discretely,
with the previous step's torque τ_{k−1}, bias h_{k−1} and residual r_{k−1}::

    I_k = I_{k−1} + (τ_{k−1} − τ_d(q̇_{k−1}) − h_{k−1} + r_{k−1}) Δt + (M_k − M_{k−1}) q̇_k
    r_k = K_O (M_k q̇_k − p_0 − I_k)

which telescopes to r_k = r_{k−1} + K_O Δt (M_{k−1}(q̇_k − q̇_{k−1})/Δt − (τ − τ_d − h)_{k−1} − r_{k−1}),
i.e. the residual is exact for MuJoCo's explicit velocity update and converges to τ_ext at the rate
(1 − K_O Δt)^k (stable for K_O Δt < 2).

Wrench estimate: F̂_ext = (Jᵀ)⁺ r = (J Jᵀ)⁻¹ J r with J = ``J_ee_lwa``: [f; n], world axes, moment
about the EE origin. Limitations: unmodelled torques appear in r — STATIC dry friction (a joint at
rest holds any torque in [−f, f], which no velocity model can know), the implicit integration of
damping, model errors; a contact away from the EE is mapped to the equivalent EE wrench.

Implementation (1 kHz loop): the per-joint recursion runs on Python floats (one numpy call on a
7-vector costs more than its arithmetic) in the same order of operations as the vector form, and
(J Jᵀ)⁻¹ J r is one LAPACK Cholesky solve (``dposv``).
"""

from __future__ import annotations

import math

import numpy as np
from dockbench.controllers.base import PlantInfo
from dockbench.controllers.linalg import solve_spd
from dockbench.sim.dynamics import Snapshot
from dockbench.sim.errors import ScenarioError
from dockbench.sim.wrench import WrenchState


class MomentumObserver:
    """Momentum-residual observer (see module docstring).

    Args:
        plant: arm facts (dof count, control period, joint damping).
        gain: K_O [1/s] (scalar, or (nv,) per joint); 0 < K_O Δt < 2.
        model_damping: include the plant's viscous joint damping d q̇ (``plant.dof_damping``).
        model_friction: include sliding dry friction f tanh(q̇/ε) (``plant.dof_frictionloss``).
            Both apply when the torque passed to :meth:`update` is the torque APPLIED to the plant
            (feedforward included); turn them off when the caller passes a torque from which a
            cancelling feedforward was already removed.
        friction_eps: ε [rad/s] of the smooth sign of the friction model.
        dt: update period [s]; default ``plant.control_period``.
    """

    def __init__(
        self,
        plant: PlantInfo,
        gain: float | np.ndarray,
        *,
        model_damping: bool = True,
        model_friction: bool = True,
        friction_eps: float = 0.01,
        dt: float | None = None,
    ):
        nv = plant.nv
        self.nv = nv
        self.K = np.broadcast_to(np.asarray(gain, dtype=float), (nv,)).copy()
        self.dt = plant.control_period if dt is None else float(dt)
        if np.any(self.K <= 0.0) or np.any(self.K * self.dt >= 2.0):
            raise ScenarioError(
                f"observer gain K_O must satisfy 0 < K_O·Δt < 2 (Δt = {self.dt} s), got {self.K.max()} 1/s",
                key="observer_gain",
            )
        self.d = plant.dof_damping.copy() if model_damping else np.zeros(nv)
        self.f = plant.dof_frictionloss.copy() if model_friction else np.zeros(nv)
        self.has_friction = bool(np.any(self.f != 0.0))
        self.inv_eps = 1.0 / friction_eps
        self.r = np.zeros(nv)
        self.wrench = np.zeros(6)
        self._M_prev = np.zeros((nv, nv))
        self._p = np.zeros(nv)
        self._t = np.zeros(nv)
        self._JJt = np.zeros((6, 6))
        self._Jr = np.zeros(6)
        # per joint (K_O, d, f) and the recursion state as float lists: p(0), I, r, q̇ and h of the
        # previous update
        self._joint = tuple(zip(self.K.tolist(), self.d.tolist(), self.f.tolist(), strict=True))
        self._p0: list[float] = [0.0] * nv
        self._I: list[float] = [0.0] * nv
        self._r: list[float] = [0.0] * nv
        self._v_prev: list[float] = [0.0] * nv
        self._h_prev: list[float] = [0.0] * nv
        self._started = False

    def reset(self) -> None:
        """Forget the history; the next :meth:`update` re-initialises p(0)."""
        self._started = False
        self._r = [0.0] * self.nv
        self.r[:] = 0.0
        self.wrench[:] = 0.0

    def update(self, snap: Snapshot, tau_applied: np.ndarray) -> np.ndarray:
        """Advance one period and return F̂_ext (6,) [f; n] world axes about the EE origin.

        Args:
            snap: the snapshot of the CURRENT state.
            tau_applied: (nv,) the joint torque that acted on the plant since the previous update
                (ignored on the first call, which only initialises p(0)).

        Returns:
            a view of :attr:`wrench` (overwritten next call).
        """
        M, v = snap.M, snap.v
        if not self._started:
            self._p0 = M.dot(v, out=self._p).tolist()
            self._I = [0.0] * self.nv
            r = [0.0] * self.nv
            self._started = True
        else:
            # I += (τ − τ_d(q̇) − h + r)_{k−1} Δt + (M_k − M_{k−1}) q̇_k   (Ṁ q̇ Δt by finite differences);
            # r = K_O (p − p0 − I)   (ndarray.dot with out=: np.matmul's BLAS call, less overhead)
            dM = self._M_prev
            np.subtract(M, dM, out=dM)
            dMv = dM.dot(v, out=self._t).tolist()
            p = M.dot(v, out=self._p).tolist()
            dt, inv_eps, fric = self.dt, self.inv_eps, self.has_friction
            I, r = [], []
            for (k, d, f), vp, hp, ti, mv, pi, p0, Ii, ri in zip(
                self._joint,
                self._v_prev,
                self._h_prev,
                tau_applied.tolist(),
                dMv,
                p,
                self._p0,
                self._I,
                self._r,
                strict=True,
            ):
                td = d * vp
                if fric:
                    td += math.tanh(vp * inv_eps) * f
                Ii = Ii + ((ti - td) - hp + ri) * dt + mv
                I.append(Ii)
                r.append(k * ((pi - p0) - Ii))
            self._I = I
        self._r = r
        self.r[:] = r
        self._M_prev[:] = M
        self._h_prev = snap.h.tolist()
        self._v_prev = v.tolist()
        # F̂ = (J Jᵀ)⁻¹ J r
        J = snap.J_ee_lwa
        J.dot(J.T, out=self._JJt)
        J.dot(self.r, out=self._Jr)
        self.wrench[:] = solve_spd(self._JJt, self._Jr)  # J Jᵀ is SPD for a full-row-rank J
        return self.wrench

    def fill_wrench_state(self, snap: Snapshot, out: WrenchState) -> WrenchState:
        """Write the current estimate into ``out.ext_world`` (world axes, moment about the SENSOR
        origin, as the F/T path) and ``out.ext_body`` (EE axes, about the EE origin), so a loop can
        hand it to any controller in place of the F/T reading."""
        f0, f1, f2, n0, n1, n2 = self.wrench.tolist()
        (_, _, _, s0), (_, _, _, s1), (_, _, _, s2), _ = snap.T_world_sensor.tolist()
        e0, e1, e2 = snap.p_ee_in_world.tolist()
        (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = snap.R_world_ee.tolist()
        # world axes about S: n_S = n_E + (p_E − p_S) × f
        a0, a1, a2 = e0 - s0, e1 - s1, e2 - s2
        out.ext_world[:] = (f0, f1, f2, (a1 * f2 - a2 * f1) + n0, (a2 * f0 - a0 * f2) + n1, (a0 * f1 - a1 * f0) + n2)
        # EE axes: Rᵀ f, Rᵀ n
        out.ext_body[:] = (
            r00 * f0 + r10 * f1 + r20 * f2,
            r01 * f0 + r11 * f1 + r21 * f2,
            r02 * f0 + r12 * f1 + r22 * f2,
            r00 * n0 + r10 * n1 + r20 * n2,
            r01 * n0 + r11 * n1 + r21 * n2,
            r02 * n0 + r12 * n1 + r22 * n2,
        )
        return out
