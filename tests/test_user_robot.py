"""Bring your own robot (issue 20, part 3; docs/robots.md): ``robot: {model: arm.xml | arm.urdf, ...}``.

A 6-DOF arm the tests write themselves (tests/user_robot_helpers.py) docks and tracks with khatib, hqp and
se3_lie and passes the shipped scenarios' gates; bad ``robot`` blocks are ScenarioErrors naming the file,
the key and what to write instead; the URDF of the same arm gives the same plant as its MJCF. MuJoCo and
Pinocchio agree on it in tests/test_dynamics_consistency.py (parametrised with this arm).
"""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest
import yaml
from dockbench.sim.dynamics import Dynamics
from dockbench.sim.errors import ScenarioError
from dockbench.sim.loop import build, run
from dockbench.sim.robots import EE_BODY_SITE, MOTOR_PREFIX
from dockbench.sim.scenario import load_scenario, scenario_from_dict

from tests.helpers import TOL, scenario_dict
from tests.user_robot_helpers import ARMATURE, HOME, JOINTS, TORQUE_LIMITS, arm_urdf, robot_block, write_arm

#: the drogue's mouth, in front of the arm's home pose (flange at about (0.45, 0, 0.40) m)
TARGET_POSITION = [0.45, 0.0, 0.20]
#: the shipped FR3 scenarios whose controller, target geometry and gates the arm reuses
DOCKING = {"khatib": "fr3_docking", "hqp": "fr3_docking_hqp", "se3_lie": "fr3_docking_se3"}
#: a short figure-8 (7 s): a 5 cm circle at 0.5 Hz, a 5 × 3.5 cm figure 8 at 0.5 Hz
SHORT_FIGURE8 = dict(transition_duration=0.5, circle_radius=0.05, circle_frequency=0.5, circle_duration=2.0,
                     figure8_ax=0.05, figure8_ay=0.035, figure8_frequency=0.5, figure8_duration=2.0,
                     stop_duration=0.5, hold_duration=0.5)


def docking_dict(model, controller: str) -> dict:
    d = scenario_dict(DOCKING[controller])
    d["name"] = f"user_arm6_docking_{controller}"
    d["robot"] = robot_block(model)
    d["target"]["pose"]["position"] = TARGET_POSITION
    return d


def tracking_dict(model, controller: str) -> dict:
    d = scenario_dict("fr3_tracking")
    d["name"] = f"user_arm6_tracking_{controller}"
    d["robot"] = robot_block(model)
    d["planner"] = {"type": "figure8", **SHORT_FIGURE8}
    d["sim"]["gravity"] = [0.0, 0.0, -9.81]
    if controller == "hqp":
        d["controller"] = {"type": "hqp"}
    elif controller == "se3_lie":
        d["controller"] = {"type": "se3_lie", "use_force_feedback": False}
    return d


def _verdict(result) -> str:
    bad = [f"{g['metric']} {g['verdict']}: {g['reason'] or g['value']}" for g in result.gates if g["verdict"] != "PASS"]
    return f"{result.verdict} ({result.status}): " + "; ".join(bad)


@pytest.mark.parametrize("controller", sorted(DOCKING))
def test_the_user_arm_docks_and_passes_the_docking_gates(tmp_path, controller: str) -> None:
    """The probe seats in the drogue (seat gate: the tip within 1 mm of the seat depth), peak force ≤ 40 N,
    lateral ≤ 0.5 mm, tilt ≤ 0.5°, no saturation, no chatter — the FR3 scenario's gates, unchanged."""
    result = run(scenario_from_dict(docking_dict(write_arm(tmp_path), controller)), out_root=None)
    assert {g["metric"] for g in result.gates} >= {"docking.depth", "contact.peak_force_truth", "docking.lateral"}
    assert result.verdict == "PASS", _verdict(result)
    assert result.metrics["contact.peak_force_truth"] > 1.0  # it really touched the funnel and the seat


