"""The import layers of dockbench (tests/layering.py, docs/architecture.md "Layers") hold for every package,
and the check fails an injected cycle: an upward import, a sideways one, and one beside an exception."""

from __future__ import annotations

from tests.layering import (
    EXCEPTIONS,
    LAYERS,
    imports,
    layer,
    project_modules,
    sim_modules,
    unit,
    unused_exceptions,
    violations,
)


def test_every_package_imports_only_downwards() -> None:
    modules = project_modules()
    assert len(sim_modules()) > 30 and len(modules) > 100  # the scan found the packages
    bad = violations(modules)
    assert bad == [], "\n".join(bad)


def test_every_exception_is_still_needed() -> None:
    """An exception whose import is gone is dropped from the list (it would hide a new cycle there)."""
    assert unused_exceptions(project_modules()) == []


def test_every_module_belongs_to_one_unit_of_the_contract() -> None:
    units = [u for layer_ in LAYERS for u in layer_]
    assert len(units) == len(set(units))
    seen = {unit(m) for m in project_modules()}
    assert None not in seen and seen == set(units)


def test_an_injected_cycle_fails_the_check() -> None:
    """core → runner (a Lie-group helper importing the loop), plant → telemetry, the cycle issue 31 named
    (a telemetry record importing the campaign tool, which records into it), a sideways import (a control
    law importing the hand) and a cli import beside its one exception: each is caught and named."""
    modules = project_modules()
    modules["dockbench.sim.lie"] += "\n\ndef _late():\n    from dockbench.sim.loop import run  # a cycle\n"
    modules["dockbench.sim.wrench"] += "\nimport dockbench.telemetry.metrics\n"
    modules["dockbench.telemetry.log"] += "\n\ndef _axes():\n    from dockbench.sim.campaign.spec import Axis\n"
    modules["dockbench.controllers.khatib"] += "\nfrom dockbench.hand.spec import load_spec\n"
    modules["dockbench.cli"] += "\n\ndef _bench():\n    from dockbench.experiments import bench\n"
    bad = violations(modules)

    def caught(module: str, target: str, how: str) -> bool:
        return any(b.startswith(module + ":") and f" imports {target}" in b and how in b for b in bad)

    assert caught("dockbench.sim.lie", "dockbench.sim.loop", "(sim.core → sim.runner, up)")
    assert caught("dockbench.sim.wrench", "dockbench.telemetry.metrics", "(sim.plant → telemetry.record, up)")
    assert caught("dockbench.telemetry.log", "dockbench.sim.campaign.spec", "(telemetry.record → sim.runner, up)")
    assert caught("dockbench.controllers.khatib", "dockbench.hand.spec", "(controllers → hand, sideways)")
    assert caught("dockbench.cli", "dockbench.experiments", "(cli → experiments, up)")
    assert not any("run_docking" in b for b in bad)  # the exception still covers its own import only
    assert len({b.split(":")[0] for b in bad}) == 5


def test_the_exception_list_is_what_lets_its_import_through() -> None:
    modules = project_modules()
    module, target = next(iter(EXCEPTIONS))
    assert unit(module) == "cli" and unit(target) == "experiments"
    assert any(t.startswith(target) for _, t in imports(modules[module], module))
    saved = dict(EXCEPTIONS)
    try:
        EXCEPTIONS.clear()
        assert any(b.startswith(module + ":") and target in b for b in violations(modules))
    finally:
        EXCEPTIONS.update(saved)


def test_type_checking_imports_and_relative_imports_are_read_as_python_does() -> None:
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dockbench.sim.scenario import Scenario\n"
           "from . import errors\nfrom .loop import run\n")
    got = [t for _, t in imports(src, "dockbench.sim.assembly")]
    assert "dockbench.sim.scenario" not in got  # never runs
    assert "dockbench.sim.errors" in got and "dockbench.sim.loop" in got
    assert unit("dockbench.sim.lie") == "sim.core" and unit("dockbench.sim.wrench") == "sim.plant"
    assert unit("dockbench.sim.loop") == unit("dockbench.sim.campaign.runner") == "sim.runner"
    assert unit("dockbench.telemetry.log") == "telemetry.record"
    assert unit("dockbench.telemetry.plots") == "telemetry.view"
    assert unit("dockbench.controllers.khatib") == "controllers" and unit("numpy") is None
    order = ("sim.lie", "sim.wrench", "controllers.hqp", "bridges.ros2", "telemetry.run", "sim.loop",
             "telemetry.export", "cli", "", "experiments.bench")
    levels = [layer(f"dockbench.{m}".rstrip(".")) for m in order]
    assert levels == sorted(levels) and len(set(levels)) == len(levels), levels
