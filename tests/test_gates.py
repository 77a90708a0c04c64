"""Gate verdicts PASS / FAIL / INCOMPLETE, windows, and unknown metric names rejected at load."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from dockbench.sim.errors import ScenarioError
from dockbench.sim.scenario import scenario_from_dict
from dockbench.telemetry.gates import Gate, evaluate_gates, run_is_complete, score_run
from dockbench.telemetry.metrics import METRICS, compute_metrics

from tests.helpers import scenario_dict, scenario_files
from tests.test_metrics import F_STEADY, N, synthetic, write_synthetic_run

METRICS_OK = {"docking.depth": 0.08, "contact.peak_force_truth": 12.0, "safety.saturation_ratio": 0.0}


def test_pass_when_all_bounds_hold_inclusive() -> None:
    gates = [{"metric": "docking.depth", "min": 0.08},  # equal to the bound → PASS
             {"metric": "contact.peak_force_truth", "max": 12.0},
             {"metric": "safety.saturation_ratio", "min": 0.0, "max": 1.0}]
    verdict, results = evaluate_gates(gates, METRICS_OK, complete=True)
    assert verdict == "PASS"
    assert [r.verdict for r in results] == ["PASS"] * 3
    assert results[0].value == 0.08 and results[0].reason == ""


def test_fail_names_the_bound() -> None:
    gates = [{"metric": "docking.depth", "min": 0.09}, {"metric": "contact.peak_force_truth", "max": 10.0},
             {"metric": "safety.saturation_ratio", "max": 1.0}]
    verdict, results = evaluate_gates(gates, METRICS_OK, complete=True)
    assert verdict == "FAIL"
    assert [r.verdict for r in results] == ["FAIL", "FAIL", "PASS"]
    assert results[0].reason == "0.08 < min 0.09"
    assert results[1].reason == "12 > max 10.0"


def test_missing_or_nan_metric_fails() -> None:
    gates = [{"metric": "docking.tilt_deg", "max": 1.0}, {"metric": "docking.depth", "min": 0.0}]
    verdict, results = evaluate_gates(gates, {"docking.depth": math.nan}, complete=True)
    assert verdict == "FAIL"
    assert results[0].reason == "metric not available for this run" and results[0].value is None
    assert results[1].reason == "metric is NaN"


def test_incomplete_run_is_incomplete_whatever_the_values() -> None:
    gates = [{"metric": "docking.depth", "min": 0.09}, {"metric": "safety.saturation_ratio", "max": 1.0}]
    verdict, results = evaluate_gates(gates, METRICS_OK, complete=False)
    assert verdict == "INCOMPLETE"
    assert [r.verdict for r in results] == ["INCOMPLETE", "INCOMPLETE"]
    assert "would FAIL (0.08 < min 0.09)" in results[0].reason
    assert results[1].reason.endswith("would PASS")
    assert evaluate_gates([], {}, complete=False)[0] == "INCOMPLETE"


def test_no_gates_pass() -> None:
    assert evaluate_gates([], {}, complete=True) == ("PASS", [])


def test_gate_objects_and_specs_are_accepted() -> None:
    sc = scenario_from_dict(scenario_dict("iiwa14_docking"))
    verdict, results = evaluate_gates(sc.gates, {g.metric: 1e9 for g in sc.gates}, complete=True,
                                      meta={"target_depth_total": 0.08278})
    assert len(results) == len(sc.gates)
    assert Gate.from_spec(sc.gates[0]).metric == sc.gates[0].metric


def test_window_gate_recomputes_over_its_own_window() -> None:
    ch, meta = synthetic()
    axis = np.asarray(meta["T_world_target"])[:3, 2]
    ch["wrench_truth_world"][N - 200:, :3] += 10.0 * axis  # a 10 N step in the last 0.2 s
    metrics = compute_metrics(ch, meta)  # default 1 s window → mean 5 + 10 · 0.2 = 7 N
    np.testing.assert_allclose(metrics["contact.steady_axial_force_truth"], F_STEADY + 2.0, rtol=1e-12)
    gate = Gate("contact.steady_axial_force_truth", max=14.0, window=0.1)
    verdict, results = evaluate_gates([gate], metrics, complete=True, channels=ch, meta=meta)
    assert verdict == "FAIL"
    np.testing.assert_allclose(results[0].value, F_STEADY + 10.0, rtol=1e-12)
    assert results[0].to_dict()["window"] == 0.1
    with pytest.raises(ScenarioError, match="needs channels= and meta="):
        evaluate_gates([gate], metrics, complete=True)


def test_gate_validate() -> None:
    with pytest.raises(ScenarioError, match="known: .*docking.depth"):
        Gate("docking.dept", max=1.0).validate()
    with pytest.raises(ScenarioError, match="needs max and/or min"):
        Gate("docking.lateral").validate()
    Gate("docking.depth").validate()  # the seat gate
    Gate("docking.depth", tolerance=0.002).validate()
    with pytest.raises(ScenarioError, match="tolerance applies only to the seat gate"):
        Gate("docking.depth", min=0.07, tolerance=0.002).validate()
    with pytest.raises(ScenarioError, match="must be > 0 m"):
        Gate("docking.depth", tolerance=0.0).validate()
    with pytest.raises(ScenarioError, match="must be > 0"):
        Gate("docking.depth", max=1.0, window=0.0).validate()
    Gate("docking.depth", max=1.0, window=0.5).validate()


def test_unknown_metric_rejected_at_scenario_load_with_the_known_list() -> None:
    d = scenario_dict("iiwa14_docking")
    d["gates"] = [{"metric": "docking.depth", "min": 0.07}, {"metric": "contact.peak_forse", "max": 40.0}]
    with pytest.raises(ScenarioError) as exc:
        scenario_from_dict(d, file="scenarios/x.yaml")
    msg = str(exc.value)
    assert msg.startswith("scenarios/x.yaml: gates[1].metric: ")  # file and key path
    assert "unknown metric 'contact.peak_forse'; known: " in msg
    for name in METRICS:  # every known name is listed
        assert name in msg


def test_run_is_complete() -> None:
    assert run_is_complete("completed", 5.0, 5.0)
    assert run_is_complete("completed", 5.0 - 1e-12, 5.0)
    assert not run_is_complete("completed", 4.999, 5.0)
    assert not run_is_complete("diverged", 6.0, 5.0)
    assert not run_is_complete("interrupted", 6.0, 5.0)


def test_real_run_shorter_than_its_planner_is_incomplete(tmp_path: Path) -> None:
    from dockbench.sim.loop import run

    d = scenario_dict("iiwa14_docking")
    d["sim"]["duration"] = 1.0
    r = run(scenario_from_dict(d), out_root=tmp_path)
    assert r.verdict == "INCOMPLETE"
    assert all(g["verdict"] == "INCOMPLETE" for g in r.gates) and r.gates
    # re-scoring the folder from its telemetry alone gives the same verdicts
    verdict, results = score_run(r.run_dir)
    assert verdict == "INCOMPLETE"
    assert [x.to_dict() for x in results] == r.gates


def test_score_run_on_a_folder(tmp_path: Path) -> None:
    folder = write_synthetic_run(tmp_path / "run")
    verdict, _ = score_run(folder, gates=[{"metric": "docking.depth", "min": 0.079, "max": 0.081}])
    assert verdict == "PASS"
    verdict, results = score_run(folder, gates=[{"metric": "docking.tilt_deg", "max": 0.1}])
    assert verdict == "FAIL" and results[0].reason.endswith("> max 0.1")


# ------------------------------------------------------------------------------ the seat gate
SEAT = 0.0827817  # mouth → seat [m] of the shipped drogue geometry


def test_seat_gate_takes_its_bounds_from_the_target_geometry() -> None:
    """docking.depth without bounds: seated within 1 mm (default) or ``tolerance`` of the seat depth."""
    meta = {"target_depth_total": SEAT}
    gate = [{"metric": "docking.depth"}]
    for depth, verdict in ((SEAT, "PASS"), (SEAT - 0.00099, "PASS"), (SEAT + 0.00099, "PASS"),
                           (SEAT - 0.003, "FAIL"), (SEAT - 0.0078, "FAIL"), (SEAT + 0.0011, "FAIL")):
        v, r = evaluate_gates(gate, {"docking.depth": depth}, complete=True, meta=meta)
        assert v == verdict == r[0].verdict, (depth, r[0])
        np.testing.assert_allclose((r[0].min, r[0].max), (SEAT - 0.001, SEAT + 0.001), rtol=0, atol=1e-15)
    # the sensorless case of issue 15: 79.75 mm passed the old absolute gate (min 0.075), not the seat gate
    v, r = evaluate_gates(gate, {"docking.depth": 0.07975}, complete=True, meta=meta)
    assert v == "FAIL" and r[0].reason.startswith("not seated: tip 3.03 mm short of the seat at 0.0827817 m")
    assert evaluate_gates([{"metric": "docking.depth", "min": 0.075}], {"docking.depth": 0.07975},
                          complete=True)[0] == "PASS"
    v, r = evaluate_gates([{"metric": "docking.depth"}], {"docking.depth": SEAT + 0.002}, complete=True, meta=meta)
    assert v == "FAIL" and "2 mm past the seat" in r[0].reason
    v, r = evaluate_gates([{"metric": "docking.depth", "tolerance": 0.004}], {"docking.depth": SEAT - 0.003},
                          complete=True, meta=meta)
    assert v == "PASS" and r[0].min == pytest.approx(SEAT - 0.004)
    v, r = evaluate_gates(gate, {"docking.depth": SEAT}, complete=True, meta={})
    assert v == "FAIL" and r[0].reason == "the target has no seat depth"
    with pytest.raises(ScenarioError, match="needs meta="):
        evaluate_gates(gate, {"docking.depth": SEAT}, complete=True)


def test_shipped_docking_scenarios_gate_on_the_seat() -> None:
    """Every shipped docking scenario uses the seat gate (no absolute depth bound that passes a probe
    stopped short of the seat)."""
    from dockbench.sim.scenario import load_scenario

    docking = [f for f in scenario_files() if "docking" in f.stem]
    assert len(docking) >= 22
    for f in docking:
        depth = [g for g in load_scenario(f).gates if g.metric == "docking.depth"]
        assert len(depth) == 1 and depth[0].min is None and depth[0].max is None, f.name


# ------------------------------------------------------------------------------ instability
def test_instability_detector_sustained_saturation_and_velocity_runaway() -> None:
    from dockbench.telemetry.gates import detect_instability

    ch, meta = synthetic()
    assert detect_instability(ch, meta) is None  # every other step saturated for 2 s: not sustained
    ch["saturated"] = np.zeros(N, dtype=bool)
    ch["saturated"][3000:3224] = True  # 224 of 250 steps = 89.6 % < 90 %
    assert detect_instability(ch, meta) is None
    ch["saturated"][3224:3226] = True  # 226 / 250 = 90.4 %
    found = detect_instability(ch, meta)
    assert found.kind == "saturation" and found.value == pytest.approx(90.4)
    assert found.t == pytest.approx(3.225) and "sustained saturation" in found.message
    ch, meta = synthetic()
    ch["v"][2500, 3] = 1.49 * meta["v_max"][3]
    assert detect_instability(ch, meta) is None
    ch["v"][2600, 3] = -1.51 * meta["v_max"][3]
    found = detect_instability(ch, meta)
    assert found.kind == "velocity" and found.t == pytest.approx(2.6) and found.value == pytest.approx(151.0)
    # an unstable run fails whatever its gates say
    assert evaluate_gates([], {}, complete=True, unstable=True)[0] == "FAIL"
    assert evaluate_gates([], {}, complete=False, unstable=True)[0] == "INCOMPLETE"
