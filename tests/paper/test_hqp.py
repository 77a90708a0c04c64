"""MATH.md §3: HQP with adaptive compliance (controllers/hqp.py).

Checks: the adaptive stiffness law (monotone, bounded, the two sigmoid forms), D_r symmetric positive
definite from symmetric square roots, the analytic manipulability gradient against finite differences
of Pinocchio, strict priority (level 2 never changes level 1's optimum; lexicographic when constraints
are active), the backends agree, a failed QP falls back and is counted, and in closed loop the torque
limits and a joint position limit are honoured where Khatib violates them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pinocchio as pin
import pytest

from controllers.hqp import (
    STATUS_CLOSED_FORM,
    STATUS_FALLBACK,
    STATUS_QP,
    HQPConfig,
    HQPController,
    manipulability_gradient,
)
from planners.base import Reference
from sim import lie
from sim.loop import build, simulate
from sim.robots import get_robot
from sim.scenario import scenario_from_dict
from sim.wrench import WrenchState

# Tolerance table (the only tolerances used in this module).
TOL_SYM = 1e-12  # symmetry of D_r (relative to its norm)
TOL_LAMBDA = 1e-9  # Λ from the eigendecomposition vs a direct inverse (relative)
TOL_GRAD_FD = 1e-7  # ∇w vs central differences (step 1e-6)
TOL_LEVEL1 = 1e-9  # level-1 task acceleration with vs without level 2 (absolute, m/s² | rad/s²)
TOL_QP_VS_CLOSED = 1e-7  # QP solution vs the closed form when no constraint is active
TOL_BACKENDS = 1e-5  # daqp vs quadprog vs proxqp (proxqp eps_abs = 1e-7) on the same problem
TOL_TORQUE = 1e-9  # |τ_cmd| ≤ τ_max (relative)
TOL_JOINT_LIMIT = 1e-4  # joint-limit overshoot scale [rad]

SEED = 3


def _free_space(robot: str = "iiwa14", controller: dict | None = None, offset=(0.0, 0.0, 0.0),
                duration: float = 1.0, **robot_keys) -> dict:
    """No target: the planner holds the start pose FK(q_init) + offset (a step of ``offset``)."""
    return {
        "name": f"{robot}_hqp_free",
        "robot": {"type": robot, "q_init": list(get_robot(robot).home), **robot_keys},
        "sim": {"duration": duration},
        "start": {"offset": list(offset)},
        "planner": {"type": "quintic"},
        "controller": controller or {"type": "hqp"},
        "wrench": {"force_source": "truth"},
    }


def _random_states(s, n: int, rng: np.random.Generator, dq: float = 0.3, dv: float = 0.3):
    for _ in range(n):
        yield s.q0 + rng.uniform(-dq, dq, s.plant.nv), rng.uniform(-dv, dv, s.plant.nv)


def _build(s, ctrl: HQPController, q: np.ndarray, v: np.ndarray, ref: Reference | None, wrench: WrenchState,
           rng: np.random.Generator | None = None, pos_err: float = 0.005):
    """Snapshot at (q, v) and the assembled problem; ``ref=None`` → a reference near the current
    pose (position error ≤ ``pos_err``, 0.01 rad orientation error, small desired motion)."""
    snap = s.dynamics.update(q, v, 0.0)
    if ref is None:
        ref = _ref_near(snap, rng, pos_err)
    return snap, ctrl.build_problem(snap, ref, wrench)


def _ref_near(snap, rng: np.random.Generator, pos_err: float, rot_err: float = 0.01) -> Reference:
    ref = Reference()
    ref.pos[:] = snap.p_ee_in_world + rng.uniform(-pos_err, pos_err, 3)
    ref.R[:] = lie.so3_exp(rng.uniform(-rot_err, rot_err, 3)) @ snap.R_world_ee
    ref.vel[:] = rng.uniform(-0.05, 0.05, 3)
    ref.acc[:] = rng.uniform(-0.1, 0.1, 3)
    return ref


# ------------------------------------------------------------------------------ adaptive compliance


@pytest.mark.parametrize("sigmoid", ["plain", "shifted"])
def test_adaptive_stiffness_is_monotone_and_bounded(sigmoid: str) -> None:
    s = build(scenario_from_dict(_free_space()))
    ctrl = HQPController(HQPConfig(sigmoid=sigmoid), s.plant, s.planner)
    K0 = np.array(HQPConfig().k0)
    Kmin = HQPConfig().k_min_ratio * K0
    forces = np.linspace(0.0, 60.0, 601)
    K = np.zeros((len(forces), 6))
    for i, f in enumerate(forces):
        ctrl._adaptive_stiffness(f, K[i])
    assert np.all(np.diff(K, axis=0) <= 0.0), "K_r must not increase with ‖F_ext‖"
    assert np.all(K >= Kmin - 1e-12) and np.all(K <= K0 + 1e-12)
    # free space: plain σ(0) = ½ → K_0/2; shifted 2σ(0) − 1 = 0 → K_0. Large force → K_min.
    np.testing.assert_allclose(K[0], K0 / 2 if sigmoid == "plain" else K0, rtol=1e-15)
    np.testing.assert_allclose(K[-1], Kmin, rtol=1e-12)
    # one interior point against the formula: K_r = clip((1 − α) K_0, K_min, K_0)
    sig = 1.0 / (1.0 + np.exp(-0.5 * 2.0))
    alpha = sig if sigmoid == "plain" else 2.0 * sig - 1.0
    np.testing.assert_allclose(K[20], np.clip((1.0 - alpha) * K0, Kmin, K0), rtol=1e-14)


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_damping_is_symmetric_positive_definite(robot: str) -> None:
    """D_r = Λ^½ K_r^½ + K_r^½ Λ^½ is SPD at sampled states, and the eigh-based Λ equals (J M⁻¹ Jᵀ)⁻¹."""
    s = build(scenario_from_dict(_free_space(robot)))
    ctrl = HQPController(HQPConfig(), s.plant, s.planner)
    rng = np.random.default_rng(SEED)
    w = WrenchState()
    for q, v in _random_states(s, 25, rng):
        w.ext_world[:3] = rng.normal(scale=5.0, size=3)  # vary K_r through α
        snap, p = _build(s, ctrl, q, v, None, w, rng, pos_err=0.02)
        D = p.D_r
        assert np.max(np.abs(D - D.T)) <= TOL_SYM * np.linalg.norm(D)
        assert np.linalg.eigvalsh(D).min() > 0.0
        J = snap.J_ee_lwa
        Lam = np.linalg.inv(J @ np.linalg.inv(snap.M) @ J.T)
        np.testing.assert_allclose(p.Lambda, Lam, rtol=TOL_LAMBDA, atol=TOL_LAMBDA * np.abs(Lam).max())
        # D_r from an independent symmetric square root of the directly inverted Λ
        kh = np.sqrt(p.K_r)
        mu, V = np.linalg.eigh(Lam)
        Lh_ref = (V * np.sqrt(mu)) @ V.T
        D_ref = Lh_ref @ np.diag(kh) + np.diag(kh) @ Lh_ref
        np.testing.assert_allclose(D, D_ref, rtol=1e-9, atol=1e-9 * np.abs(D_ref).max())


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_manipulability_gradient_matches_finite_differences(robot: str) -> None:
    s = build(scenario_from_dict(_free_space(robot)))
    model = s.asm.pin_model
    data = model.createData()
    fid = s.dynamics.ee_frame
    rng = np.random.default_rng(SEED)

    def w_and_J(q):
        J = pin.computeFrameJacobian(model, data, q, fid, pin.LOCAL_WORLD_ALIGNED)
        return float(np.sqrt(np.linalg.det(J @ J.T))), J.copy()

    h = 1e-6
    for q, _ in _random_states(s, 5, rng, dq=0.5):
        w, J = w_and_J(q)
        g = manipulability_gradient(J, w)
        fd = np.array([(w_and_J(q + h * e)[0] - w_and_J(q - h * e)[0]) / (2 * h) for e in np.eye(len(q))])
        np.testing.assert_allclose(g, fd, atol=TOL_GRAD_FD)
        assert np.abs(fd).max() > 1e-3  # the check is not trivially zero


# ------------------------------------------------------------------------------ strict priority


def test_level2_does_not_change_level1_when_constraints_inactive() -> None:
    s = build(scenario_from_dict(_free_space()))
    rng = np.random.default_rng(SEED)
    w = WrenchState()
    for mode in ("always", "auto"):
        with_l2 = HQPController(HQPConfig(qp_mode=mode), s.plant, s.planner)
        without = HQPController(HQPConfig(qp_mode=mode, k_j=0.0, d_j=0.0, k_sa=0.0), s.plant, s.planner)
        for q, v in _random_states(s, 10, rng, dq=0.1, dv=0.05):
            # small errors: the iiwa's light wrist (Λ ≈ 1e-3 kg·m² about the flange axis) would
            # otherwise hit the velocity box with a 0.01 rad orientation error
            ref = _ref_near(s.dynamics.update(q, v), rng, 0.003, rot_err=0.001)
            snap, p = _build(s, with_l2, q, v, ref, w)
            sol_a = with_l2.solve(snap)
            qdd_a = sol_a.qdd.copy()
            task_a = p.J @ qdd_a - p.b
            closed_a = p.qdd_closed.copy()
            snap, p = _build(s, without, q, v, ref, w)
            sol_b = without.solve(snap)
            task_b = p.J @ sol_b.qdd - p.b
            assert sol_a.n_active == 0 and sol_b.n_active == 0
            assert sol_a.status == (STATUS_QP if mode == "always" else STATUS_CLOSED_FORM)
            # level 1 is solved exactly (J full row rank) and level 2 does not touch it ...
            np.testing.assert_allclose(task_a, task_b, atol=TOL_LEVEL1)
            np.testing.assert_allclose(task_a, 0.0, atol=TOL_LEVEL1)
            # ... while level 2 does change the joint acceleration (the test can fail)
            assert np.abs(qdd_a - sol_b.qdd).max() > 1e-3
            # the QP path returns the closed-form lexicographic optimum
            np.testing.assert_allclose(qdd_a, closed_a, atol=TOL_QP_VS_CLOSED)


def test_level2_keeps_level1_optimum_when_constraints_active() -> None:
    """Tight torque limits make level 1 inexact; level 2 still leaves J q̈ at level 1's optimum."""
    s = build(scenario_from_dict(_free_space()))
    tight = dataclasses.replace(s.plant, tau_max=np.full(s.plant.nv, 3.0))
    ctrl = HQPController(HQPConfig(qp_mode="auto"), tight, s.planner)
    rng = np.random.default_rng(SEED + 1)
    w = WrenchState()
    n_active = 0
    residuals = []
    for q, v in _random_states(s, 10, rng, dq=0.1, dv=0.05):
        # a 5 cm error: the unconstrained torque exceeds 3 N·m
        snap, p = _build(s, ctrl, q, v, None, w, rng, pos_err=0.05)
        sol = ctrl.solve(snap)
        assert sol.status == STATUS_QP
        n_active += sol.n_active
        np.testing.assert_allclose(p.J @ sol.qdd, p.J @ sol.qdd_level1, atol=1e-8)
        residuals.append(sol.level1_residual)
        tau = snap.M @ sol.qdd + p.tau_offset
        assert np.all(np.abs(tau) <= 3.0 * (1 + 1e-7))
    assert n_active > 0
    assert sum(r > 1e-3 for r in residuals) >= 3, residuals  # the constraints really bind level 1


