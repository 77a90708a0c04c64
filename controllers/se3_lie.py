r"""SE(3) Lie-group impedance (Kim, Sung, Choi, Park, Chung, IEEE T-RO 41 (2025) §III-A; MATH.md §4).

Body-frame quantities: T = ``T_world_ee``, V = J_b q̇ (``twist_ee_body``), J_b = ``J_ee_body``
(LOCAL), J̇_b q̇ = ``dJdq_ee_body``; desired motion (T_d, V_d, V̇_d) in the desired body frame from
:class:`planners.motion_reference.MotionReference`. Twists [v; ω], wrenches [f; n].

Error and its coordinates
    T̃ = T⁻¹ T_d  (the desired pose seen from the EE),   λ = log(T̃) ∈ R⁶,
    Ṽ = Ad_{T̃} V_d − V,      F̃ = Ad_{T̃}⁻ᵀ F_d − F_body    (F_body = ``WrenchState.ext_body``).

Which Jacobian maps λ̇ to Ṽ. Differentiating T̃ = T⁻¹T_d with T⁻¹Ṫ = V^ and T_d⁻¹Ṫ_d = V_d^:
    dT̃/dt = −V^ T̃ + T̃ V_d^   ⇒   (dT̃/dt) T̃⁻¹ = (Ad_{T̃} V_d − V)^ = Ṽ^.
So Ṽ is the LEFT (spatial) twist of T̃ = exp(λ), Ṽ = J_l(λ) λ̇, with J_l(λ) = J_r(−λ) = Ad_{T̃} J_r(λ).
In sim/lie.py, ``dexp`` is the RIGHT Jacobian J_r (body twist of exp(λ)); therefore this module
uses ``dexp_λ := lie.dexp(−λ)``, ``dexp⁻¹_λ := lie.dexp_inv(−λ)`` and
``d/dt dexp_λ = lie.dexp_dot(−λ, −λ̇)``. With that, MATH.md's formulas hold as written:
    λ̇ = dexp⁻¹_λ Ṽ,    γ = dexp_λᵀ F̃,    λ̇ᵀγ = (dexp_λ λ̇)ᵀ F̃ = ṼᵀF̃   (power invariance).

Designed error dynamics and the reference acceleration
    A λ̈ + D λ̇ + K λ = γ      ⇒   λ̈* = A⁻¹ (γ − D λ̇ − K λ).
Differentiating Ṽ = dexp_λ λ̇:   dṼ/dt = dexp_λ λ̈ + (d/dt dexp_λ) λ̇.
Differentiating Ṽ = Ad_{T̃} V_d − V with d/dt Ad_{T̃} = ad_{Ṽ} Ad_{T̃} (Ṽ is T̃'s left twist):
    dṼ/dt = Ad_{T̃} V̇_d + ad_{Ṽ} (Ad_{T̃} V_d) − V̇.
Equating the two and solving for the body acceleration V̇ that realises λ̈ = λ̈*:
    V̇_ref = Ad_{T̃} V̇_d + ad_{Ṽ}(Ad_{T̃} V_d) − dexp_λ λ̈* − (d/dt dexp_λ) λ̇.

Joint acceleration and torque
    q̈_ref = J̄_b (V̇_ref − J̇_b q̇) − N D_null q̇,    J̄_b = M⁻¹ J_bᵀ Λ_b,  N = I − J̄_b J_b,
    τ = M q̈_ref + h − J_bᵀ F_body + τ_ff.
With the plant M q̈ + h = τ + J_bᵀ F_body the external wrench cancels, q̈ = q̈_ref, J_b q̈ + J̇_b q̇ =
V̇_ref (J_b N = 0: the null-space term never changes the task acceleration), hence λ̈ = λ̈* and the
error obeys A λ̈ + D λ̇ + K λ = γ exactly — linear in λ for any size of error (|rotation| < π).
Evaluated with one linear solve: τ = J_bᵀ (y − F_body) − D_null M q̇ + h + τ_ff with
Λ_b⁻¹ y = V̇_ref − J̇_b q̇ + D_null V.

Full derivation: docs/theory/se3_lie.md. Diagnostics: λ (``lambda_vx`` … ``lambda_wz`` [m, rad]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from controllers.base import CONTROLLERS, Command, Controller, PlantInfo
from controllers.feedforward import DissipationFeedforward
from planners.base import Planner, Reference
from planners.motion_reference import MotionReference
from sim.config import param
from sim.dynamics import Snapshot
from sim.errors import ScenarioError
from sim.lie import Ad, Ad_inv, dexp, dexp_dot, se3_log
from sim.wrench import WrenchState

Vec6 = tuple[float, float, float, float, float, float]
Mat6 = tuple[tuple[float, ...], ...]


def _check_matrix(name: str, M: np.ndarray, *, definite: bool) -> None:
    scale = max(1.0, float(np.max(np.abs(M))))
    if not np.all(np.isfinite(M)):
        raise ScenarioError("must be finite", key=name)
    if np.max(np.abs(M - M.T)) > 1e-9 * scale:
        raise ScenarioError(f"must be symmetric, got max |M − Mᵀ| = {np.max(np.abs(M - M.T)):.3g}", key=name)
    ev = np.linalg.eigvalsh(0.5 * (M + M.T))
    if definite and ev[0] <= 0.0:
        raise ScenarioError(f"must be positive definite, smallest eigenvalue {ev[0]:.6g}", key=name)
    if not definite and ev[0] < -1e-12 * scale:
        raise ScenarioError(f"must be positive semidefinite, smallest eigenvalue {ev[0]:.6g}", key=name)


@dataclass(frozen=True)
class SE3LieConfig:
    a_diag: Vec6 = param((10.0, 10.0, 10.0, 1.0, 1.0, 1.0), unit="kg | kg·m²", gt=0.0, length=6,
                         doc="diagonal of the error-dynamics inertia A")
    d_diag: Vec6 = param((80.0, 80.0, 80.0, 10.0, 10.0, 10.0), unit="N·s/m | N·m·s/rad", ge=0.0, length=6,
                         doc="diagonal of the damping D")
    k_diag: Vec6 = param((50.0, 50.0, 50.0, 25.0, 25.0, 25.0), unit="N/m | N·m/rad", gt=0.0, length=6,
                         doc="diagonal of the stiffness K")
    a_matrix: Mat6 | None = param(None, length=6, doc="full 6×6 A (rows), overrides a_diag; SPD")
    d_matrix: Mat6 | None = param(None, length=6, doc="full 6×6 D (rows), overrides d_diag; symmetric PSD")
    k_matrix: Mat6 | None = param(None, length=6, doc="full 6×6 K (rows), overrides k_diag; SPD")
    wrench_desired: Vec6 = param((0.0,) * 6, unit="N | N·m", length=6,
                                 doc="desired wrench F_d [f; n] in the desired frame")
    d_null: float = param(10.0, unit="1/s", ge=0.0, doc="null-space joint damping (acceleration level)")
    feedforward: Literal["torque", "velocity", "off"] = param(
        "torque", doc="joint friction/damping feedforward mode (MATH.md §2)"
    )
    use_force_feedback: bool = param(True, doc="use F_body in F̃ and cancel it with −J_bᵀF_body")

    def matrices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(A, D, K) as (6, 6) arrays (full matrices override the diagonals)."""
        out = []
        for full, diag in ((self.a_matrix, self.a_diag), (self.d_matrix, self.d_diag), (self.k_matrix, self.k_diag)):
            out.append(np.array(full, dtype=float) if full is not None else np.diag(np.array(diag, dtype=float)))
        return out[0], out[1], out[2]

    def validate(self) -> None:
        A, D, K = self.matrices()
        for name, Mx in (("a_matrix", A), ("d_matrix", D), ("k_matrix", K)):
            if Mx.shape != (6, 6):
                raise ScenarioError(f"must be 6×6, got {Mx.shape}", key=name)
        _check_matrix("a_matrix" if self.a_matrix is not None else "a_diag", A, definite=True)
        _check_matrix("k_matrix" if self.k_matrix is not None else "k_diag", K, definite=True)
        _check_matrix("d_matrix" if self.d_matrix is not None else "d_diag", D, definite=False)


