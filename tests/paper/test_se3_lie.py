"""docs/theory/se3_lie.md: SE(3) Lie-group impedance (controllers/se3_lie.py).

Checks: λ̇ = dexp⁻¹_λ Ṽ matches finite differences of log(T⁻¹T_d) (this pins the LEFT-Jacobian
convention: Ṽ = Ad_T̃ V_d − V is T̃'s spatial twist); power invariance λ̇ᵀγ = ṼᵀF̃; V̇_ref realises
λ̈ = A⁻¹(γ − Dλ̇ − Kλ) (second finite differences); the null-space term leaves the task acceleration
unchanged (algebra and MuJoCo); closed-loop closure in free space against the analytic solution of
A λ̈ + D λ̇ + K λ = 0 from a 5 cm / 20° error, with first-order convergence in the step size; the
overshoot of a translation step with A = 100; and Config validation of full matrices.
"""

from __future__ import annotations

import dataclasses
import math

import mujoco
import numpy as np
import pytest
from dockbench.controllers.feedforward import DissipationFeedforward
from dockbench.controllers.se3_lie import SE3LieConfig, SE3LieController
from dockbench.planners.base import Reference
from dockbench.sim import kernels, lie
from dockbench.sim.errors import ScenarioError
from dockbench.sim.ik import solve_ik
from dockbench.sim.loop import build, simulate
from dockbench.sim.robots import get_robot
from dockbench.sim.scenario import scenario_from_dict
from dockbench.sim.wrench import WrenchState

from tests.helpers import EPS, assert_within

# Tolerance table (the only tolerances used in this module). ε = 2.2e-16 (float64 machine epsilon).
# Round-off tolerances are stated bounds (constant named) ≥ 10× above the worst case measured on five
# BLAS / SIMD code paths (OpenBLAS SkylakeX, Haswell, Sandybridge and default kernels; numpy's SIMD
# dispatch narrowed to its baseline); κ(Λ⁻¹) ≈ 1.4e4 at the worst sampled state.
C_LAM = 32  # λ from the controller (float path) vs se3_log(T⁻¹ T_d) (4×4 BLAS products), in units of
#   ε·max(1, |p|, |p_d|, |λ|): γ_4 per product entry and the log's few roundings per side; measured ≤ 1.2
C_POWER = 32  # λ̇ᵀγ vs ṼᵀF̃, in units of ε·(|λ̇|·|γ| + |Ṽ|·|F̃|): λ̇ and γ carry the dexp products' ≤ ~12
#   roundings, the two dot products γ_6; measured ≤ 0.72
TOL_FD1 = 1e-7  # first central differences, step 1e-5
TOL_FD2 = 1e-5  # second central differences, step 1e-4
TOL_TASK = 1e-9  # task acceleration with/without the null-space term (algebra)
TOL_TASK_MJ = 1e-6  # the same measured through MuJoCo (model agreement ~1e-9 relative)
TOL_CLOSURE = 1e-3  # ‖λ − λ_analytic‖ / ‖λ(0)‖ over 2 s (docs/theory/se3_lie.md)
TOL_OVERSHOOT = 0.01  # relative error of the step overshoot
C_IMPL = 64  # the controller vs the matrix-form reference, in units of ε·max(1, |x|), for the terms before
#   the task-space solve (T̃ … V̇_ref): 6×6 BLAS products and a 6×6 LU solve on both sides in another
#   grouping (≤ ~20 roundings each, both sides counted); measured ≤ 3.5
C_SOLVE = 12  # q̈_ref and τ, through the Cholesky solve with Λ⁻¹ = J M⁻¹ Jᵀ, in units of
#   ε·κ(Λ⁻¹)·max(1, |x|): two evaluations × the solve's backward error n·ε, n = 6; measured ≤ 0.093

SEED = 5
ANGLES = (0.0, 0.35, 1.6, 3.0)  # rotation errors [rad]: zero, 20°, past the series switch, near π


@pytest.fixture(autouse=True)
def _python_reference():
    """Controllers built here run the Python float path: the equations are checked on the reference
    implementation (the compiled kernel is checked against it in tests/test_se3_kernel.py)."""
    with kernels.forced("python"):
        yield


