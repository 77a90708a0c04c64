"""The G20 bridge CLI speaks both seeds' command lines: --slew-rad (per physics step) next to
--slew-rad-s, --phys-per-render, --colliders (selective self-collision), --on-nonfinite open."""

from __future__ import annotations

import contextlib
import json

import dockbench.experiments.g20_bridge as cli
import mujoco
import numpy as np
import pytest
from dockbench.bridges.g20_ros2 import G20RosNode
from dockbench.bridges.ros2 import InProcessBus, InProcessTransport, JointState
from dockbench.hand.bridge import BridgeConfig, HandBridge
from dockbench.hand.spec import load_spec
from dockbench.sim.errors import DockbenchError

from tests.test_g20_ros2 import expected_goal_vector


@pytest.fixture(scope="module")
def spec():
    return load_spec()


def _last_line(capsys) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_slew_rad_per_step_equals_the_rate_form(capsys):
    """--slew-rad 0.004 at dt 1 ms is --slew-rad-s 4: the same run to the last printed digit."""
    common = ["--preset", "fist", "--headless", "--max-steps", "150"]
    assert cli.main([*common, "--slew-rad", "0.004"]) == 0
    per_step = _last_line(capsys)
    assert cli.main([*common, "--slew-rad-s", "4"]) == 0
    assert _last_line(capsys) == per_step
    assert cli.main([*common]) == 0
    assert _last_line(capsys) != per_step  # the default 5 rad/s is a different run
    args = cli.build_parser().parse_args(["--slew-rad", "0.01", "--dt", "0.002"])
    assert cli.slew_rate(args) == 0.01 / 0.002
    with pytest.raises(SystemExit):  # argparse: not both
        cli.build_parser().parse_args(["--slew-rad", "0.01", "--slew-rad-s", "5"])


def test_colliders_preset_keeps_palm_and_distal_only(spec):
    b = HandBridge.standalone(BridgeConfig(), spec, timestep=0.001)
    m = b.model
    kept = cli.select_colliders(m, "palm+distal")
    assert sorted(kept) == sorted(["palm_col", "thumb_distal_col", "index_distal_col", "middle_distal_col",
                                   "ring_distal_col", "pinky_distal_col"])
    for g in range(m.ngeom):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or ""
        on = name in kept
        assert (m.geom_contype[g], m.geom_conaffinity[g]) == ((1, 1) if on else (0, 0)), name
    # palm + thumb (metacarpals, proximal, distal) + 4 fingers × (proximal, middle, distal): as shipped
    assert len(cli.select_colliders(m, "all")) == 16 and cli.select_colliders(m, "none") == []
    with pytest.raises(DockbenchError, match=r"unknown group\(s\) \['tip'\]; known: all, none, or "
                                             r"palm\+metacarpals\+proximal\+middle\+distal"):
        cli.select_colliders(m, "palm+tip")


def test_without_colliders_the_projection_never_engages(spec):
    """The fist preset drives fingers into each other: with every collider the projection works on
    some steps; with none, the bridge sees no contact at all."""
    def run(preset):
        b = HandBridge.standalone(BridgeConfig(), spec, timestep=0.001)
        cli.select_colliders(b.model, preset)
        b.reset("open")
        b.command_preset("fist")
        return [b.step() for _ in range(800)]

    all_steps, none_steps = run("all"), run("none")
    assert any(r.min_distance < np.inf for r in all_steps)
    assert all(r.min_distance == np.inf for r in none_steps)
    assert not any(r.projected for r in none_steps)


@pytest.mark.parametrize("policy", ["reject", "open"])
def test_nonfinite_command_rejects_or_resets_to_open(spec, policy):
    b = HandBridge.standalone(BridgeConfig(), spec, timestep=0.001)
    b.reset("open")
    node = G20RosNode(b, InProcessTransport(bus=InProcessBus()), nonfinite=policy)
    node.on_command(JointState(position=[80] * 20))  # half closed
    half = b.snapshot().goal.copy()
    node.on_command(JointState(position=[80] * 4 + [float("nan")]))
    goal = b.snapshot().goal
    stats = node.stats()
    if policy == "reject":
        np.testing.assert_array_equal(goal, half)
        assert dict(stats.rejected_by_reason) == {"not_finite": 1} and stats.accepted == 1
    else:
        np.testing.assert_array_equal(goal, expected_goal_vector(b, list(spec.presets["open"])))
        assert dict(stats.rejected_by_reason) == {"not_finite_reset_open": 1} and stats.accepted == 2
    with pytest.raises(DockbenchError, match="allowed: reject, open"):
        G20RosNode(b, InProcessTransport(bus=InProcessBus()), nonfinite="ignore")


def test_replayed_nonfinite_command_resets_to_open(tmp_path, capsys):
    cmds = tmp_path / "cmds.jsonl"
    cmds.write_text(json.dumps({"t": 0.0, "sdk": [80] * 20}) + "\n" + '{"t": 0.2, "sdk": [80, NaN]}\n')
    assert cli.main(["--commands", str(cmds), "--headless", "--max-steps", "300", "--on-nonfinite", "open"]) == 0
    out = _last_line(capsys)
    assert "commands accepted 2, refused 0 (1 NaN/Inf commands reset to open)" in out
    assert cli.main(["--commands", str(cmds), "--headless", "--max-steps", "300"]) == 0
    assert "commands accepted 1, refused 1;" in _last_line(capsys)


class _Viewer:
    def __init__(self):
        self.syncs = 0
        self.cam = mujoco.MjvCamera()

    def is_running(self):
        return True

    @contextlib.contextmanager
    def lock(self):
        yield

    def sync(self):
        self.syncs += 1

    def close(self):
        pass


def test_phys_per_render_sets_the_viewer_frame_interval(monkeypatch, capsys):
    import mujoco.viewer

    viewers = []
    monkeypatch.setattr(cli, "_has_display", lambda: True)
    monkeypatch.setattr(mujoco.viewer, "launch_passive", lambda m, d: viewers.append(_Viewer()) or viewers[-1])
    monkeypatch.setattr(cli.time, "sleep", lambda s: None)  # no real-time pacing in the test
    assert cli.main(["--preset", "half_fist", "--max-steps", "64", "--phys-per-render", "16"]) == 0
    assert viewers[-1].syncs == 4  # steps 0, 16, 32, 48
    assert cli.main(["--preset", "half_fist", "--max-steps", "64", "--phys-per-render", "1"]) == 0
    assert viewers[-1].syncs == 64
    capsys.readouterr()
    assert cli.main(["--preset", "half_fist", "--max-steps", "64", "--phys-per-render", "0"]) == 1
    assert "--phys-per-render must be >= 1, got 0" in capsys.readouterr().err
