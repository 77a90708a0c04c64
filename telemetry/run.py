"""The run folder: ``runs/<scenario>/<UTC timestamp>/`` with telemetry.npz, meta.json, summary.json,
timing.npz (wall-clock diagnostics, when the controller records them: the HQP), scene.xml with the
model's mesh and texture files in ``meshes/`` and ``textures/`` (:func:`write_scene`) and manifest.json
(and figures, video when asked).
:meth:`Run.load` is the one way tools read a run.

The folder is one transaction (:class:`RunFolder`): it is created, exclusively, as
``<UTC timestamp>.partial`` before the first step, the telemetry is written (or spilled) into it, and
only when every file is in place is ``manifest.json`` written — the completeness marker: each file
with its size — and the folder renamed to ``<UTC timestamp>``. A folder without a valid manifest
(a ``.partial`` one: the disk filled up, the process was killed) loads as :attr:`Run.partial` with
its :attr:`Run.problems`, and is never :attr:`Run.complete`.

:func:`first_difference` compares two runs (or two channel dicts) bit for bit and names the first
differing channel — the determinism test's diagnostic.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from dockbench.sim.errors import DockbenchError
from dockbench.telemetry.log import CHANNELS, atomic_write_text, channel_labels, load_npz, load_parts, part_files

MANIFEST = "manifest.json"
PARTIAL_SUFFIX = ".partial"
MANIFEST_FORMAT = 1


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(_jsonable(data), indent=2, sort_keys=False) + "\n")


#: the MJCF elements whose attributes name asset files, and the run-folder subfolder their copies go to
_SCENE_ASSETS = {"mesh": "meshes", "hfield": "meshes", "skin": "meshes", "texture": "textures"}
_SCENE_FILE_ATTRS = ("file", "fileright", "fileleft", "fileup", "filedown", "filefront", "fileback")


def write_scene(folder: str | Path, xml: str) -> Path:
    """Write ``scene.xml`` (the assembled MJCF, ``MjSpec.to_xml()``) into the run folder ``folder``, self-contained:
    every mesh, height-field, skin and texture file it names is copied into ``folder/meshes/`` or
    ``folder/textures/`` and named there by a path relative to scene.xml; the compiler's ``meshdir``,
    ``texturedir`` and ``assetdir`` are dropped. The run folder then loads (video, replay) from any working
    directory, after the model's folder moved, and on another machine. Two files of the same name from
    different folders get ``_1``, ``_2`` … before the suffix.

    Raises:
        OSError: a file could not be read or written (the run folder records it as a problem).
    """
    folder = Path(folder)
    root = ET.fromstring(xml)
    for comp in root.iter("compiler"):
        for attr in ("meshdir", "texturedir", "assetdir"):
            comp.attrib.pop(attr, None)
    copied: dict[Path, str] = {}
    taken: set[str] = set()
    for tag, sub in _SCENE_ASSETS.items():
        for el in root.iter(tag):
            for attr in _SCENE_FILE_ATTRS:
                name = el.get(attr)
                if not name:
                    continue
                src = Path(name)
                if not src.is_absolute():  # left as the model gave it (the assembly makes them absolute)
                    continue
                if src not in copied:
                    stem, suffix, k = src.stem, src.suffix, 0
                    rel = f"{sub}/{src.name}"
                    while rel in taken:
                        k += 1
                        rel = f"{sub}/{stem}_{k}{suffix}"
                    taken.add(rel)
                    (folder / sub).mkdir(exist_ok=True)
                    shutil.copyfile(src, folder / rel)
                    copied[src] = rel
                el.set(attr, copied[src])
    path = folder / "scene.xml"
    atomic_write_text(path, ET.tostring(root, encoding="unicode") + "\n")
    return path


def write_manifest(folder: str | Path, *, steps: int | None = None, complete: bool = True,
                   problems: list[str] | None = None) -> Path:
    """Write ``manifest.json`` into ``folder``: every file in it and its subfolders (``meshes/base.stl``), but
    the manifest, with its size in bytes, the recorded steps, ``complete`` and the ``problems`` met while
    writing. Written last; a folder is complete only with a manifest that says so and whose files all have
    their sizes."""
    folder = Path(folder)
    files = {
        p.relative_to(folder).as_posix(): p.stat().st_size
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST and not p.name.endswith(".tmp")
    }
    data = {
        "format": MANIFEST_FORMAT,
        "complete": bool(complete) and not problems,
        "steps": steps,
        "files": files,
        "problems": list(problems or []),
        "written_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(),
    }
    path = folder / MANIFEST
    write_json(path, data)
    return path


def check_manifest(folder: str | Path) -> list[str]:
    """What keeps ``folder`` from being a complete run folder (empty list: it is complete): a name that
    still ends in ``.partial``, a missing or unreadable manifest, one that records problems, a listed file
    missing or of another size.

    The name comes first: :meth:`RunFolder.finalize` writes a complete manifest and then renames the
    folder, so a process killed between the two (SIGKILL, a power cut) leaves a ``.partial`` folder with a
    manifest that says complete; only the rename makes a folder complete."""
    folder = Path(folder)
    renamed: list[str] = []
    if folder.name.endswith(PARTIAL_SUFFIX):
        renamed.append(f"the folder was never renamed into place (its name ends in {PARTIAL_SUFFIX}): the run "
                       "stopped while it was being finished")
    return renamed + _check_manifest_file(folder)


def _check_manifest_file(folder: Path) -> list[str]:
    path = folder / MANIFEST
    if not path.is_file():
        return [f"no {MANIFEST}: the run folder was not finished (stopped or failed while writing)"]
    try:
        data = json.loads(path.read_text())
        files = dict(data["files"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"{MANIFEST} is unreadable ({exc})"]
    problems = [str(p) for p in data.get("problems") or []]
    if not data.get("complete", False) and not problems:
        problems.append(f"{MANIFEST} marks the folder incomplete")
    for name, size in files.items():
        f = folder / name
        if not f.is_file():
            problems.append(f"{name} is missing")
        elif f.stat().st_size != size:
            problems.append(f"{name} has {f.stat().st_size} bytes, {size} were written")
    return problems


class RunFolder:
    """A run folder being written (the transaction of the module docstring).

    :meth:`create` makes ``<out_root>/<scenario>/<stamp>.partial`` with an exclusive ``mkdir`` (two
    runs started in the same microsecond get ``<stamp>_1`` and so on; the final name is never
    taken by another run either), so it also checks that ``out_root`` is writable before anything is
    simulated. :meth:`finalize` writes the manifest and renames the folder into place;
    :meth:`keep_partial` leaves it under its ``.partial`` name with a manifest listing the problems
    (if even that can be written).

    Attributes:
        path: the folder now (``….partial`` until finalized). final_path: its name once complete.
        problems: what failed while writing (a file that could not be written, …).
    """

    def __init__(self, path: Path, final_path: Path):
        self.path = path
        self.final_path = final_path
        self.problems: list[str] = []
        self.finalized = False

    @classmethod
    def create(cls, out_root: str | Path, folder_name: str, *, stamp: str | None = None) -> RunFolder:
        """Create the partial folder of a new run of the scenario folder ``folder_name``.

        Raises:
            DockbenchError: ``out_root`` cannot hold run folders (empty — ``--out ""`` would write into
                the working directory —, not a directory, below a file, not writable, read-only file
                system); the message names it.
        """
        if isinstance(out_root, str) and not out_root.strip():
            raise DockbenchError(f"--out {out_root!r}: empty path; give the parent folder of the run folders "
                                 "(e.g. runs, or . for the working directory)")
        root = Path(out_root)
        parent = root / folder_name
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DockbenchError(
                f"--out {root}: cannot create run folders there ({exc.strerror or exc}"
                f"{': ' + str(exc.filename) if exc.filename else ''})"
            ) from None
        if not parent.is_dir():
            raise DockbenchError(f"--out {root}: {parent} is not a directory")
        stamp = stamp or _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S_%fZ")
        for k in range(10000):
            name = stamp if k == 0 else f"{stamp}_{k}"
            final = parent / name
            partial = parent / (name + PARTIAL_SUFFIX)
            try:
                partial.mkdir()  # exclusive: fails if another run holds this name
            except FileExistsError:
                continue
            except OSError as exc:
                raise DockbenchError(
                    f"--out {root}: cannot create a run folder there ({exc.strerror or exc})"
                ) from None
            if final.exists():  # a run that already finished under this name
                partial.rmdir()
                continue
            return cls(partial, final)
        raise DockbenchError(f"--out {root}: 10000 run folders named {stamp}* already exist")  # pragma: no cover

    def file(self, name: str) -> Path:
        return self.path / name

    def attempt(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> bool:
        """Run ``fn(*args, **kwargs)`` (a write); an OSError is recorded in :attr:`problems`."""
        try:
            fn(*args, **kwargs)
            return True
        except OSError as exc:
            self.problems.append(f"{what} could not be written: {exc.strerror or exc}")
            return False

    def finalize(self, steps: int | None) -> Path:
        """Write the manifest and rename the folder to its final name (when nothing failed); else
        :meth:`keep_partial`. Returns the folder's path afterwards."""
        if self.problems:
            return self.keep_partial(steps)
        if not self.attempt(MANIFEST, write_manifest, self.path, steps=steps):
            return self.keep_partial(steps)
        try:
            os.rename(self.path, self.final_path)
        except OSError as exc:
            self.problems.append(f"the folder could not be renamed to {self.final_path.name}: {exc.strerror or exc}")
            return self.keep_partial(steps)
        self.path = self.final_path
        self.finalized = True
        return self.path

    def keep_partial(self, steps: int | None) -> Path:
        """Leave the folder under its ``.partial`` name, with a manifest that lists the problems when
        one can still be written."""
        problems = self.problems or ["the run folder was not finished"]
        try:
            write_manifest(self.path, steps=steps, complete=False, problems=problems)
        except OSError:
            pass  # the .partial name and the missing manifest say it
        return self.path

    def abandon(self) -> None:
        """Remove the folder: nothing was recorded (the run failed or was stopped before its first step)."""
        shutil.rmtree(self.path, ignore_errors=True)


