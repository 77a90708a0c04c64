"""Gate verdicts PASS / FAIL / INCOMPLETE, windows, and unknown metric names rejected at load."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from sim.errors import ScenarioError
from sim.scenario import scenario_from_dict
from telemetry.gates import Gate, evaluate_gates, run_is_complete, score_run
from telemetry.metrics import METRICS, compute_metrics
from tests.helpers import scenario_dict
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
    verdict, results = evaluate_gates(sc.gates, {g.metric: 1e9 for g in sc.gates}, complete=True)
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
        Gate("docking.depth").validate()
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
    from sim.loop import run

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
