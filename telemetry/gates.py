"""Gate verdicts: PASS / FAIL per gate, INCOMPLETE when the run stopped before its planner ended.

A gate is ``{metric, max?, min?, window?}`` (the scenario's ``gates:`` block, parsed into
``sim.scenario.GateSpec``; names are checked against :data:`telemetry.metrics.METRICS` at load time
by :func:`check_metric_name`). Bounds are inclusive: PASS iff ``min ≤ value ≤ max``.

* A metric the run could not compute (e.g. a docking metric without a drogue), or a NaN value, FAILs
  with the reason.
* ``window`` [s] (optional) recomputes the metric over a final window of that length instead of the
  default 1 s; it needs the run's channels and meta (:func:`evaluate_gates` ``channels=``/``meta=``).
* The overall verdict is INCOMPLETE when the run is incomplete (shorter than its planner, diverged or
  interrupted: :func:`run_is_complete`), else FAIL if any gate fails or the run is unstable, else PASS
  (no gates → PASS).

Seat gate. ``{metric: docking.depth}`` without ``min``/``max`` means *seated*: the tip within
``tolerance`` (default :data:`SEAT_TOLERANCE` = 1 mm) of the seat depth computed from the target
geometry (``meta["target_depth_total"]``, the mouth → seat distance of the drogue), i.e.
``seat − tolerance ≤ depth ≤ seat + tolerance``. Explicit ``min``/``max`` give absolute bounds as for any
metric.

Instability (:func:`detect_instability`, from telemetry alone; the loop marks such a run ``unstable``,
its verdict is FAIL and the CLI exits 2):

* sustained saturation: in some window of :data:`INSTABILITY_WINDOW` = 0.25 s at least
  :data:`INSTABILITY_SATURATION` = 90 % of the control steps clipped a joint torque
  (``safety.max_saturation_window``) — the actuators are pinned at their limits and the loop no longer
  controls the arm (a growing oscillation ends there);
* velocity runaway: a joint faster than :data:`INSTABILITY_VELOCITY` = 150 % of its velocity limit
  (``safety.joint_vel_use``) — no real arm gets there; the simulated one only when energy is being
  pumped into it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dockbench.sim.errors import ScenarioError

Verdict = Literal["PASS", "FAIL", "INCOMPLETE"]
VERDICTS: tuple[str, ...] = ("PASS", "FAIL", "INCOMPLETE")

#: metric whose gate without bounds is the seat gate (module docstring)
SEAT_METRIC = "docking.depth"
#: default distance [m] from the seat depth within which a docking counts as seated
SEAT_TOLERANCE = 0.001
#: instability detector (module docstring): window [s], saturated share [%], joint speed [% of limit]
INSTABILITY_WINDOW = 0.25
INSTABILITY_SATURATION = 90.0
INSTABILITY_VELOCITY = 150.0


@dataclass(frozen=True)
class Gate:
    """One gate: ``min ≤ metric ≤ max`` (either bound may be None), optional final ``window`` [s]; the
    seat gate (``docking.depth`` without bounds) takes its bounds from the seat depth ± ``tolerance``."""

    metric: str
    max: float | None = None
    min: float | None = None
    window: float | None = None
    tolerance: float | None = None

    @classmethod
    def from_spec(cls, spec: Any) -> Gate:
        """From a ``GateSpec``-like object or a dict with keys metric/max/min[/window/tolerance]."""
        if isinstance(spec, Gate):
            return spec
        get = spec.get if isinstance(spec, dict) else (lambda k, d=None: getattr(spec, k, d))
        return cls(metric=get("metric"), max=get("max", None), min=get("min", None),
                   window=get("window", None), tolerance=get("tolerance", None))

    @property
    def is_seat_gate(self) -> bool:
        """``docking.depth`` without explicit bounds: seated within ``tolerance`` of the seat."""
        return self.metric == SEAT_METRIC and self.max is None and self.min is None

    def bounds(self, meta: dict[str, Any] | None) -> tuple[float | None, float | None]:
        """(min, max) to score against: the explicit ones, or seat ± tolerance for the seat gate (None,
        None when the run has no seat depth in ``meta``)."""
        if not self.is_seat_gate:
            return self.min, self.max
        seat = (meta or {}).get("target_depth_total")
        if seat is None:
            return None, None
        tol = SEAT_TOLERANCE if self.tolerance is None else self.tolerance
        return float(seat) - tol, float(seat) + tol

    def validate(self) -> None:
        """Raise :class:`ScenarioError` for an unknown metric, a gate without bounds (other than the seat
        gate) or a tolerance on a gate that is not the seat gate."""
        check_metric_name(self.metric)
        if self.max is None and self.min is None and self.metric != SEAT_METRIC:
            raise ScenarioError(
                f"a gate needs max and/or min (only {SEAT_METRIC} may omit both: then it is the seat gate, "
                f"seated within tolerance = {SEAT_TOLERANCE} m of the seat)",
                key="max",
            )
        if self.window is not None and not self.window > 0:
            raise ScenarioError(f"must be > 0, got {self.window}", key="window")
        if self.tolerance is not None:
            if not self.is_seat_gate:
                raise ScenarioError(
                    f"tolerance applies only to the seat gate ({SEAT_METRIC} without min and max)", key="tolerance"
                )
            if not self.tolerance > 0:
                raise ScenarioError(f"must be > 0 m, got {self.tolerance}", key="tolerance")


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
    from dockbench.telemetry.metrics import METRICS

    if name not in METRICS:
        raise ScenarioError(f"unknown metric {name!r}; known: {', '.join(sorted(METRICS))}", key="metric")


ENDED_STATUSES = ("completed", "seated")
"""The statuses of a run the loop ended as planned: at the plan's end (``completed``) or by ``sim.end_after_seated``
(``seated``). ``unstable`` is given after the loop to such a run that :func:`detect_instability` flags."""

SIMULATED_STATUSES = ENDED_STATUSES + ("unstable",)
"""The statuses of a run simulated to its end (the plan's, or the seat rule's), under control or not."""


def run_is_complete(status: str, t_last: float, planner_duration: float, tol: float = 1e-9) -> bool:
    """A run is complete when it ran to its end (``completed``, or ``unstable``: simulated to the end but
    flagged by :func:`detect_instability`) and its last sample is at or after the planner's end, or when
    ``sim.end_after_seated`` ended it (``seated``: the tip held the seat, whenever the plan would have ended)."""
    if status == "seated":
        return True
    return status in SIMULATED_STATUSES and t_last >= planner_duration - tol


@dataclass(frozen=True)
class Instability:
    """What :func:`detect_instability` found: ``kind`` (``saturation`` | ``velocity``), the time [s] it
    was first seen, the value [%] and a message for the user."""

    kind: str
    t: float
    value: float
    message: str


def window_share(flags: Any, t: Any, window: float = INSTABILITY_WINDOW) -> tuple[float, float]:
    """(largest share [%] of flagged steps — e.g. torque-saturated ones — over any ``window`` [s] of
    consecutive steps, time [s] at the end of that window). Runs shorter than the window use the whole run."""
    import numpy as np

    x = np.asarray(flags, dtype=float)
    t = np.asarray(t, dtype=float)
    n = len(x)
    if n == 0:
        return 0.0, 0.0
    dt = float(t[1] - t[0]) if n > 1 else window
    k = max(1, min(n, int(round(window / dt))))
    c = np.concatenate(([0.0], np.cumsum(x)))
    share = (c[k:] - c[:-k]) / k
    i = int(np.argmax(share))
    return float(100.0 * share[i]), float(t[i + k - 1])


def detect_instability(ch: dict[str, Any], meta: dict[str, Any]) -> Instability | None:
    """Sustained saturation or velocity runaway in a run's telemetry (module docstring), else None."""
    import numpy as np

    if len(ch.get("t", ())) == 0:
        return None
    share, t_end = window_share(ch["saturated"], ch["t"])
    if share >= INSTABILITY_SATURATION:
        return Instability(
            "saturation", t_end, share,
            f"unstable: {share:.0f} % of the control steps in the {INSTABILITY_WINDOW} s before t = {t_end:.3f} s "
            f"clipped a joint torque (sustained saturation ≥ {INSTABILITY_SATURATION:.0f} %): the actuators are "
            "pinned at their limits and the controller no longer controls the arm; check the controller gains "
            "(stiffness, damping, force-feedback gain)",
        )
    v_max = np.asarray(meta.get("v_max", []), dtype=float)
    v = np.abs(np.asarray(ch["v"], dtype=float))
    ok = np.isfinite(v_max) & (v_max > 0)
    if v.size and np.any(ok):
        use = 100.0 * v[:, ok] / v_max[ok]
        over = np.flatnonzero(np.max(use, axis=1) >= INSTABILITY_VELOCITY)
        if over.size:
            i = int(over[0])
            value = float(np.max(use[i]))
            return Instability(
                "velocity", float(ch["t"][i]), value,
                f"unstable: a joint reached {value:.0f} % of its velocity limit at t = {float(ch['t'][i]):.3f} s "
                f"(runaway ≥ {INSTABILITY_VELOCITY:.0f} %): energy is being pumped into the arm",
            )
    return None