@pytest.mark.parametrize("controller", ["khatib", "hqp", "se3_lie"])
def test_the_user_arm_tracks_the_figure8_under_gravity(tmp_path, controller: str) -> None:
    """Free-space circle + figure 8 with gravity on: worst segment RMS ≤ 5 mm, peak ≤ 15 mm, orientation RMS
    ≤ 0.5°, no contact, no saturation (fr3_tracking's gates)."""
    result = run(scenario_from_dict(tracking_dict(write_arm(tmp_path), controller)), out_root=None)
    assert result.verdict == "PASS", _verdict(result)
    assert result.metrics["tracking.pos_peak"] > 0.0


def test_the_gates_fail_an_arm_that_cannot_reach(tmp_path) -> None:
    """The gates can fail on a user arm: under gravity, motors of 2 N·m cannot hold the arm up (the shoulder
    needs tens of N·m), so it saturates and never seats."""
    d = docking_dict(write_arm(tmp_path), "khatib")
    d["robot"]["torque_limits"] = [2.0] * 6
    d["robot"]["actuators"] = "replace"
    d["sim"]["gravity"] = [0.0, 0.0, -9.81]
    d["sim"]["settle_time"] = 0.5
    result = run(scenario_from_dict(d), out_root=None)
    failed = {g["metric"] for g in result.gates if g["verdict"] == "FAIL"}
    assert result.verdict == "FAIL" and {"docking.depth", "safety.saturation_ratio"} <= failed, _verdict(result)


def test_motors_are_kept_added_or_replaced(tmp_path) -> None:
    """``actuators: auto`` keeps the model's five <motor>s and adds one for wrist_3; ``replace`` swaps a
    position servo for a torque motor. Every arm motor: gear 1, gain 1, no bias, ctrlrange ±torque_limit."""
    for kwargs, extra, expect in (
        ({}, {}, ["motor_" + j for j in JOINTS[:5]] + [MOTOR_PREFIX + "wrist_3"]),
        ({"position_servo": True}, {"actuators": "replace"}, [MOTOR_PREFIX + j for j in JOINTS]),
    ):
        d = docking_dict(write_arm(tmp_path / str(len(extra)), **kwargs), "khatib")
        d["robot"].update(extra)
        asm = build(scenario_from_dict(d)).asm
        m = asm.model
        names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_ACTUATOR, a) for a in asm.act_ids]
        assert names == expect
        assert m.nu == 6  # the servo is gone, not beside the motor
        for a, tau in zip(asm.act_ids, TORQUE_LIMITS, strict=True):
            assert m.actuator_gear[a, 0] == 1.0 and m.actuator_gainprm[a, 0] == 1.0
            assert m.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_NONE
            assert m.actuator_ctrllimited[a] and list(m.actuator_ctrlrange[a]) == [-tau, tau]


def test_the_ee_site_orientation_given_by_zaxis_carries_the_tool(tmp_path) -> None:
    """The flange site is written with ``zaxis="0 1 0"`` (no quat): the tool's ee site must sit on the flange's
    z axis, probe length below the flange at home (flange z = world −z there)."""
    d = docking_dict(write_arm(tmp_path), "khatib")
    d.pop("target")
    s = build(scenario_from_dict(d))
    m = s.asm.model
    data = mujoco.MjData(m)
    data.qpos[s.asm.qpos_adr] = HOME
    mujoco.mj_forward(m, data)
    flange = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, "flange")
    R_flange = data.site_xmat[flange].reshape(3, 3)
    offset = data.site_xpos[s.asm.ee_site] - data.site_xpos[flange]
    axial = offset @ R_flange[:, 2]
    assert axial > 0.01
    np.testing.assert_allclose(offset, axial * R_flange[:, 2], rtol=0, atol=1e-12)
    np.testing.assert_allclose(data.site_xmat[s.asm.ee_site].reshape(3, 3), R_flange, rtol=0, atol=1e-12)


