"""The G20 bridge: projection, fallback, PD drive, track test, threads, prefixes, CLI."""

from __future__ import annotations

import json
import logging
import threading

import mujoco
import numpy as np
import pytest
from dockbench.experiments import g20_bridge
from dockbench.hand.bridge import BridgeConfig, DriveMode, HandBridge, parse_command_stream, run_track_test
from dockbench.hand.mapping import sdk_to_joint_positions
from dockbench.hand.spec import default_model_xml, load_spec
from dockbench.sim.errors import ModelError

PEN_TOL = 5e-4  # [m] penetration tolerance of docs/theory/g20_hand.md §4
EXACT = 1e-9  # [rad] kinematic mode writes exact values
PD_TOL = 0.05  # [rad] PD drive must reach the half fist within this
DT = 0.001  # [s]

THUMB = ("thumb_cmc_pitch", "thumb_cmc_roll", "thumb_cmc_yaw", "thumb_mcp", "thumb_ip")
# thumb opposed and fully flexed: its distal phalanx ends ~20 mm deep inside the palm box
THUMB_INTO_PALM = {"thumb_cmc_yaw": 0.65, "thumb_cmc_roll": 1.26, "thumb_cmc_pitch": 0.91, "thumb_mcp": 1.0}


@pytest.fixture(scope="module")
def spec():
    return load_spec()


def make(spec, **cfg) -> HandBridge:
    return HandBridge.standalone(BridgeConfig(**cfg), spec, timestep=DT)


def idx(spec, names):
    return np.array([spec.joint_names.index(n) for n in names])


def thumb_into_palm_goal(spec) -> dict:
    goal = sdk_to_joint_positions(spec.preset("half_fist"), spec)
    goal.pop("thumb_ip")
    goal.update(THUMB_INTO_PALM)
    return goal


def geom_distance(bridge, g1, g2):
    m, d = bridge.model, bridge.data
    return mujoco.mj_geomDistance(m, d, m.geom(g1).id, m.geom(g2).id, 0.1, np.zeros(6))


def test_half_fist_zero_penetration_and_reached(spec):
    b = make(spec)
    b.reset("open")
    assert b.command_preset("half_fist").accepted
    res = [b.step() for _ in range(400)]
    assert min(r.min_distance for r in res) >= -PEN_TOL
    assert not any(r.projected for r in res)  # the half fist is contact-free all the way
    snap = b.snapshot()
    np.testing.assert_allclose(snap.applied, snap.goal, atol=EXACT)
    expected = sdk_to_joint_positions(spec.preset("half_fist"), spec)
    np.testing.assert_allclose(snap.applied, [expected[n] for n in spec.joint_names], atol=EXACT)


def test_thumb_through_palm_is_stopped_while_fingers_reach_targets(spec):
    b = make(spec)
    b.reset("open")
    assert b.command_joints(thumb_into_palm_goal(spec)).accepted
    res = [b.step() for _ in range(500)]
    assert any(r.projected for r in res)
    assert min(r.min_distance for r in res) >= -PEN_TOL - 1e-12
    snap = b.snapshot()
    thumb = idx(spec, THUMB)
    others = np.setdiff1d(np.arange(21), thumb)
    np.testing.assert_allclose(snap.applied[others], snap.goal[others], atol=EXACT)  # fingers arrive
    assert np.max(np.abs(snap.applied[thumb] - snap.goal[thumb])) > 0.1  # thumb held back ...
    dist = geom_distance(b, "thumb_distal_col", "palm_col")
    assert -PEN_TOL - 1e-12 <= dist <= 1e-3  # ... at the palm surface, not before it

    # the same command without projection drives the thumb ~20 mm into the palm
    raw = make(spec, collision_project=False)
    raw.reset("open")
    raw.command_joints(thumb_into_palm_goal(spec))
    for _ in range(500):
        r = raw.step()
    np.testing.assert_allclose(raw.snapshot().applied, raw.snapshot().goal, atol=EXACT)
    assert r.min_distance < -0.015


def test_penetrating_start_restarts_from_last_safe(spec):
    """If the previous pose penetrates, the projection starts from the last safe pose."""
    b = make(spec)
    b.reset("open")
    open_pose = b.snapshot().applied
    bad = dict(thumb_into_palm_goal(spec))
    b.reset(bad)  # penetrating: last_safe stays OPEN
    snap = b.snapshot()
    np.testing.assert_array_equal(snap.last_safe, open_pose)  # exact: a copy
    r = b.step()
    assert r.projected and not r.fell_back
    assert r.min_distance >= -PEN_TOL
    snap = b.snapshot()
    others = np.setdiff1d(np.arange(21), idx(spec, THUMB))
    np.testing.assert_allclose(snap.applied[others], snap.goal[others], atol=EXACT)
    np.testing.assert_array_equal(snap.last_safe, snap.applied)  # exact: a copy


