"""A free-floating base: MuJoCo and Pinocchio describe one plant, at random states with the base pose and
twist included, gravity on and off, for both catalogue robots and a user's own 6-DOF arm (``robot.model``,
tests/user_robot_helpers.py; issue 19, item 1; issue 20, part 3).

The two models parametrise the base velocity differently: MuJoCo's free joint has qvel = [ṗ (world axes);
ω (base axes)], Pinocchio's free flyer v = [Rᵀ ṗ; ω]. With v_pin = T v_mj, T = blockdiag(Rᵀ, I₃, I_n):

    M_mj = Tᵀ M_pin T,   J_mj = J_pin T,   h_mj = Tᵀ (h_pin + M_pin Ṫ v_mj),   Ṫ v_mj = [−ω × (Rᵀ ṗ); 0; 0]

(power is invariant, τ_mj = Tᵀ τ_pin; the last term is d/dt of T). Tolerances: 1e-9 relative to the
largest entry (the issue's acceptance); both sides are O(n) sums of products of O(1)-conditioned terms,
whose round-off is ≈ n ε ≈ 3e-15 relative — six orders of headroom.

The base-eliminated quantities (J*, H*, c*, H*⁻¹) do not depend on how the base velocity is parametrised
(docs/theory/floating_base.md), so they are checked against the same elimination done on MuJoCo's own
M, bias and Jacobian; and the arm's acceleration that MuJoCo's forward dynamics produces for a random τ
must be H*⁻¹ (τ − c*), the EE's J* q̈ + dJdq (a central difference of MuJoCo's EE twist along the
trajectory, error O(δ²) with δ = 1e-6 s: ≈ 1e-12 ‖ẍ‖, bounded at 1e-6).
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from dockbench.sim.floating import FloatingBaseDynamics
from dockbench.sim.loop import build
from dockbench.sim.scenario import scenario_from_dict

from tests.helpers import TOL
from tests.orbit_helpers import orbit_dict, with_gravity
from tests.user_robot_helpers import robot_block, write_arm

N_STATES = 12


#: the user's arm on the FR3 orbit scenario's spacecraft bus, the target moved in front of its home pose
USER_ARM = "user_arm6"
ROBOTS = ["iiwa14", "fr3", USER_ARM]


def _setup(robot: str, gravity: bool, folder=None):
    d = orbit_dict("iiwa14_orbit_floating_target" if robot == "iiwa14" else "fr3_orbit_floating_target")
    if robot == USER_ARM:
        d["robot"] = robot_block(write_arm(folder), base=d["robot"]["base"])
        d["target"]["pose"]["position"] = [0.45, 0.0, 0.20]
    s = build(scenario_from_dict(d))
    if gravity:  # the scenario loader refuses gravity with a floating base; the model test wants it
        s = with_gravity(s, (0.0, 0.0, -9.81))
    return s


def _random_state(s, rng):
    m, asm = s.asm.model, s.asm
    qb = np.r_[rng.uniform(-0.5, 0.5, 3), rng.normal(size=4)]
    qb[3:] /= np.linalg.norm(qb[3:])
    vb = rng.uniform(-0.5, 0.5, 6)
    q = rng.uniform(s.plant.q_min, s.plant.q_max)
    v = rng.uniform(-1.0, 1.0, s.plant.nv)
    data = mujoco.MjData(m)
    data.qpos[asm.base_qpos] = qb
    data.qvel[asm.base_qvel] = vb
    data.qpos[asm.qpos_adr] = q
    data.qvel[asm.dof_adr] = v
    return data, qb, vb, q, v


def _chaser(s):
    """Indices of the chaser's dofs in MuJoCo's qvel (base free joint, then the arm)."""
    asm = s.asm
    return np.r_[np.arange(asm.base_qvel.start, asm.base_qvel.stop), asm.dof_adr]


def _twist_at(s, data, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo's EE twist [ṗ; ω] (world axes) and orientation at the state ``data`` moved by ``dt`` along its
    velocity and acceleration (qpos on the manifold)."""
    m, asm = s.asm.model, s.asm
    jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    d2 = mujoco.MjData(m)
    d2.qpos[:] = data.qpos
    mujoco.mj_integratePos(m, d2.qpos, data.qvel, dt)
    d2.qvel[:] = data.qvel + dt * data.qacc
    mujoco.mj_kinematics(m, d2)
    mujoco.mj_comPos(m, d2)
    mujoco.mj_jacSite(m, d2, jacp, jacr, asm.ee_site)
    return np.r_[jacp @ d2.qvel, jacr @ d2.qvel], d2.site_xmat[asm.ee_site].reshape(3, 3).copy()


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1.0))


