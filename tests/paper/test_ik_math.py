"""docs/theory/ik.md: the damped least-squares step, the IK's fixed point within the joint limits, and the
free-yaw choice of the start pose.

Tolerances are stated bounds (docs/testing.md §2); ``EPS`` is the float64 machine epsilon."""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest
from dockbench.sim.assembly import assemble
from dockbench.sim.ik import dls_step, solve_ik
from dockbench.sim.lie import so3_exp, so3_log
from dockbench.sim.loop import _start_and_goal, build
from dockbench.sim.scenario import scenario_from_dict

from tests.helpers import EPS, assert_within, scenario_dict


def test_dls_step_is_the_damped_least_squares_minimiser() -> None:
    """Δq = Jᵀ(JJᵀ + λ²I)⁻¹ e equals the damped pseudo-inverse in SVD form, Σ_i σ_i/(σ_i² + λ²) v_i u_iᵀ e
    (an independent evaluation through numpy's SVD), and zeroes the gradient Jᵀ(J Δq − e) + λ² Δq of
    ‖J Δq − e‖² + λ²‖Δq‖², for well- and ill-conditioned J (σ_min down to 1e-4) and λ from 1e-3 to 1.

    Bound: the 6×6 solve has condition κ = (σ_max² + λ²)/(σ_min² + λ²) and forming J Jᵀ adds n ε ‖J‖²:
    |Δ| ≤ 16 n ε κ ‖J‖ ‖e‖ / (σ_min² + λ²) per entry for either evaluation (n = 7); the gradient
    ≤ 16 n ε κ ‖J‖² ‖Δq‖ + 16 n ε ‖J‖ ‖e‖. Asserted with 16× that."""
    rng = np.random.default_rng(41)
    for sigma_min in (1.0, 1e-2, 1e-4):
        for lam in (1e-3, 1e-1, 1.0):
            U, _ = np.linalg.qr(rng.normal(size=(6, 6)))
            V, _ = np.linalg.qr(rng.normal(size=(7, 7)))
            sv = np.geomspace(2.0, sigma_min, 6)
            J = U @ np.diag(sv) @ V[:6]
            e = rng.normal(size=6)
            dq = dls_step(J, e, lam)
            u, sig, vt = np.linalg.svd(J, full_matrices=False)
            other = vt.T @ (sig / (sig**2 + lam**2) * (u.T @ e))
            kappa = (sv[0] ** 2 + lam**2) / (sv[-1] ** 2 + lam**2)
            nJ, ne = np.linalg.norm(J, 2), np.linalg.norm(e)
            bound = 16 * 16 * 7 * EPS * kappa * nJ * ne / (sv[-1] ** 2 + lam**2)
            assert_within(dq, other, bound, f"σ_min {sigma_min}, λ {lam}")
            grad = J.T @ (J @ dq - e) + lam**2 * dq
            g_bound = 16 * (16 * 7 * EPS * kappa * nJ**2 * np.linalg.norm(dq) + 16 * 7 * EPS * nJ * ne)
            assert_within(grad, 0.0, g_bound, f"gradient, σ_min {sigma_min}, λ {lam}")
    # the damping is what bounds the step: ‖Δq‖ ≤ ‖e‖ / (2λ) for any J
    J = np.zeros((6, 7))
    J[0, 0] = 1e-3  # nearly singular
    e = np.ones(6)
    assert np.linalg.norm(dls_step(J, e, 1e-3)) <= np.linalg.norm(e) / (2 * 1e-3)


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_ik_reaches_random_reachable_poses_within_limits(robot: str) -> None:
    """e = [p_d − p; log(R_d Rᵀ)] is driven to ≤ 1e-9 (m, rad) from a seed 0.3 rad per joint away, for poses
    that are reachable by construction (forward kinematics of random configurations inside the limits,
    rotations up to ≈ 1 rad from the seed's), and the result lies within the joint limits. The pose is
    recomputed here by Pinocchio's forward kinematics: ‖p − p_d‖ ≤ 1e-9 + 4 ε and the rotation error ≤ 1e-9
    + 8 ε (the stopping test itself, plus one FK evaluation's round-off)."""
    d = scenario_dict(f"{robot}_docking")
    s = build(scenario_from_dict(d))
    model, fid = s.asm.pin_model, s.asm.frame_ids[s.asm.tool.ee_site]
    data = model.createData()
    lo, hi = model.lowerPositionLimit, model.upperPositionLimit
    rng = np.random.default_rng(43)
    margin = 0.1 * (hi - lo)
    for trial in range(6):
        q_true = s.q0 + rng.uniform(-0.5, 0.5, 7)
        q_true = np.clip(q_true, lo + margin, hi - margin)
        pin.framesForwardKinematics(model, data, q_true)
        T = data.oMf[fid].homogeneous.copy()
        seed = np.clip(q_true + rng.uniform(-0.3, 0.3, 7), lo, hi)
        q = solve_ik(model, fid, T, seed)
        assert np.all(q >= lo) and np.all(q <= hi), f"trial {trial}: outside the limits"
        pin.framesForwardKinematics(model, data, q)
        oMf = data.oMf[fid]
        assert np.linalg.norm(T[:3, 3] - oMf.translation) <= 1e-9 + 4 * EPS, f"trial {trial}"
        assert np.linalg.norm(so3_log(T[:3, :3] @ oMf.rotation.T)) <= 1e-9 + 8 * EPS, f"trial {trial}"