def test_paths_are_relative_to_the_scenario_file(tmp_path, monkeypatch) -> None:
    model = write_arm(tmp_path / "models")
    d = docking_dict("../models/arm6.xml", "khatib")
    (tmp_path / "scenarios").mkdir()
    f = tmp_path / "scenarios" / "mine.yaml"
    f.write_text(yaml.safe_dump(d))
    monkeypatch.chdir(tmp_path / "models")  # not the scenario's folder
    s = load_scenario(f)
    assert s.robot.model == str(model.resolve())
    assert s.to_dict()["robot"]["model"] == str(model.resolve())  # meta.json records where the model was
    assert scenario_from_dict(s.to_dict()).robot == s.robot  # the resolved scenario loads again


def test_the_urdf_of_the_arm_is_the_same_plant_as_its_mjcf(tmp_path) -> None:
    """The URDF (ee_body tool0, motors all added by dockbench) and the MJCF (ee_site flange) of one arm:
    equal EE poses and Jacobians, and M_mjcf = M_urdf + diag(armature) (URDF has no armature), at random
    configurations with gravity on. Both parse the same decimals; the differences are round-off of a
    6-link chain, bounded by the tolerance table's entries (tests/helpers.py TOL)."""
    mjcf = write_arm(tmp_path)
    urdf = tmp_path / "arm6.urdf"
    urdf.write_text(arm_urdf())
    setups = []
    for block in (robot_block(mjcf), robot_block(urdf, ee_site=None, ee_body="tool0")):
        d = docking_dict(mjcf, "khatib")
        d["robot"] = {k: v for k, v in block.items() if v is not None}
        d["sim"]["gravity"] = [0.0, 0.0, -9.81]
        setups.append(build(scenario_from_dict(d)))
    a, b = setups
    m_b = b.asm.model
    assert [mujoco.mj_id2name(m_b, mujoco.mjtObj.mjOBJ_ACTUATOR, i) for i in b.asm.act_ids] == [
        MOTOR_PREFIX + j for j in JOINTS
    ]
    assert mujoco.mj_name2id(m_b, mujoco.mjtObj.mjOBJ_SITE, EE_BODY_SITE) >= 0
    dyn = [Dynamics(s.asm.pin_model, s.dynamics.ee_frame, s.dynamics.sensor_frame) for s in setups]
    rng = np.random.default_rng(3)
    for _ in range(10):
        q = rng.uniform(a.plant.q_min, a.plant.q_max)
        v = rng.uniform(-1.0, 1.0, 6)
        sa, sb = dyn[0].update(q, v), dyn[1].update(q, v)
        M_a = sa.M.copy()
        np.testing.assert_allclose(M_a, sb.M + np.diag(ARMATURE), rtol=0,
                                   atol=TOL["mass_matrix_rel"] * np.abs(M_a).max())
        np.testing.assert_allclose(sa.p_ee_in_world, sb.p_ee_in_world, rtol=0, atol=TOL["pose_abs"])
        np.testing.assert_allclose(sa.R_world_ee, sb.R_world_ee, rtol=0, atol=1e-12)
        np.testing.assert_allclose(sa.J_ee_lwa, sb.J_ee_lwa, rtol=0, atol=TOL["jacobian_abs"])
        np.testing.assert_allclose(sa.g, sb.g, rtol=0, atol=TOL["bias_rel"] * np.abs(sa.g).max())


def _error(tmp_path, change, **arm) -> ScenarioError:
    d = docking_dict(write_arm(tmp_path, **arm), "khatib")
    change(d["robot"])
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(d))
    with pytest.raises(ScenarioError) as exc:
        load_scenario(f)
    assert str(exc.value).startswith(f"{f}: robot"), str(exc.value)
    return exc.value


