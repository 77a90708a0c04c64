"""The statistics of a campaign's summary (sim/campaign/stats.py, docs/theory/uncertainty.md): the Wilson
score interval and the quantiles."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dockbench.sim.campaign.stats import Z95, quantiles, wilson_interval
from scipy.stats import binomtest, norm

from tests.helpers import EPS


def test_z95_is_the_normal_quantile() -> None:
    assert abs(Z95 - norm.ppf(0.975)) <= 4 * EPS * Z95


@pytest.mark.parametrize("k,n", [(0, 1), (1, 1), (0, 10), (5, 10), (10, 10), (3, 17), (97, 100), (480, 1000)])
def test_wilson_bounds_are_the_roots_of_the_score_equation(k, n) -> None:
    """The Wilson bounds p solve (p̂ − p)² = z² p (1 − p) / n (the score test at level 5% is on its edge):
    the residual of each bound is ≤ 64ε (the quadratic's coefficients are O(1) and its roots well apart),
    and both agree with scipy's binomtest(...).proportion_ci(method="wilson") to 1e-12."""
    lo, hi = wilson_interval(k, n)
    p_hat = k / n
    for p in (lo, hi):
        residual = (p_hat - p) ** 2 - Z95**2 * p * (1 - p) / n
        assert abs(residual) <= 64 * EPS, (k, n, p, residual)
    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert abs(lo - ref.low) <= 1e-12 and abs(hi - ref.high) <= 1e-12
    assert 0.0 <= lo <= p_hat <= hi <= 1.0


def test_wilson_known_values_and_edges() -> None:
    # 5 of 10: 0.5 ± 0.2634 (the textbook value); 0 of 10: [0, 0.2775]; the interval shrinks as 1/√n
    lo, hi = wilson_interval(5, 10)
    assert math.isclose(lo, 0.23659309, abs_tol=1e-8) and math.isclose(hi, 0.76340691, abs_tol=1e-8)
    assert wilson_interval(0, 10)[0] == 0.0 and math.isclose(wilson_interval(0, 10)[1], 0.27753279, abs_tol=1e-8)
    widths = [np.diff(wilson_interval(n // 2, n))[0] for n in (100, 400, 1600)]
    assert 1.9 < widths[0] / widths[1] < 2.1 and 1.9 < widths[1] / widths[2] < 2.1
    assert wilson_interval(0, 0) is None
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_quantiles_skip_missing_values() -> None:
    q = quantiles([1.0, None, 3.0, float("nan"), 2.0, 10.0])
    assert q == {"n": 4, "median": 2.5, "p95": float(np.percentile([1, 2, 3, 10], 95)), "min": 1.0, "max": 10.0}
    assert quantiles([None])["median"] is None
