"""The package as a user installs it (issue 20): a wheel built from the repository's files, installed in a
fresh virtual environment, run from an empty directory.

The wheel holds one top-level package, ``dockbench`` (the repository's folders are its subpackages:
``dockbench.sim``, ``dockbench.controllers``, …), with ``py.typed``, the models, the shipped scenarios and the
compiled kernels; ``import dockbench`` exposes the public API; ``dockbench-run --scenario NAME`` runs a
shipped scenario by name with the compiled kernels. The environment sees the test interpreter's packages
(the dependencies are not downloaded again) but its own dockbench comes first.

How the new environment sees the test interpreter's packages matters (issue 30): ``venv
--system-site-packages`` exposes the *base* interpreter's site-packages, so when the tests themselves run
inside a venv (the way a researcher installs) the dependencies vanish. :func:`parent_path_file` instead
writes the test interpreter's own import path (whatever made it: a venv, conda, a system Python, cmeel's
prefix for Pinocchio) into a ``.pth`` file of the new environment, after its own site-packages, and leaves
out the checkout, so the wheel's dockbench is the one imported.
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from tests.helpers import REPO

TOP_LEVEL = ("sim", "controllers", "planners", "telemetry", "hand", "bridges", "experiments", "assets", "scenarios")


def test_nothing_is_imported_under_a_bare_top_level_name() -> None:
    """A run, the lazy registry entries and the CLI import only dockbench.* modules: a bare ``sim`` or
    ``controllers`` module beside dockbench.sim would be a second copy with its own registries."""
    code = (
        "import sys, dockbench\n"
        "from dockbench.sim.loop import run\n"
        "from dockbench.experiments import run_docking, campaign\n"
        "for reg in (dockbench.CONTROLLERS, dockbench.PLANNERS, dockbench.TOOLS, dockbench.TARGETS):\n"
        "    [reg.get(n) for n in reg.names()]\n"
        "sc = dockbench.load_scenario('iiwa14_docking_hqp').replace()\n"
        "run(sc, out_root=None, duration=0.05)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {TOP_LEVEL!r}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout




def _repo_files() -> list[str]:
    """The files a clean clone has (tracked, plus new files not ignored), relative to the repository."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: no clean file list to build a wheel from")
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True)
    return [f for f in out.stdout.split("\n") if f and (REPO / f).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("clone")
    for f in _repo_files():
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, src / f)
    dist = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
                       capture_output=True, text=True, timeout=1200)
    if r.returncode != 0 and "Could not find a version" in r.stderr:
        pytest.skip(f"the build backend could not be fetched (no package index): {r.stderr[-300:]}")
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = dist.glob("dockbench-*.whl")
    return whl


@pytest.mark.slow
def test_the_wheel_installs_one_top_level_package_with_its_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"dockbench"}, tops
    for want in ("dockbench/__init__.py", "dockbench/py.typed", "dockbench/sim/loop.py",
                 "dockbench/scenarios/iiwa14_docking.yaml",
                 "dockbench/scenarios/orbit/iiwa14_orbit_floating_target.yaml",
                 "dockbench/assets/robots/iiwa14.xml", "dockbench/assets/robots/limits.yaml"):
        assert want in names, want
    kernels = sorted(n.split(".")[0].removeprefix("dockbench/").replace("/", ".") for n in names if ".so" in n)
    manifest = runpy.run_path(str(REPO / "sim" / "_kernel_manifest.py"))
    assert kernels == sorted(manifest["KERNELS"]), kernels  # every compiled kernel the manifest lists


def _import_path(python: str | Path) -> list[str]:
    """The import path (sys.path) of an interpreter, as it starts in an empty directory."""
    r = subprocess.run([str(python), "-c", "import json, sys; print(json.dumps(sys.path))"], cwd=tempfile.gettempdir(),
                       capture_output=True, text=True, timeout=120, check=True)
    return json.loads(r.stdout)


