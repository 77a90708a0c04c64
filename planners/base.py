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

from sim.registry import Registry


class Reference:
    """Desired EE motion at one instant, world axes (see module docstring). Mutated in place."""

    __slots__ = ("pos", "vel", "acc", "R", "omega", "alpha")

    def __init__(self) -> None:
        pva = np.zeros(9)  # pos, vel, acc side by side: the telemetry records them with one copy
        self.pos = pva[0:3]
        self.vel = pva[3:6]
        self.acc = pva[6:9]
        self.R = np.eye(3)
        self.omega = np.zeros(3)
        self.alpha = np.zeros(3)

    def copy(self) -> Reference:
        out = Reference()
        for name in self.__slots__:
            getattr(out, name)[...] = getattr(self, name)
        return out


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
