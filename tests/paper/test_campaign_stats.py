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


def test_wilson_lower_bound_increases_strictly_with_successes() -> None:
    """docs/theory/uncertainty.md, "Robust tuning": L(k + 1, n) > L(k, n) for every k < n, n ≤ 400, so the
    lexicographic step Δ is positive and a failure can never be made up by a later trial (pruning)."""
    from dockbench.sim.campaign.study import wilson_low_step

    for n in range(1, 401):
        lows = np.array([wilson_interval(k, n)[0] for k in range(n + 1)])
        assert np.all(np.diff(lows) > 0), n
        assert wilson_low_step(n) == float(np.diff(lows).min())


def test_lexicographic_value_orders_success_first_then_the_secondary() -> None:
    """J = K(1 − s₁) + clip(s₂/scale, −C, C) orders 2000 random pairs of candidates (n = 16 trials, random
    success counts, p95 peaks in [0, 200] N with scale 25 N: inside the clip) exactly as (more successes,
    then lower p95) does."""
    from dockbench.sim.campaign.study import Term, lexicographic_value, stat_value

    rng = np.random.default_rng(7)
    first = Term("success_wilson_low", direction="maximize")
    second = Term("p95", "contact.peak_force_truth", direction="minimize", scale=25.0)
    n = 16

    def cand():
        k = int(rng.integers(0, n + 1))
        peaks = rng.uniform(0.0, 200.0, n)
        return [{"verdict": "PASS" if i < k else "FAIL", "metrics": {"contact.peak_force_truth": float(p)}}
                for i, p in enumerate(peaks)]

    for _ in range(2000):
        a, b = cand(), cand()
        ka, kb = (sum(r["verdict"] == "PASS" for r in x) for x in (a, b))
        pa, pb = stat_value(second, a), stat_value(second, b)
        ja, jb = lexicographic_value(first, second, a, n), lexicographic_value(first, second, b, n)
        want = (-ka, pa) < (-kb, pb)
        if (ka, pa) != (kb, pb):
            assert (ja < jb) == want, (ka, pa, kb, pb, ja, jb)
