"""pytest configuration: headless rendering and single-threaded BLAS for reproducible numbers.

pytest imports this file before any test module, so the thread counts below are set before numpy
(and with it OpenBLAS) is first imported: OpenBLAS reads ``OPENBLAS_NUM_THREADS`` once, when it is
loaded. They are forced to 1, not defaulted: a multi-threaded BLAS may sum in a different order from
run to run, which the bit-identical determinism tests (tests/test_determinism.py) must not see.
``tests/test_determinism.py::test_blas_is_single_threaded`` checks that it worked.
"""

import os
import sys

os.environ.setdefault("MUJOCO_GL", "egl")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

#: numpy was imported before this file (by a pytest plugin): the BLAS thread count may not have taken
#: effect; the BLAS check test then reports it instead of passing silently
NUMPY_IMPORTED_EARLY = "numpy" in sys.modules
