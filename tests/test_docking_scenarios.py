"""The spine's docking scenarios pass their gates, and contact converges in the step size."""

from __future__ import annotations

import pytest

from sim.loop import run
from sim.scenario import load_scenario, scenario_from_dict
from tests.helpers import SCENARIOS, scenario_dict


@pytest.mark.parametrize("name", ["iiwa14_docking", "fr3_docking"])
def test_docking_scenario_passes(name: str) -> None:
    r = run(load_scenario(SCENARIOS / f"{name}.yaml"), out_root=None)
    assert r.verdict == "PASS", r.gates
    assert r.metrics["contact.peak_force_truth"] > 0.1, "the scenario must actually make contact"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["iiwa14_docking", "fr3_docking"])
def test_step_size_convergence(name: str) -> None:
    """dt and dt/2 at the same 1 ms control period: same verdict, peak truth force within 10%,
    final depth within 0.2 mm."""
    results = {}
    for dt in (0.001, 0.0005):
        d = scenario_dict(name)
        d["sim"]["timestep"] = dt
        results[dt] = run(scenario_from_dict(d), out_root=None)
    a, b = results[0.001], results[0.0005]
    assert a.verdict == b.verdict == "PASS"
    fa, fb = a.metrics["contact.peak_force_truth"], b.metrics["contact.peak_force_truth"]
    assert abs(fa - fb) <= 0.10 * max(fa, fb), (fa, fb)
    assert abs(a.metrics["docking.depth"] - b.metrics["docking.depth"]) <= 2e-4