def arm_with_hand_and_obstacle() -> tuple[mujoco.MjModel, mujoco.MjData]:
    """A one-joint 'arm' carrying the hand (prefix 'hand/') and a mocap box obstacle."""
    parent = mujoco.MjSpec.from_string(
        '<mujoco><worldbody><body name="arm"><joint name="arm_j" axis="0 0 1"/>'
        '<geom type="cylinder" size="0.03 0.02" contype="0" conaffinity="0" mass="1"/>'
        '<site name="flange" pos="0 0 0.03"/></body>'
        '<body name="obstacle" mocap="true" pos="0.5 0.5 0.5"><geom type="box" size="0.01 0.01 0.01"/></body>'
        "</worldbody></mujoco>"
    )
    parent.attach(mujoco.MjSpec.from_string(default_model_xml()), prefix="hand/", site=parent.site("flange"))
    m = parent.compile()
    m.opt.timestep = DT
    return m, mujoco.MjData(m)


def test_attached_model_with_prefix(spec):
    m, d = arm_with_hand_and_obstacle()
    d.qpos[m.joint("arm_j").qposadr[0]] = 0.3
    b = HandBridge(m, d, spec, BridgeConfig(slew_rad_s=0.0), prefix="hand/")
    adr = b.qpos_addresses
    assert not np.array_equal(adr, np.arange(21))  # the arm joint shifts every address
    for name, a in zip(spec.joint_names, adr, strict=True):
        assert m.joint(f"hand/{name}").qposadr[0] == a
    assert b.hand_geom_mask.sum() == m.ngeom - 2  # all but the arm and obstacle geoms
    b.reset("open")
    b.command_preset("half_fist")
    b.step()
    expected = sdk_to_joint_positions(spec.preset("half_fist"), spec)
    np.testing.assert_allclose(d.qpos[adr], [expected[n] for n in spec.joint_names], atol=EXACT)
    assert d.qpos[m.joint("arm_j").qposadr[0]] == 0.3  # arm untouched (exact: never written)
    with pytest.raises(
        ModelError, match=r"hand joints missing from the model \(prefix 'robot/'\): robot/thumb_cmc_pitch"
    ):
        HandBridge(m, d, spec, prefix="robot/")


def test_fallback_to_last_safe_when_nothing_is_safe(spec):
    """An obstacle moved into the index fingertip: every candidate penetrates, the hand keeps its
    last safe pose. Considering hand-hand contacts only, the same step is free."""
    m, d = arm_with_hand_and_obstacle()
    b = HandBridge(m, d, spec, BridgeConfig(), prefix="hand/")
    b.reset("open")
    assert b.step().min_distance == np.inf
    safe_pose = b.snapshot().applied
    d.mocap_pos[0] = d.site("hand/index_tip").xpos
    b.command_joints({"index_pip": 1.0})
    r = b.step()
    assert r.projected and r.fell_back
    assert r.min_distance < -PEN_TOL  # still in the obstacle: nothing better was found
    np.testing.assert_array_equal(b.snapshot().applied, safe_pose)  # exact: the safe pose is copied back

    m2, d2 = arm_with_hand_and_obstacle()
    b2 = HandBridge(m2, d2, spec, BridgeConfig(hand_hand_only=True), prefix="hand/")
    b2.reset("open")
    d2.mocap_pos[0] = d2.site("hand/index_tip").xpos
    b2.command_joints({"index_pip": 1.0})
    r2 = b2.step()
    assert not r2.projected and r2.min_distance == np.inf
    k = spec.joint_names.index("index_pip")
    np.testing.assert_allclose(b2.snapshot().applied[k], 5.0 * DT, atol=EXACT)  # one slew step


def test_pd_mode_reaches_half_fist(spec):
    b = make(spec, mode="pd")
    assert b.config.mode is DriveMode.PD
    b.reset("open")
    b.command_preset("half_fist")
    for _ in range(600):
        b.step()
    snap = b.snapshot()
    a = b.active_indices
    np.testing.assert_allclose(snap.applied[a], snap.goal[a], atol=PD_TOL)
    q = b.positions()
    np.testing.assert_allclose(q["thumb_ip"], 1.02 * q["thumb_mcp"], atol=PD_TOL)
    for f in ("index", "middle", "ring", "pinky"):
        np.testing.assert_allclose(q[f"{f}_dip"], 0.89 * q[f"{f}_pip"], atol=PD_TOL)
    np.testing.assert_allclose(b.latest_state().velocities, 0.0, atol=0.05)  # settled


