"""Equation-level checks of sim/lie.py (MATH.md §4): exp/log, Jacobians (dexp), adjoints.

Conventions under test: twists [v; ω], dexp = right Jacobian (body twist of exp(λ(t)) is
dexp_λ λ̇). References: Pinocchio (exp6, log6, Jexp6, Jlog6, SE3.action, Motion.action),
finite differences on the manifold, and scipy.linalg.expm (tests only).
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest
import scipy.linalg

from sim import lie

# Tolerance table (the only tolerances used in this module).
TOL_ROUNDTRIP = 1e-12  # exp/log round trips, identities evaluated in closed form
TOL_PIN = 1e-12  # agreement with Pinocchio's implementation of the same map
TOL_PIN_JAC = 1e-7  # Pinocchio's Jexp6/Jlog6 truncate their Taylor branch (~1.5e-8 error at θ = 1e-3)
TOL_SERIES = 1e-12  # dexp against its defining series Σ (−ad)^k/(k+1)! summed in float64
TOL_FD = 1e-7  # central finite differences, step H_FD (error ~ H² · third derivative)
TOL_SWITCH = 1e-12  # series / closed-form branches on both sides of the switch angle
TOL_FUSED = 1e-14  # fused evaluation (se3_jacobian_coeffs, DexpSE3, *_floats) vs the separate functions
H_FD = 1e-5

SEED = 20240611

# rotation angles covering the branches: 0, Taylor, mid, closed form, near π
ANGLES = (
    0.0,
    1e-9,
    1e-6,
    1e-3,
    0.3,
    1.0,
    1.4999999,
    1.5000001,
    2.0,
    2.5,
    2.8,
    math.pi - 1e-3,
    math.pi - 1e-7,
)


def _axis(rng: np.random.Generator) -> np.ndarray:
    a = rng.normal(size=3)
    return a / np.linalg.norm(a)


def _twists(n_per_angle: int = 3, seed: int = SEED) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for th in ANGLES:
        for _ in range(n_per_angle):
            out.append(np.concatenate((rng.normal(scale=0.4, size=3), th * _axis(rng))))
    return out


TWISTS = _twists()
IDS = [f"th={np.linalg.norm(x[3:]):.3g}#{i % 3}" for i, x in enumerate(TWISTS)]


def _random_pose(rng: np.random.Generator) -> np.ndarray:
    xi = np.concatenate((rng.normal(size=3), rng.uniform(0, math.pi) * _axis(rng)))
    return lie.se3_exp(xi)


# ------------------------------------------------------------------------------------ hat / vee


def test_hat_vee_roundtrip_and_cross_product():
    rng = np.random.default_rng(SEED)
    w, x = rng.normal(size=3), rng.normal(size=3)
    np.testing.assert_allclose(lie.so3_hat(w) @ x, np.cross(w, x), atol=TOL_ROUNDTRIP)
    np.testing.assert_allclose(lie.so3_vee(lie.so3_hat(w)), w, atol=TOL_ROUNDTRIP)
    xi = rng.normal(size=6)
    X = lie.se3_hat(xi)
    np.testing.assert_allclose(X[:3, 3], xi[:3], atol=0)  # linear part first
    np.testing.assert_allclose(X[3], 0.0, atol=0)
    np.testing.assert_allclose(lie.se3_vee(X), xi, atol=TOL_ROUNDTRIP)


# ------------------------------------------------------------------------------------ exp / log


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_so3_exp_log_roundtrip(xi):
    phi = xi[3:]
    R = lie.so3_exp(phi)
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=TOL_ROUNDTRIP)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=TOL_ROUNDTRIP)
    np.testing.assert_allclose(R, pin.exp3(phi), atol=TOL_PIN)
    np.testing.assert_allclose(lie.so3_log(R), phi, atol=1e-10, rtol=0)


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_se3_exp_log_roundtrip_and_pinocchio(xi):
    T = lie.se3_exp(xi)
    np.testing.assert_allclose(T, pin.exp6(pin.Motion(xi)).homogeneous, atol=TOL_PIN)
    np.testing.assert_allclose(lie.se3_log(T), xi, atol=1e-9, rtol=0)
    np.testing.assert_allclose(lie.se3_log(T), pin.log6(pin.SE3(T)).vector, atol=1e-9)


def test_so3_log_at_and_near_pi():
    """log is exact at θ = π (s vanishes; axis from the symmetric part) and exp(log R) = R."""
    rng = np.random.default_rng(SEED + 1)
    for th in (math.pi - 1e-4, math.pi - 1e-9, math.pi):
        for _ in range(5):
            n = _axis(rng)
            R = lie.so3_exp(th * n)
            phi = lie.so3_log(R)
            np.testing.assert_allclose(np.linalg.norm(phi), th, atol=1e-9)
            np.testing.assert_allclose(lie.so3_exp(phi), R, atol=TOL_ROUNDTRIP)
            if th < math.pi:  # away from the ±n ambiguity the axis is recovered with its sign
                np.testing.assert_allclose(phi, th * n, atol=1e-7)


def test_se3_inv():
    rng = np.random.default_rng(SEED + 2)
    T = _random_pose(rng)
    np.testing.assert_allclose(lie.se3_inv(T) @ T, np.eye(4), atol=TOL_ROUNDTRIP)


# ------------------------------------------------------------------------------------ Jacobians


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_dexp_times_dexp_inv_is_identity(xi):
    J = lie.dexp(xi)
    Ji = lie.dexp_inv(xi)
    np.testing.assert_allclose(J @ Ji, np.eye(6), atol=TOL_ROUNDTRIP)
    np.testing.assert_allclose(Ji @ J, np.eye(6), atol=TOL_ROUNDTRIP)


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_dexp_matches_defining_series(xi):
    """dexp_λ = Σ_k (−ad_λ)^k / (k+1)! (the definition; 60 terms in float64)."""
    A = -lie.ad(xi)
    term = np.eye(6)
    series = np.eye(6)
    for k in range(1, 60):
        term = term @ A / (k + 1)
        series += term
    np.testing.assert_allclose(lie.dexp(xi), series, atol=TOL_SERIES)


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_dexp_matches_pinocchio_right_jacobian(xi):
    np.testing.assert_allclose(lie.dexp(xi), pin.Jexp6(pin.Motion(xi)), atol=TOL_PIN_JAC)
    np.testing.assert_allclose(lie.dexp_inv(xi), pin.Jlog6(pin.exp6(pin.Motion(xi))), atol=TOL_PIN_JAC)


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_dexp_is_body_twist_jacobian_finite_differences(xi):
    """Ṽ = vee(T⁻¹ dT/dt) of T = exp(λ(t)) equals dexp_λ λ̇ (the convention MATH.md §4 needs)."""
    rng = np.random.default_rng(SEED + 3)
    lam_dot = rng.normal(size=6)
    T_inv = lie.se3_inv(lie.se3_exp(xi))
    plus = lie.se3_log(T_inv @ lie.se3_exp(xi + H_FD * lam_dot))
    minus = lie.se3_log(T_inv @ lie.se3_exp(xi - H_FD * lam_dot))
    V_fd = (plus - minus) / (2 * H_FD)
    np.testing.assert_allclose(lie.dexp(xi) @ lam_dot, V_fd, atol=TOL_FD)
    # the LEFT Jacobian would be the spatial twist; make sure we are not accidentally using it
    # (they differ unless λ̇ ∥ λ)
    J_left = lie.Ad(lie.se3_exp(xi)) @ lie.dexp(xi)
    assert np.linalg.norm(J_left @ lam_dot - V_fd) > 1e-3 or np.linalg.norm(xi[3:]) < 1e-3


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_dexp_dot_matches_finite_differences(xi):
    rng = np.random.default_rng(SEED + 4)
    lam_dot = rng.normal(size=6)
    fd = (lie.dexp(xi + H_FD * lam_dot) - lie.dexp(xi - H_FD * lam_dot)) / (2 * H_FD)
    np.testing.assert_allclose(lie.dexp_dot(xi, lam_dot), fd, atol=TOL_FD)


def test_lambda_ddot_relation():
    """λ̈ = dexp⁻¹(dṼ/dt − (d/dt dexp) λ̇) reproduces the second derivative of a known λ(t)."""
    rng = np.random.default_rng(SEED + 5)
    a, b, c = rng.normal(size=6), rng.normal(size=6), rng.normal(size=6)

    def lam(t):
        return a + b * t + c * t * t

    def V(t):  # body twist of exp(λ(t)) via the checked dexp
        return lie.dexp(lam(t)) @ (b + 2 * c * t)

    t = 0.3
    dV = (V(t + H_FD) - V(t - H_FD)) / (2 * H_FD)
    lam_ddot = lie.dexp_inv(lam(t)) @ (dV - lie.dexp_dot(lam(t), b + 2 * c * t) @ (b + 2 * c * t))
    np.testing.assert_allclose(lam_ddot, 2 * c, atol=1e-6)


def test_series_and_closed_form_agree_at_switch():
    rng = np.random.default_rng(SEED + 6)
    n, rho, rate = _axis(rng), rng.normal(size=3), rng.normal(size=6)
    below = np.concatenate((rho, (1.5 - 1e-12) * n))
    above = np.concatenate((rho, (1.5 + 1e-12) * n))
    for f in (lie.dexp, lie.dexp_inv):
        np.testing.assert_allclose(f(below), f(above), atol=TOL_SWITCH)
    np.testing.assert_allclose(lie.dexp_dot(below, rate), lie.dexp_dot(above, rate), atol=1e-11)
    np.testing.assert_allclose(lie.so3_exp(below[3:]), lie.so3_exp(above[3:]), atol=TOL_SWITCH)


@pytest.mark.parametrize("th", [0.0, 1e-7, 0.4, 2.0, math.pi - 1e-3])
def test_so3_jacobians_finite_differences(th):
    rng = np.random.default_rng(SEED + 7)
    phi, d = th * _axis(rng), rng.normal(size=3)
    R_inv = lie.so3_exp(phi).T
    # right: exp(φ)⁻¹ exp(φ + h d) ≈ exp(h J_r d); left: exp(φ + h d) exp(φ)⁻¹ ≈ exp(h J_l d)
    r_fd = lie.so3_log(R_inv @ lie.so3_exp(phi + H_FD * d)) - lie.so3_log(R_inv @ lie.so3_exp(phi - H_FD * d))
    l_fd = lie.so3_log(lie.so3_exp(phi + H_FD * d) @ R_inv) - lie.so3_log(lie.so3_exp(phi - H_FD * d) @ R_inv)
    np.testing.assert_allclose(lie.so3_right_jacobian(phi) @ d, r_fd / (2 * H_FD), atol=TOL_FD)
    np.testing.assert_allclose(lie.so3_left_jacobian(phi) @ d, l_fd / (2 * H_FD), atol=TOL_FD)
    np.testing.assert_allclose(lie.so3_left_jacobian_inv(phi) @ lie.so3_left_jacobian(phi), np.eye(3), atol=1e-12)
    np.testing.assert_allclose(lie.so3_right_jacobian_inv(phi) @ lie.so3_right_jacobian(phi), np.eye(3), atol=1e-12)
    np.testing.assert_allclose(lie.so3_right_jacobian(phi), pin.Jexp3(phi), atol=TOL_PIN)


def test_dexp_near_zero_is_first_order_series():
    """dexp_λ = I − ½ ad_λ + (1/6) ad_λ² + O(|λ|³)."""
    rng = np.random.default_rng(SEED + 8)
    lam = 1e-4 * rng.normal(size=6)
    A = lie.ad(lam)
    np.testing.assert_allclose(lie.dexp(lam), np.eye(6) - 0.5 * A + A @ A / 6.0, atol=1e-12)


# ------------------------------------------------------------------------------------ adjoints


def test_Ad_matches_pinocchio_and_conjugation():
    rng = np.random.default_rng(SEED + 9)
    for _ in range(10):
        T = _random_pose(rng)
        xi = rng.normal(size=6)
        np.testing.assert_allclose(lie.Ad(T), pin.SE3(T[:3, :3], T[:3, 3]).action, atol=TOL_PIN)
        # Ad_T ξ = vee(T ξ^ T⁻¹)
        np.testing.assert_allclose(
            lie.Ad(T) @ xi, lie.se3_vee(T @ lie.se3_hat(xi) @ lie.se3_inv(T)), atol=TOL_ROUNDTRIP
        )
        np.testing.assert_allclose(lie.Ad_inv(T), np.linalg.inv(lie.Ad(T)), atol=1e-10)
        np.testing.assert_allclose(lie.Ad_inv(T), lie.Ad(lie.se3_inv(T)), atol=TOL_ROUNDTRIP)


def test_ad_matches_pinocchio_and_bracket():
    rng = np.random.default_rng(SEED + 10)
    xi, eta = rng.normal(size=6), rng.normal(size=6)
    np.testing.assert_allclose(lie.ad(xi), pin.Motion(xi).action, atol=TOL_PIN)
    X, Y = lie.se3_hat(xi), lie.se3_hat(eta)
    np.testing.assert_allclose(lie.ad(xi) @ eta, lie.se3_vee(X @ Y - Y @ X), atol=TOL_ROUNDTRIP)


def test_group_axioms():
    rng = np.random.default_rng(SEED + 11)
    for _ in range(10):
        T1, T2 = _random_pose(rng), _random_pose(rng)
        np.testing.assert_allclose(lie.Ad(T1 @ T2), lie.Ad(T1) @ lie.Ad(T2), atol=1e-10)
        xi = rng.normal(size=6)
        # Ad(exp ξ) = expm(ad ξ); exp(ξ) = expm(ξ^); exp(-ξ) = exp(ξ)⁻¹; Ad_T ad_ξ Ad_T⁻¹ = ad_{Ad_T ξ}
        np.testing.assert_allclose(lie.Ad(lie.se3_exp(xi)), scipy.linalg.expm(lie.ad(xi)), atol=1e-10)
        np.testing.assert_allclose(lie.se3_exp(xi), scipy.linalg.expm(lie.se3_hat(xi)), atol=1e-10)
        np.testing.assert_allclose(lie.se3_exp(-xi), lie.se3_inv(lie.se3_exp(xi)), atol=TOL_ROUNDTRIP)
        np.testing.assert_allclose(lie.Ad(T1) @ lie.ad(xi) @ lie.Ad_inv(T1), lie.ad(lie.Ad(T1) @ xi), atol=1e-10)
        # dexp = (I − expm(−ad)) ad⁻¹ for generic ξ (ad invertible only via series; use the identity
        # dexp ad = I − expm(−ad) which holds always)
        np.testing.assert_allclose(lie.dexp(xi) @ lie.ad(xi), np.eye(6) - scipy.linalg.expm(-lie.ad(xi)), atol=1e-10)


def test_wrench_power_invariance_under_Ad():
    """F_a = Ad(T_a_b)⁻ᵀ F_b keeps V·F invariant for V_a = Ad(T_a_b) V_b."""
    rng = np.random.default_rng(SEED + 12)
    T = _random_pose(rng)
    V_b, F_b = rng.normal(size=6), rng.normal(size=6)
    V_a = lie.Ad(T) @ V_b
    F_a = lie.Ad_inv(T).T @ F_b
    np.testing.assert_allclose(V_a @ F_a, V_b @ F_b, rtol=1e-12)


# ------------------------------------------------------------------------------------ helpers


def test_out_arguments_match_allocating_calls():
    rng = np.random.default_rng(SEED + 13)
    xi, rate = rng.normal(size=6), rng.normal(size=6)
    T = lie.se3_exp(xi)
    for f, args, shape in (
        (lie.dexp, (xi,), (6, 6)),
        (lie.dexp_inv, (xi,), (6, 6)),
        (lie.dexp_dot, (xi, rate), (6, 6)),
        (lie.se3_exp, (xi,), (4, 4)),
        (lie.Ad, (T,), (6, 6)),
        (lie.Ad_inv, (T,), (6, 6)),
        (lie.ad, (xi,), (6, 6)),
        (lie.so3_exp, (xi[3:],), (3, 3)),
    ):
        buf = np.full(shape, np.nan)
        res = f(*args, out=buf)
        assert res is buf
        np.testing.assert_array_equal(buf, f(*args))


def test_rotation_error_world():
    rng = np.random.default_rng(SEED + 14)
    R = lie.so3_exp(rng.normal(size=3))
    e = 0.7 * _axis(rng)
    R_d = lie.so3_exp(e) @ R  # world-side rotation by e takes R to R_d
    np.testing.assert_allclose(lie.rotation_error_world(R_d, R), e, atol=TOL_ROUNDTRIP)


def test_quaternion_conversions():
    rng = np.random.default_rng(SEED + 15)
    for _ in range(20):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        if q[0] < 0:
            q = -q
        R = lie.quat_to_matrix(q)
        np.testing.assert_allclose(R, pin.Quaternion(*q).toRotationMatrix(), atol=TOL_PIN)  # (w, x, y, z)
        np.testing.assert_allclose(lie.matrix_to_quat(R), q, atol=TOL_ROUNDTRIP)
    # rotations by π (w = 0) and identity exercise the other Shepperd branches
    for q in ([0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0]):
        q = np.array(q, dtype=float)
        np.testing.assert_allclose(
            lie.quat_to_matrix(lie.matrix_to_quat(lie.quat_to_matrix(q))),
            lie.quat_to_matrix(q),
            atol=TOL_ROUNDTRIP,
        )


# ------------------------------------------------------------------------------------ fused evaluation


def _rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_fused_dexp_equals_separate_functions(xi):
    """DexpSE3 (one coefficient evaluation) equals dexp, dexp_inv, dexp_dot and their products."""
    rng = np.random.default_rng(SEED + 20)
    rate, y = rng.normal(size=6), rng.normal(size=6)
    D, Di, Dd = lie.dexp(xi), lie.dexp_inv(xi), lie.dexp_dot(xi, rate)
    jac = lie.DexpSE3(xi)
    assert _rel(jac.matrix(), D) <= TOL_FUSED
    assert _rel(jac.inverse(), Di) <= TOL_FUSED
    assert _rel(jac.dot_matrix(rate.tolist()), Dd) <= TOL_FUSED
    assert _rel(jac.mul(y.tolist()), D @ y) <= TOL_FUSED
    assert _rel(jac.tmul(y.tolist()), D.T @ y) <= TOL_FUSED
    assert _rel(jac.solve(y.tolist()), Di @ y) <= TOL_FUSED
    assert _rel(jac.dot_mul(rate.tolist(), y.tolist()), Dd @ y) <= TOL_FUSED
    A, B = lie.dexp_and_dot(xi, rate)
    assert _rel(A, D) <= TOL_FUSED and _rel(B, Dd) <= TOL_FUSED
    # the fused products of the SE(3) controller: (dexp⁻¹ y, dexpᵀ w) and dexp y − (d/dt dexp) λ̇ for
    # the derivative along the rate λ̇ applied to λ̇ itself, against the matrices and the separate methods
    w = rng.normal(size=6)
    sol, tr = jac.solve_tmul(y.tolist(), w.tolist())
    assert _rel(sol, Di @ y) <= TOL_FUSED and _rel(sol, jac.solve(y.tolist())) <= TOL_FUSED
    assert _rel(tr, D.T @ w) <= TOL_FUSED and _rel(tr, jac.tmul(w.tolist())) <= TOL_FUSED
    mmd = jac.mul_minus_dot(y.tolist(), rate.tolist())
    assert _rel(mmd, D @ y - Dd @ rate) <= TOL_FUSED
    assert _rel(mmd, np.subtract(jac.mul(y.tolist()), jac.dot_mul(rate.tolist(), rate.tolist()))) <= TOL_FUSED
    # set() with the coefficients handed over (as the SE(3) controller does for −λ)
    x = float(xi[3:] @ xi[3:])
    jac2 = lie.DexpSE3().set(*(-xi).tolist(), lie.se3_jacobian_coeffs(x))
    assert _rel(jac2.matrix(), lie.dexp(-xi)) <= TOL_FUSED


@pytest.mark.parametrize("th", [*ANGLES, 1.35, 1.36, 2.25, 3.0, 4.0, 6.0])
def test_fused_coefficients_equal_separate_series(th):
    """(α, β, b, c, γ, α'/θ, β'/θ, b'/θ, c'/θ) in one truncated pass = the 14-term series / closed forms."""
    x = th * th
    ref = (*lie._se3_coeffs(x), lie._gamma(x), *lie._se3_coeff_derivs(x))
    got = lie.se3_jacobian_coeffs(x)
    for a, b in zip(got, ref, strict=True):
        assert abs(a - b) <= TOL_FUSED * abs(b), (th, a, b)


def test_fused_series_truncation_tiers_are_safe():
    """At each tier boundary x = X_n, the n + 1 terms used leave a tail below 2⁻⁶⁴ |f| for all nine
    series (so dropping it is far below round-off), and the tiers increase."""
    tiers = lie._X_TIERS
    assert all(a < b for a, b in zip(tiers[:-1], tiers[1:], strict=True)) and tiers[-1] < lie._SERIES_X
    rows = lie._FUSED_ROWS
    for n, x in enumerate(tiers, start=1):
        used = n + 1
        for s in range(9):
            coeffs = [r[s] for r in rows]
            f = sum(c * x**k for k, c in enumerate(coeffs))
            tail = sum(abs(c) * x**k for k, c in enumerate(coeffs) if k >= used)
            assert tail <= 2.0**-64 * abs(f), (n, s, tail, f)


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_log_floats_equal_log(xi):
    T = lie.se3_exp(xi)
    R9, p3 = T[:3, :3].ravel().tolist(), T[:3, 3].tolist()
    phi = lie.so3_log_floats(*R9)
    np.testing.assert_array_equal(phi, lie.so3_log(T[:3, :3]))  # same operations: bit for bit
    lam, co = lie.se3_log_floats(*R9, *p3)
    assert _rel(lam, lie.se3_log(T)) <= TOL_FUSED
    assert co == lie.se3_jacobian_coeffs(float(np.dot(phi, phi)))


def test_so3_log_floats_at_pi_equals_so3_log():
    """The near-π branch (axis from the symmetric part), including θ = π exactly, each diagonal pivot."""
    rng = np.random.default_rng(SEED + 21)
    axes = [np.eye(3)[i] for i in range(3)] + [_axis(rng) for _ in range(6)]
    for th in (2.7, math.pi - 1e-9, math.pi):
        for n in axes:
            R = lie.so3_exp(th * n)
            np.testing.assert_array_equal(lie.so3_log_floats(*R.ravel().tolist()), lie.so3_log(R))


def test_mat2quat_batch_equals_mujoco_row_by_row() -> None:
    """The vectorised mju_mat2Quat (telemetry quaternions) against MuJoCo's own, every branch:
    random rotations, rotations by π and just under π about each axis (w ≈ 0: the x, y, z branches),
    the identity."""
    import mujoco

    from sim.lie import mat2quat_batch, so3_exp

    rng = np.random.default_rng(3)
    rows = []
    for _ in range(500):
        phi = rng.standard_normal(3)
        rows.append(so3_exp(phi * rng.uniform(0.0, math.pi) / np.linalg.norm(phi)).ravel())
    for angle in (math.pi, math.pi - 1e-9):
        for axis in np.eye(3):
            rows.append(so3_exp(axis * angle).ravel())
    rows.append(np.eye(3).ravel())
    R = np.array(rows)
    q = mat2quat_batch(R)
    ref = np.zeros_like(q)
    for i in range(len(R)):
        mujoco.mju_mat2Quat(ref[i], R[i])
    np.testing.assert_allclose(q, ref, rtol=0, atol=1e-15)
