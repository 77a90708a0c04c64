"""Compiled kernels: optional C extensions for the 1 kHz hot path, with pure-Python references.

At 1 kHz a control law is a few hundred floating-point operations spread over 6-vectors and a 7×7
matrix; in Python almost all of its cost is interpreter and binding overhead (docs/performance.md).
A *kernel* is one component's per-step arithmetic written in C: the Khatib and SE(3) control laws and
the HQP's closed-form step (``controllers/_khatib_kernel.c``, ``controllers/_se3_kernel.c``,
``controllers/_hqp_kernel.c``), the F/T pipeline
(``sim/_wrench_kernel.c``), the snapshot's kinematic part (``sim/_dynamics_kernel.c``), the contact culling's
per-period update (``sim/_culling_kernel.c``: its reference is ``BoxCulling._update_python``, compared float for
float by tests/test_culling.py rather than by the guard, since its outputs choose which boxes MuJoCo tests and
change no physics) and the telemetry row
copy (``telemetry/_row_kernel.c``: no arithmetic, the reference's float64 copies in one call, so the guard has
nothing to compare: tests/test_rows.py checks the bytes); the binding
helpers they share are in ``sim/_kernel_util.h``, the shared float code (rotation log, feedforward, the one
small Cholesky factorisation with its one pivot rule) in
``sim/_kernel_math.h``. It is *bound* once to the preallocated arrays it reads and writes
(snapshot, reference, wrench state, command: their buffers never move during a run), so a step is one
call with no arguments.

Every kernel has a pure-Python implementation of the same equations, which stays the reference: it
is what the docs derive, what the equation tests in ``tests/paper`` check, and what runs when the
kernel is not available. Tests run both on the same inputs (tests/test_kernels.py,
tests/test_se3_kernel.py, tests/test_hqp_kernel.py). The C code keeps the Python operation order in
the scalar part and is compiled without fused multiply-add (setup.py), so the control-law errors, the
wrenches, the poses and J_ee_lwa are equal bit for bit; the small matrix products (Λ⁻¹, its Cholesky
solve, Jᵀy, J Jᵀ) sum in another order than BLAS, which changes τ by round-off (≤ 6e-14 relative
measured for Khatib and SE(3); ≤ 1.1e-11 for the HQP, whose Λ^½ comes from a Jacobi eigendecomposition
instead of LAPACK's: close small eigenvalues of Λ⁻¹ magnify either solver's error). In contact the
plant amplifies such differences, as it does any round-off: whole docking runs end within 4e-8 m of
each other.

Which path runs is chosen by the environment variable ``DOCKBENCH_KERNELS``:

* ``auto`` (default): the compiled kernel when it is built and current, else Python (with a warning
  when it is built but stale);
* ``compiled``: the compiled kernel, or an error that says how to build it;
* ``python``: always the Python reference.

Controllers report the path they ran in ``summary()["kernel"]`` (recorded in meta.json).

Building: ``pip install -e .`` compiles the kernels (a C compiler and the Python headers are needed;
without them the install still succeeds and the Python paths run). Each build carries two digests
(``sim/_kernel_manifest.py`` lists the files): one of its C source and the shared headers, one of the code
of every Python reference module it ports (the syntax tree without docstrings: comments and docstrings do
not count). A build whose digests differ from the files on disk is *stale* and is
not used (``auto`` warns and runs Python, ``compiled`` raises): after editing a ``.c`` file, or the Python
law a kernel ports (e.g. ``controllers/khatib.py``), run ``pip install -e .`` again.

The kernel guard
----------------
A current build can still disagree with the law on disk in ways no digest sees (a monkeypatched method, a
helper module outside the manifest, a kernel bug on one input). So the loop also proves each bound
kernel on the run itself: on the first control step and then every :func:`check_every` steps
(``DOCKBENCH_KERNEL_CHECK``, default :data:`DEFAULT_CHECK_EVERY`; 0 turns the guard off) every
component that ran its kernel also evaluates its Python reference on the same inputs, from the same
state, and compares the outputs (:func:`compare`) within the round-off bound

    |x_kernel − x_python|_∞  ≤  GUARD_C · n · ε · κ · S

n the length of the longest sum (the joint count), ε the float64 unit round-off, κ the condition number
of the linear solve the quantity passes through (1 where there is none), S the magnitude of the terms
the quantity sums (each component states its own). When they agree the kernel's outputs and state are
kept (a guarded run is bit for bit the unguarded one); otherwise a :class:`KernelMismatch` is reported
(a RuntimeWarning naming the component, step and difference; meta.json ``kernel_mismatch``; the run
line), the Python reference's outputs are kept and the component runs its Python path for the rest of
the run.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from dockbench.sim import _kernel_manifest as manifest
from dockbench.sim.errors import DockbenchError

ENV = "DOCKBENCH_KERNELS"
MODES = ("auto", "compiled", "python")
BUILD_HINT = "build it with `pip install -e .` (needs a C compiler and the Python headers, e.g. gcc and python3-dev)"

#: the directory holding the packages (the paths of sim/_kernel_manifest.py are relative to it)
ROOT = Path(__file__).resolve().parent.parent
#: the headers the kernels include (setup.py hashes them with each kernel's source, in this order)
SHARED_HEADERS = tuple(ROOT / h for h in manifest.SHARED_HEADERS)

#: environment variable: the guard's period in control steps (0 = off)
CHECK_ENV = "DOCKBENCH_KERNEL_CHECK"
#: default guard period [control steps]: a check evaluates every guarded component's Python reference
#: once and compares (0.3–0.7 ms, the reference code being cold in the caches), so the first step and then
#: one step in 5000 (t = 0 and 5 s of a docking run at 1 kHz: approach and contact) keep the guard under
#: 1% of a run (docs/performance.md)
DEFAULT_CHECK_EVERY = 5000
#: the guard's constant in |x_kernel − x_python| ≤ GUARD_C · n · ε · κ · S (module docstring); the
#: measured ratio |Δ| / (n ε κ S) over the guarded test runs, on two BLAS code paths, stays ≤ 1, so
#: this leaves ≥ 10× headroom (tests/test_kernel_guard.py records the largest ratio it sees)
GUARD_C = 10.0
EPS = float(np.finfo(float).eps)

_override: str | None = None
_check_override: int | None = None


class KernelError(DockbenchError):
    """A compiled kernel was required (DOCKBENCH_KERNELS=compiled) but is missing or stale."""


def mode() -> str:
    """The kernel mode: the :func:`forced` one inside that context, else ``$DOCKBENCH_KERNELS``
    (default ``auto``). Raises KernelError naming the variable and the allowed values."""
    if _override is not None:
        return _override
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise KernelError(f"environment variable {ENV}={value!r}: allowed values are {', '.join(MODES)}")
    return value


@contextmanager
def forced(value: str) -> Iterator[None]:
    """Use kernel mode ``value`` (one of MODES) for components built inside the block (tests, tools)."""
    global _override
    if value not in MODES:
        raise KernelError(f"kernel mode {value!r}: allowed values are {', '.join(MODES)}")
    previous, _override = _override, value
    try:
        yield
    finally:
        _override = previous


def _check_value(value: object, where: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        n = -1
    if n < 0 or str(value).strip() not in (str(n), f"+{n}"):
        raise KernelError(f"{where}={value!r}: must be a whole number of control steps ≥ 0 (0 turns the guard off)")
    return n


def check_every() -> int:
    """The kernel guard's period in control steps: the :func:`checking` one inside that context, else
    ``$DOCKBENCH_KERNEL_CHECK`` (default :data:`DEFAULT_CHECK_EVERY`); 0 = no guard. Raises KernelError
    naming the variable on a value that is not a whole number ≥ 0."""
    if _check_override is not None:
        return _check_override
    raw = os.environ.get(CHECK_ENV, "").strip()
    return DEFAULT_CHECK_EVERY if raw == "" else _check_value(raw, f"environment variable {CHECK_ENV}")


@contextmanager
def checking(every: int) -> Iterator[None]:
    """Run the kernel guard every ``every`` control steps (0 = off) for runs inside the block."""
    global _check_override
    n = _check_value(every, "kernel check period")
    previous, _check_override = _check_override, n
    try:
        yield
    finally:
        _check_override = previous


def describe(paths: dict[str, str]) -> str:
    """A short description of which path ran each component ({component: "compiled" | "python"}, as in
    meta.json's ``kernels``): "compiled", "python", or the mix, e.g. "controller python, wrench compiled"."""
    kinds = set(paths.values())
    if len(kinds) == 1:
        return kinds.pop()
    return ", ".join(f"{k} {v}" for k, v in sorted(paths.items()))


def source_path(name: str) -> Path:
    """The C source of kernel module ``name`` (``controllers._se3_kernel`` → controllers/_se3_kernel.c)."""
    if name in manifest.KERNELS:
        return ROOT / manifest.KERNELS[name][0]
    return ROOT.joinpath(*name.split(".")).with_suffix(".c")


def reference_paths(name: str) -> tuple[str, ...]:
    """The Python reference modules of kernel ``name`` (relative paths, sim/_kernel_manifest.py)."""
    return manifest.KERNELS[name][1] if name in manifest.KERNELS else ()


#: (path, mtime_ns, size) → code digest of the module: a file is parsed again only when it changed
_digests: dict[tuple[str, int, int], str] = {}


def _code_digest(path: Path) -> str:
    """The code digest of a Python reference module (``_kernel_manifest.code_digest``: its syntax tree
    without docstrings, so comments and docstrings do not stale a kernel), cached per file version."""
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    digest = _digests.get(key)
    if digest is None:
        digest = _digests[key] = manifest.code_digest(path.read_bytes())
    return digest


def _sources_digest(src: Path) -> str:
    """SHA-256 of the C source followed by the shared headers (setup.py's digest)."""
    return hashlib.sha256(src.read_bytes() + b"".join(h.read_bytes() for h in SHARED_HEADERS)).hexdigest()


def _stale_reference(name: str, built: str) -> str | None:
    """The first Python reference module of kernel ``name`` whose digest differs from the one compiled
    into it (``built``: setup.py's "path=digest,…"), or None when every one matches."""
    compiled = dict(item.split("=", 1) for item in built.split(",") if "=" in item)
    for rel in reference_paths(name):
        path = ROOT / rel
        if not path.exists():
            continue  # an installation without the reference source: nothing to compare against
        if compiled.get(rel) != _code_digest(path):
            return rel
    return None


def status(name: str) -> tuple[ModuleType | None, str]:
    """(module or None, why): import kernel ``name`` and check that it was built from the C source (and
    the shared headers) and from the Python reference modules on disk, when they are there: an installed
    wheel carries only the build and the Python modules."""
    try:
        module = importlib.import_module(f"dockbench.{name}")  # manifest names are relative to the package
    except ImportError as exc:
        return None, f"{name} is not built ({exc})"
    src = source_path(name)
    if src.exists() and all(h.exists() for h in SHARED_HEADERS):
        if getattr(module, "SOURCE_SHA256", None) != _sources_digest(src):
            return None, f"{name} is stale: it was built from another version of {src.name}"
    changed = _stale_reference(name, getattr(module, "REFERENCE_SHA256", ""))
    if changed is not None:
        return None, (
            f"{name} is stale: its Python reference {changed} changed since it was built (the kernel would "
            "run the old law)"
        )
    return module, "compiled"


def load(name: str) -> ModuleType | None:
    """The compiled kernel module ``name`` for the current :func:`mode`, or None for the Python path.

    Raises:
        KernelError: mode ``compiled`` and the kernel is missing or stale (the message says how to build it).
    """
    m = mode()
    if m == "python":
        return None
    module, why = status(name)
    if module is None:
        if m == "compiled":
            raise KernelError(f"{ENV}=compiled but {why}; {BUILD_HINT}")
        if "stale" in why:
            warnings.warn(f"{why}; running the Python path. {BUILD_HINT}", RuntimeWarning, stacklevel=2)
    return module


# ------------------------------------------------------------------------------------------ the guard

#: the compared outputs of one evaluation: (name, value) in a fixed order
Values = list[tuple[str, np.ndarray]]
#: the bound of each compared output: (S = the magnitude of the terms it sums, κ of the solve it passes through)
Bounds = list[tuple[float, float]]


@dataclass(frozen=True)
class KernelMismatch:
    """A compiled kernel disagreed with its Python reference beyond the round-off bound.

    Attributes:
        component: ``dynamics`` | ``wrench`` | ``controller``.
        kernel: the kernel module (e.g. ``controllers._khatib_kernel``).
        quantity: the first output that disagreed (e.g. ``tau``).
        index: flat index of its largest difference.
        kernel_value, python_value: the two values there.
        max_abs_diff: max |x_kernel − x_python| over the quantity.
        bound: the allowed difference GUARD_C · n · ε · κ · S.
        step, t: control step and time [s] of the check (filled in by the loop).
    """

    component: str
    kernel: str
    quantity: str
    index: int
    kernel_value: float
    python_value: float
    max_abs_diff: float
    bound: float
    step: int = -1
    t: float = math.nan

    def message(self) -> str:
        return (
            f"kernel guard: the compiled {self.component} kernel ({self.kernel}) disagrees with its Python "
            f"reference at step {self.step} (t = {self.t:.4f} s): {self.quantity}[{self.index}] is "
            f"{self.kernel_value:.9g} compiled vs {self.python_value:.9g} Python (|Δ| = {self.max_abs_diff:.3g}, "
            f"round-off bound {self.bound:.3g}); the rest of the run uses the Python path (the law on disk). "
            "If you changed the Python law on purpose, this is expected: port it to the C kernel only if "
            "speed matters (docs/architecture.md, 'Changing a law')"
        )

    def to_dict(self) -> dict:
        return asdict(self)


def compare(
    component: str, kernel: str, n: int, got: Values, want: Values, bounds: Bounds | Callable[[], Bounds]
) -> tuple[float, KernelMismatch | None]:
    """Compare a kernel's outputs ``got`` with the Python reference's ``want`` (the same quantities in the
    same order) within ``bounds`` (the S and κ of each, from the reference evaluation; a callable is only
    called when needed). Returns (the largest |Δ| / bound over them, the first mismatch or None).

    A quantity agrees when max |Δ| ≤ GUARD_C · n · ε · max(κ S, max |x|) (the value's own size is a floor
    of its scale) or when it is equal (NaN where the other is NaN); a difference where only one side is
    not finite never agrees. When every difference is within a tenth of its floor the bounds are not
    evaluated (the ratio returned is then the largest |Δ| / floor, ≤ 0.1, an upper bound of the true one)."""
    unit = GUARD_C * n * EPS
    diffs, floors = [], []
    for (name, a), (_, b) in zip(got, want, strict=True):
        if a.shape != b.shape:
            return math.inf, KernelMismatch(component, kernel, name, 0, math.nan, math.nan, math.inf, 0.0)
        diff = np.abs(a - b).ravel()
        diffs.append(diff)
        floors.append(unit * float(np.abs(b).max()) if b.size else 0.0)
    worst = 0.0
    for diff, floor in zip(diffs, floors, strict=True):
        m = diff.max() if diff.size else 0.0
        if not m <= 0.1 * floor:  # near or beyond the value's own round-off (or NaN): the full bounds decide
            break
        if m > 0.0:
            worst = max(worst, float(m) / floor)
    else:
        return worst, None
    worst = 0.0
    for (name, a), (_, b), diff, floor, (scale, kappa) in zip(
        got, want, diffs, floors, bounds() if callable(bounds) else bounds, strict=True
    ):
        bound = max(unit * (kappa if kappa > 1.0 else 1.0) * scale, floor)
        m = diff.max() if diff.size else 0.0
        if m <= bound:  # False for NaN: the slow path below
            if m > 0.0:
                worst = max(worst, float(m) / bound)
            continue
        both_nan = np.isnan(a.ravel()) & np.isnan(b.ravel())
        diff[both_nan] = 0.0
        diff[np.isnan(diff)] = math.inf  # NaN on one side only
        i = int(np.argmax(diff))
        if diff[i] == 0.0:
            continue
        ratio = float(diff[i]) / bound if bound > 0.0 else math.inf
        if not ratio <= 1.0:
            return ratio, KernelMismatch(
                component, kernel, name, i, float(a.ravel()[i]), float(b.ravel()[i]), float(diff[i]), bound
            )
        worst = max(worst, ratio)
    return worst, None


def _shallow(value: Any) -> Any:
    """A value to restore later: a shallow copy of a dict or list (mutated in place), else the value."""
    return type(value)(value) if isinstance(value, (dict, list)) else value


@dataclass(frozen=True)
class Written:
    """What one kernel step writes: arrays (saved and restored by copy) and attributes ``(owner, name)`` (saved
    as the value, a shallow copy for a dict or list, and restored by assignment). The guard saves them around
    the reference's evaluation so that either side's outputs and state can be restored exactly."""

    arrays: Sequence[np.ndarray] = ()
    attrs: Sequence[tuple[Any, str]] = ()

    def save(self) -> tuple[list[np.ndarray], list[Any]]:
        return [a.copy() for a in self.arrays], [_shallow(getattr(o, n)) for o, n in self.attrs]

    def restore(self, saved: tuple[list[np.ndarray], list[Any]]) -> None:
        arrays, values = saved
        for a, copy in zip(self.arrays, arrays, strict=True):
            np.copyto(a, copy)
        for (owner, name), value in zip(self.attrs, values, strict=True):
            setattr(owner, name, value)


def guarded_step(
    component: str, kernel: str, n: int, *, written: Written, reference: Callable[[], None],
    values: Callable[[], Values], bounds: Callable[[], Bounds], drop: Callable[[], None],
    kernel_step: Callable[[], bool] | None = None,
) -> tuple[float, KernelMismatch | None]:
    """The kernel guard's step of one component, the one form the dynamics, floating base, wrench pipeline and
    every control law use (module docstring, "The kernel guard").

    ``kernel_step`` None: the kernel has taken this step already (its outputs are current). Otherwise it is
    called here first, from the state ``written`` holds before it; False from it means the kernel handed the
    step back: the ``reference`` takes it and nothing is compared. Then the kernel's ``values()`` are read and
    ``written`` is saved, the state before the kernel's step is restored (when the step ran here), the
    ``reference()`` takes the same step on the same inputs and its ``values()`` are compared with the
    kernel's within ``bounds`` (:func:`compare`; evaluated only when needed). On agreement the kernel's
    outputs and state are restored, so a guarded run is bit for bit the unguarded one; on a mismatch the
    reference's are kept and ``drop()`` sends the component to its Python path for the rest of the run.
    Returns (largest |Δ|/bound, mismatch or None)."""
    before = written.save() if kernel_step is not None else None
    if kernel_step is not None and not kernel_step():
        reference()
        return 0.0, None
    got = values()
    after = written.save()
    if before is not None:
        written.restore(before)
    reference()
    ratio, bad = compare(component, kernel, n, got, values(), bounds)
    if bad is None:
        written.restore(after)
    else:
        drop()
    return ratio, bad


def magnitude(*terms: np.ndarray | float) -> float:
    """S of a bound: the largest |entry| over the given terms (arrays or floats), at least the smallest
    normal float so that a bound is never zero."""
    s = 2.2250738585072014e-308
    for x in terms:
        m = float(np.abs(x).max()) if isinstance(x, np.ndarray) else abs(float(x))
        if m > s:
            s = m
    return s


def split_bound(s_solve: float, kappa: float, s_plain: float) -> tuple[float, float]:
    """The two-part bound GUARD_C · n ε (κ S_solve + S_plain) as the one (S, κ) :func:`compare` takes:
    S_solve is the part whose error passes through the solve (amplified by κ), S_plain the part that
    does not (the round-off of the terms around it)."""
    k = kappa if kappa > 1.0 else 1.0
    return s_solve + s_plain / k, k


def inf_norm_times_inverse(B: np.ndarray, A: np.ndarray) -> float:
    """‖B A⁻¹‖∞ (the largest absolute row sum) for a small square A; inf when A is singular."""
    try:
        return float(np.abs(B @ np.linalg.inv(A)).sum(axis=1).max())
    except np.linalg.LinAlgError:
        return math.inf


def condition(A: np.ndarray) -> float:
    """κ₂ of a small symmetric matrix (|μ|max / |μ|min of its eigenvalues; inf when singular)."""
    mu = np.abs(np.linalg.eigvalsh(A))
    lo = float(mu.min())
    return float(mu.max()) / lo if lo > 0.0 else math.inf


@dataclass
class GuardReport:
    """What the kernel guard saw during one run (meta.json ``kernel_guard``; the mismatches also as
    ``kernel_mismatch``).

    Attributes:
        every: the guard's period [control steps] (0: the guard was off).
        checks: guarded steps (the first step, then every ``every``-th, while a kernel was bound).
        max_ratio: per component, the largest |x_kernel − x_python| / bound it saw (< 1: within round-off).
        mismatches: the disagreements (at most one per component: it then runs Python).
    """

    every: int
    checks: int = 0
    max_ratio: dict[str, float] = field(default_factory=dict)
    mismatches: list[KernelMismatch] = field(default_factory=list)

    def note(self, component: str, result: tuple[float, KernelMismatch | None], step: int, t: float) -> None:
        """Record one component's check at control step ``step`` (time ``t`` [s]); warn on a mismatch."""
        ratio, bad = result
        if bad is None:
            if ratio > self.max_ratio.get(component, 0.0):
                self.max_ratio[component] = ratio
            else:
                self.max_ratio.setdefault(component, ratio)
            return
        bad = replace(bad, step=step, t=t)
        self.mismatches.append(bad)
        warnings.warn(bad.message(), RuntimeWarning, stacklevel=3)

    def to_dict(self) -> dict:
        return {
            "every": self.every,
            "checks": self.checks,
            "max_ratio": dict(self.max_ratio),
            "mismatches": [m.to_dict() for m in self.mismatches],
        }
