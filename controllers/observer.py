"""Generalised-momentum observer for sensorless external-wrench estimation (MATH.md §3).

Model (MATH.md §0, plus the plant's known joint dissipation τ_d(q̇) read from the MjModel)::

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
"""

from __future__ import annotations

import numpy as np

from controllers.base import PlantInfo
from sim.dynamics import Snapshot
from sim.errors import ScenarioError
from sim.wrench import WrenchState, cross3


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

    def __init__(self, plant: PlantInfo, gain: float | np.ndarray, *, model_damping: bool = True,
                 model_friction: bool = True, friction_eps: float = 0.01, dt: float | None = None):
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
        self._s = np.zeros(nv)
        self.r = np.zeros(nv)
        self.wrench = np.zeros(6)
        self._p0 = np.zeros(nv)
        self._I = np.zeros(nv)
        self._M_prev = np.zeros((nv, nv))
        self._h_prev = np.zeros(nv)
        self._v_prev = np.zeros(nv)
        self._p = np.zeros(nv)
        self._t = np.zeros(nv)
        self._JJt = np.zeros((6, 6))
        self._Jr = np.zeros(6)
        self._started = False

    def reset(self) -> None:
        """Forget the history; the next :meth:`update` re-initialises p(0)."""
        self._started = False
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
            np.matmul(M, v, out=self._p0)
            self._I[:] = 0.0
            self.r[:] = 0.0
            self._started = True
        else:
            t = self._t
            # (τ − τ_d(q̇) − h + r)_{k−1} Δt
            np.multiply(self.d, self._v_prev, out=t)
            if self.has_friction:
                np.multiply(self._v_prev, self.inv_eps, out=self._s)
                np.tanh(self._s, out=self._s)
                self._s *= self.f
                t += self._s
            np.subtract(tau_applied, t, out=t)
            t -= self._h_prev
            t += self.r
            t *= self.dt
            self._I += t
            # + (M_k − M_{k−1}) q̇_k   (Ṁ q̇ Δt by finite differences)
            np.subtract(M, self._M_prev, out=self._M_prev)
            np.matmul(self._M_prev, v, out=t)
            self._I += t
            # r = K_O (p − p0 − I)
            np.matmul(M, v, out=self._p)
            self._p -= self._p0
            self._p -= self._I
            np.multiply(self.K, self._p, out=self.r)
        self._M_prev[:] = M
        self._h_prev[:] = snap.h
        self._v_prev[:] = v
        # F̂ = (J Jᵀ)⁻¹ J r
        J = snap.J_ee_lwa
        np.matmul(J, J.T, out=self._JJt)
        np.matmul(J, self.r, out=self._Jr)
        self.wrench[:] = np.linalg.solve(self._JJt, self._Jr)
        return self.wrench

    def fill_wrench_state(self, snap: Snapshot, out: WrenchState) -> WrenchState:
        """Write the current estimate into ``out.ext_world`` (world axes, moment about the SENSOR
        origin, as the F/T path) and ``out.ext_body`` (EE axes, about the EE origin), so a loop can
        hand it to any controller in place of the F/T reading."""
        F = self.wrench
        pS = snap.T_world_sensor[:3, 3]
        pE = snap.p_ee_in_world
        R = snap.R_world_ee
        # world axes about S: n_S = n_E + (p_E − p_S) × f
        out.ext_world[:3] = F[:3]
        cross3(pE - pS, F[:3], out.ext_world[3:])
        out.ext_world[3:] += F[3:]
        np.matmul(R.T, F[:3], out=out.ext_body[:3])
        np.matmul(R.T, F[3:], out=out.ext_body[3:])
        return out
