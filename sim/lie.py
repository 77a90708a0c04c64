"""SO(3) / SE(3) primitives for the planners and the SE(3) impedance controller (MATH.md §4).

Conventions (stated once, used everywhere in dockbench)
-------------------------------------------------------
* Twists are ``[v; ω]`` (linear part FIRST, Pinocchio's order), wrenches are ``[f; n]``.
* Poses are 4×4 homogeneous matrices ``T = [[R, p], [0, 1]]``; ``T_a_b`` maps coordinates in frame b
  to frame a.
* ``so3_hat(ω) = ω^`` with ``ω^ x = ω × x``; ``se3_hat([v; ω]) = [[ω^, v], [0, 0]]`` (4×4).
* ``se3_exp`` / ``se3_log`` are the group exponential and its principal inverse (rotation angle in
  [0, π]).
* ``Ad(T) = [[R, p^ R], [0, R]]`` maps a twist expressed in frame b to frame a (``T = T_a_b``),
  exactly Pinocchio's ``pin.SE3(R, p).action``. Wrenches transform with ``Ad(T)⁻ᵀ``.
* ``ad(ξ) = [[ω^, v^], [0, ω^]]`` is the 6×6 Lie bracket ``ad_ξ η = [ξ, η]`` (Pinocchio's
  ``pin.Motion(ξ).action``).

dexp convention (the one MATH.md §4 needs)
------------------------------------------
For ``T̃(t) = exp(λ(t))`` the BODY twist ``Ṽ = vee(T̃⁻¹ dT̃/dt)`` satisfies ::

    Ṽ = dexp_λ λ̇,     dexp_λ = Σ_k (−ad_λ)^k / (k+1)! = (I − exp(−ad_λ)) ad_λ⁻¹,

i.e. ``dexp`` here is the RIGHT Jacobian of SE(3) (Barfoot's ``J_r``, Pinocchio's ``Jexp6``), and
``λ̇ = dexp⁻¹_λ Ṽ``. In block form (Barfoot, *State Estimation for Robotics*, eq. 7.86, with
``J_r(ρ, φ) = J_l(−ρ, −φ)``)::

    dexp_λ = [[J_r3(φ), B(ρ, φ)], [0, J_r3(φ)]],   λ = [ρ; φ], θ = |φ|
    J_r3(φ) = I − α φ^ + β φ^²,                  α = (1 − cos θ)/θ²,  β = (θ − sin θ)/θ³
    J_r3(φ)⁻¹ = I + ½ φ^ + γ φ^²,                γ = (1 − (θ/2) cot(θ/2))/θ²
    B(ρ, φ) = −½ρ^ + β (φ^ρ^ + ρ^φ^ − φ^ρ^φ^) + b (3φ^ρ^φ^ − φ^φ^ρ^ − ρ^φ^φ^)
              + c (φ^ρ^φ^φ^ + φ^φ^ρ^φ^),         b = (θ² + 2cos θ − 2)/(2θ⁴),
                                                  c = (2θ − 3 sin θ + θ cos θ)/(2θ⁵)
    dexp_λ⁻¹ = [[J_r3⁻¹, −J_r3⁻¹ B J_r3⁻¹], [0, J_r3⁻¹]].

All coefficient functions are even in θ; they are evaluated as power series in θ² for θ < 1.5
(14 terms; truncation error < 1e-17 relative, the γ series converging like (θ/2π)^2n) and in
closed form above, so every function is smooth and accurate to ~1e-14 from θ = 0 up to and beyond
π (``dexp_inv`` is singular only at θ = 2π). The implementation uses the equivalent rank-one form of
B (see the comment above :func:`dexp`). :func:`dexp_dot` is the exact time derivative
``d/dt dexp_λ`` for a given ``λ̇`` (product rule on the blocks, with
``d/dt f(θ) = (f'(θ)/θ) (φ·φ̇)``), used for ``λ̈ = dexp⁻¹(dṼ/dt − (d/dt dexp) λ̇)``.

Performance: closed forms only (no ``scipy.linalg.expm``); the 6×6 / 4×4 producers take an optional
``out`` array so the 1 kHz loop can reuse buffers.
"""

from __future__ import annotations

import math
from bisect import bisect_right as _bisect_right

import numpy as np

__all__ = [
    "so3_hat",
    "so3_vee",
    "se3_hat",
    "se3_vee",
    "so3_exp",
    "so3_log",
    "se3_exp",
    "se3_log",
    "se3_inv",
    "Ad",
    "Ad_inv",
    "ad",
    "so3_left_jacobian",
    "so3_left_jacobian_inv",
    "so3_right_jacobian",
    "so3_right_jacobian_inv",
    "dexp",
    "dexp_inv",
    "dexp_dot",
    "se3_jacobian_coeffs",
    "so3_log_floats",
    "se3_log_floats",
    "DexpSE3",
    "dexp_and_dot",
    "rotation_error_world",
    "quat_to_matrix",
    "matrix_to_quat",
]

# --------------------------------------------------------------------------------------------------
# Coefficient functions f(θ) (even in θ) as series in x = θ² near 0, closed form elsewhere.
# --------------------------------------------------------------------------------------------------

#: θ below which the coefficient functions use their power series in θ².
_SERIES_THETA = 1.5
_SERIES_X = _SERIES_THETA**2
_NTERMS = 14

_fact = math.factorial
#: sin θ / θ = Σ (−1)^k x^k / (2k+1)!
_C_SINC = tuple((-1) ** k / _fact(2 * k + 1) for k in range(_NTERMS))
#: α = (1 − cos θ)/θ² = Σ (−1)^k x^k / (2k+2)!
_C_ALPHA = tuple((-1) ** k / _fact(2 * k + 2) for k in range(_NTERMS))
#: β = (θ − sin θ)/θ³ = Σ (−1)^k x^k / (2k+3)!
_C_BETA = tuple((-1) ** k / _fact(2 * k + 3) for k in range(_NTERMS))
#: b = (θ² + 2 cos θ − 2)/(2θ⁴) = Σ (−1)^k x^k / (2k+4)!
_C_B = tuple((-1) ** k / _fact(2 * k + 4) for k in range(_NTERMS))
#: c = (2θ − 3 sin θ + θ cos θ)/(2θ⁵) = Σ (−1)^k (k+1) x^k / (2k+5)!
_C_C = tuple((-1) ** k * (k + 1) / _fact(2 * k + 5) for k in range(_NTERMS))
# γ = (1 − (θ/2) cot(θ/2))/θ² = Σ_{n≥1} |B_2n| θ^(2n−2) / (2n)!  (Bernoulli numbers B_2n)
_BERNOULLI_ABS = (
    1 / 6,
    1 / 30,
    1 / 42,
    1 / 30,
    5 / 66,
    691 / 2730,
    7 / 6,
    3617 / 510,
    43867 / 798,
    174611 / 330,
    854513 / 138,
    236364091 / 2730,
    8553103 / 6,
    23749461029 / 870,
)
_C_GAMMA = tuple(_BERNOULLI_ABS[n - 1] / _fact(2 * n) for n in range(1, _NTERMS + 1))


def _series(coeffs: tuple[float, ...], x: float) -> float:
    """Σ coeffs[k] x^k (Horner)."""
    acc = 0.0
    for c in reversed(coeffs):
        acc = acc * x + c
    return acc


def _series_dtheta_over_theta(coeffs: tuple[float, ...], x: float) -> float:
    """f'(θ)/θ for f = Σ c_k θ^{2k}: Σ_{k≥1} 2k c_k x^{k−1}."""
    acc = 0.0
    for k in range(len(coeffs) - 1, 0, -1):
        acc = acc * x + 2.0 * k * coeffs[k]
    return acc


def _so3_coeffs(x: float) -> tuple[float, float, float]:
    """(sin θ/θ, α = (1−cos θ)/θ², β = (θ−sin θ)/θ³) at x = θ²."""
    if x < _SERIES_X:
        return _series(_C_SINC, x), _series(_C_ALPHA, x), _series(_C_BETA, x)
    th = math.sqrt(x)
    s, c = math.sin(th), math.cos(th)
    return s / th, (1.0 - c) / x, (th - s) / (x * th)


