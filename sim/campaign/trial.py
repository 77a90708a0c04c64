"""One trial, run in a worker process (local pool, Ray or in-process): scenario → result record.

A worker keeps its imports and an :class:`~sim.model_cache.AssemblyCache` between trials, so a trial
pays for the compiled model only when its robot, tool, target or physics options are new to that worker.
It writes nothing: the record it returns (:class:`TrialResult`: the results-table row's data, the
summary and meta of the run, and the telemetry as compressed ``.npz`` bytes when the campaign keeps it)
is written by the driver, which is what lets a Ray worker on another machine run it.
"""

from __future__ import annotations

import io
import os
import socket
import time
import traceback
import zipfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: zlib level of the kept telemetry: level 1 compresses the float channels as well as 6 does (±0.3%)
#: at two thirds of the time (measured on iiwa14_docking: 6.9 → 4.2 MB)
NPZ_LEVEL = 1

_CACHE: Any = None  # the worker's AssemblyCache (created on the first trial)


@dataclass
class TrialTask:
    """What a worker needs for one trial (picklable, no paths it must read).

    Attributes:
        trial_id: the trial's folder under ``trials/``.
        scenario: the trial's scenario mapping (base file merged with every override).
        file: the base scenario file (for messages).
        keep: the telemetry policy (``all`` | ``failures`` | ``none``).
    """

    trial_id: str
    scenario: dict[str, Any]
    file: str
    keep: str = "failures"


@dataclass
class TrialResult:
    """A worker's record of one trial.

    Attributes:
        trial_id: as in the task.
        status: the run's status, or ``invalid`` (the scenario did not validate or could not be built)
            or ``error`` (an unexpected exception: ``error`` holds the traceback).
        verdict: PASS / FAIL / INCOMPLETE (FAIL for invalid and error).
        message: the run's message or the error.
        metrics, gates: the run's metrics and gate results.
        summary, meta: the run folder's summary.json and meta.json contents (JSON-ready).
        telemetry: the compressed ``telemetry.npz`` bytes, or None (not kept).
        timing: ``loop_s`` (the control loop's wall time), ``sim_s``, ``rt_factor``, ``trial_s`` (the whole
            trial in the worker), ``build_s``, ``score_s`` (metrics, gates, meta, records), ``encode_s``
            (compressing the telemetry) [s].
        worker: ``host:pid``; cache: the worker's assembly cache hit (True) or compile (False).
    """

    trial_id: str
    status: str
    verdict: str
    message: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    gates: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    telemetry: bytes | None = None
    timing: dict[str, float] = field(default_factory=dict)
    worker: str = ""
    cache_hit: bool = False
    error: str = ""


def encode_npz(channels: dict[str, np.ndarray], level: int = NPZ_LEVEL) -> bytes:
    """``channels`` as compressed ``.npz`` bytes (``np.load`` reads them; :data:`NPZ_LEVEL`)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=level) as zf:
        for name, arr in channels.items():
            with zf.open(f"{name}.npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, np.asarray(arr), allow_pickle=False)
    return buf.getvalue()


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def warm_up() -> str:
    """Import what every trial needs (a pool's initializer: workers import in parallel at start-up)."""
    import dockbench.sim.loop  # noqa: F401
    import dockbench.telemetry.gates  # noqa: F401
    import dockbench.telemetry.metrics  # noqa: F401
    from dockbench.sim.scenario import _registries

    _registries()
    return _worker_name()


def run_trial(task: TrialTask) -> TrialResult:
    """Run one trial (never raises for a trial's own failure: it is recorded)."""
    global _CACHE
    t0 = time.perf_counter()
    from dockbench.sim.errors import DockbenchError, InternalError, ScenarioError, SimulationDiverged
    from dockbench.sim.loop import build, run
    from dockbench.sim.model_cache import AssemblyCache
    from dockbench.sim.scenario import scenario_from_dict

    if _CACHE is None:
        _CACHE = AssemblyCache()
    worker = _worker_name()
    try:
        scenario = scenario_from_dict(task.scenario, file=task.file)
        hits = _CACHE.hits
        asm = _CACHE.get(scenario)
        setup = build(scenario, assembly=asm)
        cache_hit = _CACHE.hits > hits
    except ScenarioError as exc:
        return TrialResult(task.trial_id, "invalid", "FAIL", str(exc), worker=worker,
                           timing={"trial_s": time.perf_counter() - t0})
    except DockbenchError as exc:  # e.g. an unreachable start pose (ModelError)
        return TrialResult(task.trial_id, "invalid", "FAIL", f"{type(exc).__name__}: {exc}", worker=worker,
                           timing={"trial_s": time.perf_counter() - t0})
    except Exception as exc:  # noqa: BLE001 - recorded, the campaign goes on
        return TrialResult(task.trial_id, "error", "FAIL", f"{type(exc).__name__}: {exc}", worker=worker,
                           error=traceback.format_exc(), timing={"trial_s": time.perf_counter() - t0})
    t1 = time.perf_counter()
    try:
        try:
            result = run(scenario, out_root=None, setup=setup)
        except (SimulationDiverged, InternalError) as exc:  # recorded and scored up to the failing step
            result = exc.result
            if result is None:
                raise
        return trial_record(task, scenario, result, worker, cache_hit, t0, t1)
    except Exception as exc:  # noqa: BLE001
        return TrialResult(task.trial_id, "error", "FAIL", f"{type(exc).__name__}: {exc}", worker=worker,
                           error=traceback.format_exc(), timing={"trial_s": time.perf_counter() - t0})


def trial_record(task: TrialTask, scenario: Any, result: Any, worker: str, cache_hit: bool, t0: float,
                 t1: float) -> TrialResult:
    """The record of a trial whose run gave ``result`` (a :class:`~sim.loop.RunResult`, scored, no folder):
    its summary and meta, its telemetry as ``.npz`` bytes when ``task.keep`` keeps it, and its timing
    (``t0``: the trial's start, ``t1``: the loop's start, both ``time.perf_counter()``; ``loop_s`` is the
    run's own ``timing["wall_s"]``). Shared by :func:`run_trial` and dockbench.gym_campaign."""
    from dockbench.telemetry.run import _jsonable

    t2 = time.perf_counter()
    timing = result.timing
    loop_s = float(timing.get("wall_s", 0.0))
    summary = {
        "scenario": scenario.name,
        "status": result.status,
        "message": result.message,
        "verdict": result.verdict,
        "gates": result.gates,
        "metrics": result.metrics,
        "timing": timing,
        "controller": result.meta.get("controller_summary", {}),
    }
    out = TrialResult(
        task.trial_id, result.status, result.verdict, result.message, metrics=_jsonable(result.metrics),
        gates=_jsonable(result.gates), summary=_jsonable(summary), meta=_jsonable(result.meta),
        worker=worker, cache_hit=cache_hit, error=result.error if result.status == "error" else "",
    )
    keep = task.keep == "all" or (task.keep == "failures" and result.verdict != "PASS")
    t3 = time.perf_counter()
    if keep and result.telemetry:
        out.telemetry = encode_npz(result.telemetry)
    t4 = time.perf_counter()
    out.timing = {
        "loop_s": loop_s,
        "sim_s": float(timing.get("sim_s", 0.0)),
        "rt_factor": float(timing.get("real_time_factor", 0.0)),
        "build_s": t1 - t0,
        "score_s": (t2 - t1 - loop_s) + (t3 - t2),
        "encode_s": t4 - t3,
        "trial_s": t4 - t0,
    }
    return out
