"""Two-phase docking reference: start → pre-dock point → goal, two rest-to-rest quintics (docs/theory/planners.md).

Geometry (world axes)::

    p_pre = p_goal + standoff · a,     a = ctx.approach_axis_world (unit, out of the target's mouth)

Phase 1 ("approach") moves p_start → p_pre, phase 2 ("docking") moves p_pre → p_goal straight along
−a; each is p(t) = p_a + (p_b − p_a) s(t/T), s(u) = 10u³ − 15u⁴ + 6u⁵, with the shortest duration
that respects the phase's speed and acceleration limits (quintic peak factors, see
:func:`planners.quintic.quintic_duration`)::

    T = max(1.875 L / v_max, sqrt(5.7735 L / a_max)).

Both phases start and end at rest, so the junction at p_pre is C² (zero velocity and acceleration).
The orientation is fixed at R_goal throughout (ω = α = 0): this planner is position-only; the
SE(3) controller gets its body-frame motion through :class:`planners.motion_reference.MotionReference`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from dockbench.planners.base import PLANNERS, Planner, PlannerContext, Reference, Segment, constant_orientation
from dockbench.planners.quintic import quintic_blend, quintic_duration
from dockbench.sim.config import param
from dockbench.sim.errors import ModelError


def approach_axis_unit(ctx: PlannerContext) -> np.ndarray:
    """ctx.approach_axis_world normalised (3,); ModelError if it is (near) zero."""
    axis = np.asarray(ctx.approach_axis_world, dtype=float).reshape(3)
    n = float(np.linalg.norm(axis))
    if not n > 1e-9:
        raise ModelError(f"approach_axis_world must be a non-zero 3-vector, got {axis.tolist()}")
    return axis / n


def pre_dock_pose(ctx: PlannerContext, standoff: float) -> np.ndarray:
    """T_world_predock (4, 4): goal orientation, position p_goal + standoff · approach axis [m]."""
    T = np.array(ctx.T_world_goal, dtype=float).reshape(4, 4).copy()
    T[:3, 3] += standoff * approach_axis_unit(ctx)
    return T


@dataclass(frozen=True)
class TwoPhaseConfig:
    standoff: float = param(
        0.10, unit="m", ge=1e-3, le=1.0, doc="pre-dock distance from the goal along the approach axis"
    )
    approach_v_max: float = param(0.10, unit="m/s", ge=1e-3, le=10.0, doc="peak EE speed, start → pre-dock")
    approach_a_max: float = param(0.20, unit="m/s^2", ge=1e-3, le=100.0, doc="peak EE acceleration, start → pre-dock")
    docking_v_max: float = param(0.02, unit="m/s", ge=1e-3, le=10.0, doc="peak EE speed, pre-dock → goal")
    docking_a_max: float = param(0.05, unit="m/s^2", ge=1e-3, le=100.0, doc="peak EE acceleration, pre-dock → goal")


@PLANNERS.register("two_phase")
class TwoPhasePlanner(Planner):
    """Quintic start → pre-dock → goal with separate approach/docking limits, R_d = R_goal.

    Attributes:
        durations: (T_approach, T_docking) [s].
        pre_dock_pose: (4, 4) T_world_predock (goal orientation).
        waypoints: (3, 3) rows p_start, p_pre, p_goal in world [m].
    """

    Config = TwoPhaseConfig

    def __init__(self, config: TwoPhaseConfig, ctx: PlannerContext):
        super().__init__(config, ctx)
        T_goal = np.array(ctx.T_world_goal, dtype=float).reshape(4, 4)
        self.R_goal = T_goal[:3, :3].copy()
        self._orientation = constant_orientation(self.R_goal)
        self.pre_dock_pose = pre_dock_pose(ctx, config.standoff)
        p_start = np.array(ctx.T_world_start, dtype=float).reshape(4, 4)[:3, 3].copy()
        p_pre = self.pre_dock_pose[:3, 3].copy()
        p_goal = T_goal[:3, 3].copy()
        self.waypoints = np.stack((p_start, p_pre, p_goal))
        self._delta = (p_pre - p_start, p_goal - p_pre)
        lengths = [float(np.linalg.norm(d)) for d in self._delta]
        self.durations: tuple[float, float] = (
            quintic_duration(lengths[0], config.approach_v_max, config.approach_a_max),
            quintic_duration(lengths[1], config.docking_v_max, config.docking_a_max),
        )

    @property
    def total_duration(self) -> float:
        """T_approach + T_docking [s]."""
        return self.durations[0] + self.durations[1]

    @property
    def duration(self) -> float:
        return self.total_duration

    @property
    def segments(self) -> tuple[Segment, ...]:
        t1 = self.durations[0]
        return (Segment("approach", 0.0, t1), Segment("docking", t1, t1 + self.durations[1]))

    def evaluate(self, t: float, out: Reference) -> None:
        T1, T2 = self.durations
        if t < T1:
            k, tau, T = 0, t, T1
        else:
            k, tau, T = 1, t - T1, T2
        if T <= 0.0:
            s, ds, dds = 1.0, 0.0, 0.0
        else:
            s, ds, dds = quintic_blend(tau / T)
            ds /= T
            dds /= T * T
        delta = self._delta[k]
        np.multiply(delta, s, out=out.pos)
        out.pos += self.waypoints[k]
        np.multiply(delta, ds, out=out.vel)
        np.multiply(delta, dds, out=out.acc)
        out.orientation[:] = self._orientation  # R, ω = 0, α = 0 in one copy