BAD = [
    # (label, change to the robot block, model options, key, fragments of the message)
    ("missing file", lambda r: r.update(model="nowhere/arm.xml"), {}, "robot.model", ["not found", "nowhere"]),
    ("not a model", lambda r: r.update(model="bad.yaml"), {}, "robot.model", [".xml, .mjcf, .urdf"]),
    ("unknown joint", lambda r: r["joints"].__setitem__(2, "elbow_joint"), {}, "robot.joints[2]",
     ["no joint 'elbow_joint'", "hinge joints: shoulder_pan, shoulder_lift, elbow, wrist_1, wrist_2, wrist_3"]),
    ("joint missing from the list", lambda r: [r[k].pop() for k in ("joints", "torque_limits", "velocity_limits",
                                                                      "home")],
     {}, "robot.joints", ["wrist_3", "does not list"]),
    ("joints out of order", lambda r: r.update(joints=[JOINTS[1], JOINTS[0], *JOINTS[2:]]), {}, "robot.joints[1]",
     ["does not follow", "base to tip"]),
    ("position servo", lambda r: None, {"position_servo": True}, "robot.joints[0]",
     ["'servo_shoulder_pan'", "position/velocity servo",
      '<motor name="dockbench_motor_shoulder_pan" joint="shoulder_pan" ctrlrange="-150 150"/>',
      "actuators: replace"]),
    ("joint off its body origin", lambda r: None, {"joint_pos_offset": True}, "robot.joints[1]",
     ["body's origin", "move the offset"]),
    ("torque limits disagree with ctrlrange", lambda r: r["torque_limits"].__setitem__(0, 100.0), {},
     "robot.torque_limits[0]", ["ctrlrange [-150, 150]", "motor_shoulder_pan"]),
    ("short torque list", lambda r: r["torque_limits"].pop(), {}, "robot.torque_limits",
     ["expected 6 values", "got 5"]),
    ("short velocity list", lambda r: r.update(velocity_limits=[1.0]), {}, "robot.velocity_limits",
     ["expected 6 values", "got 1"]),
    ("long home", lambda r: r["home"].append(0.0), {}, "robot.home", ["expected 6 values", "got 7"]),
    ("home outside the range", lambda r: r["home"].__setitem__(2, 3.0), {}, "robot.home[2]",
     ["outside the range", "'elbow'"]),
    ("missing torque limits", lambda r: r.pop("torque_limits"), {}, "robot.torque_limits",
     ["required with robot.model"]),
    ("unknown site", lambda r: r.update(ee_site="tool0"), {}, "robot.ee_site",
     ["no site 'tool0'", "its sites: flange", "ee_body"]),
    ("unknown body", lambda r: r.update(ee_site=None, ee_body="tool0"), {}, "robot.ee_body",
     ["no body 'tool0'", "base, shoulder, upper_arm"]),
    ("site and body", lambda r: r.update(ee_body="wrist3"), {}, "robot.ee_site", ["exactly one of ee_site"]),
    ("ee above the last joint", lambda r: r.update(ee_site=None, ee_body="forearm"), {}, "robot.ee_body",
     ["not carried by the last joint 'wrist_3'"]),
    ("type and model", lambda r: r.update(type="iiwa14"), {}, "robot.type", ["either type", "not both"]),
    ("neither", lambda r: r.pop("model"), {}, "robot", ["either type", "iiwa14", "model"]),
    ("catalogue robot with joints", lambda r: [r.pop("model"), r.update(type="fr3")], {}, "robot.ee_site",
     ["only with robot.model"]),
    ("duplicate joint", lambda r: r["joints"].__setitem__(5, "wrist_1"), {}, "robot.joints", ["listed twice: wrist_1"]),
]


@pytest.mark.parametrize("label,change,arm,key,fragments", BAD, ids=[b[0] for b in BAD])
def test_bad_robot_blocks_are_scenario_errors_that_say_what_to_fix(tmp_path, label, change, arm, key, fragments):
    exc = _error(tmp_path, change, **arm)
    assert exc.key == key, str(exc)
    for frag in fragments:
        assert frag in str(exc), f"{label}: {frag!r} not in {exc}"


def test_a_model_that_does_not_compile_is_a_scenario_error(tmp_path) -> None:
    bad = tmp_path / "broken.xml"
    bad.write_text("<mujoco><worldbody><body><geom size='-1'/></body></worldbody></mujoco>")
    exc = _error(tmp_path, lambda r: r.update(model=str(bad)))
    assert exc.key == "robot.model" and "broken.xml does not load in MuJoCo" in str(exc)


