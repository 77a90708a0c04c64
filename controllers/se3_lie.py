r"""SE(3) Lie-group impedance (Kim, Sung, Choi, Park, Chung, IEEE T-RO 41 (2025) §III-A; docs/theory/se3_lie.md).

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
``d/dt dexp_λ = lie.dexp_dot(−λ, −λ̇)``. With that, the formulas of docs/theory/se3_lie.md hold as written:
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

Implementation: :meth:`SE3LieController.law` is the equations above written once in numpy, one line
per equation (sim/lie.py: Pinocchio's exp6/log6 and our dexp, dexp⁻¹ and d/dt dexp), and
:meth:`SE3LieController._compute_python` adds the joint-space part with one linear solve. This is the
reference: tests/paper/test_se3_lie.py checks it against the equations of docs/theory/se3_lie.md.

Compiled kernel: when ``controllers._se3_kernel`` is built (sim/kernels.py), :meth:`SE3LieController.compute`
binds it once to the run's arrays (snapshot, reference or pass-through motion, wrench, command and a
results buffer) and each step is one call with no arguments (≈1 µs). The C code evaluates the same
equations with its own float schedule (rank-one forms of dexp, no 6×6 matrix), so it agrees with this
reference to round-off, within the bound :meth:`SE3LieController._guard_bounds` states (the run-time
kernel guard checks it, sim/kernels.py). This Python code runs when the kernel is missing, when
``DOCKBENCH_KERNELS=python``, and for a step where Λ_b⁻¹ is not positive definite. The public results
(``lam``, …, ``q_ddot_ref``, :meth:`desired_motion`) read whichever path ran the last step;
``summary()["kernel"]`` names the path. tests/test_se3_kernel.py checks the two paths agree.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from dockbench.controllers.base import CONTROLLERS, Command, Controller, PlantInfo
from dockbench.controllers.feedforward import DissipationFeedforward, velocity_scale_param
from dockbench.controllers.force_control import ForceFilter, force_filter_param, state_values
from dockbench.controllers.linalg import solve_spd
from dockbench.planners.base import Planner, Reference
from dockbench.planners.motion_reference import MotionReference
from dockbench.sim import kernels, lie
from dockbench.sim.config import param
from dockbench.sim.dynamics import Snapshot
from dockbench.sim.errors import ScenarioError
from dockbench.sim.wrench import WrenchState
from scipy.linalg.lapack import dgesv

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
        le=1e4,
        length=6,
        doc="diagonal of the error-dynamics inertia A",
    )
    d_diag: Vec6 = param(
        (80.0, 80.0, 80.0, 10.0, 10.0, 10.0),
        unit="N·s/m | N·m·s/rad",
        ge=0.0,
        le=1e6,
        length=6,
        doc="diagonal of the damping D",
    )
    k_diag: Vec6 = param(
        (50.0, 50.0, 50.0, 25.0, 25.0, 25.0),
        unit="N/m | N·m/rad",
        gt=0.0,
        le=1e6,
        length=6,
        doc="diagonal of the stiffness K",
    )
    a_matrix: Mat6 | None = param(None, length=6, ge=-1e4, le=1e4, doc="full 6×6 A (rows), overrides a_diag; SPD")
    d_matrix: Mat6 | None = param(
        None, length=6, ge=-1e6, le=1e6, doc="full 6×6 D (rows), overrides d_diag; symmetric PSD"
    )
    k_matrix: Mat6 | None = param(None, length=6, ge=-1e6, le=1e6, doc="full 6×6 K (rows), overrides k_diag; SPD")
    wrench_desired: Vec6 = param(
        (0.0,) * 6, unit="N | N·m", length=6, ge=-1e4, le=1e4, doc="desired wrench F_d [f; n] in the desired frame"
    )
    d_null: float = param(10.0, unit="1/s", ge=0.0, le=1e4, doc="null-space joint damping (acceleration level)")
    feedforward: Literal["torque", "velocity", "hybrid", "off"] = param(
        "torque",
        doc="joint friction/damping feedforward mode (docs/theory/khatib.md §4; hybrid: torque keying until the "
        "first contact, velocity keying from then on)",
    )
    feedforward_velocity_scale: float = velocity_scale_param()
    use_force_feedback: bool = param(True, doc="use F_body in F̃ and cancel it with −J_bᵀF_body")
    force_filter: float = force_filter_param("F_body")

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


def _solve_lu(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x with A x = b by LU with partial pivoting (LAPACK ``dgesv`` in one call: ``np.linalg.solve``'s method
    without its wrapper's cost); a singular A raises ``np.linalg.LinAlgError`` as ``np.linalg.solve`` does."""
    _, _, x, info = dgesv(A, b)
    if info != 0:
        raise np.linalg.LinAlgError(f"singular matrix (LAPACK dgesv info {info})")
    return x


