"""The campaign driver: expand the campaign, skip finished trials, run the rest on an executor, write
every trial's folder as its result arrives, then the results table, the summary and the figures.

Output folder ``<out>/<campaign name>/``::

    campaign.yaml          the campaign file as run (a copy)
    trials/<cell>/s<sample>r<repeat>/
        summary.json       metrics, gate verdicts, status (always)
        meta.json          the resolved scenario, versions, seed, timing, what uncertainty drew (always)
        telemetry.npz      compressed channels, when the telemetry policy keeps them
        error.txt          the traceback of a trial that raised (status error)
        trial.json         the trial's row and the hash of its scenario: written last, it marks the trial done
    results.csv            one row per trial (docs/campaigns.md lists the columns)
    summary.json           per cell: success rate with its Wilson 95% interval, median / p95 of the key metrics
    *.png                  success-rate and peak-force heat maps (2-D grids), metric vs parameter (1-D)

Resuming: a rerun of the same campaign skips every trial whose ``trial.json`` holds the hash of the same
scenario; a trial whose scenario changed (an edited base file or campaign) runs again.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from dockbench.sim.campaign.spec import Campaign, Trial
from dockbench.sim.campaign.stats import quantiles, wilson_interval
from dockbench.sim.campaign.trial import TrialResult, TrialTask, run_trial
from dockbench.sim.errors import DockbenchError, ScenarioError

#: results.csv columns that depend on the machine, the executor or the order (everything else is the
#: same bit for bit whatever runs the campaign)
VOLATILE_COLUMNS = ("telemetry", "rt_factor", "loop_s", "trial_s", "overhead_s", "worker")
#: statuses of a trial that did not finish (not recorded: a rerun runs it again)
UNFINISHED = ("interrupted",)
#: the campaign folder's lock file (``fcntl.flock``: one driver per folder; it holds the driver's pid,
#: host and start time, for the message a second driver gets)
LOCK_FILE = "campaign.lock"
#: disk a trial's records take besides its telemetry (summary.json, meta.json, trial.json: 16–17 kB
#: measured, docs/performance.md "Issue 17"), rounded up
RECORD_BYTES = 20_000
#: a trial's cost for the time estimate: 45 ms per simulated second + 13 ms (docs/performance.md,
#: ``campaign_bench.py --fit``, one worker), and the simulated length assumed when ``sim.duration`` is
#: null (the whole plan: the shipped dockings run 9–12 s)
TRIAL_S_PER_SIM_S = 0.045
TRIAL_FIXED_S = 0.013
ASSUMED_SIM_S = 12.0
#: the campaign refuses to start past this estimated wall time unless told otherwise (``max_hours``)
DEFAULT_MAX_HOURS = 24.0
#: grids of up to this many cells validate one trial of every cell before anything runs; larger ones
#: validate every value of every axis (max(values) cells per variant) and leave the rest to their trials
VALIDATE_ALL_CELLS = 2000
#: the verdicts and telemetry states a trial record may hold
VERDICTS = ("PASS", "FAIL", "INCOMPLETE")
TELEMETRY_STATES = ("kept", "none", "over budget")


@dataclass
class CampaignReport:
    """What :func:`run_campaign` did.

    Attributes:
        out_dir: the campaign's folder.
        rows: results.csv's rows (dicts, expansion order).
        summary: summary.json's contents.
        ran, skipped: trials run now / found finished.
        interrupted: the campaign stopped before every trial was done (rerun to resume).
        figures: the figure files written.
    """

    out_dir: Path
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    ran: int
    skipped: int
    interrupted: bool = False
    figures: list[Path] = field(default_factory=list)
    #: trials whose records were damaged (trial id → what was wrong): run again
    damaged: dict[str, str] = field(default_factory=dict)
    #: the estimate made before the first trial (trials, disk_mb, free_mb, hours)
    estimate: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrialWorker:
    """What runs each trial of a campaign (:func:`run_campaign`'s ``worker``; default: the scenario's own run).

    Attributes:
        fn: the worker function, task → :class:`TrialResult` (a module-level function: a process pool
            pickles it by name).
        task: the campaign's task of a trial (:class:`TrialTask`) → the task ``fn`` takes (called in the
            driver; what it returns must pickle).
        key: mixed into every trial's scenario hash (trial.json ``digest``): a finished trial is resumed only
            when its scenario *and* this key are the same (e.g. the policy of dockbench.gym_campaign).
    """

    fn: Callable[[TrialTask], TrialResult] = run_trial
    task: Callable[[TrialTask], TrialTask] | None = None
    key: str = ""

    def digest(self, trial: Trial, base_data: dict[str, Any]) -> str:
        d = trial.digest(base_data)
        if not self.key:
            return d
        import hashlib

        return hashlib.sha256(f"{d}:{self.key}".encode()).hexdigest()[:16]


class Progress:
    """``[#####.....]  57/200  failed 3  ETA 1m12s`` on a terminal (redrawn), a line per 5% otherwise."""

    def __init__(self, total: int, done: int, workers: int, executor: str, stream: TextIO | None):
        self.total, self.done, self.workers, self.executor = total, done, workers, executor
        self.start_done = done
        self.failed = 0
        self.errors = 0
        self.stream = stream
        self.t0 = time.perf_counter()
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self._next_line = 0

    def update(self, result: TrialResult | None = None) -> None:
        if result is not None:
            self.done += 1
            if result.verdict != "PASS":
                self.failed += 1
            if result.status in ("error", "invalid"):
                self.errors += 1
        if self.stream is None:
            return
        ran = self.done - self.start_done
        elapsed = time.perf_counter() - self.t0
        left = self.total - self.done
        eta = "--" if ran == 0 else _fmt_s(elapsed / ran * left)
        frac = self.done / self.total if self.total else 1.0
        bar = "#" * int(25 * frac)
        text = (f"[{bar:<25}] {self.done}/{self.total}  failed {self.failed}"
                + (f"  errors {self.errors}" if self.errors else "")
                + f"  ETA {eta}  ({self.executor} × {self.workers})")
        if self.tty:
            self.stream.write("\r" + text)
            self.stream.flush()
        elif self.done >= self._next_line or self.done == self.total:
            self.stream.write(text + "\n")
            self.stream.flush()
            self._next_line = self.done + max(1, self.total // 20)

    def finish(self) -> None:
        if self.stream is not None and self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _fmt_s(s: float) -> str:
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


def _atomic_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _read_base(path: Path) -> dict[str, Any]:
    from dockbench.sim.campaign.spec import read_yaml

    data = read_yaml(path, "scenario")
    if not isinstance(data, dict):
        raise ScenarioError("the scenario must be a YAML mapping", file=str(path))
    return data


def _cell_error(exc: ScenarioError, trial: Trial, campaign: Campaign) -> ScenarioError:
    """``exc`` with where in the campaign the trial's scenario came from."""
    over = ", ".join(f"{k}={v!r}" for k, v in trial.overrides.items() if k != "sim.seed")
    where = f" (trial {trial.trial_id} of {campaign.file}" + (f": {over}" if over else "") + ")"
    return ScenarioError(exc.detail + where, file=exc.file, key=exc.key)


def trial_kernels(meta: dict[str, Any] | None) -> str | None:
    """Which code path a trial's hot-path components ran, from its meta's ``kernels`` (sim.cycle.kernel_paths, at
    the run's end: a kernel the guard dropped counts as Python) in :func:`sim.kernels.describe`'s words:
    ``compiled``, ``python`` or the mix; None when the trial recorded none (it did not run)."""
    from dockbench.sim.kernels import describe

    paths = (meta or {}).get("kernels")
    return describe(paths) if isinstance(paths, dict) and paths else None


def kernel_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Trials by :func:`trial_kernels`; trials that recorded none (did not run, or were recorded before the
    column existed) are left out."""
    return dict(sorted(Counter(r["kernels"] for r in rows if r.get("kernels") is not None).items()))


def mixed_paths_warning(counts: dict[str, int]) -> str:
    """A one-line warning when a campaign's trials ran different code paths (``counts``: :func:`kernel_counts`;
    ``""`` when they all ran one)."""
    if len(counts) < 2:
        return ""
    listed = "; ".join(f"{n} {k}" for k, n in counts.items())
    return (f"the trials ran different code paths ({listed}; results.csv's kernels column says which): a "
            "kernel was missing or stale when some trials started (e.g. a source file edited while the campaign "
            "ran) or the guard dropped it; the paths agree to round-off, which contact can amplify. For one code "
            "path: rebuild the kernels (pip install -e .), delete those trials' folders and rerun to resume")


def _row(trial: Trial, res: TrialResult, campaign: Campaign, path: str, telemetry: str) -> dict[str, Any]:
    t = res.timing
    failed = [g["metric"] for g in res.gates if g.get("verdict") == "FAIL"]
    row: dict[str, Any] = {"trial": trial.trial_id, "cell": trial.cell}
    for col in campaign.columns():
        row[col] = trial.params.get(col)
    row.update(sample=trial.sample, repeat=trial.repeat, seed=trial.seed, status=res.status, verdict=res.verdict,
               failed_gates=";".join(failed), message=res.message)
    row["metrics"] = dict(res.metrics)
    loop_s = t.get("loop_s")
    trial_s = t.get("trial_s")
    overhead = None if loop_s is None or trial_s is None else trial_s - loop_s - t.get("encode_s", 0.0)
    row.update(sim_s=t.get("sim_s"), path=path, telemetry=telemetry, rt_factor=t.get("rt_factor"), loop_s=loop_s,
               trial_s=trial_s, overhead_s=overhead, encode_s=t.get("encode_s"), worker=res.worker,
               kernels=trial_kernels(res.meta))
    return row


def _csv_value(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(v)
    return str(v)


def results_csv(rows: list[dict[str, Any]], campaign: Campaign) -> str:
    """The results table: identification, parameters, seed, verdict, every metric, then timing and paths.
    Floats are written with ``repr`` (17 significant digits: they read back bit for bit)."""
    from dockbench.telemetry.metrics import METRICS

    seen = {m for r in rows for m, v in r["metrics"].items() if v is None or isinstance(v, (int, float))}
    metric_cols = [m for m in METRICS if m in seen] + sorted(seen - set(METRICS))
    head = ["trial", "cell", *campaign.columns(), "sample", "repeat", "seed", "status", "verdict", "failed_gates"]
    tail = ["sim_s", "message", "path", "telemetry", "rt_factor", "loop_s", "trial_s", "overhead_s", "worker",
            "kernels"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(head + metric_cols + tail)
    for r in rows:
        w.writerow([_csv_value(r.get(c)) for c in head] + [_csv_value(r["metrics"].get(m)) for m in metric_cols]
                   + [_csv_value(r.get(c)) for c in tail])
    return buf.getvalue()


def summarise(rows: list[dict[str, Any]], campaign: Campaign) -> dict[str, Any]:
    """summary.json's ``cells``: per cell the trials, passes, success rate and its Wilson 95% interval,
    statuses, failing gates, and median / p95 of the key metrics."""
    cells: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    by_cell: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["cell"] not in by_cell:
            order.append(r["cell"])
        by_cell.setdefault(r["cell"], []).append(r)
    grid_cols = (["variant"] if campaign.variants else []) + [
        c for a in campaign.grid_axes for c in ([a.name] if len(a.keys) == 1 else list(a.keys))
    ]
    for name in order:
        rs = by_cell[name]
        n = len(rs)
        k = sum(r["verdict"] == "PASS" for r in rs)
        statuses: dict[str, int] = {}
        gates: dict[str, int] = {}
        for r in rs:
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
            for g in filter(None, r["failed_gates"].split(";")):
                gates[g] = gates.get(g, 0) + 1
        ci = wilson_interval(k, n)
        cells[name] = {
            "params": {c: rs[0].get(c) for c in grid_cols},
            "trials": n,
            "passed": k,
            "success_rate": k / n if n else None,
            "wilson95": list(ci) if ci else None,
            "statuses": statuses,
            "failed_gates": gates,
            "metrics": {m: quantiles([r["metrics"].get(m) for r in rs]) for m in campaign.metrics},
        }
    return cells


def _load_avg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        return None


def _folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class CampaignLock:
    """An exclusive lock on a campaign folder (``fcntl.flock`` on :data:`LOCK_FILE`, released when the
    process ends, however it ends). A second driver is refused with the holder's pid, host and start time.
    Where ``fcntl`` is missing (Windows) there is no lock."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.path = folder / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                holder = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
                who = (f"pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}"
                       if isinstance(holder, dict) else "unknown")
            except (OSError, ValueError):
                who = "unknown"
            os.close(fd)
            raise DockbenchError(
                f"{self.folder}: another campaign driver is running in this folder ({who}); wait for it to "
                "finish or stop it (two drivers would run the same trials twice)") from None
        import datetime as _dt
        import socket

        text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                           "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")})
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, text.encode(), 0)
        except OSError:
            pass  # the lock holds without its note (a full disk)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None


