"""Planners in the loop (issue 3): the Khatib controller tracks a time-varying orientation from the
SE(3)-TOPP planner, and SE(3)-TOPP is faster than two-phase on the same poses and limits."""

from __future__ import annotations

import numpy as np
from dockbench.sim.loop import build, run
from dockbench.sim.scenario import load_scenario
from dockbench.telemetry.metrics import rotation_angle_between

from tests.helpers import SCENARIOS


def test_se3topp_rotates_the_tool_and_khatib_tracks_it() -> None:
    r = run(load_scenario(SCENARIOS / "iiwa14_docking_se3topp.yaml"), out_root=None)
    q_des = r.telemetry["ee_quat_des"]
    swept = np.degrees(rotation_angle_between(q_des[:1], q_des[-1:]))[0]
    assert swept > 15.0, f"the reference must rotate the tool, swept {swept:.1f} deg"
    assert np.abs(r.telemetry["ee_omega_des"]).max() > 0.01
    assert r.metrics["tracking.rot_rms_deg"] < 0.5
    assert r.verdict == "PASS", r.gates


def test_se3topp_is_faster_than_two_phase_on_the_same_task() -> None:
    tp = build(load_scenario(SCENARIOS / "iiwa14_docking_twophase.yaml"))
    se = build(
        load_scenario(SCENARIOS / "iiwa14_docking_se3topp.yaml").replace(
            target=load_scenario(SCENARIOS / "iiwa14_docking_twophase.yaml").target,
            start=load_scenario(SCENARIOS / "iiwa14_docking_twophase.yaml").start,
        )
    )
    assert se.planner.duration < 0.8 * tp.planner.duration, (se.planner.duration, tp.planner.duration)
