"""Scenario loading: good files load; bad input gives a ScenarioError naming the file, the key path
and the allowed values (issue 2, item 8: at least 15 distinct bad inputs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from dockbench.sim.errors import ScenarioError
from dockbench.sim.scenario import docs_markdown, load_scenario, scenario_from_dict

from tests.helpers import REPO, SCENARIOS, scenario_dict, scenario_files


def _write(tmp_path: Path, data) -> Path:
    p = tmp_path / "bad.yaml"
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return p


def _mutate(path: str, value, delete: bool = False) -> dict:
    d = scenario_dict("iiwa14_docking")
    keys = path.split(".")
    node = d
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node.setdefault(k, {})
    if delete:
        del node[keys[-1]]
    elif isinstance(node, list):
        node[int(keys[-1])] = value
    else:
        node[keys[-1]] = value
    return d


BAD = [
    # (id, mutation, fragments that must all appear in the message)
    (
        "unknown top key",
        lambda: {**scenario_dict("iiwa14_docking"), "controler": {}},
        ["controler", "allowed", "controller"],
    ),
    (
        "unknown controller key",
        lambda: _mutate("controller.stiffness", 5),
        ["controller", "stiffness", "allowed keys", "k_rot"],
    ),
    ("negative stiffness", lambda: _mutate("controller.k", -5), ["controller.k", "must be >= 0.0", "-5"]),
    ("zero inertia", lambda: _mutate("controller.m", 0), ["controller.m", "must be > 0.0"]),
    (
        "wrong type string for number",
        lambda: _mutate("controller.d", "abc"),
        ["controller.d", "expected a number", "abc"],
    ),
    ("bool for number", lambda: _mutate("sim.timestep", True), ["sim.timestep", "expected a number"]),
    (
        "unknown controller type",
        lambda: _mutate("controller.type", "pid"),
        ["controller.type", "pid", "khatib"],
    ),
    ("unknown planner type", lambda: _mutate("planner.type", "rrt"), ["planner.type", "rrt", "quintic"]),
    (
        "unknown target type",
        lambda: _mutate("target.type", "socket"),
        ["target.type", "socket", "drogue", "plate"],
    ),
    ("unknown robot", lambda: _mutate("robot.type", "ur5"), ["robot.type", "ur5", "iiwa14", "fr3"]),
    (
        "bad integrator",
        lambda: _mutate("sim.integrator", "verlet"),
        ["sim.integrator", "verlet", "implicitfast", "rk4"],
    ),
    (
        "control period not a multiple",
        lambda: _mutate("sim.control_period", 0.0015),
        ["sim.control_period", "integer multiple"],
    ),
    (
        "vector wrong length",
        lambda: _mutate("target.pose.position", [0.5, 0.0]),
        ["target.pose.position", "3 values", "got 2"],
    ),
    ("missing planner", lambda: _mutate("planner", None, delete=True), ["planner", "required"]),
    (
        "unknown gate metric",
        lambda: _mutate("gates.0.metric", "docking.depht"),
        ["gates[0].metric", "docking.depht", "docking.depth"],
    ),
    (
        "gate without bounds",
        lambda: _mutate("gates.0", {"metric": "docking.lateral"}),
        ["gates[0]", "max and/or min"],
    ),
    ("q_init wrong length", lambda: _mutate("robot.q_init", [0.0, 0.1]), ["robot.q_init", "expected 7"]),
    (
        "bore wider than mouth",
        lambda: _mutate("target.mouth_radius", 0.009),
        ["target.mouth_radius", "bore radius"],
    ),
    (
        "funnel angle out of range",
        lambda: _mutate("target.funnel_half_angle_deg", 90),
        ["funnel_half_angle_deg", "< 85.0"],
    ),
    ("null for required number", lambda: _mutate("sim.timestep", None), ["sim.timestep", "must not be null"]),
    ("mapping expected", lambda: _mutate("sim", [1, 2]), ["sim", "expected a mapping"]),
    (
        "type missing in block",
        lambda: _mutate("controller", {"k": 5}),
        ["controller.type", "missing", "khatib"],
    ),
    ("NaN number", lambda: _mutate("controller.k", float("nan")), ["controller.k", "finite"]),
    (
        "feedforward mode",
        lambda: _mutate("controller.feedforward", "on"),
        ["controller.feedforward", "torque", "velocity", "off"],
    ),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_names_file_key_and_choices(tmp_path: Path, case) -> None:
    _id, make, fragments = case
    path = _write(tmp_path, make())
    with pytest.raises(ScenarioError) as exc:
        load_scenario(path)
    msg = str(exc.value)
    assert str(path) in msg
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"


def test_missing_file_and_yaml_syntax(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="not found"):
        load_scenario(tmp_path / "nope.yaml")
    p = tmp_path / "broken.yaml"
    p.write_text("name: x\nrobot: [unclosed\n")
    with pytest.raises(ScenarioError, match="YAML syntax error"):
        load_scenario(p)


def test_every_shipped_scenario_loads() -> None:
    files = scenario_files()
    assert len(files) >= 2
    for f in files:
        sc = load_scenario(f)
        assert sc.name == f.stem, f"{f}: name must equal the file stem"


def test_configs_are_frozen() -> None:
    sc = load_scenario(SCENARIOS / "iiwa14_docking.yaml")
    with pytest.raises(AttributeError):
        sc.controller.config.k = 1.0  # type: ignore[misc]


def test_docs_scenarios_md_is_up_to_date() -> None:
    """docs/scenarios.md is generated from the typed configs: regenerate it with
    `python -m dockbench.sim.scenario --docs > docs/scenarios.md`."""
    assert (REPO / "docs" / "scenarios.md").read_text() == docs_markdown()


def test_every_docking_and_press_scenario_has_a_current_gravity_twin() -> None:
    """scenarios/gravity/<name>_gravity.yaml is the original with gravity on and nothing else changed
    (name, description and sim.gravity aside), and is what experiments/make_gravity_twins.py writes."""
    from dockbench.experiments.make_gravity_twins import twins

    want = twins()
    originals = [f for f in sorted(SCENARIOS.glob("*.yaml")) if load_scenario(f).target is not None]
    assert len(want) == len(originals) >= 12  # every docking (drogue) and press (plate) scenario
    for path, text in want.items():
        assert path.is_file() and path.read_text() == text, (
            f"{path.name} is missing or out of date: run `python experiments/make_gravity_twins.py`"
        )
        twin = load_scenario(path).to_dict()
        original = load_scenario(SCENARIOS / f"{path.stem.removesuffix('_gravity')}.yaml").to_dict()
        assert twin["sim"].pop("gravity") == [0.0, 0.0, -9.81] and original["sim"].pop("gravity") == [0.0, 0.0, 0.0]
        for key in ("name", "description"):
            twin.pop(key), original.pop(key)
        assert twin == original, path.name


def test_pyramidal_cone_with_near_frictionless_contact_is_rejected() -> None:
    """cone: pyramidal below μ = 0.01 (the contact friction is the larger of tool's and target's) is a
    ScenarioError naming the file and key and suggesting the elliptic cone; at 0.01 it is accepted, and
    the elliptic cone (the default) accepts μ = 0."""
    d = scenario_dict("iiwa14_docking")
    d["sim"]["cone"] = "pyramidal"
    d["tool"]["friction"] = 0.0
    d["target"]["friction"] = 0.001
    with pytest.raises(ScenarioError) as exc:
        scenario_from_dict(d, file="scenarios/x.yaml")
    assert str(exc.value).startswith("scenarios/x.yaml: sim.cone: the pyramidal cone needs a contact friction ≥ 0.01")
    assert "use `cone: elliptic`" in str(exc.value)
    d["target"]["friction"] = 0.01
    assert scenario_from_dict(d).sim.cone == "pyramidal"
    d["target"]["friction"] = 0.0
    del d["sim"]["cone"]
    assert scenario_from_dict(d).sim.cone == "elliptic"


def test_solver_options_reach_the_compiled_model_and_are_bounded() -> None:
    """sim.impratio and sim.noslip_iterations default to MuJoCo's own defaults (1, 0: off), reach the
    compiled MjModel's options as given, and out-of-range values are ScenarioErrors naming the key."""
    import mujoco
    from dockbench.sim.assembly import assemble

    d = scenario_dict("iiwa14_docking")
    default = mujoco.MjOption()
    sc = scenario_from_dict(d)
    assert (sc.sim.impratio, sc.sim.noslip_iterations) == (default.impratio, default.noslip_iterations) == (1.0, 0)
    d["sim"].update(impratio=10.0, noslip_iterations=7)
    opt = assemble(scenario_from_dict(d)).model.opt
    assert (opt.impratio, opt.noslip_iterations) == (10.0, 7)
    for key, bad, fragment in (("noslip_iterations", -1, "must be >= 0"), ("noslip_iterations", 2.5, "integer"),
                               ("impratio", 0.0, "must be >= 0.001")):
        d["sim"][key] = bad
        with pytest.raises(ScenarioError) as exc:
            scenario_from_dict(d, file="scenarios/x.yaml")
        assert f"sim.{key}" in str(exc.value) and fragment in str(exc.value), str(exc.value)
        d["sim"][key] = 1


def test_belief_offset_keys_default_to_zero() -> None:
    """target.belief_offset given with rpy_deg only: the position offset is zero (as docs/scenarios.md
    says), not the default target position."""
    d = scenario_dict("iiwa14_docking")
    d["target"]["belief_offset"] = {"rpy_deg": [0.0, 0.0, 3.0]}
    off = scenario_from_dict(d).target.config.belief_offset
    assert off.position == (0.0, 0.0, 0.0) and off.rpy_deg == (0.0, 0.0, 3.0)
    d["target"].pop("belief_offset")
    assert scenario_from_dict(d).target.config.belief_offset.position == (0.0, 0.0, 0.0)
