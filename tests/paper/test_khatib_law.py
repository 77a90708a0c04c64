"""docs/theory/khatib.md §1–3: the commanded task acceleration is the impedance law, the one-solve torque
is the textbook JᵀΛ(u − J̇q̇) + h − NᵀD_null q̇, and with a wrench on the tool the realised task
acceleration is u + Λ⁻¹ F_ext.

Tolerances are stated bounds (docs/testing.md §2); ``EPS`` is the float64 machine epsilon."""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
import pytest
from dockbench.controllers.khatib import KhatibController
from dockbench.sim.loop import build
from dockbench.sim.scenario import scenario_from_dict
from dockbench.sim.wrench import WrenchState
from scipy.spatial.transform import Rotation

from tests.helpers import EPS, TOL, assert_within, random_reference, scenario_dict


def _setup(robot: str, gravity: bool = False):
    d = scenario_dict(f"{robot}_docking")
    d.pop("target")
    d["sim"]["gravity"] = [0.0, 0.0, -9.81] if gravity else [0.0, 0.0, 0.0]
    d["controller"].pop("force_filter", None)  # the plain law (the filter is docs/theory/force_control.md)
    d["controller"]["feedforward"] = "torque"
    return build(scenario_from_dict(d))


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
@pytest.mark.parametrize("path", ["python", "compute"])
def test_task_acceleration_command_is_the_impedance_law(robot: str, path: str) -> None:
    """u_pos = ẍ_d + (f − d(ẋ − ẋ_d) − k(x − x_d) + F_I)/m and u_rot = α_d + (k_rot e_R + d_rot(ω_d − ω))/m_rot
    with e_R = log(R_d Rᵀ), evaluated here with SciPy's rotation vector (an independent log), at random
    states and references, with and without a contact force; on the FR3 (joint friction) the friction
    integral after one step from reset is clip(−k_i (x − x_d) T, ±F_I,max), or 0 once ‖f‖ > 1 N froze it.
    ``path``: the Python reference, or ``compute`` (the compiled kernel when it is built).

    Bound per component: ≤ 8 roundings of terms of size S (S_pos = |ẍ_d| + (|f| + d|ẋ − ẋ_d| + k|x − x_d| +
    |F_I|)/m, S_rot = |α_d| + (k_rot|e_R| + d_rot|ω_d − ω|)/m_rot), and the two rotation logs differ by
    ≤ 16 ε (angles ≤ 1 rad here, away from π): |Δu| ≤ 8 ε S + 16 ε k_rot/m_rot, asserted with 16× that.
    A wrong sign, gain or frame is O(S)."""
    s = _setup(robot)
    rng = np.random.default_rng(23)
    for trial in range(6):
        ctrl = KhatibController(s.controller.config, s.plant)
        c = ctrl.config
        q = s.q0 + rng.uniform(-0.2, 0.2, 7)
        v = rng.uniform(-0.3, 0.3, 7)
        snap = s.dynamics.update(q, v)
        ref = random_reference(rng, snap)
        w = WrenchState()
        if trial % 2:
            w.ext_world[:3] = rng.uniform(-5.0, 5.0, 3)
        cmd = ctrl.make_command()
        ctrl.reset(snap, ref)
        if path == "python":
            ctrl._compute_python(snap, ref, w, cmd)
        else:
            ctrl.compute(snap, ref, w, cmd)
        x, xd, om = snap.p_ee_in_world, snap.twist_ee_lwa[:3], snap.twist_ee_lwa[3:]
        f = w.ext_world[:3]
        if ctrl.use_integral and np.linalg.norm(f) <= c.contact_threshold:
            F_I = np.clip(c.k_i * (-(x - ref.pos) * s.plant.control_period), -c.f_i_max, c.f_i_max)
        else:
            F_I = np.zeros(3)
        e_R = Rotation.from_matrix(ref.R @ snap.R_world_ee.T).as_rotvec()
        u_pos = ref.acc + (f - c.d * (xd - ref.vel) - c.k * (x - ref.pos) + F_I) / c.m
        u_rot = ref.alpha + (c.k_rot * e_R + c.d_rot * (ref.omega - om)) / c.m_rot
        S_pos = np.abs(ref.acc) + (
            np.abs(f) + c.d * np.abs(xd - ref.vel) + c.k * np.abs(x - ref.pos) + np.abs(F_I)
        ) / c.m
        S_rot = np.abs(ref.alpha) + (c.k_rot * np.abs(e_R) + c.d_rot * np.abs(ref.omega - om)) / c.m_rot
        assert_within(ctrl.u[:3], u_pos, 16 * 8 * EPS * S_pos, f"u_pos, trial {trial}")
        assert_within(ctrl.u[3:], u_rot, 16 * (8 * EPS * S_rot + 16 * EPS * c.k_rot / c.m_rot), f"u_rot, trial {trial}")
        if ctrl.use_integral:
            assert_within(ctrl.F_I, F_I, 16 * 4 * EPS * np.abs(F_I), "F_I")


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_one_solve_equals_the_textbook_torque(robot: str) -> None:
    """τ = Jᵀ y + h − d_null q̇ with Λ⁻¹ y = u − J̇q̇ + d_null J M⁻¹ q̇ (the code's one Cholesky solve) equals
    τ = Jᵀ Λ (u − J̇q̇) + h − Nᵀ d_null q̇ with Λ, J̄ and N formed explicitly (numpy inverse), feedforward off.

    Bound: both solve a system with Λ⁻¹ (condition κ) in different ways, ≤ n ε κ ‖Λ‖‖rhs‖ each (n = 7), then
    the products with Jᵀ and Nᵀ: |Δτ| ≤ 64 n ε κ (|Jᵀ| |y| + |h| + d_null |q̇| + |Nᵀ| d_null |q̇|) per joint.
    Dropping the null-space term changes τ by d_null |Nᵀ q̇| ≈ 1 N·m here."""
    s = _setup(robot)
    rng = np.random.default_rng(29)
    cfg = dataclasses.replace(s.controller.config, feedforward="off", friction_integral="off")
    for trial in range(6):
        ctrl = KhatibController(cfg, s.plant)
        q = s.q0 + rng.uniform(-0.3, 0.3, 7)
        v = rng.uniform(-0.5, 0.5, 7)
        snap = s.dynamics.update(q, v)
        ref = random_reference(rng, snap)
        cmd = ctrl.make_command()
        ctrl.compute(snap, ref, WrenchState(), cmd)
        J, M, Mi, dn = snap.J_ee_lwa, snap.M, snap.Minv, cfg.d_null
        Li = J @ Mi @ J.T
        Lam = np.linalg.inv(Li)
        N = np.eye(7) - Mi @ J.T @ Lam @ J
        y = Lam @ (ctrl.u - snap.dJdq_ee_lwa)
        tau = J.T @ y + snap.h - N.T @ (dn * v)
        kappa = np.linalg.cond(Li)
        scale = np.abs(J.T) @ np.abs(y) + np.abs(snap.h) + dn * np.abs(v) + np.abs(N.T) @ (dn * np.abs(v))
        assert_within(cmd.tau, tau, 64 * 7 * EPS * kappa * scale, f"trial {trial}")
        assert np.abs(N.T @ (dn * v) - dn * v).max() > 0.05, "the null-space projection must matter here"
        del M


