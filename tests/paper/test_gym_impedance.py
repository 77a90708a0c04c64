"""docs/theory/gym_impedance.md: the impedance action's gain scales on the HQP law (dockbench/gym.py).

Checks: with damping scales d the law's damping is D_r' = diag(√d) (Λ^½ K_r^½ + K_r^½ Λ^½) diag(√d) with
Λ^½ taken from an eigendecomposition of Λ itself (the law takes it from Λ⁻¹'s), symmetric positive
definite, gravity on and off; on decoupled axes (Λ diagonal) d_i is axis i's damping ratio. Skipped when
gymnasium is not installed.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("gymnasium", reason="the gym extra (gymnasium) is not installed")

from dockbench.controllers.hqp import HQPController  # noqa: E402

from dockbench.gym import DockingEnv, _Gains  # noqa: E402

EPS = np.finfo(float).eps
D_SCALE = np.array([4.0, 0.25, 2.0, 0.5, 1.0, 3.0])
K_SCALE = np.array([0.5, 2.0, 1.0, 0.25, 4.0, 1.0])


def _sqrtm_spd(A: np.ndarray) -> tuple[np.ndarray, float]:
    """A^½ of a symmetric positive definite A and its condition number."""
    w, V = np.linalg.eigh(A)
    return (V * np.sqrt(w)) @ V.T, float(w[-1] / w[0])


@pytest.mark.parametrize("gravity", [True, False])
def test_hqp_damping_scale_is_the_scaled_critical_damping(gravity):
    over = None if gravity else {"sim.gravity": [0.0, 0.0, 0.0]}
    env = DockingEnv("iiwa14_docking_hqp", randomize={}, overrides=over, policy_rate=1000.0, max_time=0.003)
    env.reset(seed=0)
    a = np.zeros(env.action_space.shape)
    a[6:12] = np.log(K_SCALE) / math.log(env.gain_ratio)
    a[12:18] = np.log(D_SCALE) / math.log(env.gain_ratio)
    for _ in range(2):  # the second step: the state has moved under the scaled law
        env.step(a)
    p = env.setup.controller.prob
    Lh, kappa = _sqrtm_spd(p.Lambda)
    Kh = np.sqrt(p.K_r)
    d = env._gains.d_scale
    want = np.sqrt(d)[:, None] * (Lh * Kh + Kh[:, None] * Lh) * np.sqrt(d)
    # two square roots of Λ from two eigendecompositions (of Λ and of Λ⁻¹): each within ≈ n κ ε ‖Λ^½‖ of
    # the exact one (√ halves the relative perturbation; κ(Λ^½) = √κ); 64 × that as headroom
    bound = 64 * 6 * math.sqrt(kappa) * EPS * np.max(np.abs(want))
    assert np.max(np.abs(p.D_r - want)) <= bound
    assert np.allclose(p.K_r, env.setup.controller.K0 * (p.K_r[0] / env.setup.controller.K0[0]), rtol=4 * EPS)
    assert np.max(np.abs(p.D_r - p.D_r.T)) <= 8 * EPS * np.max(np.abs(p.D_r))
    assert np.min(np.linalg.eigvalsh(0.5 * (p.D_r + p.D_r.T))) > 0.0


def test_hqp_damping_scale_is_the_damping_ratio_on_decoupled_axes():
    """Λ = diag(λ): the law's D_r = Λ^½ ∘ S (K_r = K_0) with the table the scales write gives
    D_ii = d_i · 2 √(λ_i K_0,i k_i) (d_i × the critical damping of axis i) and no coupling."""
    K0 = np.array([300.0, 300.0, 300.0, 50.0, 50.0, 50.0])
    kh = np.sqrt(K0)
    ctrl = object.__new__(HQPController)  # only what set_gain_scales reads and writes, no plant
    ctrl.K0, ctrl.Kmin, ctrl._S0 = K0.copy(), 0.3 * K0, kh[:, None] + kh
    ctrl.config = SimpleNamespace(k_min_ratio=0.3)
    g = _Gains(ctrl)
    assert g.n == 6
    g.set(K_SCALE, D_SCALE)
    lam = np.array([8.0, 9.5, 11.0, 0.2, 0.25, 0.1])  # kg, kg·m²
    D = np.diag(np.sqrt(lam)) * ctrl._S0  # Λ^½ ∘ S with Λ diagonal
    crit = 2.0 * np.sqrt(lam * K0 * K_SCALE)
    assert np.max(np.abs(np.diag(D) - D_SCALE * crit)) <= 8 * EPS * np.max(D_SCALE * crit)
    assert np.count_nonzero(D - np.diag(np.diag(D))) == 0
    assert np.max(np.abs(ctrl.K0 - K0 * K_SCALE)) == 0.0 and np.max(np.abs(ctrl.Kmin - 0.3 * K0 * K_SCALE)) == 0.0