def _gamma(x: float) -> float:
    """γ = (1 − (θ/2) cot(θ/2))/θ² at x = θ² (finite for θ < 2π; 1/π² at θ = π)."""
    if x < _SERIES_X:
        return _series(_C_GAMMA, x)
    th = math.sqrt(x)
    half = 0.5 * th
    # (θ/2) cot(θ/2) = (θ/2) cos(θ/2)/sin(θ/2); sin(θ/2) > 0 on (0, 2π)
    return (1.0 - half * math.cos(half) / math.sin(half)) / x


def _se3_coeffs(x: float) -> tuple[float, float, float, float]:
    """(α, β, b, c) of the SE(3) Jacobian at x = θ² (see module docstring)."""
    if x < _SERIES_X:
        return _series(_C_ALPHA, x), _series(_C_BETA, x), _series(_C_B, x), _series(_C_C, x)
    _, al, be = _so3_coeffs(x)
    b = (1.0 - 2.0 * al) / (2.0 * x)
    c = (3.0 * be - al) / (2.0 * x)
    return al, be, b, c


def _se3_coeff_derivs(x: float) -> tuple[float, float, float, float]:
    """(α'/θ, β'/θ, b'/θ, c'/θ) at x = θ²; d/dt f = (f'/θ)(φ·φ̇)."""
    if x < _SERIES_X:
        return (
            _series_dtheta_over_theta(_C_ALPHA, x),
            _series_dtheta_over_theta(_C_BETA, x),
            _series_dtheta_over_theta(_C_B, x),
            _series_dtheta_over_theta(_C_C, x),
        )
    sinc, al, be = _so3_coeffs(x)
    b = (1.0 - 2.0 * al) / (2.0 * x)
    c = (3.0 * be - al) / (2.0 * x)
    dal = (sinc - 2.0 * al) / x
    dbe = (al - 3.0 * be) / x
    db = -(dal + 2.0 * b) / x
    dc = (0.5 * (3.0 * dbe - dal) - 2.0 * c) / x
    return dal, dbe, db, dc


# --------------------------------------------------------------------------------------------------
# hat / vee
# --------------------------------------------------------------------------------------------------


def _put3(
    out: np.ndarray,
    s00: float,
    s01: float,
    s02: float,
    s11: float,
    s12: float,
    s22: float,
    u0: float,
    u1: float,
    u2: float,
) -> np.ndarray:
    """out (3, 3) ← S + u^ with S symmetric (upper entries given) and u^ the skew matrix of u.
    One block assignment from Python floats (the cheapest way to fill a small array)."""
    out[...] = ((s00, s01 - u2, s02 + u1), (s01 + u2, s11, s12 - u0), (s02 - u1, s12 + u0, s22))
    return out


