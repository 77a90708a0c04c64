"""docs/theory/model.md: the plant equation, the lumped inertia, the snapshot's drifts and manipulability,
and the operational-space identities, each checked numerically.

Tolerances are bounds with their error model stated next to them (docs/testing.md §2); ``EPS`` is the
float64 machine epsilon."""

from __future__ import annotations

import mujoco
import numpy as np
import pinocchio as pin
import pytest
from dockbench.sim.dynamics import Dynamics, LumpedInertia, manipulability
from dockbench.sim.loop import build
from dockbench.sim.scenario import scenario_from_dict

from tests.helpers import EPS, TOL, assert_within, scenario_dict


def _free_space(robot: str, gravity: bool):
    d = scenario_dict(f"{robot}_docking")
    d.pop("target")
    d["sim"]["gravity"] = [0.0, 0.0, -9.81] if gravity else [0.0, 0.0, 0.0]
    return build(scenario_from_dict(d))


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
@pytest.mark.parametrize("gravity", [False, True])
def test_plant_equation_with_an_external_wrench(robot: str, gravity: bool) -> None:
    """M q̈ + h = τ + Jᵀ F_ext with F_ext = [f; n] applied AT THE EE ORIGIN, in world axes, by MuJoCo
    (``xfrc_applied`` acts at the body's centre of mass c, so the moment there is n + (p_E − c) × f) and
    q̈ read from MuJoCo's forward dynamics; M, h, J from the Pinocchio snapshot. This pins the sign and the
    frame of the external term the laws are written against (docs/theory/model.md §2). The joint
    dissipation of the FR3 model is switched off: the equation is the rigid-body part.

    Bound: the two libraries' model agreement, relative TOL["mass_matrix_rel"] = 1e-9 (measured 1e-15 on
    M and h, tests/helpers.py) of the residual's scale S = |M||q̈| + |h| + |τ| + |Jᵀ||F| per joint. A flipped
    sign or a moment about the wrong point is O(|Jᵀ F|), ≥ 1e8 S-relative."""
    s = _free_space(robot, gravity)
    m = s.asm.model
    m.dof_damping[:] = 0.0
    m.dof_frictionloss[:] = 0.0
    data = mujoco.MjData(m)
    qa, da = s.asm.qpos_adr, s.asm.dof_adr
    body = int(m.site_bodyid[s.asm.ee_site])
    rng = np.random.default_rng(17)
    for trial in range(5):
        q = s.q0 + rng.uniform(-0.3, 0.3, 7)
        v = rng.uniform(-0.5, 0.5, 7)
        tau = rng.uniform(-0.2, 0.2, 7) * s.plant.tau_max
        F = np.concatenate([rng.uniform(-20.0, 20.0, 3), rng.uniform(-2.0, 2.0, 3)])  # [N; N·m] at E
        data.qpos[qa], data.qvel[da], data.ctrl[s.asm.act_ids] = q, v, tau
        mujoco.mj_kinematics(m, data)
        p_E, c = data.site_xpos[s.asm.ee_site].copy(), data.xipos[body].copy()
        data.xfrc_applied[:] = 0.0
        data.xfrc_applied[body, :3] = F[:3]
        data.xfrc_applied[body, 3:] = F[3:] + np.cross(p_E - c, F[:3])
        mujoco.mj_forward(m, data)
        assert data.ncon == 0, "free space"
        qacc = data.qacc[da]
        snap = s.dynamics.update(q, v)
        lhs = snap.M @ qacc + snap.h
        rhs = tau + snap.J_ee_lwa.T @ F
        scale = np.abs(snap.M) @ np.abs(qacc) + np.abs(snap.h) + np.abs(tau) + np.abs(snap.J_ee_lwa.T) @ np.abs(F)
        assert_within(lhs, rhs, TOL["mass_matrix_rel"] * scale, f"trial {trial}")
        # the wrench term itself is large here: the check is not vacuous
        assert np.max(np.abs(snap.J_ee_lwa.T @ F)) > 1.0


