"""Every in-orbit scenario (scenarios/orbit/) passes its gates at its time step dt and at dt/2, and its
contact peak converges (docs/testing.md §3: the peak force changes by less than 10 % between dt and dt/2)."""

from __future__ import annotations

import copy
import functools

import pytest
import yaml
from dockbench.sim.loop import run
from dockbench.sim.scenario import scenario_from_dict

from tests.orbit_helpers import ORBIT

FILES = sorted(ORBIT.glob("*.yaml"))


@functools.cache
def _run(name: str, divisor: int):
    d = yaml.safe_load((ORBIT / f"{name}.yaml").read_text())
    d = copy.deepcopy(d)
    d["sim"]["timestep"] = d["sim"].get("timestep", 0.001) / divisor
    return run(scenario_from_dict(d, file=f"scenarios/orbit/{name}.yaml"), out_root=None)


def test_there_are_orbit_scenarios() -> None:
    names = {p.stem for p in FILES}
    assert {"iiwa14_orbit_fixed_target", "iiwa14_orbit_floating_target", "iiwa14_orbit_tumbling_target",
            "fr3_orbit_floating_target"} <= names


@pytest.mark.parametrize("divisor", [1, 2], ids=["dt", "dt_half"])
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_orbit_scenario_passes(path, divisor: int) -> None:
    r = _run(path.stem, divisor)
    bad = [f"{g['metric']} {g['verdict']}: {g['reason'] or g['value']}" for g in r.gates if g["verdict"] != "PASS"]
    assert r.verdict == "PASS", f"{path.name} at dt/{divisor}: {r.status} — {'; '.join(bad)}"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_orbit_contact_peak_converges(path) -> None:
    a, b = _run(path.stem, 1).metrics, _run(path.stem, 2).metrics
    fa, fb = a["contact.peak_force_truth"], b["contact.peak_force_truth"]
    assert abs(fa - fb) <= 0.10 * max(fa, fb), (fa, fb)
