"""The HQP's two-level problem of one control step and its solution, as preallocated records
(docs/theory/hqp.md, "Levels"; the controller is :mod:`controllers.hqp`).

Decision variable: the joint acceleration q̈ (nv,). Jacobian J = ``J_ee_lwa`` (LOCAL_WORLD_ALIGNED at
the EE origin, rows [v; ω]); Λ = (J M⁻¹ Jᵀ)⁻¹. All task quantities are world axes at the EE origin.

Level 1 (task)
    min ‖J q̈ + J̇ q̇ − a‖²,   a = ν̇_d + Λ⁻¹ (F_r + F_ext)
    (F_r the adaptive-compliance wrench, :mod:`controllers.adaptive_compliance`; F_ext: environment-on-tool
    wrench, world axes, moment moved from the sensor origin S to the EE origin E: n_E = n_S + (p_S − p_E) × f.)

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
    makes level 2 the dynamically consistent null-space motion. ∇w: :mod:`controllers.manipulability`.

How the problem is solved (the closed form, or two QPs): :mod:`controllers.hqp_qp`.
"""

from __future__ import annotations

import numpy as np

#: qp_status codes (controllers/hqp_qp.py): 0 closed form feasible (no QP needed), 1 QPs solved, 2 level-2 QP
#: failed (level-1 kept), 3 level-1 QP failed → unconstrained LS fallback
STATUS_CLOSED_FORM, STATUS_QP, STATUS_L2_FAILED, STATUS_FALLBACK = 0, 1, 2, 3


class HQPProblem:
    """The assembled two-level problem of one control step (module docstring).

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
        status: qp_status code (module docstring).
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