def test_the_law_damps_the_joints_with_B() -> None:
    """docs/theory/khatib.md (4.2): at a fixed pose with a static reference and no force, the part of τ that
    depends on q̇ through the law's damping is −B q̇, B = Jᵀ Λ D_m J + d_null (I − Jᵀ Λ J M⁻¹), D_m = diag(d/m I₃,
    d_rot/m_rot I₃) (the Coriolis bias h and the drift J̇q̇ are held at their q̇ = 0 values, 0 at zero gravity,
    so that only the damping differs). FR3, feedforward and friction integral off.

    Bound: as test_one_solve_equals_the_textbook_torque, |Δτ| ≤ 64 n ε κ(Λ⁻¹) (|Jᵀ| |Λ| |D_m J q̇| + d_null |q̇|
    (1 + |Jᵀ Λ J M⁻¹|)) per joint. Dropping d_null's projection, or D_m, changes τ by O(|B q̇|)."""
    s = _setup("fr3")
    rng = np.random.default_rng(31)
    cfg = dataclasses.replace(s.controller.config, feedforward="off", friction_integral="off")
    Dm = np.diag([cfg.d / cfg.m] * 3 + [cfg.d_rot / cfg.m_rot] * 3)
    for trial in range(4):
        q = s.q0 + rng.uniform(-0.3, 0.3, 7)
        taus = []
        for v in (np.zeros(7), rng.uniform(-0.2, 0.2, 7)):
            ctrl = KhatibController(cfg, s.plant)
            snap = s.dynamics.update(q, v)
            snap.h[:] = 0.0  # zero gravity: h(q, 0) = 0
            snap.dJdq_ee_lwa[:] = 0.0  # J̇ q̇ at q̇ = 0
            ref = random_reference(rng, snap)
            ref.pos[:] = snap.p_ee_in_world
            ref.R[:] = snap.R_world_ee
            ref.vel[:] = ref.omega[:] = ref.acc[:] = ref.alpha[:] = 0.0
            cmd = ctrl.make_command()
            ctrl.compute(snap, ref, WrenchState(), cmd)
            taus.append(cmd.tau.copy())
        J, Mi = snap.J_ee_lwa, snap.Minv
        Li = J @ Mi @ J.T
        Lam = np.linalg.inv(Li)
        B = J.T @ Lam @ Dm @ J + cfg.d_null * (np.eye(7) - J.T @ Lam @ J @ Mi)
        scale = np.abs(J.T) @ np.abs(Lam) @ np.abs(Dm @ J @ v) + cfg.d_null * np.abs(v) * (
            1.0 + np.abs(J.T @ Lam @ J @ Mi).sum(axis=1))
        assert_within(taus[1] - taus[0], -B @ v, 64 * 7 * EPS * np.linalg.cond(Li) * scale, f"trial {trial}")
        assert np.abs(B @ v).max() > 1.0, "the damping must be visible"


