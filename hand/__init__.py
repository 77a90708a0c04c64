"""The LinkerHand G20 (left) kinematic hand: spec, SDK mapping and the MuJoCo bridge.

* :mod:`hand.spec`    joint table, SDK tables, mimic ratios and presets (``assets/hands/*_spec.yaml``);
* :mod:`hand.mapping` SDK 0..255 <-> rad, mimic completion, command validation (docs/theory/g20_hand.md §2);
* :mod:`hand.bridge`  goal / nominal / applied / last-safe state, slew, collision projection, PD drive;
* :mod:`hand.usd`, :mod:`hand.physx_backend` (physx extra, imported on demand) the same hand as a USD
  articulation and the bridge on PhysX (ovphysx, CPU).

See ``docs/hand.md``.
"""

from dockbench.hand.bridge import (
    BridgeConfig,
    BridgeSnapshot,
    CommandResult,
    DriveMode,
    HandBridge,
    HandState,
    StepResult,
    TrackTestResult,
    run_track_test,
)
from dockbench.hand.mapping import (
    complete_mimic,
    range_to_arc,
    sdk_to_joint_positions,
    validate_joint_command,
    validate_sdk_values,
)
from dockbench.hand.spec import HandSpec, load_model, load_spec

__all__ = [
    "BridgeConfig",
    "BridgeSnapshot",
    "CommandResult",
    "DriveMode",
    "HandBridge",
    "HandSpec",
    "HandState",
    "StepResult",
    "TrackTestResult",
    "complete_mimic",
    "load_model",
    "load_spec",
    "range_to_arc",
    "run_track_test",
    "sdk_to_joint_positions",
    "validate_joint_command",
    "validate_sdk_values",
]
