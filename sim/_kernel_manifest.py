"""What each compiled kernel is built from: its C source and the Python reference it ports.

Read by ``setup.py`` (which compiles the SHA-256 of these files into each kernel) and by
:mod:`sim.kernels` (which compares them with the files on disk before it uses a kernel). Paths are
relative to the directory that holds the ``sim`` and ``controllers`` packages. This module imports
nothing, so that ``setup.py`` can load it without importing the package.

``reference``: every Python module whose code the kernel reproduces (the law itself and the helpers
it calls). Editing any of them makes the kernel *stale* until it is rebuilt: ``DOCKBENCH_KERNELS=auto``
then runs the Python reference (with a warning) and never a kernel that predates the law on disk.
"""

#: included by every kernel; part of each kernel's source digest, in this order
SHARED_HEADERS = ("sim/_kernel_util.h", "sim/_kernel_math.h")

#: kernel module → (C source, Python reference modules)
KERNELS = {
    "controllers._khatib_kernel": (
        "controllers/_khatib_kernel.c",
        ("controllers/khatib.py", "controllers/feedforward.py", "controllers/force_control.py", "sim/lie.py"),
    ),
    "controllers._se3_kernel": (
        "controllers/_se3_kernel.c",
        (
            "controllers/se3_lie.py", "controllers/feedforward.py", "controllers/force_control.py",
            "planners/motion_reference.py", "sim/lie.py",
        ),
    ),
    "controllers._hqp_kernel": (
        "controllers/_hqp_kernel.c",
        ("controllers/hqp.py", "controllers/feedforward.py", "controllers/force_control.py", "sim/lie.py"),
    ),
    "sim._wrench_kernel": ("sim/_wrench_kernel.c", ("sim/wrench.py",)),
    "sim._dynamics_kernel": ("sim/_dynamics_kernel.c", ("sim/dynamics.py",)),
    "sim._floating_kernel": ("sim/_floating_kernel.c", ("sim/floating.py",)),
}