def estimate(campaign: Campaign, workers: int, scenario: Any = None, pending: int | None = None) -> dict[str, Any]:
    """What the campaign will cost: ``trials`` to run, ``disk_mb`` (records + the telemetry budget),
    ``hours`` of wall time on ``workers`` (:data:`TRIAL_S_PER_SIM_S`, :data:`TRIAL_FIXED_S`; the simulated
    length from ``scenario.sim.duration``, else :data:`ASSUMED_SIM_S`)."""
    n = campaign.n_trials if pending is None else pending
    sim_s = getattr(getattr(scenario, "sim", None), "duration", None)
    if scenario is None and isinstance(campaign.set, dict):  # before validation: the campaign's own set
        nested = campaign.set.get("sim")
        sim_s = campaign.set.get("sim.duration", nested.get("duration") if isinstance(nested, dict) else None)
    if isinstance(sim_s, bool) or not isinstance(sim_s, (int, float)) or not sim_s > 0:
        sim_s = ASSUMED_SIM_S
    per_trial = TRIAL_FIXED_S + TRIAL_S_PER_SIM_S * float(sim_s)
    tel = 0.0 if campaign.telemetry == "none" else campaign.telemetry_budget_mb * 1e6
    return {"trials": n, "sim_s_per_trial": float(sim_s), "hours": n * per_trial / max(workers, 1) / 3600.0,
            "disk_mb": (n * RECORD_BYTES + tel) / 1e6}


