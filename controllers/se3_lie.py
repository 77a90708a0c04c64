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

Implementation (1 kHz loop): everything up to V̇_ref runs on Python floats in one method,
:meth:`SE3LieController._law` (for 6-vectors one numpy call costs more than the arithmetic). The desired
motion comes as floats from :meth:`planners.motion_reference.MotionReference.floats_from_reference`;
λ and every series coefficient of θ from one :func:`sim.lie.se3_log_floats`; :class:`sim.lie.DexpSE3`
applies dexp_λ⁻¹ and dexp_λᵀ in one call (``solve_tmul``) and dexp_λ λ̈* + (d/dt dexp_λ) λ̇ in another
(``mul_minus_dot``): no 6×6 matrix is formed, λ̇ needs no general solve. Terms that are exactly zero
for F_d = 0 and for fixed-orientation references (ω_d = 0, α_d = 0) are left out. The joint-space part
is two ``ndarray.dot``, one LAPACK Cholesky solve (``dposv``) and two in-place BLAS ``dgemv``. The
result arrays (``lam``, ``lam_dot``, …, ``q_ddot_ref``) are built only when read.
tests/paper/test_se3_lie.py checks the controller against a matrix-form implementation of the same
equations (lie.dexp, lie.dexp_dot, np.linalg.solve) to round-off; tests/test_se3_fast.py pins the
float desired motion and the zero-term shortcuts bit for bit and checks whole docking runs against the
matrix form.

Compiled kernel: when ``controllers._se3_kernel`` is built (sim/kernels.py), :meth:`SE3LieController.compute`
binds it once to the run's arrays (snapshot, reference or pass-through motion, wrench, command and a
results buffer) and each step is one call with no arguments (≈1–2 µs instead of ≈12–15 µs). The C code
is a literal port of the float path above, so λ, λ̇, γ, λ̈*, V̇_ref, … are equal bit for bit (with full
A, D, K: λ̈* and V̇_ref to round-off, the (6, 18) product being a plain loop there); the joint-space
part differs from BLAS/LAPACK in summation order only. This Python code stays the reference: it runs
when the kernel is missing, when ``DOCKBENCH_KERNELS=python``, and for a step where Λ_b⁻¹ is not
positive definite (np.linalg.solve). The public results (``lam``, …, ``q_ddot_ref``,
:meth:`desired_motion`) read whichever path ran the last step; ``summary()["kernel"]`` names the path.
tests/test_se3_kernel.py checks the two paths agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from scipy.linalg.blas import dgemv as _dgemv
from scipy.linalg.lapack import dposv as _dposv

