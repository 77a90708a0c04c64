"""A user controller in its own file, used by the stock CLI through ``plugins:`` (docs/extending.md).

``jt_impedance``: task-space impedance through the Jacobian transpose, with gravity and Coriolis
compensation and joint damping,

    τ = Jᵀ (K_p (x_d − x) + D_p (ẋ_d − ẋ);  K_r log(R_d Rᵀ) + D_r (ω_d − ω)) + h − D_q q̇,

with J the EE Jacobian with world axes (LOCAL_WORLD_ALIGNED, rows [v; ω]), x, R the EE pose in the world,
ẋ, ω its twist, h = C q̇ + g. No model of the task-space inertia: the simplest law that tracks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from dockbench.controllers.base import CONTROLLERS, Command, Controller
from dockbench.planners.base import Reference
from dockbench.sim.config import param
from dockbench.sim.dynamics import Snapshot
from dockbench.sim.lie import so3_log
from dockbench.sim.wrench import WrenchState


@dataclass(frozen=True)
class JTImpedanceConfig:
    k_p: float = param(600.0, unit="N/m", gt=0.0, le=1e5, doc="translational stiffness K_p")
    d_p: float = param(60.0, unit="N·s/m", ge=0.0, le=1e4, doc="translational damping D_p")
    k_r: float = param(20.0, unit="N·m/rad", gt=0.0, le=1e4, doc="rotational stiffness K_r")
    d_r: float = param(1.0, unit="N·m·s/rad", ge=0.0, le=1e3, doc="rotational damping D_r")
    d_q: float = param(0.2, unit="N·m·s/rad", ge=0.0, le=1e3, doc="joint damping D_q")


@CONTROLLERS.register("jt_impedance")
class JTImpedanceController(Controller):
    """τ = Jᵀ F + h − D_q q̇ (see the module docstring)."""

    Config = JTImpedanceConfig
    diag_names = ("force_norm",)  # logged as the telemetry channel ctrl_force_norm
    diag_units = {"force_norm": "N"}

    def compute(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        c = self.config
        F = np.empty(6)
        F[:3] = c.k_p * (ref.pos - snap.p_ee_in_world) + c.d_p * (ref.vel - snap.twist_ee_lwa[:3])
        F[3:] = c.k_r * so3_log(ref.R @ snap.R_world_ee.T) + c.d_r * (ref.omega - snap.twist_ee_lwa[3:])
        cmd.tau[:] = snap.J_ee_lwa.T @ F + snap.h - c.d_q * snap.v
        cmd.diag[0] = np.linalg.norm(F[:3])
