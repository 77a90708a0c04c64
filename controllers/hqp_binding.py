"""The HQP's compiled kernel (controllers/_hqp_kernel.c) bound to a run, and what its guard compares
(sim/kernels.py; the law it ports is :mod:`controllers.hqp`).

When ``controllers._hqp_kernel`` is built (sim/kernels.py), :meth:`controllers.hqp.HQPController.compute`
binds it once to the run's arrays and a closed-form step is one C call (≈ 2 µs instead of ≈ 20–26 µs):
everything of the law up to τ, with Λ, Λ^½ from a cyclic Jacobi iteration instead of LAPACK's eigh and ∇w
ported. It writes τ, the diagnostics and every array of ``HQPController.prob`` and ``HQPController.sol``
the Python path writes (their few scalars — α, w, the solution status and residuals — are brought up to
date when ``prob`` or ``sol`` is next read, :meth:`HQPKernelBinding._sync_kernel_step`). It hands the step
back to the Python code, having written nothing, when the closed form is infeasible (the QPs), when Λ⁻¹ or
J Jᵀ is not positive definite (or the Jacobi iteration does not converge), and where Python's math raises.
The sensorless mode (the momentum observer) and ``qp_mode: always`` never use it. Everything agrees with
the Python path to round-off within the stated bounds of :meth:`HQPKernelBinding.roundoff_bounds`
(tests/test_hqp_kernel.py); on a compiled step ``qp_solve_time`` is the kernel's whole evaluation time.

:class:`HQPKernelBinding` is a mixin of :class:`controllers.hqp.HQPController`: it reads the controller's
arrays, gains and force options. This module is not part of what the kernel ports
(sim/_kernel_manifest.py): it says how the kernel is called and checked, not what it computes.
"""

from __future__ import annotations

import math

import numpy as np
from dockbench.controllers.base import Command
from dockbench.controllers.force_control import AxialForceSetpoint, state_values
from dockbench.controllers.hqp_problem import STATUS_CLOSED_FORM
from dockbench.planners.base import Reference
from dockbench.sim import kernels
from dockbench.sim.dynamics import Snapshot
from dockbench.sim.wrench import WrenchState

#: the compiled kernel of the closed-form step (sim/kernels.py)
HQP_KERNEL = "controllers._hqp_kernel"


class HQPKernelBinding:
    """Binding, guard values and round-off bounds of the HQP's compiled kernel (module docstring)."""

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


    #: the config the cached gains mapping was built from, and the mapping (:meth:`_config_gains`)
    _gains_of: object = None
    _gains: dict[str, float | bool] | None = None

    def _config_gains(self) -> dict[str, float | bool]:
        """The law's gains and options by name, as the compiled kernel reads them (``HQPGains`` in
        controllers/_hqp_kernel.c): the config's keys and what the controller derives from them (K_j negated
        back, the ∇w term's k_sa and w_th as the law runs them, the constraint rows' 1/Δ, k2, k2 Δ); cached per
        config object. K_0 and √K_0,i + √K_0,j are not here: the kernel reads those arrays in place."""
        c = self.config
        if c is not self._gains_of or self._gains is None:
            self._gains = {
                "k_alpha": float(self._k_alpha), "sigmoid_plain": bool(self._plain),
                "k_min_ratio": float(self._k_min_ratio), "k_j": -float(self._minus_k_j), "d_j": float(self._d_j),
                "k_sa": float(self._k_sa), "w_th": float(self._w_th_sa), "inv_horizon": float(self._inv_D),
                "k2": float(self._k2), "k2_horizon": float(self._two_over_D),
                "use_force_feedback": bool(self._use_force), "wrench_compensation": bool(self._wrench_comp),
            }
            self._gains_of = c
        return self._gains

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
            gains=self._config_gains(),
            **self.ff.kernel_args(snap.g),
            **self.force_filter.kernel_args(),
            **(self.setpoint.kernel_args() if self.setpoint is not None else AxialForceSetpoint.kernel_args_off()),
        )
        args["filt_on"] = bool(args["filt_on"] and self._use_force)  # the filter runs on the law's force only
        self._kernel = self._kmod.HQPKernel(**args)
        self._kernel_arrays_of = (args, (snap, ref, wrench))  # derived when the guard needs it
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