def test_lumped_inertia_is_the_composite_rigid_body() -> None:
    """LumpedInertia.update: m = Σ m_b, c = Σ m_b c_b / m, I_c = Σ [R_b I_p,b R_bᵀ + m_b (‖r_b‖² 1 − r_b r_bᵀ)]
    in the arm body B's frame, for the G20 hand's 22 bodies at a random finger pose (not the pose the model
    was built at), against Pinocchio's own inertia algebra: each body's inertia in world axes
    (``pin.Inertia``), summed with ``+`` (Pinocchio's parallel-axis implementation) and moved into B's frame
    with ``SE3.actInv``.

    Bound: both sides are sums of n ≈ 25 terms of rotated tensors and parallel-axis products (≤ 6 roundings
    each): |Δ| ≤ 64 n ε Σ_b (|I_b| + m_b |r_b|²) on the inertia, 64 n ε Σ m_b |c_b| on m·c, 4 n ε m on m.
    A missing parallel-axis term is ≥ 1e-6 kg·m² (a finger phalanx 0.1 m from c)."""
    s = build(scenario_from_dict(scenario_dict("fr3_g20_tracking")))
    m = s.asm.model
    model = pin.Model(s.asm.pin_model)
    lumped = LumpedInertia(m, model, s.asm.robot.joint_names)
    assert lumped.active, "the hand's fingers are articulated: the last arm link must be re-lumped"
    data = mujoco.MjData(m)
    data.qpos[:] = m.qpos0
    data.qpos[s.asm.qpos_adr] = s.q0
    rng = np.random.default_rng(3)
    hand = [j for j in range(m.njnt) if mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j).startswith("hand/")]
    assert len(hand) == 21
    for j in hand:
        lo, hi = m.jnt_range[j]
        data.qpos[m.jnt_qposadr[j]] = rng.uniform(lo, hi)
    lumped.update(data.qpos)
    mujoco.mj_kinematics(m, data)
    for jid, B, bodies in lumped.groups:
        total = pin.Inertia.Zero()
        scale_I = scale_c = 0.0
        for b in bodies:
            R = data.ximat[b].reshape(3, 3)
            I_world = R @ np.diag(m.body_inertia[b]) @ R.T
            total = total + pin.Inertia(float(m.body_mass[b]), data.xipos[b].copy(), I_world)
        T_world_B = pin.SE3(data.xmat[B].reshape(3, 3).copy(), data.xpos[B].copy())
        want = T_world_B.actInv(total)
        got = model.inertias[jid]
        n = len(bodies)
        for b in bodies:
            r = data.xipos[b] - (T_world_B.rotation @ want.lever + T_world_B.translation)
            scale_I += np.abs(m.body_inertia[b]).max() + m.body_mass[b] * float(r @ r)
            scale_c += m.body_mass[b] * float(np.abs(data.xipos[b] - data.xpos[B]).max())
        assert_within(got.mass, want.mass, 4 * n * EPS * want.mass, "mass")
        assert_within(got.mass * got.lever, want.mass * want.lever, 64 * n * EPS * scale_c, "m·c")
        assert_within(got.inertia, want.inertia, 64 * n * EPS * scale_I, "I_c")
        # the fingers moved: the composite differs from the one the model was built with
        built = s.asm.pin_model.inertias[jid]
        assert np.abs(built.inertia - want.inertia).max() > 1e-6


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_drift_is_the_second_derivative_of_the_ee_position(robot: str) -> None:
    """Along q(t) = q + t q̇ (q̈ = 0): ``dJdq_ee_lwa`` = [d²p_E/dt²; dω/dt] and ``dJdq_ee_body`` = d/dt (J_b q̇),
    from MuJoCo's forward kinematics (positions for p̈, its site Jacobian for ω and the body twist), not
    from Pinocchio's Jacobians.

    Bounds (h = 2e-4 s, |q̇| ≤ 0.5 rad/s, |p| ≤ 1.5 m): the central second difference of p errs by
    h²/12 max|p⁗| + 4 ε |p| / h² ≤ 3.3e-9 · 9 + 3.3e-8 (|p⁗| ≤ (Σ|q̇_i|)⁴ · 1.5 m ≈ 9 m/s⁴); the central
    first difference of ω or V_b by h²/6 max|ω‴| + ε |ω| / h ≤ 1e-8. Tolerance 1e-6 [m/s², rad/s²]:
    ≥ 10× both. The spatial instead of the classical acceleration differs by ω × ṗ ≈ 0.1 m/s²."""
    s = _free_space(robot, False)
    m = s.asm.model
    data = mujoco.MjData(m)
    qa, site = s.asm.qpos_adr, s.asm.ee_site
    jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    rng = np.random.default_rng(5)
    h = 2e-4
    dyn = Dynamics(s.asm.pin_model, s.dynamics.ee_frame, s.dynamics.sensor_frame)  # body frame and drift on

    def kin(q):
        data.qpos[qa] = q
        mujoco.mj_kinematics(m, data)
        mujoco.mj_comPos(m, data)
        mujoco.mj_jacSite(m, data, jacp, jacr, site)
        R = data.site_xmat[site].reshape(3, 3)
        da = s.asm.dof_adr
        return data.site_xpos[site].copy(), jacp[:, da].copy(), jacr[:, da].copy(), R.copy()

    for _ in range(4):
        q = s.q0 + rng.uniform(-0.3, 0.3, 7)
        v = rng.uniform(-0.5, 0.5, 7)
        snap = dyn.update(q, v)
        p0, *_ = kin(q)
        pp, Jpp, Jrp, Rp = kin(q + h * v)
        pm, Jpm, Jrm, Rm = kin(q - h * v)
        p_dd = (pp - 2 * p0 + pm) / h**2
        w_d = (Jrp @ v - Jrm @ v) / (2 * h)
        Vb_d = np.concatenate([Rp.T @ (Jpp @ v) - Rm.T @ (Jpm @ v), Rp.T @ (Jrp @ v) - Rm.T @ (Jrm @ v)]) / (2 * h)
        assert_within(snap.dJdq_ee_lwa, np.concatenate([p_dd, w_d]), 1e-6, "classical drift")
        assert_within(snap.dJdq_ee_body, Vb_d, 1e-6, "body drift")
        spatial = snap.dJdq_ee_lwa[:3] - np.cross(snap.twist_ee_lwa[3:], snap.twist_ee_lwa[:3])
        assert np.abs(spatial - p_dd).max() > 1e-4, "the test must tell classical from spatial"


