"""Equation-level checks of sim/lie.py (docs/theory/lie.md): exp/log, Jacobians (dexp), adjoints.

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
from dockbench.sim import lie

from tests.helpers import TOL

# Tolerance table (the only tolerances used in this module). ε = 2.2e-16 is the float64 machine epsilon.
# Round-off tolerances are stated bounds (c·ε·scale, constant named) at least 10× above the worst case
# measured on five BLAS / SIMD code paths (OpenBLAS SkylakeX, Haswell, Sandybridge and default kernels;
# numpy's SIMD dispatch narrowed to its baseline); rtol = 0 throughout, so the tolerance written is the
# one applied. Truncation tolerances (Pinocchio's series, finite differences, Taylor remainders) bound a
# deterministic model error, the same on every CPU.
EPS = float(np.finfo(float).eps)
TOL_ROUNDTRIP = 1e-12  # round trips / closed-form identities on entries ≤ ~3: each side is a few 3×3 or
#   6×6 products (≤ γ_6 = 6ε relative each) and libm sin/cos/atan2 (≤ 1 ulp): ≤ ~100ε ≈ 2e-14; measured
#   ≤ 4e-15. Still catches a wrong closed-form coefficient (≥ 1e-9 at θ = 1e-3).
TOL_PIN = 1e-12  # Pinocchio's implementation of the same closed forms: same bound (its C++ may contract
#   to FMA on another CPU; that changes round-off only)
TOL_PIN_JAC = 1e-6  # Pinocchio's Jexp6/Jlog6 truncate their Taylor branch (~1.5e-8 error at θ = 1e-3,
#   ≤ 3.1e-8 over ANGLES): a truncation error in Pinocchio, not round-off (30× headroom). The left/right
#   convention is pinned by the finite-difference tests, which Pinocchio's truncation does not enter.
TOL_SERIES = 1e-12  # dexp against its defining series Σ (−ad)^k/(k+1)!: 60 terms of 6×6 products,
#   ≤ 60·γ_6·‖ad‖-weighted ≈ 1e-13 for θ ≤ π; measured ≤ 6e-16
TOL_FD = 1e-7  # central differences with step H_FD: truncation H²/6·|f‴| plus round-off ε|f|/H
#   (≈ 2e-11); measured ≤ 3.1e-8 (dexp_dot near π, |f‴| ~ 1e3)
C_SWITCH = 256  # series vs closed form at the switch θ = 1.5, in units of ε·max(1, |f|): the closed
#   form's cancellation (3β − α loses ~25×, the derivative chain of dexp_dot ~5× more) times ~10
#   roundings per entry; measured ≤ 7 (after the step across the switch, bounded separately)
TOL_LAPACK = 1e-10  # np.linalg.inv (LAPACK getri, ≤ c·n·ε·κ with n = 6, κ(Ad) ≤ ~1e2 for these poses)
#   and scipy.linalg.expm (Padé 13 with scaling and squaring, relative backward error ≤ ~ε·‖A‖·2^s): both
#   ≲ 1e-12; measured ≤ 2.2e-15
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
    np.testing.assert_allclose(lie.so3_hat(w) @ x, np.cross(w, x), atol=TOL_ROUNDTRIP, rtol=0)
    np.testing.assert_allclose(lie.so3_vee(lie.so3_hat(w)), w, atol=TOL_ROUNDTRIP, rtol=0)
    xi = rng.normal(size=6)
    X = lie.se3_hat(xi)
    # exact: se3_hat copies the entries and writes literal zeros (no arithmetic)
    np.testing.assert_array_equal(X[:3, 3], xi[:3])  # linear part first
    np.testing.assert_array_equal(X[3], 0.0)
    np.testing.assert_allclose(lie.se3_vee(X), xi, atol=TOL_ROUNDTRIP, rtol=0)


def test_cross3_is_np_cross_bit_for_bit():
    """cross3 evaluates a1 b2 − a2 b1 etc. as np.cross does (one product per term, then the difference):
    exact equality is the same IEEE operations on the same floats."""
    rng = np.random.default_rng(SEED)
    for _ in range(200):
        a, b = rng.normal(size=3) * 10.0 ** rng.integers(-6, 6), rng.normal(size=3)
        np.testing.assert_array_equal(lie.cross3(a, b), np.cross(a, b))


def test_norm3_sums_the_squares_in_order():
    """norm3 is √((v₀² + v₁²) + v₂²) exactly (the scalar operations the kernels use), and the 2-norm to
    round-off (2ε relative)."""
    rng = np.random.default_rng(SEED)
    for _ in range(200):
        v = rng.normal(size=3) * 10.0 ** rng.integers(-6, 6)
        x, y, z = (float(c) for c in v)
        assert lie.norm3(v) == math.sqrt(x * x + y * y + z * z)
        assert abs(lie.norm3(v) - np.linalg.norm(v)) <= 4 * np.finfo(float).eps * np.linalg.norm(v)


# ------------------------------------------------------------------------------------ exp / log


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_so3_exp_log_roundtrip(xi):
    phi = xi[3:]
    R = lie.so3_exp(phi)
    np.testing.assert_allclose(R @ R.T, np.eye(3), atol=TOL_ROUNDTRIP, rtol=0)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=TOL_ROUNDTRIP, rtol=0)
    np.testing.assert_allclose(R, pin.exp3(phi), atol=TOL_PIN, rtol=0)
    np.testing.assert_allclose(lie.so3_log(R), phi, atol=1e-10, rtol=0)


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_se3_exp_log_roundtrip_and_pinocchio(xi):
    T = lie.se3_exp(xi)
    np.testing.assert_allclose(T, pin.exp6(pin.Motion(xi)).homogeneous, atol=TOL_PIN, rtol=0)
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
            np.testing.assert_allclose(lie.so3_exp(phi), R, atol=TOL_ROUNDTRIP, rtol=0)
            if th < math.pi:  # away from the ±n ambiguity the axis is recovered with its sign
                np.testing.assert_allclose(phi, th * n, atol=1e-7)


def test_se3_inv():
    rng = np.random.default_rng(SEED + 2)
    T = _random_pose(rng)
    np.testing.assert_allclose(lie.se3_inv(T) @ T, np.eye(4), atol=TOL_ROUNDTRIP, rtol=0)


# ------------------------------------------------------------------------------------ Jacobians


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_dexp_times_dexp_inv_is_identity(xi):
    J = lie.dexp(xi)
    Ji = lie.dexp_inv(xi)
    np.testing.assert_allclose(J @ Ji, np.eye(6), atol=TOL_ROUNDTRIP, rtol=0)
    np.testing.assert_allclose(Ji @ J, np.eye(6), atol=TOL_ROUNDTRIP, rtol=0)


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_dexp_matches_defining_series(xi):
    """dexp_λ = Σ_k (−ad_λ)^k / (k+1)! (the definition; 60 terms in float64)."""
    A = -lie.ad(xi)
    term = np.eye(6)
    series = np.eye(6)
    for k in range(1, 60):
        term = term @ A / (k + 1)
        series += term
    np.testing.assert_allclose(lie.dexp(xi), series, atol=TOL_SERIES, rtol=0)


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_dexp_matches_pinocchio_right_jacobian(xi):
    np.testing.assert_allclose(lie.dexp(xi), pin.Jexp6(pin.Motion(xi)), atol=TOL_PIN_JAC, rtol=0)
    np.testing.assert_allclose(lie.dexp_inv(xi), pin.Jlog6(pin.exp6(pin.Motion(xi))), atol=TOL_PIN_JAC, rtol=0)


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_dexp_is_body_twist_jacobian_finite_differences(xi):
    """Ṽ = vee(T⁻¹ dT/dt) of T = exp(λ(t)) equals dexp_λ λ̇ (the convention docs/theory/se3_lie.md needs)."""
    rng = np.random.default_rng(SEED + 3)
    lam_dot = rng.normal(size=6)
    T_inv = lie.se3_inv(lie.se3_exp(xi))
    plus = lie.se3_log(T_inv @ lie.se3_exp(xi + H_FD * lam_dot))
    minus = lie.se3_log(T_inv @ lie.se3_exp(xi - H_FD * lam_dot))
    V_fd = (plus - minus) / (2 * H_FD)
    np.testing.assert_allclose(lie.dexp(xi) @ lam_dot, V_fd, atol=TOL_FD, rtol=0)
    # the LEFT Jacobian would be the spatial twist; make sure we are not accidentally using it
    # (they differ unless λ̇ ∥ λ)
    J_left = lie.Ad(lie.se3_exp(xi)) @ lie.dexp(xi)
    assert np.linalg.norm(J_left @ lam_dot - V_fd) > 1e-3 or np.linalg.norm(xi[3:]) < 1e-3


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_dexp_dot_matches_finite_differences(xi):
    rng = np.random.default_rng(SEED + 4)
    lam_dot = rng.normal(size=6)
    fd = (lie.dexp(xi + H_FD * lam_dot) - lie.dexp(xi - H_FD * lam_dot)) / (2 * H_FD)
    np.testing.assert_allclose(lie.dexp_dot(xi, lam_dot), fd, atol=TOL_FD, rtol=0)


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
    """dexp, dexp⁻¹, d/dt dexp and exp just below θ = 1.5 (power series) and just above (closed form)
    agree to round-off. The two angles are 1.5(1 ∓ 2ε) apart by 4·1.5ε, so the bound is the change of
    f across that step (|∂f/∂θ| · Δθ, the slope from a difference quotient on the closed-form side)
    plus C_SWITCH·ε·max(1, |f|) ≈ 6e-14. A wrong coefficient among the first seven series terms (a change
    ≥ x^k/(2k+4)! ≈ 6e-12 at k = 6) fails."""
    rng = np.random.default_rng(SEED + 6)
    n, rho, rate = _axis(rng), rng.normal(size=3), rng.normal(size=6)
    th_below, th_above = 1.5 * (1.0 - 2.0 * EPS), 1.5 * (1.0 + 2.0 * EPS)
    below = np.concatenate((rho, th_below * n))
    above = np.concatenate((rho, th_above * n))
    assert float(below[3:] @ below[3:]) < lie._SERIES_X <= float(above[3:] @ above[3:])  # both branches
    h = 1e-6
    for f in (lie.dexp, lie.dexp_inv, lambda lam: lie.dexp_dot(lam, rate), lambda lam: lie.so3_exp(lam[3:])):
        fb, fa = f(below), f(above)
        up = np.concatenate((rho, (1.5 + 2 * h) * n))
        slope = np.abs(f(up) - f(np.concatenate((rho, (1.5 + h) * n)))).max() / h  # closed-form side
        bound = 2.0 * slope * (th_above - th_below) + C_SWITCH * EPS * max(1.0, np.abs(fa).max())
        np.testing.assert_allclose(fb, fa, atol=bound, rtol=0)


@pytest.mark.parametrize("th", [0.0, 1e-7, 0.4, 2.0, math.pi - 1e-3])
def test_so3_jacobians_finite_differences(th):
    rng = np.random.default_rng(SEED + 7)
    phi, d = th * _axis(rng), rng.normal(size=3)
    R_inv = lie.so3_exp(phi).T
    # right: exp(φ)⁻¹ exp(φ + h d) ≈ exp(h J_r d); left: exp(φ + h d) exp(φ)⁻¹ ≈ exp(h J_l d)
    r_fd = lie.so3_log(R_inv @ lie.so3_exp(phi + H_FD * d)) - lie.so3_log(R_inv @ lie.so3_exp(phi - H_FD * d))
    l_fd = lie.so3_log(lie.so3_exp(phi + H_FD * d) @ R_inv) - lie.so3_log(lie.so3_exp(phi - H_FD * d) @ R_inv)
    np.testing.assert_allclose(lie.so3_right_jacobian(phi) @ d, r_fd / (2 * H_FD), atol=TOL_FD, rtol=0)
    np.testing.assert_allclose(lie.so3_left_jacobian(phi) @ d, l_fd / (2 * H_FD), atol=TOL_FD, rtol=0)
    np.testing.assert_allclose(
        lie.so3_left_jacobian_inv(phi) @ lie.so3_left_jacobian(phi), np.eye(3), atol=TOL_ROUNDTRIP, rtol=0
    )
    np.testing.assert_allclose(
        lie.so3_right_jacobian_inv(phi) @ lie.so3_right_jacobian(phi), np.eye(3), atol=TOL_ROUNDTRIP, rtol=0
    )
    np.testing.assert_allclose(lie.so3_right_jacobian(phi), pin.Jexp3(phi), atol=TOL_PIN, rtol=0)


def test_dexp_near_zero_is_first_order_series():
    """dexp_λ = I − ½ ad_λ + (1/6) ad_λ² + O(|λ|³)."""
    rng = np.random.default_rng(SEED + 8)
    lam = 1e-4 * rng.normal(size=6)
    A = lie.ad(lam)
    # the remainder Σ_{k≥3} (−ad)^k/(k+1)! is ≤ a³/24 · 1/(1 − a), a = ‖ad_λ‖_∞ (≈ 4e-4 here: ≈ 2.8e-12;
    # measured 1.9e-13), plus round-off on entries ≤ 1
    a = np.abs(A).sum(axis=1).max()
    bound = a**3 / 24.0 / (1.0 - a) + 16 * EPS
    np.testing.assert_allclose(lie.dexp(lam), np.eye(6) - 0.5 * A + A @ A / 6.0, atol=bound, rtol=0)


# ------------------------------------------------------------------------------------ adjoints


def test_Ad_matches_pinocchio_and_conjugation():
    rng = np.random.default_rng(SEED + 9)
    for _ in range(10):
        T = _random_pose(rng)
        xi = rng.normal(size=6)
        np.testing.assert_allclose(lie.Ad(T), pin.SE3(T[:3, :3], T[:3, 3]).action, atol=TOL_PIN, rtol=0)
        # Ad_T ξ = vee(T ξ^ T⁻¹)
        np.testing.assert_allclose(
            lie.Ad(T) @ xi, lie.se3_vee(T @ lie.se3_hat(xi) @ lie.se3_inv(T)), atol=TOL_ROUNDTRIP, rtol=0
        )
        np.testing.assert_allclose(lie.Ad_inv(T), np.linalg.inv(lie.Ad(T)), atol=TOL_LAPACK, rtol=0)
        np.testing.assert_allclose(lie.Ad_inv(T), lie.Ad(lie.se3_inv(T)), atol=TOL_ROUNDTRIP, rtol=0)


def test_ad_matches_pinocchio_and_bracket():
    rng = np.random.default_rng(SEED + 10)
    xi, eta = rng.normal(size=6), rng.normal(size=6)
    np.testing.assert_allclose(lie.ad(xi), pin.Motion(xi).action, atol=TOL_PIN, rtol=0)
    X, Y = lie.se3_hat(xi), lie.se3_hat(eta)
    np.testing.assert_allclose(lie.ad(xi) @ eta, lie.se3_vee(X @ Y - Y @ X), atol=TOL_ROUNDTRIP, rtol=0)


def test_ad_and_se3_inv_give_the_entries_written_out_bit_for_bit():
    """ad(ξ) = B ξ (a product with a ±1/0 tensor) has each entry's ±ξₖ exactly, and se3_inv's copy of Tᵀ
    holds [[Rᵀ, −Rᵀp], [0, 1]] with −Rᵀp the same product as before: equal, not close, for finite inputs."""
    rng = np.random.default_rng(SEED + 12)
    for _ in range(200):
        x, y, z, a, b, c = xi = rng.normal(size=6) * 10.0 ** rng.uniform(-8, 3)
        want = np.array(((0.0, -c, b, 0.0, -z, y), (c, 0.0, -a, z, 0.0, -x), (-b, a, 0.0, -y, x, 0.0),
                         (0.0, 0.0, 0.0, 0.0, -c, b), (0.0, 0.0, 0.0, c, 0.0, -a), (0.0, 0.0, 0.0, -b, a, 0.0)))
        assert np.array_equal(lie.ad(xi), want)
        T = _random_pose(rng)
        Ti = np.eye(4)
        Ti[:3, :3] = T[:3, :3].T
        Ti[:3, 3] = -(T[:3, :3].T @ T[:3, 3])
        assert np.array_equal(lie.se3_inv(T), Ti)


def test_group_axioms():
    rng = np.random.default_rng(SEED + 11)
    for _ in range(10):
        T1, T2 = _random_pose(rng), _random_pose(rng)
        np.testing.assert_allclose(lie.Ad(T1 @ T2), lie.Ad(T1) @ lie.Ad(T2), atol=TOL_ROUNDTRIP, rtol=0)
        xi = rng.normal(size=6)
        # Ad(exp ξ) = expm(ad ξ); exp(ξ) = expm(ξ^); exp(-ξ) = exp(ξ)⁻¹; Ad_T ad_ξ Ad_T⁻¹ = ad_{Ad_T ξ}
        np.testing.assert_allclose(lie.Ad(lie.se3_exp(xi)), scipy.linalg.expm(lie.ad(xi)), atol=TOL_LAPACK, rtol=0)
        np.testing.assert_allclose(lie.se3_exp(xi), scipy.linalg.expm(lie.se3_hat(xi)), atol=TOL_LAPACK, rtol=0)
        np.testing.assert_allclose(lie.se3_exp(-xi), lie.se3_inv(lie.se3_exp(xi)), atol=TOL_ROUNDTRIP, rtol=0)
        np.testing.assert_allclose(
            lie.Ad(T1) @ lie.ad(xi) @ lie.Ad_inv(T1), lie.ad(lie.Ad(T1) @ xi), atol=TOL_ROUNDTRIP, rtol=0
        )
        # dexp = (I − expm(−ad)) ad⁻¹ for generic ξ (ad invertible only via series; use the identity
        # dexp ad = I − expm(−ad) which holds always)
        np.testing.assert_allclose(
            lie.dexp(xi) @ lie.ad(xi), np.eye(6) - scipy.linalg.expm(-lie.ad(xi)), atol=TOL_LAPACK, rtol=0
        )


def test_wrench_power_invariance_under_Ad():
    """F_a = Ad(T_a_b)⁻ᵀ F_b keeps V·F invariant for V_a = Ad(T_a_b) V_b.

    Round-off bound: the two matrix-vector products, the 3×3 products inside Ad / Ad⁻¹ and the two dot
    products each add ≤ γ_6 = 6ε times the magnitude of their terms, so
    |V_a·F_a − V_b·F_b| ≤ 4γ_6 ((|Ad||V_b|)·(|Ad⁻ᵀ||F_b|) + |V_b|·|F_b|) (measured ≈ 0.02 of it)."""
    rng = np.random.default_rng(SEED + 12)
    T = _random_pose(rng)
    V_b, F_b = rng.normal(size=6), rng.normal(size=6)
    Ad, Ad_inv_T = lie.Ad(T), lie.Ad_inv(T).T
    V_a = Ad @ V_b
    F_a = Ad_inv_T @ F_b
    scale = (np.abs(Ad) @ np.abs(V_b)) @ (np.abs(Ad_inv_T) @ np.abs(F_b)) + np.abs(V_b) @ np.abs(F_b)
    np.testing.assert_allclose(V_a @ F_a, V_b @ F_b, atol=4 * 6 * EPS * scale, rtol=0)


# ------------------------------------------------------------------------------------ helpers


def test_rotation_error_world():
    rng = np.random.default_rng(SEED + 14)
    R = lie.so3_exp(rng.normal(size=3))
    e = 0.7 * _axis(rng)
    R_d = lie.so3_exp(e) @ R  # world-side rotation by e takes R to R_d
    np.testing.assert_allclose(lie.rotation_error_world(R_d, R), e, atol=TOL_ROUNDTRIP, rtol=0)


def test_quaternion_conversions():
    rng = np.random.default_rng(SEED + 15)
    for _ in range(20):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        if q[0] < 0:
            q = -q
        R = lie.quat_to_matrix(q)
        np.testing.assert_allclose(R, pin.Quaternion(*q).toRotationMatrix(), atol=TOL_PIN, rtol=0)  # (w, x, y, z)
        np.testing.assert_allclose(lie.matrix_to_quat(R), q, atol=TOL_ROUNDTRIP, rtol=0)
    # rotations by π (w = 0) and identity exercise the other Shepperd branches
    for q in ([0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0]):
        q = np.array(q, dtype=float)
        np.testing.assert_allclose(
            lie.quat_to_matrix(lie.matrix_to_quat(lie.quat_to_matrix(q))),
            lie.quat_to_matrix(q),
            atol=TOL_ROUNDTRIP,
            rtol=0,
        )


# ------------------------------------------------------------------------------------ coefficients


#: the coefficient functions' 50-digit references and where they switch branches (sim.lie.coefficients)
_COEFF_ANGLES = (
    0.0, 1e-9, 1e-6, 1e-3, 0.1, 0.5, 1.0, 1.4, 1.5 * (1 - 4 * EPS), 1.5, 1.6, 2.0, 2.5, 3.0, math.pi, 4.0, 6.0
)
#: series side (θ < 1.5): Horner's rule on 14 terms, |Δ| ≤ γ_28 Σ|c_k| x^k (Higham, Accuracy and
#: Stability, eq. 5.3) ≤ 28 ε Σ|c_k| x^k, plus the truncated tail (< 1e-17 |f|); C_SERIES counts the
#: roundings (measured ≤ 0.75, in units of ε Σ|c_k| x^k)
C_SERIES = 280
#: closed-form side (θ ≥ 1.5): the formulas cancel (b = (1 − 2α)/(2x), c = (3β − α)/(2x) lose ~7× at
#: θ = 1.5, the derivatives another ~7×) over ~10 roundings: ≲ 500 ε max(1, |f|), 4× that allowed
#: (measured ≤ 0.5)
C_CLOSED = 2000


def _mp_coefficients(theta):
    """(α, β, b, c, γ) and f'(θ)/θ of α, β, b, c at θ from the closed forms in 120-digit arithmetic (the
    closed forms cancel ~5 log₁₀(1/θ) digits at small θ: ≥ 50 correct digits left down to θ = 1e-9), and the
    series' leading terms at θ = 0."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 120
    t = mp.mpf(theta)
    if t == 0:
        return (mp.mpf(1) / 2, mp.mpf(1) / 6, mp.mpf(1) / 24, mp.mpf(1) / 120, mp.mpf(1) / 12,
                -mp.mpf(1) / 12, -mp.mpf(1) / 60, -mp.mpf(1) / 360, -mp.mpf(1) / 1260)

    def funcs(u):
        x = u * u
        al = (1 - mp.cos(u)) / x
        be = (u - mp.sin(u)) / (x * u)
        b = (x + 2 * mp.cos(u) - 2) / (2 * x * x)
        c = (2 * u - 3 * mp.sin(u) + u * mp.cos(u)) / (2 * x * x * u)
        g = (1 - (u / 2) * mp.cot(u / 2)) / x
        return al, be, b, c, g

    vals = funcs(t)
    ders = [mp.diff(lambda u, k=k: funcs(u)[k], t) / t for k in range(4)]
    return (*vals, *ders)


