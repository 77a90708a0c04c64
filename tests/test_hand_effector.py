"""The G20 hand as an end effector in the 1 ms torque loop (hand/effector.py, docs/hand_effector.md).

Model: arm + 21 hand joints, the hand outside the arm's Jacobian (Pinocchio nv = 7), the lumped
inertia equal to MuJoCo's at every hand pose (re-lumped when the fingers move), the joint lock that
makes the plant the rigid model. Bridge: ``host_steps=True`` gives the standalone bridge's poses exactly, the
fixed-point skip changes nothing. Scenarios: tracking gates with the fingers moving, presets reached within 0.02 rad,
self-penetration ≤ 0.5 mm, the press at the commanded force with F/T = truth, iiwa14 runs clean.
Schedule validation: errors name the file and the key path.

The hand metrics (``hand.max_preset_error``, ``hand.max_penetration``) are checked here rather than
as scenario gates until they are part of ``telemetry.metrics.METRICS`` (see the report).
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import mujoco
import numpy as np
import pinocchio as pin
import pytest
from dockbench.hand.bridge import BridgeConfig, HandBridge
from dockbench.hand.effector import HAND_PREFIX, hand_metrics
from dockbench.hand.mapping import sdk_to_joint_positions
from dockbench.hand.spec import load_spec
from dockbench.sim.errors import ScenarioError
from dockbench.sim.loop import build, run, simulate
from dockbench.sim.scenario import load_scenario, scenario_from_dict

from tests.helpers import SCENARIOS, TOL, scenario_dict

#: the brief's hand gates (docs/theory/g20_hand.md §5 track test tolerance; bridge penetration tolerance)
PRESET_TOL = 0.02  # rad
PENETRATION_MAX = 5e-4  # m
N_HAND_JOINTS = 21
#: F/T vs contact truth, mean over the final second of the hand press (relative to |f_truth|). Physics,
#: not round-off: the F/T also carries the hand's inertial load m·ā, and the residual mean acceleration
#: over that second is ~7e-6 m/s² (Δv ≈ 7e-6 m/s), so |Δf| ≈ 3.1e-6 N at |f| ≈ 10.6 N (3e-7 relative,
#: the same on all five BLAS / SIMD code paths to 1e-14). 1e-4 leaves 300× headroom and still fails a
#: frame, sign or lever-arm error (O(|f|)) or a missing gravity compensation (m g ≈ 10 N).
FT_TRUTH_HAND_REL = 1e-4


@functools.cache
def _run_file(name: str) -> Any:
    return run(load_scenario(SCENARIOS / f"{name}.yaml"), out_root=None)


def _dict(name: str = "fr3_g20_tracking", **tool: Any) -> dict:
    d = scenario_dict(name)
    d["tool"].update(tool)
    return d


def _arm_lock_free(m: mujoco.MjModel) -> None:
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_FRICTIONLOSS)


# ----------------------------------------------------------------------------------------- model
@pytest.mark.parametrize("name", ["fr3_g20_tracking", "iiwa14_g20_tracking"])
def test_assembly_has_arm_plus_21_hand_joints_and_the_hand_beyond_the_sensor(name: str) -> None:
    s = build(load_scenario(SCENARIOS / f"{name}.yaml"))
    m, asm = s.asm.model, s.asm
    assert m.njnt == 7 + N_HAND_JOINTS and m.nv == 7 + N_HAND_JOINTS
    assert asm.pin_model.nv == 7 and s.plant.nv == 7
    hand_joints = [m.joint(j).name for j in range(m.njnt) if m.joint(j).name.startswith(HAND_PREFIX)]
    assert sorted(hand_joints) == sorted(HAND_PREFIX + n for n in load_spec().joint_names)
    # the hand subtree is below the adapter body that carries the F/T site
    tool = m.body(asm.tool.root_body).id
    assert m.site_bodyid[asm.sensor_site] == tool
    assert m.body_parentid[m.body(HAND_PREFIX + "g20_root").id] == tool
    assert m.site_bodyid[asm.ee_site] == m.body(HAND_PREFIX + "g20_root").id
    hand_bodies = {b for b in range(m.nbody) if m.body(b).name.startswith(HAND_PREFIX)}
    assert len(hand_bodies) == 22
    assert hand_bodies <= set(s.wrench.tool_bodies.tolist())
    # hand collision geoms meet the world but never each other in the plant
    col = [g for g in range(m.ngeom) if m.geom_bodyid[g] in hand_bodies and m.geom_contype[g]]
    assert len(col) == 16
    for g in col:
        assert (m.geom_contype[g] & m.geom_conaffinity[g]) == 0
        assert m.geom_conaffinity[g] & 1
    # the arm's Jacobian: 7 columns; MuJoCo's hand columns of the EE Jacobian are exactly zero
    snap = s.dynamics.update(s.q0, np.zeros(7))
    assert snap.J_ee_lwa.shape == (6, 7)
    jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    mujoco.mj_jacSite(m, s.data, jacp, jacr, asm.ee_site)
    hand_dofs = np.setdiff1d(np.arange(m.nv), asm.dof_adr)
    assert np.all(jacp[:, hand_dofs] == 0.0) and np.all(jacr[:, hand_dofs] == 0.0)
    np.testing.assert_allclose(snap.J_ee_lwa, np.vstack([jacp[:, asm.dof_adr], jacr[:, asm.dof_adr]]),
                               rtol=0, atol=TOL["jacobian_abs"])
    # ... while a fingertip does depend on the hand joints (they are real dofs, just not the arm's)
    mujoco.mj_jacSite(m, s.data, jacp, jacr, m.site(HAND_PREFIX + "index_tip").id)
    assert np.abs(jacp[:, hand_dofs]).max() > 1e-3


def _arm_block(m: mujoco.MjModel, data: mujoco.MjData, dof_adr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo's M restricted to the arm dofs and the arm's bias, at the state in ``data``."""
    mujoco.mj_forward(m, data)
    Mfull = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, data, Mfull)
    return Mfull[np.ix_(dof_adr, dof_adr)], data.qfrc_bias[dof_adr].copy()