def _checkout_source(entry: str) -> bool:
    """Whether an import-path entry is the checkout's own source (its root, or a folder of it that is not an
    environment's site-packages: a venv may live inside the checkout, as .ci/run's does)."""
    path, repo = Path(entry).resolve(), REPO.resolve()
    if not path.is_relative_to(repo):
        return False
    return not any(part in ("site-packages", "dist-packages") for part in path.relative_to(repo).parts)


def parent_path_file(python: Path, parent: str | Path = sys.executable) -> Path:
    """Make the environment of ``python`` see the packages that ``parent`` sees: the parent's import-path
    entries that the new environment lacks (its site-packages, and whatever its .pth files added, e.g.
    cmeel's prefix that holds Pinocchio), minus the checkout, written as plain lines of a ``.pth`` file in the
    new environment's site-packages. Plain lines add directories without running their .pth files, so the
    checkout's editable-install finder stays out and the wheel's dockbench is imported."""
    own = _import_path(python)
    prefix = Path(python).parent.parent
    site_dir = next(p for p in own if p.endswith("site-packages") and Path(p).is_relative_to(prefix))
    extra = [p for p in _import_path(parent) if p and p not in own and Path(p).is_dir() and not _checkout_source(p)]
    pth = Path(site_dir) / "_dockbench_test_parent.pth"
    pth.write_text("".join(f"{p}\n" for p in extra))
    return pth


def test_parent_path_file_sees_the_parent_packages_but_not_the_checkout(tmp_path: Path) -> None:
    """The fresh venv of the install test imports the test interpreter's dependencies whichever way that
    interpreter was made (here: a plain venv, the way issue 30 found the old --system-site-packages recipe
    failing), and not the checkout's dockbench."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    probe = "import importlib.util as u; print(u.find_spec('pinocchio') is not None, u.find_spec('dockbench'))"
    before = subprocess.run([str(py), "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert before.stdout.split()[0] == "False", before.stdout  # a plain venv sees none of the parent's packages
    parent_path_file(py)
    after = subprocess.run([str(py), "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert after.returncode == 0, after.stderr
    found, dockbench_spec = after.stdout.split(" ", 1)
    assert found == "True", after.stdout
    assert dockbench_spec.strip() == "None", after.stdout  # the checkout's editable dockbench is not visible


@pytest.mark.slow
def test_installed_in_a_fresh_venv_it_runs_a_shipped_scenario_by_name(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    parent_path_file(py)
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DOCKBENCH_KERNELS")}
    probe = (
        "import dockbench, dockbench.sim.kernels as k; print(dockbench.__file__); "
        "print(sorted(dockbench.CONTROLLERS.names())); print(dockbench.load_scenario('iiwa14_docking').name); "
        "print(k.status('sim._dynamics_kernel')[1])"
    )
    r = subprocess.run([str(py), "-c", probe], cwd=empty, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    where, controllers, name, kernel = r.stdout.strip().split("\n")
    assert Path(where).resolve().is_relative_to(venv.resolve()), where  # the wheel's, not the checkout's
    assert controllers == "['hqp', 'khatib', 'se3_lie']" and name == "iiwa14_docking"
    assert kernel == "compiled", kernel
    r = subprocess.run([str(venv / "bin" / "dockbench-run"), "--scenario", "iiwa14_docking", "--no-progress"],
                       cwd=empty, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verdict    PASS" in r.stdout and "(compiled kernels)" in r.stdout, r.stdout
    assert len(list((empty / "runs" / "iiwa14_docking").iterdir())) == 1
    # the one command (dockbench/cli.py): its help, a shipped scenario listed by name, a usage error is 64
    dockbench = str(venv / "bin" / "dockbench")
    r = subprocess.run([dockbench, "--help"], cwd=empty, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "campaign run" in r.stdout and "doctor" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([dockbench, "scenarios", "list"], cwd=empty, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "orbit/iiwa14_orbit_floating_target" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([dockbench, "run", "--scenario", "iiwa14_docking", "--set", "controller.k", "800"], cwd=empty,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 64 and "dockbench run: error: unrecognized arguments: 800" in r.stderr, r.stderr