def test_free_yaw_is_the_closest_rotation_about_the_goal_axis() -> None:
    """start.free_yaw: R_goal ← R_goal R_z(ψ) with ψ = atan2(A₁₀ − A₀₁, A₀₀ + A₁₁), A = R_goalᵀ R_home, maximises
    tr((R_goal R_z(ψ))ᵀ R_home) = cos ψ (A₀₀ + A₁₁) + sin ψ (A₁₀ − A₀₁) + A₂₂, i.e. it is the yaw about the
    goal's z axis that brings the goal closest to the home orientation (Frobenius distance). Checked
    against a dense scan of ψ (0.01° steps) with the target yawed by several angles: the scan's best ψ is
    within one step of the formula's, and no scanned ψ is closer (the trace at the formula's ψ ≥ every
    scanned trace − 1e-12, ≥ 10× the trace's round-off 8 ε · 3)."""
    for yaw in (0.0, 40.0, 135.0, -170.0):
        d = scenario_dict("iiwa14_docking")
        d["target"]["pose"] = {"position": [0.55, 0.0, 0.2], "rpy_deg": [0.0, 0.0, yaw]}
        d.setdefault("start", {})["free_yaw"] = True
        sc = scenario_from_dict(d)
        asm = assemble(sc)
        q_home = asm.robot.home
        _, T_goal, _ = _start_and_goal(sc, asm, q_home)
        d["start"]["free_yaw"] = False
        sc_fixed = scenario_from_dict(d)
        _, T_fixed, _ = _start_and_goal(sc_fixed, asm, q_home)
        data = asm.pin_model.createData()
        pin.framesForwardKinematics(asm.pin_model, data, q_home)
        R_home = data.oMf[asm.frame_ids[asm.tool.ee_site]].rotation
        R0 = T_fixed[:3, :3]
        psis = np.radians(np.arange(-180.0, 180.0, 0.01))
        traces = np.array([np.trace((R0 @ so3_exp(np.array([0.0, 0.0, p]))).T @ R_home) for p in psis])
        best = psis[int(np.argmax(traces))]
        A = R0.T @ R_home
        psi = math.atan2(A[1, 0] - A[0, 1], A[0, 0] + A[1, 1])
        assert abs(math.remainder(best - psi, 2 * math.pi)) <= math.radians(0.01), f"yaw {yaw}"
        assert np.trace(T_goal[:3, :3].T @ R_home) >= traces.max() - 1e-12
        # the goal turned about its own z only: its z axis (the mating direction) is unchanged
        assert_within(T_goal[:3, 2], R0[:, 2], 8 * EPS, f"yaw {yaw}")