def test_an_effort_limit_below_the_torque_limit_is_refused(tmp_path) -> None:
    """URDF <limit effort> becomes MuJoCo's actuatorfrcrange, which would clip the motor silently."""
    urdf = tmp_path / "arm6.urdf"
    urdf.write_text(arm_urdf().replace('effort="28.0"', 'effort="10.0"', 1))
    exc = _error(tmp_path, lambda r: r.update(model=str(urdf), ee_site=None, ee_body="tool0"))
    assert exc.key == "robot.torque_limits[3]" and "actuatorfrcrange [-10, 10]" in str(exc), str(exc)


def test_the_run_folder_scene_of_a_model_with_meshes_renders_from_anywhere(tmp_path, monkeypatch) -> None:
    """A model with a mesh under ``<compiler meshdir="meshes">`` and a texture under ``texturedir="textures"``
    (relative paths): the run folder's scene.xml used to keep the relative paths and the video failed with a
    raw ValueError. Now the run folder holds copies of the files (meshes/, textures/), so it loads from another
    working directory and after the model's folder moved, renders, and a copy removed from the run folder is a
    DockbenchError naming the file."""
    from dockbench.sim.errors import DockbenchError
    from dockbench.telemetry.run import check_manifest
    from dockbench.telemetry.video import load_render_model, render_run_video

    from tests.test_video import GL_PROBLEM

    d = tracking_dict(write_arm(tmp_path / "model", mesh=True), "khatib")
    d["sim"]["duration"] = 0.05
    result = run(scenario_from_dict(d), out_root=tmp_path / "runs")
    scene = result.run_dir / "scene.xml"
    assert 'meshdir="meshes"' in (tmp_path / "model" / "arm6.xml").read_text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    m = load_render_model(scene)
    assert m.nmesh == 1 and m.mesh_vertnum[0] == 4  # the tetrahedron
    paint = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_TEXTURE, "base_paint")
    assert paint >= 0 and (m.tex_width[paint], m.tex_height[paint]) == (4, 4)
    if GL_PROBLEM is None:
        out = render_run_video(result.run_dir, elsewhere / "clip.gif", fps=20, width=64, height=48)
        assert out.stat().st_size > 0
    # the run folder holds its own copies: the model's folder may move (or be deleted) after the run
    assert 'file="meshes/base_shell.stl"' in scene.read_text() and 'file="textures/paint.png"' in scene.read_text()
    assert "meshdir" not in scene.read_text() and str(tmp_path) not in scene.read_text()
    (tmp_path / "model").rename(tmp_path / "model_moved")
    assert load_render_model(scene).nmesh == 1
    assert check_manifest(result.run_dir) == []
    assert "meshes/base_shell.stl" in json.loads((result.run_dir / "manifest.json").read_text())["files"]
    (result.run_dir / "meshes" / "base_shell.stl").unlink()
    with pytest.raises(DockbenchError) as exc:
        load_render_model(scene)
    assert "base_shell.stl" in str(exc.value) and "run folder" in str(exc.value), str(exc.value)


def test_the_documented_example_is_the_tested_arm_and_passes() -> None:
    """docs/examples/user_robot/arm6.xml is exactly what the tests write (arm_mjcf), and the walk-through
    scenario beside it (gravity on, Khatib) passes its gates."""
    from tests.helpers import REPO
    from tests.user_robot_helpers import arm_mjcf

    folder = REPO / "docs" / "examples" / "user_robot"
    assert (folder / "arm6.xml").read_text() == arm_mjcf()
    s = load_scenario(folder / "arm6_docking.yaml")
    assert s.robot.model == str((folder / "arm6.xml").resolve()) and s.sim.gravity == (0.0, 0.0, -9.81)
    result = run(s, out_root=None)
    assert result.verdict == "PASS", _verdict(result)
