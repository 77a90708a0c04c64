"""The control loop and the run folder: contents, clipping, control period, failure paths, CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from dockbench.experiments.run_docking import main as cli_main
from dockbench.sim.errors import SimulationDiverged
from dockbench.sim.loop import build, run, simulate
from dockbench.sim.scenario import scenario_from_dict
from dockbench.telemetry.log import CHANNELS
from dockbench.telemetry.run import Run

from tests.helpers import SCENARIOS, TOL, scenario_dict


def _short(name: str = "iiwa14_docking", duration: float = 0.3, **sim) -> dict:
    d = scenario_dict(name)
    d["sim"].update({"duration": duration, **sim})
    return d


def test_run_folder_contents(tmp_path: Path) -> None:
    r = run(scenario_from_dict(_short()), out_root=tmp_path)
    assert r.run_dir is not None and r.run_dir.parent.name == "iiwa14_docking"
    for f in ("telemetry.npz", "meta.json", "summary.json", "scene.xml"):
        assert (r.run_dir / f).is_file(), f
    loaded = Run.load(r.run_dir)
    for ch in CHANNELS:
        assert ch in loaded.channels, ch
    n = len(loaded.channels["t"])
    assert n == 301
    np.testing.assert_allclose(np.diff(loaded.channels["t"]), 1e-3, rtol=1e-9)
    meta = json.loads((r.run_dir / "meta.json").read_text())
    assert meta["timing"]["real_time_factor"] > 0
    assert meta["scenario"]["controller"]["type"] == "khatib"
    assert "mujoco" in meta["versions"] and "pinocchio" in meta["versions"]
    assert r.verdict == "INCOMPLETE"  # 0.3 s is shorter than the planner
    assert loaded.summary["verdict"] == "INCOMPLETE"


def test_max_torque_clips_and_counts_saturation() -> None:
    d = _short(duration=0.2, gravity=[0.0, 0.0, -9.81])  # gravity torques ≫ 5 N·m
    d["robot"]["max_torque"] = 5.0
    r = run(scenario_from_dict(d), out_root=None)
    tau = r.telemetry["tau_applied"]
    assert np.abs(tau).max() <= 5.0 + 1e-12
    assert r.telemetry["saturated"].any()
    cmd = r.telemetry["tau_cmd"]
    sat = np.any(np.abs(cmd) > 5.0, axis=1)
    np.testing.assert_array_equal(sat, r.telemetry["saturated"])  # exact: the same comparison on the same floats


def test_control_period_multiple_of_timestep() -> None:
    d = _short(duration=0.2, timestep=0.0005, control_period=0.001)
    s = build(scenario_from_dict(d))
    tel, status, _, _ = simulate(s)
    assert status == "completed"
    assert tel.n == 201
    assert s.data.time == pytest.approx(0.201, abs=1e-9)  # 201 control steps × 2 substeps × 0.5 ms


def test_nan_stops_the_run_and_keeps_telemetry(tmp_path: Path) -> None:
    s = build(scenario_from_dict(_short(duration=0.5)))
    original = s.controller.compute
    calls = {"n": 0}

    def poisoned(snap, ref, w, cmd):
        original(snap, ref, w, cmd)
        calls["n"] += 1
        if calls["n"] > 100:
            s.data.qvel[0] = math.nan  # the plant blows up after step 100

    s.controller.compute = poisoned  # type: ignore[method-assign]
    with pytest.raises(SimulationDiverged, match="NaN/Inf") as exc:
        run(s.scenario, out_root=tmp_path, setup=s)
    assert "telemetry up to this step is kept" in str(exc.value)
    run_dir = next((tmp_path / "iiwa14_docking").iterdir())
    loaded = Run.load(run_dir)
    assert len(loaded.channels["t"]) == 101
    assert loaded.summary["status"] == "diverged"


def test_ctrl_c_writes_what_was_recorded(tmp_path: Path) -> None:
    def interrupt(t, duration):
        if t > 0.1:
            raise KeyboardInterrupt

    r = run(scenario_from_dict(_short(duration=0.5)), out_root=tmp_path, progress=interrupt)
    assert r.status == "interrupted"
    loaded = Run.load(r.run_dir)
    assert 100 <= len(loaded.channels["t"]) < 500
    assert loaded.summary["verdict"] == "INCOMPLETE"


def test_cli_exit_codes(tmp_path: Path, capsys) -> None:
    # 1: bad input, message without traceback
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nrobot: {type: ur5}\nplanner: {type: quintic}\ncontroller: {type: khatib}\n")
    assert cli_main(["--scenario", str(bad), "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and "ur5" in err and "Traceback" not in err
    # 2: incomplete (too short) → not a pass
    code = cli_main(
        [
            "--scenario",
            str(SCENARIOS / "iiwa14_docking.yaml"),
            "--out",
            str(tmp_path),
            "--duration",
            "0.05",
            "--no-progress",
        ]
    )
    assert code == 2
    out = capsys.readouterr().out
    assert "INCOMPLETE" in out and "real time" in out


def test_same_scenario_twice_is_bit_identical() -> None:
    a = run(scenario_from_dict(_short(duration=0.2)), out_root=None).telemetry
    b = run(scenario_from_dict(_short(duration=0.2)), out_root=None).telemetry
    for k in a:  # exact: the same operations on the same inputs in one process
        np.testing.assert_array_equal(a[k], b[k], err_msg=f"channel {k} differs")


def test_observer_force_source_estimates_the_contact_wrench() -> None:
    """wrench.force_source: observer feeds the controller the momentum observer's estimate; in
    quasi-static contact it matches the contact truth (the F/T channel is still recorded)."""
    from tests.helpers import press_scenario

    d = press_scenario()
    d["wrench"] = {"force_source": "observer", "observer_gain": 50.0}
    r = run(scenario_from_dict(d), out_root=None)
    used = r.telemetry["wrench_used_world"][-1]
    truth = r.telemetry["wrench_truth_world"][-1]
    ft = r.telemetry["wrench_ext_world"][-1]
    assert truth[2] > 0.1
    np.testing.assert_allclose(used[:3], truth[:3], rtol=0, atol=0.02 * np.linalg.norm(truth[:3]))
    np.testing.assert_allclose(ft[:3], truth[:3], rtol=0, atol=1e-6 * np.linalg.norm(truth[:3]))
    assert not np.array_equal(used, ft)  # the controller really used the estimate


def test_body_frame_quantities_only_for_controllers_that_need_them() -> None:
    khatib = build(scenario_from_dict(_short()))
    assert not khatib.dynamics.body_frame
    se3 = build(scenario_from_dict(_short("iiwa14_docking_se3")))
    assert se3.dynamics.body_frame
    snap = se3.dynamics.update(se3.q0, np.full(7, 0.1))
    R = snap.R_world_ee
    np.testing.assert_allclose(snap.J_ee_body[:3], R.T @ snap.J_ee_lwa[:3], atol=1e-12)
    np.testing.assert_allclose(snap.twist_ee_body, snap.J_ee_body @ snap.v, atol=1e-12)


def test_nan_torque_from_the_controller_is_caught(tmp_path: Path) -> None:
    s = build(scenario_from_dict(_short(duration=0.3)))
    original = s.controller.compute
    calls = {"n": 0}

    def poisoned(snap, ref, w, cmd):
        original(snap, ref, w, cmd)
        calls["n"] += 1
        if calls["n"] > 50:
            cmd.tau[3] = math.nan

    s.controller.compute = poisoned  # type: ignore[method-assign]
    with pytest.raises(SimulationDiverged):
        run(s.scenario, out_root=tmp_path, setup=s)
    loaded = Run.load(next((tmp_path / "iiwa14_docking").iterdir()))
    assert len(loaded.channels["t"]) == 51
    assert np.isnan(loaded.channels["tau_cmd"][-1, 3])


def test_coalesce_merges_adjacent_views_and_keeps_the_row() -> None:
    """_coalesce merges consecutive pieces of one buffer (and only those): the concatenated row is
    unchanged."""
    from dockbench.sim.loop import _coalesce

    buf, other = np.arange(10.0), np.arange(100.0, 104.0)
    parts = [buf[0:3], buf[3:5], other[0:2], buf[5:6], buf[7:10], other[2:4]]
    merged = _coalesce(parts)
    assert len(merged) == 5  # buf[0:5] | other[0:2] | buf[5:6] | buf[7:10] (gap at 6) | other[2:4]
    assert np.shares_memory(merged[0], buf) and merged[0].size == 5
    np.testing.assert_array_equal(np.concatenate(merged), np.concatenate(parts))  # exact: views of the same data


def test_pose_channels_derived_after_the_run_equal_the_per_step_conversion() -> None:
    """ee_pos / ee_quat / ee_quat_des are derived from the raw 4×4 pose and desired rotation once the
    run ends: equal to Pinocchio's pose and MuJoCo's mat2Quat of it at every step, unit norm; the raw
    columns are not channels and are not saved."""
    import mujoco

    setup = build(scenario_from_dict(_short(duration=0.2)))
    tel, status, _, _ = simulate(setup)
    assert status == "completed"
    assert "T_world_ee" not in tel.channels() and "ee_quat" in tel.channels()
    assert "ee_quat" not in tel.row_channels and "T_world_ee" in tel.row_channels
    dyn = setup.dynamics
    for i in (0, tel.n // 2, tel.n - 1):
        dyn.update(tel.q[i], tel.v[i])
        oMf = dyn.data.oMf[dyn.ee_frame]
        # exact: the recorded pose is a copy of Pinocchio's oMf from the same update on the same q, q̇
        np.testing.assert_array_equal(tel.ee_pos[i], oMf.translation)
        q_ref = np.zeros(4)
        mujoco.mju_mat2Quat(q_ref, np.ascontiguousarray(oMf.rotation).ravel())
        # vectorised mju_mat2Quat vs MuJoCo's (bound in tests/helpers.py)
        np.testing.assert_allclose(tel.ee_quat[i], q_ref, rtol=0, atol=TOL["quat_vs_mujoco_abs"])
    np.testing.assert_allclose(np.linalg.norm(tel.ee_quat[: tel.n], axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(tel.ee_quat_des[: tel.n], axis=1), 1.0, atol=1e-12)


def test_sensor_pose_only_for_controllers_that_need_it() -> None:
    """T_world_sensor is filled for the HQP (it moves F_ext to the EE) and for the momentum observer
    as force source, and skipped (left the identity) for Khatib with the F/T sensor."""
    for ctrl, source, filled in (("khatib", "sensor", False), ("hqp", "sensor", True), ("khatib", "observer", True)):
        d = _short()
        d["controller"] = {"type": ctrl}
        d["wrench"] = {"force_source": source}
        setup = build(scenario_from_dict(d))
        snap = setup.dynamics.update(setup.q0, np.zeros(7))
        assert setup.dynamics.sensor_pose is filled
        oMf = setup.dynamics.data.oMf[setup.dynamics.sensor_frame]
        if filled:
            np.testing.assert_array_equal(snap.T_world_sensor[:3, 3], oMf.translation)  # exact: a copy of oMf
        else:
            np.testing.assert_array_equal(snap.T_world_sensor, np.eye(4))  # exact: never written


def test_world_drift_skipped_only_for_the_body_frame_se3_law() -> None:
    """dJdq_ee_lwa is filled for Khatib and the HQP, skipped (left zero) for the SE(3) law, which
    declares needs_world_drift = False; the body-frame drift is filled for it instead."""
    for ctrl, filled in (("khatib", True), ("hqp", True), ("se3_lie", False)):
        d = _short()
        d["controller"] = {"type": ctrl}
        setup = build(scenario_from_dict(d))
        snap = setup.dynamics.update(setup.q0, np.full(7, 0.3))
        assert setup.dynamics.world_drift is filled
        assert bool(np.any(snap.dJdq_ee_lwa != 0.0)) is filled
        if ctrl == "se3_lie":
            assert np.any(snap.dJdq_ee_body != 0.0)


def test_build_changes_neither_the_scenario_nor_the_assembly_it_is_given() -> None:
    """issue 31: ``build(sc, asm)`` composed the drawn target-pose estimate into ``asm.target`` itself, so a
    second build from the same assembly (a cached one, as campaigns reuse) believed the target twice as far
    off. The estimate now goes into a copy: two builds believe the same pose, and the assembly's target keeps
    its configured belief. Exact equality: the same operations on the same inputs."""
    from dockbench.sim.assembly import assemble
    from dockbench.sim.scenario import load_scenario

    sc = load_scenario(SCENARIOS / "iiwa14_docking.yaml",
                       {"uncertainty": {"belief_position_std": [0.002, 0.002, 0.0], "belief_rpy_std_deg": [0, 0, 1.0]}})
    asm = assemble(sc)
    configured = asm.target.T_world_believed.copy()
    first = build(sc, asm).asm.target.T_world_believed.copy()
    second = build(sc, asm).asm.target.T_world_believed
    np.testing.assert_array_equal(asm.target.T_world_believed, configured)
    np.testing.assert_array_equal(first, second)
    assert np.linalg.norm(first[:3, 3] - configured[:3, 3]) > 1e-5  # the draw did move the belief