@pytest.mark.parametrize("name", ["fr3_g20_tracking", "iiwa14_g20_tracking"])
@pytest.mark.parametrize("preset", ["open", "half_fist", "fist"])
def test_arm_model_follows_the_hand_pose(name: str, preset: str) -> None:
    """The hand held at OPEN, half fist or fist (``initial``): the snapshot's M(q) and h(q, v) equal
    MuJoCo's arm block to 1e-9 relative (TOL mass_matrix_rel / bias_rel), gravity on, at 10 random arm
    configurations: the loop re-lumps the hand's inertia at its pose (sim.dynamics.LumpedInertia). The
    model built at the lumping pose (OPEN) alone is off by 1e-3 at the half fist, as documented."""
    d = _dict(name, initial=preset, schedule=[])
    d["sim"]["gravity"] = [0.0, 0.0, -9.81]
    s = build(scenario_from_dict(d))
    m, asm = s.asm.model, s.asm
    data = mujoco.MjData(m)
    data.qpos[:] = s.data.qpos  # the hand at the preset, as the runtime wrote it
    rng = np.random.default_rng(3)
    for _ in range(10):
        q = rng.uniform(s.plant.q_min, s.plant.q_max)
        v = rng.uniform(-1.0, 1.0, 7)
        data.qpos[asm.qpos_adr] = q
        data.qvel[:] = 0.0
        data.qvel[asm.dof_adr] = v
        M_mj, h_mj = _arm_block(m, data, asm.dof_adr)
        snap = s.dynamics.update(q, v)
        np.testing.assert_allclose(snap.M, M_mj, rtol=0, atol=TOL["mass_matrix_rel"] * np.abs(M_mj).max())
        np.testing.assert_allclose(snap.h, h_mj, rtol=0, atol=TOL["bias_rel"] * max(np.abs(h_mj).max(), 1.0))
    assert s.runtime.summary()["relumps"] == 1
    # what the model lumped once at OPEN gives at this pose (the old behaviour)
    from dockbench.sim.dynamics import pinocchio_model_from_mujoco

    at_open, _ = pinocchio_model_from_mujoco(m, asm.robot.joint_names, (), qpos_ref=asm.tool.lumping_qpos(m))
    M_open = pin.crba(at_open, at_open.createData(), q)
    M_open = np.triu(M_open) + np.triu(M_open, 1).T
    err = np.abs(M_open - M_mj).max() / np.abs(M_mj).max()
    if preset == "open":
        assert err <= TOL["mass_matrix_rel"]
    else:
        assert err > 1e-4, err
    # OPEN itself: the spec's preset, mimic joints completed
    open_q = sdk_to_joint_positions(load_spec().preset("open"), load_spec())
    lq = asm.tool.lumping_qpos(m)
    for n, val in open_q.items():
        # exact: lumping_qpos is this same function (sdk_to_joint_positions), the clip inactive at OPEN
        assert lq[m.jnt_qposadr[m.joint(HAND_PREFIX + n).id]] == val


