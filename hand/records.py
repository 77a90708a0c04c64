"""The G20 hand bridge's records: its configuration (:class:`BridgeConfig`, :class:`DriveMode`), what a command
and a step return (:class:`CommandResult`, :class:`StepResult`) and the readouts (:class:`HandState`,
:class:`BridgeSnapshot`). All joint vectors are (21,) in the spec's joint-table order [rad]
(docs/theory/g20_hand.md); the bridge itself is :class:`hand.bridge.HandBridge`.
"""

from __future__ import annotations

import dataclasses
import enum
import math

import numpy as np
from dockbench.sim.errors import ScenarioError


class DriveMode(str, enum.Enum):
    """How the bridge moves the hand."""

    KINEMATIC = "kinematic"
    """Hard-write qpos (qvel = 0) + mj_forward, with optional collision projection."""
    PD = "pd"
    """Position actuators track the nominal target, mj_step integrates."""


@dataclasses.dataclass(frozen=True)
class BridgeConfig:
    """Bridge settings (validated on construction).

    Attributes:
        mode: :class:`DriveMode` (or its string value).
        slew_rad_s: slew limit of the active joints [rad/s]; mimic joints get ``ratio·slew``; 0 = jump.
        collision_project: kinematic mode: project penetrating candidates (docs/theory/g20_hand.md §4).
        penetration_tol_m: a contact distance below ``-penetration_tol_m`` is a penetration [m].
        bisections: bisection steps per blocked joint.
        hand_hand_only: consider only contacts between two hand geoms (default: at least one).
        state_rate_hz: rate of the published state readout [Hz] (at most once per step).
        dt: control period [s]; ``None`` = ``model.opt.timestep``. PD mode runs
            ``round(dt / timestep)`` mj_step substeps per bridge step.
    """

    mode: DriveMode = DriveMode.KINEMATIC
    slew_rad_s: float = 5.0
    collision_project: bool = True
    penetration_tol_m: float = 5e-4
    bisections: int = 12
    hand_hand_only: bool = False
    state_rate_hz: float = 100.0
    dt: float | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "mode", DriveMode(self.mode))
        except ValueError:
            raise ScenarioError(
                f"got {self.mode!r}; allowed: {', '.join(m.value for m in DriveMode)}", key="hand.mode"
            ) from None
        checks = (
            ("slew_rad_s", self.slew_rad_s >= 0 and math.isfinite(self.slew_rad_s), "must be >= 0 rad/s"),
            ("penetration_tol_m", self.penetration_tol_m >= 0, "must be >= 0 m"),
            ("bisections", isinstance(self.bisections, int) and 0 <= self.bisections <= 60, "must be 0..60"),
            ("state_rate_hz", self.state_rate_hz > 0, "must be > 0 Hz"),
            ("dt", self.dt is None or self.dt > 0, "must be > 0 s"),
        )
        for key, ok, msg in checks:
            if not ok:
                raise ScenarioError(f"{msg}, got {getattr(self, key)!r}", key=f"hand.{key}")


@dataclasses.dataclass(frozen=True)
class CommandResult:
    """Outcome of one command.

    Attributes:
        accepted: False if the command was refused whole (the goal is unchanged).
        reason: why it was refused ('' if accepted).
        clipped_joints: joints whose commanded angle was outside the model range and was clipped.
        clamped_channels: SDK channels whose value was outside 0..255 and was clamped.
        seq: goal sequence number after this command (unchanged when refused).
    """

    accepted: bool
    reason: str = ""
    clipped_joints: tuple[str, ...] = ()
    clamped_channels: tuple[int, ...] = ()
    seq: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class StepResult:
    """Diagnostics of one bridge step.

    Attributes:
        step: step counter after this step.
        time: bridge time after this step [s] (step·dt).
        projected: kinematic mode: the candidate penetrated and the per-joint projection ran.
        fell_back: the projection result still penetrated and ``last_safe`` was written.
        min_distance: smallest considered contact distance of the final pose [m] (inf: no contact).
        tracking_error: max |applied - nominal| over the active joints [rad].
        evaluations: collision evaluations (kinematics + collision) used by this step.
    """

    step: int
    time: float
    projected: bool
    fell_back: bool
    min_distance: float
    tracking_error: float
    evaluations: int


@dataclasses.dataclass(frozen=True)
class HandState:
    """Joint-state readout (like sensor_msgs/JointState), published at ``state_rate_hz``.

    Attributes:
        time: bridge time [s]. step: step counter.
        names: joint names (no prefix), spec table order.
        positions: joint angles [rad] (read-only copy). velocities: joint rates [rad/s] (read-only copy;
            kinematic mode: finite difference of ``applied`` over one step).
    """

    time: float
    step: int
    names: tuple[str, ...]
    positions: np.ndarray
    velocities: np.ndarray


@dataclasses.dataclass(frozen=True)
class BridgeSnapshot:
    """Copies of the four bridge states (each (21,) [rad], spec table order) and the goal sequence."""

    goal: np.ndarray
    nominal: np.ndarray
    applied: np.ndarray
    last_safe: np.ndarray
    goal_seq: int
    step: int


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float, copy=True)
    a.setflags(write=False)
    return a
