"""The ``dockbench`` command (dockbench/cli.py) and the exit codes of every command-line tool.

Exit codes: 0 = pass, 1 = error, 2 = a gate fails / unstable / INCOMPLETE, 64 = usage error (argparse's,
which would otherwise be 2 and look like a failed gate). The codes are checked from outside, in fresh
processes, for ``dockbench run`` and for ``python experiments/run_docking.py`` (the README's command,
which must keep working without editing ``sys.path``: the package is installed editable; here
``PYTHONPATH`` points at this checkout, which is what an editable install of it does).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dockbench import cli
from tests.helpers import REPO

EXPERIMENTS = REPO / "experiments"
#: an editable install of this checkout, for a script run by its path
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
       "OPENBLAS_NUM_THREADS": "1"}

#: every subcommand path that runs something, and the groups
LEAVES = [("run",), ("campaign",), ("campaign", "run"), ("campaign", "report"), ("plot",), ("export",),
          ("compare",), ("scenarios",), ("scenarios", "list"), ("scenarios", "show"), ("scenarios", "docs"),
          ("bench",), ("hand",), ("mirror",), ("mirror", "mock"), ("doctor",)]


def _dockbench(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dockbench.cli", *args], cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def _script(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXPERIMENTS / name), *args], cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped iiwa14 tracking with every planner segment shrunk to a few ms (0.06 s simulated in all)
    and one gate it passes with margin (no saturation): a complete run whose verdict is PASS."""
    d = yaml.safe_load((REPO / "scenarios" / "iiwa14_tracking.yaml").read_text())
    d["name"] = "cli_tiny"
    d["sim"]["settle_time"] = 0.0
    d["planner"].update(transition_duration=0.02, circle_duration=0.01, figure8_duration=0.01, stop_duration=0.01,
                        hold_duration=0.0, circle_radius=1e-4, figure8_ax=1e-4, figure8_ay=1e-4)
    d["gates"] = [{"metric": "safety.saturation_ratio", "max": 1.0}]
    path = tmp_path_factory.mktemp("cli") / "cli_tiny.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "bad.yaml"
    path.write_text("name: bad\nrobot: {type: ur5}\nplanner: {type: quintic}\ncontroller: {type: khatib}\n")
    return path


# ----------------------------------------------------------------------------------------------- help
def test_help_lists_every_subcommand_with_its_line_and_the_exit_codes() -> None:
    r = _dockbench("--help")
    assert r.returncode == 0, r.stderr
    for path in LEAVES:
        cmd = cli.COMMANDS[path[0]]
        if len(path) == 2:
            if path[1] not in cmd.commands:
                continue  # the tool's own subcommand (scenarios list): its parser's help lists it
            cmd = cmd.commands[path[1]]
        if cmd.target is None:
            continue  # a group: its subcommands are the lines
        assert re.search(rf"^  {' '.join(path)} +{re.escape(cmd.summary)}$", r.stdout, re.M), (path, r.stdout)
    for code, meaning in cli.EXIT_CODES:
        assert f"  {code:<4} {meaning}" in r.stdout


