"""docs/theory/ik.md: the DLS IK reaches a reachable pose to 1e-9 and names the error for an unreachable one."""

import numpy as np
import pytest
from dockbench.sim.errors import ModelError
from dockbench.sim.ik import solve_ik
from dockbench.sim.loop import build
from dockbench.sim.scenario import scenario_from_dict

from tests.helpers import scenario_dict


def test_ik_reaches_pose_and_respects_limits() -> None:
    s = build(scenario_from_dict(scenario_dict("iiwa14_docking")))
    fid = s.asm.frame_ids["ee"]
    import pinocchio as pin

    data = s.asm.pin_model.createData()
    pin.framesForwardKinematics(s.asm.pin_model, data, s.q0)
    np.testing.assert_allclose(data.oMf[fid].translation, s.T_world_start[:3, 3], atol=1e-9)
    np.testing.assert_allclose(data.oMf[fid].rotation, s.T_world_start[:3, :3], atol=1e-9)
    assert np.all(s.q0 >= s.plant.q_min) and np.all(s.q0 <= s.plant.q_max)


def test_ik_unreachable_pose_raises_clear_error() -> None:
    s = build(scenario_from_dict(scenario_dict("iiwa14_docking")))
    T = np.eye(4)
    T[:3, 3] = [3.0, 0.0, 0.5]
    with pytest.raises(ModelError, match="IK did not converge.*unreachable"):
        solve_ik(s.asm.pin_model, s.asm.frame_ids["ee"], T, s.q0, max_iter=100)
