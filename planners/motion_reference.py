"""Adapter: any planner → desired BODY motion (T_d, V_d, V̇_d) for the SE(3) controller (docs/theory/planners.md).

* SE(3) planners (they define ``motion_into(t, T_out, V_out, dV_out)``, e.g. se3_topp) pass through.
* Position-only planners fill the world :class:`~planners.base.Reference`; with R = ref.R,
  ṗ = ref.vel, p̈ = ref.acc, ω = ref.omega, α = ref.alpha (world axes) ::

      T_d = [[R, p], [0, 1]]
      V_d = [Rᵀ ṗ; Rᵀ ω] = [v_b; ω_b]                          (body twist of T_d, [v; ω])
      V̇_d = d/dt V_d = [Rᵀ p̈ − ω_b × v_b; Rᵀ α]              (from Ṙᵀ = −ω_b^ Rᵀ)

  For the fixed-orientation planners (ω = α = 0) this reduces to V_d = [R_dᵀ ṗ; 0],
  V̇_d = [R_dᵀ p̈; 0] (docs/theory/planners.md), but the general form is exact for any planner.
"""

from __future__ import annotations

import numpy as np
from dockbench.planners.base import Planner, Reference
from dockbench.sim.lie import cross3


class MotionReference:
    """Preallocated body-frame desired motion of a planner; call :meth:`update` (or
    :meth:`update_from_reference`) once per step.

    Attributes:
        T: (4, 4) T_world_des.
        V: (6,) body twist [v; ω] of T_d [m/s; rad/s].
        dV: (6,) its time derivative [m/s²; rad/s²].
        reference: the world :class:`Reference` used for position-only planners (not filled for
            pass-through planners).
        passthrough: True when the planner provides ``motion_into``.
    """

    __slots__ = ("planner", "T", "V", "dV", "reference", "passthrough", "_motion_into")

    def __init__(self, planner: Planner):
        self.planner = planner
        self.T = np.eye(4)
        self.V = np.zeros(6)
        self.dV = np.zeros(6)
        self.reference = Reference()
        self._motion_into = getattr(planner, "motion_into", None)
        self.passthrough = callable(self._motion_into)

    def update(self, t: float) -> MotionReference:
        """Fill T, V, dV for time t [s]; returns self."""
        if self.passthrough:
            self._motion_into(t, self.T, self.V, self.dV)
            return self
        ref = self.reference
        self.planner.evaluate(t, ref)
        self._from_world(ref)
        return self

    def update_from_reference(self, ref: Reference, t: float) -> MotionReference:
        """As :meth:`update`, for a caller that already holds ``ref`` = the planner's world reference
        at time t (the control loop evaluates it once per step): position-only planners convert
        ``ref`` directly instead of evaluating the planner again; pass-through planners still call
        ``motion_into(t, …)``. ``ref`` is read, not copied (:attr:`reference` is left as it was)."""
        if self.passthrough:
            self._motion_into(t, self.T, self.V, self.dV)
        else:
            self._from_world(ref)
        return self

    def _from_world(self, ref: Reference) -> None:
        """T, V, dV of the world reference ``ref`` (module docstring)."""
        R = ref.R
        self.T[:3, :3] = R
        self.T[:3, 3] = ref.pos
        self.V[:3] = R.T @ ref.vel  # v_b = Rᵀ ṗ
        self.V[3:] = R.T @ ref.omega  # ω_b = Rᵀ ω
        self.dV[:3] = R.T @ ref.acc - cross3(self.V[3:], self.V[:3])  # Rᵀ p̈ − ω_b × v_b
        self.dV[3:] = R.T @ ref.alpha  # Rᵀ α