@pytest.mark.parametrize("gravity", [False, True])
def test_task_acceleration_in_contact_is_u_plus_the_wrench_term(gravity: bool) -> None:
    """With a wrench F = [f; n] acting on the tool at E (applied in MuJoCo, as in
    tests/paper/test_model.py) and the law fed its force part f: the realised task acceleration
    J q̈ + J̇ q̇ (q̈ from MuJoCo) is u + Λ⁻¹ F, Λ⁻¹ = J M⁻¹ Jᵀ — the plant adds the wrench once more on top of the
    law's own M_d⁻¹ f (docs/theory/khatib.md §3).

    Bound: TOL["task_acc_abs"] = 1e-6 m/s² (realised vs commanded task acceleration, model agreement and
    the solve's round-off; measured 8e-12 in free space, tests/helpers.py). Λ⁻¹ F is ≥ 0.1 m/s² here."""
    s = _setup("iiwa14", gravity)
    m = s.asm.model
    data = mujoco.MjData(m)
    qa, da = s.asm.qpos_adr, s.asm.dof_adr
    body = int(m.site_bodyid[s.asm.ee_site])
    rng = np.random.default_rng(31)
    cfg = dataclasses.replace(s.controller.config, feedforward="off")
    for trial in range(4):
        ctrl = KhatibController(cfg, s.plant)
        q = s.q0 + rng.uniform(-0.2, 0.2, 7)
        v = rng.uniform(-0.3, 0.3, 7)
        F = np.concatenate([rng.uniform(-10.0, 10.0, 3), rng.uniform(-1.0, 1.0, 3)])
        snap = s.dynamics.update(q, v)
        ref = random_reference(rng, snap)
        w = WrenchState()
        w.ext_world[:3] = F[:3]
        cmd = ctrl.make_command()
        ctrl.compute(snap, ref, w, cmd)
        assert np.all(np.abs(cmd.tau) < s.plant.tau_max), "the test state must not saturate"
        data.qpos[qa], data.qvel[da], data.ctrl[s.asm.act_ids] = q, v, cmd.tau
        mujoco.mj_kinematics(m, data)
        p_E, c = data.site_xpos[s.asm.ee_site].copy(), data.xipos[body].copy()
        data.xfrc_applied[:] = 0.0
        data.xfrc_applied[body, :3] = F[:3]
        data.xfrc_applied[body, 3:] = F[3:] + np.cross(p_E - c, F[:3])
        mujoco.mj_forward(m, data)
        snap = s.dynamics.update(q, v)
        realised = snap.J_ee_lwa @ data.qacc[da] + snap.dJdq_ee_lwa
        wrench_term = snap.J_ee_lwa @ snap.Minv @ snap.J_ee_lwa.T @ F
        assert np.abs(wrench_term).max() > 0.1
        assert_within(realised, ctrl.u + wrench_term, TOL["task_acc_abs"], f"trial {trial}")
