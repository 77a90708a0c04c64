"""Kinematic mirror: name mapping, frame rules, wait-for-both, hold-last, duplicate publishers,
offscreen render rate, load errors, the mock source.

The exact comparisons (assert_array_equal) are copies: accepted joint positions are written into qpos
verbatim, a rejected or held frame leaves qpos / xpos untouched, and qpos addresses are integers."""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time

import mujoco
import numpy as np
import pytest
from dockbench.bridges.mirror import (
    KinematicMirror,
    MirrorApp,
    load_mirror_config,
    load_model,
)
from dockbench.bridges.ros2 import InProcessBus, InProcessTransport, JointState
from dockbench.experiments import mirror as mirror_cli
from dockbench.experiments.mock_joint_states import MockSource, load_mock_plan
from dockbench.sim.errors import ModelError, ScenarioError

LEFT = tuple(f"l_joint{k}" for k in range(1, 8))
RIGHT = tuple(f"r_joint{k}" for k in range(1, 8))
#: the offscreen render rate never exceeds the configured 60 Hz by more than 10 %: the pacing schedules
#: frame k at k/rate and resynchronises instead of bursting, so frames ≤ rate·t + 2. No lower bound: a
#: slower or loaded machine renders fewer frames (no timed assertions; it failed at 51.9 Hz under load)
RATE_TOL = 0.10


@pytest.fixture(scope="module")
def config():
    return load_mirror_config()


@pytest.fixture(scope="module")
def model(config):
    return load_model(config.model)


@pytest.fixture()
def mirror(model, config):
    return KinematicMirror(model, config)


def qpos_of(mirror, names):
    return np.array([mirror.data.qpos[mirror.model.joint(n).qposadr[0]] for n in names])


def frame(names, values):
    return JointState(tuple(names), tuple(values))


def feed_both(m: KinematicMirror, left=None, right=None):
    left = np.linspace(0.1, 0.7, 7) if left is None else left
    right = -np.linspace(0.2, 0.8, 7) if right is None else right
    assert m.submit("left", frame(LEFT, left)).accepted
    assert m.submit("right", frame(RIGHT, right)).accepted
    m.apply()
    return np.asarray(left), np.asarray(right)


# ------------------------------------------------------------------------------------- mapping
def test_fourteen_joints_mapped_by_name_not_by_index(config):
    # the same joint names in another order behind extra joints: addresses differ, mapping must follow
    joints = "".join(f'<body><joint name="{n}" axis="0 0 1"/><geom size=".01"/>' for n in
                     ("head_yaw",) + RIGHT[::-1] + LEFT[3:] + LEFT[:3]) + "</body>" * 15
    model = mujoco.MjModel.from_xml_string(f"<mujoco><worldbody>{joints}</worldbody></mujoco>")
    m = KinematicMirror(model, config)
    for group, names in (("left", LEFT), ("right", RIGHT)):
        expected = [model.joint(n).qposadr[0] for n in names]
        np.testing.assert_array_equal(m.qpos_addresses(group), expected)
    left, right = feed_both(m)
    np.testing.assert_array_equal(qpos_of(m, LEFT), left)
    np.testing.assert_array_equal(qpos_of(m, RIGHT), right)
    assert m.data.qpos[model.joint("head_yaw").qposadr[0]] == 0.0


def test_shuffled_names_land_on_the_right_joints_without_cross_arm_mix(mirror):
    rng = np.random.default_rng(3)
    left = rng.uniform(-1, 1, 7)
    right = rng.uniform(-1, 1, 7)
    for names, values, group in ((LEFT, left, "left"), (RIGHT, right, "right")):
        perm = rng.permutation(7)
        assert mirror.submit(group, frame([names[i] for i in perm], values[perm])).accepted
    mirror.apply()
    np.testing.assert_array_equal(qpos_of(mirror, LEFT), left)
    np.testing.assert_array_equal(qpos_of(mirror, RIGHT), right)
    # the right arm's names on the left topic are refused: no cross-arm mix
    v = mirror.submit("left", frame(RIGHT, right + 1.0))
    assert (v.accepted, v.kind) == (False, "extra")
    mirror.apply()
    np.testing.assert_array_equal(qpos_of(mirror, LEFT), left)
    np.testing.assert_array_equal(qpos_of(mirror, RIGHT), right)


