"""The run folder: ``runs/<scenario>/<UTC timestamp>/`` with telemetry.npz, meta.json, summary.json
(and scene.xml, figures, video when asked). :meth:`Run.load` is the one way tools read a run.

:func:`first_difference` compares two runs (or two channel dicts) bit for bit and names the first
differing channel — the determinism test's diagnostic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sim.errors import DockbenchError
from telemetry.log import CHANNELS, atomic_write_text


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
        """``completed`` | ``unstable`` | ``diverged`` | ``interrupted`` (from meta.json / summary.json)."""
        return str(self.meta.get("status") or self.summary.get("status") or "completed")

    @property
    def complete(self) -> bool:
        """True when the run finished normally and covered the whole planner duration."""
        from telemetry.gates import run_is_complete

        return len(self.t) > 0 and run_is_complete(self.status, float(self.t[-1]), self.planner_duration)

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
        from sim.extras import require
        from telemetry.export import channel_labels

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
        """Read a run folder written by :func:`sim.loop.run`.

        Raises:
            DockbenchError: the folder or one of its files is missing.
        """
        p = Path(path)
        tel = p / "telemetry.npz"
        if not tel.is_file():
            raise DockbenchError(f"{p}: not a run folder (no telemetry.npz)")
        with np.load(tel) as z:
            channels = {k: z[k] for k in z.files}
        meta = json.loads((p / "meta.json").read_text()) if (p / "meta.json").is_file() else {}
        summary = json.loads((p / "summary.json").read_text()) if (p / "summary.json").is_file() else {}
        extra_units = meta.get("channel_units", {})
        units = {k: CHANNELS[k][2] if k in CHANNELS else extra_units.get(k, "") for k in channels}
        return cls(path=p, channels=channels, units=units, meta=meta, summary=summary)


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