from controllers.base import CONTROLLERS, Command, Controller, PlantInfo
from controllers.feedforward import DissipationFeedforward
from controllers.force_control import ForceFilter
from planners.base import Planner, Reference
from planners.motion_reference import MotionReference
from sim import kernels
from sim.config import param
from sim.dynamics import Snapshot
from sim.errors import ScenarioError
from sim.lie import DexpSE3, se3_log_floats
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
    a_diag: Vec6 = param(
        (10.0, 10.0, 10.0, 1.0, 1.0, 1.0),
        unit="kg | kg·m²",
        gt=0.0,
        length=6,
        doc="diagonal of the error-dynamics inertia A",
    )
    d_diag: Vec6 = param(
        (80.0, 80.0, 80.0, 10.0, 10.0, 10.0),
        unit="N·s/m | N·m·s/rad",
        ge=0.0,
        length=6,
        doc="diagonal of the damping D",
    )
    k_diag: Vec6 = param(
        (50.0, 50.0, 50.0, 25.0, 25.0, 25.0), unit="N/m | N·m/rad", gt=0.0, length=6, doc="diagonal of the stiffness K"
    )
    a_matrix: Mat6 | None = param(None, length=6, doc="full 6×6 A (rows), overrides a_diag; SPD")
    d_matrix: Mat6 | None = param(None, length=6, doc="full 6×6 D (rows), overrides d_diag; symmetric PSD")
    k_matrix: Mat6 | None = param(None, length=6, doc="full 6×6 K (rows), overrides k_diag; SPD")
    wrench_desired: Vec6 = param(
        (0.0,) * 6, unit="N | N·m", length=6, doc="desired wrench F_d [f; n] in the desired frame"
    )
    d_null: float = param(10.0, unit="1/s", ge=0.0, doc="null-space joint damping (acceleration level)")
    feedforward: Literal["torque", "velocity", "hybrid", "off"] = param(
        "torque",
        doc="joint friction/damping feedforward mode (MATH.md §2; hybrid: torque keying until the first contact, "
        "velocity keying from then on, Python only)",
    )
    use_force_feedback: bool = param(True, doc="use F_body in F̃ and cancel it with −J_bᵀF_body")
    force_filter: float = param(
        0.0, unit="s", ge=0.0,
        doc="time constant τ_f of a first-order low-pass on F_body before the law uses it (0 = off; Python only; "
        "docs/theory/force_control.md)",
    )

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

    needs_body_frame = True
    needs_world_drift = False  # the law uses the body-frame drift J̇_b q̇ only

    Config = SE3LieConfig
    diag_names = ("lambda_vx", "lambda_vy", "lambda_vz", "lambda_wx", "lambda_wy", "lambda_wz")
    kernel_module = "controllers._se3_kernel"
    # the Python path rebinds these (the kernel's result views, the path flag, the desired-motion record)
    _guard_attrs = ("_MinvJt", "_y", "_from_kernel", "_desired")
    diag_units: ClassVar[dict[str, str]] = {"lambda_vx": "m", "lambda_vy": "m", "lambda_vz": "m",
                                            "lambda_wx": "rad", "lambda_wy": "rad", "lambda_wz": "rad"}

    def __init__(self, config: SE3LieConfig, plant: PlantInfo, planner: Planner | None = None):
        super().__init__(config, plant, planner)
        A, D, K = config.matrices()
        self.A, self.D, self.K = A, D, K
        self.Ainv = np.linalg.inv(A)
        self.AinvD = self.Ainv @ D
        self.AinvK = self.Ainv @ K
        # diagonal A⁻¹, A⁻¹D, A⁻¹K (the default): λ̈* per axis on floats, the very products of the
        # matrix form (whose off-diagonal terms are exact zeros); the 18 diagonal entries, A⁻¹ first
        self._diag_gains: tuple[float, ...] | None = None
        if all(np.count_nonzero(Mx - np.diag(np.diagonal(Mx))) == 0 for Mx in (self.Ainv, self.AinvD, self.AinvK)):
            self._diag_gains = tuple(v for Mx in (self.Ainv, self.AinvD, self.AinvK) for v in np.diagonal(Mx).tolist())
        # full A, D or K: λ̈* = [A⁻¹, −A⁻¹D, −A⁻¹K] [γ; λ̇; λ] as one (6, 18) product
        self._G = np.hstack((self.Ainv, -self.AinvD, -self.AinvK))
        self._gdl = np.zeros(18)
        self.F_d = np.array(config.wrench_desired, dtype=float)
        self.has_Fd = bool(np.any(self.F_d != 0.0))
        self._F_d = tuple(self.F_d.tolist())
        self._echo = _EchoPlanner() if planner is None else None
        self.mref = MotionReference(planner if planner is not None else self._echo)  # type: ignore[arg-type]
        self.ff = DissipationFeedforward(
            plant.dof_frictionloss, plant.dof_damping, config.feedforward, period=plant.control_period
        )
        nv = plant.nv
        # dexp_λ (lie's dexp at −λ) with its coefficients
        self._jac = DexpSE3()
        # The step's results as Python floats, overwritten every step; the public arrays (T_err, lam,
        # lam_dot, …) are built from them on access (properties below)
        z6 = (0.0,) * 6
        self._Tt = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)  # T̃: rows of R̃, then p̃
        self._lam_t = self._lamd_t = self._l2_t = z6  # λ, λ̇, λ̈*
        self._Verr_t = self._Ferr_t = self._gamma_t = self._dVref_t = z6  # Ṽ, F̃, γ, V̇_ref
        self._V_t: Sequence[float] = z6  # V
        self._desired = ((1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0), z6, z6)  # T_d, V_d, V̇_d
        self._inputs: tuple = ()  # the arguments of the last error_state() (for reference_acceleration)
        # q̈_ref = M⁻¹J_bᵀ y − d_null q̇ from the last step's M⁻¹J_bᵀ, y and q̇ (built on access)
        self._MinvJt = np.zeros((nv, 6))
        self._y = np.zeros(6)
        self._v = np.zeros(nv)
        # work arrays
        self._rhs = np.zeros(6)
        self._zero6 = np.zeros(6)
        # compiled kernel (None: the Python path); bound to the run's arrays on the first compute(); not for
        # the hybrid feedforward (Python only)
        self.force_filter = ForceFilter(6, config.force_filter, plant.control_period)
        python_only = not self.ff.kernel_supported or self.force_filter.active
        self._kmod = None if python_only else kernels.load(self.kernel_module)
        self._kernel = None
        self._kv: dict[str, np.ndarray] = {}  # views of the kernel's results buffer, by name
        self._from_kernel = False  # the law results (lam, …, T_err) of the last step are the kernel's

    # ------------------------------------------------------------------------------------ results
    # Read-only (6,) / (4, 4) / (nv,) arrays of the last step, built from the float results on access
    # (new arrays each time; the 1 kHz loop never reads them, so it never pays for them).

    def _result(self, name: str, floats: Sequence[float]) -> np.ndarray:
        """(6,) result ``name`` of the last step: the kernel's (results buffer) or the Python floats."""
        return self._kv[name].copy() if self._from_kernel else np.array(floats)

    @property
    def T_err(self) -> np.ndarray:
        """T̃ = T⁻¹ T_d (4, 4)."""
        Tt = self._kv["T_err"].tolist() if self._from_kernel else self._Tt
        t00, t01, t02, t10, t11, t12, t20, t21, t22, p0, p1, p2 = Tt
        return np.array(((t00, t01, t02, p0), (t10, t11, t12, p1), (t20, t21, t22, p2), (0.0, 0.0, 0.0, 1.0)))

    @property
    def lam(self) -> np.ndarray:
        """λ = log T̃ (6,) [m, rad]."""
        return self._result("lam", self._lam_t)

    @property
    def lam_dot(self) -> np.ndarray:
        """λ̇ (6,)."""
        return self._result("lam_dot", self._lamd_t)

    @property
    def lam_ddot(self) -> np.ndarray:
        """λ̈* = A⁻¹ (γ − D λ̇ − K λ) (6,)."""
        return self._result("lam_ddot", self._l2_t)

    @property
    def V_err(self) -> np.ndarray:
        """Ṽ = Ad_T̃ V_d − V (6,) [m/s, rad/s]."""
        return self._result("V_err", self._Verr_t)

    @property
    def F_err(self) -> np.ndarray:
        """F̃ = Ad_T̃⁻ᵀ F_d − F_body (6,) [N, N·m]."""
        return self._result("F_err", self._Ferr_t)

    @property
    def gamma(self) -> np.ndarray:
        """γ = dexp_λᵀ F̃ (6,)."""
        return self._result("gamma", self._gamma_t)

    @property
    def dV_ref(self) -> np.ndarray:
        """V̇_ref (6,) [m/s², rad/s²]."""
        return self._result("dV_ref", self._dVref_t)

    @property
    def q_ddot_ref(self) -> np.ndarray:
        """q̈_ref = M⁻¹J_bᵀ y − d_null q̇ (nv,) [rad/s²] (after :meth:`compute`)."""
        return self._MinvJt.dot(self._y) - self._v * self.config.d_null

    def desired_motion(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(T_d (4, 4), V_d (6,), V̇_d (6,)) the last :meth:`compute` used (desired body frame)."""
        desired = self._desired
        if desired is None:  # the kernel ran the last step
            kv = self._kv
            desired = (kv["T_d"].tolist(), kv["V_d"].tolist(), kv["dV_d"].tolist())
        (r00, r01, r02, r10, r11, r12, r20, r21, r22, p0, p1, p2), V_d, dV_d = desired
        T = np.array(((r00, r01, r02, p0), (r10, r11, r12, p1), (r20, r21, r22, p2), (0.0, 0.0, 0.0, 1.0)))
        return T, np.array(V_d), np.array(dV_d)

    # ------------------------------------------------------------------------------------ pieces

    def error_state(self, T: np.ndarray, V: np.ndarray, T_d: np.ndarray, V_d: np.ndarray, F_body: np.ndarray) -> None:
        """Fill T̃, λ, Ṽ, λ̇, F̃, γ (and the dexp_λ coefficients) for pose T, body twist V, desired
        (T_d, V_d) and body wrench F_body. Public for the equation-level tests."""
        R, p = T_d[:3, :3], T_d[:3, 3]
        self._from_kernel = False
        self._inputs = (
            T.tolist(),
            V.tolist(),
            (*R.ravel().tolist(), *p.tolist()),
            tuple(V_d.tolist()),
            F_body.tolist(),
        )
        self._law(*self._inputs, (0.0,) * 6)

    def reference_acceleration(self, dV_d: np.ndarray) -> np.ndarray:
        """V̇_ref (6,) realising A λ̈ + D λ̇ + K λ = γ (after :meth:`error_state`, whose inputs it reuses)."""
        self._from_kernel = False
        self._law(*self._inputs, tuple(dV_d.tolist()))
        return self.dV_ref

    def _law(
        self,
        T: list[list[float]],
        V: list[float],
        T_d: tuple[float, ...],
        V_d: tuple[float, ...],
        F_body: list[float],
        dV_d: tuple[float, ...],
    ) -> tuple[float, float, float, float, float, float]:
        """The control law up to V̇_ref on Python floats (module docstring); returns V̇_ref and keeps
        every intermediate result for the properties above. T = rows of T (``T.tolist()``), T_d = the
        12 floats of :meth:`MotionReference.floats_from_reference`; V, V_d, F_body, V̇_d 6 floats each."""
        (a00, a01, a02, a03), (a10, a11, a12, a13), (a20, a21, a22, a23), _ = T
        b00, b01, b02, b10, b11, b12, b20, b21, b22, b03, b13, b23 = T_d
        # T̃ = T⁻¹ T_d:  R̃ = Rᵀ R_d,  p̃ = Rᵀ (p_d − p)
        t00 = a00 * b00 + a10 * b10 + a20 * b20
        t01 = a00 * b01 + a10 * b11 + a20 * b21
        t02 = a00 * b02 + a10 * b12 + a20 * b22
        t10 = a01 * b00 + a11 * b10 + a21 * b20
        t11 = a01 * b01 + a11 * b11 + a21 * b21
        t12 = a01 * b02 + a11 * b12 + a21 * b22
        t20 = a02 * b00 + a12 * b10 + a22 * b20
        t21 = a02 * b01 + a12 * b11 + a22 * b21
        t22 = a02 * b02 + a12 * b12 + a22 * b22
        e0, e1, e2 = b03 - a03, b13 - a13, b23 - a23
        p0 = a00 * e0 + a10 * e1 + a20 * e2
        p1 = a01 * e0 + a11 * e1 + a21 * e2
        p2 = a02 * e0 + a12 * e1 + a22 * e2
        self._Tt = (t00, t01, t02, t10, t11, t12, t20, t21, t22, p0, p1, p2)
        # λ = log T̃, with the series coefficients of θ = |φ|; they are even in θ, so they also serve
        # dexp_λ := lie.dexp(−λ)
        lam, co = se3_log_floats(t00, t01, t02, t10, t11, t12, t20, t21, t22, p0, p1, p2)
        l0, l1, l2, l3, l4, l5 = lam
        jac = self._jac.set(-l0, -l1, -l2, -l3, -l4, -l5, co)
        # Ad_T̃ V_d = [R̃ v_d + p̃ × (R̃ ω_d); R̃ ω_d] =: [a; b];  Ṽ = Ad_T̃ V_d − V =: [v; ω]
        v0, v1, v2, w0, w1, w2 = V_d
        a0 = t00 * v0 + t01 * v1 + t02 * v2
        a1 = t10 * v0 + t11 * v1 + t12 * v2
        a2 = t20 * v0 + t21 * v1 + t22 * v2
        u0, u1, u2, u3, u4, u5 = V
        rot_d = w0 or w1 or w2  # ω_d ≠ 0 (else b = 0 exactly: fixed-orientation planners)
        if rot_d:
            b0 = t00 * w0 + t01 * w1 + t02 * w2
            b1 = t10 * w0 + t11 * w1 + t12 * w2
            b2 = t20 * w0 + t21 * w1 + t22 * w2
            a0 += p1 * b2 - p2 * b1
            a1 += p2 * b0 - p0 * b2
            a2 += p0 * b1 - p1 * b0
            v0, v1, v2, w0, w1, w2 = verr = (a0 - u0, a1 - u1, a2 - u2, b0 - u3, b1 - u4, b2 - u5)
        else:
            v0, v1, v2, w0, w1, w2 = verr = (a0 - u0, a1 - u1, a2 - u2, -u3, -u4, -u5)
        # F̃ = Ad_T̃⁻ᵀ F_d − F_body,  Ad_T̃⁻ᵀ [f; n] = [R̃ f; p̃ × (R̃ f) + R̃ n]
        f0, f1, f2, n0, n1, n2 = F_body
        if self.has_Fd:
            g0, g1, g2, h0, h1, h2 = self._F_d
            c0 = t00 * g0 + t01 * g1 + t02 * g2
            c1 = t10 * g0 + t11 * g1 + t12 * g2
            c2 = t20 * g0 + t21 * g1 + t22 * g2
            ferr = (
                c0 - f0,
                c1 - f1,
                c2 - f2,
                t00 * h0 + t01 * h1 + t02 * h2 + (p1 * c2 - p2 * c1) - n0,
                t10 * h0 + t11 * h1 + t12 * h2 + (p2 * c0 - p0 * c2) - n1,
                t20 * h0 + t21 * h1 + t22 * h2 + (p0 * c1 - p1 * c0) - n2,
            )
        else:
            ferr = (-f0, -f1, -f2, -n0, -n1, -n2)
        # λ̇ = dexp⁻¹_λ Ṽ (block back-substitution of the closed-form inverse) and γ = dexp_λᵀ F̃, in
        # one call (tests/paper/test_se3_lie.py checks them against lie.dexp_inv / lie.dexp and finite
        # differences)
        lamd, gam = jac.solve_tmul(verr, ferr)
        # λ̈* = A⁻¹γ − A⁻¹D λ̇ − A⁻¹K λ
        if self._diag_gains is not None:
            i0, i1, i2, i3, i4, i5, d0, d1, d2, d3, d4, d5, k0, k1, k2, k3, k4, k5 = self._diag_gains
            g0, g1, g2, g3, g4, g5 = gam
            s0, s1, s2, s3, s4, s5 = lamd
            l2 = (
                i0 * g0 - d0 * s0 - k0 * l0,
                i1 * g1 - d1 * s1 - k1 * l1,
                i2 * g2 - d2 * s2 - k2 * l2,
                i3 * g3 - d3 * s3 - k3 * l3,
                i4 * g4 - d4 * s4 - k4 * l4,
                i5 * g5 - d5 * s5 - k5 * l5,
            )
        else:  # full matrices: one product [A⁻¹, −A⁻¹D, −A⁻¹K] [γ; λ̇; λ]
            buf = self._gdl
            buf[:] = gam + lamd + lam
            l2 = self._G.dot(buf).tolist()
        # dṼ* = dexp_λ λ̈* + (d/dt dexp_λ) λ̇, where d/dt dexp_λ = lie's dexp_dot at (−λ, −λ̇); dexp_dot is
        # linear in the rate, so (d/dt dexp_λ) λ̇ = −dot_mul(λ̇, λ̇) (exactly: every term flips sign), and
        # dṼ* = jac.mul(λ̈*) − jac.dot_mul(λ̇, λ̇) = jac.mul_minus_dot(λ̈*, λ̇)
        m0, m1, m2, m3, m4, m5 = jac.mul_minus_dot(l2, lamd)
        # V̇_ref = Ad_T̃ V̇_d + ad_Ṽ (Ad_T̃ V_d) − dṼ*,  Ad_T̃ [ȧ; α] = [R̃ ȧ + p̃ × (R̃ α); R̃ α] =: [o; c]
        e0, e1, e2, f0, f1, f2 = dV_d
        o0 = t00 * e0 + t01 * e1 + t02 * e2
        o1 = t10 * e0 + t11 * e1 + t12 * e2
        o2 = t20 * e0 + t21 * e1 + t22 * e2
        if f0 or f1 or f2:  # α_d ≠ 0 (else c = 0 exactly)
            c0 = t00 * f0 + t01 * f1 + t02 * f2
            c1 = t10 * f0 + t11 * f1 + t12 * f2
            c2 = t20 * f0 + t21 * f1 + t22 * f2
            o0 += p1 * c2 - p2 * c1
            o1 += p2 * c0 - p0 * c2
            o2 += p0 * c1 - p1 * c0
            c0, c1, c2 = c0 - m3, c1 - m4, c2 - m5
        else:
            c0, c1, c2 = -m3, -m4, -m5
        # ad_Ṽ [a; b] = [ω × a + v × b; ω × b]  (b = 0 unless rot_d)
        if rot_d:
            out = (
                (o0 - m0) + (w1 * a2 - w2 * a1 + v1 * b2 - v2 * b1),
                (o1 - m1) + (w2 * a0 - w0 * a2 + v2 * b0 - v0 * b2),
                (o2 - m2) + (w0 * a1 - w1 * a0 + v0 * b1 - v1 * b0),
                c0 + (w1 * b2 - w2 * b1),
                c1 + (w2 * b0 - w0 * b2),
                c2 + (w0 * b1 - w1 * b0),
            )
        else:
            out = (
                (o0 - m0) + (w1 * a2 - w2 * a1),
                (o1 - m1) + (w2 * a0 - w0 * a2),
                (o2 - m2) + (w0 * a1 - w1 * a0),
                c0,
                c1,
                c2,
            )
        self._lam_t, self._lamd_t, self._l2_t, self._gamma_t, self._dVref_t = lam, lamd, l2, gam, out
        self._Verr_t, self._Ferr_t, self._V_t = verr, ferr, V
        return out

    # ------------------------------------------------------------------------------------ compute

    def reset(self, snap: Snapshot, ref: Reference) -> None:
        self.ff.reset()
        self.force_filter.reset()

    def summary(self) -> dict:
        return self.kernel_summary()

    def _bind(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        """Bind the compiled kernel to this run's arrays (they never move during a run). The joint-space
        results q̇, y, M⁻¹J_bᵀ that :attr:`q_ddot_ref` reads become views of the kernel's results buffer."""
        c, ff, mref, nv = self.config, self.ff, self.mref, self.plant.nv
        kmod = self._kmod
        res = np.zeros(kmod.RESULTS_HEAD + 7 * nv)
        args = dict(
            T_world_ee=snap.T_world_ee,
            twist_ee_body=snap.twist_ee_body,
            J_ee_body=snap.J_ee_body,
            dJdq_ee_body=snap.dJdq_ee_body,
            M=snap.M,
            Minv=snap.Minv,
            h=snap.h,
            v=snap.v,
            ref_flat=ref.flat,
            des_T=mref.T,
            des_V=mref.V,
            des_dV=mref.dV,
            ext_body=wrench.ext_body if c.use_force_feedback else self._zero6,
            tau=cmd.tau,
            diag=cmd.diag,
            results=res,
            G=self._G,
            diag_gains=self._diag_gains,
            F_d=self._F_d,
            has_Fd=self.has_Fd,
            d_null=float(c.d_null),
            passthrough=mref.passthrough,
            **ff.kernel_args(snap.g),
        )
        self._kernel = kmod.SE3Kernel(**args)
        self._kernel_arrays = self._arrays_of(args, snap, ref, wrench)
        self._kv = kv = {name: res[o : o + n] for name, (o, n) in kmod.RESULTS_LAYOUT.items()}
        head = kmod.RESULTS_HEAD
        self._v = res[head : head + nv]
        self._y = kv["y"]
        self._MinvJt = res[head + nv :].reshape(nv, 6)
        self._desired = None  # desired_motion() reads the kernel's T_d, V_d, V̇_d
        self._bound = (snap, ref, wrench, cmd, c)

    def _guard_values(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> kernels.Values:
        """τ, λ, λ̇, γ and V̇_ref for the kernel guard (sim/kernels.py)."""
        return [
            ("tau", cmd.tau.copy()),
            ("lam", self.lam),
            ("lam_dot", self.lam_dot),
            ("gamma", self.gamma),
            ("dV_ref", self.dV_ref),
        ]

    def _guard_bounds(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> kernels.Bounds:
        """S and κ of τ, λ, λ̇, γ and V̇_ref.

        The law's quantities are sums of products of dexp_λ's entries (each at most (1 + |λ|)² in size)
        with λ, λ̇, γ, λ̈*, Ṽ, F̃ and the desired motion, and of the gain matrix [A⁻¹, −A⁻¹D, −A⁻¹K] with
        [γ; λ̇; λ]: S = (1 + max |λ|)² max(1, ‖G‖∞) times the largest of those magnitudes and of 1 + |p| + |p_d|
        (T̃ and λ carry round-off of the poses' own size however small the error is), κ = 1.
        τ = J_bᵀ(y − F_body) − d_null M q̇ + h + τ_ff passes through the solve Λ_b⁻¹ y = rhs: the two-part bound
        GUARD_C · n ε (κ S_solve + S_plain) (sim.kernels.split_bound) with κ = κ(Λ_b⁻¹), S_solve = 3 max |J_b|ᵀ|y|,
        S_plain = 3 (max(|J_b|ᵀ|F_body| + d_null |M||q̇| + |h|) + ‖J_bᵀΛ_b‖∞ S_law) + max |τ_ff| (the feedforward's
        slope ≤ 2; the ‖J_bᵀΛ_b‖∞ S_law term carries V̇_ref's round-off into y)."""
        c = self.config
        a = np.abs
        lam = self.lam
        T_d, V_d, dV_d = self.desired_motion()
        grow = (1.0 + kernels.magnitude(lam)) ** 2 * max(1.0, float(a(self._G).sum(axis=1).max()))
        # T̃ = T⁻¹T_d and λ = log T̃ carry round-off of the poses' own size (unit rotation entries, the
        # positions), however small the error: that floor enters every later quantity through the gains
        floor = 1.0 + kernels.magnitude(snap.p_ee_in_world) + kernels.magnitude(T_d[:3, 3])
        s_law = grow * kernels.magnitude(
            lam, self.lam_dot, self.gamma, self.lam_ddot, self.dV_ref, self.V_err, self.F_err, V_d, dV_d, floor
        )
        Jb = snap.J_ee_body
        F = wrench.ext_body if c.use_force_feedback else self._zero6
        Li = Jb @ snap.Minv @ Jb.T
        # y = Λ_b (V̇_ref − J̇_b q̇ + d_null V): the solve's own error (amplified by κ) is of size |y|; V̇_ref's
        # round-off (of size s_law) reaches y through J_bᵀΛ_b without that amplification
        carried = s_law * float(a(Jb.T @ np.linalg.inv(Li)).sum(axis=1).max())
        s_solve = 3.0 * kernels.magnitude(a(Jb).T @ a(self._y))
        s_plain = 3.0 * (kernels.magnitude(a(Jb).T @ a(F) + c.d_null * (a(snap.M) @ a(snap.v)) + a(snap.h)) + carried)
        if self.ff.active:
            s_plain += kernels.magnitude(self.ff.out)
        return [kernels.split_bound(s_solve, kernels.condition(Li), s_plain)] + [(s_law, 1.0)] * 4

    def use_python(self) -> None:
        super().use_python()
        self._from_kernel = False

    compute = Controller.compute_with_kernel

    def _compute_kernel(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> bool:
        if not self._kernel_bound_to(snap, ref, wrench, cmd):
            self._bind(snap, ref, wrench, cmd)
        if self._echo is not None:
            self._echo.last = ref
        mref = self.mref
        if mref.passthrough:  # SE(3) planners write T_d, V_d, V̇_d into the arrays the kernel reads
            mref._motion_into(snap.t, mref.T, mref.V, mref.dV)
        if self._kernel.step() == 0:
            self._from_kernel = True
            return True
        # Λ_b⁻¹ not positive definite (or a math domain error): nothing was written, the Python path
        # takes the step; the next step rebinds (restoring the result views the Python path replaced)
        self.kernel_fallbacks += 1
        self._bound = ()
        return False

    def _compute_python(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        """The reference implementation of :meth:`compute` (module docstring)."""
        c = self.config
        self._from_kernel = False
        if self._echo is not None:
            self._echo.last = ref
        # the loop hands over the planner's world reference at snap.t: convert it, don't re-evaluate
        Td, Vd, dVd = self._desired = self.mref.floats_from_reference(ref, snap.t)
        F_body = wrench.ext_body if c.use_force_feedback else self._zero6
        if self.force_filter.active and c.use_force_feedback:  # F̄ (controllers/force_control.py)
            self.force_filter.update(F_body.tolist())
            F_body = self.force_filter.out
        r0, r1, r2, r3, r4, r5 = self._law(
            snap.T_world_ee.tolist(), snap.twist_ee_body.tolist(), Td, Vd, F_body.tolist(), dVd
        )

        # τ = J_bᵀ (y − F_body) − d_null M q̇ + h + τ_ff,  Λ_b⁻¹ y = V̇_ref − J̇_b q̇ + d_null V
        # (ndarray.dot: the same BLAS products as np.matmul, with a fraction of its call overhead)
        Jb = snap.J_ee_body
        JbT = Jb.T
        self._MinvJt = MinvJt = snap.Minv.dot(JbT)  # M⁻¹ J_bᵀ (nv, 6)
        Li = Jb.dot(MinvJt)  # Λ_b⁻¹ = J_b M⁻¹ J_bᵀ
        dn = c.d_null
        j0, j1, j2, j3, j4, j5 = snap.dJdq_ee_body.tolist()
        rhs = self._rhs
        if dn != 0.0:
            u0, u1, u2, u3, u4, u5 = self._V_t
            rhs[:] = (
                r0 - j0 + dn * u0,
                r1 - j1 + dn * u1,
                r2 - j2 + dn * u2,
                r3 - j3 + dn * u3,
                r4 - j4 + dn * u4,
                r5 - j5 + dn * u5,
            )
        else:
            rhs[:] = (r0 - j0, r1 - j1, r2 - j2, r3 - j3, r4 - j4, r5 - j5)
        # dposv(a, b, lower=0, overwrite_a=0, overwrite_b=1): solved in place (y is rhs, no copy)
        _, y, info = _dposv(Li, rhs, 0, 0, 1)  # Λ_b⁻¹ is SPD away from singularities
        if info != 0:  # dposv leaves b untouched when the factorisation fails
            y = np.linalg.solve(Li, rhs)
        self._y = y
        self._v[:] = snap.v  # for q_ddot_ref
        # τ = h, then τ ← −d_null M q̇ + τ and τ ← J_bᵀ (y − F_body) + τ, each one in-place BLAS dgemv
        # (alpha, a, x, beta, y, offx, incx, offy, incy, trans, overwrite_y) on a Fortran-ordered view:
        # Mᵀ = M (the snapshot's M is exactly symmetric) and J_bᵀ
        tau = cmd.tau
        tau[:] = snap.h
        if dn != 0.0:
            tau = _dgemv(-dn, snap.M.T, snap.v, 1.0, tau, 0, 1, 0, 1, 0, 1)
        tau = _dgemv(1.0, JbT, y - F_body, 1.0, tau, 0, 1, 0, 1, 0, 1)
        if self.ff.active:
            f0, f1, f2 = F_body[0], F_body[1], F_body[2]
            tau += self.ff.compute(snap.v, tau, snap.g, math.sqrt(f0 * f0 + f1 * f1 + f2 * f2))
        if tau is not cmd.tau:  # dgemv worked on a copy (cmd.tau not a contiguous float64 array)
            cmd.tau[:] = tau
        cmd.diag[:] = self._lam_t
