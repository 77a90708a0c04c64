"""Bounded inputs (issue 23): every numeric scenario key has a finite range, every list and string a
length bound; the faults found by fault testing give a ScenarioError naming the file and the key,
before any work (no OverflowError, TypeError, hang or 820 GiB allocation)."""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from dockbench.controllers.insertion import InsertionConfig
from dockbench.experiments.run_docking import main as cli_main
from dockbench.sim import loop
from dockbench.sim.config import MAX_LIST_LENGTH, check_value, parse_config, short_repr, walk_fields
from dockbench.sim.errors import ScenarioError
from dockbench.sim.loop import build, check_budget, run
from dockbench.sim.scenario import (
    GateSpec,
    RobotConfig,
    SimConfig,
    StartConfig,
    TelemetryConfig,
    WrenchConfig,
    _registries,
    folder_name,
    load_scenario,
    scenario_from_dict,
)

from tests.helpers import SCENARIOS, scenario_dict


def _all_configs() -> list[tuple[str, type]]:
    out = [("robot", RobotConfig), ("sim", SimConfig), ("start", StartConfig), ("wrench", WrenchConfig),
           ("telemetry", TelemetryConfig), ("gates[]", GateSpec), ("insertion", InsertionConfig)]
    regs = _registries()
    for kind in ("tool", "target", "planner", "controller"):
        out += [(f"{kind}({name})", regs[kind].get(name).Config) for name in regs[kind].names()]
    return out


def _numeric_fields() -> list[tuple[str, dataclasses.Field, type]]:
    return [(f"{prefix}.{key}", f, tp) for prefix, cls in _all_configs() for key, f, tp in walk_fields(cls)
            if tp in (int, float)]


def test_every_numeric_key_has_a_finite_range() -> None:
    fields = _numeric_fields()
    assert len(fields) > 120
    unbounded = []
    for key, f, _tp in fields:
        m = f.metadata
        lo = m.get("gt") if m.get("gt") is not None else m.get("ge")
        hi = m.get("lt") if m.get("lt") is not None else m.get("le")
        if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            unbounded.append(key)
    assert not unbounded, f"numeric keys without a finite range: {unbounded}"


def test_the_ranges_are_in_the_generated_docs() -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "scenarios.md").read_text()
    assert "`sim.duration` | a number or null (> 0.0, ≤ 86400.0)" in docs
    assert "`target.segments` | an integer (≥ 6, ≤ 256)" in docs
    assert "`controller.k` | a number (≥ 0.0, ≤ 1000000.0)" in docs


REQUIRED = {RobotConfig: {"type": "iiwa14"}, GateSpec: {"metric": "docking.depth"}}


def _set_path(data: dict, key: str, value) -> None:
    node = data
    parts = key.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value


def _parse_one(cls: type, key: str, value) -> None:
    """Parse ``{key: value}`` (dotted key into nested records) as ``cls``, with the other required keys
    (of ``cls`` or of a nested record on the way) filled in with a valid value."""
    data: dict = dict(REQUIRED.get(cls, {}))
    _set_path(data, key, value)
    for _ in range(10):
        try:
            parse_config(cls, data, file="x.yaml", path="blk")
            return
        except ScenarioError as exc:
            other = (exc.key or "").removeprefix("blk.")
            if "required key missing" not in exc.detail or other == key:
                raise
            _set_path(data, other, 1.0 if "number" in exc.detail else "x")
    raise AssertionError(f"{key}: could not fill the required keys")


@pytest.mark.parametrize("value", [10**400, -(10**400), 2**1024])
def test_integers_too_large_for_a_float_are_scenario_errors_for_every_numeric_key(value) -> None:
    """A 401-digit YAML integer used to raise OverflowError in float(); now every numeric key of every
    block (scalars, vectors, matrices) says it is out of range, naming the file and the key, in a
    message of bounded length."""
    seen = 0
    for _prefix, cls in _all_configs():
        for key, _f, tp in walk_fields(cls):
            if tp not in (int, float) or "[]" in key:
                continue
            for candidate in (value, [value] * 6, [[value] * 6] * 6, [value] * 3, [value] * 2, [value] * 5):
                with pytest.raises(ScenarioError) as exc:
                    _parse_one(cls, key, candidate)
                msg = str(exc.value)
                if "expected a list" in msg or "expected a number" in msg or "values, got" in msg:
                    continue  # the wrong shape for this key: try the next one
                break
            assert msg.startswith(f"x.yaml: blk.{key}"), msg
            assert "must be" in msg and len(msg) < 300, msg
            seen += 1
    assert seen > 110  # every numeric key but those inside lists of records (the hand schedule)