def test_track_test_passes_and_can_fail(spec):
    kin = run_track_test(make(spec))
    assert kin.passed
    np.testing.assert_allclose([kin.max_error, kin.goal_error], 0.0, atol=EXACT)
    pd = run_track_test(make(spec, mode="pd"))
    assert pd.passed and pd.max_error <= 0.02
    weak = make(spec, mode="pd")
    weak.model.actuator_gainprm[:, 0] *= 0.01  # kp/100: the fingers lag far behind
    weak.model.actuator_biasprm[:, 1] *= 0.01
    bad = run_track_test(weak)
    assert not bad.passed and bad.max_error > 0.1


class _Exploding(list):
    def __len__(self):
        raise RuntimeError("len")


BAD_COMMANDS = [
    [255] * 21,
    ["x"] * 3,
    [float("nan")] * 20,
    [0, float("inf")],
    {"index_pipp": 0.3},
    {"index_pip": float("nan")},
    {"index_pip": "1"},
    None,
    "open",
    # issue 23: these escaped or opened the hand
    [10**400],  # OverflowError in float()
    [0, 2**1100],
    {"index_pip": 10**400},
    [],  # padded to all-255 = fully open before
    np.zeros(0),
    {(1, 2): 0.1},
    _Exploding([1, 2]),
    object(),
]


def test_rejected_commands_keep_the_pose(spec, caplog):
    b = make(spec)
    b.reset("open")
    b.command_preset("half_fist")
    for _ in range(50):
        b.step()
    before = b.snapshot()
    with caplog.at_level(logging.WARNING, logger="dockbench.hand.bridge"):
        for cmd in BAD_COMMANDS:
            res = b.command(cmd)
            assert not res.accepted and res.reason, cmd
            assert res.seq == before.goal_seq
    assert b.rejected_count == len(BAD_COMMANDS)
    reasons = b.rejected_by_reason
    assert sum(reasons.values()) == len(BAD_COMMANDS)
    # one warning per reason (the rest are counted), like the ROS node
    assert sum("hand command rejected" in r.message for r in caplog.records) == len(reasons)
    after = b.snapshot()
    np.testing.assert_array_equal(after.goal, before.goal)  # exact: a rejected command writes nothing
    assert not b.command_preset("no_such_preset").accepted
    for _ in range(400):
        b.step()
    expected = sdk_to_joint_positions(spec.preset("half_fist"), spec)
    np.testing.assert_allclose(b.snapshot().applied, [expected[n] for n in spec.joint_names], atol=EXACT)


def test_name_commands_partial_update_and_clipping(spec):
    b = make(spec, slew_rad_s=0.0)
    b.reset("open")
    g0 = b.snapshot().goal
    res = b.command_joints({"index_pip": 0.5})
    assert res.accepted and res.clipped_joints == ()
    g1 = b.snapshot().goal
    k, kd = spec.joint_names.index("index_pip"), spec.joint_names.index("index_dip")
    np.testing.assert_allclose([g1[k], g1[kd]], [0.5, 0.445], atol=1e-12)
    mask = np.ones(21, bool)
    mask[[k, kd]] = False
    np.testing.assert_array_equal(g1[mask], g0[mask])  # other joints keep their goal (exact: not written)
    res = b.command_joints({"index_pip": 5.0, "thumb_cmc_roll": -1.0})
    assert set(res.clipped_joints) == {"index_pip", "index_dip", "thumb_cmc_roll"}
    g2 = b.snapshot().goal
    np.testing.assert_allclose(
        [g2[k], g2[kd], g2[spec.joint_names.index("thumb_cmc_roll")]], [1.74, 1.5486, 0.0], atol=1e-12
    )
    res = b.command_sdk([999])
    assert res.accepted and res.clamped_channels == (0,)


def test_slew_limit_and_state_readout_rate(spec):
    b = make(spec, slew_rad_s=2.0, state_rate_hz=100.0)
    seen = []
    b.on_state = seen.append
    b.reset("open")
    b.command_joints({"index_mcp_pitch": 1.0})
    k = spec.joint_names.index("index_mcp_pitch")
    q = []
    for _ in range(100):
        b.step()
        q.append(b.snapshot().applied[k])
    np.testing.assert_allclose(np.diff(q), 2.0 * DT, atol=1e-12)  # 2 mrad per 1 ms step
    assert [s.step for s in seen] == list(range(0, 101, 10))  # reset + every 10 steps (100 Hz)
    st = b.latest_state()
    assert st.names == spec.joint_names and not st.positions.flags.writeable
    np.testing.assert_allclose(st.velocities[k], 2.0, atol=1e-9)
    np.testing.assert_allclose(st.time, 0.1, atol=1e-12)