def test_backends_agree_on_an_active_problem() -> None:
    s = build(scenario_from_dict(_free_space()))
    tight = dataclasses.replace(s.plant, tau_max=np.full(s.plant.nv, 3.0))
    rng = np.random.default_rng(SEED + 2)
    q, v = next(_random_states(s, 1, rng, dq=0.1, dv=0.05))
    ref = _ref_near(s.dynamics.update(q, v), rng, 0.05)
    sols = {}
    for solver in ("daqp", "quadprog", "proxqp"):
        ctrl = HQPController(HQPConfig(solver=solver, qp_mode="always"), tight, s.planner)
        snap, _ = _build(s, ctrl, q, v, ref, WrenchState())
        sol = ctrl.solve(snap)
        assert sol.status == STATUS_QP, solver
        assert sol.n_active > 0
        sols[solver] = sol.qdd.copy()
    np.testing.assert_allclose(sols["quadprog"], sols["daqp"], atol=TOL_BACKENDS)
    np.testing.assert_allclose(sols["proxqp"], sols["daqp"], atol=TOL_BACKENDS)


def test_failed_qp_falls_back_to_least_squares_and_is_counted() -> None:
    s = build(scenario_from_dict(_free_space()))
    ctrl = HQPController(HQPConfig(qp_mode="always"), s.plant, s.planner)
    ref = Reference()
    s.planner.evaluate(0.0, ref)
    snap, p = _build(s, ctrl, s.q0, np.zeros(s.plant.nv), ref, WrenchState())
    p.h[: s.plant.nv] = -1.0  # M q̈ ≤ −1 and −M q̈ ≤ −1: infeasible
    p.h[s.plant.nv :] = -1.0
    sol = ctrl.solve(snap)
    assert sol.status == STATUS_FALLBACK
    np.testing.assert_array_equal(sol.qdd, p.qdd_closed)
    assert sol.primal_residual >= 1.0
    summary = ctrl.summary()
    assert summary["qp_failures"] == 1 and summary["qp_solved"] == 1