BAD_FRAMES = {
    "missing": frame(LEFT[:6], [1.0] * 6),
    "duplicate": frame(LEFT[:6] + (LEFT[0],), [1.0] * 7),
    "extra": frame(LEFT + (RIGHT[0],), [1.0] * 8),
    "unknown": frame(LEFT[:6] + ("joint7",), [1.0] * 7),
    "wrong_count": frame(LEFT, [1.0] * 6),
    "not_finite": frame(LEFT, [1.0] * 6 + [math.nan]),
    "not_finite_inf": frame(LEFT, [math.inf] + [1.0] * 6),
}


@pytest.mark.parametrize("case", sorted(BAD_FRAMES))
def test_each_invalid_frame_kind_leaves_the_previous_pose_untouched(mirror, case, caplog):
    left, right = feed_both(mirror)
    before = mirror.data.qpos.copy()
    xpos = mirror.data.xpos.copy()
    with caplog.at_level(logging.WARNING, logger="dockbench.bridges.mirror"):
        for _ in range(2):
            v = mirror.submit("left", BAD_FRAMES[case])
            assert not v.accepted and v.kind == case.removesuffix("_inf")
    assert mirror.apply() is False
    np.testing.assert_array_equal(mirror.data.qpos, before)
    np.testing.assert_array_equal(mirror.data.xpos, xpos)
    np.testing.assert_array_equal(mirror.pose("left"), left)
    status = {s.name: s for s in mirror.status()}
    assert dict(status["left"].rejected) == {v.kind: 2} and status["left"].accepted == 1
    assert len([r for r in caplog.records if r.name == "dockbench.bridges.mirror"]) == 1  # logged once per kind
    assert mirror.data.time == 0.0 and not mirror.data.qvel.any()  # mj_forward only, never mj_step


# ------------------------------------------------------------------------------------- state rules
def test_waits_for_both_sides_and_names_the_missing_one(config, model, caplog):
    bus = InProcessBus()
    with InProcessTransport(bus=bus) as t:
        app = MirrorApp(config, t, model=model)
        app.STATUS_PERIOD_S = 0.1
        app.start()
        t.create_publisher(config.groups[0].topic).publish(frame(LEFT, [0.3] * 7))
        with caplog.at_level(logging.WARNING, logger="dockbench.bridges.mirror"):
            report = app.run(display="none", wait_timeout=0.35)
        app.stop()
    assert (report.ready, report.waiting_for, report.frames, report.ended_by) == (False, ("right",), 0,
                                                                                 "wait_timeout")
    msgs = [r.getMessage() for r in caplog.records if "waiting for the first valid frame" in r.getMessage()]
    assert msgs and all("right (/xr_rm/right_rm75/joint_states)" in s and "left (" not in s for s in msgs)
    assert app.mirror.waiting_for() == ("right",)
    assert not app.mirror.data.qpos.any()  # the left frame was not shown: nothing is written while waiting


def test_interrupted_side_holds_its_last_valid_pose(model, config, caplog):
    now = [0.0]
    m = KinematicMirror(model, dataclasses.replace(config, stale_after_s=0.5), clock=lambda: now[0])
    left, right = feed_both(m)
    for k in range(1, 11):  # the left stream goes on, the right one stops
        now[0] = 0.1 * k
        m.submit("left", frame(LEFT, left + 0.01 * k))
        m.apply()
        with caplog.at_level(logging.WARNING, logger="dockbench.bridges.mirror"):
            stale = m.update_staleness()
        assert stale == (("right",) if now[0] > 0.5 else ())
    np.testing.assert_array_equal(qpos_of(m, RIGHT), right)
    np.testing.assert_allclose(qpos_of(m, LEFT), left + 0.1)
    holds = [r for r in caplog.records if "holding its last valid pose" in r.getMessage()]
    assert len(holds) == 1 and holds[0].getMessage().startswith("right")


