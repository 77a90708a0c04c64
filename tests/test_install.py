"""The package as a user installs it (issue 20): a wheel built from the repository's files, installed in a
fresh virtual environment, run from an empty directory.

The wheel holds one top-level package, ``dockbench`` (the repository's folders are its subpackages:
``dockbench.sim``, ``dockbench.controllers``, …), with ``py.typed``, the models, the shipped scenarios and the
compiled kernels; ``import dockbench`` exposes the public API; ``dockbench-run --scenario NAME`` runs a
shipped scenario by name with the compiled kernels. The environment sees the test interpreter's packages
(``--system-site-packages``: the dependencies are not downloaded again) but its own dockbench comes first.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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
    kernels = [n for n in names if n.startswith(("dockbench/sim/_", "dockbench/controllers/_")) and ".so" in n]
    assert len(kernels) == 6, kernels  # the six compiled kernels (sim/_kernel_manifest.py)


@pytest.mark.slow
def test_installed_in_a_fresh_venv_it_runs_a_shipped_scenario_by_name(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
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