FAULTS = [
    # (label, key path, value, fragments of the message)
    ("iterations 2^31", ("sim", "iterations"), 2**31, ["sim.iterations", "must be <= 1000"]),
    ("control_period 1e300", ("sim", "control_period"), 1e300, ["sim.control_period", "must be <= 0.1"]),
    ("timestep 1e-300", ("sim", "timestep"), 1e-300, ["sim.timestep", "must be >= 1e-06"]),
    ("control_period 1e6 (was a hang)", ("sim", "control_period"), 1e6, ["sim.control_period"]),
    ("seat_gap 1e300", ("target", "seat_gap"), 1e300, ["target.seat_gap", "must be <= 1.0 m"]),
    ("bore_length 1e300", ("target", "bore_length"), 1e300, ["target.bore_length", "must be <= 1.0 m"]),
    ("shaft_length 1e300", ("tool", "shaft_length"), 1e300, ["tool.shaft_length", "must be <= 1.0 m"]),
    ("segments 100000 (> 60 s to build)", ("target", "segments"), 100000, ["target.segments", "<= 256"]),
    ("duration 1e6", ("sim", "duration"), 1e6, ["sim.duration", "<= 86400"]),
    ("400-digit settle_time", ("sim", "settle_time"), 10**400, ["sim.settle_time", "1000000000", "..."]),
    ("name '..' (wrote into the parent of --out)", ("name",), "..", ["name", "cannot name a folder"]),
    ("name with a slash", ("name",), "a/../../b", ["name", "cannot name a folder"]),
    ("name of 300 characters", ("name",), "n" * 300, ["name", "300 characters", "at most 100"]),
    ("a 1000-entry gates list", ("gates",), [{"metric": "docking.depth", "max": 1.0} for _ in range(101)],
     ["gates", "at most 100"]),
    ("a 20000-entry q_guess", ("robot", "q_guess"), [0.0] * 20000, ["robot.q_guess", f"at most {MAX_LIST_LENGTH}"]),
    ("2000 substeps per control step", ("sim", "control_period"), 0.02, ["sim.control_period", "2000 substeps"]),
]


@pytest.mark.parametrize("label, path, value, fragments", FAULTS, ids=[f[0] for f in FAULTS])
def test_faults_found_by_fault_testing_are_clean_errors(tmp_path: Path, label, path, value, fragments) -> None:
    d = scenario_dict("iiwa14_docking")
    node = d
    for k in path[:-1]:
        node = node.setdefault(k, {})
    node[path[-1]] = value
    if label.startswith("2000 substeps"):
        d["sim"]["timestep"] = 1e-5
    p = tmp_path / "x.yaml"
    p.write_text(yaml.safe_dump(d))
    t0 = time.perf_counter()
    with pytest.raises(ScenarioError) as exc:
        sc = load_scenario(p)
        build(sc)
    msg = str(exc.value)
    assert msg.startswith(f"{p}: "), msg
    for frag in fragments:
        assert frag in msg, (frag, msg)
    assert time.perf_counter() - t0 < 60.0  # not a timing assertion on speed: a guard against a hang


def test_belief_offset_without_position_defaults_to_zero() -> None:
    """belief_offset: {rpy_deg: …} used to take PoseConfig's default position [0.55, 0, 0.2]."""
    d = scenario_dict("iiwa14_docking")
    d["target"]["belief_offset"] = {"rpy_deg": [1.0, 0.0, 0.0]}
    sc = scenario_from_dict(d)
    assert sc.target.config.belief_offset.position == (0.0, 0.0, 0.0)
    T = sc.target.config.belief_offset.matrix()
    np.testing.assert_array_equal(T[:3, 3], 0.0)
    d["target"]["belief_offset"] = {}
    np.testing.assert_array_equal(scenario_from_dict(d).target.config.belief_offset.matrix(), np.eye(4))


