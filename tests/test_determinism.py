"""Determinism: the same scenario run twice gives bit-identical telemetry (docs/testing.md §4); a difference
is reported by the first differing channel (``telemetry.run.first_difference``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sim.loop import run
from sim.scenario import load_scenario
from telemetry.run import Run, first_difference
from tests.helpers import SCENARIOS

# A docking run: free flight, funnel contact and seating all in one run.
SCENARIO = SCENARIOS / "iiwa14_docking.yaml"


def test_same_scenario_twice_is_bit_identical(tmp_path: Path) -> None:
    sc = load_scenario(SCENARIO)
    a = run(sc, out_root=tmp_path / "a")
    b = run(sc, out_root=tmp_path / "b")
    assert a.metrics["contact.peak_force_truth"] > 1.0, "the run must include contact"
    diff = first_difference(a.telemetry, b.telemetry)
    assert diff is None, f"{SCENARIO.name} is not deterministic: {diff}"
    # and the saved folders round-trip bit for bit
    diff = first_difference(Run.load(a.run_dir), Run.load(b.run_dir))
    assert diff is None, diff
    assert first_difference(Run.load(a.run_dir), a.telemetry) is None


def _channels() -> dict[str, np.ndarray]:
    t = np.arange(5) * 1e-3
    return {"t": t, "q": np.zeros((5, 3)), "v": np.ones((5, 3)), "saturated": np.zeros(5, dtype=bool),
            "ctrl_x": np.full(5, np.nan)}


def test_first_difference_identical_including_nan() -> None:
    assert first_difference(_channels(), _channels()) is None


def test_first_difference_names_the_earliest_diverging_channel() -> None:
    a, b = _channels(), _channels()
    b["q"][3, 1] += 1e-15  # q diverges at step 3 …
    b["v"][2, 0] = 2.0  # … but v already at step 2: v is where the runs part
    msg = first_difference(a, b)
    assert msg is not None
    assert msg.startswith("channel 'v' first differs at step 2 (t = 0.002 s), index (2, 0)")
    assert "also differ: q" in msg
    b["v"][2, 0] = 1.0
    assert first_difference(a, b).startswith("channel 'q' first differs at step 3")


def test_first_difference_ties_follow_channel_order() -> None:
    a, b = _channels(), _channels()
    b["v"][1, 0] = 0.0
    b["q"][1, 2] = 1.0
    assert first_difference(a, b).startswith("channel 'q'")  # q precedes v in CHANNELS


def test_first_difference_bitwise() -> None:
    a, b = _channels(), _channels()
    b["q"][0, 0] = -0.0  # equal as numbers, different bits
    assert first_difference(a, b).startswith("channel 'q' first differs at step 0")
    b = _channels()
    b["saturated"][4] = True
    assert first_difference(a, b).startswith("channel 'saturated' first differs at step 4")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda b: b.pop("v"), "channel 'v' is not in both runs (only in a: ['v']; only in b: none)"),
        (lambda b: b.__setitem__("q", np.zeros((4, 3))), "channel 'q' differs in shape: (5, 3) vs (4, 3)"),
        (lambda b: b.__setitem__("q", np.zeros((5, 3), dtype="f4")), "channel 'q' differs in dtype"),
    ],
)
def test_first_difference_structure(change, expected: str) -> None:
    a, b = _channels(), _channels()
    change(b)
    assert first_difference(a, b).startswith(expected)
