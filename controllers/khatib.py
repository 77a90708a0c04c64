"""Khatib task-space impedance (MATH.md §2), the classical baseline.

Jacobian J = J_ee_lwa (LOCAL_WORLD_ALIGNED at the EE origin, rows [v; ω]); Λ = (J M⁻¹ Jᵀ)⁻¹;
J̄ = M⁻¹ Jᵀ Λ; N = I − J̄ J.

* u_pos = ẍ_d + M_d⁻¹ ( F_ext − D_d (ẋ − ẋ_d) − K_d (x − x_d) + F_I )
* e_R = log(R_d Rᵀ) (world axes), e_ω = ω_d − ω;  u_rot = α_d + M_R⁻¹ (K_R e_R + D_R e_ω)
* τ = Jᵀ Λ (u − J̇ q̇) + h + τ_null + τ_ff,   τ_null = −Nᵀ D_null q̇
* F_I = k_i ∫ (x_d − x) dt, clamped to ±F_I,max per axis, active only when the model has
  frictionloss ≠ 0 (``friction_integral: auto``), frozen from the first step with |f_ext| > 1 N.

F_ext is the force part of ``WrenchState.ext_world`` (environment on tool, world axes).

Implementation (1 kHz loop): the 3-vector algebra on Python floats; the joint-space part as
τ = Jᵀ y + h − D_null q̇ with Λ⁻¹ y = u − J̇q̇ + D_null J M⁻¹ q̇ (the task and null-space terms folded
into one solve), where [J; q̇ᵀ] M⁻¹Jᵀ gives Λ⁻¹ and J M⁻¹ q̇ in one product, y is solved in place
(MuJoCo's Cholesky; least squares at a singular Λ⁻¹) and τ = [J; q̇ᵀ; hᵀ]ᵀ [y; −D_null; 1] is one
product (``Snapshot.J_v_h``). tests/test_optimised_equals_reference.py pins it to the textbook form.

Compiled kernel: when ``controllers._khatib_kernel`` is built (sim/kernels.py), :meth:`KhatibController.compute`
binds it once to the run's arrays and each step is one call (≈10× cheaper); this Python code stays the
reference and runs when the kernel is missing, when ``DOCKBENCH_KERNELS=python``, and for a step where
Λ⁻¹ is singular (least squares). tests/test_kernels.py checks the two paths agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import mujoco
import numpy as np

from controllers.base import CONTROLLERS, Command, Controller, PlantInfo
from controllers.feedforward import DissipationFeedforward
from controllers.force_control import AxialForceSetpoint, ForceFilter, ForceSetpointConfig, mating_axis_of
from planners.base import Planner, Reference
from sim import kernels
from sim.config import param
from sim.dynamics import Snapshot
from sim.lie import rotation_error_world
from sim.wrench import WrenchState

#: diagnostics added by the force set-point: ramp s, F_d, f_a [N] and the integral I [N]
SETPOINT_DIAG = ("fs_s", "fs_force_desired", "fs_force_axial", "fs_integral")

_mulMatMatT = mujoco.mju_mulMatMatT
_cholFactor = mujoco.mju_cholFactor
_cholSolve = mujoco.mju_cholSolve
#: Cholesky pivots (squared) below this count as zero: Λ⁻¹ singular → least-squares solve [1/kg-ish units]
_CHOL_MIN_PIVOT = 1e-15


@dataclass(frozen=True)
class KhatibConfig:
    m: float = param(10.0, unit="kg", gt=0.0, doc="desired translational inertia M_d = m I")
    d: float = param(80.0, unit="N·s/m", ge=0.0, doc="translational damping D_d = d I")
    k: float = param(50.0, unit="N/m", ge=0.0, doc="translational stiffness K_d = k I")
    m_rot: float = param(1.0, unit="kg·m²", gt=0.0, doc="rotational inertia M_R = m_rot I")
    d_rot: float = param(10.0, unit="N·m·s/rad", ge=0.0, doc="rotational damping")
    k_rot: float = param(25.0, unit="N·m/rad", ge=0.0, doc="rotational stiffness")
    d_null: float = param(10.0, unit="N·m·s/rad", ge=0.0, doc="null-space joint damping D_null = d_null I")
    feedforward: Literal["torque", "velocity", "hybrid", "off"] = param(
        "torque",
        doc="joint friction/damping feedforward mode (MATH.md §2; hybrid: torque keying until the first contact, "
        "velocity keying from then on, Python only)",
    )
    friction_integral: Literal["auto", "on", "off"] = param(
        "auto", doc="F_I = k_i ∫(x_d − x)dt; auto = on iff the model has frictionloss ≠ 0"
    )
    k_i: float = param(150.0, unit="N/(m·s)", ge=0.0, doc="friction integral gain")
    f_i_max: float = param(10.0, unit="N", ge=0.0, doc="clamp of each component of F_I")
    contact_threshold: float = param(1.0, unit="N", ge=0.0, doc="|f_ext| that freezes the integral")
    use_force_feedback: bool = param(True, doc="include F_ext in u_pos (false = pure impedance without F/T)")
    force_filter: float = param(
        0.0, unit="s", ge=0.0,
        doc="time constant τ_f of a first-order low-pass on F_ext before the law uses it (0 = off; Python only; "
        "docs/theory/force_control.md)",
    )
    force_setpoint: ForceSetpointConfig | None = param(
        None, doc="hybrid impedance: a commanded contact force along the mating axis (null = off; Python only)"
    )


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
            plant.dof_frictionloss, plant.dof_damping, config.feedforward, period=plant.control_period
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
        nv = plant.nv
        # work arrays (C-contiguous, the exact shapes ndarray.dot(..., out=) and mju_* need)
        self._MinvJt = np.zeros((nv, 6))
        # [J; q̇ᵀ] M⁻¹ Jᵀ: rows 0–5 Λ⁻¹ = J M⁻¹ Jᵀ, row 6 (J M⁻¹ q̇)ᵀ (M⁻¹ symmetric)
        self._LiR = np.zeros((7, 6))
        # [y; −d_null; 1]: y solved in place in the first six entries, so that
        # [J; q̇ᵀ; hᵀ]ᵀ [y; −d_null; 1] = Jᵀ y − d_null q̇ + h is one product
        self._yext = np.zeros(8)
        self._yext[7] = 1.0
        self._y_view = self._yext[:6]
        self._Li = np.zeros((6, 6))  # Cholesky factor of Λ⁻¹
        self._gains_of: KhatibConfig | None = None
        self._gains: tuple[float, ...] = ()
        # contact-force options (controllers/force_control.py; Python only)
        self.force_filter = ForceFilter(3, config.force_filter, plant.control_period)
        self.setpoint: AxialForceSetpoint | None = None
        if config.force_setpoint is not None:
            self.setpoint = AxialForceSetpoint(
                config.force_setpoint, mating_axis_of(planner), plant.control_period, planner.duration
            )
            self.diag_names = (*self.diag_names, *SETPOINT_DIAG)
        # compiled kernel (None: the Python path); bound to the run's arrays on the first compute(). Not
        # for the force filter and the force set-point (Python-only options).
        python_only = self.force_filter.active or self.setpoint is not None or not self.ff.kernel_supported
        self._kmod = None if python_only else kernels.load(self.kernel_module)
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
            **self.ff.kernel_args(snap.g),
        }

    def _bind(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        """Bind the compiled kernel to this run's arrays (they never move during a run)."""
        args = self._kernel_args(snap, ref, wrench, cmd)
        self._kernel = self._kmod.KhatibKernel(**args)
        self._kernel_arrays = self._arrays_of(args, snap, ref, wrench)
        self._bound = (snap, ref, wrench, cmd, self.config)

    def _guard_values(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> kernels.Values:
        """τ, u and the diagnostics (F_I, frozen) for the kernel guard (sim/kernels.py)."""
        return [("tau", cmd.tau.copy()), ("u", self.u.copy()), ("diag", cmd.diag.copy())]

    def _guard_bounds(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> kernels.Bounds:
        """S and κ of τ, u and the diagnostics.

        τ = Jᵀ y + h − d_null q̇ + τ_ff passes through the solve Λ⁻¹ y = rhs: the two-part bound GUARD_C · n ε
        (κ S_solve + S_plain) (sim.kernels.split_bound) with κ = κ(Λ⁻¹), S_solve = 3 max |J|ᵀ|y| (the solve's own
        error) and S_plain = 3 (max(|h| + d_null |q̇|) + ‖JᵀΛ‖∞ S_u) + max |τ_ff| (u's round-off carried into y
        through Λ; the torque-mode feedforward f tanh(2τ_pre/f) has slope ≤ 2, so an error in τ_pre reaches τ at
        most three times over). u sums ẍ_d, α_d and the impedance terms divided by
        the inertias: S = max |u|, |ẍ_d|, |α_d| + (max |f_ext| + max |F_I| + k max |x − x_d| + d max |ẋ − ẋ_d|) / m
        + (k_rot π + d_rot max |ω − ω_d|) / m_rot. F_I = clamp(k_i ∫(x_d − x) dt): S = max |F_I| + f_i,max."""
        c = self.config
        a = np.abs
        Li = self._LiR[:6]
        s_solve = 3.0 * kernels.magnitude(a(snap.J_ee_lwa).T @ a(self._y_view))
        s_plain = 3.0 * kernels.magnitude(a(snap.h) + c.d_null * a(snap.v))
        if self.ff.active:
            s_plain += kernels.magnitude(self.ff.out)
        s_u = (
            kernels.magnitude(self.u, ref.acc, ref.alpha)
            + (
                kernels.magnitude(snap.p_ee_in_world - ref.pos) * c.k
                + kernels.magnitude(snap.twist_ee_lwa[:3] - ref.vel) * c.d
                + kernels.magnitude(wrench.ext_world[:3])
                + kernels.magnitude(self.F_I)
            )
            / c.m
            + (c.k_rot * np.pi + c.d_rot * kernels.magnitude(snap.twist_ee_lwa[3:] - ref.omega)) / c.m_rot
        )
        # u's own round-off (of size s_u) reaches τ through JᵀΛ without the solve's amplification
        s_plain += 3.0 * s_u * kernels.inf_norm_times_inverse(snap.J_ee_lwa.T, Li)
        return [
            kernels.split_bound(s_solve, kernels.condition(Li), s_plain),
            (s_u, 1.0),
            (kernels.magnitude(self.F_I) + c.f_i_max, 1.0),
        ]

    def reset(self, snap: Snapshot, ref: Reference) -> None:
        self.integral[:] = 0.0
        self.F_I[:] = 0.0
        self.frozen = False
        self.force_filter.reset()
        self.ff.reset()
        if self.setpoint is not None:
            self.setpoint.reset()

    def _config_gains(self) -> tuple[float, ...]:
        """The config's gains as Python floats (cached per config object)."""
        c = self.config
        if c is not self._gains_of:
            self._gains = (
                -float(c.d), float(c.k), 1.0 / c.m, float(c.k_rot), float(c.d_rot), 1.0 / c.m_rot,
                float(c.d_null), float(c.k_i), float(c.f_i_max), float(c.contact_threshold),
            )
            self._gains_of = c
        return self._gains

    compute = Controller.compute_with_kernel

    def _compute_kernel(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> bool:
        if not self._kernel_bound_to(snap, ref, wrench, cmd):
            self._bind(snap, ref, wrench, cmd)
        if self._kernel.step() == 0:
            return True
        self.kernel_fallbacks += 1  # singular Λ⁻¹: nothing was written, the Python path takes the step
        return False

    def _compute_python(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        """The reference implementation of :meth:`compute` (module docstring)."""
        # 3-vector algebra on Python floats (one numpy call costs more than the arithmetic), in the
        # same operation order as the array form; tests/test_khatib_fast.py pins it to the array
        # implementation and tests/test_optimised_equals_reference.py to the textbook equations.
        md, k, inv_m, k_rot, d_rot, inv_mrot, dn, k_i, f_i_max, f_contact = self._config_gains()
        x0, x1, x2 = snap.p_ee_in_world.tolist()
        v0, v1, v2, w0, w1, w2 = snap.twist_ee_lwa.tolist()
        p0, p1, p2 = ref.pos.tolist()
        pv0, pv1, pv2 = ref.vel.tolist()
        f0, f1, f2, _, _, _ = wrench.ext_world.tolist()
        if self.force_filter.active:  # F̄: the law's force (controllers/force_control.py)
            f0, f1, f2 = self.force_filter.update([f0, f1, f2])
        ep0, ep1, ep2 = x0 - p0, x1 - p1, x2 - p2  # x − x_d
        ev0, ev1, ev2 = v0 - pv0, v1 - pv1, v2 - pv2  # ẋ − ẋ_d
        f_norm = math.sqrt(f0 * f0 + f1 * f1 + f2 * f2)  # ‖f̄‖ (the hybrid feedforward's contact test)
        fs = self.setpoint
        s_fs = fs.update(snap.t, [f0, f1, f2], [v0, v1, v2]) if fs is not None else 0.0

        # Friction integral, frozen once contact is detected.
        if self.use_integral and not self.frozen:
            if f_norm > f_contact:
                self.frozen = True
            else:
                dt = self.dt
                i0, i1, i2 = self.integral.tolist()
                i0 -= ep0 * dt
                i1 -= ep1 * dt
                i2 -= ep2 * dt
                self.integral[:] = (i0, i1, i2)
                self.F_I[:] = (
                    min(max(k_i * i0, -f_i_max), f_i_max),
                    min(max(k_i * i1, -f_i_max), f_i_max),
                    min(max(k_i * i2, -f_i_max), f_i_max),
                )
        fi0, fi1, fi2 = fi_log = self.F_I.tolist()
        a0, a1, a2 = ref.acc.tolist()
        if s_fs > 0.0:
            # hybrid impedance: along the mating axis the position impedance (pose error, reference motion,
            # friction integral, measured force) is faded out by s and the absolute velocity is damped; the
            # set-point's task force is added to τ below (controllers/force_control.py)
            ep0, ep1, ep2 = fs.remove_axial((ep0, ep1, ep2), s_fs)
            va = s_fs * (fs.axis[0] * v0 + fs.axis[1] * v1 + fs.axis[2] * v2)
            ev0, ev1, ev2 = fs.remove_axial((ev0, ev1, ev2), s_fs)
            ev0, ev1, ev2 = ev0 + va * fs.axis[0], ev1 + va * fs.axis[1], ev2 + va * fs.axis[2]
            a0, a1, a2 = fs.remove_axial((a0, a1, a2), s_fs)
            fi0, fi1, fi2 = fs.remove_axial((fi0, fi1, fi2), s_fs)
            f0, f1, f2 = fs.remove_axial((f0, f1, f2), s_fs)

        # u_pos = ẍ_d + M_d⁻¹ (−D_d (ẋ − ẋ_d) − K_d (x − x_d) [+ F_I] [+ F_ext])
        g0 = ev0 * md - k * ep0
        g1 = ev1 * md - k * ep1
        g2 = ev2 * md - k * ep2
        if self.use_integral:
            g0 += fi0
            g1 += fi1
            g2 += fi2
        if self.config.use_force_feedback:
            g0 += f0
            g1 += f1
            g2 += f2
        # e_R = log(R_d Rᵀ);  u_rot = α_d + M_R⁻¹ (K_R e_R + D_R (ω_d − ω))
        e0, e1, e2 = rotation_error_world(ref.R, snap.R_world_ee).tolist()
        o0, o1, o2 = ref.omega.tolist()
        al0, al1, al2 = ref.alpha.tolist()
        u0 = a0 + g0 * inv_m
        u1 = a1 + g1 * inv_m
        u2 = a2 + g2 * inv_m
        u3 = al0 + (e0 * k_rot + d_rot * (o0 - w0)) * inv_mrot
        u4 = al1 + (e1 * k_rot + d_rot * (o1 - w1)) * inv_mrot
        u5 = al2 + (e2 * k_rot + d_rot * (o2 - w2)) * inv_mrot
        self.u[:] = (u0, u1, u2, u3, u4, u5)

        # τ = Jᵀ Λ (u − J̇q̇) + h − D_null Nᵀ q̇ with Nᵀ q̇ = q̇ − Jᵀ Λ J M⁻¹ q̇, folded into one solve:
        # τ = Jᵀ y + h − d_null q̇,  y = Λ (u − J̇q̇ + d_null J M⁻¹ q̇),  Λ⁻¹ = J M⁻¹ Jᵀ.
        # Small dense products through ndarray.dot(out=) or MuJoCo's mju_*, whichever binding costs less
        # at this size (measured), and the Cholesky solve through mju_* (less than scipy's LAPACK wrapper).
        MinvJt = self._MinvJt
        _mulMatMatT(MinvJt, snap.Minv, snap.J_ee_lwa)  # M⁻¹ Jᵀ (nv, 6)
        LiR = self._LiR
        snap.J_v.dot(MinvJt, out=LiR)  # [Λ⁻¹; (J M⁻¹ q̇)ᵀ]
        r0, r1, r2, r3, r4, r5 = LiR[6].tolist()
        j0, j1, j2, j3, j4, j5 = snap.dJdq_ee_lwa.tolist()
        rhs = (
            (u0 - j0) + dn * r0,
            (u1 - j1) + dn * r1,
            (u2 - j2) + dn * r2,
            (u3 - j3) + dn * r3,
            (u4 - j4) + dn * r4,
            (u5 - j5) + dn * r5,
        )
        yext, Li = self._yext, self._Li
        yext[:7] = (*rhs, -dn)
        # Λ⁻¹ y = rhs. Λ⁻¹ is SPD away from singularities: Cholesky-factor a copy of it (LiR keeps Λ⁻¹),
        # then solve in place in yext[:6]. A pivot below _CHOL_MIN_PIVOT (rank < 6) means Λ⁻¹ is
        # singular there: least squares instead.
        Li[:] = LiR[:6]
        if _cholFactor(Li, _CHOL_MIN_PIVOT) == 6:
            y = self._y_view
            _cholSolve(y, Li, y)
        else:
            yext[:6] = np.linalg.lstsq(LiR[:6], np.array(rhs), rcond=None)[0]
        tau = cmd.tau
        snap.J_v_h.T.dot(yext, out=tau)  # [J; q̇ᵀ; hᵀ]ᵀ [y; −d_null; 1] = Jᵀ y − d_null q̇ + h
        if fs is not None and s_fs > 0.0:
            tf = fs.task_force()
            tau += snap.J_ee_lwa[:3].T.dot(tf)  # Jᵀ [F_f; 0]
        if self.ff.active:
            tau += self.ff.compute(snap.v, tau, snap.g, f_norm)
        if fs is None:
            cmd.diag[:] = (fi0, fi1, fi2, 1.0 if self.frozen else 0.0)
        else:
            cmd.diag[:] = (
                *fi_log, 1.0 if self.frozen else 0.0, s_fs, fs.force_desired, fs.force_axial, fs.integral
            )
