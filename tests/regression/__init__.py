"""Regression suite support: gated-scenario discovery, the baseline file and the drift comparison.

``tests/regression/baseline.json``::

    {
      "_doc": "...",
      "tolerances": {"<metric>": {"rel": r, "abs": a}, ..., "default": {...}},
      "scenarios": {"<scenario name>": {"file": "scenarios/x.yaml", "metrics": {"<metric>": value}}}
    }

A metric passes when ``|value − baseline| ≤ abs + rel · |baseline|`` (the form of ``numpy.isclose``),
with the metric's own tolerance (or ``default``). Refresh the values on purpose with
``python -m tests.regression.refresh_baseline`` (tolerances are kept; see that module).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from dockbench.telemetry.metrics import HEADLINE_METRICS

REPO = Path(__file__).resolve().parent.parent.parent
SCENARIOS_DIR = REPO / "scenarios"
BASELINE_PATH = Path(__file__).resolve().parent / "baseline.json"
REFRESH_COMMAND = "python -m tests.regression.refresh_baseline"

#: Metrics recorded in the baseline for every gated scenario (when the run computes them), besides
#: the scenario's own gated metrics.
KEY_METRICS: tuple[str, ...] = (
    *HEADLINE_METRICS,
    "tracking.pos_peak",
    "tracking.rot_rms_deg",
    "tracking.max_segment_pos_rms",
    "tracking.max_segment_pos_peak",
    "safety.joint_pos_use",
    "safety.joint_vel_use",
    "safety.min_manipulability",
    "safety.saturation_ratio",
    "hand.max_preset_error",
    "hand.max_penetration",
)


#: Tolerances written for a metric that has none in baseline.json yet (then curated in the file).
#: Each is (rel, abs): a drift fails when |value − baseline| > abs + rel·|baseline|. The absolute parts
#: are small against the gates but above cross-machine floating-point noise.
DEFAULT_TOLERANCES: dict[str, dict[str, float]] = {
    "default": {"rel": 0.05, "abs": 1e-9},
    "docking.depth": {"rel": 0.01, "abs": 2e-4},              # m
    "docking.lateral": {"rel": 0.25, "abs": 2e-5},            # m
    "docking.tilt_deg": {"rel": 0.10, "abs": 0.02},           # deg
    "docking.phase_deg": {"rel": 0.10, "abs": 0.02},          # deg (as the tilt: a lug angle in its V)
    "insertion.attempts": {"rel": 0.0, "abs": 0.5},           # count: any other number of attempts is a change
    "contact.peak_force_truth": {"rel": 0.10, "abs": 0.2},    # N: peak force ±10 %
    "contact.peak_force_ft": {"rel": 0.10, "abs": 0.2},       # N
    "contact.steady_axial_force_truth": {"rel": 0.10, "abs": 0.2},  # N
    "contact.max_contacts": {"rel": 0.0, "abs": 2.0},         # count
    "tracking.pos_rms": {"rel": 0.10, "abs": 5e-6},           # m
    "tracking.pos_peak": {"rel": 0.10, "abs": 1e-5},          # m
    "tracking.rot_rms_deg": {"rel": 0.10, "abs": 1e-4},       # deg
    "tracking.max_segment_pos_rms": {"rel": 0.10, "abs": 5e-6},   # m
    "tracking.max_segment_pos_peak": {"rel": 0.10, "abs": 1e-5},  # m
    "safety.joint_pos_use": {"rel": 0.02, "abs": 0.5},        # %
    "safety.joint_vel_use": {"rel": 0.05, "abs": 0.5},        # %
    "safety.min_manipulability": {"rel": 0.02, "abs": 1e-3},
    "safety.saturation_ratio": {"rel": 0.10, "abs": 0.5},     # %
    "hand.max_preset_error": {"rel": 0.10, "abs": 1e-3},      # rad
    "hand.max_penetration": {"rel": 0.10, "abs": 1e-4},       # m
    # counts of events in a stiff, rattling contact: a few either way on another CPU's round-off
    "contact.force_spikes_truth": {"rel": 0.5, "abs": 3.0},
    "contact.on_off_toggles_truth": {"rel": 0.5, "abs": 15.0},
    # the same at rest in the seat (0 on every shipped FR3 docking at dt, dt/2, dt/4; their gates allow 3)
    "contact.steady_force_spikes_truth": {"rel": 0.5, "abs": 2.0},
    "contact.max_spike_share_truth": {"rel": 0.5, "abs": 3.0},  # % of 100 steps: a few spikes either way
    "contact.steady_on_off_toggles_truth": {"rel": 0.5, "abs": 2.0},
    "controller.qp_share": {"rel": 0.2, "abs": 0.2},          # %
    # in orbit (issue 19): the momentum and COM-line errors are round-off and truncation (≈ 1e-8, ≈ 1e-11 m),
    # which another CPU's round-off moves by a factor; their gates (1e-6, 1e-8 m) are the physics check
    "orbit.momentum_drift_rel": {"rel": 1.0, "abs": 1e-7},
    "orbit.com_deviation": {"rel": 1.0, "abs": 1e-9},         # m
    "orbit.base_attitude_peak_deg": {"rel": 0.05, "abs": 0.02},   # deg
    "orbit.target_speed_after_seating": {"rel": 0.10, "abs": 1e-4},  # m/s
}


def gated_scenarios(folder: Path = SCENARIOS_DIR) -> list[Path]:
    """Every ``*.yaml`` in ``folder`` or below it (e.g. the gravity twins in ``scenarios/gravity/``)
    whose top level has a non-empty ``gates:`` list, sorted by path.

    A file that does not parse as YAML is included too, so that the regression test for it fails
    loudly instead of the file silently dropping out of the suite.
    """
    out = []
    for f in sorted(folder.rglob("*.yaml")):
        try:
            data = yaml.safe_load(f.read_text())
        except yaml.YAMLError:
            out.append(f)
            continue
        if isinstance(data, dict) and data.get("gates"):
            out.append(f)
    return out


def scenario_name(path: Path) -> str:
    """The scenario's ``name:`` (the file stem if it has none or does not parse)."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return path.stem
    return str(data.get("name", path.stem)) if isinstance(data, dict) else path.stem


