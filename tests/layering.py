"""The import layers of ``dockbench.sim`` (docs/architecture.md, "Layers"), checked from the source.

Three layers, each importing only its own and the ones below it:

* **core** — Lie groups, typed configs, errors, registries, poses, the kernel switch, interrupts and extras:
  what every other module uses. It imports nothing else of dockbench.
* **plant** — the models and their physics: robots, mounts, interfaces, peg_hole, assembly, dynamics, the floating
  base, the F/T pipeline, uncertainty, IK. It imports core, and nothing of controllers, planners,
  telemetry, the hand or the bridges.
* **runner** — build, the cycle, simulate, scenario, overrides, plugins, the model cache, the orbit
  telemetry and the campaign tool: everything else in ``sim``.

The check reads every module's syntax tree (imports inside functions count too, those under
``if TYPE_CHECKING:`` do not: they never run), so it needs no import of the package. The repository's
folders install as ``dockbench.<folder>`` (setup.py), which tools that scan one package directory
(import-linter's grimp) cannot follow; reading the files here is the same graph.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CORE = ("lie", "config", "errors", "registry", "poses", "kernels", "_kernel_manifest", "interrupts", "extras")
PLANT = ("robots", "mounts", "interfaces", "peg_hole", "assembly", "dynamics", "floating", "wrench", "uncertainty",
         "ik")
#: packages outside sim that core and plant must not import
ABOVE_THE_PLANT = ("dockbench.controllers", "dockbench.planners", "dockbench.telemetry", "dockbench.hand",
                   "dockbench.bridges", "dockbench.experiments", "dockbench.cli")


def layer(module: str) -> int | None:
    """0 core, 1 plant, 2 runner for a ``dockbench.sim`` module; None outside ``dockbench.sim``. The package
    itself (its ``__init__``, which imports nothing) is core: ``from dockbench.sim import kernels`` is an
    import of ``dockbench.sim.kernels``."""
    if module == "dockbench.sim":
        return 0
    if not module.startswith("dockbench.sim."):
        return None
    name = module.split(".")[2]
    return 0 if name in CORE else 1 if name in PLANT else 2


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


def sim_modules(root: Path = REPO) -> dict[str, str]:
    """``dockbench.sim.*`` module name → source text, from the repository's ``sim`` folder."""
    out = {}
    for path in sorted((root / "sim").rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(["dockbench", *parts])] = path.read_text()
    return out


def violations(modules: dict[str, str]) -> list[str]:
    """Every import that breaks the layers, as ``module:line imports target (layer → layer)``."""
    names = ("core", "plant", "runner")
    bad = []
    for module, source in modules.items():
        own = layer(module)
        for line, target in imports(source, module):
            other = layer(target)
            if other is not None and other > own:
                bad.append(f"{module}:{line} imports {target} ({names[own]} → {names[other]})")
            elif other is None and own < 2 and target.startswith(ABOVE_THE_PLANT):
                bad.append(f"{module}:{line} imports {target} ({names[own]} → {target.split('.')[1]})")
    return sorted(set(bad))
