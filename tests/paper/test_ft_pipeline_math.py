"""docs/theory/ft_pipeline.md §1, §3 and §4 (4.1): the F/T pipeline returns the wrench the environment exerts on the
tool — sign, axes, moment point and the weight stage — checked against a wrench applied in MuJoCo.

Tolerances are stated bounds (docs/testing.md §2)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from dockbench.sim.loop import build
from dockbench.sim.scenario import scenario_from_dict

from tests.helpers import TOL, assert_within, scenario_dict


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
@pytest.mark.parametrize("gravity", [False, True])
def test_ft_reads_the_applied_wrench_at_static_equilibrium(robot: str, gravity: bool) -> None:
    """A known wrench F = [f; n_E] (about the EE origin E, world axes) acts on the tool (MuJoCo
    ``xfrc_applied``), the arm is at rest (q̇ = 0) and the joint torque is τ = h − Jᵀ F, so that
    M q̈ = τ − h + Jᵀ F = 0: nothing accelerates and the sensor carries only F and (with gravity) the tool's
    weight. The pipeline must then return, with one sign flip, the rotation to world axes and the weight
    stage (on iff gravity ≠ 0):

    * ``ext_world`` = [f; n_E + (p_E − p_S) × f] (world axes, about the sensor origin S);
    * ``ext_body`` = [R_EWᵀ f; R_EWᵀ n_E] (EE axes, about E).

    Bound: the state is static only up to the two libraries' model agreement (q̈ ≈ 1e-13 rad/s²), which
    leaves an inertial load ≤ m_t |a| ≈ 1e-12 N; the sensor's and the pipeline's round-off is ≤ 16 ε
    (|f| + |W|) (1 + lever). Tolerance TOL["mass_matrix_rel"] = 1e-9 relative to |F| + |W| (≥ 100× both).
    A wrong sign, axes or moment point is O(|F|); without the weight stage the force is off by W."""
    d = scenario_dict(f"{robot}_docking")
    d.pop("target")
    d["sim"]["gravity"] = [0.0, 0.0, -9.81] if gravity else [0.0, 0.0, 0.0]
    s = build(scenario_from_dict(d))
    m = s.asm.model
    m.dof_damping[:] = 0.0
    m.dof_frictionloss[:] = 0.0
    assert s.wrench.gravity_compensation == gravity
    data = mujoco.MjData(m)
    qa, da = s.asm.qpos_adr, s.asm.dof_adr
    body = int(m.site_bodyid[s.asm.ee_site])
    W = s.wrench.tool_mass * np.asarray(m.opt.gravity)
    rng = np.random.default_rng(61)
    for trial in range(5):
        q = s.q0 + rng.uniform(-0.3, 0.3, 7)
        F = np.concatenate([rng.uniform(-20.0, 20.0, 3), rng.uniform(-2.0, 2.0, 3)])
        snap = s.dynamics.update(q, np.zeros(7))
        tau = snap.h - snap.J_ee_lwa.T @ F
        assert np.all(np.abs(tau) < s.plant.tau_max)
        data.qpos[qa], data.qvel[da], data.ctrl[s.asm.act_ids] = q, 0.0, tau
        mujoco.mj_kinematics(m, data)
        p_E, c = data.site_xpos[s.asm.ee_site].copy(), data.xipos[body].copy()
        data.xfrc_applied[:] = 0.0
        data.xfrc_applied[body, :3] = F[:3]
        data.xfrc_applied[body, 3:] = F[3:] + np.cross(p_E - c, F[:3])
        mujoco.mj_forward(m, data)
        assert data.ncon == 0 and np.abs(data.qacc[da]).max() < 1e-9, "static"
        st = s.wrench.update(data, snap.T_world_ee)
        p_S = data.site_xpos[s.asm.sensor_site]
        R = snap.R_world_ee
        scale = TOL["mass_matrix_rel"] * (np.abs(F).max() + np.abs(W).max() + 1.0)
        want_world = np.concatenate([F[:3], F[3:] + np.cross(p_E - p_S, F[:3])])
        assert_within(st.ext_world, want_world, scale, f"ext_world, trial {trial}")
        assert_within(st.ext_body, np.concatenate([R.T @ F[:3], R.T @ F[3:]]), scale, f"ext_body, trial {trial}")
        assert np.linalg.norm(np.cross(p_E - p_S, F[:3])) > 0.05, "the moment point must matter"


def _docking(timestep: float, duration: float) -> dict:
    d = scenario_dict("iiwa14_docking")
    d["sim"].update(timestep=timestep, duration=duration)
    return d


def test_sensor_mean_is_the_mean_of_the_substeps_readings() -> None:
    """Equation (4.1) of docs/theory/ft_pipeline.md §4. Four substeps per period, in contact: the pipeline
    reads the mean of the four readings MuJoCo's sensors gave after each substep (the same additions, so the
    same bits), not the last one, which differs in contact (the probe first touches the funnel at 4.70 s)."""
    import copy

    from dockbench.sim.loop import simulate
    from dockbench.sim.wrench import SubstepContact

    setup = build(scenario_from_dict(_docking(0.00025, 4.701)))
    simulate(setup, kernel_check=0)
    m, d, wp = setup.asm.model, setup.data, setup.wrench
    probe = copy.copy(d)
    total, readings = np.zeros(6), []
    for _ in range(4):
        mujoco.mj_step(m, probe)
        reading = np.concatenate((probe.sensordata[wp.f_adr : wp.f_adr + 3], probe.sensordata[wp.n_adr : wp.n_adr + 3]))
        total[0:3] += reading[0:3]
        total[3:6] += reading[3:6]
        readings.append(reading)
    assert np.linalg.norm(readings[-1][:3]) > 0.1, "not in contact"
    sub = SubstepContact(wp, m, d, 4, 0, np.array([0.0, 0.0, 1.0]), sensor_mean=True)
    sub.step(0)
    np.testing.assert_array_equal(d.qpos, probe.qpos)
    np.testing.assert_array_equal(sub.ft_mean, total / 4.0)
    assert not np.array_equal(sub.ft_mean, readings[-1])
    wp.update(d, np.eye(4))  # the pipeline's reading is that buffer
    assert np.shares_memory(wp._v_f, sub.ft_mean) and np.shares_memory(wp._v_n, sub.ft_mean)
    last = SubstepContact(wp, m, d, 4, 0, np.array([0.0, 0.0, 1.0]), sensor_mean=False)
    assert last.ft_mean is None
