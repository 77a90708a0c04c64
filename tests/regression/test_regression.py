"""Regression gates: every scenario in scenarios/ with ``gates:`` must PASS, and its key metrics must
stay within tolerance of tests/regression/baseline.json (a silent drift fails even while the gate
still passes).

Run only this suite with ``pytest -m regression``; refresh the baseline on purpose with
``python -m tests.regression.refresh_baseline``. New gated scenarios are discovered by glob at
collection time; one without a baseline entry fails with the command that adds it.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest

from tests.regression import (
    DEFAULT_TOLERANCES,
    compare_to_baseline,
    gated_scenarios,
    load_baseline,
    scenario_name,
    tolerance,
)

SCENARIO_FILES = gated_scenarios()
IDS = [p.stem for p in SCENARIO_FILES]

pytestmark = pytest.mark.regression


@functools.cache
def _run(path: Path) -> Any:
    """One simulation per scenario file, shared by the gate and the baseline test."""
    from dockbench.sim.loop import run
    from dockbench.sim.scenario import load_scenario

    return run(load_scenario(path), out_root=None)


def test_there_are_gated_scenarios() -> None:
    assert SCENARIO_FILES, "no scenario in scenarios/ has a gates: block"


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=IDS)
def test_gates_pass(path: Path) -> None:
    result = _run(path)
    bad = [g for g in result.gates if g["verdict"] != "PASS"]
    detail = "; ".join(f"{g['metric']} {g['verdict']}: {g['reason'] or g['value']}" for g in bad)
    assert result.verdict == "PASS", f"{path.name}: verdict {result.verdict} ({result.status}) — {detail}"


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=IDS)
def test_metrics_match_baseline(path: Path) -> None:
    result = _run(path)
    failures = compare_to_baseline(scenario_name(path), result.metrics, load_baseline())
    assert not failures, f"{path.name}: drift from baseline.json:\n  " + "\n  ".join(failures)


# ------------------------------------------------------------------ the comparison itself can fail
def _synthetic_baseline() -> dict[str, Any]:
    return {
        "tolerances": copy.deepcopy(DEFAULT_TOLERANCES),
        "scenarios": {"demo": {"metrics": {"contact.peak_force_truth": 20.0, "docking.depth": 0.08,
                                           "tracking.pos_rms": 1e-3}}},
    }


def test_perturbed_metric_fails_the_comparison() -> None:
    base = _synthetic_baseline()
    metrics = dict(base["scenarios"]["demo"]["metrics"])
    assert compare_to_baseline("demo", metrics, base) == []
    rel, abs_ = tolerance(base["tolerances"], "contact.peak_force_truth")
    assert (rel, abs_) == (0.10, 0.2)
    # inside the band: 20 N ± (0.2 + 10 %) = ± 2.2 N
    assert compare_to_baseline("demo", {**metrics, "contact.peak_force_truth": 22.19}, base) == []
    failures = compare_to_baseline("demo", {**metrics, "contact.peak_force_truth": 22.21}, base)
    assert len(failures) == 1 and failures[0].startswith("contact.peak_force_truth: 22.21 vs baseline 20")
    assert "allowed ±2.2" in failures[0]
    # a missing metric and a NaN fail too
    assert "not computed" in compare_to_baseline("demo", {"docking.depth": 0.08, "tracking.pos_rms": 1e-3},
                                                 base)[0]
    assert compare_to_baseline("demo", {**metrics, "docking.depth": float("nan")}, base)


def test_a_scenarios_own_tolerance_widens_only_that_scenario() -> None:
    """An entry's ``tolerances`` replace the file's for that scenario's metric; another scenario keeps the file's."""
    base = _synthetic_baseline()
    base["scenarios"]["other"] = copy.deepcopy(base["scenarios"]["demo"])
    base["scenarios"]["demo"]["tolerances"] = {
        "contact.peak_force_truth": {"rel": 0.5, "abs": 0.2, "reason": "measured spread 32 %"}}
    metrics = dict(base["scenarios"]["demo"]["metrics"])
    # 20 N ± (0.2 + 50 %) = ± 10.2 N for demo, ± 2.2 N for other
    assert compare_to_baseline("demo", {**metrics, "contact.peak_force_truth": 30.1}, base) == []
    assert compare_to_baseline("demo", {**metrics, "contact.peak_force_truth": 30.3}, base)
    assert compare_to_baseline("other", {**metrics, "contact.peak_force_truth": 30.1}, base)
    assert compare_to_baseline("demo", {**metrics, "docking.depth": 0.09}, base)  # other metrics: the file's


def test_scenario_tolerances_carry_a_reason() -> None:
    """Every scenario-level tolerance in the real baseline says what spread its width was measured from."""
    for name, entry in load_baseline().get("scenarios", {}).items():
        for metric, tol in (entry.get("tolerances") or {}).items():
            assert metric in entry["metrics"], (name, metric)
            assert len(str(tol.get("reason", ""))) > 40, f"{name}: {metric}'s own tolerance has no reason"


def test_missing_baseline_entry_says_how_to_add_one() -> None:
    failures = compare_to_baseline("brand_new", {"docking.depth": 0.08}, _synthetic_baseline())
    assert len(failures) == 1
    assert "python -m tests.regression.refresh_baseline --scenario brand_new" in failures[0]


@pytest.mark.skipif(not SCENARIO_FILES, reason="no gated scenario")
def test_perturbing_a_real_run_fails_against_the_real_baseline() -> None:
    """The real baseline file and a real run: unperturbed passes, one metric +25 % fails."""
    path = SCENARIO_FILES[0]
    name = scenario_name(path)
    baseline = load_baseline()
    if name not in baseline.get("scenarios", {}):
        pytest.fail(f"{name} has no baseline entry (see test_metrics_match_baseline)")
    metrics = dict(_run(path).metrics)
    assert compare_to_baseline(name, metrics, baseline) == []
    recorded = baseline["scenarios"][name]["metrics"]
    metric = next(m for m in ("contact.peak_force_truth", "tracking.pos_rms", "safety.min_manipulability")
                  if m in recorded and recorded[m])
    rel, abs_ = tolerance(baseline["tolerances"], metric)
    metrics[metric] = recorded[metric] + 1.5 * (abs_ + rel * abs(recorded[metric]))
    failures = compare_to_baseline(name, metrics, baseline)
    assert len(failures) == 1 and failures[0].startswith(metric), failures


def test_refresh_lists_only_changes_that_show(tmp_path: Path, monkeypatch, capsys) -> None:
    """``refresh_baseline`` lists a metric only when its change shows in the 6 significant digits it prints;
    round-off changes are counted on the scenario's line (it used to print one "x → x" line per metric)."""
    from tests.regression import refresh_baseline as rb

    path = tmp_path / "baseline.json"
    name = next(iter(sorted(rb.gated_scenarios())))
    key = rb.scenario_name(name)
    path.write_text(json.dumps({"scenarios": {key: {"metrics": {"a": 1.0, "b": 2.0, "c": 3.0}}}, "tolerances": {}}))
    new = {"a": 1.0 + 1e-12, "b": 2.5, "c": 3.0}
    monkeypatch.setattr(rb, "run_gated", lambda f: ("PASS", new, ["a", "b", "c"]))
    monkeypatch.setattr(rb, "baseline_metrics", lambda metrics, gated: dict(metrics))
    assert rb.main(["--scenario", key, "--baseline", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"record {key} (PASS): 1 metric(s) changed; 1 below the 6th significant digit" in out
    assert "    b " in out and "    a " not in out and "    c " not in out


def test_refresh_keeps_a_scenarios_own_tolerances(tmp_path: Path, monkeypatch, capsys) -> None:
    """Re-recording a scenario keeps the tolerances set by hand on its entry (with their reason)."""
    from tests.regression import refresh_baseline as rb

    path = tmp_path / "baseline.json"
    key = rb.scenario_name(next(iter(sorted(rb.gated_scenarios()))))
    own = {"a": {"rel": 0.5, "abs": 0.0, "reason": "measured spread"}}
    path.write_text(json.dumps({"scenarios": {key: {"metrics": {"a": 1.0}, "tolerances": own}}, "tolerances": {}}))
    monkeypatch.setattr(rb, "run_gated", lambda f: ("PASS", {"a": 1.3}, ["a"]))
    monkeypatch.setattr(rb, "baseline_metrics", lambda metrics, gated: dict(metrics))
    assert rb.main(["--scenario", key, "--baseline", str(path)]) == 0
    entry = json.loads(path.read_text())["scenarios"][key]
    assert entry["metrics"] == {"a": 1.3} and entry["tolerances"] == own
