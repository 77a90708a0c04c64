"""Hierarchical QP (HQP) with adaptive compliance (Ren & Shan 2026 §3.2; docs/theory/hqp.md): the controller.

The law is split by concept into sibling modules, each with its own part of the derivation:

* :mod:`controllers.adaptive_compliance` — α, K_r and the compliance wrench F_r;
* :mod:`controllers.hqp_problem` — the two levels and the hard constraints (:class:`HQPProblem`,
  :class:`HQPSolution`, the ``qp_status`` codes);
* :mod:`controllers.manipulability` — the singularity-avoidance term ∇w of level 2;
* :mod:`controllers.hqp_qp` — the closed form q̈* and the two QPs (:class:`TwoLevelQP`);
* :mod:`controllers.hqp_binding` — the compiled kernel's binding and its guard (:class:`HQPKernelBinding`);
* this module — the scenario keys (:class:`HQPConfig`) and :class:`HQPController`, which builds the task
  terms, the closed form and the constraint rows of each step (:meth:`HQPController._build_task`) and maps
  q̈ to τ. Every public name of those modules is importable from here too.

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
per equation of docs/theory/hqp.md (Λ and Λ^½ from the symmetric eigendecomposition of Λ⁻¹, LAPACK
``dsyevd`` as in ``np.linalg.eigh``; D_r = (√s Λ^½) ∘ (√K_0,i + √K_0,j) for K_r = s K_0; the box and
torque rows stored every step; ∇w from
:class:`controllers.manipulability.ManipulabilityGradient`). When q̈* is feasible (every step of the
docking scenarios) the QP matrices are not assembled. tests/paper/test_hqp.py checks the built problem
and the closed form against a separate numpy implementation of the same equations.

Compiled kernel: :mod:`controllers.hqp_binding` (a closed-form step is one C call; the QPs, the sensorless
mode and ``qp_mode: always`` run this Python code).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from dockbench.controllers.adaptive_compliance import stiffness_scale
from dockbench.controllers.base import CONTROLLERS, Command, Controller, PlantInfo
from dockbench.controllers.feedforward import DissipationFeedforward, velocity_scale_param
from dockbench.controllers.force_control import (
    SETPOINT_DIAG,
    ForceFilter,
    ForceSetpointConfig,
    build_setpoint,
    force_filter_param,
    force_setpoint_param,
)
from dockbench.controllers.hqp_binding import HQP_KERNEL, HQPKernelBinding
from dockbench.controllers.hqp_problem import (
    STATUS_CLOSED_FORM,
    STATUS_FALLBACK,
    STATUS_L2_FAILED,
    STATUS_QP,
    HQPProblem,
    HQPSolution,
)
from dockbench.controllers.hqp_qp import ACTIVE_TOL, LEVEL2_BAND, QP_SOLVERS, TwoLevelQP, check_solver
from dockbench.controllers.manipulability import ManipulabilityGradient, manipulability_gradient
from dockbench.controllers.observer import MomentumObserver
from dockbench.planners.base import Planner, Reference
from dockbench.sim import kernels
from dockbench.sim.config import param
from dockbench.sim.dynamics import Snapshot
from dockbench.sim.errors import ScenarioError
from dockbench.sim.lie import cross3, norm3, so3_log
from dockbench.sim.wrench import WrenchState
from scipy.linalg.lapack import dsyevd

__all__ = [
    "ACTIVE_TOL", "HQP_KERNEL", "LEVEL2_BAND", "QP_SOLVERS", "SETPOINT_DIAG", "STATUS_CLOSED_FORM", "STATUS_FALLBACK",
    "STATUS_L2_FAILED", "STATUS_QP", "TORQUE_ROUNDOFF", "HQPConfig", "HQPController", "HQPKernelBinding",
    "HQPProblem", "HQPSolution", "ManipulabilityGradient", "TwoLevelQP", "manipulability_gradient",
]

#: relative (and absolute, N·m) tightening of the torque rows against solver round-off
TORQUE_ROUNDOFF = 1e-9


def _eigh(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(μ ascending, V) with A = V diag(μ) Vᵀ for a symmetric A (its lower triangle): LAPACK ``dsyevd`` in one
    call, the routine ``np.linalg.eigh`` wraps, without the wrapper's cost; no convergence raises
    ``np.linalg.LinAlgError`` as eigh does."""
    mu, V, info = dsyevd(A, compute_v=1, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"eigenvalues did not converge (LAPACK dsyevd info {info})")
    return mu, V


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
    feedforward_velocity_scale: float = velocity_scale_param()
    force_filter: float = force_filter_param("F_ext (sensor or observer)")
    force_setpoint: ForceSetpointConfig | None = force_setpoint_param()

    def validate(self) -> None:
        # the observer's discrete update is stable for K_O Δt < 2; checked against the actual control
        # period when the observer is built, and here against the default 1 ms
        if self.observer_gain * 1e-3 >= 2.0:
            raise ScenarioError(
                f"must be < 2000 1/s for a stable 1 kHz update, got {self.observer_gain}", key="observer_gain"
            )