def test_two_publishers_on_one_state_topic_trigger_a_warning(config, model, caplog):
    with InProcessTransport(bus=InProcessBus()) as t:
        app = MirrorApp(config, t, model=model)
        app.start()
        p1 = t.create_publisher(config.groups[0].topic)
        with caplog.at_level(logging.WARNING, logger="dockbench.bridges.mirror"):
            app.check_publishers()
            p2 = t.create_publisher(config.groups[0].topic)
            app.check_publishers()
            app.check_publishers()  # still two: no second warning
            p2.close()
            app.check_publishers()  # back to one: re-armed
            t.create_publisher(config.groups[0].topic)
            app.check_publishers()
        app.stop()
        p1.close()
    warns = [r.getMessage() for r in caplog.records if "publishers on" in r.getMessage()]
    assert warns == ["left: 2 publishers on /xr_rm/left_rm75/joint_states; frames from different sources "
                     "will interleave - stop all but one"] * 2


# ------------------------------------------------------------------------------------- rendering
def _gl_reason(model) -> str:
    try:
        mujoco.Renderer(model, 32, 32).close()
    except Exception as exc:  # noqa: BLE001
        return f"no OpenGL for offscreen rendering here ({type(exc).__name__}: {exc}); try MUJOCO_GL=egl"
    return ""


def test_offscreen_render_rate_with_the_mock_source(config, model):
    if reason := _gl_reason(model):
        pytest.skip(reason)
    cfg = dataclasses.replace(config, width=320, height=240)
    with InProcessTransport(bus=InProcessBus()) as t:
        plan = load_mock_plan(cfg)
        source = MockSource(t, cfg, plan)
        source.command("play")
        app = MirrorApp(cfg, t, model=model)
        app.start()
        stop = threading.Event()
        feeder = threading.Thread(target=source.run, kwargs={"stop_event": stop})
        feeder.start()
        try:
            report = app.run(display="offscreen", duration=2.0, wait_timeout=2.0)
        finally:
            stop.set()
            feeder.join(5.0)
            app.stop()
    print(f"\nmirror offscreen {cfg.width}x{cfg.height}: {report.frames} frames in {report.display_s:.2f} s "
          f"= {report.fps:.1f} frames/s (target {cfg.render_rate_hz:g})")
    assert report.ready and report.ended_by == "duration" and report.frames >= 1
    assert report.fps <= (1.0 + RATE_TOL) * cfg.render_rate_hz
    assert app.last_frame is not None and app.last_frame.shape == (240, 320, 3) and app.last_frame.any()
    status = {s.name: s for s in report.groups}
    # ~90 Hz each for 2 s on an idle machine; any positive count shows both groups flowing (not timed)
    assert status["left"].accepted > 0 and status["right"].accepted > 0
    assert not any(s.rejected for s in report.groups)
    assert app.mirror.data.time == 0.0


# ------------------------------------------------------------------------------------- errors, CLI, mock
def test_model_and_mesh_load_failures_are_clear_errors(tmp_path, capsys):
    with pytest.raises(ModelError, match="not found"):
        load_model("robots/nope.urdf")
    bad = tmp_path / "meshy.urdf"
    bad.write_text('<robot name="x"><link name="a"><collision><geometry><mesh filename="missing_link.stl"/>'
                   "</geometry></collision></link></robot>")
    with pytest.raises(ModelError, match=r"meshy\.urdf: MuJoCo cannot load the model: .*missing_link\.stl.*"
                                         r"a mesh or included file could not be read"):
        load_model(str(bad))
    cfg = tmp_path / "mirror.yaml"
    cfg.write_text(f"model: {bad}\ngroups: [{{name: left, topic: /l, joints: [a]}}]\n")
    assert mirror_cli.main(["--config", str(cfg), "--backend", "inprocess", "--no-render"]) == 1
    assert "error: " in capsys.readouterr().err