def load_baseline(path: Path = BASELINE_PATH) -> dict[str, Any]:
    """The baseline file (an empty skeleton if it does not exist yet)."""
    if not path.is_file():
        return {"tolerances": {k: dict(v) for k, v in DEFAULT_TOLERANCES.items()}, "scenarios": {}}
    return json.loads(path.read_text())


def tolerance(tolerances: Mapping[str, Any], metric: str) -> tuple[float, float]:
    """(rel, abs) for ``metric``: its own entry, else ``default``."""
    tol = tolerances.get(metric) or tolerances.get("default") or {"rel": 0.0, "abs": 0.0}
    return float(tol.get("rel", 0.0)), float(tol.get("abs", 0.0))


def compare_to_baseline(
    name: str, metrics: Mapping[str, Any], baseline: Mapping[str, Any]
) -> list[str]:
    """Drift check of one scenario's metrics against the baseline.

    Returns:
        One message per failure (empty = within tolerance): a missing baseline entry (with how to add
        one), a baseline metric the run no longer computes, a non-finite value, or a value outside
        ``abs + rel · |baseline|`` — the scenario entry's own ``tolerances`` where it has one for the
        metric (with a ``reason``: the spread it was measured from), else the file's.
    """
    entry = (baseline.get("scenarios") or {}).get(name)
    if entry is None:
        return [f"scenario {name!r} has no entry in {BASELINE_PATH.name}; add one on purpose with "
                f"`{REFRESH_COMMAND} --scenario {name}` and commit the file"]
    # a scenario's own tolerances (``entry["tolerances"]``, each with the ``reason`` its width was measured from)
    # widen the file's for that scenario only: a metric that is ill-conditioned there, not everywhere
    tols = {**(baseline.get("tolerances") or {}), **(entry.get("tolerances") or {})}
    failures = []
    for metric, base in sorted((entry.get("metrics") or {}).items()):
        value = metrics.get(metric)
        if value is None:
            failures.append(f"{metric}: in the baseline ({base!r}) but not computed by this run")
            continue
        value = float(value)
        rel, abs_ = tolerance(tols, metric)
        if base is None or not math.isfinite(value):
            if not (base is None and not math.isfinite(value)):
                failures.append(f"{metric}: {value!r} vs baseline {base!r}")
            continue
        allowed = abs_ + rel * abs(float(base))
        if not abs(value - float(base)) <= allowed:
            failures.append(
                f"{metric}: {value:.6g} vs baseline {float(base):.6g} (Δ = {value - float(base):+.3g}, "
                f"allowed ±{allowed:.3g} = {abs_:g} + {rel:g}·|baseline|)"
            )
    return failures


def baseline_metrics(metrics: Mapping[str, Any], gated: list[str]) -> dict[str, float]:
    """The metrics to record for a scenario: :data:`KEY_METRICS` it computes plus its gated ones."""
    names = [m for m in KEY_METRICS if m in metrics]
    names += [m for m in gated if m in metrics and m not in KEY_METRICS]
    out: dict[str, Any] = {}
    for m in names:
        v = metrics[m]
        if isinstance(v, int) and not isinstance(v, bool):
            out[m] = int(v)
        else:
            out[m] = float(v) if math.isfinite(float(v)) else None  # JSON has no NaN
    return out