@pytest.mark.parametrize("th", _COEFF_ANGLES)
def test_coefficients_equal_a_high_precision_evaluation(th):
    """sim.lie.coefficients (α, β, b, c, γ and α'/θ … c'/θ, the functions every Jacobian is built from)
    against the closed forms in 50-digit arithmetic, on both sides of the θ = 1.5 switch: within the
    Horner bound on the series side and the cancellation bound on the closed-form side. A wrong series
    coefficient among the first seven terms (≥ 6e-12 at θ = 1.5) or a sign error fails."""
    got = lie.coefficients(th * th)
    want = _mp_coefficients(th)
    x = th * th
    for name, g, w in zip(got._fields, got, want, strict=True):
        w = float(w)
        if x < lie._SERIES_X:
            series = {"alpha": 0, "beta": 1, "b": 2, "c": 3}.get(name.removeprefix("d_"))
            if name == "gamma":
                mag = sum(abs(c) * x**k for k, c in enumerate(lie._GAMMA))
            elif name.startswith("d_"):
                mag = sum(abs(c) * x ** k for k, c in enumerate(lie._SERIES_D[series]))
            else:
                mag = sum(abs(c) * x**k for k, c in enumerate(lie._SERIES[series]))
            bound = C_SERIES * EPS * mag
        else:
            bound = C_CLOSED * EPS * max(1.0, abs(w))
        assert abs(g - w) <= bound, (name, th, g, w, abs(g - w) / bound)


