"""The import layers of dockbench (docs/architecture.md, "Layers"), checked from the source.

The project is cut into *units* (a package, or a group of a package's modules), stacked in layers
(:data:`LAYERS`, lowest first). A module may import its own unit and the units of the layers below it;
units that share a layer are independent (neither imports the other). Every cross-unit import therefore
points down, so the units' import graph has no cycle; an import that points up or sideways is a
violation, unless it is one of the commented :data:`EXCEPTIONS`.

* **sim.core** — Lie groups, typed configs, errors, registries, poses, the kernel switch, interrupts,
  extras and the strict YAML reader: what every other module uses. It imports nothing else of dockbench.
* **sim.plant** — the models and their physics: robots, mounts, interfaces (and the keyed and peg_hole
  families), assembly, dynamics, the floating base, the F/T pipeline, uncertainty, IK. **planners** — the
  references. Both import core only.
* **controllers** — the control laws (they read the plant's snapshot and the planners' reference).
  **hand** — the G20 hand (spec, mapping, its kinematic bridge and the MuJoCo end effector).
* **bridges** — the outside world: the ROS 2 transport, message schemas, the G20 and mirror bridges.
* **telemetry.record** — what a run records and how it is judged: the channels (``log``), the run
  folder (``run``), ``metrics``, ``gates``, ``progress``.
* **sim.runner** — build, the cycle, simulate, scenario, overrides, plugins, the model cache, the orbit
  telemetry and the campaign tool (its figures included): everything else in ``sim``.
* **telemetry.view** — what reads runs: plots, video, export (MCAP / Rerun), the live step observers, the
  viewer; anything new in ``telemetry`` that is not a record.
* **cli** — the ``dockbench`` command (the parser every tool uses, the subcommand table).
* **api** — the public API (``dockbench``: ``load_scenario``, ``run``, ``Run``, the registries),
  ``dockbench.gym`` and ``dockbench.gym_campaign`` (a policy evaluated over a campaign).
* **experiments** — the tools and research scripts.

The check reads every module's syntax tree (imports inside functions count too, those under
``if TYPE_CHECKING:`` do not: they never run), so it needs no import of the package. The repository's
folders install as ``dockbench.<folder>`` (setup.py), which tools that scan one package directory
(import-linter's grimp) cannot follow; reading the files here is the same graph. The bare package
``dockbench`` as an import *target* is no edge: every ``dockbench.x`` import runs it, and its body imports
nothing of the package (the API is loaded on first attribute access).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: the repository folders that are subpackages of ``dockbench`` (scenarios and assets are data)
PACKAGES = ("sim", "controllers", "planners", "hand", "bridges", "telemetry", "experiments")

CORE = (
    "lie", "config", "errors", "registry", "poses", "kernels", "_kernel_manifest", "interrupts", "extras",
    "yamlio",
)
PLANT = (
    "robots", "mounts", "interfaces", "keyed", "peg_hole", "assembly", "dynamics", "floating", "wrench",
    "uncertainty", "ik", "culling",
)
#: telemetry modules below the runner (it records into them and scores with them); the rest are views
RECORD = ("log", "rows", "run", "metrics", "gates", "progress")

#: units by layer, lowest first; units of one layer are independent of each other
LAYERS: tuple[tuple[str, ...], ...] = (
    ("sim.core",),
    ("sim.plant", "planners"),
    ("controllers", "hand"),
    ("bridges",),
    ("telemetry.record",),
    ("sim.runner",),
    ("telemetry.view",),
    ("cli",),
    ("api",),
    ("experiments",),
)
LEVEL = {u: i for i, layer in enumerate(LAYERS) for u in layer}

#: (importing module, imported module) → why this upward import stays. Each is a known cycle that is not
#: cheap to remove; a new entry needs a reason as good.
EXCEPTIONS: dict[tuple[str, str], str] = {
    # `dockbench run` calls the run tool; every other subcommand is imported by its name from the command
    # table (dockbench/cli.py COMMANDS), the same dispatch, while the tools take their parser from the cli.
    # Removing it means moving the parser out of dockbench.cli, an edit of every experiments/ script.
    ("dockbench.cli", "dockbench.experiments.run_docking"): "the `dockbench run` subcommand",
}


def unit(module: str) -> str | None:
    """The unit of a ``dockbench`` module (or of a name inside one: ``dockbench.sim.lie.so3_log``); None
    outside dockbench and for the data packages. The packages themselves: ``dockbench.sim`` is core (its
    ``__init__`` imports nothing), ``dockbench.telemetry`` a record."""
    parts = module.split(".")
    if parts[0] != "dockbench":
        return None
    if len(parts) == 1:
        return "api"
    pkg, name = parts[1], parts[2] if len(parts) > 2 else ""
    if pkg == "sim":
        return "sim.core" if name in CORE or not name else "sim.plant" if name in PLANT else "sim.runner"
    if pkg == "telemetry":
        return "telemetry.record" if name in RECORD or not name else "telemetry.view"
    if pkg in PACKAGES:
        return pkg
    return {"cli": "cli", "gym": "api", "gym_campaign": "api"}.get(pkg)


def layer(module: str) -> int | None:
    """The layer index (:data:`LAYERS`) of a module's unit; None outside the contract."""
    u = unit(module)
    return None if u is None else LEVEL[u]


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(source: str, module: str) -> Iterator[tuple[int, str]]:
    """(line, imported module) of every import in ``source`` that runs (``from a import b`` yields ``a.b``
    as well as ``a``, since ``b`` may be a submodule)."""
    package = module.rsplit(".", 1)[0]

    def walk(nodes: list[ast.stmt]) -> Iterator[tuple[int, str]]:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node):
                yield from walk(node.orelse)
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield node.lineno, alias.name
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                yield node.lineno, base
                for alias in node.names:
                    yield node.lineno, f"{base}.{alias.name}"
            for name in ("body", "orelse", "finalbody"):  # nested blocks: functions, classes, if/try/with/for
                block = getattr(node, name, None)
                if isinstance(block, list):
                    yield from walk(block)
            for handler in getattr(node, "handlers", []):
                yield from walk(handler.body)

    yield from walk(ast.parse(source).body)