def _free_mb(path: Path) -> float | None:
    try:
        return shutil.disk_usage(path).free / 1e6
    except OSError:  # pragma: no cover
        return None


def _prepare_folder(out_root: Path, out: Path) -> None:
    """Create ``<out_root>/<name>/trials``, or a clear error: ``--out`` a file, read-only, or unusable."""
    for p in (out_root, out, out / "trials"):
        if p.exists() and not p.is_dir():
            if p == out / "trials":  # a stray file where the campaign's own folder belongs
                p.unlink()
                continue
            raise DockbenchError(f"--out {out_root}: {p} is a file, not a folder")
    try:
        (out / "trials").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DockbenchError(f"--out {out_root}: cannot create the campaign folder {out}: "
                             f"{exc.strerror or exc}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise DockbenchError(f"--out {out_root}: the campaign folder {out} is not writable")


def _validate_cells(trials: list[Trial], campaign: Campaign, bases: dict[Path, dict[str, Any]],
                    progress: TextIO | None) -> Any:
    """Validate trials' scenarios before anything runs (one per cell, or on a large grid one cell for each
    value of every axis: every value is checked, combinations by their trials). Returns the first scenario."""
    from dockbench.sim.scenario import scenario_from_dict

    per_cell = campaign.samples * campaign.repeats
    n_cells = len(trials) // per_cell
    if n_cells <= VALIDATE_ALL_CELLS:
        picks = range(n_cells)
    else:
        shape = [len(a.values) for a in campaign.grid_axes]
        span = max(shape)
        cells_per_variant = int(np.prod(shape))
        picks = sorted({v * cells_per_variant + int(np.ravel_multi_index([j % n for n in shape], shape))
                        for v in range(max(len(campaign.variants), 1)) for j in range(span)})
        if progress is not None:
            progress.write(f"{n_cells} cells: validating every value of every axis ({len(picks)} cells) before the "
                           "first trial; the other cells are validated by their trials (status invalid)\n")
    first = None
    for c in picks:
        t = trials[c * per_cell]
        try:
            sc = scenario_from_dict(t.scenario_data(bases[t.base]), file=str(t.base))
        except ScenarioError as exc:
            raise _cell_error(exc, t, campaign) from None
        except RecursionError:
            raise ScenarioError(f"nested too deep (trial {t.trial_id})", file=str(t.base)) from None
        first = first if first is not None else sc
    return first


def _check_record(folder: Path, trial: Trial, digest: str, campaign: Campaign) -> tuple[dict[str, Any] | None, str]:
    """A finished trial's row from its folder, or (None, why it is not usable): ``""`` when the trial is
    simply not done (no trial.json, or its scenario changed), else what is damaged."""
    try:
        if not folder.is_dir():
            if folder.exists() or any(p.exists() and not p.is_dir() for p in folder.parents):
                return None, "a file where the trial's folder belongs"
            return None, ""
        rec = folder / "trial.json"
        if not rec.exists():
            return None, ""
        try:
            saved = json.loads(rec.read_bytes().decode("utf-8"))
        except (OSError, ValueError) as exc:
            return None, f"trial.json is unreadable ({type(exc).__name__})"
        if not isinstance(saved, dict) or not isinstance(saved.get("row"), dict):
            return None, "trial.json is not a trial record"
        if not isinstance(saved.get("digest"), str):
            return None, "trial.json has no scenario hash"
        if saved.get("digest") != digest:
            return None, ""  # another version of the trial: run it again (not damage)
        row = saved["row"]
        problem = _row_problem(row, trial, campaign)
        if problem:
            return None, f"trial.json: {problem}"
        files = saved.get("files")
        if files is not None:
            if not isinstance(files, dict):
                return None, "trial.json: files is not a mapping"
            for name, size in files.items():
                f = folder / str(name)
                if not f.is_file():
                    return None, f"{name} is missing"
                if f.stat().st_size != size:
                    return None, f"{name} has {f.stat().st_size} bytes, {size} were written"
        else:  # a record of an earlier version (no sizes): the files must be there and read
            if not (folder / "summary.json").is_file():
                return None, "summary.json is missing"
            if row["telemetry"] == "kept" and not _npz_ok(folder / "telemetry.npz"):
                return None, "telemetry.npz is missing or damaged"
        try:
            summary = json.loads((folder / "summary.json").read_bytes().decode("utf-8"))
        except (OSError, ValueError):
            return None, "summary.json is missing or unreadable"
        if not isinstance(summary, dict):
            return None, "summary.json is not a mapping"
        if row["telemetry"] == "kept" and not (folder / "telemetry.npz").is_file():
            return None, "telemetry.npz is missing"
        return row, ""
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})"


