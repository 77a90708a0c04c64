"""Singularity avoidance: the gradient of the manipulability w = sqrt(det(J Jᵀ)) from the snapshot's J alone
(docs/theory/hqp.md, "Levels"; the HQP's level-2 term k_sa ∇w(q) when w < w_th, :mod:`controllers.hqp`).

∇w is ANALYTIC from the snapshot's J alone (no Pinocchio call): for a serial chain of revolute
joints with the LWA Jacobian at the EE, columns J_k = [Jv_k; Jω_k],
    ∂J_k/∂q_i = [Jω_i × Jv_k; Jω_i × Jω_k]   (i < k),    [Jω_k × Jv_i; 0]   (i ≥ k),
and ∂w/∂q_i = w tr(J⁺ ∂J/∂q_i), J⁺ = Jᵀ(J Jᵀ)⁻¹ (exact; checked against finite differences of
Pinocchio in tests/paper/test_hqp.py). The HQP computes it only when w < w_th. It is a handful of BLAS
calls (:class:`ManipulabilityGradient`: the column-wise cross products through constant selection
matrices, the running sums over the joints as triangular 0/1 products); the compiled HQP kernel
(controllers/_hqp_kernel.c) ports it.
"""

from __future__ import annotations

import numpy as np
from dockbench.controllers.linalg import solve_spd


def manipulability_gradient(J: np.ndarray, w: float, out: np.ndarray | None = None) -> np.ndarray:
    """∇w(q) (nv,) of w = sqrt(det(J Jᵀ)) from the LWA EE Jacobian alone (serial revolute chain).

    ∂w/∂q_i = w tr(J⁺ ∂J/∂q_i) = w Σ_k P_k · ∂J_k/∂q_i  (P_k = [Pv_k; Pω_k] row k of J⁺), with
    ∂J_k/∂q_i = [Jω_i × Jv_k; Jω_i × Jω_k] for i < k and [Jω_k × Jv_i; 0] for i ≥ k. By the scalar
    triple product the two cases are
    i < k:  Jω_i · U_k,  U_k = Jv_k × Pv_k + Jω_k × Pω_k;   i ≥ k:  Jv_i · C_k,  C_k = Pv_k × Jω_k,
    so ∂w/∂q_i = w (Jω_i · Σ_{k>i} U_k + Jv_i · Σ_{k≤i} C_k): two running sums over the joints
    (evaluated by :class:`ManipulabilityGradient`).
    """
    out = np.empty(J.shape[1]) if out is None else out
    np.multiply(ManipulabilityGradient(J.shape[1])(J), w, out=out)
    return out


class ManipulabilityGradient:
    """Preallocated evaluator of ∇w / w (:func:`manipulability_gradient`) in a few BLAS/LAPACK calls.

    P = (J Jᵀ)⁻¹ J = (J⁺)ᵀ (``dposv``), rows Pv, Pω. Per joint column, a × b = a[r1] ∘ b[r2] − a[r2] ∘ b[r1]
    with the row rotations r1 = (1, 2, 0), r2 = (2, 0, 1), so component c of C_k = Pv_k × Jω_k is a sum
    of 2 products (an entry of J times an entry of P) and that of U_k = Jv_k × Pv_k + Jω_k × Pω_k a sum of
    4. Constant 0/±1 selection matrices pick the signed J factors and the P factors of all 18 products
    (exact: one nonzero per row), and Y = (S_J J) ∘ (S_P P) (18, nv) is laid out as C's rows (3, 2 nv)
    then U's rows (3, 4 nv), so that the running sums over the joints are products with stacked
    triangular 0/1 matrices:
        Σ_{k≤i} C_k = (Y_C [T_≤; T_≤])[:, i],   Σ_{k>i} U_k = (Y_U [T_>; T_>; T_>; T_>])[:, i],
    and ∂w/∂q_i / w = Jv_i · Σ_{k≤i} C_k + Jω_i · Σ_{k>i} U_k (a column-wise dot with J).
    """

    def __init__(self, nv: int):
        self._J = np.zeros((6, nv))
        self._JT = self._J.T
        self._JJt = np.zeros((6, 6))
        jv, jw, pv, pw = (0, 1, 2), (3, 4, 5), (0, 1, 2), (3, 4, 5)  # rows of J and of P
        r1, r2 = (1, 2, 0), (2, 0, 1)
        # (sign, J row, P row) of each product; rows 2c, 2c + 1: C_c; rows 6 + 4c ... 6 + 4c + 3: U_c
        # (C = Pv × Jω: component c = Jω[r2 c] Pv[r1 c] − Jω[r1 c] Pv[r2 c])
        prods = [t for c in range(3) for t in ((1.0, jw[r2[c]], pv[r1[c]]), (-1.0, jw[r1[c]], pv[r2[c]]))] + [
            t
            for c in range(3)
            for t in (
                (1.0, jv[r1[c]], pv[r2[c]]),
                (-1.0, jv[r2[c]], pv[r1[c]]),
                (1.0, jw[r1[c]], pw[r2[c]]),
                (-1.0, jw[r2[c]], pw[r1[c]]),
            )
        ]
        self._sel_J = np.zeros((18, 6))
        self._sel_P = np.zeros((18, 6))
        for r, (sign, j, p) in enumerate(prods):
            self._sel_J[r, j] = sign
            self._sel_P[r, p] = 1.0
        self._L = np.zeros((18, nv))
        self._R = np.zeros((18, nv))
        self._Y_C = self._L[:6].reshape(3, 2 * nv)  # Y = L ∘ R is stored in L
        self._Y_U = self._L[6:].reshape(3, 4 * nv)
        k = np.arange(nv)
        self._T_le2 = np.vstack([(k[:, None] <= k).astype(float)] * 2)  # [k ≤ i]
        self._T_gt4 = np.vstack([(k[:, None] > k).astype(float)] * 4)  # [k > i]
        self._S = np.zeros((6, nv))
        self._S_C, self._S_U = self._S[:3], self._S[3:]
        self._ones6 = np.ones(6)
        self.out = np.zeros(nv)

    def __call__(self, J: np.ndarray) -> np.ndarray:
        """∇w / w (nv,) at the (6, nv) LWA Jacobian ``J`` (a view of :attr:`out`, overwritten next call)."""
        Jc = self._J
        Jc[:] = J
        Jc.dot(self._JT, out=self._JJt)
        P = solve_spd(self._JJt, Jc)  # (J Jᵀ)⁻¹ J, J Jᵀ SPD for full row rank
        L = self._L
        self._sel_J.dot(Jc, out=L)
        self._sel_P.dot(P, out=self._R)
        np.multiply(L, self._R, out=L)
        self._Y_C.dot(self._T_le2, out=self._S_C)
        self._Y_U.dot(self._T_gt4, out=self._S_U)
        np.multiply(Jc, self._S, out=self._S)
        return self._ones6.dot(self._S, out=self.out)
