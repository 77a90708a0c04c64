"""The Python laws' one-call LAPACK solves and decompositions (Khatib's task solve, the SE(3) law's dexp solve,
controllers.linalg.solve_spd of the SE(3) joint space, the momentum observer and the manipulability gradient, the
HQP's eigendecomposition of Λ⁻¹): the same answers as the numpy
calls they replace, the same failure behaviour (fallbacks and errors), on SPD, indefinite and singular inputs.

Tolerances: LU and Cholesky with partial pivoting are backward stable, so the relative forward error of a solve
is at most c·n·κ(A)·ε; two such solves differ by at most twice that. We allow 10·n·κ(A)·ε (n = 6: c ≤ 10 with
headroom). An eigendecomposition is checked by its reconstruction, |V diag(μ) Vᵀ − A| ≤ 10·n·ε·|A|."""

from __future__ import annotations

import numpy as np
import pytest
from dockbench.controllers.hqp import _eigh
from dockbench.controllers.khatib import _solve_task
from dockbench.controllers.linalg import solve_spd
from dockbench.controllers.se3_lie import _solve_lu

EPS = np.finfo(float).eps
N = 6


def _spd(seed: int) -> np.ndarray:
    A = np.random.default_rng(seed).normal(size=(N, 7))
    return A @ A.T


def _solve_bound(A: np.ndarray, x: np.ndarray) -> float:
    return 10.0 * N * float(np.linalg.cond(A)) * EPS * float(np.abs(x).max())


@pytest.mark.parametrize("seed", range(5))
def test_the_cholesky_solves_equal_numpy_on_an_spd_matrix(seed: int) -> None:
    A, b = _spd(seed), np.random.default_rng(100 + seed).normal(size=N)
    want = np.linalg.solve(A, b)
    for got in (_solve_task(A, b), solve_spd(A, b), _solve_lu(A, b)):
        assert np.abs(got - want).max() <= _solve_bound(A, want)


def test_khatib_falls_back_to_least_squares_on_a_singular_or_indefinite_task_matrix() -> None:
    """A zero row of J (Λ⁻¹ singular: a zero pivot) and an indefinite matrix: the Cholesky solve fails and the
    step is numpy's least squares, the same call (equal bit for bit)."""
    b = np.random.default_rng(7).normal(size=N)
    J = np.random.default_rng(8).normal(size=(N, 7))
    J[5] = 0.0
    indefinite = _spd(9) - 50.0 * np.eye(N)
    assert np.linalg.eigvalsh(indefinite).min() < 0.0
    for A in (J @ J.T, indefinite):
        assert np.array_equal(_solve_task(A, b), np.linalg.lstsq(A, b, rcond=None)[0])


def test_the_spd_solve_takes_lu_where_cholesky_fails_and_a_singular_matrix_raises() -> None:
    b = np.random.default_rng(11).normal(size=N)
    indefinite = _spd(12) - 50.0 * np.eye(N)
    want = np.linalg.solve(indefinite, b)
    assert np.abs(solve_spd(indefinite, b) - want).max() <= _solve_bound(indefinite, want)
    singular = np.zeros((N, N))
    with pytest.raises(np.linalg.LinAlgError):
        solve_spd(singular, b)
    with pytest.raises(np.linalg.LinAlgError):
        _solve_lu(singular, b)


@pytest.mark.parametrize("seed", range(5))
def test_the_hqp_eigendecomposition_reconstructs_lambda_inverse_in_numpy_eighs_order(seed: int) -> None:
    A = _spd(seed)
    mu, V = _eigh(A)
    mu_np = np.linalg.eigvalsh(A)
    assert np.all(np.diff(mu) >= 0.0)
    assert np.abs(mu - mu_np).max() <= 10.0 * N * EPS * float(np.abs(A).max())
    assert np.abs((V * mu) @ V.T - A).max() <= 10.0 * N * EPS * float(np.abs(A).max())
    assert np.abs(V.T @ V - np.eye(N)).max() <= 10.0 * N * EPS
