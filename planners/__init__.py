"""Reference planners. Importing this package registers every planner type in :data:`PLANNERS`.

Types: ``quintic``, ``two_phase``, ``se3_topp``, ``figure8`` (see docs/theory/planners.md).
:class:`MotionReference` adapts any of them to the body-frame (T_d, V_d, V̇_d) of the SE(3) controller.
"""

from dockbench.planners import base, figure8, motion_reference, quintic, se3_topp, two_phase  # noqa: F401
from dockbench.planners.base import PLANNERS, Planner, PlannerContext, Reference, Segment
from dockbench.planners.motion_reference import MotionReference

__all__ = ["PLANNERS", "Planner", "PlannerContext", "Reference", "Segment", "MotionReference"]
