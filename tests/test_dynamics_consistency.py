"""MuJoCo and Pinocchio describe one plant: M, bias, EE pose, Jacobians at random configurations,
gravity on and off, for both catalogue robots and a user's own 6-DOF arm (``robot.model``, written by the
test: tests/user_robot_helpers.py) with the probe tool assembled (issue 2, item 5; issue 20, part 3)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from dockbench.sim.dynamics import Dynamics
from dockbench.sim.loop import build
from dockbench.sim.scenario import scenario_from_dict

from tests.helpers import TOL, scenario_dict
from tests.user_robot_helpers import robot_block, write_arm

N_CONFIGS = 20


#: the user's arm (robot.model) docks into the FR3 scenario's drogue, moved in front of its home pose
USER_ARM = "user_arm6"


def _setup(robot: str, gravity: bool, folder=None):
    if robot == USER_ARM:
        d = scenario_dict("fr3_docking")
        d["robot"] = robot_block(write_arm(folder))
        d["target"]["pose"]["position"] = [0.45, 0.0, 0.20]
    else:
        d = scenario_dict(f"{robot}_docking")
    d["sim"]["gravity"] = [0.0, 0.0, -9.81] if gravity else [0.0, 0.0, 0.0]
    return build(scenario_from_dict(d))


@pytest.mark.parametrize("robot", ["iiwa14", "fr3", USER_ARM])
@pytest.mark.parametrize("gravity", [False, True])
def test_mujoco_pinocchio_agree(robot: str, gravity: bool, tmp_path) -> None:
    s = _setup(robot, gravity, tmp_path)
    m = s.asm.model
    data = mujoco.MjData(m)
    dyn = Dynamics(s.asm.pin_model, s.dynamics.ee_frame, s.dynamics.sensor_frame)
    rng = np.random.default_rng(7)
    lo, hi = s.plant.q_min, s.plant.q_max
    nv = s.plant.nv
    qa, da = s.asm.qpos_adr, s.asm.dof_adr
    Mfull = np.zeros((m.nv, m.nv))
    jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    for _ in range(N_CONFIGS):
        q = rng.uniform(lo, hi)
        v = rng.uniform(-1.0, 1.0, nv)
        data.qpos[qa] = q
        data.qvel[da] = v
        mujoco.mj_forward(m, data)
        snap = dyn.update(q, v)
        mujoco.mj_fullM(m, data, Mfull)
        M_mj = Mfull[np.ix_(da, da)]
        np.testing.assert_allclose(snap.M, M_mj, rtol=0, atol=TOL["mass_matrix_rel"] * np.abs(M_mj).max())
        bias = data.qfrc_bias[da]
        np.testing.assert_allclose(snap.h, bias, rtol=0, atol=TOL["bias_rel"] * max(np.abs(bias).max(), 1.0))
        site = s.asm.ee_site
        np.testing.assert_allclose(
            snap.p_ee_in_world, data.site_xpos[site], rtol=0, atol=TOL["pose_abs"]
        )
        np.testing.assert_allclose(snap.R_world_ee, data.site_xmat[site].reshape(3, 3), rtol=0, atol=1e-12)
        mujoco.mj_jacSite(m, data, jacp, jacr, site)
        J_mj = np.vstack([jacp[:, da], jacr[:, da]])
        np.testing.assert_allclose(snap.J_ee_lwa, J_mj, rtol=0, atol=TOL["jacobian_abs"])
        R = snap.R_world_ee
        J_body = np.vstack([R.T @ J_mj[:3], R.T @ J_mj[3:]])
        np.testing.assert_allclose(snap.J_ee_body, J_body, rtol=0, atol=TOL["jacobian_abs"])
        # M⁻¹ is the inverse of this very M (not of a previous state's): a backward-stable inversion leaves
        # ‖M M⁻¹ − I‖ ≤ n κ(M) ε (measured ≤ 0.02 of it with the Cholesky of sim/dynamics.py, ≤ 0.12 with
        # Pinocchio's articulated-body computeMinverse; iiwa14 κ up to ≈ 7e3, FR3 ≈ 60)
        bound = nv * np.linalg.cond(snap.M) * np.finfo(float).eps
        np.testing.assert_allclose(snap.M @ snap.Minv, np.eye(nv), rtol=0, atol=bound)
        # g(q) alone (the feedforward's key): MuJoCo's bias at zero velocity; exactly zero at zero gravity
        data.qvel[da] = 0.0
        mujoco.mj_forward(m, data)
        g_mj = data.qfrc_bias[da]
        if gravity:
            np.testing.assert_allclose(snap.g, g_mj, rtol=0, atol=TOL["bias_rel"] * np.abs(g_mj).max())
        else:
            assert not np.any(snap.g) and not np.any(g_mj)


def test_tool_inertia_is_lumped_into_the_arm() -> None:
    """Removing the probe's mass changes M: the Pinocchio model really carries the tool."""
    with_tool = _setup("iiwa14", False)
    d = scenario_dict("iiwa14_docking")
    d["tool"]["mass"] = 1e-6
    light = build(scenario_from_dict(d))
    q = with_tool.q0
    M1 = (
        Dynamics(with_tool.asm.pin_model, with_tool.dynamics.ee_frame, with_tool.dynamics.sensor_frame)
        .update(q, 0 * q)
        .M
    )
    M2 = (
        Dynamics(light.asm.pin_model, light.dynamics.ee_frame, light.dynamics.sensor_frame).update(q, 0 * q).M
    )
    assert np.abs(M1 - M2).max() > 1e-3


def test_drift_acceleration_matches_finite_differences() -> None:
    """dJdq_ee_lwa = d/dt (J q̇) at q̈ = 0, checked by a central difference along q̇ (classical
    acceleration of the EE point and angular acceleration)."""
    s = _setup("iiwa14", False)
    dyn = s.dynamics
    rng = np.random.default_rng(3)
    q = s.q0 + rng.uniform(-0.2, 0.2, 7)
    v = rng.uniform(-0.5, 0.5, 7)
    h = 1e-6
    a = dyn.update(q, v).dJdq_ee_lwa.copy()
    Jp = dyn.update(q + h * v, v).J_ee_lwa.copy()
    Jm = dyn.update(q - h * v, v).J_ee_lwa.copy()
    fd = (Jp - Jm) @ v / (2 * h)
    np.testing.assert_allclose(a, fd, rtol=0, atol=1e-6)
