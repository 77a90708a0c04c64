"""docs/theory/khatib.md §4: joint dissipation feedforward, both modes, against the formulas.

The formulas below are the same numpy elementwise operations as the implementation (divide, tanh,
multiply, add); the only freedom is numpy's SIMD tanh, which may take another loop (e.g. for a
different array length) and differ by ≤ 4 ulp. Bound per joint: 8ε·(f + |d q̇|) (tanh ≤ 4 ulp plus
the product and the sum); measured: bit for bit. A wrong mode, factor or sign is O(1) and fails."""

import numpy as np
import pytest
from dockbench.controllers.feedforward import DissipationFeedforward

from tests.helpers import EPS, assert_within


def test_torque_mode_formula() -> None:
    f = np.array([1.137, 0.0, 0.44])
    d = np.array([0.21, 0.21, 0.0])
    ff = DissipationFeedforward(f, d, "torque")
    v = np.array([0.3, -0.2, 0.1])
    tau_pre = np.array([0.2, -5.0, -3.0])
    expected = f * np.tanh(tau_pre / np.where(f > 0, f / 2, 1.0)) + d * v
    assert_within(ff.compute(v, tau_pre), expected, 8 * EPS * (f + np.abs(d * v)))
    # f = 0: no friction term, no NaN. Exact: 0·tanh(·) = 0 and 0 + d q̇ is the same IEEE product
    assert ff.compute(v, tau_pre)[1] == 0.21 * -0.2


def test_velocity_mode_formula() -> None:
    f = np.array([1.137, 0.763])
    d = np.array([0.21, 0.0])
    ff = DissipationFeedforward(f, d, "velocity")
    v = np.array([0.004, -1.0])
    assert_within(ff.compute(v, np.zeros(2)), f * np.tanh(v / 0.01) + d * v, 8 * EPS * (f + np.abs(d * v)))


@pytest.mark.parametrize("eps", [0.01, 0.1])
def test_velocity_mode_takes_its_scale_and_leaves_a_friction_of_slope_f_over_eps(eps: float) -> None:
    """τ_ff = f tanh(q̇/ε) with the configured ε, and the friction it leaves, f − τ_ff(q̇) for q̇ ≥ 0, falls with
    slope −f/ε at rest (docs/theory/khatib.md §4: the negative damping that must stay below the law's). The slope
    of −τ_ff by a central difference at h = 1e-4 ε: truncation ≤ (2f/ε³) h²/6 ≈ 3e-9 f/ε, round-off ≈ ε_mach f/h
    ≈ 2e-12 f/ε; allowed 1e-6 f/ε."""
    f, d = np.array([1.137, 0.248]), np.zeros(2)
    ff = DissipationFeedforward(f, d, "velocity", velocity_scale=eps)
    v = np.array([0.004, -0.03])
    assert_within(ff.compute(v, np.zeros(2)), f * np.tanh(v / eps), 8 * EPS * f)
    h = 1e-4 * eps
    left = [f - DissipationFeedforward(f, d, "velocity", velocity_scale=eps).compute(np.full(2, x), np.zeros(2))
            for x in (h, -h)]
    slope = (left[0] - left[1]) / (2 * h)
    assert np.abs(slope - (-f / eps)).max() <= 1e-6 * float(np.max(f / eps))


def test_off_and_inactive() -> None:
    ff = DissipationFeedforward(np.zeros(3), np.zeros(3), "torque")
    assert not ff.active
    off = DissipationFeedforward(np.ones(3), np.ones(3), "off")
    assert not off.active
    np.testing.assert_array_equal(off.compute(np.ones(3), np.ones(3)), 0.0)  # exact: zeros are written