def _row_problem(row: dict[str, Any], trial: Trial, campaign: Campaign) -> str:
    """What is wrong with a trial record's row ('' when nothing)."""
    want = {"trial": str, "cell": str, "status": str, "verdict": str, "failed_gates": str, "message": str,
            "metrics": dict, "path": str, "telemetry": str}
    for k, typ in want.items():
        if k not in row:
            return f"no {k}"
        if not isinstance(row[k], typ):
            return f"{k} is {type(row[k]).__name__}, not {typ.__name__}"
    if row["trial"] != trial.trial_id or row["path"] != str(Path("trials") / trial.trial_id):
        return f"the record of another trial ({row['trial']!r})"
    if row["verdict"] not in VERDICTS:
        return f"verdict {row['verdict']!r} (allowed: {', '.join(VERDICTS)})"
    if row["telemetry"] not in TELEMETRY_STATES:
        return f"telemetry {row['telemetry']!r}"
    for k in ("sim_s", "rt_factor", "loop_s", "trial_s", "overhead_s", "encode_s"):
        v = row.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            return f"{k} is {type(v).__name__}, not a number"
    for m in row["metrics"]:
        if not isinstance(m, str):
            return "a metric name that is not a string"
    for k in ("sample", "repeat", "seed"):
        if not isinstance(row.get(k), int) or isinstance(row.get(k), bool):
            return f"{k} is not an integer"
    return ""