@CONTROLLERS.register("hqp")
class HQPController(HQPKernelBinding, TwoLevelQP, Controller):
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
        check_solver(config.solver)
        nv = plant.nv
        self.nv = nv
        c = config
        self.K0 = np.array(c.k0, dtype=float)
        self.Kmin = c.k_min_ratio * self.K0
        self.ff = DissipationFeedforward(
            plant.dof_frictionloss, plant.dof_damping, c.feedforward, period=plant.control_period,
            velocity_scale=c.feedforward_velocity_scale,
        )
        # |τ_ff| ≤ f + d|q̇|: the torque rows are tightened by this margin when the feedforward is on
        self._ff_f = plant.dof_frictionloss.copy() if c.feedforward != "off" else np.zeros(nv)
        self._ff_d = plant.dof_damping.copy() if c.feedforward != "off" else np.zeros(nv)
        self.q_ref = plant.q_home.copy()
        self._prob = HQPProblem(nv)
        self._sol = HQPSolution(nv)
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
        self._init_qp(c.solver)  # the QP stage's work arrays and problems (controllers/hqp_qp.py)
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

    # ------------------------------------------------------------------------------------ gain scales

    #: the gym's impedance action scales the law's stiffness and damping (dockbench/gym.py): six scales
    #: each, the axes of K_0 and of the derived D_r
    n_gain_scales = 6
    #: K_0 before the first set_gain_scales (the scales are relative to it)
    _K0_unscaled: np.ndarray | None = None

    def set_gain_scales(self, k_scale: np.ndarray, d_scale: np.ndarray) -> None:
        """Scale the law's stiffness and damping per axis (``k_scale``, ``d_scale``: 6 positive floats each,
        relative to the K_0 the law was built with; docs/theory/gym_impedance.md):
        K_0' = diag(k) K_0, K_min' = k_min_ratio K_0', and the table √K_0,i + √K_0,j of D_r becomes
        (√K_0,i' + √K_0,j') √(d_i d_j), so D_r' = diag(√d) D_r(K_0') diag(√d): a congruence, D_r' stays
        symmetric positive definite; with Λ and K_0 diagonal, d_i scales axis i's damping ratio (k alone
        keeps the law's designed ratio, D_r ∝ √K_r). The arrays are rewritten in place: the Python path and
        the bound compiled kernel (which reads K_0 and the table where they lie) both use the new gains from
        the next step."""
        k_scale, d_scale = self._gain_scales(k_scale, d_scale)
        if self._K0_unscaled is None:
            self._K0_unscaled = self.K0.copy()
        K0 = self.K0
        np.multiply(self._K0_unscaled, k_scale, out=K0)
        np.multiply(K0, self.config.k_min_ratio, out=self.Kmin)
        kh, dh = np.sqrt(K0), np.sqrt(d_scale)
        np.multiply(kh[:, None] + kh, dh[:, None] * dh, out=self._S0)

    def axial_stiffness(self, axis: np.ndarray, R_world_ee: np.ndarray) -> float | None:
        """K_r = K_0 max(1 − α, k_min_ratio), diagonal in world axes: Σ_i K_r,i a_i² (K_0 before the first step;
        None with a force set-point)."""
        if self.config.force_setpoint is not None:
            return None
        k = self._prob.K_r[:3]
        if not k.any():
            k = self.K0[:3]
        return float(k[0] * axis[0] ** 2 + k[1] * axis[1] ** 2 + k[2] * axis[2] ** 2)

    def stiffness_diagonal(self) -> np.ndarray:
        """K_0 as scaled (a copy): the stiffness away from contact; the adaptive scale max(1 − α, k_min_ratio)
        of a step (K_r, controllers/hqp_problem.py) is not included."""
        return np.array(self.K0, dtype=float)

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
        c = self.config
        return stiffness_scale(force_norm, c.k_alpha, c.sigmoid == "plain", c.k_min_ratio)

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
        mu, V = _eigh(p.Lambda_inv)
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

    def build_problem(self, snap: Snapshot, ref: Reference, wrench: WrenchState) -> HQPProblem:
        """Assemble the complete two-level problem of this step (no solve). The returned record is
        reused: copy its arrays to keep them. Note: in sensorless mode this advances the observer."""
        self._build_task(snap, ref, wrench)
        self._assemble_qp(snap)
        return self._prob

    compute = Controller.compute_with_kernel
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
