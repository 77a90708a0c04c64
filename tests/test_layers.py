"""The import layers of dockbench.sim (tests/layering.py, docs/architecture.md "Layers") hold, and the
check fails an injected upward import."""

from __future__ import annotations

from tests.layering import imports, layer, sim_modules, violations


def test_sim_imports_only_downwards() -> None:
    bad = violations(sim_modules())
    assert bad == [], "\n".join(bad)


def test_an_injected_cycle_fails_the_check() -> None:
    """core → runner (a Lie-group helper importing the loop) and plant → telemetry, each named."""
    modules = sim_modules()
    modules["dockbench.sim.lie"] += "\n\ndef _late():\n    from dockbench.sim.loop import run  # a cycle\n"
    modules["dockbench.sim.wrench"] += "\nimport dockbench.telemetry.metrics\n"
    bad = violations(modules)
    assert any(b.startswith("dockbench.sim.lie:") and "dockbench.sim.loop" in b and "core → runner" in b for b in bad)
    assert any(b.startswith("dockbench.sim.wrench:") and "plant → telemetry" in b for b in bad)


def test_type_checking_imports_and_relative_imports_are_read_as_python_does() -> None:
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dockbench.sim.scenario import Scenario\n"
           "from . import errors\nfrom .loop import run\n")
    got = [t for _, t in imports(src, "dockbench.sim.assembly")]
    assert "dockbench.sim.scenario" not in got  # never runs
    assert "dockbench.sim.errors" in got and "dockbench.sim.loop" in got
    assert layer("dockbench.sim.lie") == 0 and layer("dockbench.sim.wrench") == 1 and layer("dockbench.sim.loop") == 2
    assert layer("dockbench.sim.campaign.runner") == 2 and layer("dockbench.controllers.khatib") is None