def _npz_ok(path: Path) -> bool:
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            return zf.testzip() is None
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return False


def _clear_for_folder(out: Path, trial_id: str) -> None:
    """Remove stray files where the trial's folder (or its cell's) belongs (a damaged campaign folder)."""
    p = out / "trials"
    for part in Path(trial_id).parts:
        p = p / part
        if p.exists() and not p.is_dir():
            p.unlink()


def run_campaign(
    campaign: Campaign,
    out_root: str | Path = "campaigns",
    executor: Any = None,
    *,
    progress: TextIO | None = sys.stderr,
    figures: bool = True,
    fresh: bool = False,
    started: float | None = None,
    max_hours: float | None = DEFAULT_MAX_HOURS,
    check_disk: bool = True,
    worker: TrialWorker | None = None,
) -> CampaignReport:
    """Run (or resume) ``campaign`` into ``<out_root>/<campaign.name>/``.

    The campaign folder is a transaction like a run folder: one driver at a time (an exclusive lock), each
    trial recorded by its ``trial.json``, written last, with the sizes of the trial's files; a rerun
    checks every record and runs again the trials whose records are damaged (and says which), and the
    results table and summary are rebuilt from the records.

    Args:
        campaign: from :func:`sim.campaign.spec.load_campaign`.
        out_root: parent of the campaign's folder.
        executor: from :func:`sim.campaign.executors.make_executor` (default: a local pool on every core);
            closed at the end when created here.
        progress: where the progress bar and the messages go (None: no output).
        figures: write the figures.
        fresh: delete the campaign's folder first (no resume).
        started: ``time.perf_counter()`` when the campaign started (e.g. before the executor was made, so
            its start-up counts in the wall time); default: now.
        max_hours: refuse a campaign whose estimated wall time is longer (None: no limit).
        check_disk: refuse a campaign whose estimated disk (records + telemetry budget) exceeds the free space.
        worker: what runs each trial (:class:`TrialWorker`; default: the trial's scenario run as
            ``dockbench.run`` runs it, :func:`sim.campaign.trial.run_trial`).

    Raises:
        ScenarioError: a cell's scenario does not validate (checked before any trial runs; the message
            names the scenario key and the trial's overrides).
        DockbenchError: the folder is in use by another driver or unusable, the estimates exceed the budget,
            or the disk filled up (the trials that fitted are recorded; rerun to resume).
    """
    from dockbench.sim.campaign.executors import available_cores, make_executor
    from dockbench.sim.campaign.spec import check_tree
    from dockbench.telemetry.run import write_json

    def say(text: str) -> None:
        if progress is not None:
            progress.write(text + "\n")
            progress.flush()

    check_tree(campaign.set, campaign.file, "set")  # --set values too (a recursive or deep YAML value)
    workers = getattr(executor, "workers", None) or available_cores()
    est = estimate(campaign, workers)
    if max_hours is not None and est["hours"] > max_hours:
        raise DockbenchError(
            f"{campaign.file}: {campaign.n_trials} trials would take ≈ {est['hours']:.1f} h on {workers} worker(s) "
            f"(≈ {TRIAL_FIXED_S + TRIAL_S_PER_SIM_S * est['sim_s_per_trial']:.2f} s a trial for "
            f"{est['sim_s_per_trial']:g} s simulated{'' if est['sim_s_per_trial'] != ASSUMED_SIM_S else ', assumed'}), "
            f"more than the {max_hours:g} h budget; lower samples, repeats "
            "or the grid, or raise the budget (--max-hours)")
    out_root = Path(out_root)
    out = out_root / campaign.name
    _prepare_folder(out_root, out)
    lock = CampaignLock(out)
    lock.acquire()
    try:
        return _run_locked(campaign, out, executor, progress, figures, fresh, started, check_disk, est, say,
                           make_executor, write_json, worker or TrialWorker())
    finally:
        lock.release()


