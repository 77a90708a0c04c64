"""Planner protocol, the preallocated reference record and the planner registry.

A planner answers one question: where should the end effector (EE) be at time ``t``? It fills a
preallocated :class:`Reference` in place (no per-step allocation in the control loop). All planners
hold their final state after ``duration``.

Frames: everything in :class:`Reference` is in WORLD axes. ``pos`` is the EE origin in world [m],
``vel`` [m/s], ``acc`` [m/s²]; ``R`` is ``R_world_des`` (desired EE orientation), ``omega`` and
``alpha`` the desired angular velocity [rad/s] and acceleration [rad/s²] in world axes. Position-only
planners set ``R`` to a fixed orientation and ``omega = alpha = 0``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from dockbench.sim.registry import Registry


class Reference:
    """Desired EE motion at one instant, world axes (see module docstring). Mutated in place."""

    __slots__ = ("pos", "vel", "acc", "R", "omega", "alpha", "orientation", "pva", "flat")

    def __init__(self) -> None:
        # One buffer, views into it: pos, vel, acc side by side (the telemetry records them with one
        # copy), then ``orientation`` = [R row-major (9), ω (3), α (3)], which a planner with a constant
        # orientation fills with one copy.
        buf = np.zeros(24)
        self.flat = buf  # [pos, vel, acc, R row-major, ω, α]: read in one tolist()
        self.pva = buf[0:9]  # [pos, vel, acc]: written in one copy
        self.pos = buf[0:3]
        self.vel = buf[3:6]
        self.acc = buf[6:9]
        self.orientation = buf[9:24]
        self.R = buf[9:18].reshape(3, 3)
        self.R[...] = np.eye(3)
        self.omega = buf[18:21]
        self.alpha = buf[21:24]

    def copy(self) -> Reference:
        out = Reference()
        for name in ("pos", "vel", "acc", "orientation"):
            getattr(out, name)[...] = getattr(self, name)
        return out


def constant_orientation(R: np.ndarray) -> np.ndarray:
    """The (15,) :attr:`Reference.orientation` block of a constant orientation R (ω = α = 0)."""
    return np.concatenate([np.asarray(R, dtype=float).reshape(9), np.zeros(6)])


@dataclass(frozen=True)
class Segment:
    """A named time interval of a planner's reference, for per-segment metrics [s]."""

    name: str
    t0: float
    t1: float


@dataclass(frozen=True)
class PlannerContext:
    """What a planner knows about the scene when it is built.

    Attributes:
        T_world_start: (4, 4) EE pose at t = 0 (from the initial configuration).
        T_world_goal: (4, 4) EE pose at the end of the docking (the seated pose the planner believes).
        approach_axis_world: (3,) unit vector pointing OUT of the target's mouth along its mating axis;
            the tool moves along ``-approach_axis_world`` to insert. The pre-dock point of two-phase
            planners is ``p_goal + standoff * approach_axis_world``.
    """

    T_world_start: np.ndarray
    T_world_goal: np.ndarray
    approach_axis_world: np.ndarray


class Planner(ABC):
    """Base class: subclasses declare ``Config`` (a frozen dataclass of their YAML keys), build
    their reference in ``__init__`` and implement :meth:`evaluate`."""

    Config: ClassVar[type]
    type_name: ClassVar[str]

    def __init__(self, config: Any, ctx: PlannerContext):
        self.config = config
        self.ctx = ctx

    @property
    @abstractmethod
    def duration(self) -> float:
        """Time [s] after which the reference holds still."""

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Named intervals for per-segment metrics; default: one segment covering the motion."""
        return (Segment("motion", 0.0, self.duration),)

    @abstractmethod
    def evaluate(self, t: float, out: Reference) -> None:
        """Fill ``out`` with the desired EE motion at time ``t`` [s] (hold after ``duration``)."""

    def state(self, t: float) -> Reference:
        """Allocating convenience wrapper around :meth:`evaluate` (not for the hot loop)."""
        out = Reference()
        self.evaluate(t, out)
        return out


PLANNERS: Registry[Planner] = Registry("planner")
