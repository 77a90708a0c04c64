"""experiments/step_convergence.py: the divisor list it accepts and the chatter table it prints."""

from __future__ import annotations

import argparse

import pytest
from dockbench.experiments.step_convergence import CHATTER, chatter_table, main, parse_divisors

from tests.helpers import REPO


def test_parse_divisors_accepts_a_refinement_from_the_scenarios_step() -> None:
    assert parse_divisors("1,2,4") == (1, 2, 4)
    assert parse_divisors("1,4,8,16") == (1, 4, 8, 16)


@pytest.mark.parametrize("text", ["2,4", "1,2,2", "1,0", "1,x", "", "1,128"])
def test_parse_divisors_refuses_what_would_mislabel_the_deviations(text: str) -> None:
    """Every deviation is from the first divisor's run, so it must be 1 (the scenario's own step)."""
    with pytest.raises(argparse.ArgumentTypeError, match="--divisors"):
        parse_divisors(text)


def test_chatter_table_shows_each_count_and_verdict_per_step() -> None:
    results = {
        "a": {1: {"chatter": [1, 4, 62], "verdict": "PASS"}, 8: {"chatter": [40, 138, 151], "verdict": "FAIL"}},
        "b": {1: {"chatter": [0, None, 3], "verdict": "PASS"}, 8: {"chatter": [0, 0, 3], "verdict": "PASS"}},
    }
    rows = chatter_table(results, (1, 8))
    assert len(CHATTER) == 3
    assert rows[0].count("spikes / toggles / releases") == 2
    assert rows[2] == "| a | 1 / 4 / 62 (PASS) | 40 / 138 / 151 (FAIL) |"
    assert rows[3] == "| b | 0 / – / 3 (PASS) | 0 / 0 / 3 (PASS) |"


def test_chatter_table_shows_the_counts_at_rest() -> None:
    """The densest 0.1 s of spikes and the final window's spikes and toggles (what the FR3 dockings gate) in
    brackets after the run's counts."""
    results = {"a": {1: {"chatter": [1, 4, 62], "steady": [0, 0], "verdict": "PASS"},
                     4: {"chatter": [881, 60, 151], "share": 100.0, "steady": [430, None], "verdict": "FAIL"}}}
    rows = chatter_table(results, (1, 4))
    assert rows[2] == ("| a | 1 / 4 / 62 [at rest 0 / 0] (PASS) "
                       "| 881 / 60 / 151 [densest 0.1 s 100 %, at rest 430 / –] (FAIL) |")


@pytest.mark.slow
def test_main_prints_both_tables_for_a_real_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    """One docking at dt and dt/2 (the iiwa14's: about 2 s of simulation each)."""
    assert main([str(REPO / "scenarios/iiwa14_docking.yaml"), "--divisors", "1,2", "--chatter"]) == 0
    out = capsys.readouterr().out
    assert "| iiwa14_docking | PASS" in out
    assert "dt/2: spikes / toggles / releases" in out


def test_start_shifts_are_the_scenario_then_seeded_draws() -> None:
    """--ensemble's starts: the scenario's own first, then N(0, σ²) draws that repeat on every call (the
    same starts at every step size) and change with the seed."""
    import numpy as np
    from dockbench.experiments.step_convergence import start_shifts

    a = start_shifts(200, 1e-6)
    assert len(a) == 200 and a[0] == (0.0, 0.0, 0.0)
    assert a == start_shifts(200, 1e-6) and a != start_shifts(200, 1e-6, seed=1)
    draws = np.array(a[1:])
    # 597 draws of N(0, σ²): the sample deviation is within 15 % of σ (its standard error is σ/√1194 ≈ 3 %)
    assert abs(draws.std() / 1e-6 - 1.0) < 0.15
    assert start_shifts(1, 1e-6) == [(0.0, 0.0, 0.0)]


def _case(peaks: dict[int, float], failed: tuple[int, ...] = ()) -> dict:
    return {k: {"peak": p, "verdict": "FAIL" if k in failed else "PASS",
                "failed": ["docking.tilt_deg"] if k in failed else []} for k, p in peaks.items()}


def test_ensemble_row_accepts_equal_passes_and_medians_within_ten_percent() -> None:
    """Medians, ranges and the acceptance: a spread case by case that the medians do not show passes; a
    median that moves by more than 10 %, or a different number of passes, fails."""
    from dockbench.experiments.step_convergence import ensemble_row

    cases = [_case({1: 6.0, 4: 7.0}), _case({1: 7.0, 4: 6.0}), _case({1: 6.5, 4: 6.6})]
    row = ensemble_row(cases, (1, 4))
    assert row["steps"][1] == {"passed": 3, "runs": 3, "median": 6.5, "min": 6.0, "max": 7.0, "failed": []}
    assert row["steps"][4]["median"] == 6.6
    assert abs(row["median_deviation"] - 0.1 / 6.5) < 1e-12 and abs(row["spread"] - 1.0 / 6.5) < 1e-12
    assert row["ok"] and row["same_passed"]
    moved = ensemble_row(cases + [_case({1: 6.5, 4: 9.0})] * 3, (1, 4))
    assert moved["median_deviation"] > 0.10 and not moved["ok"]
    lost = ensemble_row(cases[:2] + [_case({1: 6.5, 4: 6.6}, failed=(4,))], (1, 4))
    assert lost["steps"][4]["passed"] == 2 and not lost["same_passed"] and not lost["ok"]
    assert lost["steps"][4]["failed"] == ["docking.tilt_deg"] and lost["steps"][1]["failed"] == []


@pytest.mark.slow
def test_ensemble_shifts_the_start_and_prints_one_row(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    """Two starts (the scenario's and one 0.1 mm away) at dt and dt/2: the shifted start is another run."""
    import json

    out = tmp_path / "ens.json"
    code = main([str(REPO / "scenarios/iiwa14_docking.yaml"), "--divisors", "1,2", "--ensemble", "2",
                 "--perturb", "1e-4", "--json", str(out)])
    assert code in (0, 1)
    assert "| iiwa14_docking | 2/2," in capsys.readouterr().out
    cases = json.loads(out.read_text())["iiwa14_docking"]["cases"]
    assert cases[0]["1"]["peak"] != cases[1]["1"]["peak"]


def test_ensemble_options_are_checked() -> None:
    for bad in (["--ensemble", "0"], ["--perturb", "0"], ["--perturb", "0.01"]):
        with pytest.raises(SystemExit):
            main([str(REPO / "scenarios/iiwa14_docking.yaml"), *bad])
