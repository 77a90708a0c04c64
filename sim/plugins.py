"""Plugins: a controller, planner, tool or target defined in the user's own module, used by the stock CLI.

A plugin is an ordinary Python module that registers its classes on import
(``@CONTROLLERS.register("my_pd")``, ``@PLANNERS.register(...)``, ``@TOOLS.register(...)``,
``@TARGETS.register(...)``; docs/extending.md walks through one). dockbench imports it from three places:

* the scenario's ``plugins:`` list: a module name on the Python path (``my_pkg.my_controller``, the
  scenario's own folder is searched first) or a ``.py`` file (relative to the scenario file);
* the command line: ``--plugin MODULE_OR_FILE`` (repeatable; relative files from the working directory);
* installed packages: every entry point of the group ``dockbench.plugins`` (``[project.entry-points.
  "dockbench.plugins"] my_plugin = "my_pkg.my_controller"`` in the plugin's pyproject.toml), loaded
  once, the first time a scenario is read.

**A plugin is code**: importing it runs it, with the user's rights. So a plugin named by a *file* — a
scenario's ``plugins:``, a campaign's base scenario or ``set:``, ``--set plugins=[…]``,
``load_scenario()`` — is imported only with an explicit opt-in: ``allow=True`` (the Python API's
``allow_plugins=True``), ``--allow-plugins`` on the command-line tools, or the environment variable
``DOCKBENCH_ALLOW_PLUGINS=1`` (which the workers of a local campaign inherit; a Ray campaign's workers
get the driver's value with the job's runtime environment). Without it the scenario is
refused with one line naming the file, the key, the plugin and these three ways. Opening a colleague's
scenario therefore never runs their code unasked; a run folder's meta.json records the plugins, so a rerun
from it asks again. Not gated: ``--plugin`` (the user names the code on their own command line) and
installed entry points (the user installed the package). A plugin this process has already imported is
not imported again (nothing runs), so it needs no second opt-in (``Scenario.replace``, the CLI's
``--plugin`` recorded with the scenario).

A plugin that cannot be imported is a :class:`~sim.errors.ScenarioError` naming the scenario file, the
``plugins[i]`` key (or the entry point) and the exception raised inside the plugin, with its file and line;
a plugin that calls ``sys.exit()`` or raises ``KeyboardInterrupt`` while being imported is such an error too
(it would otherwise end the run silently with exit status 0, "all gates pass").
A module is imported once per process (Python's module cache); a ``.py`` file once per resolved path.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from dockbench.sim.errors import ScenarioError

#: the entry-point group installed plugins declare
ENTRY_POINT_GROUP = "dockbench.plugins"

#: the environment variable that allows plugins named by scenario and campaign files (value ``1``)
ALLOW_ENV = "DOCKBENCH_ALLOW_PLUGINS"

_file_modules: dict[Path, ModuleType] = {}
_loaded_modules: set[str] = set()  # module-name plugins imported by load_plugin
_entry_points_loaded = False


def plugins_allowed(allow: bool | None = None) -> bool:
    """``allow`` when given, else whether :data:`ALLOW_ENV` is ``1``."""
    if allow is not None:
        return bool(allow)
    return os.environ.get(ALLOW_ENV, "").strip() == "1"


def _short(value: object) -> str:
    from dockbench.sim.config import short_repr

    return short_repr(value)


def _trunc(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _refused(plugin: str, file: str | None, key: str) -> ScenarioError:
    return ScenarioError(
        f"plugin {_short(plugin)} is Python code and is not run without an opt-in: read the file, then pass "
        f"--allow-plugins (command line), set {ALLOW_ENV}=1, or call load_scenario(..., allow_plugins=True) "
        "(docs/extending.md)",
        file=file, key=key,
    )


def _where(exc: BaseException) -> str:
    """`` (file:line)`` of the innermost frame of ``exc``'s traceback, or ``""``."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def _import_file(path: Path) -> ModuleType:
    path = path.resolve()
    if path in _file_modules:
        return _file_modules[path]
    # a module name unique per file (two plugins may share a file name), importable by workers that
    # unpickle an object of the plugin (the module is in sys.modules under this name)
    name = f"dockbench_plugin_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    _file_modules[path] = module
    return module


def import_module_from(name: str, base: Path) -> ModuleType:
    """``importlib.import_module(name)`` with the folder ``base`` searched first (on ``sys.path`` for the import
    only, unless it was there already)."""
    where = str(base.resolve())
    added = where not in sys.path
    if added:
        sys.path.insert(0, where)
    try:
        return importlib.import_module(name)
    finally:
        if added:
            sys.path.remove(where)


