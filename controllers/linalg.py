"""Small dense solves the control laws' Python references share, each one LAPACK call.

:func:`solve_spd` solves A x = b for a matrix that is symmetric positive definite away from singular
configurations (J Jᵀ, a task-space Λ⁻¹): one Cholesky solve (``scipy.linalg.lapack.dposv``, without
``np.linalg``'s wrapper cost), and LU (``np.linalg.solve``) on the steps where the factorisation fails.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg.lapack import dposv


def solve_spd(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x with A x = b (b a vector or a matrix of right-hand sides) for a symmetric A (the Cholesky step reads its
    upper triangle): LAPACK ``dposv`` while A is positive definite, else ``np.linalg.solve`` (LU with partial
    pivoting; a singular A raises ``np.linalg.LinAlgError``)."""
    _, x, info = dposv(A, b)
    return x if info == 0 else np.linalg.solve(A, b)
