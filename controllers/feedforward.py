"""Joint dissipation feedforward (MATH.md §2): cancel the plant's dry friction and viscous damping.

With f = dof_frictionloss [N·m] and d = dof_damping [N·m·s/rad] read from the assembled MjModel
(never duplicated as constants):

* velocity mode: τ_ff = f · tanh(q̇ / 0.01)
* torque mode (default): τ_ff = f · tanh(τ_pre / (f/2)), τ_pre = the torque before this term
* always: τ_damp = d · q̇ (MuJoCo applies −d q̇)

Joints with f = 0 get no friction term (no division by zero).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

FeedforwardMode = Literal["torque", "velocity", "off"]

#: velocity scale of the smooth sign in velocity mode [rad/s]
VELOCITY_EPS = 0.01


class DissipationFeedforward:
    """Preallocated evaluator of τ_ff + τ_damp (see module docstring)."""

    def __init__(self, frictionloss: np.ndarray, damping: np.ndarray, mode: FeedforwardMode = "torque"):
        self.f = np.asarray(frictionloss, dtype=float).copy()
        self.d = np.asarray(damping, dtype=float).copy()
        self.mode = mode
        self.active_f = self.f > 0.0
        self._half_f = np.where(self.active_f, self.f / 2.0, 1.0)
        self.any_friction = bool(np.any(self.active_f)) and mode != "off"
        self.any_damping = bool(np.any(self.d != 0.0)) and mode != "off"
        self.out = np.zeros_like(self.f)
        self._dv = np.zeros_like(self.f)
        #: False when there is nothing to compensate (the loop can skip the call)
        self.active = self.any_friction or self.any_damping

    def kernel_args(self) -> dict:
        """This feedforward as the compiled kernels take it (``kernel_feedforward`` in sim/_kernel_math.h):
        f, d, f/2 (1 where f = 0), the mode code (0 inactive, 1 torque, 2 velocity), whether the
        damping term is on, and the velocity scale ε."""
        return {
            "ff_f": self.f,
            "ff_d": self.d,
            "ff_half_f": self._half_f,
            "ff_mode": 0 if not self.active else (2 if self.mode == "velocity" else 1),
            "ff_damping": self.any_damping,
            "ff_vel_eps": VELOCITY_EPS,
        }

    def compute(self, v: np.ndarray, tau_pre: np.ndarray) -> np.ndarray:
        """τ_ff + τ_damp [N·m] for joint velocities ``v`` [rad/s] and pre-feedforward torque."""
        out = self.out
        if self.mode == "off":
            out[:] = 0.0
            return out
        if self.mode == "velocity":
            np.divide(v, VELOCITY_EPS, out=out)
            np.tanh(out, out=out)
        else:
            np.divide(tau_pre, self._half_f, out=out)
            np.tanh(out, out=out)
        out *= self.f  # f = 0 joints → 0
        if self.any_damping:
            np.multiply(self.d, v, out=self._dv)
            out += self._dv
        return out
