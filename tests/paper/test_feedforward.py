"""MATH.md §2 joint dissipation feedforward, both modes, against the formulas."""

import numpy as np

from controllers.feedforward import DissipationFeedforward


def test_torque_mode_formula() -> None:
    f = np.array([1.137, 0.0, 0.44])
    d = np.array([0.21, 0.21, 0.0])
    ff = DissipationFeedforward(f, d, "torque")
    v = np.array([0.3, -0.2, 0.1])
    tau_pre = np.array([0.2, -5.0, -3.0])
    expected = f * np.tanh(tau_pre / np.where(f > 0, f / 2, 1.0)) + d * v
    np.testing.assert_allclose(ff.compute(v, tau_pre), expected, rtol=1e-15)
    assert ff.compute(v, tau_pre)[1] == 0.21 * -0.2  # f = 0: no friction term, no NaN


def test_velocity_mode_formula() -> None:
    f = np.array([1.137, 0.763])
    d = np.array([0.21, 0.0])
    ff = DissipationFeedforward(f, d, "velocity")
    v = np.array([0.004, -1.0])
    np.testing.assert_allclose(ff.compute(v, np.zeros(2)), f * np.tanh(v / 0.01) + d * v, rtol=1e-15)


def test_off_and_inactive() -> None:
    ff = DissipationFeedforward(np.zeros(3), np.zeros(3), "torque")
    assert not ff.active
    off = DissipationFeedforward(np.ones(3), np.ones(3), "off")
    assert not off.active
    np.testing.assert_array_equal(off.compute(np.ones(3), np.ones(3)), 0.0)
