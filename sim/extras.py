"""Optional dependencies (pyproject ``[project.optional-dependencies]``): import them or say how to
install them, in the form that matches how dockbench itself was installed.

:func:`install_hint` reads the installed distribution's ``direct_url.json`` (PEP 610): an editable
install from a checkout gets ``pip install -e '<checkout>[extra]'``, a regular install
``pip install 'dockbench[extra]'``, and a source tree that is not installed at all (tests run from a
checkout) ``pip install -e '.[extra]'``.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote, urlparse

from dockbench.sim.errors import DockbenchError

DISTRIBUTION = "dockbench"

#: extra → the packages it adds (kept equal to pyproject.toml by tests/test_export.py)
EXTRAS: dict[str, tuple[str, ...]] = {
    "mcap": ("mcap",),
    "rerun": ("rerun-sdk",),
    "notebook": ("pandas", "nbclient", "nbformat", "ipykernel"),
    "ros2": ("cyclonedds",),
    "video": ("imageio", "imageio-ffmpeg"),
    "ray": ("ray",),
    "gym": ("gymnasium",),
    "tune": ("optuna",),
    "rl": ("gymnasium", "stable-baselines3"),
    "physx": ("ovphysx", "usd-core", "physx-usd-schemas"),
}


class MissingExtra(DockbenchError):
    """An optional dependency is not installed; the message says which extra brings it."""


def _source_checkout() -> Path | None:
    """The checkout this code runs from (the folder holding ``sim/`` and ``pyproject.toml``), or None when it
    runs from an installed wheel (site-packages)."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() else None


def _here_or(path: Path) -> str:
    try:
        return "." if path.resolve() == Path.cwd().resolve() else str(path)
    except OSError:
        return str(path)


def install_hint(extra: str) -> str:
    """The pip command that adds the optional dependency group ``extra`` to this installation: ``pip install -e
    '<checkout>[extra]'`` when the code runs from a checkout (an editable install, or a source tree on the
    path: its ``dockbench.egg-info`` carries no ``direct_url.json``), else from the installed distribution's
    PEP 610 record (editable → its folder, a wheel or an index → ``pip install 'dockbench[extra]'``)."""
    checkout = _source_checkout()
    if checkout is not None:
        return f"pip install -e '{_here_or(checkout)}[{extra}]'"
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        try:
            raw = distribution(DISTRIBUTION).read_text("direct_url.json")
        except PackageNotFoundError:
            return f"pip install '{DISTRIBUTION}[{extra}]'"
        info = json.loads(raw) if raw else {}
    except (OSError, ValueError):
        info = {}
    if info.get("dir_info", {}).get("editable"):
        url = urlparse(info.get("url", ""))
        where = Path(unquote(url.path)) if url.scheme == "file" and url.path else Path(".")
        return f"pip install -e '{_here_or(where)}[{extra}]'"
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtra` naming ``purpose`` and the install command.

    Args:
        module: the import name (e.g. ``"mcap.writer"``).
        extra: the optional dependency group that provides it (a key of :data:`EXTRAS`).
        purpose: what needs it, for the message (e.g. ``"MCAP export"``).
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pkgs = ", ".join(EXTRAS.get(extra, (module.split(".")[0],)))
        raise MissingExtra(
            f"{purpose} needs the optional package(s) {pkgs} ({exc}); install them with: {install_hint(extra)}"
        ) from None
