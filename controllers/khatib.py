"""Khatib task-space impedance (MATH.md §2), the classical baseline.

Jacobian J = J_ee_lwa (LOCAL_WORLD_ALIGNED at the EE origin, rows [v; ω]); Λ = (J M⁻¹ Jᵀ)⁻¹;
J̄ = M⁻¹ Jᵀ Λ; N = I − J̄ J.

* u_pos = ẍ_d + M_d⁻¹ ( F_ext − D_d (ẋ − ẋ_d) − K_d (x − x_d) + F_I )
* e_R = log(R_d Rᵀ) (world axes), e_ω = ω_d − ω;  u_rot = α_d + M_R⁻¹ (K_R e_R + D_R e_ω)
* τ = Jᵀ Λ (u − J̇ q̇) + h + τ_null + τ_ff,   τ_null = −Nᵀ D_null q̇
* F_I = k_i ∫ (x_d − x) dt, clamped to ±F_I,max per axis, active only when the model has
  frictionloss ≠ 0 (``friction_integral: auto``), frozen from the first step with |f_ext| > 1 N.

F_ext is the force part of ``WrenchState.ext_world`` (environment on tool, world axes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.linalg.lapack import dposv as _dposv

from controllers.base import CONTROLLERS, Command, Controller, PlantInfo
from controllers.feedforward import DissipationFeedforward
from planners.base import Planner, Reference
from sim.config import param
from sim.dynamics import Snapshot
from sim.lie import so3_log
from sim.wrench import WrenchState


@dataclass(frozen=True)
class KhatibConfig:
    m: float = param(10.0, unit="kg", gt=0.0, doc="desired translational inertia M_d = m I")
    d: float = param(80.0, unit="N·s/m", ge=0.0, doc="translational damping D_d = d I")
    k: float = param(50.0, unit="N/m", ge=0.0, doc="translational stiffness K_d = k I")
    m_rot: float = param(1.0, unit="kg·m²", gt=0.0, doc="rotational inertia M_R = m_rot I")
    d_rot: float = param(10.0, unit="N·m·s/rad", ge=0.0, doc="rotational damping")
    k_rot: float = param(25.0, unit="N·m/rad", ge=0.0, doc="rotational stiffness")
    d_null: float = param(10.0, unit="N·m·s/rad", ge=0.0, doc="null-space joint damping D_null = d_null I")
    feedforward: Literal["torque", "velocity", "off"] = param(
        "torque", doc="joint friction/damping feedforward mode (MATH.md §2)"
    )
    friction_integral: Literal["auto", "on", "off"] = param(
        "auto", doc="F_I = k_i ∫(x_d − x)dt; auto = on iff the model has frictionloss ≠ 0"
    )
    k_i: float = param(150.0, unit="N/(m·s)", ge=0.0, doc="friction integral gain")
    f_i_max: float = param(10.0, unit="N", ge=0.0, doc="clamp of each component of F_I")
    contact_threshold: float = param(1.0, unit="N", ge=0.0, doc="|f_ext| that freezes the integral")
    use_force_feedback: bool = param(True, doc="include F_ext in u_pos (false = pure impedance without F/T)")


@CONTROLLERS.register("khatib")
class KhatibController(Controller):
    """Operational-space impedance with null-space damping (see module docstring)."""

    Config = KhatibConfig
    diag_names = ("f_i_x", "f_i_y", "f_i_z", "frozen")

    def __init__(self, config: KhatibConfig, plant: PlantInfo, planner: Planner | None = None):
        super().__init__(config, plant, planner)
        self.ff = DissipationFeedforward(plant.dof_frictionloss, plant.dof_damping, config.feedforward)
        if config.friction_integral == "auto":
            self.use_integral = bool(np.any(plant.dof_frictionloss != 0.0))
        else:
            self.use_integral = config.friction_integral == "on"
        self.F_I = np.zeros(3)
        self.integral = np.zeros(3)
        self.frozen = False
        self.dt = plant.control_period
        self.u = np.zeros(6)
        self.e_pos = np.zeros(3)
        self.e_vel = np.zeros(3)
        self.force = np.zeros(3)

    def reset(self, snap: Snapshot, ref: Reference) -> None:
        self.integral[:] = 0.0
        self.F_I[:] = 0.0
        self.frozen = False

    def compute(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        c = self.config
        J = snap.J_ee_lwa
        x = snap.p_ee_in_world
        xd = snap.twist_ee_lwa
        f_ext = wrench.ext_world[:3]
        np.subtract(x, ref.pos, out=self.e_pos)
        np.subtract(xd[:3], ref.vel, out=self.e_vel)

        # Friction integral, frozen once contact is detected.
        if self.use_integral and not self.frozen:
            if np.linalg.norm(f_ext) > c.contact_threshold:
                self.frozen = True
            else:
                self.integral -= self.e_pos * self.dt
                np.clip(c.k_i * self.integral, -c.f_i_max, c.f_i_max, out=self.F_I)

        u = self.u
        force = self.force
        np.multiply(self.e_vel, -c.d, out=force)
        force -= c.k * self.e_pos
        if self.use_integral:
            force += self.F_I
        if c.use_force_feedback:
            force += f_ext
        force *= 1.0 / c.m
        np.add(ref.acc, force, out=u[:3])
        e_R = so3_log(ref.R @ snap.R_world_ee.T)
        e_R *= c.k_rot
        e_R += c.d_rot * (ref.omega - xd[3:])
        e_R *= 1.0 / c.m_rot
        np.add(ref.alpha, e_R, out=u[3:])

        # τ = Jᵀ Λ (u − J̇q̇) + h − D_null Nᵀ q̇ with Nᵀ q̇ = q̇ − Jᵀ Λ J M⁻¹ q̇, folded into one solve:
        # τ = Jᵀ y + h − d_null q̇,  y = Λ (u − J̇q̇ + d_null J M⁻¹ q̇),  Λ⁻¹ = J M⁻¹ Jᵀ.
        MinvJt = snap.Minv @ J.T  # (nv, 6)
        rhs = u - snap.dJdq_ee_lwa
        rhs += c.d_null * (snap.v @ MinvJt)
        _, y, info = _dposv(J @ MinvJt, rhs)  # Λ⁻¹ = J M⁻¹ Jᵀ is SPD away from singularities
        if info != 0:
            y = np.linalg.lstsq(J @ MinvJt, rhs, rcond=None)[0]
        tau = J.T @ y
        tau += snap.h
        tau -= c.d_null * snap.v
        if self.ff.active:
            tau += self.ff.compute(snap.v, tau)
        cmd.tau[:] = tau
        cmd.diag[:3] = self.F_I
        cmd.diag[3] = 1.0 if self.frozen else 0.0
