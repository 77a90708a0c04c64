"""Adaptive compliance: the HQP's stiffness falls with the contact force (Ren & Shan 2026 §3.2;
docs/theory/hqp.md, "Adaptive compliance"; the controller is :mod:`controllers.hqp`).

    α = σ(k_α ‖f_ext‖)            (``sigmoid: plain``, α = ½ in free space → K_r = K_0/2), or
    α = 2σ(k_α ‖f_ext‖) − 1       (``sigmoid: shifted``, α = 0 in free space → K_r = K_0);
    K_r = clip((1 − α) K_0, K_min, K_0),  K_min = ``k_min_ratio`` · K_0  (diagonal, per axis).
    ‖f_ext‖ is the norm of the FORCE part of the external wrench [N] (a wrench norm would add N and
    N·m). Both sigmoid forms give 1 − α ∈ [0, 1], so the clip is K_0 · max(1 − α, k_min_ratio):
    :func:`stiffness_scale` returns α and that factor s.
    D_r = Λ^½ K_r^½ + K_r^½ Λ^½ with symmetric square roots. Λ^½ comes from ONE ``eigh`` of
    Λ⁻¹ = J M⁻¹ Jᵀ = V diag(μ) Vᵀ:  Λ = V diag(1/μ) Vᵀ,  Λ^½ = V diag(μ^−½) Vᵀ (no scipy); with K_r = s K_0,
    (D_r)_ij = √s (Λ^½)_ij (√K_0,i + √K_0,j) (:meth:`controllers.hqp.HQPController._build_task`).
    F_r = −D_r Δν − K_r e_p,   e_p = [x − x_d; log(R R_dᵀ)],   Δν = ν − ν_d.

The compiled HQP kernel (controllers/_hqp_kernel.c) ports :func:`stiffness_scale`.
"""

from __future__ import annotations

import math


def stiffness_scale(force_norm: float, k_alpha: float, plain: bool, k_min_ratio: float) -> tuple[float, float]:
    """(α, s = max(1 − α, k_min_ratio)) at the force norm ‖f_ext‖ [N]: K_r = s K_0. ``plain``: α = σ(k_α ‖f‖),
    else the shifted 2σ(k_α ‖f‖) − 1; σ(x) = 1 / (1 + e^−x)."""
    s = 1.0 / (1.0 + math.exp(-(k_alpha * force_norm)))
    alpha = s if plain else 2.0 * s - 1.0
    return alpha, max(1.0 - alpha, k_min_ratio)
