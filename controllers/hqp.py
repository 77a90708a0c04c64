"""Hierarchical QP (HQP) with adaptive compliance (Ren & Shan 2026 §3.2; docs/theory/hqp.md).

Decision variable: the joint acceleration q̈ (nv,). Jacobian J = ``J_ee_lwa`` (LOCAL_WORLD_ALIGNED at
the EE origin, rows [v; ω]); Λ = (J M⁻¹ Jᵀ)⁻¹. All task quantities are world axes at the EE origin.

Adaptive compliance
    α = σ(k_α ‖f_ext‖)            (``sigmoid: plain``, α = ½ in free space → K_r = K_0/2), or
    α = 2σ(k_α ‖f_ext‖) − 1       (``sigmoid: shifted``, α = 0 in free space → K_r = K_0);
    K_r = clip((1 − α) K_0, K_min, K_0),  K_min = ``k_min_ratio`` · K_0  (diagonal, per axis).
    ‖f_ext‖ is the norm of the FORCE part of the external wrench [N] (a wrench norm would add N and
    N·m).
    D_r = Λ^½ K_r^½ + K_r^½ Λ^½ with symmetric square roots. Λ^½ comes from ONE ``eigh`` of
    Λ⁻¹ = J M⁻¹ Jᵀ = V diag(μ) Vᵀ:  Λ = V diag(1/μ) Vᵀ,  Λ^½ = V diag(μ^−½) Vᵀ (no scipy).
    F_r = −D_r Δν − K_r e_p,   e_p = [x − x_d; log(R R_dᵀ)],   Δν = ν − ν_d.

Level 1 (task)
    min ‖J q̈ + J̇ q̇ − a‖²,   a = ν̇_d + Λ⁻¹ (F_r + F_ext)
    (F_ext: environment-on-tool wrench, world axes, moment moved from the sensor origin S to the EE
    origin E: n_E = n_S + (p_S − p_E) × f.)

Hard constraints (both levels), horizon Δ (``horizon``, default 0.05 s)
    |q̇ + Δ q̈| ≤ q̇_max;   q_min ≤ q + Δ q̇ + ½ Δ² q̈ ≤ q_max          (a box lb ≤ q̈ ≤ ub)
    τ_min − c ≤ M q̈ ≤ τ_max − c                                        (G q̈ ≤ h, G = [M; −M])
    with c = h (+ the feedforward margin f + d|q̇| when the dissipation feedforward is on, so that
    τ = M q̈ + h + τ_ff stays inside the limits; − Jᵀ F_ext with ``wrench_compensation``).
    Joints whose velocity and position boxes do not intersect (only possible when the state is
    already outside its limits) keep the velocity box (brake back inside at q̇_max).
    Re-imposed every step, the position row is NOT a barrier: while it is active the distance to the
    limit e obeys ë + (2/Δ) ė + (2/Δ²) e = 0 (ζ = 0.707), so a joint arriving at constant speed v
    overshoots the limit by 0.067 Δ v (e = Δv e^(−t/Δ) cos(t/Δ), minimum at t = 3πΔ/4). The option
    ``position_constraint: critical`` uses q + Δ q̇ + ¼ Δ² q̈ instead (ζ = 1: e = v (Δ + t) e^(−2t/Δ)
    stays > 0 for a constant-speed approach) at the price of twice the braking acceleration. See
    docs/theory/hqp.md.

Level 2 (strictly lower priority)
    q̈_2 = −D_j q̇ − K_j (q − q_ref) [+ k_sa ∇w(q) when w = sqrt(det(J Jᵀ)) < w_th],
    min ‖q̈ − q̈_2‖²_M  subject to  J q̈ = J q̈_1 (level 1's optimal task acceleration) + constraints.
    Because ‖J q̈ − b‖² is strictly convex in J q̈, fixing J q̈ = J q̈_1 fixes level 1's optimal SET
    exactly: level 2 cannot change level 1's optimum (lexicographic HQP). The M-weighted metric
    makes level 2 the dynamically consistent null-space motion.
    ∇w is ANALYTIC from the snapshot's J alone (no Pinocchio call): for a serial chain of revolute
    joints with the LWA Jacobian at the EE, columns J_k = [Jv_k; Jω_k],
        ∂J_k/∂q_i = [Jω_i × Jv_k; Jω_i × Jω_k]   (i < k),    [Jω_k × Jv_i; 0]   (i ≥ k),
    and ∂w/∂q_i = w tr(J⁺ ∂J/∂q_i), J⁺ = Jᵀ(J Jᵀ)⁻¹ (exact; checked against finite differences of
    Pinocchio in tests/paper/test_hqp.py). Computed only when w < w_th.

Solution
    Unconstrained, the lexicographic optimum has the closed form
    q̈* = q̈_2 + M⁻¹ Jᵀ Λ (b − J q̈_2),  b = a − J̇ q̇   (= J̄ b + N q̈_2).
    ``qp_mode: auto`` (default) returns q̈* without calling a solver when it satisfies every
    constraint: a convex program whose unconstrained optimum is feasible has that point as its
    constrained optimum, level by level, so this is exactly the QP solution. Otherwise (or always
    with ``qp_mode: always``) two QPs are solved (``solver``: daqp | proxqp | quadprog; proxqp and
    quadprog through qpsolvers, daqp through its own API with the arrays qpsolvers would hand it —
    the same solutions bit for bit when cold, tests/test_hqp_fast.py — and warm-started from the
    previous step's multipliers with ``warm_start``, the default):
        QP1: min ½ q̈ᵀ (JᵀJ + ε M) q̈ − (Jᵀ b + ε M q̈*)ᵀ q̈   s.t. lb ≤ q̈ ≤ ub, G q̈ ≤ h
             (the ε-regulariser pulls toward q̈*, which zeroes ‖J q̈ − b‖, so it does not bias
             level 1 when the constraints are inactive; it makes P positive definite);
        QP2: min ½ q̈ᵀ M q̈ − (M q̈_2)ᵀ q̈   s.t. J q̈ = J q̈_1, lb ≤ q̈ ≤ ub, G q̈ ≤ h.
    A failed QP1 falls back to q̈* (the unconstrained least-squares solution) and is counted. A failed
    QP2 (typically quadprog on a degenerate equality, q̈_1 on a vertex of the constraint set) is
    retried once with the equality relaxed to |J q̈ − J q̈_1| ≤ 1e-9 (1 + |J q̈_1|); if that fails too,
    q̈_1 is kept. All counts show in :meth:`HQPController.summary`.

Torque
    τ = M q̈ + h − Jᵀ F_ext + τ_ff   (``wrench_compensation: true``, the default), or
    τ = M q̈ + h + τ_ff   (``wrench_compensation: false``, the paper's equations literally).
    With the plant M q̈ + h = τ + Jᵀ F_ext, the literal form realises the task acceleration
    a + Λ⁻¹ F_ext, i.e. Λ Δν̇ + D_r Δν + K_r e_p = 2 F_ext (the plant applies F_ext once more); the
    compensated form realises a exactly, i.e. Λ Δν̇ + D_r Δν + K_r e_p = F_ext (the designed
    impedance). See docs/theory/hqp.md.

Sensorless mode (``force_source: observer``): F_ext comes from a
:class:`controllers.observer.MomentumObserver` run inside the controller on the torque it
commanded the previous step (feedforward included), with the plant's joint damping and sliding
friction modelled from PlantInfo. Approximations: torque clipping by the loop is invisible to the
controller (a clipped step feeds the observer the unclipped torque), and static joint friction is
unobservable (it shows up in F̂).

Diagnostics (``ctrl_<name>`` telemetry channels; ``qp_solve_time`` is a wall-clock measurement, so it
is recorded per step in the run folder's ``timing.npz`` and summarised in summary.json's ``timing``,
never in the deterministic telemetry):
    qp_status            0 closed form feasible (no QP needed), 1 QPs solved, 2 level-2 QP failed
                         (level-1 kept), 3 level-1 QP failed → unconstrained LS fallback
    qp_solve_time [s]    solver time of this step (closed form: its evaluation time)
    qp_primal_residual   max constraint violation of the returned q̈ (box, torque rows, level-2
                         equality) [rad/s², N·m]
    qp_active            number of active inequality constraints (slack < 1e-7 relative)
    level1_residual      ‖J q̈ + J̇ q̇ − a‖ [m/s², rad/s²]
    alpha, k_r_trans, k_r_rot   adaptive-compliance state (K_r[0], K_r[3])
    fext_x/y/z [N]       force used by the law (sensor or observer), world axes

Implementation: :meth:`HQPController._build_task` is the reference, numpy array code with one statement
per equation of docs/theory/hqp.md (Λ and Λ^½ from ``np.linalg.eigh`` of Λ⁻¹, D_r = (√s Λ^½) ∘ (√K_0,i +
√K_0,j) for K_r = s K_0, the box and torque rows stored every step). ∇w is a handful of BLAS calls
(:class:`ManipulabilityGradient`: the column-wise cross products through constant selection matrices,
the running sums over the joints as triangular 0/1 products). When q̈* is feasible (every step of the
docking scenarios) the QP matrices are not assembled. tests/paper/test_hqp.py checks the built problem
and the closed form against a separate numpy implementation of the same equations.

Compiled kernel: when ``controllers._hqp_kernel`` is built (sim/kernels.py), :meth:`HQPController.compute`
binds it once to the run's arrays and a closed-form step is one C call (≈ 2 µs instead of ≈ 20–26 µs):
everything above up to τ, with Λ, Λ^½ from a cyclic Jacobi iteration instead of LAPACK's eigh and ∇w ported.
It writes τ, the diagnostics and every array of :attr:`HQPController.prob` and :attr:`HQPController.sol`
the Python path writes (their few scalars — α, w, the solution status and residuals — are brought up to
date when ``prob`` or ``sol`` is next read). It hands the step back to this Python code, having written
nothing, when the closed form is infeasible (the QPs), when Λ⁻¹ or J Jᵀ is not positive definite (or
the Jacobi iteration does not converge), and where Python's math raises. The sensorless mode (the
momentum observer) and ``qp_mode: always`` never use it. Everything agrees with the Python path to
round-off within the stated bounds of :meth:`HQPController.roundoff_bounds` (tests/test_hqp_kernel.py);
on a compiled step ``qp_solve_time`` is the kernel's whole evaluation time.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
import qpsolvers
from dockbench.controllers.base import CONTROLLERS, Command, Controller, PlantInfo
from dockbench.controllers.feedforward import DissipationFeedforward
from dockbench.controllers.force_control import (
    SETPOINT_DIAG,
    AxialForceSetpoint,
    ForceFilter,
    ForceSetpointConfig,
    build_setpoint,
    force_filter_param,
    force_setpoint_param,
    state_values,
)
from dockbench.controllers.observer import MomentumObserver
from dockbench.planners.base import Planner, Reference
from dockbench.sim import kernels
from dockbench.sim.config import param
from dockbench.sim.dynamics import Snapshot
from dockbench.sim.errors import ScenarioError
from dockbench.sim.lie import cross3, norm3, so3_log
from dockbench.sim.wrench import WrenchState
from scipy.linalg.lapack import dposv as _dposv

#: QP backends this controller accepts (qpsolvers' names; daqp is called through its own API).
QP_SOLVERS = ("daqp", "proxqp", "quadprog")
#: per-backend options (proxqp: its default eps_abs = 1e-3 is far too lax; 1e-9 makes its ALM iterate
#: for ms on the ε-regularised level-1 QP; 1e-7 agrees with daqp to ~1e-6)
_SOLVER_OPTIONS: dict[str, dict] = {
    "daqp": {},
    "proxqp": {"eps_abs": 1e-7, "eps_rel": 0.0, "max_iter": 1000},
    "quadprog": {},
}
#: the compiled kernel of the closed-form step (sim/kernels.py)
HQP_KERNEL = "controllers._hqp_kernel"
#: qp_status codes (see module docstring)
STATUS_CLOSED_FORM, STATUS_QP, STATUS_L2_FAILED, STATUS_FALLBACK = 0, 1, 2, 3
#: relative slack below which an inequality counts as active
ACTIVE_TOL = 1e-7
#: relative (and absolute, N·m) tightening of the torque rows against solver round-off
TORQUE_ROUNDOFF = 1e-9
#: relative half-width of the level-2 band used when the exact level-2 equality QP fails
LEVEL2_BAND = 1e-9


@dataclass(frozen=True)
class HQPConfig:
    k0: tuple[float, float, float, float, float, float] = param(
        (300.0, 300.0, 300.0, 50.0, 50.0, 50.0),
        unit="N/m | N·m/rad",
        gt=0.0,
        le=1e6,
        length=6,
        doc="nominal stiffness K_0 (diagonal: 3 translational, 3 rotational)",
    )
    k_min_ratio: float = param(0.3, gt=0.0, le=1.0, doc="K_min = k_min_ratio · K_0")
    k_alpha: float = param(0.5, unit="1/N", ge=0.0, le=100.0, doc="sigmoid slope k_α on ‖f_ext‖")
    sigmoid: Literal["plain", "shifted"] = param(
        "plain", doc="α = σ(k_α‖f‖) (plain, K_0/2 in free space) or 2σ(k_α‖f‖) − 1 (shifted, K_0)"
    )
    horizon: float = param(0.05, unit="s", ge=1e-4, le=10.0, doc="constraint horizon Δ")
    velocity_limit_scale: float = param(
        1.0, gt=0.0, le=1.0, doc="the velocity constraint uses this share of the robot's joint velocity limits"
    )
    position_constraint: Literal["paper", "critical"] = param(
        "paper",
        doc="paper: q + Δq̇ + ½Δ²q̈ within limits (docs/theory/hqp.md; may overshoot by ≤ 0.067 Δ q̇); "
        "critical: q + Δq̇ + ¼Δ²q̈ (critically damped approach, no overshoot at constant approach speed)",
    )
    k_j: float = param(5.0, unit="1/s²", ge=0.0, le=1e5, doc="level-2 posture stiffness K_j")
    d_j: float = param(10.0, unit="1/s", ge=0.0, le=1e5, doc="level-2 posture damping D_j")
    k_sa: float = param(500.0, unit="rad/s²", ge=0.0, le=1e6, doc="singularity-avoidance gain on ∇w")
    w_th: float = param(0.08, ge=0.0, le=10.0, doc="manipulability threshold below which ∇w is active")
    floating_singularity_avoidance: bool = param(
        False,
        doc="apply k_sa ∇w on a free-floating base too; off by default there: the null-space motion it drives "
        "turns the base, and the fixed-chain ∇w is not the gradient of the generalized Jacobian's w* "
        "(docs/theory/floating_base.md)",
    )
    solver: Literal["daqp", "proxqp", "quadprog"] = param(
        "daqp", doc="QP backend (daqp through its own API, the others through qpsolvers)"
    )
    warm_start: bool = param(
        True,
        doc="daqp: start a QP from the active set of the same QP's solution at the previous control "
        "step (its multipliers as dual_start), when there was one",
    )
    qp_mode: Literal["auto", "always"] = param(
        "auto", doc="auto: skip the QPs when the closed-form optimum is feasible (exact); always: solve both"
    )
    regularization: float = param(1e-8, gt=0.0, le=1.0, doc="ε of the level-1 QP regulariser ε M (relative)")
    wrench_compensation: bool = param(
        True,
        doc="true: τ = M q̈ + h − Jᵀ F_ext, the designed impedance Λ Δν̇ + D_r Δν + K_r e_p = F_ext; "
        "false: the paper's literal τ = M q̈ + h, which realises 2·F_ext (docs/theory/hqp.md)",
    )
    use_force_feedback: bool = param(True, doc="include F_ext in the level-1 target and in α")
    force_source: Literal["sensor", "observer"] = param(
        "sensor", doc="F_ext from the loop's wrench (sensor/truth) or from the internal momentum observer"
    )
    observer_gain: float = param(
        50.0, unit="1/s", gt=0.0, lt=2000.0, doc="momentum-observer gain K_O (sensorless mode)"
    )
    feedforward: Literal["torque", "velocity", "hybrid", "off"] = param(
        "torque",
        doc="joint friction/damping feedforward mode (docs/theory/khatib.md §4; hybrid: torque keying until the "
        "first contact, velocity keying from then on)",
    )
    force_filter: float = force_filter_param("F_ext (sensor or observer)")
    force_setpoint: ForceSetpointConfig | None = force_setpoint_param()

    def validate(self) -> None:
        # the observer's discrete update is stable for K_O Δt < 2; checked against the actual control
        # period when the observer is built, and here against the default 1 ms
        if self.observer_gain * 1e-3 >= 2.0:
            raise ScenarioError(
                f"must be < 2000 1/s for a stable 1 kHz update, got {self.observer_gain}", key="observer_gain"
            )


class HQPProblem:
    """The assembled two-level problem of one control step (see module docstring).

    Arrays are preallocated and overwritten every step; copy them before storing.

    Attributes:
        J: (6, nv) task Jacobian (LWA at the EE).
        a: (6,) level-1 target task acceleration ν̇_d + Λ⁻¹(F_r + F_ext).
        b: (6,) a − J̇ q̇ (level 1 is ‖J q̈ − b‖²).
        qdd_posture: (nv,) level-2 target q̈_2.
        qdd_closed: (nv,) closed-form lexicographic optimum q̈* (constraints ignored).
        P1, q1: level-1 QP cost ½ xᵀ P1 x + q1ᵀ x.
        P2, q2: level-2 QP cost (P2 = M).
        G, h: (2nv, nv), (2nv,) torque rows G x ≤ h.
        lb, ub: (nv,) box from the velocity and position constraints.
        A_eq, b_eq: level-2 equality J x = J q̈_1 (b_eq filled by :meth:`HQPController.solve`).
        tau_offset: (nv,) τ = M q̈ + tau_offset (+ τ_ff): h, or h − Jᵀ F_ext.
        K_r, D_r, F_r, Lambda, F_ext, e_p, dnu: adaptive-compliance terms (6,)/(6, 6).
        alpha: sigmoid output; w: manipulability.
        qp_assembled: P1, q1, P2, q2, G and lb, ub, h filled this step (always after
            :meth:`HQPController.build_problem`; within :meth:`HQPController.compute` only when the QPs
            run: a feasible closed form is tested against the constraints without storing them).
        vec6: (8, 6) block whose rows are F_ext, K_r, e_p, dnu, F_r, F_r + F_ext, a, b (the (6,)
            attributes are views of it).
        GJ: (2nv + 6, nv) = [G; J] (G and J are views of it: the level-2 constraint matrix as daqp
            takes it).
    """

    __slots__ = (
        "J",
        "a",
        "b",
        "qdd_posture",
        "qdd_closed",
        "P1",
        "q1",
        "P2",
        "q2",
        "G",
        "h",
        "lb",
        "ub",
        "A_eq",
        "b_eq",
        "tau_offset",
        "K_r",
        "D_r",
        "F_r",
        "Lambda",
        "Lambda_inv",
        "F_ext",
        "e_p",
        "dnu",
        "alpha",
        "w",
        "qp_assembled",
        "vec6",
        "GJ",
    )

    def __init__(self, nv: int):
        self.GJ = np.zeros((2 * nv + 6, nv))  # [G; J]: the constraint matrix of the level-2 QP for daqp
        self.G, self.J = self.GJ[: 2 * nv], self.GJ[2 * nv :]
        self.vec6 = np.zeros((8, 6))
        self.F_ext, self.K_r, self.e_p, self.dnu, self.F_r, _, self.a, self.b = self.vec6
        self.qdd_posture = np.zeros(nv)
        self.qdd_closed = np.zeros(nv)
        self.P1 = np.zeros((nv, nv))
        self.q1 = np.zeros(nv)
        self.P2 = np.zeros((nv, nv))
        self.q2 = np.zeros(nv)
        self.h = np.zeros(2 * nv)
        self.lb = np.zeros(nv)
        self.ub = np.zeros(nv)
        self.A_eq = self.J  # level-2 equality matrix is the task Jacobian itself
        self.b_eq = np.zeros(6)
        self.tau_offset = np.zeros(nv)
        self.D_r = np.zeros((6, 6))
        self.Lambda = np.zeros((6, 6))
        self.Lambda_inv = np.zeros((6, 6))
        self.alpha = 0.0
        self.w = 0.0
        self.qp_assembled = False


class HQPSolution:
    """Result of :meth:`HQPController.solve` (preallocated, overwritten every step).

    Attributes:
        qdd: (nv,) joint acceleration [rad/s²].
        qdd_level1: (nv,) level-1 solution (QP1, or the closed form).
        status: qp_status code (see module docstring).
        solve_time: [s]; primal_residual: max constraint violation; n_active: active inequalities;
        level1_residual: ‖J q̈ − b‖.
    """

    __slots__ = ("qdd", "qdd_level1", "status", "solve_time", "primal_residual", "n_active", "level1_residual")

    def __init__(self, nv: int):
        self.qdd = np.zeros(nv)
        self.qdd_level1 = np.zeros(nv)
        self.status = STATUS_CLOSED_FORM
        self.solve_time = 0.0
        self.primal_residual = 0.0
        self.n_active = 0
        self.level1_residual = 0.0


def manipulability_gradient(J: np.ndarray, w: float, out: np.ndarray | None = None) -> np.ndarray:
    """∇w(q) (nv,) of w = sqrt(det(J Jᵀ)) from the LWA EE Jacobian alone (serial revolute chain).

    ∂w/∂q_i = w tr(J⁺ ∂J/∂q_i) = w Σ_k P_k · ∂J_k/∂q_i  (P_k = [Pv_k; Pω_k] row k of J⁺), with
    ∂J_k/∂q_i = [Jω_i × Jv_k; Jω_i × Jω_k] for i < k and [Jω_k × Jv_i; 0] for i ≥ k. By the scalar
    triple product the two cases are
    i < k:  Jω_i · U_k,  U_k = Jv_k × Pv_k + Jω_k × Pω_k;   i ≥ k:  Jv_i · C_k,  C_k = Pv_k × Jω_k,
    so ∂w/∂q_i = w (Jω_i · Σ_{k>i} U_k + Jv_i · Σ_{k≤i} C_k): two running sums over the joints
    (evaluated by :class:`ManipulabilityGradient`).
    """
    out = np.empty(J.shape[1]) if out is None else out
    np.multiply(ManipulabilityGradient(J.shape[1])(J), w, out=out)
    return out


class ManipulabilityGradient:
    """Preallocated evaluator of ∇w / w (:func:`manipulability_gradient`) in a few BLAS/LAPACK calls.

    P = (J Jᵀ)⁻¹ J = (J⁺)ᵀ (``dposv``), rows Pv, Pω. Per joint column, a × b = a[r1] ∘ b[r2] − a[r2] ∘ b[r1]
    with the row rotations r1 = (1, 2, 0), r2 = (2, 0, 1), so component c of C_k = Pv_k × Jω_k is a sum
    of 2 products (an entry of J times an entry of P) and that of U_k = Jv_k × Pv_k + Jω_k × Pω_k a sum of
    4. Constant 0/±1 selection matrices pick the signed J factors and the P factors of all 18 products
    (exact: one nonzero per row), and Y = (S_J J) ∘ (S_P P) (18, nv) is laid out as C's rows (3, 2 nv)
    then U's rows (3, 4 nv), so that the running sums over the joints are products with stacked
    triangular 0/1 matrices:
        Σ_{k≤i} C_k = (Y_C [T_≤; T_≤])[:, i],   Σ_{k>i} U_k = (Y_U [T_>; T_>; T_>; T_>])[:, i],
    and ∂w/∂q_i / w = Jv_i · Σ_{k≤i} C_k + Jω_i · Σ_{k>i} U_k (a column-wise dot with J).
    """

    def __init__(self, nv: int):
        self._J = np.zeros((6, nv))
        self._JT = self._J.T
        self._JJt = np.zeros((6, 6))
        jv, jw, pv, pw = (0, 1, 2), (3, 4, 5), (0, 1, 2), (3, 4, 5)  # rows of J and of P
        r1, r2 = (1, 2, 0), (2, 0, 1)
        # (sign, J row, P row) of each product; rows 2c, 2c + 1: C_c; rows 6 + 4c ... 6 + 4c + 3: U_c
        # (C = Pv × Jω: component c = Jω[r2 c] Pv[r1 c] − Jω[r1 c] Pv[r2 c])
        prods = [t for c in range(3) for t in ((1.0, jw[r2[c]], pv[r1[c]]), (-1.0, jw[r1[c]], pv[r2[c]]))] + [
            t
            for c in range(3)
            for t in (
                (1.0, jv[r1[c]], pv[r2[c]]),
                (-1.0, jv[r2[c]], pv[r1[c]]),
                (1.0, jw[r1[c]], pw[r2[c]]),
                (-1.0, jw[r2[c]], pw[r1[c]]),
            )
        ]
        self._sel_J = np.zeros((18, 6))
        self._sel_P = np.zeros((18, 6))
        for r, (sign, j, p) in enumerate(prods):
            self._sel_J[r, j] = sign
            self._sel_P[r, p] = 1.0
        self._L = np.zeros((18, nv))
        self._R = np.zeros((18, nv))
        self._Y_C = self._L[:6].reshape(3, 2 * nv)  # Y = L ∘ R is stored in L
        self._Y_U = self._L[6:].reshape(3, 4 * nv)
        k = np.arange(nv)
        self._T_le2 = np.vstack([(k[:, None] <= k).astype(float)] * 2)  # [k ≤ i]
        self._T_gt4 = np.vstack([(k[:, None] > k).astype(float)] * 4)  # [k > i]
        self._S = np.zeros((6, nv))
        self._S_C, self._S_U = self._S[:3], self._S[3:]
        self._ones6 = np.ones(6)
        self.out = np.zeros(nv)

    def __call__(self, J: np.ndarray) -> np.ndarray:
        """∇w / w (nv,) at the (6, nv) LWA Jacobian ``J`` (a view of :attr:`out`, overwritten next call)."""
        Jc = self._J
        Jc[:] = J
        Jc.dot(self._JT, out=self._JJt)
        _, P, info = _dposv(self._JJt, Jc)  # (J Jᵀ)⁻¹ J, J Jᵀ SPD for full row rank
        if info != 0:
            P = np.linalg.solve(self._JJt, Jc)
        L = self._L
        self._sel_J.dot(Jc, out=L)
        self._sel_P.dot(P, out=self._R)
        np.multiply(L, self._R, out=L)
        self._Y_C.dot(self._T_le2, out=self._S_C)
        self._Y_U.dot(self._T_gt4, out=self._S_U)
        np.multiply(Jc, self._S, out=self._S)
        return self._ones6.dot(self._S, out=self.out)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


@CONTROLLERS.register("hqp")
class HQPController(Controller):
    """Two-level HQP with adaptive compliance (see module docstring)."""

    needs_sensor_pose = True  # F_ext is moved from the sensor origin to the EE origin
    Config = HQPConfig
    diag_names = (
        "qp_status",
        "qp_solve_time",
        "qp_primal_residual",
        "qp_active",
        "level1_residual",
        "alpha",
        "k_r_trans",
        "k_r_rot",
        "fext_x",
        "fext_y",
        "fext_z",
    )
    kernel_module = HQP_KERNEL
    guard_skip_diag = ("qp_solve_time",)  # wall clock: not compared by the guard, not in the telemetry
    # the counters and warm-start memory the Python path advances, and the flag that says whose results
    # prob/sol hold
    _guard_attrs = (
        "n_steps", "n_sa", "n_qp", "n_fail", "n_fail_l2", "n_relaxed_l2", "n_qp_iterations", "_warm", "_kernel_step"
    )
    diag_units: ClassVar[dict[str, str]] = {
        "qp_solve_time": "s", "qp_primal_residual": "rad/s²|N·m", "level1_residual": "m/s²|rad/s²",
        "k_r_trans": "N/m", "k_r_rot": "N·m/rad", "fext_x": "N", "fext_y": "N", "fext_z": "N",
        "fs_force_desired": "N", "fs_force_axial": "N", "fs_integral": "N",
    }

    def __init__(self, config: HQPConfig, plant: PlantInfo, planner: Planner | None = None):
        super().__init__(config, plant, planner)
        if config.solver not in qpsolvers.available_solvers:
            raise ScenarioError(
                f"QP solver {config.solver!r} is not installed; available: {', '.join(qpsolvers.available_solvers)}",
                key="controller.solver",
            )
        nv = plant.nv
        self.nv = nv
        c = config
        self.K0 = np.array(c.k0, dtype=float)
        self.Kmin = c.k_min_ratio * self.K0
        self.ff = DissipationFeedforward(
            plant.dof_frictionloss, plant.dof_damping, c.feedforward, period=plant.control_period
        )
        # |τ_ff| ≤ f + d|q̇|: the torque rows are tightened by this margin when the feedforward is on
        self._ff_f = plant.dof_frictionloss.copy() if c.feedforward != "off" else np.zeros(nv)
        self._ff_d = plant.dof_damping.copy() if c.feedforward != "off" else np.zeros(nv)
        self.q_ref = plant.q_home.copy()
        self._prob = HQPProblem(nv)
        self._sol = HQPSolution(nv)
        self.solver_options = dict(_SOLVER_OPTIONS[c.solver])
        self.observer = (
            MomentumObserver(plant, c.observer_gain, model_damping=True, model_friction=True)
            if c.force_source == "observer"
            else None
        )
        # work arrays
        self._MinvJt = np.zeros((nv, 6))
        # Λ and √s Λ^½ as the two halves of one (12, 6) product [V/μ; V/√(μ/s)] Vᵀ (p.Lambda is a view)
        self._LL = np.zeros((12, 6))
        self._prob.Lambda = self._LL[:6]
        self._Lhalf_s = self._LL[6:]
        self._g_rhs = self._prob.vec6[5]  # F_r + F_ext
        kh = np.sqrt(self.K0)
        self._S0 = kh[:, None] + kh  # √K_0,i + √K_0,j
        # configuration read per step, as plain attributes
        self._use_force = c.use_force_feedback
        self._k_alpha = c.k_alpha
        self._plain = c.sigmoid == "plain"
        self._k_min_ratio = c.k_min_ratio
        self._minus_k_j, self._d_j = -c.k_j, c.d_j
        # the ∇w term: off with k_sa = 0, and by default on a free-floating base (every null-space joint
        # motion there turns the base; docs/theory/floating_base.md, "The HQP's level 2 on a floating base")
        self.singularity_avoidance = c.k_sa > 0.0 and (
            not getattr(plant, "floating_base", False) or c.floating_singularity_avoidance
        )
        self._k_sa = c.k_sa if self.singularity_avoidance else 0.0
        self._w_th_sa = c.w_th if self.singularity_avoidance else -math.inf  # ∇w term on when w < this
        self._wrench_comp = c.wrench_compensation
        self._auto = c.qp_mode == "auto"
        self._JT = self._prob.J.T  # view: Jᵀ of the problem's (per-step) copy of J
        self._Mx = np.zeros(nv)  # M q̈* of the closed form (this step)
        self._closed_feasible = False
        self._box_filled = False  # lb, ub, h of this step stored (see _constraints)
        self._f6 = np.zeros(6)
        self._n = np.zeros(nv)
        self._Mqdd = np.zeros(nv)
        D = c.horizon
        self._inv_D = 1.0 / D
        # position row q + Δ q̇ + c Δ² q̈ ≤ q_max, c = ½ (paper) or ¼ (critical) → q̈ ≤ k2 (q_max − q) − (k2 Δ) q̇
        c2 = 0.5 if c.position_constraint == "paper" else 0.25
        self._k2 = 1.0 / (c2 * D * D)
        self._two_over_D = self._k2 * D
        v_max = plant.v_max * c.velocity_limit_scale  # the velocity bound |q̇ + Δq̈| ≤ q̇_max of the constraint
        self._vmin_D = -v_max / D
        self._vmax_D = v_max / D
        self._qmin_k2 = self._k2 * plant.q_min
        self._qmax_k2 = self._k2 * plant.q_max
        self._has_margin = bool(np.any(self._ff_f != 0.0) or np.any(self._ff_d != 0.0))
        # τ_max − f, tightened by TORQUE_ROUNDOFF so solver round-off never trips the loop's
        # saturation flag (|τ_cmd| > τ_max)
        self._tau_lim = plant.tau_max * (1.0 - TORQUE_ROUNDOFF) - TORQUE_ROUNDOFF
        self._tau_lim_f = self._tau_lim - self._ff_f
        # per joint (a row): −q̇_max/Δ, q̇_max/Δ, k2 q_min, k2 q_max, the torque limit less the feedforward
        # margin f, and its d of d|q̇| (the columns _constraints reads; the kernel takes the array)
        tl = self._tau_lim_f if self._has_margin else self._tau_lim
        fd = self._ff_d if self._has_margin else np.zeros(nv)
        self._joint_consts_a = np.column_stack((self._vmin_D, self._vmax_D, self._qmin_k2, self._qmax_k2, tl, fd))
        self._slack = np.zeros(4 * nv)
        self._G2 = np.zeros((2 * nv + 12, nv))
        # level-2 band QP bounds in daqp's layout [ub; h2] (h2 = the band's inequality right-hand side)
        self._bu_band = np.zeros(3 * nv + 12)
        self._h2 = self._bu_band[nv:]
        p = self._prob
        if c.solver == "daqp":
            # daqp's own API (what qpsolvers.solve_problem ends in, without its per-call restacking of
            # the constraints, Problem unpacking and Solution record: ≈ 4 µs instead of ≈ 11 µs): box rows
            # first (daqp's simple bounds), then G x ≤ h, then J x = b_eq (sense 5), bounds −1e30 below —
            # qpsolvers' layout exactly (the sense array starts at zero every solve); warm starts go
            # through daqp's dual_start instead (see _qp)
            import daqp  # only needed for this backend

            self._daqp_solve = daqp.solve
            m1, m2 = 3 * nv, 3 * nv + 6
            bu, bl = np.zeros(m2), np.full(m2, -1e30)
            sense = np.zeros(m2, dtype=np.intc)
            sense[m1:] = 5
            bl_band = np.full(3 * nv + 12, -1e30)
            # per problem: daqp.solve's arguments and the (destination, source) copies made before each
            # solve (this step's bounds; the senses from their initial values)
            sense0, sense_band = sense.copy(), np.zeros(3 * nv + 12, dtype=np.intc)
            self._qp1 = (
                (p.P1, p.q1, p.G, bu[:m1], bl[:m1], sense[:m1]),
                ((bu[:nv], p.ub), (bu[nv:m1], p.h), (bl[:nv], p.lb), (sense[:m1], sense0[:m1])),
            )
            self._qp2 = (
                (p.P2, p.q2, p.GJ, bu, bl, sense),
                ((bu[:nv], p.ub), (bu[nv:m1], p.h), (bu[m1:], p.b_eq), (bl[:nv], p.lb), (sense, sense0)),
            )
            band_copies = ((self._bu_band[:nv], p.ub), (bl_band[:nv], p.lb), (sense_band, np.zeros_like(sense_band)))
            self._qp2_band = ((p.P2, p.q2, self._G2, self._bu_band, bl_band, sense_band), band_copies)
        else:
            self._daqp_solve = None
            # qpsolvers problems built ONCE over the preallocated arrays (Problem keeps references, and
            # every array is updated in place each step)
            self._qp1 = qpsolvers.Problem(p.P1, p.q1, p.G, p.h, None, None, p.lb, p.ub)
            self._qp2 = qpsolvers.Problem(p.P2, p.q2, p.G, p.h, p.A_eq, p.b_eq, p.lb, p.ub)
            self._qp2_band = qpsolvers.Problem(p.P2, p.q2, self._G2, self._h2, None, None, p.lb, p.ub)
        self._tau_prev = np.zeros(nv)
        self._grad_w = ManipulabilityGradient(nv)
        # counters for summary()
        self.n_steps = 0
        self.n_qp = 0
        self.n_fail = 0
        self.n_fail_l2 = 0
        self.n_relaxed_l2 = 0
        self.n_sa = 0
        self.n_qp_iterations = 0  # daqp active-set iterations, summed over every QP solved
        #: warm-start memory per QP problem: (control step it was solved at, its multipliers)
        self._warm: dict[int, tuple[int, np.ndarray]] = {}
        # contact-force options (controllers/force_control.py; their state arrays are shared with the kernel)
        self.force_filter = ForceFilter(6, c.force_filter, plant.control_period)
        self.setpoint = build_setpoint(c.force_setpoint, planner, plant.control_period)
        if self.setpoint is not None:
            self.diag_names = (*self.diag_names, *SETPOINT_DIAG)
        # compiled kernel of the closed-form step (None: the Python path), bound to the run's arrays on the
        # first compute(). Not for the sensorless mode (the momentum observer runs in Python) nor for
        # qp_mode "always" (every step solves the QPs): those always run the Python path.
        python_only = self.observer is not None or not self._auto
        self._kmod = None if python_only else kernels.load(HQP_KERNEL)
        self._kernel = None
        self._kres = np.zeros(4)  # the kernel's α, w, ‖J q̈* − b‖ and evaluation time [s] of its last step
        self._kernel_step = False  # the last step was the kernel's: prob/sol scalars not yet synchronised

    # ------------------------------------------------------------------------------------ lifecycle

    def reset(self, snap: Snapshot, ref: Reference) -> None:
        self.n_steps = self.n_qp = self.n_fail = self.n_fail_l2 = self.n_relaxed_l2 = self.n_sa = 0
        self.n_qp_iterations = 0
        self._warm.clear()
        self._tau_prev[:] = 0.0
        if self.observer is not None:
            self.observer.reset()
        self.force_filter.reset()
        self.ff.reset()
        if self.setpoint is not None:
            self.setpoint.reset()

    @property
    def prob(self) -> HQPProblem:
        """The problem of the last step (:class:`HQPProblem`; its scalars brought up to date after a compiled
        step)."""
        if self._kernel_step:
            self._sync_kernel_step()
        return self._prob

    @property
    def sol(self) -> HQPSolution:
        """The solution of the last step (:class:`HQPSolution`; brought up to date after a compiled step)."""
        if self._kernel_step:
            self._sync_kernel_step()
        return self._sol

    def _sync_kernel_step(self) -> None:
        """After a compiled step: the Python-side scalars the Python path would have set (the kernel wrote
        every array of :attr:`prob` and :attr:`sol` itself), from its results buffer."""
        self._kernel_step = False
        p, sol = self._prob, self._sol
        p.alpha, p.w, l1, dt = self._kres.tolist()
        p.qp_assembled = False
        sol.status, sol.solve_time, sol.primal_residual, sol.n_active = STATUS_CLOSED_FORM, dt, 0.0, 0
        sol.level1_residual = l1
        self._closed_feasible, self._box_filled = True, False

    def summary(self) -> dict[str, object]:
        return {
            "qp_steps": self.n_steps,
            "qp_solved": self.n_qp,
            "qp_failures": self.n_fail,
            "qp_level2_failures": self.n_fail_l2,
            "qp_level2_relaxed": self.n_relaxed_l2,
            "qp_solver": self.config.solver,
            "qp_mode": self.config.qp_mode,
            "qp_warm_start": self.config.warm_start,
            "qp_iterations": self.n_qp_iterations,
            "singularity_avoidance_steps": self.n_sa,
            **self.kernel_summary(),
        }

    # ------------------------------------------------------------------------------------ build

    def _adaptive_stiffness(self, force_norm: float, out: np.ndarray) -> float:
        """K_r = clip((1 − α) K_0, K_min, K_0) into ``out``; returns α.

        Both sigmoid forms give 1 − α ∈ [0, 1], so the clip reduces to K_0 · max(1 − α, k_min_ratio).
        """
        alpha, scale = self._stiffness_scale(force_norm)
        np.multiply(self.K0, scale, out=out)
        return alpha

    def _stiffness_scale(self, force_norm: float) -> tuple[float, float]:
        """(α, max(1 − α, k_min_ratio)): K_r = K_0 times the second."""
        s = _sigmoid(self.config.k_alpha * force_norm)
        alpha = s if self.config.sigmoid == "plain" else 2.0 * s - 1.0
        return alpha, max(1.0 - alpha, self.config.k_min_ratio)

    def _build_task(self, snap: Snapshot, ref: Reference, wrench: WrenchState) -> HQPProblem:
        """Everything except the QP matrices: the task terms, the closed form q̈* and the constraint rows
        (lb, ub, h), one statement per equation of docs/theory/hqp.md. Also records whether q̈* satisfies
        every constraint (``_closed_feasible``) and its M q̈* (``_Mx``)."""
        self._kernel_step = False  # the Python path sets everything below
        p = self._prob
        J = p.J
        J[:] = snap.J_ee_lwa
        # F_ext [N, N·m], world axes, about the EE origin: the observer's estimate, or the sensor wrench moved
        # from the sensor origin p_S to the EE origin p_E (n_E = n_S + (p_S − p_E) × f)
        F = p.F_ext
        if self.observer is not None:
            F[:] = self.observer.update(snap, self._tau_prev)
        else:
            F[:] = wrench.ext_world
            F[3:] += cross3(snap.T_world_sensor[:3, 3] - snap.p_ee_in_world, F[:3])
        if not self._use_force:
            F[:] = 0.0
        elif self.force_filter.active:  # F̄: the law's force (controllers/force_control.py)
            F[:] = self.force_filter.update(F.tolist())
        fs = self.setpoint
        s_fs = fs.update(snap.t, F[:3].tolist(), snap.twist_ee_lwa[:3].tolist()) if fs is not None else 0.0

        # α = σ(k_α ‖f‖) and K_r = K_0 max(1 − α, k_min_ratio)
        p.alpha, scale = self._stiffness_scale(norm3(F[:3]))
        np.multiply(self.K0, scale, out=p.K_r)

        # pose and velocity errors e_p = [x − x_d; log(R R_dᵀ)], Δν = ν − ν_d; with the force set-point on, the
        # mating-axis components of the position error and of the reference velocity and acceleration are
        # faded out by s (hybrid impedance)
        x_err, v_d, a_d = snap.p_ee_in_world - ref.pos, ref.vel, ref.acc
        if s_fs > 0.0:
            x_err, v_d, a_d = (np.array(fs.remove_axial(u.tolist(), s_fs)) for u in (x_err, v_d, a_d))
        p.e_p[:3] = x_err
        p.e_p[3:] = so3_log(snap.R_world_ee @ ref.R.T)
        p.dnu[:3] = snap.twist_ee_lwa[:3] - v_d
        p.dnu[3:] = snap.twist_ee_lwa[3:] - ref.omega

        # Λ⁻¹ = J M⁻¹ Jᵀ = V diag(μ) Vᵀ;  Λ = V diag(1/μ) Vᵀ;  √s Λ^½ = V diag((μ/s)^−½) Vᵀ
        np.matmul(snap.Minv, self._JT, out=self._MinvJt)
        np.matmul(J, self._MinvJt, out=p.Lambda_inv)
        mu, V = np.linalg.eigh(p.Lambda_inv)
        np.matmul(V / mu, V.T, out=p.Lambda)
        np.matmul(V / np.sqrt(mu / scale), V.T, out=self._Lhalf_s)
        # D_r = Λ^½ K_r^½ + K_r^½ Λ^½ with K_r = s K_0: (D_r)_ij = √s (Λ^½)_ij (√K_0,i + √K_0,j)
        np.multiply(self._Lhalf_s, self._S0, out=p.D_r)

        # F_r = −D_r Δν − K_r e_p (+ F_f, the set-point's task force along the mating axis)
        np.negative(p.D_r @ p.dnu + p.K_r * p.e_p, out=p.F_r)
        if s_fs > 0.0:
            p.F_r[:3] += fs.task_force()
        # a = ν̇_d + Λ⁻¹ (F_r + F_ext);  b = a − J̇ q̇
        np.add(p.F_r, F, out=self._g_rhs)
        p.a[:3] = a_d
        p.a[3:] = ref.alpha
        p.a += p.Lambda_inv @ self._g_rhs
        np.subtract(p.a, snap.dJdq_ee_lwa, out=p.b)

        # level 2: q̈_2 = −K_j (q − q_ref) − D_j q̇ [+ k_sa ∇w, written (k_sa w)(∇w / w)]
        q2 = p.qdd_posture
        np.multiply(snap.q - self.q_ref, self._minus_k_j, out=q2)
        q2 -= self._d_j * snap.v
        p.w = snap.manipulability
        if p.w < self._w_th_sa:  # −inf when k_sa = 0: never
            q2 += (self._k_sa * p.w) * self._grad_w(J)
            self.n_sa += 1

        # closed form q̈* = q̈_2 + M⁻¹ Jᵀ Λ (b − J q̈_2)
        np.add(q2, self._MinvJt @ (p.Lambda @ (p.b - J @ q2)), out=p.qdd_closed)
        # τ = M q̈ + offset (+ τ_ff), offset = h (− Jᵀ F_ext with wrench compensation)
        p.tau_offset[:] = snap.h
        if self._wrench_comp:
            p.tau_offset -= self._JT @ F
        np.matmul(snap.M, p.qdd_closed, out=self._Mx)
        self._closed_feasible = self._constraints(snap)
        p.qp_assembled = False
        return p

    def _constraints(self, snap: Snapshot) -> bool:
        """Store the box (lb, ub) and the torque rows h of this step and return whether q̈* (``qdd_closed``,
        with M q̈* in ``_Mx``) satisfies them. Per joint (constants folded in __init__):
          box over the horizon Δ: velocity (±q̇_max − q̇)/Δ, position k2 (q_lim − q) − (k2 Δ) q̇, their
          intersection (the velocity box alone where they do not intersect: the state is already outside
          its limits);
          torque rows −τ_max + m − c ≤ M q̈ ≤ τ_max − m − c, m = f + d|q̇| (feedforward margin), c the offset;
          feasibility of q̈*: lb ≤ q̈* ≤ ub and −h_bot ≤ M q̈* ≤ h_top (the slacks of _slacks ≥ 0)."""
        p = self._prob
        nv = self.nv
        q, v = snap.q, snap.v
        vmin_D, vmax_D, qmin_k2, qmax_k2, tau_lim, fd = self._joint_consts_a.T
        lv, uv = vmin_D - v * self._inv_D, vmax_D - v * self._inv_D
        n2 = q * self._k2 + self._two_over_D * v
        lo, hi = np.maximum(qmin_k2 - n2, lv), np.minimum(qmax_k2 - n2, uv)
        disjoint = lo > hi
        np.copyto(p.lb, np.where(disjoint, lv, lo))
        np.copyto(p.ub, np.where(disjoint, uv, hi))
        m = tau_lim - np.abs(v) * fd
        np.subtract(m, p.tau_offset, out=p.h[:nv])
        np.add(m, p.tau_offset, out=p.h[nv:])
        self._box_filled = True
        x, Mx = p.qdd_closed, self._Mx
        return bool((p.lb <= x).all() and (x <= p.ub).all() and (-p.h[nv:] <= Mx).all() and (Mx <= p.h[:nv]).all())

    def _assemble_qp(self, snap: Snapshot) -> None:
        """Fill P1, q1, P2, q2, G (the QP matrices) of :attr:`prob`, and lb, ub, h unless
        :meth:`_build_task` already stored them this step."""
        if self._kernel_step:
            self._sync_kernel_step()
        p = self._prob
        nv = self.nv
        M = snap.M
        if not self._box_filled:  # after a compiled step (the kernel does not store the rows)
            self._constraints(snap)
        eps = self.config.regularization
        JT = self._JT
        JT.dot(p.J, out=p.P1)
        p.P1 += eps * M
        # q1 = −(Jᵀ b + ε M q̈*)
        M.dot(p.qdd_closed, out=self._n)
        self._n *= eps
        JT.dot(p.b, out=p.q1)
        p.q1 += self._n
        np.negative(p.q1, out=p.q1)
        p.P2[:] = M
        M.dot(p.qdd_posture, out=p.q2)
        np.negative(p.q2, out=p.q2)
        p.G[:nv] = M
        np.negative(M, out=p.G[nv:])
        p.qp_assembled = True

    def build_problem(self, snap: Snapshot, ref: Reference, wrench: WrenchState) -> HQPProblem:
        """Assemble the complete two-level problem of this step (no solve). The returned record is
        reused: copy its arrays to keep them. Note: in sensorless mode this advances the observer."""
        self._build_task(snap, ref, wrench)
        self._assemble_qp(snap)
        return self._prob

    # ------------------------------------------------------------------------------------ solve

    def _feasible(self, x: np.ndarray, snap: Snapshot) -> bool:
        """All constraints hold at ``x`` (one min over the stacked slacks)."""
        return bool(self._slacks(x, snap.M).min() >= 0.0)

    def _qp(self, problem: qpsolvers.Problem | tuple) -> tuple[np.ndarray | None, float]:
        """Solve one preassembled problem (``_qp1``, ``_qp2``, ``_qp2_band``); (x or None on failure,
        wall time [s])."""
        t0 = time.perf_counter()
        if self._daqp_solve is None:
            s = qpsolvers.solve_problem(problem, solver=self.config.solver, **self.solver_options)
            x = s.x if s.found else None
        else:
            args, copies = problem
            for dst, src in copies:  # bounds of this step, and the constraint senses reset
                dst[:] = src
            # warm start: the same QP solved at the previous control step → its multipliers give
            # daqp the starting active set (same optimum; fewer active-set iterations)
            key = id(problem)
            prev = self._warm.get(key) if self.config.warm_start else None
            if prev is not None and prev[0] == self.n_steps - 1:
                x, _, exitflag, info = self._daqp_solve(*args, dual_start=prev[1], **self.solver_options)
            else:
                x, _, exitflag, info = self._daqp_solve(*args, **self.solver_options)
            self.n_qp_iterations += info["iterations"]
            if exitflag > 0:
                self._warm[key] = (self.n_steps, info["lam"])
            else:
                x = None
                self._warm.pop(key, None)
        dt = time.perf_counter() - t0
        ok = x is not None and all(map(math.isfinite, x.tolist()))
        return (x if ok else None), dt

    def _slacks(self, x: np.ndarray, M: np.ndarray) -> np.ndarray:
        """Stacked inequality slacks [x − lb; ub − x; h_top − M x; h_bot + M x] (≥ 0 when feasible)."""
        p = self._prob
        nv = self.nv
        S = self._slack
        np.subtract(x, p.lb, out=S[:nv])
        np.subtract(p.ub, x, out=S[nv : 2 * nv])
        Mx = self._Mqdd
        M.dot(x, out=Mx)
        np.subtract(p.h[:nv], Mx, out=S[2 * nv : 3 * nv])
        np.add(p.h[nv:], Mx, out=S[3 * nv :])
        return S

    def _stats(self, x: np.ndarray, M: np.ndarray, sol: HQPSolution, eq: bool) -> None:
        """Primal residual (max violation) and active-inequality count of ``x``: the slacks of
        :meth:`_slacks`, an inequality active when its slack ≤ ACTIVE_TOL (1 + |bound|)."""
        p = self._prob
        slack = self._slacks(x, M)
        bound = np.concatenate((p.lb, p.ub, p.h))
        viol = max(0.0, -float(slack.min()))
        if eq:
            viol = max(viol, float(np.abs(p.J @ x - p.b_eq).max()))
        sol.primal_residual = viol
        sol.n_active = int(np.count_nonzero(slack <= ACTIVE_TOL * (1.0 + np.abs(bound))))

    def solve(self, snap: Snapshot) -> HQPSolution:
        """Solve the problem last built for ``snap`` (closed form when feasible in ``auto`` mode)."""
        if self._kernel_step:
            self._sync_kernel_step()
        return self._solve(snap, None)

    def _solve(self, snap: Snapshot, closed_feasible: bool | None) -> HQPSolution:
        """:meth:`solve`; ``closed_feasible``: the feasibility of q̈* when already known (compute()
        passes the test made in _build_task; None re-tests the problem's arrays)."""
        p = self._prob
        if closed_feasible is None and not p.qp_assembled:
            self._assemble_qp(snap)
        if self._auto and (self._feasible(p.qdd_closed, snap) if closed_feasible is None else closed_feasible):
            return self._closed_form_solution()
        sol = self._sol
        if not p.qp_assembled:
            self._assemble_qp(snap)
        self.n_qp += 1
        x1, dt1 = self._qp(self._qp1)
        if x1 is None:
            self.n_fail += 1
            sol.qdd[:] = p.qdd_closed
            sol.qdd_level1[:] = p.qdd_closed
            sol.status = STATUS_FALLBACK
            sol.solve_time = dt1
            self._stats(sol.qdd, snap.M, sol, eq=False)
        else:
            sol.qdd_level1[:] = x1
            p.J.dot(x1, out=p.b_eq)
            x2, dt2 = self._qp(self._qp2)
            eq = True
            if x2 is None:
                # degenerate equality (q̈_1 on a vertex of the constraints): retry once with the
                # equality relaxed to the band |J q̈ − J q̈_1| ≤ δ, δ = 1e-9 (1 + |J q̈_1|)
                self.n_relaxed_l2 += 1
                nv = self.nv
                G2, h2 = self._G2, self._h2
                G2[: 2 * nv] = p.G
                G2[2 * nv : 2 * nv + 6] = p.J
                np.negative(p.J, out=G2[2 * nv + 6 :])
                h2[: 2 * nv] = p.h
                delta = self._f6
                np.abs(p.b_eq, out=delta)
                delta += 1.0
                delta *= LEVEL2_BAND
                np.add(p.b_eq, delta, out=h2[2 * nv : 2 * nv + 6])
                np.subtract(delta, p.b_eq, out=h2[2 * nv + 6 :])
                x2, dt2b = self._qp(self._qp2_band)
                dt2 += dt2b
                eq = False
            if x2 is None:
                self.n_fail_l2 += 1
                sol.qdd[:] = x1
                sol.status = STATUS_L2_FAILED
                self._stats(sol.qdd, snap.M, sol, eq=False)
            else:
                sol.qdd[:] = x2
                sol.status = STATUS_QP
                self._stats(sol.qdd, snap.M, sol, eq=eq)
            sol.solve_time = dt1 + dt2
        sol.level1_residual = self._level1_residual(sol.qdd)
        return sol

    def _closed_form_solution(self) -> HQPSolution:
        """Record q̈* of the problem as the solution (status 0, no active constraint)."""
        t0 = time.perf_counter()
        sol = self._sol
        x = self._prob.qdd_closed
        sol.qdd[:] = x
        sol.qdd_level1[:] = x
        sol.status = STATUS_CLOSED_FORM
        sol.solve_time = time.perf_counter() - t0
        sol.primal_residual = 0.0
        sol.n_active = 0
        sol.level1_residual = self._level1_residual(x)
        return sol

    def _level1_residual(self, x: np.ndarray) -> float:
        """‖J x − b‖ [m/s², rad/s²]."""
        p = self._prob
        return float(np.linalg.norm(p.J @ x - p.b))

    # ------------------------------------------------------------------------------------ compute

    def _bind(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        """Bind the compiled kernel to this run's arrays (they never move during a run) and to the problem
        and solution arrays it fills."""
        p, sol = self._prob, self._sol
        args = dict(
            J_ee_lwa=snap.J_ee_lwa,
            T_world_ee=snap.T_world_ee,
            T_world_sensor=snap.T_world_sensor,
            twist_ee_lwa=snap.twist_ee_lwa,
            ref_flat=ref.flat,
            ext_world=wrench.ext_world,
            M=snap.M,
            Minv=snap.Minv,
            h=snap.h,
            q=snap.q,
            v=snap.v,
            dJdq_ee_lwa=snap.dJdq_ee_lwa,
            k0=self.K0,
            S0=self._S0,
            q_ref=self.q_ref,
            joint_consts=self._joint_consts_a,
            tau=cmd.tau,
            diag=cmd.diag,
            J=p.J,
            vec6=p.vec6,
            Lambda_inv=p.Lambda_inv,
            LL=self._LL,
            D_r=p.D_r,
            MinvJt=self._MinvJt,
            qdd_posture=p.qdd_posture,
            qdd_closed=p.qdd_closed,
            tau_offset=p.tau_offset,
            Mx=self._Mx,
            qdd=sol.qdd,
            qdd_level1=sol.qdd_level1,
            results=self._kres,
            k_alpha=float(self._k_alpha),
            k_min_ratio=float(self._k_min_ratio),
            minus_k_j=float(self._minus_k_j),
            d_j=float(self._d_j),
            k_sa=float(self._k_sa),
            w_th=float(self._w_th_sa),
            inv_D=self._inv_D,
            k2=self._k2,
            two_over_D=self._two_over_D,
            plain=self._plain,
            use_force=bool(self._use_force),
            wrench_comp=bool(self._wrench_comp),
            **self.ff.kernel_args(snap.g),
            **self.force_filter.kernel_args(),
            **(self.setpoint.kernel_args() if self.setpoint is not None else AxialForceSetpoint.kernel_args_off()),
        )
        args["filt_on"] = bool(args["filt_on"] and self._use_force)  # the filter runs on the law's force only
        self._kernel = self._kmod.HQPKernel(**args)
        self._kernel_arrays = self._arrays_of(args, snap, ref, wrench)
        self._bound = (snap, ref, wrench, cmd, self.config)

    def _guard_values(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> kernels.Values:
        """τ, q̈*, the task rows (F_ext, K_r, e_p, Δν), the diagnostics (all but the wall-clock solve time,
        in three groups) and the contact-force options' state (filter, set-point, hybrid latch:
        :func:`controllers.force_control.state_values`) for the kernel guard (sim/kernels.py)."""
        p, sol = self.prob, self.sol
        d = cmd.diag
        exact, resid, rest = self._diag_groups
        return [
            ("tau", cmd.tau.copy()),
            ("qdd", sol.qdd.copy()),
            ("task rows (F_ext, K_r, e_p, dnu)", p.vec6[:4].copy()),
            ("diag (status, active)", d[exact]),
            ("diag (residuals)", d[resid]),
            ("diag (alpha, K_r, F_ext)", d[rest]),
            ("force options state", state_values(self.force_filter, self.setpoint, self.ff)),
        ]

    @property
    def _diag_groups(self) -> tuple[list[int], list[int], list[int]]:
        """Indices of the diagnostics compared exactly (status, active count), as round-off residuals, and
        as values (α, K_r, F_ext); the wall-clock solve time is in none."""
        names = self.diag_names
        exact = [names.index(n) for n in ("qp_status", "qp_active")]
        resid = [names.index(n) for n in ("qp_primal_residual", "level1_residual")]
        used = set(exact + resid + [names.index(n) for n in self.guard_skip_diag])
        return exact, resid, [i for i in range(len(names)) if i not in used]

    def roundoff_bounds(
        self, snap: Snapshot, ref: Reference, cmd: Command, rows: bool = True
    ) -> dict[str, tuple[float, float]]:
        """(S, κ) of the round-off bound of each quantity of the last step (sim/kernels.py: |Δ| ≤ GUARD_C · n ε
        κ S), from this controller's own intermediates (call right after its step): two correct evaluations
        that sum in another order (the compiled kernel: Jacobi instead of LAPACK's dsyevd, plain loops
        instead of BLAS) differ by less. Where part of a quantity's error passes through the
        eigendecomposition of Λ⁻¹ (amplified by κ = κ(Λ⁻¹)) and part does not, the bound is the two-part
        GUARD_C · n ε (κ S_solve + S_plain) (:func:`sim.kernels.split_bound`).

        * ``Lambda_inv`` = J M⁻¹ Jᵀ, ``MinvJt`` = M⁻¹Jᵀ: products, S = max |J||M⁻¹||J|ᵀ resp. |M⁻¹||J|ᵀ, κ = 1.
        * ``Lambda``, ``Lambda_half_s`` (√s Λ^½), ``D_r`` = √s Λ^½ ∘ (√K_0,i + √K_0,j): from the eigendecomposition,
          S = their largest |entry|, κ.
        * ``F_r`` = −D_r Δν − K_r e_p: S_solve = max |D_r||Δν|; S_plain = max(|D_r|(|ν| + |ν_d|) + |K_r|(|e_p| + s_e) +
          |F_ext|), where s_e = (|x| + |x_d|, 1) and |ν| + |ν_d| are the scales of e_p's and Δν's own round-off
          (it does not shrink with the error). ``a`` = ν̇_d + Λ⁻¹(F_r + F_ext), ``b`` = a − J̇q̇: the same
          through |Λ⁻¹|, plus max |ν̇_d|, |J̇q̇| in S_plain.
        * ``qdd_posture`` = −K_j (q − q_ref) − D_j q̇ + k_sa ∇w: S = max t₂, t₂ = K_j |q − q_ref| + D_j |q̇| + k_sa w
          |∇w/w| (its terms, which cancel at rest), κ = κ(J Jᵀ) when ∇w is on (∇w/w solves with J Jᵀ).
        * ``qdd_closed`` q̈* = q̈_2 + J̄ (b − J q̈_2), J̄ = M⁻¹JᵀΛ (also ``qdd``, ``qdd_level1``): S_solve = max
          |J̄|(|b| + |J||q̈_2| + b's S_solve) (J̄'s own error ≈ n ε κ |J̄| comes through Λ); S_plain = max t₂ + max
          |q̈_2| + max |J̄|(b's S_plain + |J| t₂). ``Mx`` = M q̈*: both parts times ‖M‖∞; ``tau`` = M q̈* + offset +
          τ_ff: 3 (‖M‖∞ parts + max |offset| in S_plain) + max |τ_ff| (the torque-mode feedforward's slope ≤ 2).
        * ``tau_offset`` = h − Jᵀ F_ext: S = max(|h| + |J|ᵀ|F_ext|), κ = 1.
        * ``task_rows`` (F_ext about the EE, K_r, e_p, Δν: rotations, cross products, the rotation log):
          S = (1 + max |r|) max |row| + π + max |x|, κ = 1 (r the sensor lever arm, x the EE position).
        * ``level1_residual`` ‖J q̈* − b‖ (a round-off-size number): b's bound plus max |J||q̈*| in S_plain.
        * ``diag_values`` (α, K_r, F_ext of the diagnostics): S = (1 + max |r|) max |value|, κ = 1.
        * ``lb``, ``ub`` (the box: k2 (q_lim − q) − k2 Δ q̇ and (±q̇_max − q̇)/Δ): S = max(k2 (|q_min| + |q_max| +
          |q|) + k2 Δ |q̇| + (q̇_max + |q̇|)/Δ), κ = 1; ``h`` (τ_max − m ∓ offset, m = f + d|q̇|): S = max(τ_max + f +
          d|q̇|) + the offset's S, κ = 1 (only with ``rows``: the guard does not compare the rows).
        """
        p, sol = self.prob, self.sol
        a, mag = np.abs, kernels.magnitude
        J, Li, L, M = p.J, p.Lambda_inv, self._LL[:6], snap.M
        kappa = kernels.condition(Li)
        # e_p and Δν carry the round-off of their own terms (x − x_d, the log of R R_dᵀ with unit-size
        # entries, ν − ν_d), which is no smaller near zero error: their scales, not their values
        # with the force set-point active the axial parts of x − x_d, ẋ_d and ẍ_d are removed with weight s
        # (|x − s a aᵀx|_i ≤ max |x| + ‖x‖₁ ≤ 4 max |x|) and F_f joins F_r
        fs = self.setpoint
        on = fs is not None and fs.s > 0.0
        grow = 4.0 if on else 1.0
        e_scale = np.concatenate((grow * (a(snap.p_ee_in_world) + a(ref.pos)), np.ones(3)))
        nu_scale = a(snap.twist_ee_lwa) + a(np.concatenate((grow * ref.vel, ref.omega)))
        through_D = a(p.D_r) @ a(p.dnu)  # D_r (from Λ^½: error ≈ n ε κ |D_r|) times Δν
        plain = a(p.D_r) @ nu_scale + a(p.K_r) * (a(p.e_p) + e_scale) + a(p.F_ext)
        if on:
            plain[:3] += a(np.array(fs.task_force()))
        b_solve = mag(a(Li) @ through_D)
        b_plain = mag(grow * ref.acc, ref.alpha, snap.dJdq_ee_lwa) + mag(a(Li) @ plain)
        # the terms of q̈_2 = −K_j (q − q_ref) − D_j q̇ [+ k_sa ∇w] (at rest they cancel: |q̈_2| alone is no scale)
        t2 = -self._minus_k_j * a(snap.q - self.q_ref) + self._d_j * a(snap.v)
        k_q2 = 1.0
        if p.w < self._w_th_sa:  # the ∇w term is on: ∇w/w solves with J Jᵀ
            t2 = t2 + self._k_sa * p.w * a(self._grad_w.out)
            k_q2 = kernels.condition(J @ J.T)
        s_q2 = mag(t2)
        # q̈* = q̈_2 + J̄ (b − J q̈_2), J̄ = M⁻¹JᵀΛ (bounded, unlike |M⁻¹Jᵀ||Λ|): J̄'s own error (≈ n ε κ |J̄|, through
        # Λ) times |b − J q̈_2|, plus |J̄| times the round-off of b and of q̈_2's terms
        Jbar = a(self._MinvJt @ L)
        q_solve = mag(Jbar @ (a(p.b) + a(J) @ a(q2 := p.qdd_posture))) + mag(Jbar @ np.full(6, b_solve))
        q_plain = s_q2 + mag(Jbar @ (b_plain + a(J) @ t2)) + mag(a(q2))
        m_inf = float(a(M).sum(axis=1).max())
        ff = mag(self.ff.out) if self.ff.active else 0.0
        lever = 1.0 + mag(snap.T_world_sensor[:3, 3] - snap.p_ee_in_world)
        s_offset = mag(a(snap.h) + a(J).T @ a(p.F_ext))
        split = kernels.split_bound
        s_q = split(q_solve, kappa, q_plain)
        r = {
            "Lambda_inv": (mag(a(J) @ a(snap.Minv) @ a(J).T), 1.0),
            "MinvJt": (mag(a(snap.Minv) @ a(J).T), 1.0),
            "Lambda": (mag(L), kappa),
            "Lambda_half_s": (mag(self._LL[6:]), kappa),
            "D_r": (mag(p.D_r), kappa),
            "F_r": split(mag(through_D), kappa, mag(plain)),
            "a": split(b_solve, kappa, b_plain),
            "b": split(b_solve, kappa, b_plain),
            "qdd_posture": (s_q2, k_q2),
            "qdd_closed": s_q,
            "qdd": s_q,
            "qdd_level1": s_q,
            "tau_offset": (s_offset, 1.0),
            "Mx": split(m_inf * q_solve, kappa, m_inf * q_plain),
            # τ = M q̈* + offset + τ_ff: 3× for the torque-mode feedforward (slope ≤ 2)
            "tau": split(3.0 * m_inf * q_solve, kappa, 3.0 * (m_inf * q_plain + mag(p.tau_offset)) + ff),
            "task_rows": (lever * mag(p.vec6[:4]) + math.pi + mag(snap.p_ee_in_world), 1.0),
            "level1_residual": split(b_solve, kappa, mag(a(J) @ a(sol.qdd)) + b_plain),
            "diag_values": (lever * mag(cmd.diag[self._diag_groups[2]]), 1.0),
        }
        if rows:
            plant = self.plant
            s_box = mag(
                self._k2 * (a(plant.q_min) + a(plant.q_max) + a(snap.q))
                + self._two_over_D * a(snap.v)
                + (plant.v_max + a(snap.v)) * self._inv_D
            )
            r["lb"] = r["ub"] = (s_box, 1.0)
            r["h"] = (mag(a(self._tau_lim) + self._ff_f + self._ff_d * a(snap.v)) + s_offset, 1.0)
        return r

    def _guard_bounds(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> kernels.Bounds:
        """S and κ of τ, q̈*, the task rows and the diagnostics (:meth:`roundoff_bounds`; the status and
        active count are exact, S = 0) and of the force options' state (the same scalar operations on both
        sides: S = its largest value)."""
        r = self.roundoff_bounds(snap, ref, cmd, rows=False)
        state = kernels.magnitude(state_values(self.force_filter, self.setpoint, self.ff))
        return [r["tau"], r["qdd"], r["task_rows"], (0.0, 1.0), r["level1_residual"], r["diag_values"], (state, 1.0)]

    compute = Controller.compute_with_kernel

    def _compute_kernel(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> bool:
        if not self._kernel_bound_to(snap, ref, wrench, cmd):
            self._bind(snap, ref, wrench, cmd)
        w = snap.manipulability
        if self._kernel.step(w, snap.t) == 0:
            self.n_steps += 1
            if w < self._w_th_sa:
                self.n_sa += 1
            self._kernel_step = True
            return True
        # the closed form is infeasible (→ the QPs), or Λ⁻¹ / J Jᵀ not positive definite, or a math
        # domain error: nothing was written, the Python path takes the step
        self.kernel_fallbacks += 1
        return False

    def _compute_python(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        """The reference implementation of :meth:`compute` (module docstring)."""
        self.n_steps += 1
        p = self._build_task(snap, ref, wrench)
        tau = cmd.tau
        if self._auto and self._closed_feasible:
            sol = self._closed_form_solution()
            np.add(self._Mx, p.tau_offset, out=tau)  # M q̈* from _build_task
        else:
            sol = self._solve(snap, self._closed_feasible)
            snap.M.dot(sol.qdd, out=tau)
            tau += p.tau_offset
        if self.ff.active:
            tau += self.ff.compute(snap.v, tau, snap.g, norm3(p.F_ext[:3]))
        if self.observer is not None:
            self._tau_prev[:] = tau
        kr, f = p.K_r, p.F_ext
        diag = (
            sol.status,
            sol.solve_time,
            sol.primal_residual,
            sol.n_active,
            sol.level1_residual,
            p.alpha,
            kr[0],
            kr[3],
            f[0],
            f[1],
            f[2],
        )
        fs = self.setpoint
        if fs is None:
            cmd.diag[:] = diag
        else:
            cmd.diag[:] = (*diag, fs.s, fs.force_desired, fs.force_axial, fs.integral)