def test_arm_model_follows_the_fingers_in_the_loop() -> None:
    """fr3_g20_tracking closes the hand at 4 s: at 6 s (half fist held) the snapshot M of the last step
    equals MuJoCo's arm block at that state to 1e-9, and the hand re-lumped on every step the pose
    moved (not on the held steps)."""
    s = build(scenario_from_dict(scenario_dict("fr3_g20_tracking")))
    tel, status, _, _ = simulate(s, duration=6.0)
    assert status == "completed"
    m, asm = s.asm.model, s.asm
    data = mujoco.MjData(m)
    data.qpos[:] = s.data.qpos
    q, v = tel.arrays["q"][tel.n - 1], tel.arrays["v"][tel.n - 1]
    data.qpos[asm.qpos_adr] = q
    data.qvel[:] = 0.0
    data.qvel[asm.dof_adr] = v
    M_mj, _ = _arm_block(m, data, asm.dof_adr)
    snap = s.dynamics.update(q, v)
    np.testing.assert_allclose(snap.M, M_mj, rtol=0, atol=TOL["mass_matrix_rel"] * np.abs(M_mj).max())
    relumps = s.runtime.summary()["relumps"]
    moved = int(np.count_nonzero(np.any(np.diff(tel.arrays["hand_applied"][: tel.n], axis=0) != 0.0, axis=1)))
    assert relumps == 1 + moved and 50 < moved < 1000, (relumps, moved)


@pytest.mark.parametrize(("armature", "bound"), [(10.0, 2e-6), (1e-4, None)])
def test_joint_lock_makes_the_plant_the_rigid_lumped_model(armature: float, bound: float | None) -> None:
    """Arm accelerations of the MuJoCo plant (hand dofs free between writes) vs. Pinocchio's ABA of
    the lumped model: the default lock (10 kg·m²) agrees to 2e-6 relative; with the hand's own
    armature (1e-4 kg·m²) the fingers swing and the arm sees a different inertia (> 1e-3)."""
    s = build(scenario_from_dict(_dict(joint_lock_armature=armature)))
    m, asm = s.asm.model, s.asm
    _arm_lock_free(m)  # joint friction is a constraint in MuJoCo, not part of ABA
    data = mujoco.MjData(m)
    pdata = asm.pin_model.createData()
    rng = np.random.default_rng(5)
    worst = 0.0
    for _ in range(5):
        q = s.q0 + 0.3 * rng.standard_normal(7)
        v = rng.standard_normal(7)
        tau = 5.0 * rng.standard_normal(7)
        data.qpos[:] = asm.tool.lumping_qpos(m)
        data.qpos[asm.qpos_adr] = q
        data.qvel[:] = 0.0
        data.qvel[asm.dof_adr] = v
        data.ctrl[:] = 0.0
        data.ctrl[asm.act_ids] = tau
        data.ctrl[s.runtime._act] = data.qpos[s.runtime._qadr][s.runtime._act_src]  # noqa: SLF001
        mujoco.mj_forward(m, data)
        a_pin = pin.aba(asm.pin_model, pdata, q, v, tau - m.dof_damping[asm.dof_adr] * v)
        worst = max(worst, np.abs(data.qacc[asm.dof_adr] - a_pin).max() / np.abs(a_pin).max())
    if bound is not None:
        assert worst < bound, worst
    else:
        assert worst > 1e-3, worst


# ---------------------------------------------------------------------------------------- bridge
def _drive(bridge: HandBridge, commands: list[tuple[int, Any]], steps: int) -> tuple[np.ndarray, list]:
    bridge.reset("open")
    applied, results = np.zeros((steps, N_HAND_JOINTS)), []
    todo = dict(commands)
    for k in range(steps):
        if k in todo:
            cmd = todo[k]
            assert (bridge.command_preset(cmd) if isinstance(cmd, str) else bridge.command(cmd)).accepted
        r = bridge.step()
        results.append((r.projected, r.fell_back, r.min_distance, r.evaluations))
        applied[k] = bridge.snapshot().applied
    return applied, results