def test_config_errors_name_file_and_key(tmp_path):
    cfg = tmp_path / "m.yaml"
    cfg.write_text("render_rate: 60\ngroups: []\n")
    with pytest.raises(ScenarioError,
                       match=r"m\.yaml: unknown key 'render_rate'; allowed keys: groups, model"):
        load_mirror_config(cfg)
    cfg.write_text("groups: [{name: a, topic: /x, joints: [j]}, {name: b, topic: /x, joints: [k]}]\n")
    with pytest.raises(ScenarioError, match="two groups on one topic"):
        load_mirror_config(cfg)


def test_cli_wait_timeout_exits_1_naming_the_silent_sides(capsys):
    assert mirror_cli.main(["--backend", "inprocess", "--no-render", "--wait-timeout", "0.2"]) == 1
    err = capsys.readouterr().err
    assert "no valid frame within 0.2 s from: left (/xr_rm/left_rm75/joint_states), right" in err


def test_mock_source_degrees_in_file_radians_on_the_wire_and_immediate_reset(config):
    plan = load_mock_plan(config)
    got: dict[str, list[JointState]] = {"left": [], "right": []}
    with InProcessTransport(bus=InProcessBus()) as t:
        for g in config.groups:
            t.create_subscription(g.topic, got[g.name].append)
        src = MockSource(t, config, plan)
        src.tick()
        np.testing.assert_allclose(got["left"][-1].position,
                                   np.radians([-26.93, 0.0, -28.65, -116.88, 35.52, 62.45, -33.80]))
        assert got["left"][-1].name == LEFT and got["right"][-1].name == RIGHT
        src.command("play")
        time.sleep(0.3)
        src.tick()
        moved = np.array(got["left"][-1].position)
        assert np.abs(moved - plan.initial["left"]).max() > 1e-3
        n_right = len(got["right"])
        assert src.command("reset_left")  # published at once, without waiting for a tick
        np.testing.assert_array_equal(got["left"][-1].position, plan.initial["left"])
        assert len(got["right"]) == n_right
        time.sleep(0.05)
        src.tick()
        np.testing.assert_array_equal(got["left"][-1].position, plan.initial["left"])  # holds
        assert np.abs(np.array(got["right"][-1].position) - plan.initial["right"]).max() > 1e-3  # plays on
        src.on_command_msg(JointState(name=("reset_both",)))
        np.testing.assert_array_equal(got["right"][-1].position, plan.initial["right"])
        assert not src.command("dance")


# ------------------------------------------------------------------ joint range (issue 23)
def test_positions_outside_the_joint_range_are_rejected(model, config, caplog):
    """The mirror used to accept 1e300 rad: a position farther than range_margin outside the model's
    range rejects the frame (out_of_range), the last valid pose stays, one warning per reason."""
    m = KinematicMirror(model, config)
    feed_both(m)
    before = qpos_of(m, LEFT)
    lo, hi = model.joint("l_joint2").range
    margin = config.range_margin
    assert margin > 0
    with caplog.at_level(logging.WARNING, logger="dockbench.bridges.mirror"):
        for bad in (1e300, -1e300, hi + 2 * margin, lo - 2 * margin):
            pose = np.linspace(0.1, 0.7, 7)
            pose[1] = bad
            v = m.submit("left", frame(LEFT, pose))
            assert not v.accepted and v.kind == "out_of_range", v
            assert "l_joint2" in v.reason
    m.apply()
    np.testing.assert_array_equal(qpos_of(m, LEFT), before)
    status = {s.name: s for s in m.status()}
    assert status["left"].rejected == {"out_of_range": 4}
    assert sum("out_of_range" in r.message for r in caplog.records) == 1
    # within the margin: accepted (encoder noise at a limit)
    pose = np.linspace(0.1, 0.7, 7)
    pose[1] = hi + 0.5 * margin
    assert m.submit("left", frame(LEFT, pose)).accepted


def test_range_margin_is_a_config_option(model, config):
    strict = dataclasses.replace(config, range_margin=0.0)
    m = KinematicMirror(model, strict)
    hi = model.joint("l_joint4").range[1]
    pose = np.zeros(7)
    pose[3] = hi + 1e-9
    assert m.submit("left", frame(LEFT, pose)).kind == "out_of_range"
    pose[3] = hi
    assert m.submit("left", frame(LEFT, pose)).accepted
