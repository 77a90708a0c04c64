"""What each compiled kernel is built from: its C source and the Python reference it ports.

Read by ``setup.py`` (which compiles the SHA-256 of these files into each kernel) and by
:mod:`sim.kernels` (which compares them with the files on disk before it uses a kernel). Paths are
relative to the directory that holds the ``sim`` and ``controllers`` packages. This module imports
only the standard library, so that ``setup.py`` can load it without importing the package.

``reference``: every Python module whose code the kernel reproduces (the law itself and the helpers
it calls). Editing the *code* of any of them makes the kernel *stale* until it is rebuilt:
``DOCKBENCH_KERNELS=auto`` then runs the Python reference (with a warning) and never a kernel that
predates the law on disk. What is compared is :func:`code_digest`, the digest of the module's syntax tree
without its docstrings, so an edited comment, docstring or blank line leaves the kernels current
(issue 31: a comment in sim/lie.py used to stale three kernels and send every run to Python).
"""

import ast
import hashlib

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
            "controllers/linalg.py", "planners/motion_reference.py", "sim/lie.py",
        ),
    ),
    "controllers._hqp_kernel": (
        "controllers/_hqp_kernel.c",
        (
            "controllers/hqp.py", "controllers/hqp_problem.py", "controllers/adaptive_compliance.py",
            "controllers/manipulability.py", "controllers/linalg.py", "controllers/feedforward.py",
            "controllers/force_control.py", "sim/lie.py",
        ),
    ),
    "sim._wrench_kernel": ("sim/_wrench_kernel.c", ("sim/wrench.py",)),
    "sim._dynamics_kernel": ("sim/_dynamics_kernel.c", ("sim/dynamics.py",)),
    "sim._floating_kernel": ("sim/_floating_kernel.c", ("sim/floating.py",)),
    "sim._culling_kernel": ("sim/_culling_kernel.c", ("sim/culling.py",)),
    "telemetry._row_kernel": ("telemetry/_row_kernel.c", ("telemetry/rows.py",)),
}


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` with the docstring (a leading string expression) of the module, every class and every
    function removed; an emptied body gets ``pass`` so the tree stays a valid module."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def code_digest(source: bytes | str) -> str:
    """SHA-256 of a Python module's code: its syntax tree without docstrings, dumped without positions.
    Comments, docstrings, blank lines and line breaks inside expressions do not change it; any change to
    a statement, a name or a constant does. The dump's format belongs to the interpreter version, which
    is also the version a C extension is built for, so setup.py and sim.kernels agree."""
    tree = _strip_docstrings(ast.parse(source))
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()