def _run_locked(campaign: Campaign, out: Path, executor: Any, progress: TextIO | None, figures: bool, fresh: bool,
                started: float | None, check_disk: bool, est: dict[str, Any], say: Any, make_executor: Any,
                write_json: Any, worker: TrialWorker) -> CampaignReport:
    if fresh:
        for p in out.iterdir():
            if p.name == LOCK_FILE:
                continue
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        (out / "trials").mkdir(exist_ok=True)
    try:
        shutil.copyfile(campaign.file, out / "campaign.yaml")
    except OSError as exc:
        raise DockbenchError(f"{out}: cannot write campaign.yaml: {exc.strerror or exc}") from None

    if campaign.n_trials > 100_000:
        say(f"expanding {campaign.n_trials} trials …")
    trials = campaign.trials()
    bases = {p: _read_base(p) for p in {t.base for t in trials}}
    first = _validate_cells(trials, campaign, bases, progress)

    rows: dict[int, dict[str, Any]] = {}
    pending: list[Trial] = []
    digests = {}
    damaged: dict[str, str] = {}
    kept_bytes = 0
    for t in trials:
        digests[t.index] = d = worker.digest(t, bases[t.base])
        folder = out / "trials" / t.trial_id
        row, why = _check_record(folder, t, d, campaign)
        if row is not None:
            rows[t.index] = row
            tel = folder / "telemetry.npz"
            if row["telemetry"] == "kept" and tel.is_file():
                kept_bytes += tel.stat().st_size
            continue
        if why:
            damaged[t.trial_id] = why
        pending.append(t)
    skipped = len(rows)
    if damaged:
        listed = "; ".join(f"{k}: {v}" for k, v in list(damaged.items())[:5])
        say(f"{len(damaged)} trial record(s) damaged, run again: {listed}"
            + (f"; … {len(damaged) - 5} more" if len(damaged) > 5 else ""))
    budget = campaign.telemetry_budget_mb * 1e6
    from dockbench.sim.campaign.executors import available_cores

    workers = getattr(executor, "workers", None) or available_cores()
    est = estimate(campaign, workers, first, len(pending))
    est["disk_mb"] = (len(pending) * RECORD_BYTES
                      + (0.0 if campaign.telemetry == "none" else max(0.0, budget - kept_bytes))) / 1e6
    est["free_mb"] = _free_mb(out)
    if pending:
        free = "" if est["free_mb"] is None else f" ({est['free_mb']:.0f} MB free)"
        say(f"{len(pending)} of {len(trials)} trials to run: ≈ {_fmt_s(est['hours'] * 3600)} on {workers} worker(s), "
            f"≤ {est['disk_mb']:.0f} MB of disk{free}")
        if check_disk and est["free_mb"] is not None and est["disk_mb"] > est["free_mb"]:
            raise DockbenchError(
                f"{out}: the campaign may need ≈ {est['disk_mb']:.0f} MB ({len(pending)} trials × "
                f"{RECORD_BYTES // 1000} kB of records + up to {max(0.0, budget - kept_bytes) / 1e6:.0f} MB of "
                f"telemetry) and {est['free_mb']:.0f} MB are free; free space, lower telemetry_budget_mb (or "
                "--telemetry none), or pass --no-disk-check")
    # full: a trial's telemetry did not fit; later tasks then skip the compression (budget_ids: the trials
    # sent without it, labelled "over budget" when the policy would have kept theirs)
    state = {"kept": kept_bytes, "dropped": 0, "full": kept_bytes >= budget, "budget_ids": set()}

    own = executor is None
    t_start = time.perf_counter() if started is None else started
    load_start = _load_avg()
    ran = 0
    ran_ids: set[str] = set()
    interrupted = False
    disk_error = ""
    if pending:
        if executor is None:
            executor = make_executor("local")
        bar = Progress(len(trials), skipped, executor.workers, executor.name, progress)
        bar.failed = sum(r["verdict"] != "PASS" for r in rows.values())  # the finished trials' failures count too
        bar.errors = sum(r["status"] in ("error", "invalid") for r in rows.values())
        bar.update()
        by_id = {t.trial_id: t for t in pending}

        def tasks() -> Iterator[TrialTask]:
            for t in pending:
                keep = "none" if state["full"] else campaign.telemetry
                if state["full"] and campaign.telemetry != "none":
                    state["budget_ids"].add(t.trial_id)
                task = TrialTask(t.trial_id, t.scenario_data(bases[t.base]), str(t.base), keep)
                yield task if worker.task is None else worker.task(task)

        try:
            for res in executor.run(tasks(), worker.fn):
                t = by_id[res.trial_id]
                if res.status in UNFINISHED:
                    interrupted = True
                    break
                try:
                    rows[t.index] = _write_trial(out, t, res, campaign, digests[t.index], state, budget)
                except OSError as exc:  # a full disk, a folder gone read-only: stop, keep what was written
                    _unlink_quietly(out / "trials" / t.trial_id / "trial.json")
                    disk_error = f"{exc.strerror or exc} (writing {t.trial_id})"
                    interrupted = True
                    break
                ran += 1
                ran_ids.add(t.trial_id)
                bar.update(res)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            bar.finish()
            if own:
                executor.close()
    wall = time.perf_counter() - t_start
    ordered = [rows[i] for i in sorted(rows)]
    summary = _summary(campaign, ordered, trials, out, wall, ran_ids, skipped, executor, load_start, state,
                       interrupted)
    summary["damaged"] = damaged
    summary["estimate"] = est
    mixed = mixed_paths_warning(summary["kernels"])
    if mixed:
        say(f"{out}: {mixed}")
    summary["timing"]["worker_restarts"] = getattr(executor, "restarts", 0)
    files: list[Path] = []
    try:
        from dockbench.telemetry.log import atomic_write_text

        atomic_write_text(out / "results.csv", results_csv(ordered, campaign))
        write_json(out / "summary.json", summary)
        if figures and ordered and not interrupted:
            from dockbench.sim.campaign.figures import campaign_figures

            files = campaign_figures(campaign, ordered, summary, out)
    except OSError as exc:
        disk_error = disk_error or f"{exc.strerror or exc} (writing results.csv, summary.json or the figures)"
    if disk_error:
        raise DockbenchError(
            f"{out}: {disk_error}: the campaign stopped; {len(ordered)} of {len(trials)} trials are recorded in "
            "trials/ (results.csv and summary.json hold them if they fitted); free space and rerun the same "
            "command to resume")
    return CampaignReport(out, ordered, summary, ran, skipped, interrupted, files, damaged, est)


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _write_trial(out: Path, t: Trial, res: TrialResult, campaign: Campaign, digest: str, state: dict[str, Any],
                 budget: float) -> dict[str, Any]:
    """Write one trial's folder (trial.json last) and return its row."""
    from dockbench.telemetry.log import atomic_write_text
    from dockbench.telemetry.run import write_json

    folder = out / "trials" / t.trial_id
    _clear_for_folder(out, t.trial_id)
    folder.mkdir(parents=True, exist_ok=True)
    for stale in ("trial.json", "telemetry.npz", "error.txt", "summary.json", "meta.json"):
        p = folder / stale
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)
    telemetry = "none"
    if res.telemetry is not None:
        if state["kept"] + len(res.telemetry) <= budget:
            _atomic_bytes(folder / "telemetry.npz", res.telemetry)
            state["kept"] += len(res.telemetry)
            telemetry = "kept"
        else:
            state["dropped"] += 1
            state["full"] = True
            telemetry = "over budget"
    elif t.trial_id in state["budget_ids"] and (campaign.telemetry == "all" or res.verdict != "PASS"):
        state["dropped"] += 1
        telemetry = "over budget"
    if res.summary:
        write_json(folder / "summary.json", {**res.summary, "trial": {"id": t.trial_id, "cell": t.cell,
                                                                    "params": t.params, "seed": t.seed}})
    else:  # invalid or error before the run: the summary says why
        write_json(folder / "summary.json", {"scenario": None, "status": res.status, "message": res.message,
                                             "verdict": res.verdict, "gates": [], "metrics": {},
                                             "trial": {"id": t.trial_id, "cell": t.cell, "params": t.params,
                                                       "seed": t.seed}})
    if res.meta:
        write_json(folder / "meta.json", res.meta)
    if res.error:
        atomic_write_text(folder / "error.txt", res.error)
    row = _row(t, res, campaign, str(Path("trials") / t.trial_id), telemetry)
    files = {p.name: p.stat().st_size for p in sorted(folder.iterdir())
             if p.is_file() and p.name != "trial.json" and not p.name.endswith(".tmp")}
    write_json(folder / "trial.json", {"digest": digest, "row": row, "files": files, "cache_hit": res.cache_hit,
                                       "timing": res.timing})
    return row