class _EchoPlanner:
    """Planner shim for controllers built without a planner: echoes the loop's world reference."""

    def __init__(self) -> None:
        self.last: Reference | None = None

    def evaluate(self, t: float, out: Reference) -> None:
        src = self.last
        if src is None:
            return
        out.pos[:] = src.pos
        out.vel[:] = src.vel
        out.acc[:] = src.acc
        out.R[:] = src.R
        out.omega[:] = src.omega
        out.alpha[:] = src.alpha


@CONTROLLERS.register("se3_lie")
class SE3LieController(Controller):
    """SE(3) impedance with linear error dynamics in exponential coordinates (module docstring)."""

    Config = SE3LieConfig
    diag_names = ("lambda_vx", "lambda_vy", "lambda_vz", "lambda_wx", "lambda_wy", "lambda_wz")

    def __init__(self, config: SE3LieConfig, plant: PlantInfo, planner: Planner | None = None):
        super().__init__(config, plant, planner)
        A, D, K = config.matrices()
        self.A, self.D, self.K = A, D, K
        self.Ainv = np.linalg.inv(A)
        self.AinvD = self.Ainv @ D
        self.AinvK = self.Ainv @ K
        self.F_d = np.array(config.wrench_desired, dtype=float)
        self.has_Fd = bool(np.any(self.F_d != 0.0))
        self._echo = _EchoPlanner() if planner is None else None
        self.mref = MotionReference(planner if planner is not None else self._echo)  # type: ignore[arg-type]
        self.ff = DissipationFeedforward(plant.dof_frictionloss, plant.dof_damping, config.feedforward)
        nv = plant.nv
        # preallocated work arrays
        self.T_err = np.eye(4)  # T̃
        self.lam = np.zeros(6)  # λ
        self.lam_dot = np.zeros(6)  # λ̇
        self.lam_ddot = np.zeros(6)  # λ̈*
        self.V_err = np.zeros(6)  # Ṽ
        self.F_err = np.zeros(6)  # F̃
        self.gamma = np.zeros(6)  # γ
        self.dV_ref = np.zeros(6)  # V̇_ref
        self.q_ddot_ref = np.zeros(nv)
        self._Tinv = np.eye(4)
        self._AdT = np.zeros((6, 6))
        self._Jl = np.zeros((6, 6))
        self._Jld = np.zeros((6, 6))
        self._AdVd = np.zeros(6)
        self._neglam = np.zeros(6)
        self._neglamd = np.zeros(6)
        self._t6 = np.zeros(6)
        self._u6 = np.zeros(6)
        self._MinvJt = np.zeros((nv, 6))
        self._Li = np.zeros((6, 6))
        self._tau = np.zeros(nv)
        self._Mv = np.zeros(nv)
        self._zero6 = np.zeros(6)

    # ------------------------------------------------------------------------------------ pieces

    def error_state(self, T: np.ndarray, V: np.ndarray, T_d: np.ndarray, V_d: np.ndarray,
                    F_body: np.ndarray) -> None:
        """Fill T̃, λ, Ṽ, λ̇, F̃, γ (and the dexp matrices) for pose T, body twist V, desired
        (T_d, V_d) and body wrench F_body. Public for the equation-level tests."""
        R = T[:3, :3]
        Ti = self._Tinv
        Ti[:3, :3] = R.T
        np.matmul(R.T, T[:3, 3], out=Ti[:3, 3])
        np.negative(Ti[:3, 3], out=Ti[:3, 3])
        np.matmul(Ti, T_d, out=self.T_err)
        self.lam[:] = se3_log(self.T_err)
        Ad(self.T_err, self._AdT)
        np.matmul(self._AdT, V_d, out=self._AdVd)
        np.subtract(self._AdVd, V, out=self.V_err)
        np.negative(self.lam, out=self._neglam)
        dexp(self._neglam, self._Jl)  # dexp_λ (left Jacobian)
        # λ̇ = dexp⁻¹_λ Ṽ, as one 6×6 solve with dexp_λ (≈2× cheaper than forming lie.dexp_inv(−λ);
        # tests/paper/test_se3_lie.py checks it against the closed form and finite differences)
        self.lam_dot[:] = np.linalg.solve(self._Jl, self.V_err)
        # F̃ = Ad_{T̃}⁻ᵀ F_d − F_body
        if self.has_Fd:
            np.matmul(Ad_inv(self.T_err).T, self.F_d, out=self.F_err)
            self.F_err -= F_body
        else:
            np.negative(F_body, out=self.F_err)
        np.matmul(self._Jl.T, self.F_err, out=self.gamma)

    def reference_acceleration(self, dV_d: np.ndarray) -> np.ndarray:
        """V̇_ref (6,) realising A λ̈ + D λ̇ + K λ = γ (after :meth:`error_state`)."""
        lam, lamd = self.lam, self.lam_dot
        # λ̈* = A⁻¹γ − A⁻¹D λ̇ − A⁻¹K λ
        l2 = self.lam_ddot
        np.matmul(self.Ainv, self.gamma, out=l2)
        l2 -= self.AinvD @ lamd
        l2 -= self.AinvK @ lam
        # dṼ* = dexp λ̈* + (d/dt dexp) λ̇
        np.negative(lamd, out=self._neglamd)
        dexp_dot(self._neglam, self._neglamd, self._Jld)
        t6 = self._t6
        np.matmul(self._Jl, l2, out=t6)
        t6 += self._Jld @ lamd
        # V̇_ref = Ad V̇_d + ad_Ṽ (Ad V_d) − dṼ*
        out = self.dV_ref
        np.matmul(self._AdT, dV_d, out=out)
        out -= t6
        v0, v1, v2, w0, w1, w2 = self.V_err
        a0, a1, a2, b0, b1, b2 = self._AdVd
        # ad_ξ η = [ω × v_η + v × ω_η; ω × ω_η]
        out[0] += w1 * a2 - w2 * a1 + v1 * b2 - v2 * b1
        out[1] += w2 * a0 - w0 * a2 + v2 * b0 - v0 * b2
        out[2] += w0 * a1 - w1 * a0 + v0 * b1 - v1 * b0
        out[3] += w1 * b2 - w2 * b1
        out[4] += w2 * b0 - w0 * b2
        out[5] += w0 * b1 - w1 * b0
        return out

    # ------------------------------------------------------------------------------------ compute

    def compute(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        c = self.config
        if self._echo is not None:
            self._echo.last = ref
        mr = self.mref.update(snap.t)
        F_body = wrench.ext_body if c.use_force_feedback else self._zero6
        self.error_state(snap.T_world_ee, snap.twist_ee_body, mr.T, mr.V, F_body)
        dVref = self.reference_acceleration(mr.dV)

        # τ = J_bᵀ (y − F_body) − d_null M q̇ + h + τ_ff,  Λ_b⁻¹ y = V̇_ref − J̇_b q̇ + d_null V
        Jb = snap.J_ee_body
        MinvJt = self._MinvJt
        np.matmul(snap.Minv, Jb.T, out=MinvJt)
        np.matmul(Jb, MinvJt, out=self._Li)
        rhs = self._u6
        np.subtract(dVref, snap.dJdq_ee_body, out=rhs)
        if c.d_null != 0.0:
            rhs += c.d_null * snap.twist_ee_body
        y = np.linalg.solve(self._Li, rhs)
        # q̈_ref (kept for inspection/tests): M⁻¹Jᵀ y − d_null q̇
        np.matmul(MinvJt, y, out=self.q_ddot_ref)
        self.q_ddot_ref -= c.d_null * snap.v
        y -= F_body
        tau = self._tau
        np.matmul(Jb.T, y, out=tau)
        if c.d_null != 0.0:
            np.matmul(snap.M, snap.v, out=self._Mv)
            self._Mv *= c.d_null
            tau -= self._Mv
        tau += snap.h
        if self.ff.active:
            tau += self.ff.compute(snap.v, tau)
        cmd.tau[:] = tau
        cmd.diag[:] = self.lam
