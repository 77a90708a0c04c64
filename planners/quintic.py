"""Decoupled rest-to-rest quintic (docs/theory/planners.md).

Per axis, p(t) = p0 + (p1 − p0) s(u), u = t/T, s(u) = 10u³ − 15u⁴ + 6u⁵. Peak factors:
max ṡ = 1.875/T (at u = ½), max s̈ = 5.7735/T² (at u = ½ ∓ √3/6), so a segment of length L under
limits v_max, a_max needs T = max(1.875 L / v_max, sqrt(5.7735 L / a_max)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from dockbench.planners.base import PLANNERS, Planner, PlannerContext, Reference, constant_orientation
from dockbench.sim.config import param

#: max_u |s'(u)| of the quintic blend, at u = 1/2.
QUINTIC_PEAK_VEL = 1.875
#: max_u |s''(u)| of the quintic blend, at u = 1/2 ± sqrt(3)/6, equal to 10/sqrt(3).
QUINTIC_PEAK_ACC = 10.0 / math.sqrt(3.0)


def quintic_blend(u: float) -> tuple[float, float, float]:
    """s(u), s'(u), s''(u) of the rest-to-rest quintic on u ∈ [0, 1], clamped outside."""
    if u <= 0.0:
        return 0.0, 0.0, 0.0
    if u >= 1.0:
        return 1.0, 0.0, 0.0
    u2 = u * u
    u3 = u2 * u
    s = u3 * (10.0 - 15.0 * u + 6.0 * u2)
    ds = 30.0 * u2 * (1.0 - 2.0 * u + u2)
    dds = 60.0 * u * (1.0 - 3.0 * u + 2.0 * u2)
    return s, ds, dds


def quintic_duration(length: float, v_max: float, a_max: float) -> float:
    """Shortest quintic duration [s] for a straight segment of ``length`` [m] under v_max [m/s]
    and a_max [m/s²]: T = max(1.875 L / v_max, sqrt(5.7735 L / a_max))."""
    if length <= 0.0:
        return 0.0
    return max(QUINTIC_PEAK_VEL * length / v_max, math.sqrt(QUINTIC_PEAK_ACC * length / a_max))


@dataclass(frozen=True)
class QuinticConfig:
    duration: float | None = param(
        None, unit="s", ge=1e-3, le=3600.0, doc="motion time; null = shortest time under v_max / a_max"
    )
    v_max: float = param(0.05, unit="m/s", ge=1e-3, le=10.0, doc="peak EE speed used when duration is null")
    a_max: float = param(0.10, unit="m/s^2", ge=1e-3, le=100.0, doc="peak EE acceleration used when duration is null")


@PLANNERS.register("quintic")
class QuinticPlanner(Planner):
    """Straight line start → goal with a quintic time law, fixed orientation R_d = R_goal."""

    Config = QuinticConfig

    def __init__(self, config: QuinticConfig, ctx: PlannerContext):
        super().__init__(config, ctx)
        self.p0 = np.array(ctx.T_world_start[:3, 3], dtype=float)
        self.p1 = np.array(ctx.T_world_goal[:3, 3], dtype=float)
        self.R_goal = np.array(ctx.T_world_goal[:3, :3], dtype=float)
        self._orientation = constant_orientation(self.R_goal)
        self.delta = self.p1 - self.p0
        self._p0_t = tuple(self.p0.tolist())
        self._delta_t = tuple(self.delta.tolist())
        length = float(np.linalg.norm(self.delta))
        if config.duration is not None:
            self._T = float(config.duration)
        else:
            self._T = quintic_duration(length, config.v_max, config.a_max)

    @property
    def duration(self) -> float:
        return self._T

    def evaluate(self, t: float, out: Reference) -> None:
        T = self._T
        if T <= 0.0:
            s, ds, dds = 1.0, 0.0, 0.0
        else:
            s, ds, dds = quintic_blend(t / T)
            ds /= T
            dds /= T * T
        # 3-vectors on Python floats (cheaper than numpy calls at this size), same products as
        # delta·s + p0, delta·ṡ, delta·s̈
        dx, dy, dz = self._delta_t
        px, py, pz = self._p0_t
        out.pva[:] = (dx * s + px, dy * s + py, dz * s + pz, dx * ds, dy * ds, dz * ds, dx * dds, dy * dds, dz * dds)
        out.orientation[:] = self._orientation  # R, ω = 0, α = 0 in one copy
