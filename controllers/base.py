"""Controller protocol, the command record and the controller registry.

A controller turns (snapshot, reference, wrench) into joint torques. It never calls Pinocchio or
MuJoCo itself: everything it needs is in :class:`sim.dynamics.Snapshot` (computed once per step),
:class:`planners.base.Reference` (world-frame desired motion) and :class:`sim.wrench.WrenchState`
(F_ext = environment on tool). Clipping to actuator limits and logging happen in the loop, once.

Diagnostics: a controller declares ``diag_names`` (a tuple of scalar channel names, e.g.
``("qp_solve_time", "qp_status")``); it writes their values into ``Command.diag`` each step and the
loop logs them as telemetry channels ``ctrl_<name>``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from planners.base import Planner, Reference
from sim.dynamics import Snapshot
from sim.registry import Registry
from sim.wrench import WrenchState


class Command:
    """Controller output: ``tau`` (nv,) [N·m] before clipping, ``diag`` (len(diag_names),)."""

    __slots__ = ("tau", "diag")

    def __init__(self, nv: int, ndiag: int):
        self.tau = np.zeros(nv)
        self.diag = np.zeros(ndiag)


@dataclass(frozen=True)
class PlantInfo:
    """Constant facts about the controlled arm, read from the assembled MjModel.

    Attributes:
        nv: number of arm joints.
        joint_names: arm joint names, base to tip.
        tau_max: (nv,) per-joint torque limits [N·m] (the tighter of the actuator limit and the
            scenario's uniform ``max_torque``).
        q_min, q_max: (nv,) joint position limits [rad].
        v_max: (nv,) joint velocity limits [rad/s].
        dof_damping: (nv,) viscous joint damping of the MjModel [N·m·s/rad].
        dof_frictionloss: (nv,) dry friction of the MjModel [N·m].
        control_period: [s].
        q_home: (nv,) nominal posture [rad] (posture tasks).
    """

    nv: int
    joint_names: tuple[str, ...]
    tau_max: np.ndarray
    q_min: np.ndarray
    q_max: np.ndarray
    v_max: np.ndarray
    dof_damping: np.ndarray
    dof_frictionloss: np.ndarray
    control_period: float
    q_home: np.ndarray


class Controller(ABC):
    """Base class. Subclasses declare ``Config`` and implement :meth:`compute`.

    Args:
        config: the parsed ``controller:`` block (frozen dataclass ``Config``).
        plant: constant facts about the arm.
        planner: the scenario's planner (controllers needing body-frame motion wrap it in
            :class:`planners.motion_reference.MotionReference`).
    """

    Config: ClassVar[type]
    type_name: ClassVar[str]
    diag_names: tuple[str, ...] = ()
    #: whether compute() reads the LOCAL (body) Jacobian quantities of the snapshot; when False the
    #: loop's dynamics pass skips them
    needs_body_frame: ClassVar[bool] = False
    #: whether compute() reads ``Snapshot.T_world_sensor``; when False (and no momentum observer is
    #: the force source) the dynamics pass skips it
    needs_sensor_pose: ClassVar[bool] = False
    #: whether compute() reads ``Snapshot.dJdq_ee_lwa`` (the world-axes classical acceleration drift);
    #: body-frame controllers that do not set it save that Pinocchio call
    needs_world_drift: ClassVar[bool] = True

    def __init__(self, config: Any, plant: PlantInfo, planner: Planner | None = None):
        self.config = config
        self.plant = plant
        self.planner = planner

    def make_command(self) -> Command:
        return Command(self.plant.nv, len(self.diag_names))

    def reset(self, snap: Snapshot, ref: Reference) -> None:  # noqa: B027 - optional hook
        """Called once before the first step with the initial state."""

    @abstractmethod
    def compute(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        """Write joint torques [N·m] into ``cmd.tau`` (and diagnostics into ``cmd.diag``)."""

    def summary(self) -> dict[str, Any]:
        """Run-level counters for summary.json (e.g. QP fallbacks). Default: none."""
        return {}

    #: the compiled kernel module (sim/kernels.py) of controllers that have one; None: the Python path
    _kmod: Any = None
    #: (snap, ref, wrench, cmd, config) a compiled kernel is bound to (controllers with a kernel)
    _bound: tuple = ()
    #: steps a compiled kernel handed back to the Python path
    kernel_fallbacks: int = 0

    @property
    def kernel(self) -> str:
        """Which implementation runs :meth:`compute`: ``compiled`` (a C kernel) or ``python``."""
        return "compiled" if self._kmod is not None else "python"

    def kernel_summary(self) -> dict[str, Any]:
        """The ``kernel`` and ``kernel_fallbacks`` entries of :meth:`summary`."""
        return {"kernel": self.kernel, "kernel_fallbacks": self.kernel_fallbacks}

    def _kernel_bound_to(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> bool:
        """True when the compiled kernel is bound to these objects and to the current config (a run's
        arrays never move, so one identity check per step decides whether to bind again)."""
        b = self._bound
        return bool(b) and b[0] is snap and b[1] is ref and b[2] is wrench and b[3] is cmd and b[4] is self.config


CONTROLLERS: Registry[Controller] = Registry("controller")