@pytest.mark.parametrize("path", LEAVES, ids=" ".join)
def test_each_subcommand_has_help(path: tuple[str, ...], capsys: pytest.CaptureFixture) -> None:
    """In this process (cli.main with an argv): the subcommand's own parser, named after it."""
    assert cli.main([*path, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: dockbench {' '.join(path)} "), out[:200]


def test_groups_and_the_program_without_a_command_are_usage_errors(capsys: pytest.CaptureFixture) -> None:
    assert cli.main([]) == cli.EXIT_USAGE
    assert cli.main(["campaign"]) == cli.EXIT_USAGE
    assert cli.main(["campaign", "sweep"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "error: unknown command 'sweep'" in err and "commands: run, report" in err
    assert cli.main(["campaign", "c.yaml", "--jobs", "2"]) == cli.EXIT_USAGE  # the old dockbench-campaign habit
    assert "did you mean dockbench campaign run c.yaml?" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------- exit codes
@pytest.mark.parametrize(("args", "code", "says"), [
    pytest.param(("--set", "gates[0].max=-1"), 2, "verdict    FAIL", id="gate-fails-2"),
    pytest.param((), 0, "verdict    PASS", id="pass-0"),
    pytest.param(("--set", "controller.k", "800"), 64,
                 "error: unrecognized arguments: 800 (--set takes KEY=VALUE in one word: --set controller.k=VALUE)",
                 id="usage-64"),
])
def test_the_exit_codes_of_dockbench_run_and_the_script(tiny: Path, tmp_path: Path, args, code: int,
                                                        says: str) -> None:
    """The same outcome, the same code, from ``dockbench run`` and ``python experiments/run_docking.py``."""
    argv = ("--scenario", str(tiny), "--out", str(tmp_path), "--no-progress", *args)
    for r, prog in ((_dockbench("run", *argv), "dockbench run"), (_script("run_docking.py", *argv), "run_docking.py")):
        assert r.returncode == code, (prog, r.stdout, r.stderr)
        assert says in r.stdout + r.stderr and "Traceback" not in r.stderr, (prog, r.stdout, r.stderr)
        if code == 64:
            assert r.stderr.startswith(f"usage: {prog} "), r.stderr
    assert len(list(tmp_path.glob("cli_tiny/*"))) == (0 if code == 64 else 2)  # a usage error runs nothing


@pytest.mark.parametrize(("args", "code", "says"), [
    pytest.param(("run", "--scenario", "iiwa14_docking", "--duration", "0.05"), 2, "verdict    INCOMPLETE",
                 id="incomplete-2"),
    pytest.param(("run", "--scenario", "{bad}"), 1, "error: ", id="bad-scenario-1"),
    pytest.param(("run", "--scenario", "no_such_scenario"), 1, "no shipped scenario of that name", id="no-file-1"),
    pytest.param(("run",), 64, "the following arguments are required: --scenario", id="missing-option-64"),
    pytest.param(("run", "--scenario", "iiwa14_docking", "--no-such-option"), 64, "unrecognized arguments",
                 id="unknown-option-64"),
    pytest.param(("rnu", "--scenario", "iiwa14_docking"), 64, "unknown command 'rnu'; did you mean run?",
                 id="unknown-command-64"),
    pytest.param(("scenarios", "show", "no_such_scenario"), 1, "no shipped scenario of that name",
                 id="scenarios-show-1"),
])
def test_the_exit_code_table(bad: Path, tmp_path: Path, args, code: int, says: str) -> None:
    r = _dockbench(*(a.replace("{bad}", str(bad)) for a in args), *(("--out", str(tmp_path), "--no-progress")
                                                                    if args[0] == "run" and len(args) > 1 else ()))
    assert r.returncode == code, (r.stdout, r.stderr)
    assert says in r.stdout + r.stderr and "Traceback" not in r.stderr, (r.stdout, r.stderr)


def test_every_script_exits_64_on_a_usage_error(capsys: pytest.CaptureFixture) -> None:
    """Each experiments module with a main(argv) builds its parser from dockbench.cli.ArgumentParser."""
    import importlib

    for f in sorted(EXPERIMENTS.glob("*.py")):
        module = importlib.import_module(f"dockbench.experiments.{f.stem}")
        if not hasattr(module, "main"):
            continue  # a helper module (live_cli)
        with pytest.raises(SystemExit) as exc:
            module.main(["--no-such-option-anywhere"])
        assert exc.value.code == cli.EXIT_USAGE, f.name
    assert "--no-such-option-anywhere" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------- doctor
def test_doctor_names_the_kernels_the_extras_opengl_and_ros2() -> None:
    from dockbench.sim import _kernel_manifest

    r = _dockbench("doctor", "--gl-timeout", "120")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(rf"^kernels +\d/{len(_kernel_manifest.KERNELS)} compiled; runs use: ", out, re.M), out
    for name in _kernel_manifest.KERNELS:  # each with "compiled" or why not
        assert re.search(rf"^  {re.escape(name)} +(compiled|is not built|is stale)", out, re.M), (name, out)
    for extra in ("video", "ros2", "mcap", "rerun", "notebook", "ray"):
        assert re.search(rf"^  {extra} +(ok|missing \(pip install -e '\.\[{extra}\]'\))", out, re.M), (extra, out)
    assert "MUJOCO_GL=" in out and re.search(r"offscreen: (ok|NO)", out)
    assert "--ros2 (backend auto) would use:" in out and "rclpy" in out and "cyclonedds" in out


# ----------------------------------------------------------------------------------------------- scripts
def sys_path_edits(source: str) -> list[int]:
    """Lines of ``source`` that touch ``sys.path`` (``sys.path.insert(…)``, ``sys.path[:0] = …``, …)."""
    return sorted({node.lineno for node in ast.walk(ast.parse(source))
                   if isinstance(node, ast.Attribute) and node.attr == "path"
                   and isinstance(node.value, ast.Name) and node.value.id == "sys"})


def plain_argparse(source: str) -> list[int]:
    """Lines of ``source`` that build an ``argparse.ArgumentParser`` (whose usage errors exit 2, not 64)."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "ArgumentParser" and isinstance(node.func.value, ast.Name)
                  and node.func.value.id == "argparse")


def test_no_script_edits_sys_path_or_builds_a_plain_argparse_parser() -> None:
    found = {f.name: (sys_path_edits(f.read_text()), plain_argparse(f.read_text()))
             for f in sorted(EXPERIMENTS.glob("*.py"))}
    assert {n: v for n, v in found.items() if v != ([], [])} == {}


def test_the_script_checkers_find_what_they_must() -> None:
    old = ('import sys\nfrom pathlib import Path\nif __package__ in (None, ""):\n'
           '    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))\nsys.path[:0] = ["x"]\n')
    assert sys_path_edits(old) == [4, 5]
    assert plain_argparse("import argparse\nap = argparse.ArgumentParser(description='x')\n") == [2]
    assert plain_argparse("from dockbench.cli import ArgumentParser\nap = ArgumentParser()\n") == []


def test_experiments_readme_indexes_every_script_once() -> None:
    """experiments/README.md: one table row per script, saying user tool (with its dockbench command) or
    research/QA."""
    text = (EXPERIMENTS / "README.md").read_text()
    rows = re.findall(r"^\| `([a-z0-9_]+\.py)` \| ([^|]+) \|", text, re.M)
    names = [n for n, _ in rows]
    assert sorted(names) == sorted(f.name for f in EXPERIMENTS.glob("*.py") if f.name != "__init__.py")
    assert len(set(names)) == len(names)
    kinds = {n: k.strip() for n, k in rows}
    assert set(kinds.values()) <= {"user tool", "research/QA", "helper"}, kinds
    assert kinds["run_docking.py"] == "user tool"
    for target in _targets(cli.COMMANDS):  # every subcommand's module is a user tool
        assert kinds[target.split(":")[0].rsplit(".", 1)[-1] + ".py"] == "user tool", target


def _targets(commands: dict[str, cli.Command]) -> list[str]:
    out = []
    for cmd in commands.values():
        if cmd.target and cmd.target.startswith("dockbench.experiments."):
            out.append(cmd.target)
        out.extend(_targets(cmd.commands))
    return out


def test_a_child_process_runs_this_checkout() -> None:
    """cli.child_env: a tool's child Python (bench workers, check_determinism, fault_injection) imports the
    dockbench its parent imported, here this checkout, whatever else is installed."""
    env = cli.child_env({"PYTHONPATH": "/elsewhere"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(REPO), "/elsewhere"]
    r = subprocess.run([sys.executable, "-c", "import dockbench; print(dockbench.__file__)"], cwd="/",
                       env=cli.child_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and Path(r.stdout.strip()) == REPO / "dockbench" / "__init__.py", r.stdout + r.stderr
