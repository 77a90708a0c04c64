"""``sim.end_after_seated``: a run ends once the tool tip has stayed seated that long (sim/cycle.py,
``Cycle._ended_when_seated``). The early end changes nothing before it (the telemetry is the full run's
prefix, bit for bit), stops exactly ``⌈h / T_c⌉`` steps after the first step of an unbroken seated run, counts
as a complete run, and is refused where its seat test has nothing to read."""

from __future__ import annotations

import types

import numpy as np
import pytest
from dockbench.sim.cycle import Cycle, Status
from dockbench.sim.errors import ScenarioError
from dockbench.sim.loop import run
from dockbench.sim.scenario import scenario_from_dict
from dockbench.telemetry.gates import SEAT_TOLERANCE, run_is_complete

from tests.helpers import scenario_dict


def _docking(name: str, **sim) -> dict:
    d = scenario_dict(name)
    d["sim"].update(sim)
    return d


@pytest.mark.parametrize("name, sim", [
    ("iiwa14_docking", {}), ("iiwa14_docking", {"integrator": "rk4"}), ("gravity/fr3_docking_se3_gravity", {}),
    ("orbit/iiwa14_orbit_fixed_target", {}), ("iiwa14_docking_hqp", {"integrator": "euler"}),
])
def test_the_early_end_is_the_full_runs_prefix_and_stops_hold_after_the_seat(name: str, sim: dict) -> None:
    """Fixed base and floating base, gravity off and on, Khatib, HQP and SE(3), the implicitfast, RK4 and Euler
    integrators: the run that ends by the seat rule
    records exactly the first rows of the run that does not (the rule only reads the state), its last sample
    lies h after ``docking.time_to_seat`` (N = h / T_c steps, here exact), its peak force is the full run's
    and its seat gate passes."""
    hold = 1.0
    full = run(scenario_from_dict(_docking(name, **sim)), out_root=None)
    early = run(scenario_from_dict(_docking(name, **sim, end_after_seated=hold)), out_root=None)
    assert full.status == "completed" and early.status == "seated", (full.status, early.message)
    n = len(early.telemetry["t"])
    assert n < len(full.telemetry["t"])
    for ch, v in early.telemetry.items():
        np.testing.assert_array_equal(v, full.telemetry[ch][:n], err_msg=ch)  # the same operations: exact
    t_seat = early.metrics["docking.time_to_seat"]
    assert t_seat == full.metrics["docking.time_to_seat"]  # the full run stays seated from the same sample on
    T_c = early.meta["scenario"]["sim"]["control_period"]
    assert round((early.telemetry["t"][-1] - t_seat) / T_c) == round(hold / T_c)
    assert early.metrics["contact.peak_force_truth"] == full.metrics["contact.peak_force_truth"]
    seat_gates = [g for g in early.gates if g["metric"] in ("docking.depth", "docking.seat_height_fraction")]
    assert seat_gates and all(g["verdict"] == "PASS" for g in seat_gates)  # the final window is seated
    # (the steady-state gates see the second after the seat, not the settled end: fr3_docking_se3_gravity's
    # contact.steady_on_off_toggles_truth fails there, 6 > 3, and passes in the full run)
    assert "sim.end_after_seated" in early.message


def test_a_hold_longer_than_the_seated_time_left_runs_the_whole_duration() -> None:
    """Seated at ≈ 6.1 s of an 8.93 s run: a 5 s hold never completes, the run is the ordinary one."""
    r = run(scenario_from_dict(_docking("iiwa14_docking", end_after_seated=5.0)), out_root=None)
    full = run(scenario_from_dict(_docking("iiwa14_docking")), out_root=None)
    assert r.status == "completed" and r.message == ""
    np.testing.assert_array_equal(r.telemetry["q"], full.telemetry["q"])