def so3_hat(w: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """(3,) → (3, 3) skew matrix ω^ with ω^ x = ω × x."""
    if out is None:
        out = np.empty((3, 3))
    x, y, z = float(w[0]), float(w[1]), float(w[2])
    out[...] = ((0.0, -z, y), (z, 0.0, -x), (-y, x, 0.0))
    return out


def so3_vee(W: np.ndarray) -> np.ndarray:
    """(3, 3) skew → (3,). Uses the antisymmetric part ½(W − Wᵀ)."""
    return 0.5 * np.array([W[2, 1] - W[1, 2], W[0, 2] - W[2, 0], W[1, 0] - W[0, 1]])


def se3_hat(xi: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """(6,) twist [v; ω] → (4, 4) matrix [[ω^, v], [0, 0]]."""
    if out is None:
        out = np.zeros((4, 4))
    else:
        out[3, :] = 0.0
    so3_hat(xi[3:6], out[:3, :3])
    out[:3, 3] = xi[:3]
    return out


def se3_vee(X: np.ndarray) -> np.ndarray:
    """(4, 4) se(3) matrix → (6,) twist [v; ω]."""
    return np.concatenate((X[:3, 3], so3_vee(X[:3, :3])))


# --------------------------------------------------------------------------------------------------
# exp / log
# --------------------------------------------------------------------------------------------------


def so3_exp(phi: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Rodrigues: exp(φ^) = cos θ I + (sin θ/θ) φ^ + ((1 − cos θ)/θ²) φ φᵀ, θ = |φ| [rad]."""
    if out is None:
        out = np.empty((3, 3))
    p0, p1, p2 = float(phi[0]), float(phi[1]), float(phi[2])
    x = p0 * p0 + p1 * p1 + p2 * p2
    sinc, al, _ = _so3_coeffs(x)
    cos_t = 1.0 - al * x
    return _put3(
        out,
        cos_t + al * p0 * p0,
        al * p0 * p1,
        al * p0 * p2,
        cos_t + al * p1 * p1,
        al * p1 * p2,
        cos_t + al * p2 * p2,
        sinc * p0,
        sinc * p1,
        sinc * p2,
    )


def so3_log(R: np.ndarray) -> np.ndarray:
    """Principal logarithm of a rotation matrix: φ (3,) with |φ| = θ ∈ [0, π] and exp(φ^) = R.

    θ = atan2(|s|, c) with s = vee(½(R − Rᵀ)) = sin θ n and c = (tr R − 1)/2 = cos θ. For
    cos θ > −0.9 the axis is s/|s| (well conditioned there; the ratio θ/sin θ → 1 as θ → 0).
    Near π the axis is taken from the symmetric part, ½(R + Rᵀ) − cI = (1 − c) n nᵀ, with the sign of
    n chosen so that n·s ≥ 0; this is exact at θ = π where s vanishes.
    """
    s0 = 0.5 * (R[2, 1] - R[1, 2])
    s1 = 0.5 * (R[0, 2] - R[2, 0])
    s2 = 0.5 * (R[1, 0] - R[0, 1])
    c = 0.5 * (R[0, 0] + R[1, 1] + R[2, 2] - 1.0)
    c = min(1.0, max(-1.0, c))
    s = math.sqrt(s0 * s0 + s1 * s1 + s2 * s2)
    theta = math.atan2(s, c)
    if c > -0.9:
        ratio = theta / s if s > 1e-12 else 1.0 + theta * theta / 6.0
        return np.array([s0 * ratio, s1 * ratio, s2 * ratio])
    # near π: B = ½(R + Rᵀ) − cI = (1 − c) n nᵀ
    one_m_c = 1.0 - c
    d = (R[0, 0] - c, R[1, 1] - c, R[2, 2] - c)
    i = int(np.argmax(d))
    col = 0.5 * (R[:, i] + R[i, :])
    col[i] = d[i]
    n = col / math.sqrt(d[i] * one_m_c)  # = (1−c) n_i n / ((1−c)|n_i|)
    if n[0] * s0 + n[1] * s1 + n[2] * s2 < 0.0:
        n = -n
    return theta * n


def se3_exp(xi: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """exp of a twist ξ = [v; ω] (6,) → T (4, 4): R = exp(ω^), p = J_l3(ω) v."""
    if out is None:
        out = np.empty((4, 4))
    w = xi[3:6]
    v = xi[0:3]
    x = float(w[0] * w[0] + w[1] * w[1] + w[2] * w[2])
    sinc, al, be = _so3_coeffs(x)
    R = out[:3, :3]
    so3_exp(w, R)
    # J_l3(ω) v = v + α ω × v + β ω × (ω × v)
    w0, w1, w2 = float(w[0]), float(w[1]), float(w[2])
    v0, v1, v2 = float(v[0]), float(v[1]), float(v[2])
    c0, c1, c2 = w1 * v2 - w2 * v1, w2 * v0 - w0 * v2, w0 * v1 - w1 * v0
    d0, d1, d2 = w1 * c2 - w2 * c1, w2 * c0 - w0 * c2, w0 * c1 - w1 * c0
    out[0, 3] = v0 + al * c0 + be * d0
    out[1, 3] = v1 + al * c1 + be * d1
    out[2, 3] = v2 + al * c2 + be * d2
    out[3, :3] = 0.0
    out[3, 3] = 1.0
    return out


def se3_log(T: np.ndarray) -> np.ndarray:
    """Principal log of a pose T (4, 4) → ξ = [ρ; φ] (6,), φ = so3_log(R), ρ = J_l3(φ)⁻¹ p."""
    phi = so3_log(T[:3, :3])
    w0, w1, w2 = float(phi[0]), float(phi[1]), float(phi[2])
    p0, p1, p2 = float(T[0, 3]), float(T[1, 3]), float(T[2, 3])
    g = _gamma(w0 * w0 + w1 * w1 + w2 * w2)
    # J_l3⁻¹ p = p − ½ φ × p + γ φ × (φ × p)
    c0, c1, c2 = w1 * p2 - w2 * p1, w2 * p0 - w0 * p2, w0 * p1 - w1 * p0
    d0, d1, d2 = w1 * c2 - w2 * c1, w2 * c0 - w0 * c2, w0 * c1 - w1 * c0
    out = np.empty(6)
    out[0] = p0 - 0.5 * c0 + g * d0
    out[1] = p1 - 0.5 * c1 + g * d1
    out[2] = p2 - 0.5 * c2 + g * d2
    out[3:] = phi
    return out


def se3_inv(T: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """T⁻¹ = [[Rᵀ, −Rᵀ p], [0, 1]]."""
    if out is None:
        out = np.empty((4, 4))
    Rt = T[:3, :3].T
    out[:3, :3] = Rt
    out[:3, 3] = -(Rt @ T[:3, 3])
    out[3, :3] = 0.0
    out[3, 3] = 1.0
    return out


# --------------------------------------------------------------------------------------------------
# Adjoints
# --------------------------------------------------------------------------------------------------


def Ad(T: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Adjoint (6, 6) of T_a_b: twist in b → twist in a. Ad = [[R, p^ R], [0, R]]."""
    if out is None:
        out = np.empty((6, 6))
    R = T[:3, :3]
    out[:3, :3] = R
    out[3:, 3:] = R
    out[3:, :3] = 0.0
    np.matmul(so3_hat(T[:3, 3]), R, out=out[:3, 3:])
    return out


def Ad_inv(T: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Ad(T)⁻¹ = Ad(T⁻¹) = [[Rᵀ, −Rᵀ p^], [0, Rᵀ]] (6, 6)."""
    if out is None:
        out = np.empty((6, 6))
    Rt = T[:3, :3].T
    out[:3, :3] = Rt
    out[3:, 3:] = Rt
    out[3:, :3] = 0.0
    np.matmul(Rt, so3_hat(T[:3, 3]), out=out[:3, 3:])
    out[:3, 3:] *= -1.0
    return out


def ad(xi: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Lie bracket matrix (6, 6) of a twist ξ = [v; ω]: ad_ξ = [[ω^, v^], [0, ω^]]."""
    if out is None:
        out = np.empty((6, 6))
    so3_hat(xi[3:6], out[:3, :3])
    out[3:, 3:] = out[:3, :3]
    so3_hat(xi[0:3], out[:3, 3:])
    out[3:, :3] = 0.0
    return out


# --------------------------------------------------------------------------------------------------
# SO(3) Jacobians
# --------------------------------------------------------------------------------------------------


def _so3_jac(phi: np.ndarray, c1: float, c2: float, out: np.ndarray | None) -> np.ndarray:
    """I + c1 φ^ + c2 φ^² = (1 − c2 θ²) I + c1 φ^ + c2 φ φᵀ (3, 3)."""
    if out is None:
        out = np.empty((3, 3))
    p0, p1, p2 = float(phi[0]), float(phi[1]), float(phi[2])
    d = 1.0 - c2 * (p0 * p0 + p1 * p1 + p2 * p2)
    return _put3(
        out,
        d + c2 * p0 * p0,
        c2 * p0 * p1,
        c2 * p0 * p2,
        d + c2 * p1 * p1,
        c2 * p1 * p2,
        d + c2 * p2 * p2,
        c1 * p0,
        c1 * p1,
        c1 * p2,
    )


def so3_left_jacobian(phi: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """J_l3(φ) = I + α φ^ + β φ^²; exp(φ + δ) ≈ exp(J_l3 δ) exp(φ) (world-side perturbation)."""
    _, al, be = _so3_coeffs(float(phi @ phi))
    return _so3_jac(phi, al, be, out)


def so3_left_jacobian_inv(phi: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """J_l3(φ)⁻¹ = I − ½ φ^ + γ φ^² (finite for θ < 2π)."""
    return _so3_jac(phi, -0.5, _gamma(float(phi @ phi)), out)


def so3_right_jacobian(phi: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """J_r3(φ) = J_l3(−φ) = I − α φ^ + β φ^²: R(t) = exp(φ(t)) has body ω = J_r3(φ) φ̇."""
    _, al, be = _so3_coeffs(float(phi @ phi))
    return _so3_jac(phi, -al, be, out)


def so3_right_jacobian_inv(phi: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """J_r3(φ)⁻¹ = I + ½ φ^ + γ φ^²."""
    return _so3_jac(phi, 0.5, _gamma(float(phi @ phi)), out)


# --------------------------------------------------------------------------------------------------
# SE(3) dexp (right Jacobian), its inverse and its time derivative
# --------------------------------------------------------------------------------------------------
#
# With d = φ·ρ, x = θ² and the identities a^b^ = b aᵀ − (a·b) I, φ^ρ^φ^ = −d φ^ and
# φ^ρ^φ^φ^ = φ^φ^ρ^φ^ = −d φ^², the B block of the module docstring reduces to rank-one terms
# (no 3×3 products needed):
#
#     B = u^ + β (ρ φᵀ + φ ρᵀ) + e φ φᵀ + f I,
#     u = (b x − ½) ρ + (β − 2b) d φ,   e = −2 c d,   f = 2 d (c x − β).
#
# The scalar code below evaluates these entries with Python floats and fills each 3×3 block with one
# assignment: ~4x faster than the equivalent numpy expression for arrays this small.


def _B_into(
    r: tuple[float, float, float],
    p: tuple[float, float, float],
    x: float,
    be: float,
    b: float,
    c: float,
    out: np.ndarray,
) -> np.ndarray:
    """Write B(ρ, φ) (3, 3) into ``out`` (rank-one form above); r = ρ, p = φ as float triples."""
    r0, r1, r2 = r
    p0, p1, p2 = p
    d = p0 * r0 + p1 * r1 + p2 * r2
    ku = b * x - 0.5
    kp = (be - 2.0 * b) * d
    e = -2.0 * c * d
    f = 2.0 * d * (c * x - be)
    return _put3(
        out,
        2.0 * be * r0 * p0 + e * p0 * p0 + f,
        be * (r0 * p1 + p0 * r1) + e * p0 * p1,
        be * (r0 * p2 + p0 * r2) + e * p0 * p2,
        2.0 * be * r1 * p1 + e * p1 * p1 + f,
        be * (r1 * p2 + p1 * r2) + e * p1 * p2,
        2.0 * be * r2 * p2 + e * p2 * p2 + f,
        ku * r0 + kp * p0,
        ku * r1 + kp * p1,
        ku * r2 + kp * p2,
    )


def dexp(lam: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """SE(3) right Jacobian dexp_λ (6, 6): the body twist of exp(λ(t)) is Ṽ = dexp_λ λ̇.

    λ = [ρ; φ] (6,) exponential coordinates [m; rad]. Same map as Pinocchio's ``Jexp6`` (which
    truncates its small-angle series at ~1e-8; this one is accurate to ~1e-15).
    """
    return DexpSE3(lam).matrix(out)


def dexp_inv(lam: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Inverse of :func:`dexp` (6, 6): λ̇ = dexp_λ⁻¹ Ṽ. Closed form
    [[J_r3⁻¹, −J_r3⁻¹ B J_r3⁻¹], [0, J_r3⁻¹]]; finite for |φ| < 2π. Equals Pinocchio's
    ``Jlog6(exp6(λ))``."""
    return DexpSE3(lam).inverse(out)


def dexp_dot(lam: np.ndarray, lam_dot: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Time derivative d/dt dexp_λ(t) (6, 6) at λ with rate λ̇ (both (6,) [ρ; φ]).

    Exact product rule on the rank-one form of :func:`dexp`
    (J_r3 = (1 − βx) I − α φ^ + β φ φᵀ, B above); the scalar coefficients use
    d/dt f(θ) = (f'(θ)/θ)(φ·φ̇), smooth at θ = 0. Used for the exponential-coordinate acceleration
    λ̈ = dexp⁻¹_λ (dṼ/dt − (d/dt dexp_λ) λ̇).
    """
    return DexpSE3(lam).dot_matrix(lam_dot, out)


# --------------------------------------------------------------------------------------------------
# Fused evaluation: every series coefficient of one λ computed ONCE (the 1 kHz SE(3) controller path)
# --------------------------------------------------------------------------------------------------
#
# dexp, dexp_inv, dexp_dot and se3_log above each evaluate their own coefficient series (14-term Horner
# loops). The SE(3) controller needs all of them at the same θ every step, so here the nine functions
# (α, β, b, c, γ and α'/θ, β'/θ, b'/θ, c'/θ) are evaluated in ONE Horner pass, and with only as many
# terms as the given θ needs: n terms are used when the omitted tail is below 2⁻⁶⁴ |f(θ)| for every one
# of the nine series (``_X_TIERS``, checked in tests/paper/test_lie.py), i.e. far below half an ulp,
# so the result equals the 14-term sum to round-off (θ ≈ 2 mrad, a docking error, needs 3 terms).
# :class:`DexpSE3` then applies dexp_λ, dexp_λᵀ, dexp_λ⁻¹ and d/dt dexp_λ to vectors directly (Python
# floats, no 6×6 matrix, no solve) or fills the matrices, all from the one coefficient set.

#: x = θ² below which n + 1 series terms suffice (n = 1 … 13, rounded down); 14 terms above the last.
_X_TIERS = (6.5e-19, 4.41e-9, 1.03e-5, 5.6e-4, 6.11e-3, 2.63e-2, 7.49e-2, 0.164, 0.301, 0.491, 0.731, 1.01, 1.35)


def _dseries(coeffs: tuple[float, ...]) -> tuple[float, ...]:
    """Coefficients of f'(θ)/θ = Σ_{k≥1} 2k c_k x^{k−1} (the terms of :func:`_series_dtheta_over_theta`),
    padded with a zero to _NTERMS entries."""
    return tuple(2.0 * k * coeffs[k] for k in range(1, len(coeffs))) + (0.0,)


#: the nine series side by side, row k = the x^k coefficients of (α, β, b, c, γ, α'/θ, β'/θ, b'/θ, c'/θ)
_FUSED_ROWS = tuple(
    zip(
        *(_C_ALPHA, _C_BETA, _C_B, _C_C, _C_GAMMA),
        *(_dseries(c) for c in (_C_ALPHA, _C_BETA, _C_B, _C_C)),
        strict=True,
    )
)
#: _FUSED_HORNER[n]: the first n rows, highest power first (Horner order)
_FUSED_HORNER = tuple(tuple(reversed(_FUSED_ROWS[:n])) for n in range(_NTERMS + 1))

SE3Coeffs = tuple[float, float, float, float, float, float, float, float, float]


def se3_jacobian_coeffs(x: float) -> SE3Coeffs:
    """(α, β, b, c, γ, α'/θ, β'/θ, b'/θ, c'/θ) at x = θ² in one pass (module docstring for the
    functions; the primes are d/dθ). Equal to ``_se3_coeffs``, ``_gamma`` and ``_se3_coeff_derivs``
    to round-off: power series in θ² below θ = 1.5 with only the terms that matter at this θ, the same
    closed forms above."""
    if x < _SERIES_X:
        # n terms: Horner started at the row of x^(n−1) (0·x + k = k exactly), then the rows below
        n = _bisect_right(_X_TIERS, x) + 1
        al, be, b, c, g, dal, dbe, db, dc = _FUSED_ROWS[n - 1]
        for k0, k1, k2, k3, k4, k5, k6, k7, k8 in _FUSED_HORNER[n - 1]:
            al = al * x + k0
            be = be * x + k1
            b = b * x + k2
            c = c * x + k3
            g = g * x + k4
            dal = dal * x + k5
            dbe = dbe * x + k6
            db = db * x + k7
            dc = dc * x + k8
        return al, be, b, c, g, dal, dbe, db, dc
    th = math.sqrt(x)
    s, co = math.sin(th), math.cos(th)
    sinc, al, be = s / th, (1.0 - co) / x, (th - s) / (x * th)
    b = (1.0 - 2.0 * al) / (2.0 * x)
    c = (3.0 * be - al) / (2.0 * x)
    half = 0.5 * th
    g = (1.0 - half * math.cos(half) / math.sin(half)) / x
    dal = (sinc - 2.0 * al) / x
    dbe = (al - 3.0 * be) / x
    db = -(dal + 2.0 * b) / x
    dc = (0.5 * (3.0 * dbe - dal) - 2.0 * c) / x
    return al, be, b, c, g, dal, dbe, db, dc


def so3_log_floats(
    r00: float, r01: float, r02: float, r10: float, r11: float, r12: float, r20: float, r21: float, r22: float
) -> tuple[float, float, float]:
    """:func:`so3_log` of the rotation matrix with rows (r00, r01, r02), … given as Python floats;
    returns φ as a float triple. Same operations, same result bit for bit."""
    s0 = 0.5 * (r21 - r12)
    s1 = 0.5 * (r02 - r20)
    s2 = 0.5 * (r10 - r01)
    c = 0.5 * (r00 + r11 + r22 - 1.0)
    c = min(1.0, max(-1.0, c))
    s = math.sqrt(s0 * s0 + s1 * s1 + s2 * s2)
    theta = math.atan2(s, c)
    if c > -0.9:
        ratio = theta / s if s > 1e-12 else 1.0 + theta * theta / 6.0
        return s0 * ratio, s1 * ratio, s2 * ratio
    # near π: B = ½(R + Rᵀ) − cI = (1 − c) n nᵀ; column i of it, i = first index of the largest diagonal
    one_m_c = 1.0 - c
    d0, d1, d2 = r00 - c, r11 - c, r22 - c
    if d0 >= d1 and d0 >= d2:
        di, n0, n1, n2 = d0, d0, 0.5 * (r10 + r01), 0.5 * (r20 + r02)
    elif d1 >= d2:
        di, n0, n1, n2 = d1, 0.5 * (r01 + r10), d1, 0.5 * (r21 + r12)
    else:
        di, n0, n1, n2 = d2, 0.5 * (r02 + r20), 0.5 * (r12 + r21), d2
    k = math.sqrt(di * one_m_c)
    n0, n1, n2 = n0 / k, n1 / k, n2 / k
    if n0 * s0 + n1 * s1 + n2 * s2 < 0.0:
        n0, n1, n2 = -n0, -n1, -n2
    return theta * n0, theta * n1, theta * n2


def so3_log_a_bt(A: np.ndarray, B: np.ndarray) -> tuple[float, float, float]:
    """log(A Bᵀ) of two (3, 3) rotation matrices as a float triple [rad], computed on Python floats
    (entry (i, j) of A Bᵀ = A_i0 B_j0 + A_i1 B_j1 + A_i2 B_j2, then :func:`so3_log_floats`). With
    A = R_d, B = R it is the world-axes orientation error of MATH.md §2; with A = R, B = R_d the
    HQP's log(R R_dᵀ)."""
    (a00, a01, a02), (a10, a11, a12), (a20, a21, a22) = A.tolist()
    (b00, b01, b02), (b10, b11, b12), (b20, b21, b22) = B.tolist()
    return so3_log_floats(
        a00 * b00 + a01 * b01 + a02 * b02,
        a00 * b10 + a01 * b11 + a02 * b12,
        a00 * b20 + a01 * b21 + a02 * b22,
        a10 * b00 + a11 * b01 + a12 * b02,
        a10 * b10 + a11 * b11 + a12 * b12,
        a10 * b20 + a11 * b21 + a12 * b22,
        a20 * b00 + a21 * b01 + a22 * b02,
        a20 * b10 + a21 * b11 + a22 * b12,
        a20 * b20 + a21 * b21 + a22 * b22,
    )


def se3_log_floats(
    r00: float,
    r01: float,
    r02: float,
    r10: float,
    r11: float,
    r12: float,
    r20: float,
    r21: float,
    r22: float,
    p0: float,
    p1: float,
    p2: float,
) -> tuple[tuple[float, float, float, float, float, float], SE3Coeffs]:
    """:func:`se3_log` of T = [[R, p], [0, 1]] given as Python floats (R row by row, then p).

    Returns (λ = (ρ0, ρ1, ρ2, φ0, φ1, φ2), the :func:`se3_jacobian_coeffs` of θ = |φ|): the log needs γ
    anyway, and the coefficients (even in θ) serve the Jacobians at λ and at −λ (:meth:`DexpSE3.set`).
    """
    w0, w1, w2 = so3_log_floats(r00, r01, r02, r10, r11, r12, r20, r21, r22)
    co = se3_jacobian_coeffs(w0 * w0 + w1 * w1 + w2 * w2)
    g = co[4]
    # J_l3⁻¹ p = p − ½ φ × p + γ φ × (φ × p)
    c0, c1, c2 = w1 * p2 - w2 * p1, w2 * p0 - w0 * p2, w0 * p1 - w1 * p0
    d0, d1, d2 = w1 * c2 - w2 * c1, w2 * c0 - w0 * c2, w0 * c1 - w1 * c0
    return (p0 - 0.5 * c0 + g * d0, p1 - 0.5 * c1 + g * d1, p2 - 0.5 * c2 + g * d2, w0, w1, w2), co


class DexpSE3:
    """dexp_λ (the SE(3) right Jacobian, :func:`dexp`) at one λ, every coefficient evaluated once.

    ``set`` takes λ = [ρ; φ] as six floats (and optionally the coefficients of θ = |φ| from
    :func:`se3_log_floats`); then

    * :meth:`mul`, :meth:`tmul`, :meth:`solve`: dexp_λ y, dexp_λᵀ y, dexp_λ⁻¹ y for a 6-vector y
      (any sequence of 6 floats) → tuple of 6 floats, straight from the rank-one form (no matrix);
    * :meth:`dot_mul`: (d/dt dexp_λ) y for the rate λ̇ (the product rule of :func:`dexp_dot`);
    * :meth:`solve_tmul` (dexp_λ⁻¹ y, dexp_λᵀ w) and :meth:`mul_minus_dot` (dexp_λ y − (d/dt dexp_λ) λ̇):
      the fused products of the SE(3) controller, one call each per step;
    * :meth:`matrix`, :meth:`inverse`, :meth:`dot_matrix`: the (6, 6) matrices of :func:`dexp`,
      :func:`dexp_inv`, :func:`dexp_dot`.

    All agree with the separate functions to round-off (tests/paper/test_lie.py).
    """

    __slots__ = ("r", "p", "x", "k", "j", "d", "u", "e", "f")

    def __init__(self, lam: np.ndarray | None = None):
        self.set(*((0.0,) * 6 if lam is None else (float(v) for v in lam)))

    def set(
        self, r0: float, r1: float, r2: float, p0: float, p1: float, p2: float, coeffs: SE3Coeffs | None = None
    ) -> DexpSE3:
        """Evaluate at λ = (r0, r1, r2, p0, p1, p2); ``coeffs`` = se3_jacobian_coeffs(|φ|²) if known."""
        x = p0 * p0 + p1 * p1 + p2 * p2
        k = se3_jacobian_coeffs(x) if coeffs is None else coeffs
        be, b, c = k[1], k[2], k[3]
        d = p0 * r0 + p1 * r1 + p2 * r2
        ku = b * x - 0.5
        kp = (be - 2.0 * b) * d
        self.r = (r0, r1, r2)
        self.p = (p0, p1, p2)
        self.x = x
        self.k = k
        self.j = 1.0 - be * x  # J_r3 = j I − α φ^ + β φ φᵀ
        self.d = d
        # B = u^ + β (ρ φᵀ + φ ρᵀ) + e φ φᵀ + f I
        self.u = (ku * r0 + kp * p0, ku * r1 + kp * p1, ku * r2 + kp * p2)
        self.e = -2.0 * c * d
        self.f = 2.0 * d * (c * x - be)
        return self

    # ---------------------------------------------------------------------------- vector products

    def mul(self, y) -> tuple[float, float, float, float, float, float]:
        """dexp_λ y = [J_r3 y_v + B y_ω; J_r3 y_ω]."""
        y0, y1, y2, y3, y4, y5 = y
        r0, r1, r2 = self.r
        p0, p1, p2 = self.p
        u0, u1, u2 = self.u
        al, be = self.k[0], self.k[1]
        j, e, f = self.j, self.e, self.f
        pv = p0 * y0 + p1 * y1 + p2 * y2
        pw = p0 * y3 + p1 * y4 + p2 * y5
        rw = r0 * y3 + r1 * y4 + r2 * y5
        # J_r3 z = j z − α φ × z + β φ (φ·z)
        bv, bw = be * pv, be * pw
        ev = e * pw
        return (
            j * y0
            - al * (p1 * y2 - p2 * y1)
            + bv * p0
            + (u1 * y5 - u2 * y4)
            + be * (r0 * pw + p0 * rw)
            + ev * p0
            + f * y3,
            j * y1
            - al * (p2 * y0 - p0 * y2)
            + bv * p1
            + (u2 * y3 - u0 * y5)
            + be * (r1 * pw + p1 * rw)
            + ev * p1
            + f * y4,
            j * y2
            - al * (p0 * y1 - p1 * y0)
            + bv * p2
            + (u0 * y4 - u1 * y3)
            + be * (r2 * pw + p2 * rw)
            + ev * p2
            + f * y5,
            j * y3 - al * (p1 * y5 - p2 * y4) + bw * p0,
            j * y4 - al * (p2 * y3 - p0 * y5) + bw * p1,
            j * y5 - al * (p0 * y4 - p1 * y3) + bw * p2,
        )

    def tmul(self, y) -> tuple[float, float, float, float, float, float]:
        """dexp_λᵀ y = [J_r3ᵀ y_v; Bᵀ y_v + J_r3ᵀ y_ω]."""
        y0, y1, y2, y3, y4, y5 = y
        r0, r1, r2 = self.r
        p0, p1, p2 = self.p
        u0, u1, u2 = self.u
        al, be = self.k[0], self.k[1]
        j, e, f = self.j, self.e, self.f
        pv = p0 * y0 + p1 * y1 + p2 * y2
        pw = p0 * y3 + p1 * y4 + p2 * y5
        rv = r0 * y0 + r1 * y1 + r2 * y2
        # J_r3ᵀ z = j z + α φ × z + β φ (φ·z);  Bᵀ z = −u × z + (symmetric part) z
        bv, bw = be * pv, be * pw
        ev = e * pv
        return (
            j * y0 + al * (p1 * y2 - p2 * y1) + bv * p0,
            j * y1 + al * (p2 * y0 - p0 * y2) + bv * p1,
            j * y2 + al * (p0 * y1 - p1 * y0) + bv * p2,
            j * y3
            + al * (p1 * y5 - p2 * y4)
            + bw * p0
            - (u1 * y2 - u2 * y1)
            + be * (r0 * pv + p0 * rv)
            + ev * p0
            + f * y0,
            j * y4
            + al * (p2 * y3 - p0 * y5)
            + bw * p1
            - (u2 * y0 - u0 * y2)
            + be * (r1 * pv + p1 * rv)
            + ev * p1
            + f * y1,
            j * y5
            + al * (p0 * y4 - p1 * y3)
            + bw * p2
            - (u0 * y1 - u1 * y0)
            + be * (r2 * pv + p2 * rv)
            + ev * p2
            + f * y2,
        )

    def solve(self, y) -> tuple[float, float, float, float, float, float]:
        """dexp_λ⁻¹ y: ω' = J_r3⁻¹ y_ω, v' = J_r3⁻¹ (y_v − B ω') (block back-substitution of the
        closed form of :func:`dexp_inv`); J_r3⁻¹ z = z + ½ φ × z + γ φ × (φ × z)."""
        y0, y1, y2, y3, y4, y5 = y
        r0, r1, r2 = self.r
        p0, p1, p2 = self.p
        u0, u1, u2 = self.u
        be, g = self.k[1], self.k[4]
        e, f = self.e, self.f
        # ω' = J⁻¹ y_ω
        c0, c1, c2 = p1 * y5 - p2 * y4, p2 * y3 - p0 * y5, p0 * y4 - p1 * y3
        w0 = y3 + 0.5 * c0 + g * (p1 * c2 - p2 * c1)
        w1 = y4 + 0.5 * c1 + g * (p2 * c0 - p0 * c2)
        w2 = y5 + 0.5 * c2 + g * (p0 * c1 - p1 * c0)
        # z = y_v − B ω'
        pw = p0 * w0 + p1 * w1 + p2 * w2
        rw = r0 * w0 + r1 * w1 + r2 * w2
        ew = e * pw
        z0 = y0 - ((u1 * w2 - u2 * w1) + be * (r0 * pw + p0 * rw) + ew * p0 + f * w0)
        z1 = y1 - ((u2 * w0 - u0 * w2) + be * (r1 * pw + p1 * rw) + ew * p1 + f * w1)
        z2 = y2 - ((u0 * w1 - u1 * w0) + be * (r2 * pw + p2 * rw) + ew * p2 + f * w2)
        # v' = J⁻¹ z
        c0, c1, c2 = p1 * z2 - p2 * z1, p2 * z0 - p0 * z2, p0 * z1 - p1 * z0
        return (
            z0 + 0.5 * c0 + g * (p1 * c2 - p2 * c1),
            z1 + 0.5 * c1 + g * (p2 * c0 - p0 * c2),
            z2 + 0.5 * c2 + g * (p0 * c1 - p1 * c0),
            w0,
            w1,
            w2,
        )

    def _dot_terms(self, lam_dot):
        """Time derivatives of the rank-one form for the rate λ̇ = (ρ̇, φ̇) (see :func:`dexp_dot`)."""
        s0, s1, s2, q0, q1, q2 = lam_dot
        r0, r1, r2 = self.r
        p0, p1, p2 = self.p
        x, d = self.x, self.d
        al, be, b, c, _, dal, dbe, db, dc = self.k
        rr = p0 * q0 + p1 * q1 + p2 * q2  # θ θ̇
        dx = 2.0 * rr
        dal *= rr
        dbe *= rr
        db *= rr
        dc *= rr
        g = -(dbe * x + be * dx)
        dd = q0 * r0 + q1 * r1 + q2 * r2 + p0 * s0 + p1 * s1 + p2 * s2
        ku, dku = b * x - 0.5, db * x + b * dx
        kp, dkp = (be - 2.0 * b) * d, (dbe - 2.0 * db) * d + (be - 2.0 * b) * dd
        de = -2.0 * (dc * d + c * dd)
        df = 2.0 * dd * (c * x - be) + 2.0 * d * (dc * x + c * dx - dbe)
        return s0, s1, s2, q0, q1, q2, al, be, dal, dbe, g, ku, dku, kp, dkp, de, df

    def dot_mul(self, lam_dot, y) -> tuple[float, float, float, float, float, float]:
        """(d/dt dexp_λ) y for λ changing at the rate λ̇ (6 floats): [J̇ y_v + Ḃ y_ω; J̇ y_ω] with
        J̇ z = β̇ φ(φ·z) + β(φ̇(φ·z) + φ(φ̇·z)) + g z − (α̇ φ + α φ̇) × z and
        Ḃ z = u̇ × z + β̇(ρ(φ·z) + φ(ρ·z)) + β(ρ̇(φ·z) + φ(ρ̇·z) + ρ(φ̇·z) + φ̇(ρ·z)) + ė φ(φ·z)
        + e(φ̇(φ·z) + φ(φ̇·z)) + ḟ z."""
        s0, s1, s2, q0, q1, q2, al, be, dal, dbe, g, ku, dku, kp, dkp, de, df = self._dot_terms(lam_dot)
        y0, y1, y2, y3, y4, y5 = y
        r0, r1, r2 = self.r
        p0, p1, p2 = self.p
        e = self.e
        # J̇ skew part −a × z, a = α̇ φ + α φ̇;  Ḃ skew part u̇ × z
        a0, a1, a2 = dal * p0 + al * q0, dal * p1 + al * q1, dal * p2 + al * q2
        v0 = dku * r0 + ku * s0 + dkp * p0 + kp * q0
        v1 = dku * r1 + ku * s1 + dkp * p1 + kp * q1
        v2 = dku * r2 + ku * s2 + dkp * p2 + kp * q2
        # J̇ y_ω
        pz, qz = p0 * y3 + p1 * y4 + p2 * y5, q0 * y3 + q1 * y4 + q2 * y5
        m, n = dbe * pz, be * pz
        o = be * qz
        t3 = m * p0 + n * q0 + o * p0 + g * y3 - (a1 * y5 - a2 * y4)
        t4 = m * p1 + n * q1 + o * p1 + g * y4 - (a2 * y3 - a0 * y5)
        t5 = m * p2 + n * q2 + o * p2 + g * y5 - (a0 * y4 - a1 * y3)
        # Ḃ y_ω (reusing pz = φ·y_ω, qz = φ̇·y_ω)
        rz, sz = r0 * y3 + r1 * y4 + r2 * y5, s0 * y3 + s1 * y4 + s2 * y5
        h0 = v1 * y5 - v2 * y4 + dbe * (r0 * pz + p0 * rz) + be * (s0 * pz + p0 * sz + r0 * qz + q0 * rz)
        h1 = v2 * y3 - v0 * y5 + dbe * (r1 * pz + p1 * rz) + be * (s1 * pz + p1 * sz + r1 * qz + q1 * rz)
        h2 = v0 * y4 - v1 * y3 + dbe * (r2 * pz + p2 * rz) + be * (s2 * pz + p2 * sz + r2 * qz + q2 * rz)
        dep, ep, eq = de * pz, e * pz, e * qz
        h0 += dep * p0 + ep * q0 + eq * p0 + df * y3
        h1 += dep * p1 + ep * q1 + eq * p1 + df * y4
        h2 += dep * p2 + ep * q2 + eq * p2 + df * y5
        # J̇ y_v
        pz, qz = p0 * y0 + p1 * y1 + p2 * y2, q0 * y0 + q1 * y1 + q2 * y2
        m, n = dbe * pz, be * pz
        o = be * qz
        return (
            m * p0 + n * q0 + o * p0 + g * y0 - (a1 * y2 - a2 * y1) + h0,
            m * p1 + n * q1 + o * p1 + g * y1 - (a2 * y0 - a0 * y2) + h1,
            m * p2 + n * q2 + o * p2 + g * y2 - (a0 * y1 - a1 * y0) + h2,
            t3,
            t4,
            t5,
        )

    # ---------------------------------------------------------------------------- fused products
    #
    # The SE(3) controller applies dexp_λ⁻¹, dexp_λᵀ, dexp_λ and d/dt dexp_λ once each per step. The
    # two methods below do the same arithmetic as solve + tmul and mul − dot_mul(rate, rate), with the
    # terms regrouped per basis vector (ρ, φ, ρ̇, φ̇) and the cross products merged, and without the
    # intermediate tuples and calls (equal to the separate methods to round-off, tests/paper/test_lie.py).

    def solve_tmul(self, y, w) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(dexp_λ⁻¹ y, dexp_λᵀ w) for two 6-vectors y, w (any sequences of 6 floats), as :meth:`solve`
        and :meth:`tmul`."""
        y0, y1, y2, y3, y4, y5 = y
        w0, w1, w2, w3, w4, w5 = w
        r0, r1, r2 = self.r
        p0, p1, p2 = self.p
        u0, u1, u2 = self.u
        al, be, _, _, g = self.k[:5]
        j, e, f = self.j, self.e, self.f
        # dexp⁻¹ y: ω' = J⁻¹ y_ω, v' = J⁻¹ (y_v − B ω'),  J⁻¹ z = z + ½ φ × z + γ φ × (φ × z)
        c0, c1, c2 = p1 * y5 - p2 * y4, p2 * y3 - p0 * y5, p0 * y4 - p1 * y3
        o0 = y3 + 0.5 * c0 + g * (p1 * c2 - p2 * c1)
        o1 = y4 + 0.5 * c1 + g * (p2 * c0 - p0 * c2)
        o2 = y5 + 0.5 * c2 + g * (p0 * c1 - p1 * c0)
        # B ω' = u × ω' + (β φ·ω') ρ + (β ρ·ω' + e φ·ω') φ + f ω'
        po = p0 * o0 + p1 * o1 + p2 * o2
        kr = be * po
        kp = be * (r0 * o0 + r1 * o1 + r2 * o2) + e * po
        z0 = y0 - ((u1 * o2 - u2 * o1) + kr * r0 + kp * p0 + f * o0)
        z1 = y1 - ((u2 * o0 - u0 * o2) + kr * r1 + kp * p1 + f * o1)
        z2 = y2 - ((u0 * o1 - u1 * o0) + kr * r2 + kp * p2 + f * o2)
        c0, c1, c2 = p1 * z2 - p2 * z1, p2 * z0 - p0 * z2, p0 * z1 - p1 * z0
        sol = (
            z0 + 0.5 * c0 + g * (p1 * c2 - p2 * c1),
            z1 + 0.5 * c1 + g * (p2 * c0 - p0 * c2),
            z2 + 0.5 * c2 + g * (p0 * c1 - p1 * c0),
            o0,
            o1,
            o2,
        )
        # dexpᵀ w = [Jᵀ w_v; Bᵀ w_v + Jᵀ w_ω],  Jᵀ z = j z + α φ × z + β (φ·z) φ,
        # Bᵀ z = −u × z + (β φ·z) ρ + (β ρ·z + e φ·z) φ + f z
        pv = p0 * w0 + p1 * w1 + p2 * w2
        bv = be * pv
        kp = be * (p0 * w3 + p1 * w4 + p2 * w5 + r0 * w0 + r1 * w1 + r2 * w2) + e * pv
        tr = (
            j * w0 + al * (p1 * w2 - p2 * w1) + bv * p0,
            j * w1 + al * (p2 * w0 - p0 * w2) + bv * p1,
            j * w2 + al * (p0 * w1 - p1 * w0) + bv * p2,
            j * w3 + f * w0 + al * (p1 * w5 - p2 * w4) - (u1 * w2 - u2 * w1) + kp * p0 + bv * r0,
            j * w4 + f * w1 + al * (p2 * w3 - p0 * w5) - (u2 * w0 - u0 * w2) + kp * p1 + bv * r1,
            j * w5 + f * w2 + al * (p0 * w4 - p1 * w3) - (u0 * w1 - u1 * w0) + kp * p2 + bv * r2,
        )
        return sol, tr

    def mul_minus_dot(self, y, rate) -> tuple[float, float, float, float, float, float]:
        """dexp_λ y − (d/dt dexp_λ) λ̇ for λ changing at the rate λ̇ = ``rate`` = (ρ̇, φ̇), i.e.
        ``mul(y) − dot_mul(rate, rate)`` (the derivative applied to the rate itself, which lets the
        product rule of :meth:`dot_mul` collapse: φ̇ × φ̇ = 0, φ̇·φ̇ = |φ̇|²). With s = ρ̇, q = φ̇,
        collecting the terms of J y_v + B y_ω − (J̇ s + Ḃ q) and J y_ω − J̇ q per vector:

            top = j y_v + f y_ω + c_p φ + c_r ρ − c_q q − c_s s
                  + φ × (α̇ s − α y_v − k̇_p q) + u × y_ω + q × (k̇_u ρ + (k_u + α) s)
            bottom = j y_ω + c_r φ − c_s q + φ × (α̇ q − α y_ω)

        (k_u, k_p the coefficients of u = k_u ρ + k_p φ; the scalars c_p, c_r, c_q, c_s below)."""
        y0, y1, y2, y3, y4, y5 = y
        s0, s1, s2, q0, q1, q2 = rate
        r0, r1, r2 = self.r
        p0, p1, p2 = self.p
        u0, u1, u2 = self.u
        al, be, b, c, _, dal, dbe, db, dc = self.k
        x, d, j, e, f = self.x, self.d, self.j, self.e, self.f
        # time derivatives of the scalars (as _dot_terms): ḟ(θ) = (f'/θ) θθ̇, θθ̇ = φ·φ̇
        rr = p0 * q0 + p1 * q1 + p2 * q2
        dx = 2.0 * rr
        dal *= rr
        dbe *= rr
        db *= rr
        dc *= rr
        g = -(dbe * x + be * dx)  # dj/dt
        dd = p0 * s0 + p1 * s1 + p2 * s2 + r0 * q0 + r1 * q1 + r2 * q2  # ḋ = φ·ρ̇ + ρ·φ̇
        ku, dku = b * x - 0.5, db * x + b * dx
        dkp = (dbe - 2.0 * db) * d + (be - 2.0 * b) * dd
        de = -2.0 * (dc * d + c * dd)
        df = 2.0 * dd * (c * x - be) + 2.0 * d * (dc * x + c * dx - dbe)
        # the dot products involved (besides φ·φ̇ = rr and φ·ρ̇ + ρ·φ̇ = ḋ)
        pw = p0 * y3 + p1 * y4 + p2 * y5  # φ·y_ω
        sq = s0 * q0 + s1 * q1 + s2 * q2  # ρ̇·φ̇
        qq = q0 * q0 + q1 * q1 + q2 * q2  # |φ̇|²
        # coefficients of φ, ρ, φ̇, ρ̇
        c_r = be * pw - dbe * rr - be * qq
        c_p = (
            be * (p0 * y0 + p1 * y1 + p2 * y2 + r0 * y3 + r1 * y4 + r2 * y5)
            + e * pw
            - dbe * dd
            - 2.0 * be * sq
            - de * rr
            - e * qq
        )
        c_q = be * dd + e * rr + df
        c_s = g + be * rr
        # the vectors crossed: a (with φ, top), h (with q, top), m (with φ, bottom)
        ks = ku + al
        a0, a1, a2 = dal * s0 - al * y0 - dkp * q0, dal * s1 - al * y1 - dkp * q1, dal * s2 - al * y2 - dkp * q2
        h0, h1, h2 = dku * r0 + ks * s0, dku * r1 + ks * s1, dku * r2 + ks * s2
        m0, m1, m2 = dal * q0 - al * y3, dal * q1 - al * y4, dal * q2 - al * y5
        return (
            j * y0
            + f * y3
            + c_p * p0
            + c_r * r0
            - c_q * q0
            - c_s * s0
            + (p1 * a2 - p2 * a1)
            + (u1 * y5 - u2 * y4)
            + (q1 * h2 - q2 * h1),
            j * y1
            + f * y4
            + c_p * p1
            + c_r * r1
            - c_q * q1
            - c_s * s1
            + (p2 * a0 - p0 * a2)
            + (u2 * y3 - u0 * y5)
            + (q2 * h0 - q0 * h2),
            j * y2
            + f * y5
            + c_p * p2
            + c_r * r2
            - c_q * q2
            - c_s * s2
            + (p0 * a1 - p1 * a0)
            + (u0 * y4 - u1 * y3)
            + (q0 * h1 - q1 * h0),
            j * y3 + c_r * p0 - c_s * q0 + (p1 * m2 - p2 * m1),
            j * y4 + c_r * p1 - c_s * q1 + (p2 * m0 - p0 * m2),
            j * y5 + c_r * p2 - c_s * q2 + (p0 * m1 - p1 * m0),
        )

    # ---------------------------------------------------------------------------- matrices

    def matrix(self, out: np.ndarray | None = None) -> np.ndarray:
        """dexp_λ (6, 6), as :func:`dexp`."""
        if out is None:
            out = np.empty((6, 6))
        p0, p1, p2 = self.p
        al, be, b, c = self.k[:4]
        d = self.j
        _put3(
            out[:3, :3],
            d + be * p0 * p0,
            be * p0 * p1,
            be * p0 * p2,
            d + be * p1 * p1,
            be * p1 * p2,
            d + be * p2 * p2,
            -al * p0,
            -al * p1,
            -al * p2,
        )
        out[3:, 3:] = out[:3, :3]
        out[3:, :3] = 0.0
        _B_into(self.r, self.p, self.x, be, b, c, out[:3, 3:])
        return out

    def inverse(self, out: np.ndarray | None = None) -> np.ndarray:
        """dexp_λ⁻¹ (6, 6), as :func:`dexp_inv`."""
        if out is None:
            out = np.empty((6, 6))
        p0, p1, p2 = self.p
        _, be, b, c, g = self.k[:5]
        d = 1.0 - g * self.x
        Ji = out[:3, :3]
        _put3(
            Ji,
            d + g * p0 * p0,
            g * p0 * p1,
            g * p0 * p2,
            d + g * p1 * p1,
            g * p1 * p2,
            d + g * p2 * p2,
            0.5 * p0,
            0.5 * p1,
            0.5 * p2,
        )
        out[3:, 3:] = Ji
        out[3:, :3] = 0.0
        B = _B_into(self.r, self.p, self.x, be, b, c, np.empty((3, 3)))
        np.matmul(Ji, B @ Ji, out=out[:3, 3:])
        np.negative(out[:3, 3:], out=out[:3, 3:])
        return out

    def dot_matrix(self, lam_dot, out: np.ndarray | None = None) -> np.ndarray:
        """d/dt dexp_λ (6, 6) for the rate λ̇ (6 floats), as :func:`dexp_dot`."""
        if out is None:
            out = np.empty((6, 6))
        s0, s1, s2, q0, q1, q2, al, be, dal, dbe, g, ku, dku, kp, dkp, de, df = self._dot_terms(lam_dot)
        r0, r1, r2 = self.r
        p0, p1, p2 = self.p
        e = self.e
        _put3(
            out[:3, :3],
            dbe * p0 * p0 + 2.0 * be * p0 * q0 + g,
            dbe * p0 * p1 + be * (p0 * q1 + q0 * p1),
            dbe * p0 * p2 + be * (p0 * q2 + q0 * p2),
            dbe * p1 * p1 + 2.0 * be * p1 * q1 + g,
            dbe * p1 * p2 + be * (p1 * q2 + q1 * p2),
            dbe * p2 * p2 + 2.0 * be * p2 * q2 + g,
            -(dal * p0 + al * q0),
            -(dal * p1 + al * q1),
            -(dal * p2 + al * q2),
        )
        out[3:, 3:] = out[:3, :3]
        out[3:, :3] = 0.0
        R, P, S, Q = self.r, self.p, (s0, s1, s2), (q0, q1, q2)

        def entry(i: int, j: int) -> float:
            return (
                dbe * (R[i] * P[j] + P[i] * R[j])
                + be * (S[i] * P[j] + P[i] * S[j] + R[i] * Q[j] + Q[i] * R[j])
                + de * P[i] * P[j]
                + e * (Q[i] * P[j] + P[i] * Q[j])
            )

        _put3(
            out[:3, 3:],
            entry(0, 0) + df,
            entry(0, 1),
            entry(0, 2),
            entry(1, 1) + df,
            entry(1, 2),
            entry(2, 2) + df,
            dku * r0 + ku * s0 + dkp * p0 + kp * q0,
            dku * r1 + ku * s1 + dkp * p1 + kp * q1,
            dku * r2 + ku * s2 + dkp * p2 + kp * q2,
        )
        return out


def dexp_and_dot(
    lam: np.ndarray, lam_dot: np.ndarray, out: np.ndarray | None = None, out_dot: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(:func:`dexp` (λ), :func:`dexp_dot` (λ, λ̇)) from one shared coefficient evaluation."""
    jac = DexpSE3(lam)
    return jac.matrix(out), jac.dot_matrix([float(v) for v in lam_dot], out_dot)


# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------


def rotation_error_world(R_d: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Orientation error e_R = log(R_d Rᵀ) (3,) [rad], world axes (MATH.md §2): the world-frame
    rotation vector that takes R to R_d."""
    return so3_log(R_d @ R.T)


def quat_to_matrix(q: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Unit quaternion (w, x, y, z) → rotation matrix (3, 3). The input is normalised first."""
    if out is None:
        out = np.empty((3, 3))
    w, x, y, z = (float(v) for v in q)
    n = math.sqrt(w * w + x * x + y * y + z * z)
    w, x, y, z = w / n, x / n, y / n, z / n
    out[0, 0] = 1.0 - 2.0 * (y * y + z * z)
    out[0, 1] = 2.0 * (x * y - w * z)
    out[0, 2] = 2.0 * (x * z + w * y)
    out[1, 0] = 2.0 * (x * y + w * z)
    out[1, 1] = 1.0 - 2.0 * (x * x + z * z)
    out[1, 2] = 2.0 * (y * z - w * x)
    out[2, 0] = 2.0 * (x * z - w * y)
    out[2, 1] = 2.0 * (y * z + w * x)
    out[2, 2] = 1.0 - 2.0 * (x * x + y * y)
    return out


def matrix_to_quat(R: np.ndarray) -> np.ndarray:
    """Rotation matrix (3, 3) → unit quaternion (w, x, y, z) with w ≥ 0 (Shepperd's method)."""
    tr = R[0, 0] + R[1, 1] + R[2, 2]
    diag = (tr, R[0, 0], R[1, 1], R[2, 2])
    k = int(np.argmax(diag))
    if k == 0:
        s = 2.0 * math.sqrt(1.0 + tr)
        q = np.array([0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s])
    elif k == 1:
        s = 2.0 * math.sqrt(1.0 + R[0, 0] - R[1, 1] - R[2, 2])
        q = np.array([(R[2, 1] - R[1, 2]) / s, 0.25 * s, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s])
    elif k == 2:
        s = 2.0 * math.sqrt(1.0 + R[1, 1] - R[0, 0] - R[2, 2])
        q = np.array([(R[0, 2] - R[2, 0]) / s, (R[0, 1] + R[1, 0]) / s, 0.25 * s, (R[1, 2] + R[2, 1]) / s])
    else:
        s = 2.0 * math.sqrt(1.0 + R[2, 2] - R[0, 0] - R[1, 1])
        q = np.array([(R[1, 0] - R[0, 1]) / s, (R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, 0.25 * s])
    if q[0] < 0.0:
        q = -q
    return q / np.linalg.norm(q)


def mat2quat_batch(R: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Rotation matrices (n, 9), row-major, → unit quaternions (n, 4) (w, x, y, z): MuJoCo's
    ``mju_mat2Quat`` row by row, vectorised (same branch on the largest of w, x, y, z, same formulas,
    no sign normalisation, then normalised). Equal to ``mju_mat2Quat`` to round-off (tested); used
    to derive the telemetry's quaternion channels after a run."""
    R = np.asarray(R, dtype=float)
    n = R.shape[0]
    q = np.empty((n, 4)) if out is None else out
    m0, m1, m2, m3, m4, m5, m6, m7, m8 = (R[:, k] for k in range(9))
    b0 = m0 + m4 + m8 > 0
    b1 = ~b0 & (m0 > m4) & (m0 > m8)
    b2 = ~b0 & ~b1 & (m4 > m8)
    b3 = ~(b0 | b1 | b2)
    with np.errstate(invalid="ignore", divide="ignore"):  # each branch is evaluated on every row
        w = 0.5 * np.sqrt(np.maximum(1 + m0 + m4 + m8, 0.0))
        x = 0.5 * np.sqrt(np.maximum(1 + m0 - m4 - m8, 0.0))
        y = 0.5 * np.sqrt(np.maximum(1 - m0 + m4 - m8, 0.0))
        z = 0.5 * np.sqrt(np.maximum(1 - m0 - m4 + m8, 0.0))
        for b, lead, col, terms in (
            (b0, w, 0, ((1, m7 - m5), (2, m2 - m6), (3, m3 - m1))),
            (b1, x, 1, ((0, m7 - m5), (2, m1 + m3), (3, m2 + m6))),
            (b2, y, 2, ((0, m2 - m6), (1, m1 + m3), (3, m5 + m7))),
            (b3, z, 3, ((0, m3 - m1), (1, m2 + m6), (2, m5 + m7))),
        ):
            if not b.any():
                continue
            s = lead[b]
            q[b, col] = s
            for j, num in terms:
                q[b, j] = 0.25 * num[b] / s
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q
