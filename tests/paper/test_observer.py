"""docs/theory/hqp.md (sensorless mode): the momentum observer (controllers/observer.py).

A constant wrench is applied to the tool with MuJoCo's ``xfrc_applied`` while a stiff HQP (natural
inertia, K_0 = 2000 N/m / 50 N·m/rad, no force feedback) holds the pose — Khatib's inertia shaping
leaves the iiwa's light wrist almost without rotational stiffness (Λ_rot·k_rot/m_rot ≈ 0.03 N·m/rad).
The observer, fed the torque applied each step, must report that wrench (moved to the
EE origin) within 2 % after 1 s — with gravity off and on (g cancels in τ + Cᵀq̇ − g = τ + Ṁq̇ − h).
The same inside the HQP (``force_source: observer``), and the loop helper ``fill_wrench_state``
agrees with the F/T pipeline.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from dockbench.controllers.observer import MomentumObserver
from dockbench.planners.base import Reference
from dockbench.sim.loop import build, simulate
from dockbench.sim.robots import get_robot
from dockbench.sim.scenario import scenario_from_dict
from dockbench.sim.wrench import WrenchState

# Tolerance table (the only tolerances used in this module).
TOL_CONVERGED = 0.02  # acceptance: within 2 % after 1 s (relative to the applied force / moment norm)
TOL_FT = 0.02  # observer vs F/T sensor in quasi-static hold (the F/T also sees the tool's inertia)

F_APPLIED = np.array([4.0, -3.0, 6.0])  # [N], world axes, at the tool body's COM
N_APPLIED = np.array([0.3, 0.2, 0.0])  # [N·m]; none about the tool axis (world z at home), where
#                                       the iiwa's wrist inertia is only ~1e-3 kg·m²
GAIN = 50.0  # K_O [1/s]
HOLD = {"type": "hqp", "sigmoid": "shifted", "k0": [2000, 2000, 2000, 50, 50, 50]}


def _hold_scenario(robot: str = "iiwa14", gravity=(0.0, 0.0, 0.0), controller: dict | None = None) -> dict:
    return {
        "name": f"{robot}_observer",
        "robot": {"type": robot, "q_init": list(get_robot(robot).home)},
        "sim": {"duration": 1.5, "gravity": list(gravity)},
        "planner": {"type": "quintic"},
        "controller": controller or {**HOLD, "use_force_feedback": False},
    }


def _apply(s) -> int:
    body = mujoco.mj_name2id(s.asm.model, mujoco.mjtObj.mjOBJ_BODY, s.asm.tool.root_body)
    s.data.xfrc_applied[body, :3] = F_APPLIED
    s.data.xfrc_applied[body, 3:] = N_APPLIED
    return body


def _expected_at_ee(s, body: int) -> np.ndarray:
    """The applied wrench as [f; n] world axes about the EE origin: n_E = n + (c − p_E) × f."""
    c = s.data.xipos[body]
    ee = mujoco.mj_name2id(s.asm.model, mujoco.mjtObj.mjOBJ_SITE, s.asm.tool.ee_site)
    p_E = s.data.site_xpos[ee]
    return np.concatenate((F_APPLIED, N_APPLIED + np.cross(c - p_E, F_APPLIED)))


def _assert_close(est: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_allclose(est[:3], expected[:3], atol=TOL_CONVERGED * np.linalg.norm(expected[:3]))
    np.testing.assert_allclose(est[3:], expected[3:], atol=TOL_CONVERGED * np.linalg.norm(expected[3:]))


@pytest.mark.parametrize("gravity", [(0.0, 0.0, 0.0), (0.0, 0.0, -9.81)], ids=["zero_g", "gravity"])
def test_observer_converges_to_applied_wrench(gravity) -> None:
    s = build(scenario_from_dict(_hold_scenario(gravity=gravity)))
    m, d = s.asm.model, s.data
    body = _apply(s)
    obs = MomentumObserver(s.plant, GAIN)
    ref = Reference()
    cmd = s.controller.make_command()
    tau = np.zeros(s.plant.nv)
    qa, va, aa = s.asm.qpos_adr, s.asm.dof_adr, s.asm.act_ids
    est_hist, exp_hist, ft_hist = [], [], []
    w_obs = WrenchState()
    for i in range(1501):
        t = i * 1e-3
        snap = s.dynamics.update(d.qpos[qa], d.qvel[va], t)
        w = s.wrench.update(d, snap.T_world_ee)
        est = obs.update(snap, tau)  # τ applied during the step that just ended
        if t >= 1.0:
            est_hist.append(est.copy())
            exp_hist.append(_expected_at_ee(s, body))
            obs.fill_wrench_state(snap, w_obs)
            ft_hist.append((w_obs.ext_world.copy(), w.ext_world.copy(), w_obs.ext_body.copy(), w.ext_body.copy()))
        s.planner.evaluate(t, ref)
        s.controller.compute(snap, ref, w, cmd)
        np.clip(cmd.tau, -s.plant.tau_max, s.plant.tau_max, out=tau)
        d.ctrl[aa] = tau
        mujoco.mj_step(m, d)
    assert np.isfinite(d.qpos).all()
    for est, exp in zip(est_hist, exp_hist, strict=True):
        _assert_close(est, exp)
    # the loop helper gives the F/T pipeline's frames: world axes about the sensor, EE axes about the EE
    # (zero g only: with gravity the F/T also reads the tool's weight, which the observer models)
    if gravity[2] != 0.0:
        return
    obs_w, ft_w, obs_b, ft_b = ft_hist[-1]
    for a, b in ((obs_w, ft_w), (obs_b, ft_b)):
        np.testing.assert_allclose(a[:3], b[:3], atol=TOL_FT * np.linalg.norm(b[:3]))
        np.testing.assert_allclose(a[3:], b[3:], atol=TOL_FT * np.linalg.norm(b[3:]))


def test_observer_is_needed_before_convergence() -> None:
    """The estimate starts at zero and is still far off after 10 ms = 0.5/K_O (the test can fail)."""
    s = build(scenario_from_dict(_hold_scenario()))
    _apply(s)
    obs = MomentumObserver(s.plant, GAIN)
    tau = np.zeros(s.plant.nv)
    m, d = s.asm.model, s.data
    for _ in range(11):
        snap = s.dynamics.update(d.qpos[s.asm.qpos_adr], d.qvel[s.asm.dof_adr])
        est = obs.update(snap, tau)
        mujoco.mj_step(m, d)
    # first-order filter: 1 − (1 − K_O Δt)^10 ≈ 0.40 of the force after 10 updates
    frac = est[:3] @ F_APPLIED / (F_APPLIED @ F_APPLIED)
    np.testing.assert_allclose(frac, 1 - (1 - GAIN * 1e-3) ** 10, rtol=0.05)


def test_hqp_sensorless_mode_estimates_the_applied_wrench() -> None:
    s = build(scenario_from_dict(_hold_scenario(controller={**HOLD, "force_source": "observer",
                                                            "observer_gain": GAIN})))
    _apply(s)
    tel, status, _, _ = simulate(s)
    assert status == "completed"
    ch = tel.channels()
    late = ch["t"] >= 1.0
    f_hat = np.stack([ch["ctrl_fext_x"], ch["ctrl_fext_y"], ch["ctrl_fext_z"]], axis=1)[late]
    np.testing.assert_allclose(f_hat, np.broadcast_to(F_APPLIED, f_hat.shape),
                               atol=TOL_CONVERGED * np.linalg.norm(F_APPLIED))
    # the adaptive compliance reacted to the estimated force (α grew from its free-space value ½)
    assert ch["ctrl_alpha"][late].min() > 0.9
