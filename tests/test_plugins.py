"""Plugins (sim/plugins.py, docs/extending.md): a user's controller in its own file, outside the repository,
used by the stock CLI through the scenario's ``plugins:``, through ``--plugin`` and through an installed
package's entry point; and the errors a broken plugin gives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from dockbench.controllers.base import CONTROLLERS
from dockbench.sim import plugins
from dockbench.sim.errors import ScenarioError
from dockbench.sim.scenario import load_scenario, resolve_scenario

from tests.helpers import REPO

EXAMPLE = REPO / "examples" / "plugins" / "my_controller.py"

TRACKING = """\
name: my_tracking
{plugins}robot: {{type: iiwa14}}
sim: {{settle_time: 0.5}}
tool: {{type: probe}}
planner: {{type: figure8}}
controller: {{type: jt_impedance}}
gates:
  - {{metric: tracking.max_segment_pos_rms, max: 0.01}}
  - {{metric: contact.max_contacts, max: 0}}
"""


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # the checkout, installed or not
    return subprocess.run([sys.executable, "-m", "dockbench.experiments.run_docking", *args, "--no-progress"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _meta(cwd: Path) -> dict:
    (folder,) = (cwd / "runs").glob("*/*")
    return json.loads((folder / "meta.json").read_text())


def test_the_walkthrough_controller_runs_from_a_folder_outside_the_repo(tmp_path: Path) -> None:
    """docs/extending.md end to end: the example file and a scenario naming it in ``plugins:``, in a
    temporary folder; the stock CLI runs it, the gates pass and meta.json records the plugin."""
    assert not tmp_path.resolve().is_relative_to(REPO)
    shutil.copy(EXAMPLE, tmp_path / "my_controller.py")
    (tmp_path / "track.yaml").write_text(TRACKING.format(plugins="plugins: [my_controller.py]\n"))
    r = _cli(tmp_path, "--scenario", "track.yaml")  # a plugin is code: refused without the opt-in
    assert r.returncode == 1 and "Traceback" not in r.stderr
    want = "track.yaml: plugins[0]: plugin 'my_controller.py' is Python code and is not run without an opt-in"
    assert want in r.stderr
    assert "--allow-plugins" in r.stderr and "DOCKBENCH_ALLOW_PLUGINS=1" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "runs").exists()
    r = _cli(tmp_path, "--scenario", "track.yaml", "--allow-plugins")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "controller jt_impedance" in r.stdout and "verdict    PASS" in r.stdout
    scenario = _meta(tmp_path)["scenario"]
    assert scenario["plugins"] == [str((tmp_path / "my_controller.py").resolve())]
    assert scenario["controller"]["type"] == "jt_impedance" and scenario["controller"]["k_p"] == 600.0
    # a rerun from the recorded scenario (a shared run folder) asks again before the plugin's file runs
    code = ("import json, sys; from dockbench.sim.scenario import scenario_from_dict; "
            "scenario_from_dict(json.load(open(sys.argv[1]))['scenario'], file='meta.json')")
    (folder,) = (tmp_path / "runs").glob("*/*")
    env = {k: v for k, v in os.environ.items() if k != plugins.ALLOW_ENV}
    r = subprocess.run([sys.executable, "-c", code, str(folder / "meta.json")], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, env={**env, "PYTHONPATH": str(REPO)})
    assert r.returncode == 1 and "meta.json: plugins[0]: plugin " in r.stderr and "is Python code" in r.stderr


def test_cli_plugin_flag_imports_a_module_by_name(tmp_path: Path) -> None:
    """``--plugin my_controller`` (a module in the working directory); without it the type is unknown and the
    message lists the known ones."""
    shutil.copy(EXAMPLE, tmp_path / "my_controller.py")
    (tmp_path / "track.yaml").write_text(TRACKING.format(plugins=""))
    r = _cli(tmp_path, "--scenario", "track.yaml")
    assert r.returncode == 1 and "unknown controller type 'jt_impedance'; known: hqp, khatib" in r.stderr
    r = _cli(tmp_path, "--scenario", "track.yaml", "--plugin", "my_controller")
    assert r.returncode == 0, r.stdout + r.stderr
    assert _meta(tmp_path)["scenario"]["plugins"] == ["my_controller"]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def _plugin_source(type_name: str) -> str:
    return EXAMPLE.read_text().replace('"jt_impedance"', repr(type_name))


def test_an_installed_entry_point_is_loaded_once(tmp_path: Path, monkeypatch) -> None:
    """A package that declares ``[project.entry-points."dockbench.plugins"]`` is imported the first time a
    scenario is read (here a dist-info written by the test on sys.path)."""
    _write(tmp_path / "ep_user_pkg" / "__init__.py", "")
    (tmp_path / "ep_user_pkg" / "ctl.py").write_text(_plugin_source("jt_impedance_ep"))
    info = tmp_path / "ep_user_pkg-1.0.dist-info"
    _write(info / "METADATA", "Metadata-Version: 2.1\nName: ep-user-pkg\nVersion: 1.0\n")
    _write(info / "entry_points.txt", "[dockbench.plugins]\nmine = ep_user_pkg.ctl\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_entry_points_loaded", False)
    assert "jt_impedance_ep" not in CONTROLLERS
    assert "mine" in plugins.load_entry_points()
    assert "jt_impedance_ep" in CONTROLLERS
    assert plugins.load_entry_points() == []  # once per process


def test_a_broken_entry_point_names_itself(tmp_path: Path, monkeypatch) -> None:
    _write(tmp_path / "ep_broken.py", "raise RuntimeError('boom')\n")
    _write(tmp_path / "ep_broken-1.0.dist-info" / "METADATA", "Metadata-Version: 2.1\nName: ep-broken\nVersion: 1.0\n")
    _write(tmp_path / "ep_broken-1.0.dist-info" / "entry_points.txt", "[dockbench.plugins]\nbroken = ep_broken\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_entry_points_loaded", False)
    want = r"installed plugin 'broken' \(ep_broken.*RuntimeError: boom \(.*ep_broken.py:1\)"
    with pytest.raises(ScenarioError, match=want):
        plugins.load_entry_points()
    monkeypatch.setattr(plugins, "_entry_points_loaded", True)


def test_plugin_errors_name_the_file_the_key_and_the_cause(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"

    def load(entries: str) -> None:
        scenario.write_text(TRACKING.format(plugins=f"plugins: {entries}\n"))
        load_scenario(scenario, allow_plugins=True)

    with pytest.raises(ScenarioError, match=r"s\.yaml.*plugins\[0\].*plugin file not found"):
        load("[missing.py]")
    with pytest.raises(ScenarioError, match=r"plugins\[1\].*no module named 'no_such_plugin_xyz'"):
        load(f"[{EXAMPLE}, no_such_plugin_xyz]")
    _write(tmp_path / "bad_plugin.py", "import math\n\nx = 1 / 0\n")
    with pytest.raises(ScenarioError, match=r"plugins\[0\].*ZeroDivisionError: division by zero \(.*bad_plugin.py:3\)"):
        load("[bad_plugin]")
    with pytest.raises(ScenarioError, match=r"plugins.*expected a list"):
        load("my_controller.py")


def test_shipped_scenarios_are_found_by_name() -> None:
    assert resolve_scenario("iiwa14_docking") == REPO / "scenarios" / "iiwa14_docking.yaml"
    assert resolve_scenario("orbit/iiwa14_orbit_floating_target.yaml").is_file()
    with pytest.raises(ScenarioError, match="closest shipped scenarios: iiwa14_docking"):
        resolve_scenario("iiwa14_dockin")


def _marker_plugin(folder: Path, name: str, body: str = "") -> Path:
    """A plugin file that leaves a marker file when it runs (so a test sees whether code ran)."""
    marker = folder / f"{name}.ran"
    return _write(folder / f"{name}.py", f"from pathlib import Path\nPath({str(marker)!r}).write_text('x')\n{body}")


def test_a_plugin_runs_only_with_an_opt_in(tmp_path: Path, monkeypatch) -> None:
    """A scenario's ``plugins:`` (a file or a module beside it), and ``--set plugins=[…]``, are refused
    without the opt-in, with one line naming the file, the key, the plugin and the three ways to allow it;
    nothing of the plugin runs. ``allow_plugins=True`` and ``DOCKBENCH_ALLOW_PLUGINS=1`` import it."""
    monkeypatch.delenv(plugins.ALLOW_ENV, raising=False)
    scenario = tmp_path / "s.yaml"
    for entry in ("optin_file_a.py", "optin_mod_a"):
        _marker_plugin(tmp_path, entry.removesuffix(".py"))
        scenario.write_text(TRACKING.format(plugins=f"plugins: [{entry}]\n").replace("jt_impedance", "khatib"))
        with pytest.raises(ScenarioError) as err:
            load_scenario(scenario)
        msg = str(err.value)
        assert msg.startswith(f"{scenario}: plugins[0]: plugin '{entry}' is Python code") and "\n" not in msg
        for way in ("--allow-plugins", "DOCKBENCH_ALLOW_PLUGINS=1", "allow_plugins=True"):
            assert way in msg
        assert not (tmp_path / f"{entry.removesuffix('.py')}.ran").exists()  # nothing ran
    _marker_plugin(tmp_path, "optin_set_b")
    scenario.write_text(TRACKING.format(plugins="").replace("jt_impedance", "khatib"))
    with pytest.raises(ScenarioError, match=r"plugins\[0\]: plugin 'optin_set_b.py' is Python code"):
        load_scenario(scenario, ["plugins=[optin_set_b.py]"])
    assert not (tmp_path / "optin_set_b.ran").exists()
    with pytest.raises(ScenarioError, match="is Python code"):
        load_scenario(scenario, ["plugins=[optin_set_b.py]"], allow_plugins=False)
    monkeypatch.setenv(plugins.ALLOW_ENV, "1")
    assert load_scenario(scenario, ["plugins=[optin_set_b.py]"]).plugins == (str(tmp_path / "optin_set_b.py"),)
    assert (tmp_path / "optin_set_b.ran").exists()
    monkeypatch.delenv(plugins.ALLOW_ENV)
    scenario.write_text(TRACKING.format(plugins="plugins: [optin_mod_a]\n").replace("jt_impedance", "khatib"))
    assert load_scenario(scenario, allow_plugins=True).plugins == ("optin_mod_a",)
    assert (tmp_path / "optin_mod_a.ran").exists()
    # imported once: naming it again runs nothing, so it needs no second opt-in (Scenario.replace)
    assert load_scenario(scenario).plugins == ("optin_mod_a",)


def test_a_plugin_that_exits_or_interrupts_on_import_is_an_error(tmp_path: Path) -> None:
    """``sys.exit(0)`` in a plugin would end the run with exit status 0 ("all gates pass"); a
    ``KeyboardInterrupt`` raised by its code would look like Ctrl-C. Both are errors naming the plugin."""
    scenario = tmp_path / "s.yaml"
    _write(tmp_path / "exits_plugin.py", "import sys\n\nsys.exit(0)\n")
    _write(tmp_path / "kbi_plugin.py", "raise KeyboardInterrupt\n")
    scenario.write_text(TRACKING.format(plugins="plugins: [exits_plugin.py]\n"))
    with pytest.raises(ScenarioError, match=r"plugins\[0\]: plugin 'exits_plugin.py' called sys.exit\(0\) while being "
                       r"imported \(.*exits_plugin.py:3\)"):
        load_scenario(scenario, allow_plugins=True)
    scenario.write_text(TRACKING.format(plugins="plugins: [kbi_plugin]\n"))
    with pytest.raises(ScenarioError, match=r"plugin 'kbi_plugin' raised KeyboardInterrupt while being imported"):
        load_scenario(scenario, allow_plugins=True)
    r = _cli(tmp_path, "--scenario", "s.yaml", "--allow-plugins", "--set", "plugins=[exits_plugin.py]")
    assert r.returncode == 1 and "called sys.exit(0)" in r.stderr and "Traceback" not in r.stderr
