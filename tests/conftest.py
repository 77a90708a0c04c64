"""pytest configuration: headless rendering and single-threaded BLAS for reproducible numbers."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")
