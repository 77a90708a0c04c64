"""Gate verdicts: PASS / FAIL per gate, INCOMPLETE when the run stopped before its planner ended.

A gate is ``{metric, max?, min?, window?}`` (the scenario's ``gates:`` block, parsed into
``sim.scenario.GateSpec``; names are checked against :data:`telemetry.metrics.METRICS` at load time
by :func:`check_metric_name`). Bounds are inclusive: PASS iff ``min ≤ value ≤ max``.

* A metric the run could not compute (e.g. a docking metric without a drogue), or a NaN value, FAILs
  with the reason.
* ``window`` [s] (optional) recomputes the metric over a final window of that length instead of the
  default 1 s; it needs the run's channels and meta (:func:`evaluate_gates` ``channels=``/``meta=``).
* The overall verdict is INCOMPLETE when the run is incomplete (shorter than its planner, diverged or
  interrupted: :func:`run_is_complete`), else FAIL if any gate fails, else PASS (no gates → PASS).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sim.errors import ScenarioError

Verdict = Literal["PASS", "FAIL", "INCOMPLETE"]
VERDICTS: tuple[str, ...] = ("PASS", "FAIL", "INCOMPLETE")


@dataclass(frozen=True)
class Gate:
    """One gate: ``min ≤ metric ≤ max`` (either bound may be None), optional final ``window`` [s]."""

    metric: str
    max: float | None = None
    min: float | None = None
    window: float | None = None

    @classmethod
    def from_spec(cls, spec: Any) -> Gate:
        """From a ``GateSpec``-like object or a dict with keys metric/max/min[/window]."""
        if isinstance(spec, Gate):
            return spec
        get = spec.get if isinstance(spec, dict) else (lambda k, d=None: getattr(spec, k, d))
        return cls(metric=get("metric"), max=get("max", None), min=get("min", None),
                   window=get("window", None))

    def validate(self) -> None:
        """Raise :class:`ScenarioError` for an unknown metric or a gate without bounds."""
        check_metric_name(self.metric)
        if self.max is None and self.min is None:
            raise ScenarioError("a gate needs max and/or min", key="max")
        if self.window is not None and not self.window > 0:
            raise ScenarioError(f"must be > 0, got {self.window}", key="window")


@dataclass(frozen=True)
class GateResult:
    metric: str
    value: float | None
    min: float | None
    max: float | None
    verdict: Verdict
    reason: str = ""
    window: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dict(metric=self.metric, value=self.value, min=self.min, max=self.max,
                   verdict=self.verdict, reason=self.reason)
        if self.window is not None:
            out["window"] = self.window
        return out


def check_metric_name(name: str) -> None:
    """Raise :class:`ScenarioError` listing the known metric names if ``name`` is not one."""
    from telemetry.metrics import METRICS

    if name not in METRICS:
        raise ScenarioError(f"unknown metric {name!r}; known: {', '.join(sorted(METRICS))}", key="metric")


def run_is_complete(status: str, t_last: float, planner_duration: float, tol: float = 1e-9) -> bool:
    """A run is complete when it finished normally and its last sample is at or after the planner's end."""
    return status == "completed" and t_last >= planner_duration - tol


def _score(gate: Gate, value: Any) -> GateResult:
    lo, hi = gate.min, gate.max
    if value is None:
        return GateResult(gate.metric, None, lo, hi, "FAIL", "metric not available for this run", gate.window)
    value = float(value)
    if math.isnan(value):
        return GateResult(gate.metric, value, lo, hi, "FAIL", "metric is NaN", gate.window)
    if lo is not None and value < lo:
        return GateResult(gate.metric, value, lo, hi, "FAIL", f"{value:.6g} < min {lo}", gate.window)
    if hi is not None and value > hi:
        return GateResult(gate.metric, value, lo, hi, "FAIL", f"{value:.6g} > max {hi}", gate.window)
    return GateResult(gate.metric, value, lo, hi, "PASS", "", gate.window)


def evaluate_gates(
    gates: Any,
    metrics: dict[str, Any],
    complete: bool,
    *,
    channels: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> tuple[Verdict, list[GateResult]]:
    """Score ``metrics`` against ``gates`` (a sequence of GateSpec-like objects or dicts).

    Args:
        gates: objects or dicts with ``metric``, ``min``, ``max`` (and optionally ``window`` [s]).
        metrics: the run's metrics (:func:`telemetry.metrics.compute_metrics`).
        complete: False when the run ended before its planner (see :func:`run_is_complete`).
        channels, meta: the run's telemetry and metadata; needed only for gates with a ``window``.

    Returns:
        (overall verdict, per-gate results). Each gate of an incomplete run is INCOMPLETE; its
        ``reason`` still says what the value would have scored.
    """
    from telemetry.metrics import compute_metrics

    windowed: dict[float, dict[str, Any]] = {}
    results = []
    for spec in gates:
        gate = Gate.from_spec(spec)
        value = metrics.get(gate.metric)
        if gate.window is not None:
            if channels is None or meta is None:
                raise ScenarioError(
                    f"gate {gate.metric!r} has window={gate.window}; evaluate_gates needs channels= and meta="
                )
            if gate.window not in windowed:
                windowed[gate.window] = compute_metrics(channels, meta, window=gate.window)
            value = windowed[gate.window].get(gate.metric)
        r = _score(gate, value)
        if not complete:
            would = f"; would {r.verdict}" + (f" ({r.reason})" if r.reason else "")
            r = GateResult(r.metric, r.value, r.min, r.max, "INCOMPLETE",
                           "run ended before the planner" + would, r.window)
        results.append(r)
    if not complete:
        return "INCOMPLETE", results
    return ("FAIL" if any(r.verdict == "FAIL" for r in results) else "PASS"), results


def score_run(run_dir: str | Path, gates: Any = None) -> tuple[Verdict, list[GateResult]]:
    """Re-score a run folder from its telemetry alone (metrics recomputed).

    Args:
        run_dir: the run folder.
        gates: gate specs; default the gates of the scenario recorded in meta.json.
    """
    from telemetry.metrics import compute_metrics
    from telemetry.run import Run

    run = Run.load(run_dir)
    if gates is None:
        gates = (run.meta.get("scenario") or {}).get("gates") or []
    metrics = compute_metrics(run.channels, run.meta)
    return evaluate_gates(gates, metrics, run.complete, channels=run.channels, meta=run.meta)
