"""dockbench: compliant robotic docking experiments (MuJoCo torque loop, Pinocchio dynamics, Khatib / HQP / SE(3)
controllers, a frame-consistent F/T pipeline, telemetry and gates).

The repository's folders are its subpackages: ``dockbench.sim`` (scenario, loop, dynamics, F/T pipeline),
``dockbench.controllers``, ``dockbench.planners``, ``dockbench.telemetry``, ``dockbench.hand`` (the G20
hand), ``dockbench.bridges`` (ROS 2), ``dockbench.experiments`` (the command-line tools),
``dockbench.assets`` (models) and ``dockbench.scenarios`` (the shipped scenarios). The small public API::

    import dockbench
    scenario = dockbench.load_scenario("iiwa14_docking")      # a file, or a shipped scenario's name
    result = dockbench.run(scenario, out_root="runs")           # a run folder under runs/
    run = dockbench.Run.load(result.run_dir)                    # its telemetry, metrics and gates
    dockbench.CONTROLLERS.names()                               # the registries (docs/extending.md)
"""

from __future__ import annotations

import os as _os
from typing import Any

__version__ = "0.1.0"

# In a checkout (an editable install, or the source tree on the path) the subpackages are the repository's
# top-level folders beside this one; an installed wheel has them inside this folder (setup.py).
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_root, "pyproject.toml")) and _os.path.isdir(_os.path.join(_root, "sim")):
    __path__.append(_root)  # noqa: F821 (the package's own __path__)

__all__ = ["CONTROLLERS", "PLANNERS", "TARGETS", "TOOLS", "Run", "load_scenario", "run", "__version__"]


def load_scenario(name_or_path: Any, overrides: dict[str, Any] | None = None, *,
                  allow_plugins: bool | None = None) -> Any:
    """Read and validate a scenario: a YAML file, or the name of a shipped one (``"iiwa14_docking"``,
    ``"orbit/iiwa14_orbit_floating_target"``). A scenario that names ``plugins:`` (Python code) is refused
    unless ``allow_plugins=True`` or ``DOCKBENCH_ALLOW_PLUGINS=1``. See
    :func:`dockbench.sim.scenario.load_scenario`."""
    from dockbench.sim.scenario import load_scenario as _load
    from dockbench.sim.scenario import resolve_scenario

    return _load(resolve_scenario(name_or_path), overrides, allow_plugins=allow_plugins)


def __getattr__(name: str) -> Any:
    """The rest of the public API, imported on first use (``import dockbench`` stays cheap)."""
    if name == "run":
        from dockbench.sim.loop import run

        return run
    if name == "Run":
        from dockbench.telemetry.run import Run

        return Run
    if name in ("CONTROLLERS", "PLANNERS", "TOOLS", "TARGETS"):
        from dockbench.sim.scenario import _registries

        regs = _registries()
        return {"CONTROLLERS": regs["controller"], "PLANNERS": regs["planner"], "TOOLS": regs["tool"],
                "TARGETS": regs["target"]}[name]
    raise AttributeError(f"module 'dockbench' has no attribute {name!r}")
