"""Round-off checks for the compiled kernels' tests: the kernel guard's own bound (sim/kernels.py).

Where a kernel and its Python reference differ only in summation order or in the library that sums
(BLAS, LAPACK, Pinocchio, numpy's SIMD routines), the tests assert the bound the run-time guard uses,

    |x_kernel − x_python|_∞ ≤ GUARD_C · n · ε · κ · S,

with the S and κ each component states for each quantity (``_guard_bounds``: the magnitude of the
terms summed and the condition number of the solve passed through). The guard runs measure the ratio
|Δ| / (n ε κ S) at ≤ 0.5 on two BLAS code paths (tests/test_kernel_guard.py records it), so GUARD_C = 10
leaves ≥ 20× headroom on any CPU, while an error in a law (a wrong sign, a missing term) is many orders
of magnitude above it.
"""

from __future__ import annotations

from dockbench.sim import kernels


def assert_within_bound(
    component: str, n: int, got: kernels.Values, want: kernels.Values, bounds: kernels.Bounds
) -> float:
    """Assert the kernel's values ``got`` agree with the reference's ``want`` within ``bounds``; returns
    the largest |Δ| / bound (for reports)."""
    ratio, bad = kernels.compare(component, "test", n, got, want, bounds)
    assert bad is None, bad.message()
    return ratio


def assert_controllers_agree(fast, slow, snap, ref, wrench, cmd_fast, cmd_slow) -> float:
    """A compiled controller ``fast`` and a Python one ``slow`` that just computed the same step agree
    within the guard's bound (S and κ from the Python evaluation)."""
    want = slow._guard_values(snap, ref, wrench, cmd_slow)
    return assert_within_bound(
        "controller", slow.plant.nv, fast._guard_values(snap, ref, wrench, cmd_fast), want,
        slow._guard_bounds(snap, ref, wrench, cmd_slow),
    )