@pytest.mark.parametrize("robot", ROBOTS)
@pytest.mark.parametrize("gravity", [False, True])
def test_full_model_matches_mujoco(robot: str, gravity: bool, tmp_path) -> None:
    s = _setup(robot, gravity, tmp_path)
    m, asm = s.asm.model, s.asm
    fids = asm.floating_frame_ids
    dyn = FloatingBaseDynamics(asm.pin_floating, fids[asm.tool.ee_site], fids[asm.tool.sensor_site])
    rng = np.random.default_rng(19)
    idx = _chaser(s)
    nf = len(idx)
    Mfull = np.zeros((m.nv, m.nv))
    jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    for _ in range(N_STATES):
        data, qb, vb, q, v = _random_state(s, rng)
        mujoco.mj_forward(m, data)
        snap = dyn.update(q, v, 0.0, qb, vb)
        R = snap.T_world_base[:3, :3]
        base_body = m.jnt_bodyid[m.dof_jntid[asm.base_qvel.start]]
        np.testing.assert_allclose(R, data.xmat[base_body].reshape(3, 3), atol=1e-12)
        T = np.eye(nf)
        T[:3, :3] = R.T
        mujoco.mj_fullM(m, data, Mfull)
        M_mj = Mfull[np.ix_(idx, idx)]
        assert _rel(T.T @ snap.M_full @ T, M_mj) < TOL["mass_matrix_rel"]
        Tdot_v = np.zeros(nf)
        Tdot_v[:3] = -np.cross(vb[3:], R.T @ vb[:3])
        h_mj = data.qfrc_bias[idx]
        assert _rel(T.T @ (snap.h_full + snap.M_full @ Tdot_v), h_mj) < TOL["bias_rel"]
        mujoco.mj_jacSite(m, data, jacp, jacr, asm.ee_site)
        J_mj = np.vstack([jacp[:, idx], jacr[:, idx]])
        assert _rel(snap.J_ee_lwa_full @ T, J_mj) < TOL["jacobian_abs"]
        np.testing.assert_allclose(snap.p_ee_in_world, data.site_xpos[asm.ee_site], rtol=0, atol=TOL["pose_abs"])
        np.testing.assert_allclose(snap.R_world_ee, data.site_xmat[asm.ee_site].reshape(3, 3), rtol=0, atol=1e-12)
        # the actual EE twist (base motion included) is MuJoCo's J qvel
        np.testing.assert_allclose(snap.twist_ee_lwa, J_mj @ data.qvel[idx], rtol=0, atol=1e-12)


@pytest.mark.parametrize("robot", ROBOTS)
@pytest.mark.parametrize("gravity", [False, True])
def test_reduced_quantities_match_the_elimination_on_mujocos_model(robot: str, gravity: bool, tmp_path) -> None:
    """J*, H*, c*, H*⁻¹ of the snapshot equal the same elimination done on MuJoCo's M, bias and Jacobian
    (in MuJoCo's own base coordinates: the elimination is coordinate-free)."""
    s = _setup(robot, gravity, tmp_path)
    m, asm = s.asm.model, s.asm
    fids = asm.floating_frame_ids
    dyn = FloatingBaseDynamics(asm.pin_floating, fids[asm.tool.ee_site], fids[asm.tool.sensor_site])
    rng = np.random.default_rng(23)
    idx = _chaser(s)
    Mfull = np.zeros((m.nv, m.nv))
    jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    for _ in range(N_STATES):
        data, qb, vb, q, v = _random_state(s, rng)
        mujoco.mj_forward(m, data)
        snap = dyn.update(q, v, 0.0, qb, vb)
        mujoco.mj_fullM(m, data, Mfull)
        M = Mfull[np.ix_(idx, idx)]
        h = data.qfrc_bias[idx]
        mujoco.mj_jacSite(m, data, jacp, jacr, asm.ee_site)
        J = np.vstack([jacp[:, idx], jacr[:, idx]])
        Hb, Hbm, Hm = M[:6, :6], M[:6, 6:], M[6:, 6:]
        X = np.linalg.solve(Hb, np.column_stack([Hbm, h[:6]]))
        n = s.plant.nv
        J_star = J[:, 6:] - J[:, :6] @ X[:, :n]
        H_star = Hm - Hbm.T @ X[:, :n]
        c_star = h[6:] - Hbm.T @ X[:, n]
        assert _rel(snap.J_ee_lwa, J_star) < TOL["jacobian_abs"]
        R = snap.R_world_ee
        assert _rel(snap.J_ee_body, np.vstack([R.T @ J_star[:3], R.T @ J_star[3:]])) < TOL["jacobian_abs"]
        assert _rel(snap.M, H_star) < TOL["mass_matrix_rel"]
        assert _rel(snap.h, c_star) < TOL["bias_rel"]
        # H*⁻¹: κ(H*) ≈ 1e4 for the wrist (tiny link inertias) magnifies the round-off of the inverse
        np.testing.assert_allclose(snap.Minv @ H_star, np.eye(n), rtol=0, atol=1e-9)
        assert np.array_equal(snap.M, snap.M.T) and np.array_equal(snap.Minv, snap.Minv.T)
        w = np.sqrt(np.linalg.det(J_star @ J_star.T))
        np.testing.assert_allclose(snap.manipulability, w, rtol=1e-9)


