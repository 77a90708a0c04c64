"""Compiled kernels: optional C extensions for the 1 kHz hot path, with pure-Python references.

At 1 kHz a control law is a few hundred floating-point operations spread over 6-vectors and a 7×7
matrix; in Python almost all of its cost is interpreter and binding overhead (docs/performance.md).
A *kernel* is one component's per-step arithmetic written in C: the Khatib and SE(3) control laws and
the HQP's closed-form step (``controllers/_khatib_kernel.c``, ``controllers/_se3_kernel.c``,
``controllers/_hqp_kernel.c``), the F/T pipeline
(``sim/_wrench_kernel.c``) and the snapshot's kinematic part (``sim/_dynamics_kernel.c``); the binding
helpers they share are in ``sim/_kernel_util.h``, the shared float code (rotation log, feedforward) in
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
without them the install still succeeds and the Python paths run). After editing a ``.c`` file, run
``pip install -e .`` again: a build whose compiled-in source hash differs from the file on disk is
stale and is not used.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from sim.errors import DockbenchError

ENV = "DOCKBENCH_KERNELS"
MODES = ("auto", "compiled", "python")
BUILD_HINT = "build it with `pip install -e .` (needs a C compiler and the Python headers, e.g. gcc and python3-dev)"

#: the headers the kernels include (setup.py hashes them with each kernel's source, in this order)
SHARED_HEADERS = tuple(Path(__file__).resolve().parent / h for h in ("_kernel_util.h", "_kernel_math.h"))

_override: str | None = None


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


def describe(paths: dict[str, str]) -> str:
    """A short description of which path ran each component ({component: "compiled" | "python"}, as in
    meta.json's ``kernels``): "compiled", "python", or the mix, e.g. "controller python, wrench compiled"."""
    kinds = set(paths.values())
    if len(kinds) == 1:
        return kinds.pop()
    return ", ".join(f"{k} {v}" for k, v in sorted(paths.items()))


def source_path(name: str) -> Path:
    """The C source of kernel module ``name`` (``controllers._se3_kernel`` → controllers/_se3_kernel.c)."""
    return Path(__file__).resolve().parent.parent.joinpath(*name.split(".")).with_suffix(".c")


def status(name: str) -> tuple[ModuleType | None, str]:
    """(module or None, why): import kernel ``name`` and check that it was built from the source (and
    the shared header) on disk, when they are there: an installed wheel carries only the build."""
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        return None, f"{name} is not built ({exc})"
    src = source_path(name)
    built = getattr(module, "SOURCE_SHA256", None)
    if src.exists() and all(h.exists() for h in SHARED_HEADERS):
        current = hashlib.sha256(src.read_bytes() + b"".join(h.read_bytes() for h in SHARED_HEADERS)).hexdigest()
        if built != current:
            return None, f"{name} is stale: it was built from another version of {src.name}"
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
