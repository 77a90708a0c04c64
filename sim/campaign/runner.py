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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml
from dockbench.sim.campaign.spec import Campaign, Trial
from dockbench.sim.campaign.stats import quantiles, wilson_interval
from dockbench.sim.campaign.trial import TrialResult, TrialTask
from dockbench.sim.errors import DockbenchError, ScenarioError

#: results.csv columns that depend on the machine, the executor or the order (everything else is the
#: same bit for bit whatever runs the campaign)
VOLATILE_COLUMNS = ("telemetry", "rt_factor", "loop_s", "trial_s", "overhead_s", "worker")
#: statuses of a trial that did not finish (not recorded: a rerun runs it again)
UNFINISHED = ("interrupted",)


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
    try:
        from dockbench.sim.yamlio import read_yaml_file
        data = read_yaml_file(path)  # sim/yamlio.py: the scenario files' rules
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioError(f"cannot read the scenario: {exc}", file=str(path)) from None
    if not isinstance(data, dict):
        raise ScenarioError("the scenario must be a YAML mapping", file=str(path))
    return data


def _cell_error(exc: ScenarioError, trial: Trial, campaign: Campaign) -> ScenarioError:
    """``exc`` with where in the campaign the trial's scenario came from."""
    over = ", ".join(f"{k}={v!r}" for k, v in trial.overrides.items() if k != "sim.seed")
    where = f" (trial {trial.trial_id} of {campaign.file}" + (f": {over}" if over else "") + ")"
    return ScenarioError(exc.detail + where, file=exc.file, key=exc.key)


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
               trial_s=trial_s, overhead_s=overhead, encode_s=t.get("encode_s"), worker=res.worker)
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
    tail = ["sim_s", "message", "path", "telemetry", "rt_factor", "loop_s", "trial_s", "overhead_s", "worker"]
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


def run_campaign(
    campaign: Campaign,
    out_root: str | Path = "campaigns",
    executor: Any = None,
    *,
    progress: TextIO | None = sys.stderr,
    figures: bool = True,
    fresh: bool = False,
    started: float | None = None,
) -> CampaignReport:
    """Run (or resume) ``campaign`` into ``<out_root>/<campaign.name>/``.

    Args:
        campaign: from :func:`sim.campaign.spec.load_campaign`.
        out_root: parent of the campaign's folder.
        executor: from :func:`sim.campaign.executors.make_executor` (default: a local pool on every core);
            closed at the end when created here.
        progress: where the progress bar goes (None: no output).
        figures: write the figures.
        fresh: delete the campaign's folder first (no resume).
        started: ``time.perf_counter()`` when the campaign started (e.g. before the executor was made, so
            its start-up counts in the wall time); default: now.

    Raises:
        ScenarioError: a cell's scenario does not validate (checked before any trial runs; the message
            names the scenario key and the trial's overrides).
    """
    from dockbench.sim.campaign.executors import make_executor
    from dockbench.sim.scenario import scenario_from_dict
    from dockbench.telemetry.run import write_json

    out = Path(out_root) / campaign.name
    if fresh and out.exists():
        shutil.rmtree(out)
    (out / "trials").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(campaign.file, out / "campaign.yaml")

    trials = campaign.trials()
    bases = {p: _read_base(p) for p in {t.base for t in trials}}
    # every cell's first trial is validated before anything runs (the others differ by random draws and seeds)
    checked: set[str] = set()
    for t in trials:
        if t.cell in checked:
            continue
        checked.add(t.cell)
        try:
            scenario_from_dict(t.scenario_data(bases[t.base]), file=str(t.base))
        except ScenarioError as exc:
            raise _cell_error(exc, t, campaign) from None

    rows: dict[int, dict[str, Any]] = {}
    pending: list[Trial] = []
    digests = {}
    kept_bytes = 0
    for t in trials:
        digests[t.index] = d = t.digest(bases[t.base])
        rec = out / "trials" / t.trial_id / "trial.json"
        if rec.is_file():
            try:
                saved = json.loads(rec.read_text())
            except (OSError, ValueError):
                saved = {}
            if saved.get("digest") == d and "row" in saved:
                rows[t.index] = saved["row"]
                tel = rec.parent / "telemetry.npz"
                if tel.is_file():
                    kept_bytes += tel.stat().st_size
                continue
        pending.append(t)
    skipped = len(rows)
    budget = campaign.telemetry_budget_mb * 1e6
    # full: a trial's telemetry did not fit; later tasks then skip the compression (budget_ids: the trials
    # sent without it, labelled "over budget" when the policy would have kept theirs)
    state = {"kept": kept_bytes, "dropped": 0, "full": kept_bytes >= budget, "budget_ids": set()}

    own = executor is None
    t_start = time.perf_counter() if started is None else started
    load_start = _load_avg()
    ran = 0
    ran_ids: set[str] = set()
    interrupted = False
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
                yield TrialTask(t.trial_id, t.scenario_data(bases[t.base]), str(t.base), keep)

        try:
            for res in executor.run(tasks()):
                t = by_id[res.trial_id]
                if res.status in UNFINISHED:
                    interrupted = True
                    break
                rows[t.index] = _write_trial(out, t, res, campaign, digests[t.index], state, budget)
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
    (out / "results.csv").write_text(results_csv(ordered, campaign))
    summary = _summary(campaign, ordered, trials, out, wall, ran_ids, skipped, executor, load_start, state,
                       interrupted)
    write_json(out / "summary.json", summary)
    files: list[Path] = []
    if figures and ordered and not interrupted:
        from dockbench.telemetry.campaign_plots import campaign_figures

        files = campaign_figures(campaign, ordered, summary, out)
    return CampaignReport(out, ordered, summary, ran, skipped, interrupted, files)


def _write_trial(out: Path, t: Trial, res: TrialResult, campaign: Campaign, digest: str, state: dict[str, Any],
                 budget: float) -> dict[str, Any]:
    """Write one trial's folder (trial.json last) and return its row."""
    from dockbench.telemetry.log import atomic_write_text
    from dockbench.telemetry.run import write_json

    folder = out / "trials" / t.trial_id
    folder.mkdir(parents=True, exist_ok=True)
    for stale in ("trial.json", "telemetry.npz", "error.txt"):
        (folder / stale).unlink(missing_ok=True)
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
    write_json(folder / "trial.json", {"digest": digest, "row": row, "cache_hit": res.cache_hit,
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