@pytest.mark.parametrize("robot", ROBOTS)
def test_mujocos_forward_dynamics_is_the_reduced_dynamics(robot: str, tmp_path) -> None:
    """For a random τ, MuJoCo's arm acceleration is H*⁻¹ (τ − c*) and its EE acceleration J* q̈ + dJdq, in
    both frames (no contact, no external wrench; FR3: its joint friction is a constraint, removed here; contacts
    are disabled: a random pose can touch the target or the arm itself, as the user's arm does at this seed)."""
    s = _setup(robot, False, tmp_path)
    m = s.asm.model
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_FRICTIONLOSS | mujoco.mjtDisableBit.mjDSBL_CONTACT
    asm = s.asm
    fids = asm.floating_frame_ids
    dyn = FloatingBaseDynamics(asm.pin_floating, fids[asm.tool.ee_site], fids[asm.tool.sensor_site])
    rng = np.random.default_rng(29)
    passive = m.dof_damping[asm.dof_adr]
    for _ in range(6):
        data, qb, vb, q, v = _random_state(s, rng)
        tau = rng.uniform(-0.2, 0.2, s.plant.nv) * s.plant.tau_max
        data.ctrl[asm.act_ids] = tau
        mujoco.mj_forward(m, data)
        snap = dyn.update(q, v, 0.0, qb, vb)
        qdd = data.qacc[asm.dof_adr]
        tau_net = tau - passive * v  # the FR3's joint damping is a passive torque in MuJoCo
        np.testing.assert_allclose(qdd, snap.Minv @ (tau_net - snap.h), rtol=0, atol=1e-9 * max(np.abs(qdd).max(), 1.0))
        # EE acceleration: central difference of MuJoCo's EE twist along the trajectory (manifold step)
        dt = 1e-6
        (tp, Rp), (tm, Rm) = _twist_at(s, data, dt), _twist_at(s, data, -dt)
        acc_lwa = (tp - tm) / (2 * dt)
        pred = snap.J_ee_lwa @ qdd + snap.dJdq_ee_lwa
        np.testing.assert_allclose(pred, acc_lwa, rtol=0, atol=1e-6 * max(np.abs(acc_lwa).max(), 1.0))
        # body frame: d/dt (Rᵀ [v; ω]) = [Rᵀ a − ω_b × v_b; Rᵀ α]  (the LOCAL spatial acceleration)
        bp = np.r_[Rp.T @ tp[:3], Rp.T @ tp[3:]]
        bm = np.r_[Rm.T @ tm[:3], Rm.T @ tm[3:]]
        acc_body = (bp - bm) / (2 * dt)
        pred_b = snap.J_ee_body @ qdd + snap.dJdq_ee_body
        np.testing.assert_allclose(pred_b, acc_body, rtol=0, atol=1e-6 * max(np.abs(acc_body).max(), 1.0))


def test_base_state_is_read_from_the_bound_views() -> None:
    """In the loop the base state comes from views of MjData (bind_base): the snapshot follows the plant."""
    s = _setup("iiwa14", False)
    asm, d = s.asm, s.data
    d.qpos[asm.base_qpos][:3] = (0.1, -0.2, 0.3)
    d.qvel[asm.base_qvel][:] = (0.01, 0.02, -0.03, 0.1, -0.1, 0.05)
    snap = s.dynamics.update(s.q0, np.zeros(7))
    np.testing.assert_array_equal(snap.T_world_base[:3, 3], (0.1, -0.2, 0.3))
    np.testing.assert_array_equal(snap.v_full[3:6], (0.1, -0.1, 0.05))
    # v_full[0:3] = Rᵀ ṗ with R the base rotation
    np.testing.assert_allclose(snap.v_full[:3], snap.T_world_base[:3, :3].T @ d.qvel[asm.base_qvel][:3], atol=1e-15)
