"""SE(3) time-optimal screw planner, Ren & Shan §3.1, Theorem 1 (docs/theory/planners.md).

Path. Three poses T1 = T_world_start, T2 = pre-dock (goal ORIENTATION, position
p_goal + standoff · approach axis), T3 = T_world_goal; two segments, each the constant-screw geodesic ::

    T(s) = T_a Exp(s ξ),   ξ = log(T_a⁻¹ T_b) = [ξ_v; ξ_ω] (body twist, [m; rad]),   s ∈ [0, 1].

Because ξ is constant, the body twist and its derivative are exactly (sim/lie.py conventions) ::

    V_d = ξ ṡ,   V̇_d = ξ s̈        (body axes of T(s), [v; ω]).

Theorem 1. Per-component limits |V_j| ≤ V̄_j and |V̇_j| ≤ Ā_j (j = 1..6: three linear components with
the phase's linear limit, three angular with the angular limit) collapse to the scalar bounds ::

    ṡ ≤ ṡ_max = min_j V̄_j / |ξ_j|,    |s̈| ≤ s̈_max = min_j Ā_j / |ξ_j|      (over ξ_j ≠ 0).

Rest-to-rest time-optimal profile on s ∈ [0, 1] (bang–coast–bang): with v = ṡ_max, a = s̈_max ::

    trapezoid (v² < a):  T = 1/v + v/a     (accelerate for v/a, cruise, decelerate for v/a)
    triangle  (v² ≥ a):  T = 2/√a          (peak ṡ = √a at T/2)

At every instant either ṡ = ṡ_max or |s̈| = s̈_max, so at least one component limit is active.
Note the profile's s̈ is piecewise constant: the reference acceleration jumps at the switching times
(that is what time-optimality with acceleration limits means; no jerk limit).

World reference filled by :meth:`SE3TOPPPlanner.evaluate` (base.Reference, world axes), with
v_b = ξ_v ṡ, ω_b = ξ_ω ṡ, R = R(s) ::

    pos = p(s),  vel = R v_b,  acc = R v̇_b + ω × vel,  omega = R ω_b,  alpha = R ω̇_b.

Angular-acceleration defaults (the paper gives only the angular speed limits 0.20 / 0.05 rad/s):
0.40 rad/s² (approach) and 0.125 rad/s² (docking), i.e. the same acceleration-to-speed ratio as the
linear limits of each phase (2 s⁻¹ and 2.5 s⁻¹), so both kinds of limit reach full speed in the same
time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from dockbench.planners.base import PLANNERS, Planner, PlannerContext, Reference, Segment
from dockbench.planners.two_phase import pre_dock_pose
from dockbench.sim.config import param
from dockbench.sim.lie import se3_exp, se3_inv, se3_log

#: |ξ_j| at or below which a component is treated as zero in Theorem 1's min (no bound from it).
XI_ZERO = 1e-12


class RestToRestProfile:
    """Time-optimal rest-to-rest s(t) on [0, 1] under ṡ ≤ sd_max [1/s], |s̈| ≤ sdd_max [1/s²].

    Attributes:
        sd_max, sdd_max: the bounds.
        sd_peak: reached speed, min(sd_max, √sdd_max) [1/s].
        t_acc: length of the acceleration (and of the deceleration) phase [s].
        t_cruise: length of the constant-speed phase [s] (0 for a triangle).
        duration: T = 2 t_acc + t_cruise [s]; 1/v + v/a (trapezoid) or 2/√a (triangle).
        triangle: True when v² ≥ a.
    """

    __slots__ = ("sd_max", "sdd_max", "sd_peak", "t_acc", "t_cruise", "duration", "triangle", "_s_acc")

    def __init__(self, sd_max: float, sdd_max: float):
        if not (sd_max > 0.0 and sdd_max > 0.0):
            raise ValueError(f"bounds must be > 0, got sd_max={sd_max}, sdd_max={sdd_max}")
        self.sd_max = float(sd_max)
        self.sdd_max = float(sdd_max)
        self.triangle = self.sd_max * self.sd_max >= self.sdd_max
        self.sd_peak = math.sqrt(self.sdd_max) if self.triangle else self.sd_max
        self.t_acc = self.sd_peak / self.sdd_max
        self._s_acc = 0.5 * self.sdd_max * self.t_acc * self.t_acc
        self.t_cruise = 0.0 if self.triangle else (1.0 - 2.0 * self._s_acc) / self.sd_peak
        self.duration = 2.0 * self.t_acc + self.t_cruise

    def __call__(self, t: float) -> tuple[float, float, float]:
        """(s, ṡ, s̈) at time t [s] (0 before the start, 1 after the end, at rest)."""
        if t <= 0.0:
            return 0.0, 0.0, 0.0
        T = self.duration
        if t >= T:
            return 1.0, 0.0, 0.0
        a = self.sdd_max
        if t < self.t_acc:
            return 0.5 * a * t * t, a * t, a
        t_dec = self.t_acc + self.t_cruise
        if t < t_dec:
            return self._s_acc + self.sd_peak * (t - self.t_acc), self.sd_peak, 0.0
        tau = T - t
        return 1.0 - 0.5 * a * tau * tau, a * tau, -a


def theorem1_bounds(xi: np.ndarray, v_lim: np.ndarray, a_lim: np.ndarray) -> tuple[float, float]:
    """(ṡ_max, s̈_max) = (min_j V̄_j/|ξ_j|, min_j Ā_j/|ξ_j|) over |ξ_j| > XI_ZERO; (inf, inf) if ξ = 0."""
    mag = np.abs(np.asarray(xi, dtype=float))
    mask = mag > XI_ZERO
    if not mask.any():
        return math.inf, math.inf
    return float(np.min(v_lim[mask] / mag[mask])), float(np.min(a_lim[mask] / mag[mask]))


class ScrewSegment:
    """One constant-screw segment T(s) = T_a Exp(s ξ) with its time-optimal profile.

    Args:
        name: segment name for metrics ("approach", "docking").
        T_a, T_b: (4, 4) world poses at s = 0 and s = 1.
        v_lim: (6,) per-component body twist limits [m/s ×3, rad/s ×3].
        a_lim: (6,) per-component body acceleration limits [m/s² ×3, rad/s² ×3].
        t0: start time of the segment in the planner's clock [s].
    """

    def __init__(
        self,
        name: str,
        T_a: np.ndarray,
        T_b: np.ndarray,
        v_lim: np.ndarray,
        a_lim: np.ndarray,
        t0: float = 0.0,
    ):
        self.name = name
        self.T_a = np.array(T_a, dtype=float).reshape(4, 4)
        self.T_b = np.array(T_b, dtype=float).reshape(4, 4)
        self.v_lim = np.array(v_lim, dtype=float).reshape(6)
        self.a_lim = np.array(a_lim, dtype=float).reshape(6)
        self.xi = se3_log(se3_inv(self.T_a) @ self.T_b)
        self.sd_max, self.sdd_max = theorem1_bounds(self.xi, self.v_lim, self.a_lim)
        self.profile = None if math.isinf(self.sd_max) else RestToRestProfile(self.sd_max, self.sdd_max)
        self.t0 = float(t0)
        self._sxi = np.empty(6)
        self._T_end: np.ndarray | None = None  # T_a Exp(ξ) as motion_into computed it at s = 1 (then copied)

    @property
    def duration(self) -> float:
        """Segment time [s] (0 for a zero-length segment)."""
        return 0.0 if self.profile is None else self.profile.duration

    def s_profile(self, t: float) -> tuple[float, float, float]:
        """(s, ṡ, s̈) at planner time t [s]."""
        if self.profile is None:
            return (1.0 if t >= self.t0 else 0.0), 0.0, 0.0
        return self.profile(t - self.t0)

    def motion_into(self, t: float, T_out: np.ndarray, V_out: np.ndarray, dV_out: np.ndarray) -> None:
        """T_out (4, 4) = T_a Exp(s ξ), V_out (6,) = ξ ṡ, dV_out (6,) = ξ s̈ (body) at planner time t."""
        s, sd, sdd = self.s_profile(t)
        if s == 1.0 and self._T_end is not None:  # at the end (T_b, held at rest): the pose the first such call made
            T_out[...] = self._T_end
        else:
            np.multiply(self.xi, s, out=self._sxi)
            self.T_a.dot(se3_exp(self._sxi), out=T_out)  # ndarray.dot: np.matmul's BLAS call, less call overhead
            if s == 1.0:
                self._T_end = T_out.copy()
        np.multiply(self.xi, sd, out=V_out)
        np.multiply(self.xi, sdd, out=dV_out)


@dataclass(frozen=True)
class SE3TOPPConfig:
    standoff: float = param(
        0.10, unit="m", ge=1e-3, le=1.0, doc="pre-dock distance from the goal along the approach axis"
    )
    approach_v_max: float = param(0.10, unit="m/s", ge=1e-3, le=10.0, doc="per-axis body linear speed limit, approach")
    approach_a_max: float = param(
        0.20, unit="m/s^2", ge=1e-3, le=100.0, doc="per-axis body linear accel. limit, approach"
    )
    approach_w_max: float = param(
        0.20, unit="rad/s", ge=1e-3, le=20.0, doc="per-axis body angular speed limit, approach"
    )
    approach_alpha_max: float = param(
        0.40, unit="rad/s^2", ge=1e-3, le=200.0, doc="per-axis body angular accel. limit, approach"
    )
    docking_v_max: float = param(0.02, unit="m/s", ge=1e-3, le=10.0, doc="per-axis body linear speed limit, docking")
    docking_a_max: float = param(
        0.05, unit="m/s^2", ge=1e-3, le=100.0, doc="per-axis body linear accel. limit, docking"
    )
    docking_w_max: float = param(0.05, unit="rad/s", ge=1e-3, le=20.0, doc="per-axis body angular speed limit, docking")
    docking_alpha_max: float = param(
        0.125, unit="rad/s^2", ge=1e-3, le=200.0, doc="per-axis body angular accel. limit, docking"
    )

    def limits(self, phase: str) -> tuple[np.ndarray, np.ndarray]:
        """(v_lim (6,), a_lim (6,)) per-component body limits of ``phase`` ("approach"/"docking")."""
        v, a, w, al = (getattr(self, f"{phase}_{k}") for k in ("v_max", "a_max", "w_max", "alpha_max"))
        return np.array([v, v, v, w, w, w]), np.array([a, a, a, al, al, al])


@PLANNERS.register("se3_topp")
class SE3TOPPPlanner(Planner):
    """T1 → T2 (pre-dock, goal orientation) → T3 along constant screws, time-optimal per segment.

    Attributes:
        durations: (T_approach, T_docking) [s].
        pre_dock_pose: (4, 4) T_world_predock.
        screw_segments: the two :class:`ScrewSegment` (ξ, bounds, profile).
    """

    Config = SE3TOPPConfig

    def __init__(self, config: SE3TOPPConfig, ctx: PlannerContext):
        super().__init__(config, ctx)
        T1 = np.array(ctx.T_world_start, dtype=float).reshape(4, 4)
        T3 = np.array(ctx.T_world_goal, dtype=float).reshape(4, 4)
        self.pre_dock_pose = pre_dock_pose(ctx, config.standoff)
        approach = ScrewSegment("approach", T1, self.pre_dock_pose, *config.limits("approach"), t0=0.0)
        docking = ScrewSegment(
            "docking", self.pre_dock_pose, T3, *config.limits("docking"), t0=approach.duration
        )
        self.screw_segments: tuple[ScrewSegment, ScrewSegment] = (approach, docking)
        self.durations: tuple[float, float] = (approach.duration, docking.duration)
        self._T = np.empty((4, 4))
        self._V = np.empty(6)
        self._dV = np.empty(6)
        #: the time whose motion _T, _V, _dV hold (set by evaluate): the loop evaluates the world
        #: reference and an SE(3) controller then asks motion_into for the same t, which copies it
        self._motion_t: float | None = None

    @property
    def total_duration(self) -> float:
        """T_approach + T_docking [s]."""
        return self.durations[0] + self.durations[1]

    @property
    def duration(self) -> float:
        return self.total_duration

    @property
    def segments(self) -> tuple[Segment, ...]:
        return tuple(Segment(g.name, g.t0, g.t0 + g.duration) for g in self.screw_segments)

    def _segment_at(self, t: float) -> ScrewSegment:
        return self.screw_segments[0] if t < self.screw_segments[1].t0 else self.screw_segments[1]

    def motion_into(self, t: float, T_out: np.ndarray, V_out: np.ndarray, dV_out: np.ndarray) -> None:
        """Desired body motion at time t [s], in place: T_out (4, 4) = T_world_des,
        V_out (6,) = ξ ṡ, dV_out (6,) = ξ s̈ (body axes, [v; ω]). Holds T3 at rest after the end.
        At the time of the last :meth:`evaluate` the motion it computed is copied (the same floats)."""
        if t == self._motion_t and T_out is not self._T:
            T_out[...] = self._T
            V_out[...] = self._V
            dV_out[...] = self._dV
            return
        self._segment_at(t).motion_into(t, T_out, V_out, dV_out)

    def motion(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Allocating variant of :meth:`motion_into`: (T_d (4, 4), V_d (6,), V̇_d (6,))."""
        T, V, dV = np.empty((4, 4)), np.empty(6), np.empty(6)
        self.motion_into(t, T, V, dV)
        return T, V, dV

    def evaluate(self, t: float, out: Reference) -> None:
        T, V, dV = self._T, self._V, self._dV
        if t != self._motion_t:  # the same t again (a clock held still, e.g. the insertion guard's): the same motion
            self._segment_at(t).motion_into(t, T, V, dV)
            self._motion_t = t
        R = T[:3, :3]
        out.R[...] = R
        out.pos[...] = T[:3, 3]
        R.dot(V[:3], out=out.vel)
        R.dot(V[3:], out=out.omega)
        R.dot(dV[3:], out=out.alpha)
        R.dot(dV[:3], out=out.acc)
        w, v = out.omega, out.vel
        out.acc[0] += w[1] * v[2] - w[2] * v[1]
        out.acc[1] += w[2] * v[0] - w[0] * v[2]
        out.acc[2] += w[0] * v[1] - w[1] * v[0]
