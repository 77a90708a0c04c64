"""docs/theory/hqp.md: HQP with adaptive compliance (controllers/hqp.py).

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
from dockbench.controllers.feedforward import DissipationFeedforward
from dockbench.controllers.hqp import (
    STATUS_CLOSED_FORM,
    STATUS_FALLBACK,
    STATUS_QP,
    HQPConfig,
    HQPController,
    manipulability_gradient,
)
from dockbench.controllers.observer import MomentumObserver
from dockbench.planners.base import Reference
from dockbench.sim import kernels, lie
from dockbench.sim.loop import build, run, simulate
from dockbench.sim.robots import get_robot
from dockbench.sim.scenario import scenario_from_dict
from dockbench.sim.wrench import WrenchState

from tests.helpers import EPS, assert_within, press_scenario

# Tolerance table (the only tolerances used in this module). ε = 2.2e-16 (float64 machine epsilon).
# Round-off tolerances are stated bounds (constant named) ≥ 10× above the worst case measured on five
# BLAS / SIMD code paths (OpenBLAS SkylakeX, Haswell, Sandybridge and default kernels; numpy's SIMD
# dispatch narrowed to its baseline); κ(Λ⁻¹) ≈ 1.4e4 and κ(J Jᵀ) ≈ 4e2 at the worst sampled states.
TOL_SYM = 1e-12  # symmetry of D_r (relative to ‖D_r‖): the asymmetry of V diag(d) Vᵀ from one gemm is
#   ≤ 2γ_6 ‖V‖² max d ≲ 12ε κ(Λ)^½ ‖D_r‖ ≈ 3e-13; measured ≤ 0.35ε‖D_r‖
TOL_LAMBDA = 1e-9  # Λ from the eigendecomposition vs a direct inverse (relative): both ≤ c·n·ε·κ(Λ⁻¹)
#   with n = 6, c ≈ 4 (≈ 1e-11), plus the explicit M⁻¹ of the reference (κ(M) ≈ 4e3); measured ≤ 1.4e-11
TOL_GRAD_FD = 1e-7  # ∇w vs central differences (step 1e-6): truncation h²/6·|w‴| + round-off ε|w|/h
TOL_LEVEL1 = 1e-9  # level-1 task acceleration with vs without level 2 (absolute, m/s² | rad/s²): both
#   solve J q̈ = b exactly up to ≈ n·ε·κ(Λ⁻¹)·|b| ≈ 1e-11; measured ≤ 6e-13
TOL_QP_VS_CLOSED = 1e-7  # QP solution vs the closed form when no constraint is active (solver tolerance)
TOL_BACKENDS = 1e-5  # daqp vs quadprog vs proxqp (proxqp eps_abs = 1e-7) on the same problem
TOL_TORQUE = 1e-9  # |τ_cmd| ≤ τ_max (relative)
TOL_JOINT_LIMIT = 1e-4  # joint-limit overshoot scale [rad]
C_ELEM = 16  # float implementation vs numpy reference for the terms without a solve (F_ext, K_r, e_p,
#   Δν, τ offset, boxes, torque rows), in units of ε·max(1, |x|): ≤ 6-term dot products (γ_6) and a libm
#   vs numpy-SIMD exp (≤ 4 ulp, through σ′ ≤ ¼) per side; measured ≤ 1.2
C_IMPL = 64  # … for the terms through the eigendecomposition of Λ⁻¹ and the (J Jᵀ) solve of ∇w (Λ, D_r,
#   F_r, a, b, q̈*, q̈_2), in units of ε·(κ(Λ⁻¹) + κ(J Jᵀ))·max(1, |x|): two evaluations × (7-term
#   products γ_7 + the eigensolver's backward error ≈ 4nε, n = 6); measured ≤ 4.9 (13× headroom)

SEED = 3


@pytest.fixture(autouse=True)
def _python_reference():
    """Controllers built here run the Python path, the reference these tests pin (the compiled kernel is
    checked against it in tests/test_hqp_kernel.py)."""
    with kernels.forced("python"):
        yield


def _free_space(
    robot: str = "iiwa14", controller: dict | None = None, offset=(0.0, 0.0, 0.0), duration: float = 1.0, **robot_keys
) -> dict:
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


def _build(
    s,
    ctrl: HQPController,
    q: np.ndarray,
    v: np.ndarray,
    ref: Reference | None,
    wrench: WrenchState,
    rng: np.random.Generator | None = None,
    pos_err: float = 0.005,
):
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
    # exact: σ(0) = 1/(1 + e⁰) = ½, 1 − ½ and 1 − 0 are exact, and K_0·½, K_0·1 are exact products; at
    # 60 N, 1 − α ≈ 1e-13 < k_min_ratio, so K_r = K_0·k_min_ratio, the same product as K_min
    np.testing.assert_array_equal(K[0], K0 / 2 if sigmoid == "plain" else K0)
    np.testing.assert_array_equal(K[-1], Kmin)
    # one interior point against the formula: K_r = clip((1 − α) K_0, K_min, K_0). Bound: numpy's exp
    # (SIMD) vs libm's ≤ 4 ulp, 1/(1 + e) two roundings: |Δσ| ≤ 6ε σ; 1 − α amplifies the relative error
    # by α/(1 − α) ≤ 3 here (×2 for the shifted form) and the product adds 1ε: ≤ 40ε per side
    sig = 1.0 / (1.0 + np.exp(-0.5 * 2.0))
    alpha = sig if sigmoid == "plain" else 2.0 * sig - 1.0
    np.testing.assert_allclose(K[20], np.clip((1.0 - alpha) * K0, Kmin, K0), rtol=80 * EPS, atol=0)


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


# ------------------------------------------------------------------------------ implementation


def _grad_w_reference(J: np.ndarray, w: float) -> np.ndarray:
    """∇w by the masked-matrix form: [i, k] = Jω_i · U_k (i < k), Jv_i · C_k (i ≥ k), summed over k."""
    P = np.linalg.solve(J @ J.T, J)
    Jv, Jw, Pv, Pw = J[:3], J[3:], P[:3], P[3:]
    U = np.cross(Jv, Pv, axis=0) + np.cross(Jw, Pw, axis=0)
    C = np.cross(Pv, Jw, axis=0)
    upper = np.triu(Jw.T @ U, 1)
    lower = np.tril(Jv.T @ C)
    return w * (upper + lower).sum(axis=1)


#: the reference-problem terms that pass through the eigendecomposition of Λ⁻¹ or the ∇w solve
_THROUGH_SOLVE = frozenset(("Lambda", "D_r", "F_r", "a", "b", "qdd_closed", "qdd_posture"))


def _reference_problem(ctrl: HQPController, snap, ref: Reference, wrench: WrenchState) -> dict:
    """The level-1/level-2 targets, box, torque rows and closed form written out with numpy
    (np.linalg.eigh, explicit slacks) — the reference of the optimised _build_task."""
    c, plant, nv = ctrl.config, ctrl.plant, ctrl.nv
    J, M = snap.J_ee_lwa, snap.M
    F = wrench.ext_world.copy()
    F[3:] += np.cross(snap.T_world_sensor[:3, 3] - snap.p_ee_in_world, F[:3])
    if not c.use_force_feedback:
        F[:] = 0.0
    s = 1.0 / (1.0 + np.exp(-c.k_alpha * np.linalg.norm(F[:3])))
    alpha = s if c.sigmoid == "plain" else 2.0 * s - 1.0
    K0 = np.array(c.k0)
    K_r = np.clip((1.0 - alpha) * K0, c.k_min_ratio * K0, K0)
    Li = J @ snap.Minv @ J.T
    mu, V = np.linalg.eigh(Li)
    Lam = (V / mu) @ V.T
    Lh = (V / np.sqrt(mu)) @ V.T
    D_r = Lh @ np.diag(np.sqrt(K_r)) + np.diag(np.sqrt(K_r)) @ Lh
    e_p = np.concatenate((snap.p_ee_in_world - ref.pos, lie.so3_log(snap.R_world_ee @ ref.R.T)))
    dnu = snap.twist_ee_lwa - np.concatenate((ref.vel, ref.omega))
    F_r = -D_r @ dnu - K_r * e_p
    a = np.concatenate((ref.acc, ref.alpha)) + Li @ (F_r + F)
    b = a - snap.dJdq_ee_lwa
    q2 = -c.d_j * snap.v - c.k_j * (snap.q - plant.q_home)
    if c.k_sa > 0.0 and snap.manipulability < c.w_th:
        q2 = q2 + c.k_sa * _grad_w_reference(J, snap.manipulability)
    qdd = q2 + snap.Minv @ J.T @ Lam @ (b - J @ q2)
    tau_offset = snap.h - (J.T @ F if c.wrench_compensation else 0.0)
    D = c.horizon
    kq = 1.0 / ((0.5 if c.position_constraint == "paper" else 0.25) * D * D)
    lbv, ubv = (-plant.v_max - snap.v) / D, (plant.v_max - snap.v) / D
    lb = np.maximum(kq * (plant.q_min - snap.q) - kq * D * snap.v, lbv)
    ub = np.minimum(kq * (plant.q_max - snap.q) - kq * D * snap.v, ubv)
    bad = lb > ub
    lb[bad], ub[bad] = lbv[bad], ubv[bad]
    m = ctrl._tau_lim - (ctrl._ff_f + ctrl._ff_d * np.abs(snap.v))
    h = np.concatenate((m - tau_offset, m + tau_offset))
    slack = np.concatenate((qdd - lb, ub - qdd, h[:nv] - M @ qdd, h[nv:] + M @ qdd))
    return {
        "F_ext": F,
        "K_r": K_r,
        "Lambda": Lam,
        "D_r": D_r,
        "e_p": e_p,
        "dnu": dnu,
        "F_r": F_r,
        "a": a,
        "b": b,
        "qdd_posture": q2,
        "qdd_closed": qdd,
        "tau_offset": tau_offset,
        "lb": lb,
        "ub": ub,
        "h": h,
        "alpha": alpha,
        "min_slack": slack.min(),
    }


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_optimised_problem_equals_numpy_reference(robot: str) -> None:
    """_build_task (floats, LAPACK dsyevd, BLAS-form ∇w, float feasibility test) = the numpy
    reference to round-off; its feasibility verdict equals the sign of the smallest slack, and
    compute() returns τ = M q̈ + offset (+ τ_ff) of the closed form.

    Round-off bounds: C_ELEM·ε·max(1, |x|) for the terms without a solve, C_IMPL·ε·(κ(Λ⁻¹) + κ(J Jᵀ))
    ·max(1, |x|) for those through the eigendecomposition (table above); α within 2(¼·6|z| + 8)ε, z =
    k_α‖F‖ (σ′ ≤ ¼, z carries ≤ 6ε|z| over both sides, libm vs numpy exp ≤ 4 ulp, ×2 for the shifted
    form); τ within 16ε(|M||q̈| + |offset|) (a 7-term product per side). An error in any formula is
    ≥ 1e-6 relative and fails."""
    s = build(scenario_from_dict(_free_space(robot)))
    rng = np.random.default_rng(SEED + 5)
    tight = dataclasses.replace(s.plant, tau_max=np.full(s.plant.nv, 4.0))
    q_max = s.plant.q_max.copy()
    q_max[0] = s.q0[0] - 0.4  # joint 0 beyond its upper limit: its position and velocity boxes are disjoint
    outside = dataclasses.replace(s.plant, q_max=q_max, q_min=np.minimum(s.plant.q_min, q_max - 1.0))
    # (config, plant, scale of the state, of the wrench and of the reference error): small errors keep
    # the closed form feasible, large ones (and 4 N·m limits) make it infeasible
    configs = [
        (HQPConfig(w_th=10.0), s.plant, 0.02, 0.5, 0.002),  # ∇w always on
        (HQPConfig(w_th=10.0), s.plant, 0.5, 5.0, 0.05),
        (
            HQPConfig(sigmoid="shifted", wrench_compensation=True, position_constraint="critical", feedforward="off"),
            s.plant,
            0.02,
            0.5,
            0.002,
        ),
        (HQPConfig(use_force_feedback=False, w_th=10.0), tight, 0.5, 5.0, 0.05),
        # large wrench-compensation offsets make the torque rows asymmetric (h_top ≠ h_bot)
        (HQPConfig(wrench_compensation=True, k_alpha=0.0), tight, 0.02, 8.0, 0.005),
        (HQPConfig(), outside, 0.02, 0.5, 0.002),
    ]
    verdicts = set()
    for cfg, plant, dv, fs, err in configs:
        ctrl = HQPController(cfg, plant, s.planner)
        cmd = ctrl.make_command()
        w = WrenchState()
        for q, v in _random_states(s, 8, rng, dq=0.3, dv=dv):
            snap = s.dynamics.update(q, v, 0.0)
            w.ext_world[:] = rng.normal(scale=fs, size=6)
            ref = _ref_near(snap, rng, err, rot_err=err)
            ref.omega[:], ref.alpha[:] = rng.normal(scale=dv, size=3), rng.normal(scale=dv, size=3)
            want = _reference_problem(ctrl, snap, ref, w)
            p = ctrl.build_problem(snap, ref, w)
            J = snap.J_ee_lwa
            kappa = np.linalg.cond(J @ snap.Minv @ J.T) + np.linalg.cond(J @ J.T)
            for k, x in want.items():
                if k in ("alpha", "min_slack"):
                    continue
                got = getattr(p, k)
                err = np.abs(got - x).max() / max(1.0, np.abs(x).max())
                bound = (C_IMPL * kappa if k in _THROUGH_SOLVE else C_ELEM) * EPS
                assert err <= bound, (k, err, bound)
            z = cfg.k_alpha * np.linalg.norm(want["F_ext"][:3])
            assert abs(p.alpha - want["alpha"]) <= 2.0 * (1.5 * z + 8.0) * EPS
            feasible = bool(ctrl._slacks(p.qdd_closed, snap.M).min() >= 0.0)
            assert ctrl._closed_feasible == feasible
            if abs(want["min_slack"]) > 1e-9:  # away from the boundary the reference agrees too
                assert feasible == (want["min_slack"] >= 0.0)
            verdicts.add(feasible)
            ctrl.compute(snap, ref, w, cmd)
            sol = ctrl.sol
            tau = snap.M @ sol.qdd + p.tau_offset
            if ctrl.ff.active:
                tau += DissipationFeedforward(plant.dof_frictionloss, plant.dof_damping, cfg.feedforward).compute(
                    snap.v, tau
                )
            mag = np.abs(snap.M) @ np.abs(sol.qdd) + np.abs(p.tau_offset)
            assert_within(cmd.tau, tau, 16 * EPS * mag)
            # exact: the diagnostics are copies of these values
            assert cmd.diag[0] == sol.status and cmd.diag[4] == sol.level1_residual
            np.testing.assert_array_equal(cmd.diag[5:], [p.alpha, p.K_r[0], p.K_r[3], *p.F_ext[:3]])
    assert verdicts == {True, False}, "both closed-form outcomes must be exercised"


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_manipulability_gradient_equals_masked_form(robot: str) -> None:
    """The running-sum evaluator of ∇w equals the masked-matrix form to round-off.

    Bound: both take P = (J Jᵀ)⁻¹ J from a solve (relative error ≤ c·n·ε·κ(J Jᵀ), n = 6, c = 2) and
    then sum ≤ 4·nv products of an entry of J and one of P: |Δ∇w_i| ≤ (2·6·κ + 4·nv)·ε·w·(|J|ᵀ|P|)_i,
    summed over the products (measured ≤ 0.03ε·κ·w(|J|ᵀ|P|)). A wrong sign or index in the sums is
    O(|∇w|) and fails."""
    s = build(scenario_from_dict(_free_space(robot)))
    rng = np.random.default_rng(SEED + 6)
    nv = s.plant.nv
    for q, _ in _random_states(s, 10, rng, dq=0.8):
        snap = s.dynamics.update(q, np.zeros(nv), 0.0)
        J, w = snap.J_ee_lwa, snap.manipulability
        g_ref = _grad_w_reference(J, w)
        P = np.linalg.solve(J @ J.T, J)
        mag = w * (np.abs(J).T @ np.abs(P)).sum(axis=1)
        bound = (2 * 6 * np.linalg.cond(J @ J.T) + 4 * nv) * EPS * mag
        assert_within(manipulability_gradient(J, w), g_ref, bound)


def test_observer_recursion_equals_vector_form() -> None:
    """The momentum observer of the sensorless mode (per-joint float recursion, Cholesky wrench solve)
    equals its vector form I += (τ − τ_d − h + r)Δt + (M_k − M_{k−1})q̇_k, r = K_O(Mq̇ − p0 − I),
    F̂ = (J Jᵀ)⁻¹ J r, and fill_wrench_state transports F̂ as the F/T path does.

    Round-off bounds: each step adds ≤ 4 roundings on terms of size S_k = (|τ| + |τ_d| + |h| + |r|)Δt
    + |ΔM||q̇| (libm vs numpy tanh ≤ 4 ulp inside τ_d), so |ΔI| ≤ 4ε ΣS_k, and r = K(p − p0 − I) adds 3
    roundings on |p| + |p0| + |I|; the feedback through rΔt (KΔt = 0.05) is covered by a factor 2:
    |Δr| ≤ 8εK(|p| + |p0| + ΣS_k). F̂: the Cholesky solve, ≤ 2·6·ε·κ(J Jᵀ)·|P||r| plus |P||Δr|
    (P = (J Jᵀ)⁻¹J). The transports: 3-term sums, ≤ 2γ_3 = 6ε times the magnitude of the terms over
    both sides; tolerance 16ε·magnitude. Measured: r bit for bit, F̂ ≤ 0.21ε·κ·|P||r|, the transports
    ≤ 1ε·magnitude."""
    s = build(scenario_from_dict(_free_space("fr3")))  # FR3: joint damping and friction are modelled
    plant = s.plant
    assert np.any(plant.dof_frictionloss > 0.0)
    obs = MomentumObserver(plant, 50.0)
    rng = np.random.default_rng(SEED + 7)
    K, dt, d, f = obs.K, obs.dt, plant.dof_damping, plant.dof_frictionloss
    q, v = s.q0.copy(), np.zeros(plant.nv)
    prev = None
    w = WrenchState()
    mag_I = np.zeros(plant.nv)  # ΣS_k (docstring)
    for k in range(60):
        v += rng.normal(scale=0.05, size=plant.nv)
        q += v * dt
        snap = s.dynamics.update(q, v, k * dt)
        tau = rng.normal(scale=3.0, size=plant.nv)
        est = obs.update(snap, tau).copy()
        if prev is None:
            p0, I, r = snap.M @ v, np.zeros(plant.nv), np.zeros(plant.nv)
        else:
            M_p, h_p, v_p = prev  # τ: the torque applied since the previous update
            tau_d = d * v_p + f * np.tanh(v_p / 0.01)
            I = I + (tau - tau_d - h_p + r) * dt + (snap.M - M_p) @ v
            mag_I += (np.abs(tau) + np.abs(tau_d) + np.abs(h_p) + np.abs(r)) * dt + np.abs(snap.M - M_p) @ np.abs(v)
            r = K * (snap.M @ v - p0 - I)
        prev = (snap.M.copy(), snap.h.copy(), v.copy())
        J = snap.J_ee_lwa
        F = np.linalg.solve(J @ J.T, J @ r)
        dr = 8 * EPS * K * (np.abs(snap.M) @ np.abs(v) + np.abs(p0) + mag_I)
        assert_within(obs.r, r, dr)
        P = np.abs(np.linalg.solve(J @ J.T, J))
        dF = 2 * 6 * EPS * np.linalg.cond(J @ J.T) * (P @ np.abs(r)) + P @ dr
        assert_within(est, F, dF)
        obs.fill_wrench_state(snap, w)
        pS, pE, R = snap.T_world_sensor[:3, 3], snap.p_ee_in_world, snap.R_world_ee
        ext_world = np.concatenate((est[:3], est[3:] + np.cross(pE - pS, est[:3])))
        a, f3 = np.abs(pE - pS), np.abs(est[:3])
        lever = np.array((a[1] * f3[2] + a[2] * f3[1], a[2] * f3[0] + a[0] * f3[2], a[0] * f3[1] + a[1] * f3[0]))
        mag_world = np.concatenate((f3, np.abs(est[3:]) + lever))
        assert_within(w.ext_world, ext_world, 16 * EPS * mag_world)
        mag_body = np.concatenate((np.abs(R.T) @ f3, np.abs(R.T) @ np.abs(est[3:])))
        assert_within(w.ext_body, np.concatenate((R.T @ est[:3], R.T @ est[3:])), 16 * EPS * mag_body)
    assert np.abs(r).max() > 1.0  # the recursion really moved


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
    np.testing.assert_array_equal(sol.qdd, p.qdd_closed)  # exact: the fallback copies the closed form
    assert sol.primal_residual >= 1.0
    summary = ctrl.summary()
    assert summary["qp_failures"] == 1 and summary["qp_solved"] == 1


# ------------------------------------------------------------------------------ closed loop


def test_torque_limits_are_never_exceeded_where_khatib_saturates() -> None:
    """An 11 cm step with a 5 N·m torque limit: Khatib's command saturates, the HQP's never does."""
    results = {}
    for name, ctrl in (("khatib", {"type": "khatib", "k": 300, "d": 100}), ("hqp", {"type": "hqp"})):
        s = build(
            scenario_from_dict(_free_space(controller=ctrl, offset=(0.0, 0.1, -0.05), duration=1.0, max_torque=5.0))
        )
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
    HQP, ``paper`` (q + Δq̇ + ½Δ²q̈, the paper's form): the receding-horizon row gives the distance to the
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


@pytest.mark.parametrize("gravity", [0.0, -9.81])
def test_press_realises_the_designed_impedance_by_default(gravity: float) -> None:
    """The probe pressed 4 mm into a plate under the HQP with constant stiffness (k_α = 0, shifted
    sigmoid: K_r = K_0): at rest the designed impedance K_r e_p = F_ext gives F_axial / (K_r,z e_z) = 1.
    The default (``wrench_compensation: true``) realises it; the literal form realises 2·F_ext, i.e.
    the ratio ½. The iiwa14 has no joint friction, so the rest state is unique. Tolerance ±0.01
    (measured deviation 1.4e-4: the contact's residual motion and the moment of the tip force).
    Gravity on or off: the same ratio (g is compensated through h)."""
    ratios = {}
    for comp in (None, False):
        d = press_scenario("iiwa14", press_depth=0.004, gravity=[0.0, 0.0, gravity])
        d["controller"] = {"type": "hqp", "k_alpha": 0.0, "sigmoid": "shifted"}
        if comp is not None:
            d["controller"]["wrench_compensation"] = comp
        r = run(scenario_from_dict(d), out_root=None)
        ch = r.telemetry
        last = slice(-500, None)
        f_axial = float(np.mean(ch["wrench_truth_world"][last, 2]))  # plate normal = world +z
        e_z = float(np.mean(ch["ee_pos"][last, 2] - ch["ee_pos_des"][last, 2]))  # x − x_d along z
        K_rz = float(ch["ctrl_k_r_trans"][-1])
        assert K_rz == 300.0 and f_axial > 0.5
        ratios[comp] = f_axial / (K_rz * e_z)
    assert abs(ratios[None] - 1.0) <= 0.01, ratios
    assert abs(ratios[False] - 0.5) <= 0.01, ratios