def test_loop_bridge_gives_the_base_bridge_poses_exactly() -> None:
    """Fist and full closures (projection on most steps, fingertips resting on the palm): the loop
    variant (kinematics + collision instead of mj_forward, skipped when fresh; ufunc slew) gives the
    same poses and step records, on the private hand model and on the plant with hand–hand contacts."""
    cfg = BridgeConfig(dt=1e-3)
    commands = [(0, "fist"), (400, [0] * 20), (800, "open")]
    ref, ref_r = _drive(HandBridge.standalone(cfg), commands, 1000)
    assert sum(r[0] for r in ref_r) > 300  # the projection really ran
    loop, loop_r = _drive(HandBridge.standalone(cfg, host_steps=True), commands, 1000)
    # exact: the same MuJoCo kinematics / collision calls on the same model, and the same elementwise
    # IEEE operations for the slew (np.minimum/np.maximum are np.clip's operations)
    np.testing.assert_array_equal(loop, ref)
    assert loop_r == ref_r
    s = build(scenario_from_dict(_dict(project_environment=True)))  # plant keeps hand–hand contacts
    m = s.asm.model
    plant = HandBridge(m, mujoco.MjData(m), config=BridgeConfig(dt=1e-3, hand_hand_only=True),
                       prefix=HAND_PREFIX, host_steps=True)
    on_plant, plant_r = _drive(plant, commands, 1000)
    np.testing.assert_allclose(on_plant, ref, rtol=0, atol=1e-12)
    assert [r[:2] for r in plant_r] == [r[:2] for r in ref_r]


def test_fixed_point_skip_changes_nothing() -> None:
    """Skipping the bridge at its fixed points (slew done, pose unchanged) gives bit-identical
    telemetry, fist hold with resting contacts included, at a fraction of the bridge steps."""
    d = _dict(schedule=[{"t": 0.2, "preset": "fist"}, {"t": 1.0, "preset": "open"}])
    d["sim"]["duration"] = 1.5
    out = {}
    for skip in (True, False):
        d["tool"]["skip_when_settled"] = skip
        s = build(scenario_from_dict(copy.deepcopy(d)))
        tel, status, _, _ = simulate(s)
        assert status == "completed"
        out[skip] = (tel.channels(), s.runtime.bridge_steps)
    (a, n_skip), (b, n_full) = out[True], out[False]
    # exact: a skipped step is an exact fixed point of the bridge (slew done: the goal is written back
    # unchanged; pose unchanged), so skipping it cannot change a bit
    for key in b:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert n_full == 1501 and n_skip < n_full / 2, (n_skip, n_full)


# ------------------------------------------------------------------------------------- scenarios
@pytest.mark.slow
def test_fr3_g20_tracking_passes_its_gates_while_the_fingers_move() -> None:
    r = _run_file("fr3_g20_tracking")
    assert r.verdict == "PASS", r.gates
    ch, t = r.telemetry, r.telemetry["t"]
    # the fingers did move inside the figure-8 reference: closing after 4 s, opening after 8 s
    applied = ch["hand_applied"]
    for t0 in (4.0, 8.0):
        w = (t >= t0) & (t <= t0 + 0.5)
        assert np.ptp(applied[w], axis=0).max() > 1.0
        err = np.linalg.norm(ch["ee_pos"][w] - ch["ee_pos_des"][w], axis=1)
        assert err.max() < 0.015  # the per-segment peak gate holds inside the finger-motion windows
    hm = hand_metrics(ch)
    assert hm["hand.max_preset_error"] <= PRESET_TOL, hm
    assert hm["hand.max_penetration"] <= PENETRATION_MAX, hm
    summary = r.meta["tool_summary"]
    assert [c["command"] for c in summary["commands"]] == ["half_fist", "open"]
    for c in summary["commands"]:
        assert c["accepted"] and c["reached_at"] is not None and c["final_error"] <= PRESET_TOL
    assert summary["rejected"] == []
    # the preset really is the spec's half fist (mimic joints completed)
    spec = load_spec()
    half = sdk_to_joint_positions(spec.preset("half_fist"), spec)
    k = np.searchsorted(t, 7.9)
    np.testing.assert_allclose(applied[k], [half[n] for n in spec.joint_names], rtol=0, atol=PRESET_TOL)