def test_thread_safety_command_thread_hammering(spec):
    b = make(spec)
    b.reset("open")
    lo, hi = b.joint_ranges.T
    stop = threading.Event()
    errors: list = []
    counts = {"sent": 0, "bad": 0}

    def commander():
        rng = np.random.default_rng(3)
        try:
            while not stop.is_set():
                u = rng.random()
                bad = u >= 0.7
                if u < 0.4:
                    cmd = rng.integers(0, 256, size=int(rng.integers(1, 21))).tolist()
                elif u < 0.7:
                    j = int(rng.choice(b.active_indices))
                    cmd = {spec.joint_names[j]: float(rng.uniform(lo[j], hi[j]))}
                else:
                    cmd = BAD_COMMANDS[int(rng.integers(len(BAD_COMMANDS)))]
                res = b.command(cmd)
                counts["sent"] += 1
                counts["bad"] += bad
                if res.accepted == bad:
                    errors.append(("wrong verdict", cmd, res))
        except Exception as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    def reader():
        try:
            while not stop.is_set():
                st, snap = b.latest_state(), b.snapshot()
                if not (np.all(np.isfinite(st.positions)) and snap.applied.shape == (21,)):
                    errors.append(("bad readout", st))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=commander), threading.Thread(target=reader)]
    logging.getLogger("dockbench.hand.bridge").disabled = True
    try:
        for t in threads:
            t.start()
        steps = 0
        while steps < 300 or (counts["sent"] < 200 and steps < 5000):
            steps += 1
            r = b.step()
            q = b.data.qpos[b.qpos_addresses]
            assert r.min_distance >= -PEN_TOL - 1e-12
            assert np.all(q >= lo - 1e-12) and np.all(q <= hi + 1e-12)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=10)
        logging.getLogger("dockbench.hand.bridge").disabled = False
    assert not errors, errors[:3]
    assert counts["sent"] >= 200
    assert b.rejected_count == counts["bad"]
    # the bridge is still coherent: a last command is tracked exactly
    b.command_preset("half_fist")
    for _ in range(600):
        b.step()
    np.testing.assert_allclose(b.snapshot().applied, b.snapshot().goal, atol=EXACT)


def test_model_ratio_mismatch_is_a_model_error(spec, tmp_path):
    from importlib import resources

    import yaml

    raw = yaml.safe_load(resources.files("dockbench.assets").joinpath("hands", "g20_left_spec.yaml").read_text())
    raw["joints"][4]["mimic"]["ratio"] = 1.0  # thumb_ip
    path = tmp_path / "other.yaml"
    path.write_text(yaml.safe_dump(raw))
    other = load_spec(path)
    with pytest.raises(ModelError, match="thumb_ip.*spec .* says ratio 1.0"):
        HandBridge.standalone(BridgeConfig(), other)


def test_parse_command_stream_reports_bad_lines():
    lines = [
        '{"t": 0, "sdk": [1, 2]}',
        "",
        "# comment",
        "not json",
        '{"t": "x", "sdk": []}',
        '{"t": 1, "sdk": [], "joints": {}}',
        '{"t": 2.5, "joints": {"index_pip": 0.1}}',
    ]
    cmds, errors = parse_command_stream(lines, "f.jsonl")
    assert [(c.time, c.line) for c in cmds] == [(0.0, 1), (2.5, 7)]
    assert [e.split(":")[1] for e in errors] == ["4", "5", "6"]


# ---------------------------------------------------------------------------------------------- CLI
def test_cli_track_test(capsys):
    assert g20_bridge.main(["--track-test"]) == 0
    assert capsys.readouterr().out.startswith("PASS")
    assert g20_bridge.main(["--track-test", "--pd-drive"]) == 0
    assert "PASS: track test (pd)" in capsys.readouterr().out


