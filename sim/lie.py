"""SO(3) / SE(3) for the planners and the SE(3) impedance controller (docs/theory/lie.md).

Conventions (stated once, used everywhere in dockbench)
-------------------------------------------------------
* Twists are ``[v; ω]`` (linear part FIRST, Pinocchio's order), wrenches are ``[f; n]``.
* Poses are 4×4 homogeneous matrices ``T = [[R, p], [0, 1]]``; ``T_a_b`` maps coordinates in frame b
  to frame a.
* ``so3_hat(ω) = ω^`` with ``ω^ x = ω × x``; ``se3_hat([v; ω]) = [[ω^, v], [0, 0]]`` (4×4).
* ``se3_exp`` / ``se3_log`` are the group exponential and its principal inverse (rotation angle in
  [0, π]): Pinocchio's ``exp6`` / ``log6`` (and ``exp3`` / ``log3`` on SO(3)).
* ``Ad(T) = [[R, p^ R], [0, R]]`` maps a twist expressed in frame b to frame a (``T = T_a_b``),
  Pinocchio's ``SE3.action``. Wrenches transform with ``Ad(T)⁻ᵀ``.
* ``ad(ξ) = [[ω^, v^], [0, ω^]]`` is the Lie bracket ``ad_ξ η = [ξ, η]`` (Pinocchio's ``Motion.action``).

dexp: the right Jacobian of SE(3)
---------------------------------
For ``T̃(t) = exp(λ(t))`` the BODY twist ``Ṽ = vee(T̃⁻¹ dT̃/dt)`` is ``Ṽ = dexp_λ λ̇`` with, for
λ = [ρ; φ] and θ = |φ| (Barfoot, *State Estimation for Robotics*, eq. 7.86, ``J_r(ρ, φ) = J_l(−ρ, −φ)``)::

    dexp_λ = [[J_r3(φ), B(ρ, φ)], [0, J_r3(φ)]]
    J_r3   = I − α φ^ + β φ^²                                    J_r3⁻¹ = I + ½ φ^ + γ φ^²
    B      = −½ ρ^ + β (φ^ρ^ + ρ^φ^ − φ^ρ^φ^) + b (3 φ^ρ^φ^ − φ^φ^ρ^ − ρ^φ^φ^) + c (φ^ρ^φ^φ^ + φ^φ^ρ^φ^)
    dexp_λ⁻¹ = [[J_r3⁻¹, −J_r3⁻¹ B J_r3⁻¹], [0, J_r3⁻¹]]
    α = (1 − cos θ)/θ²,  β = (θ − sin θ)/θ³,  b = (θ² + 2 cos θ − 2)/(2θ⁴),
    c = (2θ − 3 sin θ + θ cos θ)/(2θ⁵),  γ = (1 − (θ/2) cot(θ/2))/θ².

Pinocchio's ``Jexp6`` is the same map but truncates its small-angle series (≈ 4e-8 relative at
θ = 1e-3), so dexp, its inverse and its time derivative :func:`dexp_dot` (which Pinocchio lacks) are
written here. The coefficients are even in θ: a series in x = θ² below θ = 1.5 with as many terms as x
needs, at most 14 (truncation below 1e-17 relative), the closed forms above (:func:`coefficients`).
d/dt f(θ) = (f'(θ)/θ)(φ·φ̇). :func:`dexp` and :func:`dexp_dot` evaluate dexp_λ as the polynomial in
A = ad_λ that the block form equals, dexp_λ = I − c₁A + c₂A² − c₃A³ + c₄A⁴ with c₁ = 2α − ½ + ½θ²β,
c₂ = ½(5β − α), c₃ = ½β − b, c₄ = c (Barfoot eq. 7.85; docs/theory/lie.md).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pinocchio as pin

__all__ = [
    "Ad",
    "Ad_inv",
    "add_mul3",
    "Coefficients",
    "ad",
    "ad_powers",
    "coefficients",
    "dexp",
    "dexp_dot",
    "dexp_inv",
    "mat2quat_batch",
    "matrix_to_quat",
    "matmul3",
    "mul3",
    "mul3t",
    "quat_to_matrix",
    "rotation_error_world",
    "se3_exp",
    "se3_hat",
    "se3_inv",
    "se3_log",
    "se3_vee",
    "so3_exp",
    "so3_hat",
    "so3_left_jacobian",
    "so3_left_jacobian_inv",
    "so3_log",
    "so3_right_jacobian",
    "so3_right_jacobian_inv",
    "so3_vee",
]

# ------------------------------------------------------------------------------------------ hat / vee


def so3_hat(w: np.ndarray) -> np.ndarray:
    """(3,) → (3, 3) skew matrix ω^ with ω^ x = ω × x."""
    x, y, z = np.asarray(w, dtype=float).tolist()
    return np.array(((0.0, -z, y), (z, 0.0, -x), (-y, x, 0.0)))


def cross3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × b of two 3-vectors: the same products and differences as ``np.cross`` (equal bit for bit), without
    its axis handling (≈ 1 µs instead of ≈ 20 µs)."""
    a0, a1, a2 = a.tolist()
    b0, b1, b2 = b.tolist()
    return np.array((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0))