@pytest.mark.parametrize("key", ["q_init", "q_guess"])
@pytest.mark.parametrize("q, index", [([3.0] * 7, 0), ([0.0, 0.0, 0.0, 2.1, 0.0, 0.0, 0.0], 3)])
def test_q_init_outside_the_joint_ranges_is_rejected(tmp_path: Path, key, q, index) -> None:
    """q_init of 10 rad used to be accepted: q_init (and the IK seed q_guess) must lie in the model's
    joint ranges (and, at load time, within ±2π)."""
    d = scenario_dict("iiwa14_docking")
    d["robot"][key] = q
    p = tmp_path / "x.yaml"
    p.write_text(yaml.safe_dump(d))
    with pytest.raises(ScenarioError, match=rf"robot\.{key}\[{index}\]: .* outside the range") as exc:
        build(load_scenario(p))
    assert str(exc.value).startswith(str(p)) and "joint" in str(exc.value)
    d["robot"][key] = [10.0] * 7
    p.write_text(yaml.safe_dump(d))
    with pytest.raises(ScenarioError, match=rf"robot\.{key}\[0\]: must be <= 6.28"):
        load_scenario(p)


def test_ik_failure_names_the_file_and_the_start_block(tmp_path: Path) -> None:
    d = scenario_dict("iiwa14_docking")
    d["target"]["pose"]["position"] = [2.5, 0.0, 0.2]  # out of the arm's reach
    p = tmp_path / "far.yaml"
    p.write_text(yaml.safe_dump(d))
    with pytest.raises(ScenarioError) as exc:
        build(load_scenario(p))
    msg = str(exc.value)
    assert msg.startswith(f"{p}: start: the start pose") and "not reachable" in msg and "IK did not converge" in msg


def test_mujoco_compile_errors_name_the_block_that_built_the_geometry(tmp_path: Path, monkeypatch) -> None:
    """A raw compiler message ('size 1 must be positive in geom') is translated to the scenario block
    whose keys produced the element (here the plate's box)."""
    import mujoco
    from dockbench.sim.interfaces import Plate

    original = Plate.build

    def bad_build(self, spec):
        original(self, spec)
        spec.geom("plate").size = [0.1, -1.0, 0.01]

    monkeypatch.setattr(Plate, "build", bad_build)
    d = scenario_dict("iiwa14_docking")
    d["target"] = {"type": "plate"}
    p = tmp_path / "plate.yaml"
    p.write_text(yaml.safe_dump(d))
    with pytest.raises(ScenarioError) as exc:
        build(load_scenario(p))
    msg = str(exc.value)
    assert msg.startswith(f"{p}: target: the assembled model does not compile"), msg
    assert "size 1 must be positive" in msg and "'plate'" in msg
    assert mujoco  # the compiler is MuJoCo's


def test_budget_check_names_the_key_and_the_sizes(monkeypatch) -> None:
    """A run whose telemetry does not fit on the disk is refused before the first step (it used to
    try to allocate 820 GiB up front)."""
    setup = build(scenario_from_dict(scenario_dict("iiwa14_docking")))
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**12, 10**12 - 2**30, 2**30))
    monkeypatch.setattr(loop, "_memory_available", lambda: 2**40)
    with pytest.raises(ScenarioError) as exc:
        check_budget(setup, 86400.0, Path("."), "sim.duration", "sim.duration 86400 s")
    msg = str(exc.value)
    for frag in ("sim.duration: sim.duration 86400 s is 86,400,001 control steps", "GiB of telemetry", "free",
                 "shorten the run"):
        assert frag in msg, msg
    # the metrics' memory: checked too (they are not flat in the duration): (1024 + 773 B) × 86,400,001 steps
    monkeypatch.setattr(loop, "_memory_available", lambda: 2**30)
    with pytest.raises(ScenarioError, match=r"scoring them needs about 145 GiB of memory, but 1 GiB"):
        check_budget(setup, 86400.0, Path("."), "sim.duration", "sim.duration 86400 s")
    # a run that fits in one block needs no disk at all when nothing is written
    assert check_budget(setup, 1.0, None, "sim.duration", "x") > 0