def _summary(campaign: Campaign, rows: list[dict[str, Any]], trials: list[Trial], out: Path, wall: float,
             ran_ids: set[str], skipped: int, executor: Any, load_start: list[float] | None, state: dict[str, Any],
             interrupted: bool) -> dict[str, Any]:
    sum_loop = float(sum(r["loop_s"] for r in rows if r.get("loop_s") is not None))
    workers = getattr(executor, "workers", 1) if executor is not None else 1
    passed = sum(r["verdict"] == "PASS" for r in rows)
    ci = wilson_interval(passed, len(rows)) if rows else None
    # the timing of this session's trials only (resumed ones were timed in their own session)
    ran = len(ran_ids)
    sess = [r for r in rows if r["trial"] in ran_ids and r.get("loop_s") is not None]
    sess_loop = float(sum(r["loop_s"] for r in sess))
    ideal = sess_loop / workers if workers else None
    timed = [r for r in sess if r.get("overhead_s") is not None and r.get("trial_s")]
    overheads = [r["overhead_s"] for r in timed]
    trial_s = [r["trial_s"] for r in timed]
    return {
        "campaign": campaign.name,
        "description": campaign.description,
        "file": str(campaign.file),
        "trials": len(trials),
        "finished": len(rows),
        "interrupted": interrupted,
        "passed": passed,
        "success_rate": passed / len(rows) if rows else None,
        "wilson95": list(ci) if ci else None,
        "statuses": {s: sum(r["status"] == s for r in rows) for s in sorted({r["status"] for r in rows})},
        "kernels": kernel_counts(rows),
        "timing": {
            "executor": getattr(executor, "name", None),
            "workers": workers,
            "ran": ran,
            "skipped": skipped,
            "wall_s": wall,
            "sum_loop_s": sess_loop,
            "wall_over_ideal": (wall / ideal) if ran and ideal else None,
            "median_trial_s": quantiles(trial_s)["median"],
            "median_overhead_s": quantiles(overheads)["median"],
            "median_overhead_share": quantiles([o / s for o, s in zip(overheads, trial_s, strict=True) if s])["median"],
            "sum_loop_all_s": sum_loop,
            "load_avg_start": load_start,
            "load_avg_end": _load_avg(),
            "cores": os.cpu_count(),
        },
        "telemetry": {
            "policy": campaign.telemetry,
            "budget_mb": campaign.telemetry_budget_mb,
            "kept": sum(r.get("telemetry") == "kept" for r in rows),
            "kept_mb": state["kept"] / 1e6,
            "over_budget": sum(r.get("telemetry") == "over budget" for r in rows),
        },
        "disk_mb": _folder_bytes(out) / 1e6,
        # trial folders of an earlier version of the campaign (not in results.csv; --fresh removes them)
        "stale_trials": len({p.parent for p in (out / "trials").glob("*/*/trial.json")}
                            - {out / "trials" / t.trial_id for t in trials}),
        "metrics": list(campaign.metrics),
        "variants": [v.name for v in campaign.variants],
        "axes": [
            {"name": a.name, "keys": list(a.keys), "values": [list(v) for v in a.values], "labels": list(a.labels),
             "random": a.random, "dist": a.dist, "params": a.params, "seed": a.seed if a.random else None}
            for a in campaign.axes
        ],
        "samples": campaign.samples,
        "repeats": campaign.repeats,
        "seed": campaign.seed,
        "cells": summarise(rows, campaign),
    }


def check_output(out: Path) -> None:
    """Raise if ``out`` is not a campaign folder (for tools that read one)."""
    if not (out / "results.csv").is_file():
        raise DockbenchError(f"{out}: not a campaign folder (no results.csv)")