@pytest.mark.slow
def test_fist_self_contact_is_projected_and_not_counted_as_tool_contact() -> None:
    """The vendor fist pushes fingertips into the palm: the projection stops them at ≤ 0.5 mm, the
    plant never sees the (internal) hand–hand contacts, the arm keeps tracking."""
    d = _dict(schedule=[{"t": 0.5, "preset": "fist"}, {"t": 2.0, "preset": "open"}])
    d["sim"]["duration"] = 3.0
    r = run(scenario_from_dict(d), out_root=None)
    ch = r.telemetry
    hm = hand_metrics(ch)
    assert hm["hand.max_penetration"] <= PENETRATION_MAX + 1e-9, hm
    assert hm["hand.max_penetration"] > 1e-4  # fingertips do rest on the palm
    assert hm["hand.projected_ratio"] > 10.0 and hm["hand.fallback_count"] == 0, hm
    assert hm["hand.max_preset_error"] > PRESET_TOL  # the fist is blocked by the palm, as it should be
    assert r.metrics["contact.max_contacts"] == 0
    assert ch["contact_count_all"].max() == 0
    assert r.metrics["tracking.pos_peak"] < 0.015 and r.metrics["tracking.rot_peak_deg"] < 0.5
    # the final OPEN is reached again
    np.testing.assert_allclose(ch["hand_applied"][-1], ch["hand_goal"][-1], rtol=0, atol=PRESET_TOL)


def _gate(result: Any, metric: str) -> dict:
    return next(g for g in result.gates if g["metric"] == metric)


@pytest.mark.slow
def test_fr3_g20_press_reaches_the_commanded_force_and_ft_equals_truth() -> None:
    r = _run_file("fr3_g20_press")
    assert r.verdict == "PASS", r.gates
    g = _gate(r, "contact.steady_axial_force_truth")
    f_cmd = 0.5 * (g["min"] + g["max"])
    assert f_cmd == pytest.approx(10.0)
    f_truth = r.metrics["contact.steady_axial_force_truth"]
    assert abs(f_truth - f_cmd) <= 0.025 * f_cmd, f_truth  # a regulated set-point (docs/theory/force_control.md)
    ch, t = r.telemetry, r.telemetry["t"]
    w = t >= t[-1] - 1.0
    # F/T = truth quasi-statically (the mean over the final second, where the hand is at rest)
    ft, truth = ch["wrench_ext_world"][w].mean(axis=0), ch["wrench_truth_world"][w].mean(axis=0)
    atol = FT_TRUTH_HAND_REL * np.linalg.norm(truth[:3])
    np.testing.assert_allclose(ft[:3], truth[:3], rtol=0, atol=atol)
    np.testing.assert_allclose(ft[3:], truth[3:], rtol=0, atol=1e-5 * np.linalg.norm(truth[3:]) + 1e-9)
    # the force is the set-point's: F_d = 10 N ramped in, the law's axial force (the F/T) on it, a small
    # integral (what the joint friction holds back)
    s = build(load_scenario(SCENARIOS / "fr3_g20_press.yaml"))
    assert ch["ctrl_fs_s"][-1] == 1.0 and ch["ctrl_fs_force_desired"][-1] == 10.0
    np.testing.assert_allclose(ch["ctrl_fs_force_axial"][w].mean(), f_truth, rtol=0, atol=0.05)
    assert abs(ch["ctrl_fs_integral"][-1]) < 2.0
    # only the palm touches the plate (the thumb passes above its top edge)
    m, data = s.asm.model, s.data
    data.qpos[s.asm.qpos_adr] = ch["q"][-1]
    mujoco.mj_forward(m, data)
    plate = m.geom("plate").id
    touching = {m.geom(gg).name for con in data.contact[: data.ncon] for gg in con.geom if plate in con.geom}
    assert touching == {"plate", HAND_PREFIX + "palm_col"}, touching


@pytest.mark.slow
def test_iiwa14_with_the_same_mount_runs_clean() -> None:
    r = _run_file("iiwa14_g20_tracking")
    assert r.status == "completed" and r.verdict == "PASS" and r.gates == []
    fr3 = load_scenario(SCENARIOS / "fr3_g20_tracking.yaml").tool.config
    iiwa = load_scenario(SCENARIOS / "iiwa14_g20_tracking.yaml").tool.config
    assert iiwa.mount == fr3.mount
    hm = hand_metrics(r.telemetry)
    assert hm["hand.max_preset_error"] <= PRESET_TOL and hm["hand.max_penetration"] <= PENETRATION_MAX
    assert r.metrics["contact.max_contacts"] == 0