def test_manipulability_is_the_product_of_singular_values() -> None:
    """w = Π L_ii (Cholesky of J Jᵀ) = √det(J Jᵀ) = Π σ_i(J); 0 for a rank-deficient or NaN Jacobian.

    Bound (relative): forming J Jᵀ and its Cholesky factor perturb det(J Jᵀ) by ≤ 2 n γ_{n+1} κ(J Jᵀ)
    (γ_k = k ε / (1 − k ε), n = 6), the square root halves it; the SVD's σ_i carry ≤ 10 n ε κ(J) each.
    Tolerance 100 n ε κ(J Jᵀ) relative, ≥ 10× their sum."""
    rng = np.random.default_rng(9)
    work = np.zeros((6, 6))
    for robot in ("iiwa14", "fr3"):
        s = _free_space(robot, False)
        dyn = Dynamics(s.asm.pin_model, s.dynamics.ee_frame, s.dynamics.sensor_frame)
        for _ in range(10):
            q = rng.uniform(s.plant.q_min, s.plant.q_max)
            J = dyn.update(q, np.zeros(7)).J_ee_lwa.copy()
            sv = np.linalg.svd(J, compute_uv=False)
            kappa = (sv[0] / sv[-1]) ** 2
            w = manipulability(J, work)
            assert_within(w, np.prod(sv), 100 * 6 * EPS * kappa * np.prod(sv), robot)
            assert w == dyn.snap.manipulability or dyn.kernel == "compiled"  # exact: the same function
    J = np.ones((6, 7))
    assert manipulability(J, work) == 0.0  # rank 1: a zero pivot
    J = rng.normal(size=(6, 7))
    J[5] = 0.0
    assert manipulability(J, work) == 0.0
    J[0, 0] = np.nan
    assert manipulability(J, work) == 0.0


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_operational_space_identities(robot: str) -> None:
    """With Λ = (J M⁻¹ Jᵀ)⁻¹, J̄ = M⁻¹ Jᵀ Λ, N = I − J̄ J from the snapshot (M⁻¹ = ``Minv``):
    J J̄ = I, J N = 0, N² = N, N J̄ = 0, J M⁻¹ Nᵀ = 0 and M N M⁻¹ = Nᵀ (dynamic consistency).

    Bound: each identity is a chain of ≤ 4 products of 7×7 / 6×7 matrices and the 6×6 inverse of Λ⁻¹,
    whose error is ≤ n ε κ(Λ⁻¹) relative: |Δ| ≤ 64 n ε κ(Λ⁻¹) Π‖factor‖ (n = 7, ‖·‖ = 7 max|·|). The last
    one also needs M⁻¹ = M⁻¹ (Pinocchio computes both, each to ≤ n ε κ(M)): κ(M) more. Measured ≤ 0.1 %
    of these bounds; a non-symmetric M⁻¹ or a wrong J̄ is O(1)."""
    s = _free_space(robot, False)
    rng = np.random.default_rng(13)
    for _ in range(5):
        q = s.q0 + rng.uniform(-0.3, 0.3, 7)
        snap = s.dynamics.update(q, np.zeros(7))
        J, M, Mi = snap.J_ee_lwa, snap.M, snap.Minv
        Li = J @ Mi @ J.T
        Lam = np.linalg.inv(Li)
        Jbar = Mi @ J.T @ Lam
        N = np.eye(7) - Jbar @ J
        bound = 64 * 7 * EPS * np.linalg.cond(Li)
        nJ, nJbar, nN, nM, nMi = (np.abs(x).max() * 7 for x in (J, Jbar, N, M, Mi))
        assert_within(J @ Jbar, np.eye(6), bound * nJ * nJbar, "J J̄ = I")
        assert_within(J @ N, 0.0, bound * nJ * nN, "J N = 0")
        assert_within(N @ N, N, bound * nN * nN, "N² = N")
        assert_within(N @ Jbar, 0.0, bound * nN * nJbar, "N J̄ = 0")
        assert_within(J @ Mi @ N.T, 0.0, bound * nJ * nMi * nN, "J M⁻¹ Nᵀ = 0")
        assert_within(M @ N @ Mi, N.T, bound * np.linalg.cond(M) * nM * nN * nMi, "M N M⁻¹ = Nᵀ")
