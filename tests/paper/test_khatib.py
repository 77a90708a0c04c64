"""docs/theory/khatib.md §2: in free space with the exact model and τ_ff = 0, the realised task acceleration
J q̈ + J̇ q̇ equals the commanded u (q̈ measured from MuJoCo), and τ_null does not change it."""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
from dockbench.controllers.khatib import KhatibController
from dockbench.planners.base import Reference
from dockbench.sim.loop import build
from dockbench.sim.scenario import scenario_from_dict
from dockbench.sim.wrench import WrenchState

from tests.helpers import TOL, plain_scenario_dict, scenario_dict


def _free_space_setup():
    d = scenario_dict("iiwa14_docking")
    d.pop("target")
    d["sim"]["gravity"] = [0.0, 0.0, -9.81]  # the identity must hold with gravity on, too
    return build(scenario_from_dict(d))


def _realised_task_acc(s, tau: np.ndarray, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    m = s.asm.model
    data = mujoco.MjData(m)
    data.qpos[s.asm.qpos_adr] = q
    data.qvel[s.asm.dof_adr] = v
    data.ctrl[s.asm.act_ids] = tau
    mujoco.mj_forward(m, data)
    snap = s.dynamics.update(q, v)
    return snap.J_ee_lwa @ data.qacc[s.asm.dof_adr] + snap.dJdq_ee_lwa


def test_task_acceleration_equals_u_and_null_space_is_invisible() -> None:
    s = _free_space_setup()
    rng = np.random.default_rng(11)
    ref = Reference()
    wrench = WrenchState()
    for trial in range(5):
        q = s.q0 + rng.uniform(-0.3, 0.3, 7)
        v = rng.uniform(-0.4, 0.4, 7)
        snap = s.dynamics.update(q, v)
        ref.pos[:] = snap.p_ee_in_world + rng.uniform(-0.01, 0.01, 3)
        ref.vel[:] = rng.uniform(-0.05, 0.05, 3)
        ref.acc[:] = rng.uniform(-0.1, 0.1, 3)
        ref.R[:] = snap.R_world_ee
        taus, accs = [], []
        for d_null in (0.0, 10.0):
            cfg = dataclasses.replace(s.controller.config, d_null=d_null, feedforward="off")
            ctrl = KhatibController(cfg, s.plant)
            cmd = ctrl.make_command()
            ctrl.compute(snap, ref, wrench, cmd)
            assert np.all(np.abs(cmd.tau) < s.plant.tau_max), "test state must not saturate"
            acc = _realised_task_acc(s, cmd.tau.copy(), q, v)
            np.testing.assert_allclose(
                acc, ctrl.u, rtol=0, atol=TOL["task_acc_abs"], err_msg=f"trial {trial}, d_null={d_null}"
            )
            taus.append(cmd.tau.copy())
            accs.append(acc)
        assert np.linalg.norm(taus[1] - taus[0]) > 1e-3, "the null-space term must act in the joints"
        np.testing.assert_allclose(accs[0], accs[1], rtol=0, atol=TOL["task_acc_abs"])


def test_friction_integral_freezes_on_contact() -> None:
    d = plain_scenario_dict("fr3_docking")  # without the force filter: the integral freezes on the first step
    s = build(scenario_from_dict(d))
    ctrl = s.controller
    assert ctrl.use_integral, "FR3 has frictionloss, so friction_integral: auto must switch it on"
    ref = Reference()
    snap = s.dynamics.update(s.q0, np.zeros(7))
    ref.pos[:] = snap.p_ee_in_world + np.array([0.01, 0.0, 0.0])
    ref.R[:] = snap.R_world_ee
    w = WrenchState()
    cmd = ctrl.make_command()
    for _ in range(100):
        ctrl.compute(snap, ref, w, cmd)
    f_before = ctrl.F_I.copy()
    assert f_before[0] > 0.0
    np.testing.assert_allclose(f_before[0], min(150.0 * 0.01 * 100 * 1e-3, 10.0), rtol=1e-9)
    w.ext_world[2] = 2.0  # contact: |F_ext| > 1 N
    for _ in range(100):
        ctrl.compute(snap, ref, w, cmd)
    assert ctrl.frozen
    np.testing.assert_array_equal(ctrl.F_I, f_before)  # exact: a frozen integral is not updated at all
    # clamp at ±10 N
    w.ext_world[:] = 0.0
    ctrl.reset(snap, ref)
    for _ in range(20000):
        ctrl.compute(snap, ref, w, cmd)
    np.testing.assert_allclose(ctrl.F_I[0], 10.0)


def test_singular_task_inertia_falls_back_to_least_squares() -> None:
    """A rank-deficient J (here: its last row zeroed, as at a wrist singularity) makes Λ⁻¹ singular;
    the Cholesky solve fails and τ = Jᵀ y − d_null q̇ + h uses the least-squares y instead: finite,
    and equal to the textbook expression."""
    s = _free_space_setup()
    rng = np.random.default_rng(5)
    q, v = s.q0 + rng.uniform(-0.2, 0.2, 7), rng.uniform(-0.3, 0.3, 7)
    snap = s.dynamics.update(q, v)
    snap.J_ee_lwa[5] = 0.0
    ref = Reference()
    ref.pos[:] = snap.p_ee_in_world + 0.01
    ref.R[:] = snap.R_world_ee
    cfg = dataclasses.replace(s.controller.config, d_null=5.0, feedforward="off")
    ctrl = KhatibController(cfg, s.plant)
    cmd = ctrl.make_command()
    ctrl.compute(snap, ref, WrenchState(), cmd)
    J, Minv = snap.J_ee_lwa, snap.Minv
    rhs = ctrl.u - snap.dJdq_ee_lwa + 5.0 * (J @ Minv @ v)
    y = np.linalg.lstsq(J @ Minv @ J.T, rhs, rcond=None)[0]
    assert np.all(np.isfinite(cmd.tau))
    np.testing.assert_allclose(cmd.tau, J.T @ y - 5.0 * v + snap.h, rtol=0, atol=1e-9)
