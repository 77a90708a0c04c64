"""Adapter: any planner → desired BODY motion (T_d, V_d, V̇_d) for the SE(3) controller (MATH.md §4, §5).

* SE(3) planners (they define ``motion_into(t, T_out, V_out, dV_out)``, e.g. se3_topp) pass through.
* Position-only planners fill the world :class:`~planners.base.Reference`; with R = ref.R,
  ṗ = ref.vel, p̈ = ref.acc, ω = ref.omega, α = ref.alpha (world axes) ::

      T_d = [[R, p], [0, 1]]
      V_d = [Rᵀ ṗ; Rᵀ ω] = [v_b; ω_b]                          (body twist of T_d, [v; ω])
      V̇_d = d/dt V_d = [Rᵀ p̈ − ω_b × v_b; Rᵀ α]              (from Ṙᵀ = −ω_b^ Rᵀ)

  For the fixed-orientation planners (ω = α = 0) this reduces to V_d = [R_dᵀ ṗ; 0],
  V̇_d = [R_dᵀ p̈; 0] (MATH.md §5), but the general form is exact for any planner.
"""

from __future__ import annotations

import numpy as np

from planners.base import Planner, Reference

#: T_d as 12 floats: the rows of R_d, then p_d
BodyPose = tuple[float, float, float, float, float, float, float, float, float, float, float, float]
Vec6 = tuple[float, float, float, float, float, float]


class MotionReference:
    """Preallocated body-frame desired motion of a planner; call :meth:`update` (or
    :meth:`update_from_reference`) once per step, or :meth:`floats_from_reference` for the same
    motion as Python floats (the SE(3) controller's path; no array writes).

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

    def floats_from_reference(self, ref: Reference, t: float) -> tuple[BodyPose, Vec6, Vec6]:
        """The desired motion of :meth:`update_from_reference` as Python floats, for the 1 kHz loop:
        (T_d = (R00, R01, R02, R10, …, R22, p0, p1, p2) [rows of R, then p; m], V_d (6) [m/s; rad/s],
        V̇_d (6) [m/s²; rad/s²]), equal to the arrays bit for bit. Position-only planners: :attr:`T`,
        :attr:`V`, :attr:`dV` are NOT filled (no array writes; call :meth:`update_from_reference` for
        them); pass-through planners fill them (``motion_into`` writes arrays) and they are read back."""
        if self.passthrough:
            self._motion_into(t, self.T, self.V, self.dV)
            (r00, r01, r02, p0), (r10, r11, r12, p1), (r20, r21, r22, p2), _ = self.T.tolist()
            return (
                (r00, r01, r02, r10, r11, r12, r20, r21, r22, p0, p1, p2),
                tuple(self.V.tolist()),
                tuple(self.dV.tolist()),
            )
        return _body_motion(ref)

    def _from_world(self, ref: Reference) -> None:
        """T, V, dV of the world reference ``ref`` (module docstring), on Python floats."""
        (r00, r01, r02, r10, r11, r12, r20, r21, r22, p0, p1, p2), V, dV = _body_motion(ref)
        self.T[:3] = ((r00, r01, r02, p0), (r10, r11, r12, p1), (r20, r21, r22, p2))
        self.V[:] = V
        self.dV[:] = dV


def _body_motion(ref: Reference) -> tuple[BodyPose, Vec6, Vec6]:
    """(T_d as 12 floats: rows of R then p, V_d, V̇_d) of the world reference ``ref`` (module docstring)."""
    # ref.flat = [pos, vel (ṗ), acc (p̈), R row-major, ω, α], one read
    (p0, p1, p2, a0, a1, a2, c0, c1, c2, r00, r01, r02, r10, r11, r12, r20, r21, r22, b0, b1, b2, e0, e1, e2) = (
        ref.flat.tolist()
    )
    T = (r00, r01, r02, r10, r11, r12, r20, r21, r22, p0, p1, p2)
    # Rᵀ x: column k of R dotted with x
    v0 = r00 * a0 + r10 * a1 + r20 * a2
    v1 = r01 * a0 + r11 * a1 + r21 * a2
    v2 = r02 * a0 + r12 * a1 + r22 * a2
    g0 = r00 * c0 + r10 * c1 + r20 * c2
    g1 = r01 * c0 + r11 * c1 + r21 * c2
    g2 = r02 * c0 + r12 * c1 + r22 * c2
    if not (b0 or b1 or b2 or e0 or e1 or e2):
        # ω = α = 0 (the fixed-orientation planners): V_d = [Rᵀ ṗ; 0], V̇_d = [Rᵀ p̈; 0], the general
        # formulas below with their exact zeros left out
        return T, (v0, v1, v2, 0.0, 0.0, 0.0), (g0, g1, g2, 0.0, 0.0, 0.0)
    w0 = r00 * b0 + r10 * b1 + r20 * b2
    w1 = r01 * b0 + r11 * b1 + r21 * b2
    w2 = r02 * b0 + r12 * b1 + r22 * b2
    # V̇_d = [Rᵀ p̈ − ω_b × v_b; Rᵀ α]
    return (
        T,
        (v0, v1, v2, w0, w1, w2),
        (
            g0 - (w1 * v2 - w2 * v1),
            g1 - (w2 * v0 - w0 * v2),
            g2 - (w0 * v1 - w1 * v0),
            r00 * e0 + r10 * e1 + r20 * e2,
            r01 * e0 + r11 * e1 + r21 * e2,
            r02 * e0 + r12 * e1 + r22 * e2,
        ),
    )
