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