def _score(gate: Gate, value: Any, meta: dict[str, Any] | None = None) -> GateResult:
    lo, hi = gate.bounds(meta)
    if value is None:
        return GateResult(gate.metric, None, lo, hi, "FAIL", "metric not available for this run", gate.window)
    value = float(value)
    if math.isnan(value):
        return GateResult(gate.metric, value, lo, hi, "FAIL", "metric is NaN", gate.window)
    if gate.is_seat_gate:
        if lo is None:
            return GateResult(gate.metric, value, lo, hi, "FAIL", "the target has no seat depth", gate.window)
        seat = (lo + hi) / 2.0
        tol = (hi - lo) / 2.0
        gap = seat - value
        if abs(gap) > tol:
            where = "short of" if gap > 0 else "past"
            return GateResult(
                gate.metric, value, lo, hi, "FAIL",
                f"not seated: tip {abs(gap) * 1e3:.3g} mm {where} the seat at {seat:.6g} m "
                f"(tolerance {tol * 1e3:g} mm)",
                gate.window,
            )
        return GateResult(gate.metric, value, lo, hi, "PASS", "", gate.window)
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
    unstable: bool = False,
) -> tuple[Verdict, list[GateResult]]:
    """Score ``metrics`` against ``gates`` (a sequence of GateSpec-like objects or dicts).

    Args:
        gates: objects or dicts with ``metric``, ``min``, ``max`` (and optionally ``window`` [s],
            ``tolerance`` [m] for the seat gate).
        metrics: the run's metrics (:func:`telemetry.metrics.compute_metrics`).
        complete: False when the run ended before its planner (see :func:`run_is_complete`).
        channels, meta: the run's telemetry and metadata; needed for gates with a ``window`` (both) and
            for the seat gate (``meta``: the seat depth).
        unstable: the run was flagged by :func:`detect_instability`: a complete run then FAILs whatever
            its gates say.

    Returns:
        (overall verdict, per-gate results). Each gate of an incomplete run is INCOMPLETE; its
        ``reason`` still says what the value would have scored.
    """
    from dockbench.telemetry.metrics import compute_metrics

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
        if gate.is_seat_gate and meta is None:
            raise ScenarioError(f"gate {gate.metric!r} is the seat gate; evaluate_gates needs meta= (the seat depth)")
        r = _score(gate, value, meta)
        if not complete:
            would = f"; would {r.verdict}" + (f" ({r.reason})" if r.reason else "")
            r = GateResult(r.metric, r.value, r.min, r.max, "INCOMPLETE",
                           "run ended before the planner" + would, r.window)
        results.append(r)
    if not complete:
        return "INCOMPLETE", results
    return ("FAIL" if unstable or any(r.verdict == "FAIL" for r in results) else "PASS"), results


def score_run(run_dir: str | Path, gates: Any = None) -> tuple[Verdict, list[GateResult]]:
    """Re-score a run folder from its telemetry alone (metrics recomputed).

    Args:
        run_dir: the run folder.
        gates: gate specs; default the gates of the scenario recorded in meta.json.
    """
    from dockbench.telemetry.metrics import compute_metrics
    from dockbench.telemetry.run import Run

    run = Run.load(run_dir)
    if gates is None:
        gates = (run.meta.get("scenario") or {}).get("gates") or []
    metrics = compute_metrics(run.channels, run.meta)
    unstable = detect_instability(run.channels, run.meta) is not None
    return evaluate_gates(gates, metrics, run.complete, channels=run.channels, meta=run.meta, unstable=unstable)