#: the (6,) results of the law and of the joint-space solve
_LAW_RESULTS = ("lam", "V_err", "lam_dot", "F_err", "gamma", "lam_ddot", "dV_ref", "y")


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
    # the Python path's results and the flag that says whose results the public properties read
    _guard_attrs = ("_py", "_from_kernel")
    diag_units: ClassVar[dict[str, str]] = {"lambda_vx": "m", "lambda_vy": "m", "lambda_vz": "m",
                                            "lambda_wx": "rad", "lambda_wy": "rad", "lambda_wz": "rad"}

    def __init__(self, config: SE3LieConfig, plant: PlantInfo, planner: Planner | None = None):
        super().__init__(config, plant, planner)
        self._derive_gains(config)
        self.F_d = np.array(config.wrench_desired, dtype=float)
        self.has_Fd = bool(np.any(self.F_d != 0.0))
        self._F_d = tuple(self.F_d.tolist())
        self._echo = _EchoPlanner() if planner is None else None
        self.mref = MotionReference(planner if planner is not None else self._echo)  # type: ignore[arg-type]
        self.ff = DissipationFeedforward(
            plant.dof_frictionloss, plant.dof_damping, config.feedforward, period=plant.control_period,
            velocity_scale=config.feedforward_velocity_scale,
        )
        nv = plant.nv
        self._zero6 = np.zeros(6)
        #: the results of the last Python step (law() and the joint space), by name
        self._py: dict[str, np.ndarray] = {n: np.zeros(6) for n in _LAW_RESULTS}
        self._py.update(T_err=np.eye(4), q_ddot_ref=np.zeros(nv), T_d=np.eye(4), V_d=np.zeros(6), dV_d=np.zeros(6))
        self._inputs: tuple = ()  # the arguments of the last error_state() (for reference_acceleration)
        # the force filter (controllers/force_control.py; its state array is shared with the kernel) and the
        # compiled kernel (None: the Python path), bound to the run's arrays on the first compute()
        self.force_filter = ForceFilter(6, config.force_filter, plant.control_period)
        self._kmod = kernels.load(self.kernel_module)
        self._kernel = None
        self._kv: dict[str, np.ndarray] = {}  # views of the kernel's results buffer, by name
        self._k_v = self._k_y = self._k_MinvJt = self._zero6  # the kernel's q̇, y and M⁻¹J_bᵀ views
        self._from_kernel = False  # the results of the last step are the kernel's

    # ------------------------------------------------------------------------------------ results
    # (6,) / (4, 4) / (nv,) arrays of the last step (copies), from whichever path ran it

    def _result(self, name: str) -> np.ndarray:
        return self._kv[name].copy() if self._from_kernel else self._py[name].copy()

    @property
    def T_err(self) -> np.ndarray:
        """T̃ = T⁻¹ T_d (4, 4)."""
        if not self._from_kernel:
            return self._py["T_err"].copy()
        t = self._kv["T_err"]  # rows of R̃, then p̃
        T = np.eye(4)
        T[:3, :3] = t[:9].reshape(3, 3)
        T[:3, 3] = t[9:]
        return T

    @property
    def lam(self) -> np.ndarray:
        """λ = log T̃ (6,) [m, rad]."""
        return self._result("lam")

    @property
    def lam_dot(self) -> np.ndarray:
        """λ̇ (6,)."""
        return self._result("lam_dot")

    @property
    def lam_ddot(self) -> np.ndarray:
        """λ̈* = A⁻¹ (γ − D λ̇ − K λ) (6,)."""
        return self._result("lam_ddot")

    @property
    def V_err(self) -> np.ndarray:
        """Ṽ = Ad_T̃ V_d − V (6,) [m/s, rad/s]."""
        return self._result("V_err")

    @property
    def F_err(self) -> np.ndarray:
        """F̃ = Ad_T̃⁻ᵀ F_d − F_body (6,) [N, N·m]."""
        return self._result("F_err")

    @property
    def gamma(self) -> np.ndarray:
        """γ = dexp_λᵀ F̃ (6,)."""
        return self._result("gamma")

    @property
    def dV_ref(self) -> np.ndarray:
        """V̇_ref (6,) [m/s², rad/s²]."""
        return self._result("dV_ref")

    @property
    def q_ddot_ref(self) -> np.ndarray:
        """q̈_ref = M⁻¹J_bᵀ y − d_null q̇ (nv,) [rad/s²] (after :meth:`compute`)."""
        if self._from_kernel:
            return self._k_MinvJt.dot(self._k_y) - self._k_v * self.config.d_null
        return self._py["q_ddot_ref"].copy()

    def desired_motion(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(T_d (4, 4), V_d (6,), V̇_d (6,)) the last :meth:`compute` used (desired body frame)."""
        if not self._from_kernel:
            return self._py["T_d"].copy(), self._py["V_d"].copy(), self._py["dV_d"].copy()
        kv = self._kv
        T = np.eye(4)
        T[:3, :3] = kv["T_d"][:9].reshape(3, 3)
        T[:3, 3] = kv["T_d"][9:]
        return T, kv["V_d"].copy(), kv["dV_d"].copy()

    # ------------------------------------------------------------------------------------ the law

    def law(
        self, T: np.ndarray, V: np.ndarray, T_d: np.ndarray, V_d: np.ndarray, dV_d: np.ndarray, F_body: np.ndarray
    ) -> dict[str, np.ndarray]:
        """The control law up to V̇_ref (module docstring), for the EE pose T (4, 4), body twist V, desired
        body motion (T_d, V_d, V̇_d) and body wrench F_body (environment on tool, EE axes); returns
        T̃, λ, Ṽ, λ̇, F̃, γ, λ̈*, V̇_ref by name. Ṽ is the LEFT twist of T̃ = exp(λ), so dexp_λ := lie.dexp(−λ)
        (module docstring)."""
        T_err = lie.se3_inv(T) @ T_d  # T̃ = T⁻¹ T_d
        lam = lie.se3_log(T_err)  # λ = log T̃
        Ad_err = lie.Ad(T_err)
        V_d_err = Ad_err @ V_d  # Ad_T̃ V_d
        V_err = V_d_err - V  # Ṽ = Ad_T̃ V_d − V
        k = lie.coefficients(float(lam[3:] @ lam[3:]))  # α(θ), β(θ), …: even in θ, so they serve −λ
        P = lie.ad_powers(-lam)  # ad_{−λ}, its square, cube and fourth power: dexp_λ's and its rate's
        J = lie.dexp(-lam, k, P)  # dexp_λ
        lam_dot = _solve_lu(J, V_err)  # λ̇ = dexp_λ⁻¹ Ṽ
        # F̃ = Ad_T̃⁻ᵀ F_d − F_body (F_d = 0 for most runs: its transform is skipped, −F_body is exact)
        F_err = lie.Ad_inv(T_err).T @ self.F_d - F_body if self.has_Fd else -F_body
        gamma = J.T @ F_err  # γ = dexp_λᵀ F̃
        lam_ddot = self.Ainv @ gamma - self.AinvD @ lam_dot - self.AinvK @ lam  # λ̈* = A⁻¹(γ − D λ̇ − K λ)
        J_dot = lie.dexp_dot(-lam, -lam_dot, k, P)  # d/dt dexp_λ
        # V̇_ref = Ad_T̃ V̇_d + ad_Ṽ (Ad_T̃ V_d) − dexp_λ λ̈* − (d/dt dexp_λ) λ̇
        dV_ref = Ad_err @ dV_d + lie.ad(V_err) @ V_d_err - (J @ lam_ddot + J_dot @ lam_dot)
        return {
            "T_err": T_err, "lam": lam, "V_err": V_err, "lam_dot": lam_dot, "F_err": F_err, "gamma": gamma,
            "lam_ddot": lam_ddot, "dV_ref": dV_ref,
        }

    def error_state(self, T: np.ndarray, V: np.ndarray, T_d: np.ndarray, V_d: np.ndarray, F_body: np.ndarray) -> None:
        """:meth:`law` for pose T, body twist V, desired (T_d, V_d) and body wrench F_body, with V̇_d = 0;
        its results become the public ones. Public for the equation-level tests."""
        self._from_kernel = False
        self._inputs = (np.array(T, dtype=float), np.array(V, dtype=float), np.array(T_d, dtype=float),
                        np.array(V_d, dtype=float), np.array(F_body, dtype=float))
        self._py.update(self.law(*self._inputs[:4], self._zero6, self._inputs[4]))

    def reference_acceleration(self, dV_d: np.ndarray) -> np.ndarray:
        """V̇_ref (6,) realising A λ̈ + D λ̇ + K λ = γ (after :meth:`error_state`, whose inputs it reuses)."""
        self._from_kernel = False
        T, V, T_d, V_d, F_body = self._inputs
        self._py.update(self.law(T, V, T_d, V_d, np.array(dV_d, dtype=float), F_body))
        return self.dV_ref

    # ------------------------------------------------------------------------------------ compute

    def reset(self, snap: Snapshot, ref: Reference) -> None:
        self.ff.reset()
        self.force_filter.reset()

    def summary(self) -> dict:
        return self.kernel_summary()

    #: the config the cached gains mapping was built from, and the mapping (:meth:`_config_gains`)
    _gains_of: SE3LieConfig | None = None
    _gains: dict | None = None

    def _config_gains(self) -> dict:
        """The law's gains by name, as the compiled kernel reads them (``SE3Gains`` in controllers/_se3_kernel.c;
        cached per config object): whether A⁻¹, A⁻¹D, A⁻¹K are all diagonal, their diagonals, F_d and whether
        it is non-zero, d_null. The full G = [A⁻¹, −A⁻¹D, −A⁻¹K] is bound as an array (``G``)."""
        c = self.config
        if c is not self._gains_of or self._gains is None:
            self._gains = {
                "diagonal": self._diag_gains is not None,
                "a_inv": np.diagonal(self.Ainv).tolist(), "a_inv_d": np.diagonal(self.AinvD).tolist(),
                "a_inv_k": np.diagonal(self.AinvK).tolist(),
                "wrench_desired": self._F_d, "has_wrench_desired": bool(self.has_Fd), "d_null": float(c.d_null),
            }
            self._gains_of = c
        return self._gains

    @property
    def n_gain_scales(self) -> int:
        """How many stiffness (and damping) scales :meth:`set_gain_scales` takes: 6 (the diagonals), or 0 when
        the config gives a full ``k_matrix`` or ``d_matrix`` (no per-axis scale is defined then)."""
        c = self.config
        return 0 if (c.k_matrix is not None or c.d_matrix is not None) else 6

    #: the config before the first set_gain_scales (the scales are relative to it)
    _unscaled_config: SE3LieConfig | None = None

    def set_gain_scales(self, k_scale: np.ndarray, d_scale: np.ndarray) -> None:
        """Scale the diagonals of K and D of the config the law was built with (``k_scale``, ``d_scale``: 6
        positive floats each; K' = diag(k) K, D' = diag(d) D). The law's config is replaced and what the law
        derives from it (A, D, K, A⁻¹, A⁻¹D, A⁻¹K, G) recomputed, so the Python path and the compiled kernel
        (which rebinds to the new config and its new G on the next step) both use the new gains."""
        if self.n_gain_scales == 0:
            raise ValueError("se3_lie: set_gain_scales needs diagonal stiffness and damping (k_diag, d_diag); "
                             "this config gives a full k_matrix or d_matrix")
        k_scale, d_scale = self._gain_scales(k_scale, d_scale)
        base = self._unscaled_config
        if base is None:
            base = self._unscaled_config = self.config
        cfg = dataclasses.replace(
            base, k_diag=tuple(float(x) for x in np.array(base.k_diag) * k_scale),
            d_diag=tuple(float(x) for x in np.array(base.d_diag) * d_scale),
        )
        self._derive_gains(cfg)
        self.config = cfg

    def axial_stiffness(self, axis: np.ndarray, R_world_ee: np.ndarray) -> float | None:
        """K's translational block acts on λ_v ≈ Rᵀ(x_d − x) (EE axes): bᵀ K_vv b, b = Rᵀ a (the SE(3) law has no
        force set-point)."""
        b = R_world_ee.T @ axis
        return float(b @ self.K[:3, :3] @ b)

    def stiffness_diagonal(self) -> np.ndarray:
        """The diagonal of K (a copy): translational (λ_v, EE axes) [N/m] ×3, rotational [N·m/rad] ×3."""
        return np.diagonal(self.K).astype(float)

    def _derive_gains(self, config: SE3LieConfig) -> None:
        """A, D, K of ``config`` and what the law computes with: A⁻¹, A⁻¹D, A⁻¹K; for the kernel, their
        diagonals as 18 floats (A⁻¹ first) when all three are diagonal (else None), and always the (6, 18)
        matrix G = [A⁻¹, −A⁻¹D, −A⁻¹K]."""
        A, D, K = config.matrices()
        self.A, self.D, self.K = A, D, K
        self.Ainv = np.linalg.inv(A)
        self.AinvD = self.Ainv @ D
        self.AinvK = self.Ainv @ K
        gains = (self.Ainv, self.AinvD, self.AinvK)
        self._diag_gains: tuple[float, ...] | None = (
            tuple(v for Mx in gains for v in np.diagonal(Mx).tolist())
            if all(np.count_nonzero(Mx - np.diag(np.diagonal(Mx))) == 0 for Mx in gains) else None
        )
        self._G = np.hstack((self.Ainv, -self.AinvD, -self.AinvK))

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
            gains=self._config_gains(),
            passthrough=mref.passthrough,
            **ff.kernel_args(snap.g),
            **self.force_filter.kernel_args(),
        )
        args["filt_on"] = bool(args["filt_on"] and c.use_force_feedback)  # the filter runs on the law's force only
        self._kernel = kmod.SE3Kernel(**args)
        self._kernel_arrays_of = (args, (snap, ref, wrench))  # derived when the guard needs it
        self._kv = kv = {name: res[o : o + n] for name, (o, n) in kmod.RESULTS_LAYOUT.items()}
        head = kmod.RESULTS_HEAD
        self._k_v = res[head : head + nv]
        self._k_y = kv["y"]
        self._k_MinvJt = res[head + nv :].reshape(nv, 6)
        self._bound = (snap, ref, wrench, cmd, c)

    def _guard_values(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> kernels.Values:
        """τ, λ, λ̇, γ, V̇_ref and the force filter's and hybrid feedforward's state
        (:func:`controllers.force_control.state_values`) for the kernel guard (sim/kernels.py)."""
        return [
            ("tau", cmd.tau.copy()),
            ("lam", self.lam),
            ("lam_dot", self.lam_dot),
            ("gamma", self.gamma),
            ("dV_ref", self.dV_ref),
            ("force options state", state_values(self.force_filter, None, self.ff)),
        ]

    def _guard_bounds(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> kernels.Bounds:
        """S and κ of τ, λ, λ̇, γ, V̇_ref and the force options' state.

        The law's quantities are sums of products of dexp_λ's entries (each at most (1 + |λ|)² in size)
        with λ, λ̇, γ, λ̈*, Ṽ, F̃ and the desired motion, and of the gain matrix [A⁻¹, −A⁻¹D, −A⁻¹K] with
        [γ; λ̇; λ]: S = (1 + max |λ|)² max(1, ‖G‖∞) times the largest of those magnitudes and of 1 + |p| + |p_d|
        (T̃ and λ carry round-off of the poses' own size however small the error is), κ = 1.
        τ = J_bᵀ(y − F_body) − d_null M q̇ + h + τ_ff passes through the solve Λ_b⁻¹ y = rhs: the two-part bound
        GUARD_C · n ε (κ S_solve + S_plain) (sim.kernels.split_bound) with κ = κ(Λ_b⁻¹), S_solve = 3 max |J_b|ᵀ|y|,
        S_plain = 3 (max(|J_b|ᵀ|F_body| + d_null |M||q̇| + |h|) + ‖J_bᵀΛ_b‖∞ S_law) + max |τ_ff| (the feedforward's
        slope ≤ 2; the ‖J_bᵀΛ_b‖∞ S_law term carries V̇_ref's round-off into y); F_body is the law's force (the
        filtered one with ``force_filter``). The state is the same scalar operations on both sides (equal bit
        for bit): S = its largest value."""
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
        if self.force_filter.active and c.use_force_feedback:
            F = self.force_filter.out
        Li = Jb @ snap.Minv @ Jb.T
        # y = Λ_b (V̇_ref − J̇_b q̇ + d_null V): the solve's own error (amplified by κ) is of size |y|; V̇_ref's
        # round-off (of size s_law) reaches y through J_bᵀΛ_b without that amplification
        carried = s_law * kernels.inf_norm_times_inverse(Jb.T, Li)
        s_solve = 3.0 * kernels.magnitude(a(Jb).T @ a(self._py["y"]))
        s_plain = 3.0 * (kernels.magnitude(a(Jb).T @ a(F) + c.d_null * (a(snap.M) @ a(snap.v)) + a(snap.h)) + carried)
        if self.ff.active:
            s_plain += kernels.magnitude(self.ff.out)
        state = kernels.magnitude(state_values(self.force_filter, None, self.ff))
        return [kernels.split_bound(s_solve, kernels.condition(Li), s_plain)] + [(s_law, 1.0)] * 4 + [(state, 1.0)]

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
        mref = self.mref.update_from_reference(ref, snap.t)
        F_body = wrench.ext_body if c.use_force_feedback else self._zero6
        if self.force_filter.active and c.use_force_feedback:  # F̄ (controllers/force_control.py)
            self.force_filter.update(F_body.tolist())
            F_body = self.force_filter.out
        r = self.law(snap.T_world_ee, snap.twist_ee_body, mref.T, mref.V, mref.dV, F_body)
        # q̈_ref = J̄_b (V̇_ref − J̇_b q̇) − N D_null q̇ and τ = M q̈_ref + h − J_bᵀ F_body, with one solve:
        # Λ_b⁻¹ y = V̇_ref − J̇_b q̇ + d_null V, q̈_ref = M⁻¹J_bᵀ y − d_null q̇, τ = J_bᵀ (y − F_body) − d_null M q̇ + h
        Jb, dn = snap.J_ee_body, c.d_null
        MinvJt = snap.Minv @ Jb.T
        y = solve_spd(Jb @ MinvJt, r["dV_ref"] - snap.dJdq_ee_body + dn * snap.twist_ee_body)
        tau = Jb.T @ (y - F_body) - dn * (snap.M @ snap.v) + snap.h
        if self.ff.active:
            tau += self.ff.compute(snap.v, tau, snap.g, lie.norm3(F_body[:3]))
        cmd.tau[:] = tau
        cmd.diag[:] = r["lam"]
        self._py.update(r, y=y, q_ddot_ref=MinvJt @ y - dn * snap.v, T_d=mref.T.copy(), V_d=mref.V.copy(),
                        dV_d=mref.dV.copy())
