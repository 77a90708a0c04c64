"""Scenario overrides (sim/overrides.py): ``--set`` paths, the Python API's deep merge, type changes that keep
the shared keys, and the validating ``Scenario.replace`` — all validated exactly like the file."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from dockbench.experiments import run_docking
from dockbench.sim.errors import ScenarioError
from dockbench.sim.overrides import merge_overrides, parse_assignment, parse_path
from dockbench.sim.scenario import load_scenario, load_scenario_notes, scenario_from_dict

from tests.helpers import SCENARIOS, scenario_dict

DOCKING = SCENARIOS / "iiwa14_docking.yaml"
FR3 = SCENARIOS / "fr3_docking.yaml"


def test_paths_parse_keys_and_indices() -> None:
    assert parse_path("controller.k") == ("controller", "k")
    assert parse_path("target.pose.position[0]") == ("target", "pose", "position", 0)
    assert parse_path("target.pose.position.0") == ("target", "pose", "position", 0)
    assert parse_path("gates[1].max") == ("gates", 1, "max")
    for bad in ("", "controller..k", "controller.k[x]", "1abc", "a.b-c"):
        with pytest.raises(ScenarioError, match="--set"):
            parse_path(bad)


def test_values_are_yaml_and_plain_scientific_numbers_are_numbers() -> None:
    assert parse_assignment("controller.k=500") == (("controller", "k"), 500)
    assert parse_assignment("sim.timestep=5e-4") == (("sim", "timestep"), 5e-4)  # YAML 1.1 reads '5e-4' as text
    assert parse_assignment("sim.gravity=[0, 0, -9.81]")[1] == [0, 0, -9.81]
    assert parse_assignment("sim.duration=null")[1] is None
    assert parse_assignment("controller.type=hqp")[1] == "hqp"
    with pytest.raises(ScenarioError, match="KEY=VALUE"):
        parse_assignment("controller.k")


def test_set_changes_one_key_and_keeps_the_rest() -> None:
    base = load_scenario(DOCKING)
    sc = load_scenario(DOCKING, ["controller.k=500", "target.pose.position[0]=0.56", "gates[1].max=30"])
    assert sc.controller.type == "khatib" and sc.controller.config.k == 500.0
    assert sc.controller.config == dataclasses.replace(base.controller.config, k=500.0)
    assert sc.target.config.pose.position == (0.56, 0.0, 0.20)
    assert sc.gates[1].max == 30.0 and sc.gates[1].metric == base.gates[1].metric
    assert sc.gates[0] == base.gates[0] and len(sc.gates) == len(base.gates)


def test_the_python_api_merges_deeply() -> None:
    # the case: a shallow merge replaced the block and failed with "missing 'type'"
    sc = load_scenario(DOCKING, {"controller": {"k": 500}})
    base = load_scenario(DOCKING)
    assert sc.controller.config == dataclasses.replace(base.controller.config, k=500.0)
    assert load_scenario(DOCKING, {"controller.k": 500}) == sc
    assert load_scenario(DOCKING, {"target": {"belief_offset": {"position": [0.002, 0, 0]}}}).target.config.pose == \
        base.target.config.pose


def test_an_index_equal_to_the_length_appends_and_a_missing_list_starts_from_its_default() -> None:
    sc = load_scenario(DOCKING, ["gates[5]={metric: safety.joint_pos_use, max: 95}"])
    assert len(sc.gates) == 6 and sc.gates[5].metric == "safety.joint_pos_use" and sc.gates[5].max == 95.0
    # the file has no start.offset: its default [0, 0, 0] is indexed
    assert load_scenario(DOCKING, ["start.offset[2]=0.01"]).start.offset == (0.0, 0.0, 0.01)
    with pytest.raises(ScenarioError, match=r"index 7 of gates is out of range: the list has 5 entries"):
        load_scenario(DOCKING, ["gates[7].max=1"])
    with pytest.raises(ScenarioError, match="not a list"):
        load_scenario(DOCKING, ["controller.k[0]=1"])


def test_overridden_values_are_validated_exactly_like_the_file(tmp_path) -> None:
    data = scenario_dict("iiwa14_docking")
    data["controller"]["k"] = -5
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError) as from_file:
        load_scenario(bad)
    with pytest.raises(ScenarioError) as from_set:
        load_scenario(DOCKING, ["controller.k=-5"])
    with pytest.raises(ScenarioError) as from_api:
        load_scenario(DOCKING, {"controller": {"k": -5}})
    for exc in (from_set.value, from_api.value):
        assert (exc.key, exc.detail) == (from_file.value.key, from_file.value.detail)
        assert str(exc) == str(from_file.value).replace(str(bad), str(DOCKING))
    with pytest.raises(ScenarioError, match=r"controller: unknown key 'kk'; allowed keys: .*\bk\b"):
        load_scenario(DOCKING, ["controller.kk=1"])


def test_a_type_change_keeps_the_keys_the_new_type_also_has_and_says_which_were_dropped() -> None:
    sc, notes = load_scenario_notes(FR3, {"controller": {"type": "hqp"}})
    file_ctrl = scenario_dict("fr3_docking")["controller"]
    assert sc.controller.type == "hqp"
    # fr3_docking's khatib block: m, k, d, m_rot, k_rot, d_rot, feedforward, force_filter
    expected = scenario_from_dict(
        {**scenario_dict("fr3_docking"), "controller": {"type": "hqp", "feedforward": file_ctrl["feedforward"],
                                                        "force_filter": file_ctrl["force_filter"]}},
        file=str(FR3),
    )
    assert sc.controller == expected.controller
    assert notes == ["controller.type khatib → hqp: kept feedforward, force_filter; dropped m, k, d, m_rot, k_rot, "
                     "d_rot (hqp has no such keys)"]
    # the same through a path, and an unknown type still lists the known ones
    assert load_scenario_notes(FR3, ["controller.type=hqp"])[1] == notes
    with pytest.raises(ScenarioError, match="unknown controller type 'nope'; known: hqp, khatib, se3_lie"):
        load_scenario(FR3, ["controller.type=nope"])


def test_replace_validates() -> None:
    sc = load_scenario(DOCKING)
    assert sc.replace() == sc
    assert sc.replace(controller={"k": 500}).controller.config.k == 500.0
    assert sc.replace({"controller.k": 500}) == sc.replace(controller={"k": 500})
    with pytest.raises(ScenarioError, match=r"iiwa14_docking.yaml: controller.k: must be "):
        sc.replace(controller={"k": -5})
    with pytest.raises(ScenarioError, match=r"sim.timestep: must be >= 1e-06 s, got -1"):
        sc.replace(sim=dataclasses.replace(sc.sim, timestep=-1.0))  # a record that skipped validation
    other = load_scenario(SCENARIOS / "iiwa14_docking_twophase.yaml")
    assert sc.replace(target=other.target, start=other.start).target == other.target


def test_merge_does_not_modify_its_input() -> None:
    data = scenario_dict("iiwa14_docking")
    before = yaml.safe_dump(data)
    merge_overrides(data, ["controller.k=1", "gates[0].tolerance=0.002"])
    merge_overrides(data, {"controller": {"type": "hqp"}})
    assert yaml.safe_dump(data) == before


def test_the_cli_sets_keys_and_reports_dropped_keys(capsys, tmp_path) -> None:
    code = run_docking.main(["--scenario", str(DOCKING), "--set", "controller.k=-5", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and f"{DOCKING}: controller.k: must be " in err
    assert "--set controller.k=-5" in err  # where the value came from
    code = run_docking.main(["--scenario", str(FR3), "--controller", "hqp", "--duration", "0.01",
                             "--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr()
    assert code == 2  # INCOMPLETE (0.01 s)
    assert "note: controller.type khatib → hqp: kept feedforward, force_filter; dropped m, k, d" in out.err