def test_run_refuses_a_run_the_disk_cannot_hold_before_any_step(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 10**6, 10**6))
    called = []
    monkeypatch.setattr(loop, "simulate", lambda *a, **k: called.append(1))
    d = scenario_dict("iiwa14_docking")
    d["sim"]["duration"] = 60.0
    with pytest.raises(ScenarioError, match=r"sim\.duration: sim\.duration 60 s is 60,001 control steps"):
        run(scenario_from_dict(d), out_root=tmp_path)
    assert not called
    assert not any(tmp_path.rglob("*.partial")), "the reserved folder is removed again"


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "1e300", "1" + "0" * 400, "abc"])
def test_cli_duration_is_validated_like_sim_duration(tmp_path: Path, capsys, value) -> None:
    code = cli_main(["--scenario", str(SCENARIOS / "iiwa14_docking.yaml"), "--out", str(tmp_path), "--duration",
                     value, "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "--duration" in err and "Traceback" not in err
    assert not any(tmp_path.iterdir()), "nothing is written for a bad argument"


def test_check_value_shares_the_scenario_bounds() -> None:
    assert check_value(SimConfig, "duration", 2.0) == 2.0
    with pytest.raises(ScenarioError, match=r"--duration: must be finite"):
        check_value(SimConfig, "duration", math.nan, key="--duration")
    with pytest.raises(ScenarioError, match=r"--duration: must be <= 86400"):
        check_value(SimConfig, "duration", 10**400, key="--duration")


def test_folder_names_are_one_safe_path_component() -> None:
    assert folder_name("iiwa14_docking") == "iiwa14_docking"
    assert folder_name('a<b>:c"d|e?f*g') == "a_b__c_d_e_f_g"
    assert folder_name(".hidden. ") == "hidden"
    assert folder_name("...") == "_"
    assert "/" not in folder_name("x\\y") and "\\" not in folder_name("x\\y")


def test_short_repr_is_bounded_on_huge_and_aliased_values() -> None:
    big: list = [1]
    for _ in range(40):  # 2^40 leaves through aliases: repr() would never finish
        big = [big, big]
    t0 = time.perf_counter()
    s = short_repr(big)
    assert len(s) < 100 and time.perf_counter() - t0 < 5.0
    assert len(short_repr(10**400)) < 60 and len(short_repr("x" * 10**6)) < 80


def test_an_aliased_yaml_bomb_is_rejected_quickly(tmp_path: Path) -> None:
    """A billion-laughs YAML (each list twice the previous one, through aliases: 2^40 leaves) must not
    make the parser or the error message explode: the first alias is refused (sim/yamlio.py)."""
    d = scenario_dict("iiwa14_docking")
    anchors = ", ".join(["&b0 [1.0, 1.0]"] + [f"&b{i} [*b{i - 1}, *b{i - 1}]" for i in range(1, 40)])
    body = yaml.safe_dump({k: v for k, v in d.items() if k not in ("robot", "gates")})
    p = tmp_path / "bomb.yaml"
    p.write_text(f"gates: [{anchors}]\nrobot:\n  type: iiwa14\n  q_guess: *b39\n{body}")
    t0 = time.perf_counter()
    with pytest.raises(ScenarioError) as exc:
        load_scenario(p)
    assert time.perf_counter() - t0 < 10.0  # a guard against an exponential walk, not a speed test
    msg = str(exc.value)
    assert msg.startswith(f"{p}: line 1, column 30: alias *b0 not accepted") and len(msg) < 300, msg


def test_a_huge_scenario_file_is_rejected(tmp_path: Path) -> None:
    p = tmp_path / "big.yaml"
    p.write_text("name: x\n# " + "x" * (2 << 20) + "\n")
    with pytest.raises(ScenarioError, match="a scenario file is at most"):
        load_scenario(p)