# ------------------------------------------------------------------------------ closed loop


def test_torque_limits_are_never_exceeded_where_khatib_saturates() -> None:
    """An 11 cm step with a 5 N·m torque limit: Khatib's command saturates, the HQP's never does."""
    results = {}
    for name, ctrl in (("khatib", {"type": "khatib", "k": 300, "d": 100}), ("hqp", {"type": "hqp"})):
        s = build(scenario_from_dict(_free_space(controller=ctrl, offset=(0.0, 0.1, -0.05), duration=1.0,
                                                 max_torque=5.0)))
        tel, status, _, _ = simulate(s)
        assert status == "completed"
        results[name] = (tel.channels(), s)
    ch_k, _ = results["khatib"]
    assert ch_k["saturated"].any(), "the scenario must push Khatib into saturation"
    ch, s = results["hqp"]
    assert not ch["saturated"].any()
    assert np.all(np.abs(ch["tau_cmd"]) <= s.plant.tau_max * (1 + TOL_TORQUE))
    summary = s.controller.summary()
    assert summary["qp_solved"] > 0 and summary["qp_failures"] == 0
    assert np.max(ch["ctrl_qp_active"]) >= 1


def test_joint_position_limit_is_honoured_where_khatib_crosses_it() -> None:
    """Joint 4 (elbow) gets an artificial upper limit 0.3 rad above its start; a 15 cm forward step
    takes about 0.6 rad of it when unconstrained. Khatib (no limits) crosses it by > 0.2 rad.

    HQP, ``position_constraint: critical`` (q + Δq̇ + ¼Δ²q̈): stops at the limit (≤ 1e-9 rad).
    HQP, ``paper`` (q + Δq̇ + ½Δ²q̈, MATH.md): the receding-horizon row gives the distance to the
    limit the dynamics ë + (2/Δ)ė + (2/Δ²)e = 0 (ζ = 0.707), so it may overshoot by at most
    0.067 Δ v (v = approach speed) — and it does overshoot (the analysis is checked both ways)."""
    d = _free_space(offset=(0.15, 0.0, 0.0), duration=1.5)
    j = 3
    out = {}
    for name in ("khatib", "paper", "critical"):
        dd = dict(d, controller={"type": "khatib", "k": 300, "d": 100} if name == "khatib" else {"type": "hqp"})
        s = build(scenario_from_dict(dd))
        q_max = s.plant.q_max.copy()
        q_max[j] = s.q0[j] + 0.3
        plant = dataclasses.replace(s.plant, q_max=q_max)
        if name != "khatib":
            ctrl = HQPController(HQPConfig(position_constraint=name), plant, s.planner)
            s = dataclasses.replace(s, plant=plant, controller=ctrl)
        tel, status, _, _ = simulate(s)
        assert status == "completed"
        ch = tel.channels()
        out[name] = (ch["q"][:, j].max() - q_max[j], np.abs(ch["v"][:, j]).max())
        if name != "khatib":
            assert s.controller.summary()["qp_failures"] == 0
    assert out["khatib"][0] > 0.2, "Khatib must cross the artificial limit for the test to mean anything"
    over, v_peak = out["paper"]
    assert 0.0 < over <= 0.067 * 0.05 * v_peak + TOL_JOINT_LIMIT * 0.01, (over, v_peak)
    assert over < TOL_JOINT_LIMIT * 20  # ≈ 1.5 mrad here vs Khatib's > 200 mrad
    assert out["critical"][0] <= 1e-9, out["critical"]
