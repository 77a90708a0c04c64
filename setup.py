"""Build the optional compiled kernels (C extensions; everything else is in pyproject.toml).

Each kernel is the 1 kHz hot path of one component (sim/kernels.py explains the design). They are
``optional``: without a C compiler the build skips them with a warning and the pure-Python paths run
(same equations, slower). The SHA-256 of the source and the shared headers is compiled in, so that
``sim.kernels`` can tell a stale build from a current one. ``-ffp-contract=off`` keeps every a·b + c
a separate multiply and add (no fused multiply-add), so the float arithmetic matches the Python
reference operation for operation.
"""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

#: (module, C source) of every kernel
KERNELS = [
    ("controllers._khatib_kernel", "controllers/_khatib_kernel.c"),
    ("controllers._se3_kernel", "controllers/_se3_kernel.c"),
    ("controllers._hqp_kernel", "controllers/_hqp_kernel.c"),
    ("sim._wrench_kernel", "sim/_wrench_kernel.c"),
    ("sim._dynamics_kernel", "sim/_dynamics_kernel.c"),
]
#: included by the kernels; part of each kernel's source hash (sim.kernels.SHARED_HEADERS: the same files)
SHARED_HEADERS = ["sim/_kernel_util.h", "sim/_kernel_math.h"]


def _extension(name: str, source: str) -> Extension:
    root = Path(__file__).parent
    path = root / source
    digest = (
        hashlib.sha256(path.read_bytes() + b"".join((root / h).read_bytes() for h in SHARED_HEADERS)).hexdigest()
        if path.exists()
        else "missing"
    )
    return Extension(
        name,
        [source],
        depends=SHARED_HEADERS,
        define_macros=[("KERNEL_SOURCE_SHA256", f'"{digest}"')],
        extra_compile_args=["-O2", "-ffp-contract=off", "-fno-fast-math", "-std=c99"],
        optional=True,
    )


setup(ext_modules=[_extension(n, s) for n, s in KERNELS])