def _rule(hold: float, T_c: float = 0.001, seat: float = 0.02):
    """The seat rule of a Cycle on a stand-in: a target whose mouth is at the origin with +z up and whose seat
    is ``seat`` below it; returns (record_seated, the snapshot's pose to move, the stand-in)."""
    T_target = np.eye(4)
    setup = types.SimpleNamespace(
        asm=types.SimpleNamespace(target=types.SimpleNamespace(T_world_target=T_target, depth_total=seat)),
        scenario=types.SimpleNamespace(sim=types.SimpleNamespace(end_after_seated=hold)),
    )
    fake = types.SimpleNamespace(setup=setup, T_c=T_c, stopped=(Status.COMPLETED, ""))
    snap = types.SimpleNamespace(T_world_ee=np.eye(4))
    return Cycle._ended_when_seated(fake, lambda i, t: False, snap), snap.T_world_ee, fake


def test_the_rule_counts_an_unbroken_seated_run_and_starts_over_when_the_tip_leaves() -> None:
    """Depth d = −z: seated ⇔ |0.02 − d| ≤ 1 mm. Seated on steps 0–2, out on step 3 (1.5 mm short), seated
    again from step 4: with h = 3 steps the rule stops on step 7 (= 4 + 3), not on step 3."""
    record, T, fake = _rule(hold=0.003)
    depth = [0.02, 0.0195, 0.0205, 0.0185, 0.0209, 0.02, 0.0191, 0.02, 0.02]
    stops = []
    for i, d in enumerate(depth):
        T[2, 3] = -d
        stops.append(record(i, i * 0.001))
        if stops[-1]:
            break
    assert stops == [False] * 7 + [True]
    status, message = fake.stopped
    assert status is Status.SEATED and "t = 0.0040 s to t = 0.0070 s" in message


def test_the_rule_uses_the_gates_tolerance_on_both_sides_of_the_seat() -> None:
    """A tip 1 mm − 1 µm past the seat (pressed in) or short of it counts; 1 mm + 1 µm does not (either side;
    1 µm is ≫ the round-off of 0.02 ± 0.001)."""
    for d, seated in ((0.02 + SEAT_TOLERANCE - 1e-6, True), (0.02 - SEAT_TOLERANCE + 1e-6, True),
                      (0.02 + SEAT_TOLERANCE + 1e-6, False), (0.02 - SEAT_TOLERANCE - 1e-6, False)):
        record, T, fake = _rule(hold=0.001)
        T[2, 3] = -d
        assert record(0, 0.0) is False
        assert record(1, 0.001) is seated, d


def test_a_seated_end_is_a_complete_run() -> None:
    assert run_is_complete("seated", 3.0, 10.0)  # before the planner's end: still complete
    assert not run_is_complete("interrupted", 30.0, 10.0)


@pytest.mark.parametrize("name, words", [
    ("iiwa14_tracking", "no target"),
    ("orbit/iiwa14_orbit_floating_target", "this target moves"),
])
def test_the_key_is_refused_where_the_seat_test_has_nothing_to_read(name: str, words: str) -> None:
    d = _docking(name, end_after_seated=1.0)
    with pytest.raises(ScenarioError) as exc:
        run(scenario_from_dict(d, file=f"{name}.yaml"), out_root=None)
    assert exc.value.key == "sim.end_after_seated" and exc.value.file == f"{name}.yaml"
    assert words in str(exc.value)


def test_a_hold_shorter_than_the_metrics_window_is_refused() -> None:
    """Below 1 s (the final window of every docking metric) at load; below a gate's own window at build."""
    with pytest.raises(ScenarioError) as exc:
        scenario_from_dict(_docking("iiwa14_docking", end_after_seated=0.5), file="x.yaml")
    assert "end_after_seated" in str(exc.value) and "x.yaml" in str(exc.value)
    d = _docking("iiwa14_docking", end_after_seated=1.5)
    d["gates"].append({"metric": "docking.lateral", "max": 0.001, "window": 2.0})
    with pytest.raises(ScenarioError) as exc:
        run(scenario_from_dict(d, file="x.yaml"), out_root=None)
    assert exc.value.key == "sim.end_after_seated" and "window (2 s" in str(exc.value)