def test_mat2quat_batch_equals_mujoco_row_by_row() -> None:
    """The vectorised mju_mat2Quat (telemetry quaternions) against MuJoCo's own, every branch:
    random rotations, rotations by π and just under π about each axis (w ≈ 0: the x, y, z branches),
    the identity. Tolerance: tests/helpers.py TOL["quat_vs_mujoco_abs"] (its bound; measured ≤ 1ε here).
    """
    import mujoco
    from dockbench.sim.lie import mat2quat_batch, so3_exp

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
    np.testing.assert_allclose(q, ref, rtol=0, atol=TOL["quat_vs_mujoco_abs"])


@pytest.mark.parametrize("xi", TWISTS, ids=IDS)
def test_dexp_polynomial_in_ad_equals_the_block_form(xi):
    """dexp_λ = I − c₁ ad + c₂ ad² − c₃ ad³ + c₄ ad⁴ (what :func:`lie.dexp` evaluates) equals the block form
    [[J_r3, B], [0, J_r3]] of docs/theory/lie.md (rank-one blocks, independent code): sums of a few products
    of entries of size (1 + |λ|)⁴ at most, so 1e-14 (1 + |λ|)⁴."""
    k = lie.coefficients(float(xi[3:] @ xi[3:]))
    J3, B = lie._J_r3_and_B(np.asarray(xi, dtype=float), k)
    block = np.block([[J3, B], [np.zeros((3, 3)), J3]])
    scale = (1.0 + float(np.abs(xi).max())) ** 4
    np.testing.assert_allclose(lie.dexp(xi), block, atol=1e-14 * scale, rtol=0)