def test_torque_mode_keys_on_the_torque_without_gravity() -> None:
    """τ_ff = f tanh((τ_pre − g) / (f/2)): the same τ_ff for the same task torque whatever the gravity
    torque g(q) added to it (a joint holding 40 N·m against gravity gets no ±f offset), and bit for bit
    the zero-gravity value when g = 0."""
    f = np.array([1.137, 0.763, 0.44])
    d = np.array([0.21, 0.0, 0.1])
    ff = DissipationFeedforward(f, d, "torque")
    v = np.array([0.3, -0.2, 0.1])
    tau_task = np.array([0.2, -0.3, 0.05])
    g = np.array([40.0, -25.0, 3.0])
    at_zero_g = ff.compute(v, tau_task).copy()
    # exact: τ − 0 = τ, then the same operations
    np.testing.assert_array_equal(ff.compute(v, tau_task, np.zeros(3)), at_zero_g)
    # (τ + g) − g recovers τ to ≤ ½ε|τ + g| (one rounding of τ + g); the tanh argument scales that by 2/f,
    # tanh′ ≤ 1 and the factor f undoes it: τ_ff moves by ≤ ε|τ + g| (≈ 9e-15 at 40 N·m; measured 5e-15,
    # the same on every IEEE machine). Tolerance 16× that, plus the 8ε(f + |d q̇|) of the formula; a
    # missing g subtraction is O(f) = 1 N·m.
    bound = 16 * EPS * np.abs(tau_task + g) + 8 * EPS * (f + np.abs(d * v))
    assert_within(ff.compute(v, tau_task + g, g), at_zero_g, bound)
    assert_within(ff.compute(v, tau_task + g, g), f * np.tanh(tau_task / (f / 2)) + d * v, 2 * bound)
    # keyed on τ_pre alone, gravity would saturate the tanh at +f / −f / +f
    np.testing.assert_allclose(ff.compute(v, tau_task + g) - d * v, f * np.sign(g), rtol=1e-9)


def test_hybrid_mode_is_the_torque_keying_until_contact_then_the_velocity_keying() -> None:
    """Hybrid: τ_ff = (1 − w) f tanh((τ_pre − g)/(f/2)) + w f tanh(q̇/ε) + d q̇, w = 0 until the law's force
    exceeds the contact threshold (1 N), then w grows by T/T_blend per call to 1 and stays latched (a lost
    contact does not bring the torque keying back). Same float operations as the formula except the blend
    (one extra multiply-add: 4 ε relative)."""
    f = np.array([1.137, 0.763, 0.0])
    d = np.array([0.21, 0.0, 0.1])
    v = np.array([0.003, -0.02, 0.1])
    tau_pre = np.array([0.2, 0.1, -3.0])
    g = np.array([0.5, -0.2, 1.0])
    hyb = DissipationFeedforward(f, d, "hybrid", period=1e-3, blend_time=0.01)
    tq = DissipationFeedforward(f, d, "torque").compute(v, tau_pre, g).copy()
    vel = DissipationFeedforward(f, d, "velocity").compute(v, tau_pre, g).copy()
    assert hyb.kernel_args(g)["ff_mode"] == 3  # the compiled kernels take the hybrid mode (sim/_kernel_math.h)
    np.testing.assert_array_equal(hyb.compute(v, tau_pre, g, force=0.9), tq)  # below the threshold
    assert hyb.w == 0.0 and not hyb.latched
    for k in range(1, 11):
        got = hyb.compute(v, tau_pre, g, force=2.0 if k == 1 else 0.0)  # latched on the first call
        w = min(1.0, k * 0.1)
        want = (1 - w) * (tq - d * v) + w * (vel - d * v) + d * v
        np.testing.assert_allclose(got, want, rtol=4 * 2.2e-16, atol=1e-15)
    assert hyb.w == 1.0 and hyb.latched
    np.testing.assert_array_equal(hyb.compute(v, tau_pre, g, force=0.0), vel)
    hyb.reset()
    np.testing.assert_array_equal(hyb.compute(v, tau_pre, g), tq)


def test_torque_keying_flips_at_rest_and_the_hybrid_keying_does_not() -> None:
    """The failure the hybrid mode removes: at rest (q̇ = 0) a law torque that changes sign (±1 N·m) makes
    the torque keying jump between ≈ +f and −f, while the hybrid keying after contact gives exactly 0 at rest."""
    f, d = np.array([1.137]), np.array([0.0])
    tq = DissipationFeedforward(f, d, "torque")
    hyb = DissipationFeedforward(f, d, "hybrid", blend_time=0.0)
    v0 = np.zeros(1)
    flips = [tq.compute(v0, np.array([s])).item() for s in (1.0, -1.0)]
    assert flips[0] > 0.9 * f[0] and flips[1] < -0.9 * f[0]  # ±f for a ±1 N·m law torque at rest
    hyb.compute(v0, np.array([1.0]), force=5.0)  # contact: latched, blend_time 0 → w = 1 at once
    assert [hyb.compute(v0, np.array([s]), force=5.0).item() for s in (1.0, -1.0)] == [0.0, 0.0]