def test_joint_command_and_run_folder_channels(tmp_path) -> None:
    """A name-based command moves the named joint (its mimic follows), the others keep their goal;
    the hand channels land in telemetry.npz with the spec's joint order in meta.json."""
    d = _dict(schedule=[{"t": 0.0, "joints": {"index_pip": 0.8, "thumb_cmc_yaw": 0.5}}])
    d["sim"]["duration"] = 0.4
    r = run(scenario_from_dict(d), out_root=tmp_path)
    from dockbench.telemetry.run import Run

    loaded = Run.load(r.run_dir)
    names = loaded.meta["tool_summary"]["joint_names"]
    assert names == list(load_spec().joint_names)
    applied = loaded.channels["hand_applied"]
    assert applied.shape == (401, N_HAND_JOINTS)
    for ch in ("hand_goal", "hand_penetration", "hand_projected", "hand_fell_back"):
        assert ch in loaded.channels
    last = dict(zip(names, applied[-1], strict=True))
    assert last["index_pip"] == pytest.approx(0.8, abs=1e-12)
    assert last["index_dip"] == pytest.approx(0.89 * 0.8, abs=1e-12)
    assert last["thumb_cmc_yaw"] == pytest.approx(0.5, abs=1e-12)
    first = dict(zip(names, applied[0], strict=True))
    assert last["middle_pip"] == first["middle_pip"]  # not named: keeps the OPEN goal (exact: not rewritten)
    assert loaded.meta["channel_units"]["hand_applied"] == "rad"


# ------------------------------------------------------------------------------------- validation
_BAD = [
    ({"schedule": [{"t": 1.0, "preset": "claw"}]}, "tool.schedule[0].preset", "known: fist, half_fist, open"),
    ({"schedule": [{"t": 1.0, "sdk": [255] * 19}]}, "tool.schedule[0].sdk",
     "expected a list of 20 values, got 19"),
    ({"schedule": [{"t": 1.0, "sdk": [255] * 19 + [300]}]}, "tool.schedule[0].sdk[19]", "must be <= 255"),
    ({"schedule": [{"t": 0.0, "preset": "open"}, {"t": 1.0, "preset": "open", "sdk": [0] * 20}]},
     "tool.schedule[1].sdk", "exactly one of preset, sdk, joints"),
    ({"schedule": [{"t": 1.0}]}, "tool.schedule[0]", "exactly one of preset, sdk, joints; got none"),
    ({"schedule": [{"t": 1.0, "joints": {"index_pipp": 0.3}}]}, "tool.schedule[0].joints",
     "unknown key 'index_pipp'"),
    ({"schedule": [{"t": 1.0, "joints": {"index_pip": 45.0}}]}, "tool.schedule[0].joints.index_pip",
     "within the joint range"),
    ({"schedule": [{"t": 1.0, "joints": {}}]}, "tool.schedule[0].joints", "name at least one joint"),
    ({"schedule": [{"t": 2.0, "preset": "open"}, {"t": 1.0, "preset": "fist"}]}, "tool.schedule[1].t",
     "non-decreasing"),
    ({"schedule": [{"t": -1.0, "preset": "open"}]}, "tool.schedule[0].t", "must be >= 0.0"),
    ({"schedule": [{"time": 1.0, "preset": "open"}]}, "tool.schedule[0]", "unknown key 'time'"),
    ({"initial": "flat"}, "tool.initial", "unknown preset 'flat'"),
    ({"lumping_preset": "claw"}, "tool.lumping_preset", "unknown preset 'claw'"),
    ({"mount": {"rpy_deg": [0.0, 0.0]}}, "tool.mount.rpy_deg", "expected a list of 3 values"),
]


@pytest.mark.parametrize(("tool", "key", "message"), _BAD, ids=[b[1] + ":" + b[2][:20] for b in _BAD])
def test_schedule_and_config_errors_name_file_and_key_path(tool: dict, key: str, message: str) -> None:
    d = _dict(**tool)
    with pytest.raises(ScenarioError) as exc:
        scenario_from_dict(d, file="scenarios/x.yaml")
    text = str(exc.value)
    assert text.startswith(f"scenarios/x.yaml: {key}: "), text
    assert message in text, text


def test_valid_schedule_forms_parse() -> None:
    d = _dict(schedule=[
        {"t": 0.0, "preset": "open"},
        {"t": 1.0, "sdk": [80] * 5 + [255, 193, 148, 105, 42, 245] + [255] * 4 + [80] * 5},
        {"t": 2.0, "joints": {"index_pip": 0.5}},
    ])
    cfg = scenario_from_dict(d).tool.config
    assert [c.label() for c in cfg.schedule] == ["open", "sdk", "joints"]
    assert cfg.schedule[2].command() == {"index_pip": 0.5}
    assert len(cfg.schedule[1].command()) == 20