@dataclass(frozen=True)
class Channel:
    """One telemetry channel with its unit.

    Attributes:
        name: channel name (see :data:`telemetry.log.CHANNELS`).
        data: the array, first axis = control step.
        unit: unit string (``"N|N·m"`` = force part | moment part; ``""`` = dimensionless).
        doc: one-line meaning ("" for controller diagnostics).
    """

    name: str
    data: np.ndarray
    unit: str
    doc: str = ""


@dataclass(frozen=True)
class RunSegment:
    """A named planner segment [s] as recorded in meta.json."""

    name: str
    t0: float
    t1: float


@dataclass
class Run:
    """A loaded run folder.

    Attributes:
        path: the folder.
        channels: name → array (first axis = control step).
        units: name → unit string.
        meta: meta.json (resolved scenario, versions, timing, frames).
        summary: summary.json (metrics, gate verdicts, status).
    """

    path: Path
    channels: dict[str, np.ndarray]
    units: dict[str, str]
    meta: dict[str, Any]
    summary: dict[str, Any]
    problems: list[str] = field(default_factory=list)

    @property
    def partial(self) -> bool:
        """True when the folder is not a finished run folder (see :attr:`problems`): the telemetry
        holds what was written, the run is never :attr:`complete`."""
        return bool(self.problems)

    @property
    def metrics(self) -> dict[str, Any]:
        """The metrics recorded in summary.json (``telemetry.metrics.metrics_from_run`` recomputes)."""
        return self.summary.get("metrics", {})

    def channel(self, name: str) -> Channel:
        """The channel ``name`` with its unit.

        Raises:
            DockbenchError: unknown channel (the message lists the run's channels).
        """
        if name not in self.channels:
            known = ", ".join(_canonical_order(set(self.channels)))
            raise DockbenchError(f"{self.path}: no channel {name!r}; channels: {known}")
        doc = CHANNELS[name][3] if name in CHANNELS else ""
        return Channel(name, self.channels[name], self.units.get(name, ""), doc)

    @property
    def t(self) -> np.ndarray:
        """(N,) control-step time [s]."""
        return self.channels["t"]

    @property
    def segments(self) -> tuple[RunSegment, ...]:
        """Planner segments from meta.json (empty when none were recorded)."""
        return tuple(RunSegment(str(s["name"]), float(s["t0"]), float(s["t1"]))
                     for s in self.meta.get("segments", []) or [])

    @property
    def planner_duration(self) -> float:
        """Planner duration [s] (the end of the last sample when not recorded)."""
        d = self.meta.get("planner_duration")
        return float(d) if d is not None else (float(self.t[-1]) if len(self.t) else 0.0)

    @property
    def joint_names(self) -> list[str]:
        """Arm joint names, in the order of the columns of q, v and the torques."""
        return list(self.meta.get("joint_names", []))

    @property
    def status(self) -> str:
        """``completed`` | ``unstable`` | ``diverged`` | ``interrupted`` | ``aborted`` | ``error`` (from
        summary.json / meta.json), or ``partial`` for a folder whose writing did not get that far."""
        recorded = self.summary.get("status") or self.meta.get("status")
        if not recorded or recorded == "running":
            return "partial"
        return str(recorded)

    @property
    def complete(self) -> bool:
        """True when the folder is complete (not :attr:`partial`) and the run finished normally and
        covered the whole planner duration."""
        from dockbench.telemetry.gates import run_is_complete

        if self.partial or len(self.t) == 0:
            return False
        return run_is_complete(self.status, float(self.t[-1]), self.planner_duration)

    @property
    def name(self) -> str:
        """The scenario name."""
        recorded = self.summary.get("scenario") or (self.meta.get("scenario") or {}).get("name")
        return str(recorded or self.path.parent.name)

    def to_frame(self, channels: list[str] | None = None) -> Any:
        """The telemetry as a pandas DataFrame: one row per control step, indexed by ``t`` [s], one
        column per channel component named ``<channel>`` (scalars) or ``<channel>.<part>`` (joint
        names for q, v and the torques; x/y/z; w/x/y/z for quaternions; fx…nz for wrenches; the hand's
        joint names). ``df.attrs["units"]`` maps each column to its unit.

        Args:
            channels: which channels (default all, in :data:`telemetry.log.CHANNELS` order).

        Raises:
            DockbenchError: an unknown channel; pandas not installed (the message gives the install
                command of the ``notebook`` extra).
        """
        from dockbench.sim.extras import require

        pd = require("pandas", "notebook", "Run.to_frame()")
        names = _canonical_order(set(self.channels)) if channels is None else list(channels)
        for n in names:
            if n not in self.channels:
                self.channel(n)  # raises with the list of channels
        hand = (self.meta.get("tool_summary") or {}).get("joint_names") or []
        cols: dict[str, np.ndarray] = {}
        units: dict[str, str] = {}
        n_rows = len(self.t)
        for name in names:
            if name == "t":
                continue
            a = np.asarray(self.channels[name])
            flat = a.reshape(n_rows, -1) if a.ndim > 1 else a[:, None]
            width = flat.shape[1]
            if name.startswith("hand_") and len(hand) == width:
                labels = [str(x) for x in hand]
            else:
                labels = channel_labels(name, width, self.joint_names)
            unit = self.units.get(name, "")
            parts = unit.split("|") if "|" in unit else [unit]
            for k in range(width):
                col = name if a.ndim == 1 else f"{name}.{labels[k]}"
                cols[col] = flat[:, k]
                units[col] = parts[min(k // 3, len(parts) - 1)] if len(parts) > 1 else unit
        df = pd.DataFrame(cols, index=pd.Index(np.asarray(self.t), name="t"))
        df.attrs["units"] = units
        df.attrs["run"] = str(self.path)
        return df

    @classmethod
    def load(cls, path: str | Path) -> Run:
        """Read a run folder written by :func:`sim.loop.run` — a complete one, or a partial one
        (:attr:`partial`, :attr:`problems`): its telemetry.npz, or when that is missing or damaged the
        telemetry parts a long run had spilled. Large channels are memory-mapped (read on use).

        Raises:
            DockbenchError: the folder holds no readable telemetry.
        """
        p = Path(path)
        if not p.is_dir():
            raise DockbenchError(f"{p}: not a run folder (no such directory)")
        problems = check_manifest(p)
        tel = p / "telemetry.npz"
        channels: dict[str, np.ndarray] | None = None
        if tel.is_file():
            try:
                channels = load_npz(tel, mmap=True)
            except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
                problems.append(f"telemetry.npz is damaged ({exc})")
        elif part_files(p):
            problems.append("no telemetry.npz: the channels come from the telemetry parts written so far")
        if channels is None:
            channels = load_parts(p)
            if not channels:
                raise DockbenchError(f"{p}: not a run folder (no readable telemetry.npz or telemetry parts)")
        meta = _read_json(p / "meta.json", problems)
        summary = _read_json(p / "summary.json", problems)
        extra_units = meta.get("channel_units", {}) or {}
        units = {k: CHANNELS[k][2] if k in CHANNELS else extra_units.get(k, "") for k in channels}
        return cls(path=p, channels=channels, units=units, meta=meta, summary=summary, problems=problems)


def _read_json(path: Path, problems: list[str]) -> dict[str, Any]:
    """The JSON object in ``path``; {} (and a problem noted) when it is missing or unreadable."""
    if not path.is_file():
        problems.append(f"{path.name} is missing")
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        problems.append(f"{path.name} is unreadable ({exc})")
        return {}
    if not isinstance(data, dict):
        problems.append(f"{path.name} is not a JSON object")
        return {}
    return data


def _canonical_order(names: set[str]) -> list[str]:
    known = [n for n in CHANNELS if n in names]
    return known + sorted(names - set(known))


def _bit_view(x: np.ndarray) -> np.ndarray:
    """The array's bytes as unsigned integers of the same item size (NaN == NaN, 0.0 != -0.0)."""
    x = np.ascontiguousarray(x)
    if x.dtype.itemsize in (1, 2, 4, 8) and x.dtype.kind in "fiub":
        return x.view(f"u{x.dtype.itemsize}")
    return x


def first_difference(a: Run | dict[str, np.ndarray], b: Run | dict[str, np.ndarray]) -> str | None:
    """None when the two runs' telemetry is bit-identical; otherwise a message naming the first
    differing channel.

    "First" is the channel whose first differing control step is earliest (ties broken by the
    order of :data:`telemetry.log.CHANNELS`), because that is where the two runs start to diverge.
    Missing channels, shape and dtype mismatches are reported first, in channel order.

    Args:
        a, b: :class:`Run` objects or channel dicts (name → array, first axis = step).
    """
    ca = a.channels if isinstance(a, Run) else a
    cb = b.channels if isinstance(b, Run) else b
    names_a, names_b = set(ca), set(cb)
    if names_a != names_b:
        only_a = sorted(names_a - names_b)
        only_b = sorted(names_b - names_a)
        first = _canonical_order(names_a ^ names_b)[0]
        return (f"channel {first!r} is not in both runs (only in a: {only_a or 'none'}; "
                f"only in b: {only_b or 'none'})")
    order = _canonical_order(names_a)
    for name in order:
        xa, xb = np.asarray(ca[name]), np.asarray(cb[name])
        if xa.shape != xb.shape:
            return f"channel {name!r} differs in shape: {xa.shape} vs {xb.shape}"
        if xa.dtype != xb.dtype:
            return f"channel {name!r} differs in dtype: {xa.dtype} vs {xb.dtype}"
    best: tuple[int, int, str, tuple[int, ...]] | None = None
    differing: list[str] = []
    for rank, name in enumerate(order):
        xa, xb = np.asarray(ca[name]), np.asarray(cb[name])
        neq = _bit_view(xa) != _bit_view(xb)
        if not np.any(neq):
            continue
        differing.append(name)
        idx = tuple(int(i) for i in np.argwhere(neq)[0])
        step = idx[0] if idx else 0
        if best is None or (step, rank) < (best[0], best[1]):
            best = (step, rank, name, idx)
    if best is None:
        return None
    step, _, name, idx = best
    t = ca.get("t")
    when = f" (t = {float(t[step]):.6g} s)" if t is not None and np.ndim(t) == 1 and step < len(t) else ""
    va, vb = np.asarray(ca[name])[idx], np.asarray(cb[name])[idx]
    others = [n for n in differing if n != name]
    tail = f"; also differ: {', '.join(others)}" if others else ""
    return f"channel {name!r} first differs at step {step}{when}, index {idx}: {va!r} vs {vb!r}{tail}"