def _plant_controller(config: SE3LieConfig | None = None, robot: str = "iiwa14"):
    s = build(scenario_from_dict(_free_space(robot)))
    ctrl = SE3LieController(config or SE3LieConfig(), s.plant, s.planner)
    return s, ctrl


def _free_space(
    robot: str = "iiwa14",
    controller: dict | None = None,
    duration: float = 2.0,
    dt: float = 0.001,
    offset=(0.0, 0.0, 0.0),
) -> dict:
    """No target, zero gravity; the planner holds FK(q_init) + offset. force_source = truth, so the
    controller sees zero wrench in free space (the F/T would report the tool's inertial load)."""
    return {
        "name": f"{robot}_se3_free",
        "robot": {"type": robot, "q_init": list(get_robot(robot).home)},
        "sim": {"timestep": dt, "control_period": dt, "duration": duration},
        "start": {"offset": list(offset)},
        "planner": {"type": "quintic"},
        "controller": controller or {"type": "se3_lie"},
        "wrench": {"force_source": "truth"},
    }


def _axis(rng):
    a = rng.normal(size=3)
    return a / np.linalg.norm(a)


def _random_state(rng, angle: float):
    """Random (T, V, T_d, V_d, V̇, V̇_d, F) with a relative rotation of ``angle``."""
    T = lie.se3_exp(np.concatenate((rng.normal(size=3), rng.uniform(0, 3) * _axis(rng))))
    T_err = lie.se3_exp(np.concatenate((rng.normal(scale=0.1, size=3), angle * _axis(rng))))
    return (
        T,
        rng.normal(size=6),
        T @ T_err,
        rng.normal(size=6),
        rng.normal(size=6),
        rng.normal(size=6),
        rng.normal(scale=5.0, size=6),
    )


def _lam(T, T_d):
    return lie.se3_log(lie.se3_inv(T) @ T_d)


def _traj(T0, V, dV, t):
    """T(t) = T0 exp(tV + ½t²V̇): body twist V and body acceleration V̇ at t = 0."""
    return T0 @ lie.se3_exp(t * V + 0.5 * t * t * dV)


# ------------------------------------------------------------------------------ equation level


