"""Khatib task-space impedance (docs/theory/khatib.md), the classical baseline.

Jacobian J = J_ee_lwa (LOCAL_WORLD_ALIGNED at the EE origin, rows [v; ω]); Λ = (J M⁻¹ Jᵀ)⁻¹;
J̄ = M⁻¹ Jᵀ Λ; N = I − J̄ J.

* u_pos = ẍ_d + M_d⁻¹ ( F_ext − D_d (ẋ − ẋ_d) − K_d (x − x_d) + F_I )
* e_R = log(R_d Rᵀ) (world axes), e_ω = ω_d − ω;  u_rot = α_d + M_R⁻¹ (K_R e_R + D_R e_ω)
* τ = Jᵀ Λ (u − J̇ q̇) + h + τ_null + τ_ff,   τ_null = −Nᵀ D_null q̇
* F_I = k_i ∫ (x_d − x) dt, clamped to ±F_I,max per axis, active only when the model has
  frictionloss ≠ 0 (``friction_integral: auto``), frozen from the first step with |f_ext| > 1 N.

F_ext is the force part of ``WrenchState.ext_world`` (environment on tool, world axes).

Implementation: :meth:`KhatibController._compute_python` writes these equations in numpy, one line
each; the task and null-space terms share one solve, τ = Jᵀ y + h − D_null q̇ with
Λ⁻¹ y = u − J̇q̇ + D_null J M⁻¹ q̇ (Nᵀ q̇ = q̇ − Jᵀ Λ J M⁻¹ q̇), least squares where Λ⁻¹ is singular.
tests/test_optimised_equals_reference.py checks it against the textbook form with explicit Λ, J̄, N.

Compiled kernel: when ``controllers._khatib_kernel`` is built (sim/kernels.py), :meth:`KhatibController.compute`
binds it once to the run's arrays and each step is one call (≈10× cheaper); this Python code stays the
reference and runs when the kernel is missing, when ``DOCKBENCH_KERNELS=python``, and for a step where
Λ⁻¹ is singular (least squares). tests/test_kernels.py checks the two paths agree.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from dockbench.controllers.base import CONTROLLERS, Command, Controller, PlantInfo
from dockbench.controllers.feedforward import DissipationFeedforward, velocity_scale_param
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
from dockbench.planners.base import Planner, Reference
from dockbench.sim import kernels
from dockbench.sim.config import param
from dockbench.sim.dynamics import Snapshot
from dockbench.sim.lie import norm3, rotation_error_world
from dockbench.sim.wrench import WrenchState
from scipy.linalg.lapack import dposv

#: the compiled kernel's Cholesky pivots (squared) below this count as zero: Λ⁻¹ singular → it hands the step to
#: the Python path, which solves by least squares there [1/kg-ish units]
_CHOL_MIN_PIVOT = 1e-15


def _solve_task(Li: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """y with Λ⁻¹ y = rhs. Λ⁻¹ is SPD away from singularities: one Cholesky factorisation and solve (LAPACK
    ``dposv``, the compiled kernel's method, in one call). Where a Cholesky pivot (squared) falls below
    _CHOL_MIN_PIVOT or the factorisation fails (rank < 6), least squares instead."""
    L, y, info = dposv(Li, rhs, lower=1)
    if info == 0 and float(L.diagonal().min()) ** 2 >= _CHOL_MIN_PIVOT:
        return y
    return np.linalg.lstsq(Li, rhs, rcond=None)[0]


@dataclass(frozen=True)
class KhatibConfig:
    m: float = param(10.0, unit="kg", gt=0.0, le=1e4, doc="desired translational inertia M_d = m I")
    d: float = param(80.0, unit="N·s/m", ge=0.0, le=1e6, doc="translational damping D_d = d I")
    k: float = param(50.0, unit="N/m", ge=0.0, le=1e6, doc="translational stiffness K_d = k I")
    m_rot: float = param(1.0, unit="kg·m²", gt=0.0, le=1e3, doc="rotational inertia M_R = m_rot I")
    d_rot: float = param(10.0, unit="N·m·s/rad", ge=0.0, le=1e5, doc="rotational damping")
    k_rot: float = param(25.0, unit="N·m/rad", ge=0.0, le=1e5, doc="rotational stiffness")
    d_null: float = param(10.0, unit="N·m·s/rad", ge=0.0, le=1e4, doc="null-space joint damping D_null = d_null I")
    feedforward: Literal["torque", "velocity", "hybrid", "off"] = param(
        "torque",
        doc="joint friction/damping feedforward mode (docs/theory/khatib.md §4; hybrid: torque keying until the "
        "first contact, velocity keying from then on)",
    )
    feedforward_velocity_scale: float = velocity_scale_param()
    friction_integral: Literal["auto", "on", "off"] = param(
        "auto", doc="F_I = k_i ∫(x_d − x)dt; auto = on iff the model has frictionloss ≠ 0"
    )
    k_i: float = param(150.0, unit="N/(m·s)", ge=0.0, le=1e6, doc="friction integral gain")
    f_i_max: float = param(10.0, unit="N", ge=0.0, le=1e4, doc="clamp of each component of F_I")
    contact_threshold: float = param(1.0, unit="N", ge=0.0, le=1e4, doc="|f_ext| that freezes the integral")
    use_force_feedback: bool = param(True, doc="include F_ext in u_pos (false = pure impedance without F/T)")
    force_filter: float = force_filter_param("F_ext")
    force_setpoint: ForceSetpointConfig | None = force_setpoint_param()


@CONTROLLERS.register("khatib")
class KhatibController(Controller):
    """Operational-space impedance with null-space damping (see module docstring)."""

    Config = KhatibConfig
    diag_names = ("f_i_x", "f_i_y", "f_i_z", "frozen")
    kernel_module = "controllers._khatib_kernel"
    diag_units: ClassVar[dict[str, str]] = {
        "f_i_x": "N", "f_i_y": "N", "f_i_z": "N", "fs_force_desired": "N", "fs_force_axial": "N", "fs_integral": "N",
    }

    def __init__(self, config: KhatibConfig, plant: PlantInfo, planner: Planner | None = None):
        super().__init__(config, plant, planner)
        self.ff = DissipationFeedforward(
            plant.dof_frictionloss, plant.dof_damping, config.feedforward, period=plant.control_period,
            velocity_scale=config.feedforward_velocity_scale,
        )
        if config.friction_integral == "auto":
            self.use_integral = bool(np.any(plant.dof_frictionloss != 0.0))
        else:
            self.use_integral = config.friction_integral == "on"
        self.F_I = np.zeros(3)
        self.integral = np.zeros(3)
        self._flags = np.zeros(1)  # [frozen] (an array, so the compiled kernel shares the state)
        self.dt = plant.control_period
        #: commanded task acceleration u = [u_pos; u_rot] of the last compute() [m/s²; rad/s²]
        self.u = np.zeros(6)
        #: Λ⁻¹ = J M⁻¹ Jᵀ and y = Λ (u − J̇q̇ + D_null J M⁻¹ q̇) of the last Python step (the guard's bounds)
        self._Li = np.eye(6)
        self._y = np.zeros(6)
        self._gains_of: KhatibConfig | None = None
        self._gains: dict[str, float] = {}
        # contact-force options (controllers/force_control.py; their state arrays are shared with the kernel)
        self.force_filter = ForceFilter(3, config.force_filter, plant.control_period)
        self.setpoint = build_setpoint(config.force_setpoint, planner, plant.control_period)
        if self.setpoint is not None:
            self.diag_names = (*self.diag_names, *SETPOINT_DIAG)
        # compiled kernel (None: the Python path); bound to the run's arrays on the first compute()
        self._kmod = kernels.load(self.kernel_module)
        self._kernel = None

    @property
    def frozen(self) -> bool:
        """True once contact froze the friction integral."""
        return bool(self._flags[0])

    @frozen.setter
    def frozen(self, value: bool) -> None:
        self._flags[0] = 1.0 if value else 0.0

    def summary(self) -> dict:
        return self.kernel_summary()

    def _kernel_args(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> dict:
        """The arrays and parameters the compiled kernel is bound to (controllers/_khatib_kernel.c)."""
        return {
            "T_world_ee": snap.T_world_ee, "twist_ee_lwa": snap.twist_ee_lwa, "ref_flat": ref.flat,
            "ext_world": wrench.ext_world, "J_v_h": snap.J_v_h, "Minv": snap.Minv, "dJdq_ee_lwa": snap.dJdq_ee_lwa,
            "integral": self.integral, "F_I": self.F_I, "flags": self._flags, "tau": cmd.tau, "diag": cmd.diag,
            "u": self.u, "gains": self._config_gains(), "dt": float(self.dt), "min_pivot": _CHOL_MIN_PIVOT,
            "use_integral": self.use_integral, "use_force_feedback": bool(self.config.use_force_feedback),
            **self.ff.kernel_args(snap.g), **self.force_filter.kernel_args(),
            **(self.setpoint.kernel_args() if self.setpoint is not None else AxialForceSetpoint.kernel_args_off()),
        }

    def _bind(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        """Bind the compiled kernel to this run's arrays (they never move during a run)."""
        args = self._kernel_args(snap, ref, wrench, cmd)
        self._kernel = self._kmod.KhatibKernel(**args)
        self._kernel_arrays_of = (args, (snap, ref, wrench))  # derived when the guard needs it
        self._bound = (snap, ref, wrench, cmd, self.config)

    def _guard_values(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> kernels.Values:
        """τ, u, the diagnostics (F_I, frozen [, the set-point's s, F_d, f_a, I]) and the contact-force options'
        state (filter, set-point, hybrid latch: :func:`controllers.force_control.state_values`) for the kernel
        guard (sim/kernels.py)."""
        return [("tau", cmd.tau.copy()), ("u", self.u.copy()), ("diag", cmd.diag.copy()),
                ("force options state", state_values(self.force_filter, self.setpoint, self.ff))]

    def _guard_bounds(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> kernels.Bounds:
        """S and κ of τ, u, the diagnostics and the force options' state.

        τ = Jᵀ y + h − d_null q̇ [+ J_vᵀ F_f] + τ_ff passes through the solve Λ⁻¹ y = rhs: the two-part bound
        GUARD_C · n ε (κ S_solve + S_plain) (sim.kernels.split_bound) with κ = κ(Λ⁻¹), S_solve = 3 max |J|ᵀ|y| (the
        solve's own error) and S_plain = 3 (max(|h| + d_null |q̇| + |J_v|ᵀ|F_f|) + ‖JᵀΛ‖∞ S_u) + max |τ_ff| (u's
        round-off carried into y through Λ; the set-point's task force summed in another order; the torque-mode
        feedforward f tanh(2τ_pre/f) has slope ≤ 2, so an error in τ_pre reaches τ at most three times over). u
        sums ẍ_d, α_d and the impedance terms divided by the inertias: S = max |u|, |ẍ_d|, |α_d| + (max |f̄| +
        max |F_I| + k max |x − x_d| + d max |ẋ − ẋ_d|) / m + (k_rot π + d_rot max |ω − ω_d|) / m_rot, with f̄ the
        filtered force; with the set-point the axial parts removed (|x − s a aᵀx|_i ≤ max |x| + ‖x‖₁: the
        position, velocity and acceleration terms × 4, plus d ‖ẋ‖₁ / m for the damped axial velocity). F_I =
        clamp(k_i ∫(x_d − x) dt): S = max |F_I| + f_i,max. The state is the same scalar operations on both
        sides (equal bit for bit): S = its largest value."""
        c = self.config
        a = np.abs
        Li = self._Li
        s_solve = 3.0 * kernels.magnitude(a(snap.J_ee_lwa).T @ a(self._y))
        s_plain = 3.0 * kernels.magnitude(a(snap.h) + c.d_null * a(snap.v))
        if self.ff.active:
            s_plain += kernels.magnitude(self.ff.out)
        fs = self.setpoint
        grow = 1.0
        if fs is not None and fs.s > 0.0:
            s_plain += 3.0 * kernels.magnitude(a(snap.J_ee_lwa[:3]).T @ a(np.array(fs.task_force())))
            grow = 4.0
        f_law = self.force_filter.out if self.force_filter.active else wrench.ext_world[:3]
        s_u = (
            kernels.magnitude(self.u, ref.acc * grow, ref.alpha)
            + (
                kernels.magnitude(snap.p_ee_in_world - ref.pos) * c.k * grow
                + kernels.magnitude(snap.twist_ee_lwa[:3] - ref.vel) * c.d * grow
                + (c.d * float(a(snap.twist_ee_lwa[:3]).sum()) if grow > 1.0 else 0.0)
                + kernels.magnitude(f_law) * grow
                + kernels.magnitude(self.F_I) * grow
            )
            / c.m
            + (c.k_rot * np.pi + c.d_rot * kernels.magnitude(snap.twist_ee_lwa[3:] - ref.omega)) / c.m_rot
        )
        # u's own round-off (of size s_u) reaches τ through JᵀΛ without the solve's amplification
        s_plain += 3.0 * s_u * kernels.inf_norm_times_inverse(snap.J_ee_lwa.T, Li)
        state = state_values(self.force_filter, self.setpoint, self.ff)
        return [
            kernels.split_bound(s_solve, kernels.condition(Li), s_plain),
            (s_u, 1.0),
            (kernels.magnitude(self.F_I, cmd.diag) + c.f_i_max, 1.0),
            (kernels.magnitude(state), 1.0),
        ]

    def reset(self, snap: Snapshot, ref: Reference) -> None:
        self.integral[:] = 0.0
        self.F_I[:] = 0.0
        self.frozen = False
        self.force_filter.reset()
        self.ff.reset()
        if self.setpoint is not None:
            self.setpoint.reset()

    def _config_gains(self) -> dict[str, float]:
        """The config's gains by name, as the compiled kernel reads them (``KhatibGains`` in
        controllers/_khatib_kernel.c; cached per config object)."""
        c = self.config
        if c is not self._gains_of:
            self._gains = {
                "m": float(c.m), "d": float(c.d), "k": float(c.k), "m_rot": float(c.m_rot), "d_rot": float(c.d_rot),
                "k_rot": float(c.k_rot), "d_null": float(c.d_null), "k_i": float(c.k_i), "f_i_max": float(c.f_i_max),
                "contact_threshold": float(c.contact_threshold),
            }
            self._gains_of = c
        return self._gains

    #: the gym's impedance action scales the law's stiffness and damping (dockbench/gym.py): two scales
    #: each, translational and rotational
    n_gain_scales = 2

    def set_gain_scales(self, k_scale: np.ndarray, d_scale: np.ndarray) -> None:
        """Scale the stiffness and damping of the config the law was built with: K_d = k_scale[0] k, K_R =
        k_scale[1] k_rot, D_d = d_scale[0] d, D_R = d_scale[1] d_rot (``k_scale``, ``d_scale``: 2 positive
        floats each). The law's config is replaced (a new frozen config: the compiled kernel rebinds to it and
        reads the new gains on the next step)."""
        k_scale, d_scale = self._gain_scales(k_scale, d_scale, " (translational, rotational)")
        base = self._unscaled_config
        if base is None:
            base = self._unscaled_config = self.config
        self.config = dataclasses.replace(
            base, k=base.k * float(k_scale[0]), k_rot=base.k_rot * float(k_scale[1]),
            d=base.d * float(d_scale[0]), d_rot=base.d_rot * float(d_scale[1]),
        )

    #: the config before the first set_gain_scales (the scales are relative to it)
    _unscaled_config: KhatibConfig | None = None

    def axial_stiffness(self, axis: np.ndarray, R_world_ee: np.ndarray) -> float | None:
        """K_d = k I: k along any axis (None with a force set-point)."""
        return None if self.config.force_setpoint is not None else float(self.config.k)

    def stiffness_diagonal(self) -> np.ndarray:
        """(k, k, k, k_rot, k_rot, k_rot) of the current config: K_d = k I [N/m], K_R = k_rot I [N·m/rad]."""
        c = self.config
        return np.array([c.k, c.k, c.k, c.k_rot, c.k_rot, c.k_rot], dtype=float)

    compute = Controller.compute_with_kernel

    def _compute_kernel(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> bool:
        if not self._kernel_bound_to(snap, ref, wrench, cmd):
            self._bind(snap, ref, wrench, cmd)
        if self._kernel.step(snap.t) == 0:
            return True
        self.kernel_fallbacks += 1  # singular Λ⁻¹: nothing was written, the Python path takes the step
        return False

    def _compute_python(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        """The reference implementation of :meth:`compute` (module docstring)."""
        c = self.config
        x, v, w = snap.p_ee_in_world, snap.twist_ee_lwa[:3], snap.twist_ee_lwa[3:]
        f = wrench.ext_world[:3]
        if self.force_filter.active:  # F̄: the law's force (controllers/force_control.py)
            f = np.array(self.force_filter.update(f.tolist()))
        e_x, e_v = x - ref.pos, v - ref.vel  # x − x_d, ẋ − ẋ_d
        f_norm = norm3(f)  # ‖f̄‖ (the integral's freeze and the hybrid feedforward's contact test)
        fs = self.setpoint
        s_fs = fs.update(snap.t, f.tolist(), v.tolist()) if fs is not None else 0.0

        # friction integral F_I = clamp(k_i ∫(x_d − x) dt, ±F_I,max), frozen from the first contact
        if self.use_integral and not self.frozen:
            if f_norm > c.contact_threshold:
                self.frozen = True
            else:
                self.integral -= e_x * self.dt
                np.clip(c.k_i * self.integral, -c.f_i_max, c.f_i_max, out=self.F_I)
        F_I, acc = self.F_I, ref.acc
        fi_log = F_I.tolist()
        if s_fs > 0.0:
            # hybrid impedance: along the mating axis the position impedance (pose error, reference motion,
            # friction integral, measured force) is faded out by s and the absolute velocity is damped; the
            # set-point's task force is added to τ below (controllers/force_control.py)
            def fade(x: np.ndarray) -> np.ndarray:
                return np.array(fs.remove_axial(x.tolist(), s_fs))

            axis = np.array(fs.axis)
            e_x, acc, F_I, f = fade(e_x), fade(acc), fade(F_I), fade(f)
            e_v = fade(e_v) + s_fs * float(axis @ v) * axis

        # u_pos = ẍ_d + M_d⁻¹ (F_ext − D_d (ẋ − ẋ_d) − K_d (x − x_d) + F_I)
        force = -c.d * e_v - c.k * e_x
        if self.use_integral:
            force = force + F_I
        if c.use_force_feedback:
            force = force + f
        # e_R = log(R_d Rᵀ);  u_rot = α_d + M_R⁻¹ (K_R e_R + D_R (ω_d − ω))
        e_R = rotation_error_world(ref.R, snap.R_world_ee)
        self.u[:3] = acc + force / c.m
        self.u[3:] = ref.alpha + (c.k_rot * e_R + c.d_rot * (ref.omega - w)) / c.m_rot

        # τ = Jᵀ Λ (u − J̇q̇) + h − Nᵀ D_null q̇ with Nᵀ q̇ = q̇ − Jᵀ Λ J M⁻¹ q̇, in one solve:
        # τ = Jᵀ y + h − D_null q̇,  Λ⁻¹ y = u − J̇q̇ + D_null J M⁻¹ q̇,  Λ⁻¹ = J M⁻¹ Jᵀ
        J, dn = snap.J_ee_lwa, c.d_null
        MinvJt = snap.Minv @ J.T
        self._Li = Li = J @ MinvJt
        rhs = self.u - snap.dJdq_ee_lwa + dn * (MinvJt.T @ snap.v)
        self._y = y = _solve_task(Li, rhs)
        tau = J.T @ y + snap.h - dn * snap.v
        if fs is not None and s_fs > 0.0:
            tau += J[:3].T @ np.array(fs.task_force())  # Jᵀ [F_f; 0]
        if self.ff.active:
            tau += self.ff.compute(snap.v, tau, snap.g, f_norm)
        cmd.tau[:] = tau
        frozen = 1.0 if self.frozen else 0.0
        if fs is None:
            cmd.diag[:] = (*fi_log, frozen)
        else:
            cmd.diag[:] = (*fi_log, frozen, s_fs, fs.force_desired, fs.force_axial, fs.integral)