@pytest.mark.parametrize("th", [0.3, 0.9, 1.7, 2.6])
def test_ad_polynomial_coefficients_equal_their_closed_forms(th):
    """c₁ … c₄ of the ad polynomial from α, β, b, c against Barfoot's closed forms (eq. 7.85, 50 digits):
    c₁ = (4 − θ sin θ − 4 cos θ)/(2θ²), c₂ = (4θ − 5 sin θ + θ cos θ)/(2θ³), c₃ = (2 − θ sin θ − 2 cos θ)/(2θ⁴),
    c₄ = (2θ − 3 sin θ + θ cos θ)/(2θ⁵); a sum of two or three coefficients of size ≤ 1: 1e-14."""
    mpm = pytest.importorskip("mpmath")
    mpm.mp.dps = 50
    t = mpm.mpf(th)
    s, c = mpm.sin(t), mpm.cos(t)
    want = ((4 - t * s - 4 * c) / (2 * t**2), (4 * t - 5 * s + t * c) / (2 * t**3),
            (2 - t * s - 2 * c) / (2 * t**4), (2 * t - 3 * s + t * c) / (2 * t**5))
    got = lie._ad_coefficients(lie.coefficients(th * th), th * th)
    np.testing.assert_allclose(got, [float(w) for w in want], atol=1e-14, rtol=0)


@pytest.mark.parametrize("scale", [0.0, 1e-4, 0.3, 2.5])
def test_ad_powers_are_the_repeated_products_and_dexp_takes_them_unchanged(scale: float) -> None:
    rng = np.random.default_rng(21)
    lam, lam_dot = scale * rng.normal(size=6), rng.normal(size=6)
    P, A = lie.ad_powers(lam), lie.ad(lam)
    # the same matmuls in the same library: equal bit for bit
    assert np.array_equal(P[0], A)
    assert np.array_equal(P[1], A @ A)
    assert np.array_equal(P[2], (A @ A) @ A)
    assert np.array_equal(P[3], ((A @ A) @ A) @ A)
    k = lie.coefficients(float(lam[3:] @ lam[3:]))
    assert np.array_equal(lie.dexp(lam, k, P), lie.dexp(lam, k))
    assert np.array_equal(lie.dexp_dot(lam, lam_dot, k, P), lie.dexp_dot(lam, lam_dot, k))