def test_cli_replay_and_record(tmp_path, capsys, spec):
    cmds = tmp_path / "cmds.jsonl"
    cmds.write_text(
        "\n".join(
            [
                json.dumps({"t": 0.0, "sdk": list(spec.preset("half_fist"))}),
                "garbage line",
                json.dumps({"t": 0.05, "joints": {"bogus": 1.0}}),
                json.dumps({"t": 0.1, "joints": {"index_pip": 0.5}}),
            ]
        )
    )
    out = tmp_path / "states.jsonl"
    rc = g20_bridge.main(["--commands", str(cmds), "--record", str(out), "--headless", "--max-steps", "400"])
    assert rc == 0
    assert "commands accepted 2, refused 1" in capsys.readouterr().out
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 41 and rows[-1]["step"] == 400
    assert rows[-1]["name"] == list(spec.joint_names)
    final = dict(zip(rows[-1]["name"], rows[-1]["position"], strict=True))
    np.testing.assert_allclose([final["index_pip"], final["index_dip"]], [0.5, 0.445], atol=EXACT)
    np.testing.assert_allclose(final["middle_pip"], 1.194117647, atol=1e-6)


def test_cli_no_projection_and_errors(tmp_path, capsys, spec):
    cmds = tmp_path / "thumb.jsonl"
    cmds.write_text(json.dumps({"t": 0.0, "joints": thumb_into_palm_goal(spec)}) + "\n")
    args = ["--commands", str(cmds), "--headless", "--max-steps", "300", "--slew-rad-s", "0"]
    assert g20_bridge.main(args + ["--no-collision-project"]) == 0
    deep = capsys.readouterr().out
    assert g20_bridge.main(args) == 0
    held = capsys.readouterr().out

    def depth(text):
        return float(text.split("deepest contact ")[1].split(" mm")[0])

    assert depth(deep) < -15.0 and depth(held) >= -0.5
    assert g20_bridge.main(["--spec", str(tmp_path / "missing.yaml"), "--headless"]) == 1
    assert "error:" in capsys.readouterr().err
    assert g20_bridge.main(["--preset", "nope", "--headless", "--max-steps", "1"]) == 1


def test_cli_snapshot(tmp_path, capsys):
    try:
        m = mujoco.MjModel.from_xml_string("<mujoco/>")
        mujoco.Renderer(m, 8, 8).close()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no offscreen GL here: {exc}")
    png = tmp_path / "hand.png"
    assert (
        g20_bridge.main(["--preset", "fist", "--headless", "--max-steps", "50", "--snapshot", str(png)]) == 0
    )
    import matplotlib.image as mpimg

    img = mpimg.imread(str(png))
    assert img.shape[:2] == (480, 640)
    assert img[..., :3].std() > 0.02  # not a blank frame


def test_fuzzed_commands_never_raise_and_only_valid_ones_move_the_goal(spec):
    """3,000 seeded random commands (huge integers, empty lists, NaN, strings, nested lists, odd keys,
    numpy arrays): HandBridge.command returns a CommandResult for every one and never raises; a
    refused command leaves the goal and its sequence number unchanged; every refusal is counted
    under a reason."""
    import random

    rng = random.Random(23)
    b = make(spec)
    names = list(spec.joint_names)
    atoms = [0, 1, 255, 256, -1, 0.5, 10**400, -(10**400), 2**64, float("nan"), float("inf"), "1", None, True,
             [1], {}, b"x", 1e308, -1e-300]

    def value():
        return rng.choice(atoms) if rng.random() < 0.5 else rng.uniform(-10, 300)

    def command():
        r = rng.random()
        if r < 0.45:
            return [value() for _ in range(rng.choice([0, 1, 5, 20, 21, 40]))]
        if r < 0.8:
            keys = [rng.choice(names + ["bogus", 3, None, ("t",)]) for _ in range(rng.randint(0, 4))]
            return {k: value() for k in keys}
        if r < 0.9:
            return np.array([value() for _ in range(rng.randint(0, 22))], dtype=object if rng.random() < 0.5 else None)
        return rng.choice(["open", None, 3.0, object(), b"\x00" * 20, [[1, 2], [3]]])

    accepted = rejected = 0
    for _ in range(3000):
        before = b.snapshot()
        try:
            cmd = command()
        except (ValueError, OverflowError, TypeError):  # numpy cannot hold the atoms: not a command
            continue
        res = b.command(cmd)
        if res.accepted:
            accepted += 1
            assert res.seq == before.goal_seq + 1
        else:
            rejected += 1
            assert res.reason and res.seq == before.goal_seq
            np.testing.assert_array_equal(b.snapshot().goal, before.goal)
    assert accepted > 100 and rejected > 1000, (accepted, rejected)
    assert sum(b.rejected_by_reason.values()) == b.rejected_count == rejected
    assert {"empty", "not_finite", "unknown_name", "not_a_number"} <= set(b.rejected_by_reason)
