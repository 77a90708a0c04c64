"""Build the optional compiled kernels (C extensions; everything else is in pyproject.toml).

Each kernel is the 1 kHz hot path of one component (sim/kernels.py explains the design). They are
``optional``: without a C compiler the build skips them with a warning and the pure-Python paths run
(same equations, slower). Two digests are compiled in, so that ``sim.kernels`` can tell a stale build
from a current one: the SHA-256 of the C source with the shared headers, and the code digest of each
Python reference module the kernel ports (its syntax tree without docstrings; ``sim/_kernel_manifest.py``
lists the modules and defines the digest). ``-ffp-contract=off`` keeps
every a·b + c a separate multiply and add (no fused multiply-add), so the float arithmetic matches the
Python reference operation for operation.
"""

import hashlib
import runpy
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).parent
#: the kernels and what they are built from (the same table sim.kernels reads)
MANIFEST = runpy.run_path(str(ROOT / "sim" / "_kernel_manifest.py"))


def _sha256(*paths: str) -> str:
    """SHA-256 of the files' bytes, concatenated in order ("missing" if one is absent)."""
    files = [ROOT / p for p in paths]
    if not all(f.exists() for f in files):
        return "missing"
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()


def _code_digest(path: str) -> str:
    """The digest of a Python reference module's code (docstrings and comments excluded; the manifest's
    code_digest, which sim.kernels compares with)."""
    file = ROOT / path
    return MANIFEST["code_digest"](file.read_bytes()) if file.exists() else "missing"


def _extension(name: str, source: str, reference: tuple[str, ...]) -> Extension:
    headers = list(MANIFEST["SHARED_HEADERS"])
    references = ",".join(f"{p}={_code_digest(p)}" for p in reference)
    return Extension(
        f"dockbench.{name}",  # installed as dockbench.sim._…, dockbench.controllers._… (package-dir: _packages)
        [source],
        depends=headers + list(reference),
        define_macros=[
            ("KERNEL_SOURCE_SHA256", f'"{_sha256(source, *headers)}"'),
            ("KERNEL_REFERENCE_SHA256", f'"{references}"'),
        ],
        extra_compile_args=["-O2", "-ffp-contract=off", "-fno-fast-math", "-std=c99"],
        optional=True,
    )


#: the repository's top-level folders that install as dockbench.<folder> (nothing else lands at the top level
#: of site-packages); dockbench/ itself holds the public API
SUBPACKAGES = ("sim", "controllers", "planners", "telemetry", "hand", "bridges", "experiments", "assets", "scenarios")


def _packages() -> tuple[list[str], dict[str, str]]:
    """Every package under the mapped folders (a folder with an __init__.py), and the folder of each top one."""
    packages, package_dir = ["dockbench"], {"dockbench": "dockbench"}
    for top in SUBPACKAGES:
        package_dir[f"dockbench.{top}"] = top
        for init in sorted((ROOT / top).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT / top)
            packages.append(".".join(("dockbench", top, *rel.parts)))
    return packages, package_dir


PACKAGES, PACKAGE_DIR = _packages()

setup(
    packages=PACKAGES,
    package_dir=PACKAGE_DIR,
    package_data={
        "dockbench": ["py.typed"],
        "dockbench.assets": ["**/*.xml", "**/*.yaml", "**/*.urdf", "**/*.stl", "**/*.obj", "**/*.png", "NOTICE"],
        "dockbench.scenarios": ["**/*.yaml"],
    },
    ext_modules=[_extension(n, s, r) for n, (s, r) in MANIFEST["KERNELS"].items()],
)