@pytest.mark.parametrize("angle", ANGLES)
def test_lambda_dot_matches_finite_differences(angle: float) -> None:
    _, ctrl = _plant_controller()
    rng = np.random.default_rng(SEED)
    for _ in range(3):
        T, V, T_d, V_d, dV, dV_d, F = _random_state(rng, angle)
        ctrl.error_state(T, V, T_d, V_d, F)
        h = 1e-5
        fd = (
            _lam(_traj(T, V, dV, h), _traj(T_d, V_d, dV_d, h)) - _lam(_traj(T, V, dV, -h), _traj(T_d, V_d, dV_d, -h))
        ) / (2 * h)
        scale = max(1.0, np.abs(T[:3, 3]).max(), np.abs(T_d[:3, 3]).max(), np.abs(ctrl.lam).max())
        np.testing.assert_allclose(ctrl.lam, _lam(T, T_d), rtol=0, atol=C_LAM * EPS * scale)
        # λ̇ = dexp⁻¹_λ Ṽ with dexp_λ = lie.dexp(−λ) (left Jacobian), closed form
        np.testing.assert_allclose(ctrl.lam_dot, lie.dexp_inv(-ctrl.lam) @ ctrl.V_err, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(ctrl.lam_dot, fd, atol=TOL_FD1 * max(1.0, np.abs(fd).max()))
        # ... and the right-Jacobian reading would be wrong for a finite rotation
        wrong = lie.dexp_inv(ctrl.lam) @ ctrl.V_err
        if angle > 0.1:
            assert np.abs(wrong - fd).max() > 1e-3


@pytest.mark.parametrize("angle", ANGLES)
def test_power_invariance(angle: float) -> None:
    _, ctrl = _plant_controller(SE3LieConfig(wrench_desired=(1.0, -2.0, 0.5, 0.1, 0.2, -0.3)))
    rng = np.random.default_rng(SEED + 1)
    for _ in range(5):
        T, V, T_d, V_d, _, _, F = _random_state(rng, angle)
        ctrl.error_state(T, V, T_d, V_d, F)
        lhs = float(ctrl.lam_dot @ ctrl.gamma)
        rhs = float(ctrl.V_err @ ctrl.F_err)
        mag = np.abs(ctrl.lam_dot) @ np.abs(ctrl.gamma) + np.abs(ctrl.V_err) @ np.abs(ctrl.F_err)
        np.testing.assert_allclose(lhs, rhs, rtol=0, atol=C_POWER * EPS * mag)
        # F̃ = Ad_T̃⁻ᵀ F_d − F_body
        F_err = lie.Ad_inv(ctrl.T_err).T @ np.array(ctrl.config.wrench_desired) - F
        np.testing.assert_allclose(ctrl.F_err, F_err, atol=1e-12)


@pytest.mark.parametrize("angle", ANGLES)
def test_reference_acceleration_realises_the_designed_error_dynamics(angle: float) -> None:
    """With the EE moving at body acceleration V̇_ref, the second derivative of λ(t) = log(T⁻¹T_d)
    equals A⁻¹(γ − Dλ̇ − Kλ) (full, non-diagonal A, D, K)."""
    rng = np.random.default_rng(SEED + 2)
    B = rng.normal(size=(6, 6))
    A = B @ B.T + 6 * np.eye(6)
    C = rng.normal(size=(6, 6))
    K = C @ C.T + np.eye(6)
    D = np.diag(rng.uniform(1, 5, 6))
    cfg = SE3LieConfig(a_matrix=tuple(map(tuple, A)), d_matrix=tuple(map(tuple, D)), k_matrix=tuple(map(tuple, K)))
    _, ctrl = _plant_controller(cfg)
    for _ in range(3):
        T, V, T_d, V_d, _, dV_d, F = _random_state(rng, angle)
        ctrl.error_state(T, V, T_d, V_d, F)
        dV_ref = ctrl.reference_acceleration(dV_d).copy()
        target = np.linalg.solve(A, ctrl.gamma - D @ ctrl.lam_dot - K @ ctrl.lam)
        np.testing.assert_allclose(ctrl.lam_ddot, target, rtol=1e-12, atol=1e-12)
        h = 1e-4

        def lam_at(t, T=T, V=V, dV_ref=dV_ref, T_d=T_d, V_d=V_d, dV_d=dV_d):
            return _lam(_traj(T, V, dV_ref, t), _traj(T_d, V_d, dV_d, t))

        fd2 = (lam_at(h) - 2 * lam_at(0.0) + lam_at(-h)) / (h * h)
        np.testing.assert_allclose(fd2, target, atol=TOL_FD2 * max(1.0, np.abs(target).max()))


def test_null_space_term_leaves_task_acceleration_unchanged() -> None:
    s = build(scenario_from_dict(_free_space()))
    rng = np.random.default_rng(SEED + 3)
    m = s.asm.model
    ref = Reference()
    s.planner.evaluate(0.0, ref)
    w = WrenchState()
    for _ in range(5):
        q = s.q0 + rng.uniform(-0.2, 0.2, s.plant.nv)
        v = rng.uniform(-0.5, 0.5, s.plant.nv)
        snap = s.dynamics.update(q, v, 0.0)
        acc, qdd, taus = {}, {}, {}
        for d_null in (0.0, 10.0):
            ctrl = SE3LieController(SE3LieConfig(d_null=d_null, feedforward="off"), s.plant, s.planner)
            cmd = ctrl.make_command()
            ctrl.compute(snap, ref, w, cmd)
            qdd[d_null] = ctrl.q_ddot_ref.copy()
            acc[d_null] = snap.J_ee_body @ ctrl.q_ddot_ref + snap.dJdq_ee_body
            np.testing.assert_allclose(acc[d_null], ctrl.dV_ref, atol=TOL_TASK * max(1, np.abs(ctrl.dV_ref).max()))
            taus[d_null] = cmd.tau.copy()
        np.testing.assert_allclose(acc[10.0], acc[0.0], atol=TOL_TASK * max(1, np.abs(acc[0.0]).max()))
        assert np.abs(qdd[10.0] - qdd[0.0]).max() > 1e-2  # the null-space term is really there
        # measured: MuJoCo's forward dynamics under both torques give the same body acceleration
        meas = {}
        for d_null, tau in taus.items():
            data = mujoco.MjData(m)
            data.qpos[s.asm.qpos_adr] = q
            data.qvel[s.asm.dof_adr] = v
            data.ctrl[s.asm.act_ids] = tau
            mujoco.mj_forward(m, data)
            meas[d_null] = snap.J_ee_body @ data.qacc[s.asm.dof_adr] + snap.dJdq_ee_body
            np.testing.assert_allclose(meas[d_null], acc[d_null], atol=TOL_TASK_MJ * max(1, np.abs(acc[0.0]).max()))
        np.testing.assert_allclose(meas[10.0], meas[0.0], atol=TOL_TASK_MJ * max(1, np.abs(acc[0.0]).max()))


# ------------------------------------------------------------------------------ implementation


def _matrix_form(ctrl: SE3LieController, snap, mr_T, mr_V, mr_dV, F_body) -> dict[str, np.ndarray]:
    """The controller's equations written with 6×6 matrices (lie.dexp, lie.dexp_dot, lie.Ad,
    np.linalg.solve): the reference the float implementation must reproduce to round-off."""
    c = ctrl.config
    T = snap.T_world_ee
    T_err = lie.se3_inv(T) @ mr_T
    lam = lie.se3_log(T_err)
    AdT = lie.Ad(T_err)
    AdVd = AdT @ mr_V
    V_err = AdVd - snap.twist_ee_body
    Jl = lie.dexp(-lam)
    lam_dot = np.linalg.solve(Jl, V_err)
    F_err = lie.Ad_inv(T_err).T @ ctrl.F_d - F_body
    gamma = Jl.T @ F_err
    lam_ddot = ctrl.Ainv @ gamma - ctrl.AinvD @ lam_dot - ctrl.AinvK @ lam
    Jld = lie.dexp_dot(-lam, -lam_dot)
    dV_ref = AdT @ mr_dV + lie.ad(V_err) @ AdVd - (Jl @ lam_ddot + Jld @ lam_dot)
    Jb, M = snap.J_ee_body, snap.M
    Li = Jb @ snap.Minv @ Jb.T
    y = np.linalg.solve(Li, dV_ref - snap.dJdq_ee_body + c.d_null * snap.twist_ee_body)
    q_ddot_ref = snap.Minv @ Jb.T @ y - c.d_null * snap.v
    tau = Jb.T @ (y - F_body) - c.d_null * (M @ snap.v) + snap.h
    if ctrl.ff.active:
        tau = tau + DissipationFeedforward(ctrl.plant.dof_frictionloss, ctrl.plant.dof_damping, c.feedforward).compute(
            snap.v, tau
        )
    return {
        "T_err": T_err,
        "lam": lam,
        "V_err": V_err,
        "lam_dot": lam_dot,
        "F_err": F_err,
        "gamma": gamma,
        "lam_ddot": lam_ddot,
        "dV_ref": dV_ref,
        "q_ddot_ref": q_ddot_ref,
        "tau": tau,
    }


@pytest.mark.parametrize("rotating", [True, False], ids=["omega", "fixed_orientation"])
@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
@pytest.mark.parametrize("angle", ANGLES)
def test_float_implementation_equals_matrix_form(robot: str, angle: float, rotating: bool) -> None:
    """compute() (SE3LieController.law and the joint-space solve) = the matrix-form equations to
    round-off, for diagonal and full A, D, K, with and without F_d and d_null, at rotation errors up to
    near π, for a rotating reference (ω, α ≠ 0) and a fixed-orientation one (ω = α = 0: the code paths
    that leave out the exact zeros). Bounds: C_IMPL·ε·max(1, |x|) before the task-space solve,
    C_SOLVE·ε·κ(Λ⁻¹)·max(1, |x|) for q̈_ref and τ (table above); a wrong term is ≥ 1e-6 relative."""
    rng = np.random.default_rng(SEED + 10)
    s = build(scenario_from_dict(_free_space(robot)))
    B = rng.normal(size=(6, 6))
    A = B @ B.T + 6 * np.eye(6)
    configs = [
        SE3LieConfig(),
        SE3LieConfig(wrench_desired=(1.0, -2.0, 0.5, 0.1, 0.2, -0.3), d_null=0.0, feedforward="velocity"),
        SE3LieConfig(a_matrix=tuple(map(tuple, A)), k_matrix=tuple(map(tuple, A + np.eye(6)))),
    ]
    w = WrenchState()
    for cfg in configs:
        ctrl = SE3LieController(cfg, s.plant, None)  # echoes the reference handed to compute()
        cmd = ctrl.make_command()
        for _ in range(3):
            q = s.q0 + rng.uniform(-0.3, 0.3, s.plant.nv)
            v = rng.uniform(-0.5, 0.5, s.plant.nv)
            snap = s.dynamics.update(q, v, 0.0)
            T_d = snap.T_world_ee @ lie.se3_exp(np.concatenate((rng.normal(scale=0.05, size=3), angle * _axis(rng))))
            ref = Reference()
            ref.pos[:], ref.R[:] = T_d[:3, 3], T_d[:3, :3]
            ref.vel[:], ref.acc[:] = rng.normal(size=3), rng.normal(size=3)
            ref.omega[:], ref.alpha[:] = rng.normal(size=3), rng.normal(size=3)
            if not rotating:
                ref.omega[:] = ref.alpha[:] = 0.0
            w.ext_body[:] = rng.normal(scale=5.0, size=6)
            ctrl.compute(snap, ref, w, cmd)
            T_d, V_d, dV_d = ctrl.desired_motion()
            # exact: the float desired motion and the adapter's arrays come from the same function
            # (planners.motion_reference._body_motion) on the same reference
            mr = ctrl.mref.update_from_reference(ref, snap.t)
            for a, b in ((T_d, mr.T), (V_d, mr.V), (dV_d, mr.dV)):
                np.testing.assert_array_equal(a, b)
            want = _matrix_form(ctrl, snap, T_d, V_d, dV_d, w.ext_body)
            got = {k: getattr(ctrl, k) for k in want if k != "tau"} | {"tau": cmd.tau}
            Jb = snap.J_ee_body
            kappa = np.linalg.cond(Jb @ snap.Minv @ Jb.T)
            for k, x in want.items():
                c = C_SOLVE * kappa if k in ("q_ddot_ref", "tau") else C_IMPL
                assert_within(got[k], x, c * EPS * max(1.0, np.abs(x).max()), err_msg=k)
            np.testing.assert_array_equal(cmd.diag, ctrl.lam)  # exact: the diagnostics are a copy of λ


# ------------------------------------------------------------------------------ closed loop


def _analytic(lam0: np.ndarray, A: np.ndarray, D: np.ndarray, K: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Solution of A λ̈ + D λ̇ + K λ = 0, λ(0) = λ0, λ̇(0) = 0 (diagonal A, D, K), per axis."""
    out = np.zeros((len(t), 6))
    for i in range(6):
        a, d, k = A[i, i], D[i, i], K[i, i]
        disc = d * d - 4 * a * k
        if abs(disc) < 1e-9 * d * d:  # critically damped: s = −d/2a double root
            r = -d / (2 * a)
            out[:, i] = lam0[i] * (1 - r * t) * np.exp(r * t)
        elif disc > 0:
            r1, r2 = (-d + math.sqrt(disc)) / (2 * a), (-d - math.sqrt(disc)) / (2 * a)
            out[:, i] = lam0[i] * (r2 * np.exp(r1 * t) - r1 * np.exp(r2 * t)) / (r2 - r1)
        else:
            sr, wi = -d / (2 * a), math.sqrt(-disc) / (2 * a)
            out[:, i] = lam0[i] * np.exp(sr * t) * (np.cos(wi * t) - sr / wi * np.sin(wi * t))
    return out


def _closure_error(dt: float) -> tuple[float, np.ndarray]:
    """Free-space run from a 5 cm / 20° error; max over 2 s of ‖λ − λ_analytic‖ / ‖λ(0)‖."""
    s = build(scenario_from_dict(_free_space(dt=dt)))
    direction = np.array([0.3, 1.0, -0.6]) / np.linalg.norm([0.3, 1.0, -0.6])
    axis = np.array([1.0, -2.0, 0.5]) / np.linalg.norm([1.0, -2.0, 0.5])
    lam0 = np.concatenate((0.05 * direction, math.radians(20.0) * axis))
    T0 = s.T_world_goal @ lie.se3_exp(-lam0)  # λ = log(T0⁻¹ T_d) = λ0
    q0 = solve_ik(s.asm.pin_model, s.asm.frame_ids[s.asm.tool.ee_site], T0, s.q0)
    s.data.qpos[s.asm.qpos_adr] = q0
    s.data.qvel[:] = 0.0
    mujoco.mj_forward(s.asm.model, s.data)
    tel, status, _, _ = simulate(s)
    assert status == "completed"
    ch = tel.channels()
    lam = np.stack([ch[f"ctrl_{n}"] for n in s.controller.diag_names], axis=1)
    np.testing.assert_allclose(lam[0], lam0, atol=1e-8)
    an = _analytic(lam[0], s.controller.A, s.controller.D, s.controller.K, ch["t"])
    err = np.linalg.norm(lam - an, axis=1).max() / np.linalg.norm(lam0)
    return err, lam


def test_closed_loop_closure_free_space() -> None:
    """λ(t) follows the analytic solution within 1e-3 relative over 2 s (dt = 0.5 ms); the residual
    is the step-size discretisation: it halves from dt = 1 ms to 0.5 ms (first order)."""
    err_1ms, lam = _closure_error(0.001)
    err_05ms, _ = _closure_error(0.0005)
    assert err_05ms <= TOL_CLOSURE, err_05ms
    assert 1.8 <= err_1ms / err_05ms <= 2.2, (err_1ms, err_05ms)
    assert np.linalg.norm(lam[-1]) < 0.1 * np.linalg.norm(lam[0])  # it actually converged


def test_translation_step_overshoot_matches_linear_ode() -> None:
    """A = 100 (translation), D = 80, K = 50: ζ = d / (2√(a k)) = 0.566 → overshoot
    exp(−πζ/√(1 − ζ²)) = 11.6 %, at t = π/ω_d = 5.39 s."""
    a, d, k = 100.0, 80.0, 50.0
    ctrl = {
        "type": "se3_lie",
        "a_diag": [a, a, a, 1, 1, 1],
        "d_diag": [d, d, d, 10, 10, 10],
        "k_diag": [k, k, k, 25, 25, 25],
    }
    step = np.array([0.0, 0.02, 0.01])
    s = build(scenario_from_dict(_free_space(controller=ctrl, duration=6.5, offset=tuple(step))))
    tel, status, _, _ = simulate(s)
    assert status == "completed"
    ch = tel.channels()
    lam_v = np.stack([ch["ctrl_lambda_vx"], ch["ctrl_lambda_vy"], ch["ctrl_lambda_vz"]], axis=1)
    lam0 = lam_v[0]
    np.testing.assert_allclose(np.linalg.norm(lam0), np.linalg.norm(step), rtol=1e-9)
    proj = lam_v @ lam0 / (lam0 @ lam0)  # 1 → 0 → −overshoot
    zeta = d / (2 * math.sqrt(a * k))
    predicted = math.exp(-math.pi * zeta / math.sqrt(1 - zeta**2))
    wd = math.sqrt(k / a - (d / (2 * a)) ** 2)
    i = int(np.argmin(proj))
    np.testing.assert_allclose(-proj[i], predicted, rtol=TOL_OVERSHOOT)
    np.testing.assert_allclose(ch["t"][i], math.pi / wd, rtol=0.01)


# ------------------------------------------------------------------------------ configuration


def _parse(block: dict):
    return scenario_from_dict(_free_space(controller={"type": "se3_lie", **block})).controller.config


def test_config_full_matrices_override_diagonals_and_are_validated() -> None:
    A = np.diag([5.0, 5.0, 5.0, 0.5, 0.5, 0.5])
    A[0, 4] = A[4, 0] = 0.3
    cfg = _parse({"a_matrix": A.tolist()})
    A_, D_, K_ = cfg.matrices()
    # exact: the matrices are the YAML floats stored as given (no arithmetic)
    np.testing.assert_array_equal(A_, A)
    np.testing.assert_array_equal(D_, np.diag(SE3LieConfig().d_diag))
    np.testing.assert_array_equal(K_, np.diag(SE3LieConfig().k_diag))
    bad = A.copy()
    bad[0, 0] = -1.0
    with pytest.raises(ScenarioError, match=r"controller\.a_matrix: must be positive definite"):
        _parse({"a_matrix": bad.tolist()})
    asym = np.eye(6)
    asym[0, 1] = 0.5
    with pytest.raises(ScenarioError, match=r"controller\.k_matrix: must be symmetric"):
        _parse({"k_matrix": asym.tolist()})
    with pytest.raises(ScenarioError, match=r"expected a list of 6 values"):
        _parse({"d_matrix": np.eye(5).tolist()})
    with pytest.raises(ScenarioError, match=r"controller\.k_diag\[2\]: must be > 0"):
        _parse({"k_diag": [1, 1, 0, 1, 1, 1]})
    assert dataclasses.is_dataclass(cfg)


# ------------------------------------------------------------------------------ sensor bias

TOL_EQ = 1e-10  # Newton residual of Λ_b V̇_ref(λ) − b [N]: the law's float path is exact to ~1e-13 here
TOL_EQ_MJ = 1e-7  # MuJoCo's q̈ under the law's torque at the equilibrium [rad/s²] (Pinocchio ≡ MuJoCo ~1e-9 rel.)


def _bias_equilibrium(ctrl: SE3LieController, snap, b: np.ndarray) -> tuple[np.ndarray, dict]:
    """The rest pose error λ at which the law, reading the wrench b with no contact (F_true = 0), holds the
    arm still (q̇ = 0): Λ_b V̇_ref(λ) = b (docs/theory/se3_lie.md "A biased F/T sensor"). Newton on λ with
    a central-difference Jacobian; the desired pose T_d = T exp(λ), V_d = V̇_d = 0."""
    T = snap.T_world_ee
    Jb = snap.J_ee_body
    Lam = np.linalg.inv(Jb @ snap.Minv @ Jb.T)
    zero = np.zeros(6)

    def residual(lam):
        ctrl.error_state(T, zero, T @ lie.se3_exp(lam), zero, b)
        return Lam @ ctrl.reference_acceleration(zero) - b

    lam = np.zeros(6)
    for _ in range(30):
        r = residual(lam)
        if np.abs(r).max() < TOL_EQ:
            break
        Jr = np.column_stack([(residual(lam + 1e-6 * e) - residual(lam - 1e-6 * e)) / 2e-6 for e in np.eye(6)])
        lam = lam - np.linalg.solve(Jr, r)
    return lam, {"Lam": Lam, "residual": np.abs(residual(lam)).max()}


def test_biased_sensor_shifts_the_rest_pose_by_k_inv_a_lambda_inv_minus_i() -> None:
    """A constant F/T bias b (no contact) moves the rest pose of the SE(3) law to λ with Λ_b V̇_ref(λ) = b;
    to first order K λ = (A Λ_b⁻¹ − I) b (docs/theory/se3_lie.md). Checked: (1) MuJoCo's forward dynamics
    under the law's torque at that λ give q̈ = 0 (the equilibrium is the plant's, not only the algebra's);
    (2) the first-order formula within O(|b|²); (3) A = Λ_b makes the bias harmless (λ = 0); (4) it is not
    a small effect with the default A: a 0.5 N bias moves the tip by centimetres."""
    s = build(scenario_from_dict(_free_space()))
    ctrl = SE3LieController(SE3LieConfig(feedforward="off"), s.plant, None)
    cmd = ctrl.make_command()
    snap = s.dynamics.update(s.q0, np.zeros(s.plant.nv), 0.0)
    A, _, K = (np.asarray(x) for x in ctrl.config.matrices())
    b_unit = np.array([0.5, -0.3, 0.4, 0.02, -0.01, 0.03])  # [N, N·m] in EE body axes
    lam, info = _bias_equilibrium(ctrl, snap, b_unit)
    assert info["residual"] < TOL_EQ
    Lam = info["Lam"]
    # (1) the plant is at rest under the law's own torque at λ (Reference = T exp(λ), at rest)
    T_d = snap.T_world_ee @ lie.se3_exp(lam)
    ref = Reference()
    ref.pos[:], ref.R[:] = T_d[:3, 3], T_d[:3, :3]
    w = WrenchState()
    w.ext_body[:] = b_unit
    ctrl.compute(snap, ref, w, cmd)
    data = mujoco.MjData(s.asm.model)
    data.qpos[s.asm.qpos_adr] = s.q0
    data.ctrl[s.asm.act_ids] = cmd.tau
    mujoco.mj_forward(s.asm.model, data)
    assert np.abs(data.qacc[s.asm.dof_adr]).max() < TOL_EQ_MJ
    # the same torque with the unbiased reading (b = 0, λ unchanged) does accelerate the arm
    w.ext_body[:] = 0.0
    ctrl.compute(snap, ref, w, cmd)
    data.ctrl[s.asm.act_ids] = cmd.tau
    mujoco.mj_forward(s.asm.model, data)
    assert np.abs(data.qacc[s.asm.dof_adr]).max() > 1e-2
    # (2) first order: K λ = (A Λ_b⁻¹ − I) b; the remainder is O(|λ|²) relative to λ
    #     (measured: relative remainder = 0.34·|λ| at |λ| = 1.2e-2 and 1.2e-3; bound 2·|λ|, and it must shrink
    #     tenfold with b, which a missing or wrong first-order term would not)
    rels = []
    for eps in (1e-2, 1e-3):
        lam_e, _ = _bias_equilibrium(ctrl, snap, eps * b_unit)
        first = np.linalg.solve(K, (A @ np.linalg.inv(Lam) - np.eye(6)) @ (eps * b_unit))
        rels.append(np.linalg.norm(lam_e - first) / np.linalg.norm(first))
        assert rels[-1] < 2.0 * np.linalg.norm(first), (eps, rels[-1])
    assert 5.0 < rels[0] / rels[1] < 20.0, rels
    # (4) the default A amplifies: the 0.5 N-scale bias moves the tip ≥ 1 cm
    assert np.linalg.norm(lam[:3]) > 0.01
    # (3) A = Λ_b (full matrix at this pose): the law reads the bias and cancels it exactly; no offset
    sym = 0.5 * (Lam + Lam.T)
    shaped = SE3LieController(SE3LieConfig(feedforward="off", a_matrix=tuple(map(tuple, sym))), s.plant, None)
    lam_0, info_0 = _bias_equilibrium(shaped, snap, b_unit)
    assert info_0["residual"] < TOL_EQ and np.abs(lam_0).max() < 1e-9, lam_0


def test_tare_removes_the_bias_offset_in_a_docking() -> None:
    """The system-level consequence: iiwa14_docking_se3 with a drawn F/T bias (σ = 0.5 N per force axis)
    and no tare misses the drogue by centimetres (the rest-pose shift above, acting during the approach);
    with the sensor tared in free space before the approach it seats and passes its gates."""
    from dockbench.sim.loop import run
    from dockbench.sim.scenario import load_scenario

    base = load_scenario("scenarios/iiwa14_docking_se3.yaml")
    with kernels.forced("auto"):  # the compiled law (the paper tests above pin the Python reference)
        untared = run(dataclasses.replace(base, uncertainty=dataclasses.replace(
            base.uncertainty, ft_bias_std=(0.5, 0.5, 0.5, 0.0, 0.0, 0.0))), out_root=None)
        tared = run(dataclasses.replace(base, uncertainty=dataclasses.replace(
            base.uncertainty, ft_bias_std=(0.5, 0.5, 0.5, 0.0, 0.0, 0.0)),
            wrench=dataclasses.replace(base.wrench, tare_time=0.5)), out_root=None)
    assert untared.metrics["docking.lateral"] > 0.01
    assert tared.verdict == "PASS", tared.gates