def norm3(v: np.ndarray) -> float:
    """‖v‖ of a 3-vector as √(v₀² + v₁² + v₂²), summed in that order: the compiled kernels' operations, on
    every CPU (``np.linalg.norm`` and ``v @ v`` call BLAS, whose kernels may sum in another order or fuse)."""
    v0, v1, v2 = v.tolist()
    return math.sqrt(v0 * v0 + v1 * v1 + v2 * v2)


def mul3(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A x for a (3, 3) A, summed column by column, (A₀ x₀ + A₁ x₁) + A₂ x₂ (Aⱼ the columns): element-wise
    numpy operations in the compiled kernels' order, so the floats are theirs bit for bit on every CPU
    (``A @ x`` calls BLAS, whose kernels may sum in another order or fuse). x (3,), or (k, 3) rows each
    multiplied."""
    P = A * x[..., None, :]  # Pᵢⱼ = Aᵢⱼ xⱼ
    return P[..., 0] + P[..., 1] + P[..., 2]


def mul3t(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Aᵀ x for a (3, 3) A, (A⁰ x₀ + A¹ x₁) + A² x₂ with Aⁱ the rows (see :func:`mul3`); x (3,) or (k, 3)."""
    P = A.T * x[..., None, :]  # Pᵢⱼ = Aⱼᵢ xⱼ
    return P[..., 0] + P[..., 1] + P[..., 2]


def add_mul3(p: np.ndarray, A: np.ndarray, x: np.ndarray) -> np.ndarray:
    """p + A x accumulated term by term, ((p + A₀ x₀) + A₁ x₁) + A₂ x₂ (see :func:`mul3`)."""
    P = A * x
    return p + P[:, 0] + P[:, 1] + P[:, 2]


def matmul3(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A B of (3, 3) matrices, (A B)ᵢⱼ = (Aᵢ₀ B₀ⱼ + Aᵢ₁ B₁ⱼ) + Aᵢ₂ B₂ⱼ (see :func:`mul3`)."""
    P = A[:, :, None] * B  # Pᵢₖⱼ = Aᵢₖ Bₖⱼ
    return P[:, 0] + P[:, 1] + P[:, 2]


def so3_vee(W: np.ndarray) -> np.ndarray:
    """(3, 3) skew → (3,), from the antisymmetric part ½(W − Wᵀ)."""
    return 0.5 * np.array((W[2, 1] - W[1, 2], W[0, 2] - W[2, 0], W[1, 0] - W[0, 1]))


def se3_hat(xi: np.ndarray) -> np.ndarray:
    """(6,) twist [v; ω] → (4, 4) matrix [[ω^, v], [0, 0]]."""
    X = np.zeros((4, 4))
    X[:3, :3] = so3_hat(xi[3:])
    X[:3, 3] = xi[:3]
    return X


def se3_vee(X: np.ndarray) -> np.ndarray:
    """(4, 4) se(3) matrix → (6,) twist [v; ω]."""
    return np.concatenate((X[:3, 3], so3_vee(X[:3, :3])))


# ------------------------------------------------------------------------------------------ exp / log


def so3_exp(phi: np.ndarray) -> np.ndarray:
    """exp(φ^) (3, 3) = cos θ I + (sin θ/θ) φ^ + ((1 − cos θ)/θ²) φφᵀ, θ = |φ| [rad] (Pinocchio's exp3)."""
    return np.array(pin.exp3(np.asarray(phi, dtype=float)))


def so3_log(R: np.ndarray) -> np.ndarray:
    """Principal logarithm φ (3,) of a rotation matrix, |φ| = θ ∈ [0, π] (Pinocchio's log3)."""
    return np.array(pin.log3(np.asarray(R, dtype=float)))


def se3_exp(xi: np.ndarray) -> np.ndarray:
    """exp of a twist ξ = [v; ω] → T (4, 4) = [[exp(ω^), J_l3(ω) v], [0, 1]] (Pinocchio's exp6)."""
    return pin.exp6(np.asarray(xi, dtype=float)).homogeneous


def se3_log(T: np.ndarray) -> np.ndarray:
    """Principal log of a pose T (4, 4) → ξ = [J_l3(φ)⁻¹ p; φ] (6,), φ = log R (Pinocchio's log6)."""
    return np.array(pin.log6(np.asarray(T, dtype=float)).vector)


def se3_inv(T: np.ndarray) -> np.ndarray:
    """T⁻¹ = [[Rᵀ, −Rᵀ p], [0, 1]]."""
    Ti = T.T.copy()  # [[Rᵀ, 0], [pᵀ, 1]]
    Ti[:3, 3] = -(T[:3, :3].T @ T[:3, 3])
    Ti[3, :3] = 0.0
    return Ti


def rotation_error_world(R_d: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Orientation error e_R = log(R_d Rᵀ) (3,) [rad], world axes: the world-frame rotation vector that
    takes R to R_d."""
    return so3_log(R_d @ R.T)


# ------------------------------------------------------------------------------------------ adjoints


def Ad(T: np.ndarray) -> np.ndarray:
    """Adjoint (6, 6) of T_a_b, twist in b → twist in a: [[R, p^ R], [0, R]]."""
    R = T[:3, :3]
    A = np.zeros((6, 6))
    A[:3, :3] = A[3:, 3:] = R
    A[:3, 3:] = so3_hat(T[:3, 3]) @ R
    return A


def Ad_inv(T: np.ndarray) -> np.ndarray:
    """Ad(T)⁻¹ = Ad(T⁻¹) = [[Rᵀ, −Rᵀ p^], [0, Rᵀ]] (6, 6)."""
    Rt = T[:3, :3].T
    A = np.zeros((6, 6))
    A[:3, :3] = A[3:, 3:] = Rt
    A[:3, 3:] = -Rt @ so3_hat(T[:3, 3])
    return A


def _ad_basis() -> np.ndarray:
    """(6, 6, 6) B with ad(ξ) = B ξ: Bᵢⱼₖ = ∂ ad(ξ)ᵢⱼ / ∂ξₖ ∈ {−1, 0, 1} (ad is linear in ξ)."""
    B = np.zeros((6, 6, 6))
    for i, j, k, s in ((0, 1, 5, -1), (0, 2, 4, 1), (1, 0, 5, 1), (1, 2, 3, -1), (2, 0, 4, -1), (2, 1, 3, 1),  # ω^
                       (0, 4, 2, -1), (0, 5, 1, 1), (1, 3, 2, 1), (1, 5, 0, -1), (2, 3, 1, -1), (2, 4, 0, 1)):  # v^
        B[i, j, k] = s
        if j < 3:  # ω^ again in the lower-right block
            B[i + 3, j + 3, k] = s
    return B


#: ad's coefficient tensor (:func:`_ad_basis`)
_AD_BASIS = _ad_basis()


def ad(xi: np.ndarray) -> np.ndarray:
    """Lie bracket matrix (6, 6) of a twist ξ = [v; ω]: [[ω^, v^], [0, ω^]]. Evaluated as the linear map
    ad(ξ) = B ξ (one numpy call): each entry is one ±ξₖ plus products with exact zeros, so for a finite ξ
    the floats are those of the entries written out."""
    return _AD_BASIS @ np.asarray(xi, dtype=float)


# ------------------------------------------------------------------------------------------ coefficients


class Coefficients(NamedTuple):
    """The Jacobians' coefficient functions of θ = |φ| (module docstring) and their derivatives f'(θ)/θ."""

    alpha: float
    beta: float
    b: float
    c: float
    gamma: float
    d_alpha: float
    d_beta: float
    d_b: float
    d_c: float


#: θ² below which the series in θ² are used (θ < 1.5), and their number of terms
_SERIES_X = 1.5**2
_NTERMS = 14
_f = math.factorial
#: Taylor coefficients of α, β, b, c in x = θ² (the x^k terms, k = 0 … 13)
_SERIES = (
    tuple((-1) ** k / _f(2 * k + 2) for k in range(_NTERMS)),  # α
    tuple((-1) ** k / _f(2 * k + 3) for k in range(_NTERMS)),  # β
    tuple((-1) ** k / _f(2 * k + 4) for k in range(_NTERMS)),  # b
    tuple((-1) ** k * (k + 1) / _f(2 * k + 5) for k in range(_NTERMS)),  # c
)
#: γ = Σ_{n≥1} |B_2n| θ^(2n−2)/(2n)! (Bernoulli numbers; converges for θ < 2π)
_BERNOULLI_ABS = (1 / 6, 1 / 30, 1 / 42, 1 / 30, 5 / 66, 691 / 2730, 7 / 6, 3617 / 510, 43867 / 798,
                  174611 / 330, 854513 / 138, 236364091 / 2730, 8553103 / 6, 23749461029 / 870)
_GAMMA = tuple(_BERNOULLI_ABS[n - 1] / _f(2 * n) for n in range(1, _NTERMS + 1))


#: the series of f'(θ)/θ for f = α, β, b, c: f = Σ c_k θ^(2k) gives f'(θ)/θ = Σ_{k≥1} 2k c_k x^(k−1)
_SERIES_D = tuple(tuple(2.0 * k * c[k] for k in range(1, _NTERMS)) for c in _SERIES)


def _terms_limits() -> tuple[float, ...]:
    """x_n (n = 1 … 13): below x_n the first n terms of every series suffice. The first omitted term
    |c_n| xⁿ is then at most 5e-18 |c_0|, and below these limits each later term is less than 1/25 of the one before
    (factorials; γ's Bernoulli terms by about x/(2π)²), so the tail stays below 1e-17 relative: the bound of
    the full 14-term sums."""
    limits = []
    for n in range(1, _NTERMS):
        x_n = min((5e-18 * abs(c[0]) / abs(c[n])) ** (1.0 / n) for c in (*_SERIES, *_SERIES_D, _GAMMA) if n < len(c))
        limits.append(x_n)
    return tuple(limits)


#: x below which n = 1 … 13 terms of each series are enough (:func:`_terms_limits`); 14 terms above
_TERMS_X = _terms_limits()


def _horner(coeffs: tuple[float, ...], x: float, n: int) -> float:
    """Σ_{k<n} coeffs[k] x^k (Horner's rule)."""
    acc = 0.0
    for c in reversed(coeffs[:n]):
        acc = acc * x + c
    return acc


def coefficients(x: float) -> Coefficients:
    """The coefficient functions at x = θ² (series below θ = 1.5, with as many terms as x needs; closed
    forms above)."""
    if x < _SERIES_X:
        n = next((i + 1 for i, lim in enumerate(_TERMS_X) if x < lim), _NTERMS)
        al, be, b, c = (_horner(s, x, n) for s in _SERIES)
        dal, dbe, db, dc = (_horner(s, x, n) for s in _SERIES_D)
        return Coefficients(al, be, b, c, _horner(_GAMMA, x, n), dal, dbe, db, dc)
    th = math.sqrt(x)
    s, co = math.sin(th), math.cos(th)
    al, be = (1.0 - co) / x, (th - s) / (x * th)
    b, c = (1.0 - 2.0 * al) / (2.0 * x), (3.0 * be - al) / (2.0 * x)
    half = 0.5 * th
    gamma = (1.0 - half * math.cos(half) / math.sin(half)) / x
    dal = (s / th - 2.0 * al) / x
    dbe = (al - 3.0 * be) / x
    db = -(dal + 2.0 * b) / x
    dc = (0.5 * (3.0 * dbe - dal) - 2.0 * c) / x
    return Coefficients(al, be, b, c, gamma, dal, dbe, db, dc)


# ------------------------------------------------------------------------------------------ SO(3) Jacobians

_I3 = np.eye(3)


def so3_left_jacobian(phi: np.ndarray) -> np.ndarray:
    """J_l3(φ) = I + α φ^ + β φ^² (exp(φ + δ) ≈ exp(J_l3 δ) exp(φ): world-side perturbation)."""
    k, P = coefficients(float(phi @ phi)), so3_hat(phi)
    return _I3 + k.alpha * P + k.beta * (P @ P)


def so3_left_jacobian_inv(phi: np.ndarray) -> np.ndarray:
    """J_l3(φ)⁻¹ = I − ½ φ^ + γ φ^² (finite for θ < 2π)."""
    k, P = coefficients(float(phi @ phi)), so3_hat(phi)
    return _I3 - 0.5 * P + k.gamma * (P @ P)


def so3_right_jacobian(phi: np.ndarray) -> np.ndarray:
    """J_r3(φ) = J_l3(−φ) = I − α φ^ + β φ^²: R(t) = exp(φ(t)) has body rate ω = J_r3(φ) φ̇."""
    return so3_left_jacobian(-phi)


def so3_right_jacobian_inv(phi: np.ndarray) -> np.ndarray:
    """J_r3(φ)⁻¹ = I + ½ φ^ + γ φ^²."""
    return so3_left_jacobian_inv(-phi)


# ------------------------------------------------------------------------------------------ SE(3) dexp

# With d = φ·ρ, x = θ² and a^b^ = b aᵀ − (a·b) I, φ^ρ^φ^ = −d φ^, φ^ρ^φ^φ^ = φ^φ^ρ^φ^ = −d φ^², the blocks
# of the module docstring are rank-one terms (docs/theory/lie.md):
#     J_r3 = (1 − β x) I − α φ^ + β φ φᵀ
#     B    = u^ + β (ρ φᵀ + φ ρᵀ) + e φ φᵀ + f I,   u = (b x − ½) ρ + (β − 2b) d φ,  e = −2 c d,  f = 2 d (c x − β)


def _outer(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a bᵀ (3, 3) (one broadcast product: ``np.outer``'s values, without its reshaping calls)."""
    return a[:, None] * b


def _outer_sym(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a bᵀ + b aᵀ (3, 3)."""
    ab = a[:, None] * b
    return ab + ab.T


def _blocks_6(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """[[A, B], [0, A]] (6, 6)."""
    out = np.zeros((6, 6))
    out[:3, :3] = out[3:, 3:] = A
    out[:3, 3:] = B
    return out


def _J_r3_and_B(lam: np.ndarray, k: Coefficients) -> tuple[np.ndarray, np.ndarray]:
    """The blocks J_r3(φ) and B(ρ, φ) of dexp_λ (rank-one forms above)."""
    rho, phi = lam[:3], lam[3:]
    x, d = float(phi @ phi), float(phi @ rho)
    PP = _outer(phi, phi)
    J3 = (1.0 - k.beta * x) * _I3 - k.alpha * so3_hat(phi) + k.beta * PP
    u = (k.b * x - 0.5) * rho + (k.beta - 2.0 * k.b) * d * phi
    e, f = -2.0 * k.c * d, 2.0 * d * (k.c * x - k.beta)
    B = so3_hat(u) + k.beta * _outer_sym(rho, phi) + e * PP + f * _I3
    return J3, B


_I6 = np.eye(6)


def _ad_coefficients(k: Coefficients, x: float) -> tuple[float, float, float, float]:
    """(c₁, c₂, c₃, c₄) of dexp_λ = I − c₁ A + c₂ A² − c₃ A³ + c₄ A⁴ (A = ad_λ) from α, β, b, c at x = θ²:
    c₁ = 2α − ½ + ½ x β, c₂ = ½ (5β − α), c₃ = ½ β − b, c₄ = c (docs/theory/lie.md)."""
    return 2.0 * k.alpha - 0.5 + 0.5 * x * k.beta, 0.5 * (5.0 * k.beta - k.alpha), 0.5 * k.beta - k.b, k.c


def ad_powers(lam: np.ndarray) -> np.ndarray:
    """(A, A², A³, A⁴) of A = ad_λ, stacked (4, 6, 6): what :func:`dexp` and :func:`dexp_dot` are built from
    (pass it to both when they share λ)."""
    P = np.empty((4, 6, 6))
    P[0] = ad(lam)
    for i in range(1, 4):
        np.matmul(P[i - 1], P[0], out=P[i])  # Aⁱ⁺¹ = Aⁱ A
    return P


def dexp(lam: np.ndarray, k: Coefficients | None = None, powers: np.ndarray | None = None) -> np.ndarray:
    """SE(3) right Jacobian dexp_λ (6, 6): the body twist of exp(λ(t)) is Ṽ = dexp_λ λ̇; λ = [ρ; φ]
    exponential coordinates [m; rad]. Evaluated as the polynomial in A = ad_λ that its series
    Σ (−A)ᵏ/(k + 1)! reduces to (ad_λ has the eigenvalues 0, ±iθ: docs/theory/lie.md),
    dexp_λ = I − c₁ A + c₂ A² − c₃ A³ + c₄ A⁴ (one product of the coefficient row with the stacked powers);
    it equals the block form [[J_r3, B], [0, J_r3]] of the module docstring. ``k``: :func:`coefficients` at
    θ² = |φ|² when the caller already has them (they are even in θ: those of −λ serve too); ``powers``:
    :func:`ad_powers` of λ when the caller already has them."""
    x = float(lam[3:] @ lam[3:])
    if k is None:
        k = coefficients(x)
    c1, c2, c3, c4 = _ad_coefficients(k, x)
    P = ad_powers(lam) if powers is None else powers
    return _I6 + (np.array((-c1, c2, -c3, c4)) @ P.reshape(4, 36)).reshape(6, 6)


def dexp_inv(lam: np.ndarray) -> np.ndarray:
    """dexp_λ⁻¹ (6, 6) = [[J_r3⁻¹, −J_r3⁻¹ B J_r3⁻¹], [0, J_r3⁻¹]] (closed form, finite for |φ| < 2π):
    λ̇ = dexp_λ⁻¹ Ṽ. J_r3⁻¹ = I + ½ φ^ + γ φ^² = (1 − γ x) I + ½ φ^ + γ φ φᵀ."""
    phi = lam[3:]
    k = coefficients(float(phi @ phi))
    _, B = _J_r3_and_B(lam, k)
    Ji = (1.0 - k.gamma * float(phi @ phi)) * _I3 + 0.5 * so3_hat(phi) + k.gamma * _outer(phi, phi)
    return _blocks_6(Ji, -Ji @ B @ Ji)


def dexp_dot(
    lam: np.ndarray, lam_dot: np.ndarray, k: Coefficients | None = None, powers: np.ndarray | None = None
) -> np.ndarray:
    """Time derivative d/dt dexp_λ(t) (6, 6) at λ with rate λ̇ (both [ρ; φ]): the product rule on the
    polynomial of :func:`dexp`, d/dt Aᵏ = (d/dt Aᵏ⁻¹) A + Aᵏ⁻¹ Ȧ with Ȧ = ad_λ̇ (ad is linear), and
    d/dt f(θ) = (f'(θ)/θ)(φ·φ̇) for each coefficient (smooth at θ = 0), ẋ = 2 φ·φ̇:
    d/dt dexp_λ = Σₖ ċₖ Aᵏ + cₖ (d/dt Aᵏ) with the signs of :func:`dexp`. Used for
    λ̈ = dexp_λ⁻¹ (dṼ/dt − (d/dt dexp_λ) λ̇). ``k`` and ``powers`` as for :func:`dexp`."""
    phi = lam[3:]
    x = float(phi @ phi)
    if k is None:
        k = coefficients(x)
    w = float(phi @ lam_dot[3:])  # θ θ̇
    x_dot = 2.0 * w
    al_dot, be_dot, b_dot, c_dot = k.d_alpha * w, k.d_beta * w, k.d_b * w, k.d_c * w
    c1, c2, c3, c4 = _ad_coefficients(k, x)
    c1_dot = 2.0 * al_dot + 0.5 * (x_dot * k.beta + x * be_dot)  # d/dt (2α − ½ + ½ x β)
    c2_dot = 0.5 * (5.0 * be_dot - al_dot)
    c3_dot = 0.5 * be_dot - b_dot
    P = ad_powers(lam) if powers is None else powers
    D = np.empty((4, 6, 6))  # d/dt Aᵏ, k = 1 … 4
    D[0] = ad(lam_dot)  # Ȧ
    PA = P[:3] @ D[0]  # Aᵏ⁻¹ Ȧ for k = 2, 3, 4
    for i in range(1, 4):
        np.matmul(D[i - 1], P[0], out=D[i])
        D[i] += PA[i - 1]  # d/dt Aᵏ = (d/dt Aᵏ⁻¹) A + Aᵏ⁻¹ Ȧ
    coef = np.array((-c1_dot, c2_dot, -c3_dot, c_dot, -c1, c2, -c3, c4))
    return (coef @ np.concatenate((P.reshape(4, 36), D.reshape(4, 36)))).reshape(6, 6)


# ------------------------------------------------------------------------------------------ quaternions


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """Quaternion (w, x, y, z), normalised first → rotation matrix (3, 3)."""
    w, x, y, z = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array((
        (1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - w * z), 2.0 * (x * z + w * y)),
        (2.0 * (x * y + w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - w * x)),
        (2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y)),
    ))


def matrix_to_quat(R: np.ndarray) -> np.ndarray:
    """Rotation matrix (3, 3) → unit quaternion (w, x, y, z) with w ≥ 0 (Pinocchio's Quaternion)."""
    x, y, z, w = pin.Quaternion(np.asarray(R, dtype=float)).normalized().coeffs()
    q = np.array((w, x, y, z))
    return -q if q[0] < 0.0 else q


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
