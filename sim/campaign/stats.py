"""Statistics of a campaign's cells (docs/theory/uncertainty.md, "Success rates"): the Wilson score
interval of a success rate and quantiles of the metrics.

Wilson's interval for k successes in n Bernoulli trials at confidence 1 − α (z = Φ⁻¹(1 − α/2),
z = 1.959964 for 95%)::

    p̂ = k / n
    centre     = (p̂ + z² / (2n)) / (1 + z² / n)
    half-width = z / (1 + z² / n) · sqrt(p̂ (1 − p̂) / n + z² / (4 n²))

It stays inside [0, 1] and keeps its coverage near 1 − α for small n and for p̂ = 0 or 1, where the
normal ("Wald") interval p̂ ± z sqrt(p̂(1 − p̂)/n) collapses to a point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: Φ⁻¹(0.975): the two-sided 95% normal quantile
Z95 = 1.959963984540054


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """(low, high) of the Wilson score interval of k successes in n trials; None for n = 0."""
    if n <= 0:
        return None
    if not 0 <= k <= n:
        raise ValueError(f"successes must be in [0, n], got k={k}, n={n}")
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n))
    lo = 0.0 if k == 0 else max(0.0, centre - half)  # p̂ = 0 (or 1) is a root itself: exact, not rounded
    hi = 1.0 if k == n else min(1.0, centre + half)
    return lo, hi


def quantiles(values: Sequence[float | None]) -> dict[str, float | int | None]:
    """Median, 95th percentile (numpy's linear interpolation), min, max and count of the finite values."""
    x = np.array([v for v in values if v is not None and isinstance(v, (int, float)) and math.isfinite(v)],
                 dtype=float)
    if x.size == 0:
        return {"n": 0, "median": None, "p95": None, "min": None, "max": None}
    return {
        "n": int(x.size),
        "median": float(np.median(x)),
        "p95": float(np.percentile(x, 95)),
        "min": float(x.min()),
        "max": float(x.max()),
    }