def load_plugin(plugin: str, *, base_dir: Path | None = None, file: str | None = None, key: str = "plugins",
                allow: bool | None = None) -> str:
    """Import one plugin; returns how it is recorded in the resolved scenario (a module name as given, a
    ``.py`` file as its absolute path).

    Args:
        plugin: a dotted module name, or a path ending in ``.py``.
        base_dir: folder that relative ``.py`` paths are resolved against and that is searched first for
            module names (the scenario's folder); None = the working directory.
        file, key: where the plugin was named, for the error message.
        allow: the opt-in (module docstring): True = import, False = refuse, None = :func:`plugins_allowed`.
            A plugin already imported by this process is accepted either way (nothing runs).

    Raises:
        ScenarioError: not a string, not allowed, file missing, module not found, or the plugin raised (or
            called ``sys.exit``) on import.
    """
    if not isinstance(plugin, str) or not plugin.strip():
        raise ScenarioError(f"expected a module name or a .py file, got {_short(plugin)}", file=file, key=key)
    base = Path.cwd() if base_dir is None else Path(base_dir)
    try:
        if plugin.endswith(".py"):
            path = Path(plugin).expanduser()
            path = path if path.is_absolute() else base / path
            if path.resolve() in _file_modules:
                return str(path.resolve())
            if not plugins_allowed(allow):
                raise _refused(plugin, file, key)
            if not path.is_file():
                raise ScenarioError(f"plugin file not found (looked at {path.resolve()})", file=file, key=key)
            _import_file(path)
            return str(path.resolve())
        if plugin in _loaded_modules:
            return plugin
        if not plugins_allowed(allow):
            raise _refused(plugin, file, key)
        import_module_from(plugin, base)
        _loaded_modules.add(plugin)
        return plugin
    except ScenarioError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name is not None and (plugin == exc.name or plugin.startswith(exc.name + ".")):  # the plugin itself
            raise ScenarioError(
                f"no module named {_short(exc.name)} (a plugin is a module on the Python path, e.g. "
                f"my_pkg.my_controller, searched first in {base.resolve()}; or a .py file relative to the scenario)",
                file=file, key=key,
            ) from None
        raise ScenarioError(
            f"plugin {_short(plugin)} failed on import: {type(exc).__name__}: {_trunc(str(exc))}{_where(exc)}",
            file=file, key=key,
        ) from None
    except SystemExit as exc:  # sys.exit() in a plugin must not end the run "successfully"
        raise ScenarioError(
            f"plugin {_short(plugin)} called sys.exit({_short(exc.code)}) while being imported{_where(exc)}; "
            "a plugin must only define and register its types",
            file=file, key=key,
        ) from None
    except KeyboardInterrupt as exc:
        from dockbench.sim.interrupts import Interrupted

        if isinstance(exc, Interrupted):  # a real Ctrl-C / SIGTERM / SIGHUP: the CLI's own path
            raise
        raise ScenarioError(
            f"plugin {_short(plugin)} raised KeyboardInterrupt while being imported{_where(exc)}",
            file=file, key=key,
        ) from None
    except Exception as exc:  # the plugin's own code raised: name it, where, and what
        raise ScenarioError(
            f"plugin {_short(plugin)} failed on import: {type(exc).__name__}: {_trunc(str(exc))}{_where(exc)}",
            file=file, key=key,
        ) from None


def load_plugins(
    plugins: Sequence[str], *, base_dir: Path | None = None, file: str | None = None, key: str = "plugins",
    allow: bool | None = None,
) -> tuple[str, ...]:
    """:func:`load_plugin` for each entry of ``plugins`` (keys ``plugins[i]``), in order."""
    if isinstance(plugins, str) or not isinstance(plugins, Sequence):
        raise ScenarioError(
            f"expected a list of module names or .py files, got {_short(plugins)}", file=file, key=key
        )
    return tuple(
        load_plugin(p, base_dir=base_dir, file=file, key=f"{key}[{i}]", allow=allow) for i, p in enumerate(plugins)
    )


def load_entry_points() -> list[str]:
    """Import every installed plugin (entry points of :data:`ENTRY_POINT_GROUP`), once per process; returns
    their names. Raises ScenarioError naming the entry point when one fails."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return []
    from importlib.metadata import entry_points

    names = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except (Exception, SystemExit) as exc:
            raise ScenarioError(
                f"installed plugin {ep.name!r} ({ep.value}, entry point group {ENTRY_POINT_GROUP}) failed on "
                f"import: {type(exc).__name__}: {exc}{_where(exc)}; fix or uninstall it"
            ) from None
        names.append(ep.name)
    _entry_points_loaded = True
    return names