def project_modules(root: Path = REPO) -> dict[str, str]:
    """``dockbench.*`` module name → source text, for every ``.py`` file of :data:`PACKAGES` and of the
    ``dockbench`` folder (the API, the cli, gym)."""
    out = {}
    for folder in ("dockbench", *PACKAGES):
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts[0] != "dockbench":
                parts = ["dockbench", *parts]
            out[".".join(parts)] = path.read_text()
    return out


def sim_modules(root: Path = REPO) -> dict[str, str]:
    """The ``dockbench.sim.*`` part of :func:`project_modules`."""
    return {m: s for m, s in project_modules(root).items() if m == "dockbench.sim" or m.startswith("dockbench.sim.")}


def _excepted(module: str, target: str) -> bool:
    return any(module == m and (target == t or target.startswith(t + ".")) for m, t in EXCEPTIONS)


def violations(modules: dict[str, str]) -> list[str]:
    """Every import that breaks the layers, as ``module:line imports target (unit → unit)``: an import of a
    unit in a higher layer, or of another unit of the same layer, that is not in :data:`EXCEPTIONS`."""
    bad = []
    for module, source in modules.items():
        own = unit(module)
        if own is None:
            continue
        for line, target in imports(source, module):
            other = None if target == "dockbench" else unit(target)
            if other is None or other == own or LEVEL[other] < LEVEL[own] or _excepted(module, target):
                continue
            how = "up" if LEVEL[other] > LEVEL[own] else "sideways"
            bad.append(f"{module}:{line} imports {target} ({own} → {other}, {how})")
    return sorted(set(bad))


def unused_exceptions(modules: dict[str, str]) -> list[tuple[str, str]]:
    """The :data:`EXCEPTIONS` no module needs any more (a cycle was removed: drop its entry)."""
    used = {(m, t) for m, t in EXCEPTIONS for line, target in imports(modules.get(m, ""), m)
            if target == t or target.startswith(t + ".")}
    return sorted(set(EXCEPTIONS) - used)
