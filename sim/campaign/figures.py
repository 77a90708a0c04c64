"""Figures of a campaign (matplotlib, Agg backend): what the grid did, cell by cell.

* Two numeric grid axes (the campaign's ``figures: {x, y}``, default the first two): heat maps of the
  success rate and of the median of a metric (``figures.metric``, default ``contact.peak_force_truth``)
  over (x, y), one panel per variant; the cells that share (x, y) and differ in other grid axes are
  pooled (their trials together). Each square is annotated with its value and its trial count.
* One numeric grid axis: the metric's median (and its 5–95% range over the trials) against the
  parameter, and the success rate with its Wilson 95% interval, one line per variant.
* No numeric grid axis (pure Monte Carlo): the metric's histogram per variant, the success rate and its
  interval in the legend.

Every axis and colour bar carries its unit: a grid axis the unit of the scenario key it sets (from the typed
configs, :func:`key_unit`; the axis' tick labels are the campaign's own when it names them), a metric the unit
of :data:`telemetry.metrics.METRICS`, the success rate the share of trials that pass every gate.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from dockbench.sim.campaign.spec import Axis, Campaign  # noqa: E402
from dockbench.sim.campaign.stats import wilson_interval  # noqa: E402

DEFAULT_METRIC = "contact.peak_force_truth"
#: the colour bar / axis label of the success rate
SUCCESS_LABEL = "success rate [share of trials]"


@lru_cache(maxsize=8)
def _base_types(base: str) -> dict[str, str]:
    """The typed blocks' types of the campaign's base scenario (tool, target, planner, controller)."""
    from dockbench.sim.scenario import load_scenario

    try:
        s = load_scenario(base)
    except Exception:  # noqa: BLE001 - a unit is a label; an unreadable base only loses it
        return {}
    return {k: getattr(s, k).type for k in ("tool", "target", "planner", "controller") if getattr(s, k) is not None}


def key_unit(key: str, types: dict[str, str] | None = None) -> str:
    """The unit of the scenario key path ``key`` (``controller.k`` → ``N/m``, ``target.belief_offset.position.0``
    → ``m``; list indices dropped) from the typed configs' metadata (docs/scenarios.md); a typed block's keys
    need its ``type`` from ``types``. "" when unknown or unitless."""
    from dockbench.sim.config import describe_config
    from dockbench.sim.scenario import (
        InsertionConfig,
        RobotConfig,
        SimConfig,
        StartConfig,
        TelemetryConfig,
        UncertaintyConfig,
        WrenchConfig,
        _registries,
    )

    parts = [p for p in re.split(r"[.\[\]]", key) if p and not p.lstrip("-").isdigit()]
    if not parts:
        return ""
    block = parts[0]
    fixed = {"robot": RobotConfig, "sim": SimConfig, "start": StartConfig, "wrench": WrenchConfig,
             "insertion": InsertionConfig, "telemetry": TelemetryConfig, "uncertainty": UncertaintyConfig}
    try:
        if block in fixed:
            cls = fixed[block]
        else:
            cls = _registries()[block].get((types or {})[block]).Config
        rows = describe_config(cls, block + ".")
    except Exception:  # noqa: BLE001 - unknown block or type: no unit
        return ""
    path = ".".join(parts)
    return next((str(r[2]) for r in rows if r[0] == path), "")


def _axis_label(campaign: Campaign, axis: Axis) -> str:
    """``k [N/m]``; with the campaign's own tick labels, ``dx (target.belief_offset.position.0 [m])``."""
    types = _base_types(str(campaign.base))
    units = {key_unit(k, types) for k in axis.keys}
    unit = units.pop() if len(units) == 1 else ""
    unit = unit or "–"
    default = all(lab == _default_label(v) for lab, v in zip(axis.labels, axis.values, strict=False))
    if default or not axis.labels:
        return f"{axis.name} [{unit}]"
    return f"{axis.name} ({', '.join(axis.keys)} [{unit}])"


def _default_label(value: tuple[Any, ...]) -> str:
    from dockbench.sim.campaign.spec import _label

    return _label(value[0] if len(value) == 1 else list(value))


def _metric_label(metric: str) -> str:
    """``contact.peak_force_truth [N]`` (the unit of :data:`telemetry.metrics.METRICS`; [–] if it has none)."""
    from dockbench.telemetry.metrics import METRICS

    unit = METRICS.get(metric, ("",))[0] or "–"
    return f"{metric} [{unit}]"


def _numeric(axis: Axis) -> bool:
    return len(axis.keys) == 1 and all(
        isinstance(v[0], (int, float)) and not isinstance(v[0], bool) for v in axis.values
    ) and len(axis.values) > 1


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def campaign_figures(campaign: Campaign, rows: list[dict[str, Any]], summary: dict[str, Any], out: Path) -> list[Path]:
    """Write the campaign's figures into ``out``; returns their paths."""
    metric = campaign.figures.get("metric", DEFAULT_METRIC)
    numeric = [a for a in campaign.grid_axes if _numeric(a)]
    by_name = {a.name: a for a in campaign.grid_axes}
    x = by_name.get(campaign.figures["x"]) if "x" in campaign.figures else (numeric[0] if numeric else None)
    y = by_name.get(campaign.figures["y"]) if "y" in campaign.figures else None
    if y is None and "x" not in campaign.figures and len(numeric) > 1:
        y = numeric[1]
    if y is None and "x" in campaign.figures and "y" not in campaign.figures:
        rest = [a for a in numeric if a is not x]
        y = rest[0] if rest else None
    variants = [v.name for v in campaign.variants] or [""]
    files: list[Path] = []
    if x is not None and y is not None:
        files.append(_heatmaps(campaign, rows, x, y, variants, None, out / "success_rate.png"))
        files.append(_heatmaps(campaign, rows, x, y, variants, metric, out / f"{metric}.png"))
    elif x is not None:
        files.append(_line(campaign, rows, x, variants, metric, out / f"{metric}_vs_{_safe(x.name)}.png"))
    else:
        files.append(_histogram(rows, variants, metric, out / f"{metric}_histogram.png"))
    return files


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def _cells(rows: list[dict[str, Any]], variant: str, xs: list[Any], ys: list[Any], xname: str, yname: str
           ) -> dict[tuple[int, int], list[dict[str, Any]]]:
    out: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for r in rows:
        if variant and r.get("variant") != variant:
            continue
        try:
            i, j = xs.index(r.get(xname)), ys.index(r.get(yname))
        except ValueError:
            continue
        out.setdefault((i, j), []).append(r)
    return out


def _heatmaps(campaign: Campaign, rows: list[dict[str, Any]], x: Axis, y: Axis, variants: list[str],
              metric: str | None, path: Path) -> Path:
    xs = [v[0] for v in x.values]
    ys = [v[0] for v in y.values]
    n = len(variants)
    cols = min(n, 3)
    nrows = int(math.ceil(n / cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols + 1.2, 3.6 * nrows + 0.6), squeeze=False,
                             layout="constrained")
    label = SUCCESS_LABEL if metric is None else f"median {_metric_label(metric)}"
    vmax = 1.0
    grids = []
    for v in variants:
        cells = _cells(rows, v, xs, ys, x.name, y.name)
        Z = np.full((len(ys), len(xs)), np.nan)
        N = np.zeros((len(ys), len(xs)), dtype=int)
        for (i, j), rs in cells.items():
            N[j, i] = len(rs)
            if metric is None:
                Z[j, i] = sum(r["verdict"] == "PASS" for r in rs) / len(rs)
            else:
                vals = [r["metrics"].get(metric) for r in rs]
                vals = [a for a in vals if _finite(a)]
                Z[j, i] = float(np.median(vals)) if vals else np.nan
        grids.append((Z, N))
    if metric is not None:
        finite = [g[0][np.isfinite(g[0])] for g in grids]
        vmax = max((float(f.max()) for f in finite if f.size), default=1.0) or 1.0
    cmap = "RdYlGn" if metric is None else "viridis"
    im = None
    for k, (v, (Z, N)) in enumerate(zip(variants, grids, strict=True)):
        ax = axes[k // cols][k % cols]
        im = ax.imshow(Z, origin="lower", cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
        ax.set_xticks(range(len(xs)), x.labels, rotation=45 if len(xs) > 6 else 0)
        ax.set_yticks(range(len(ys)), y.labels)
        if k // cols == nrows - 1 or k + cols >= n:  # the bottom panel of its column
            ax.set_xlabel(_axis_label(campaign, x), fontsize=9)
        if k % cols == 0:
            ax.set_ylabel(_axis_label(campaign, y), fontsize=9)
        if v:
            ax.set_title(v, fontsize=10)
        for j in range(len(ys)):
            for i in range(len(xs)):
                if N[j, i]:
                    z = Z[j, i]
                    txt = "–" if not np.isfinite(z) else (f"{z:.0%}" if metric is None else f"{z:.3g}")
                    ax.text(i, j, f"{txt}\n(n={N[j, i]})", ha="center", va="center", fontsize=7)
    for k in range(n, nrows * cols):
        axes[k // cols][k % cols].axis("off")
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), label=label, shrink=0.9)
    pooled = [a.name for a in campaign.grid_axes if a is not x and a is not y]
    title = "success rate" if metric is None else f"median {metric}"
    fig.suptitle(f"{campaign.name}: {title}" + (f" (pooled over {', '.join(pooled)})" if pooled else ""),
                 fontsize=11)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _line(campaign: Campaign, rows: list[dict[str, Any]], x: Axis, variants: list[str], metric: str,
          path: Path) -> Path:
    xs = [v[0] for v in x.values]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(6.4, 6.0), sharex=True, layout="constrained")
    for v in variants:
        med, lo, hi, rate, elo, ehi = [], [], [], [], [], []
        for xv in xs:
            rs = [r for r in rows if r.get(x.name) == xv and (not v or r.get("variant") == v)]
            vals = [r["metrics"].get(metric) for r in rs]
            vals = np.array([a for a in vals if _finite(a)], dtype=float)
            med.append(np.median(vals) if vals.size else np.nan)
            lo.append(np.percentile(vals, 5) if vals.size else np.nan)
            hi.append(np.percentile(vals, 95) if vals.size else np.nan)
            k = sum(r["verdict"] == "PASS" for r in rs)
            ci = wilson_interval(k, len(rs)) or (np.nan, np.nan)
            p = k / len(rs) if rs else np.nan
            rate.append(p)
            elo.append(p - ci[0])
            ehi.append(ci[1] - p)
        line = a1.plot(xs, med, "o-", label=v or "median")[0]
        a1.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2)
        a2.errorbar(xs, rate, yerr=[elo, ehi], fmt="o-", color=line.get_color(), capsize=3, label=v or None)
    a1.set_ylabel(f"{_metric_label(metric)}\n(median, 5–95%)")
    a2.set_ylabel(f"{SUCCESS_LABEL}\n(Wilson 95%)")
    a2.set_ylim(-0.05, 1.05)
    a2.set_xlabel(_axis_label(campaign, x))
    if any(variants):
        a1.legend(fontsize=8)
    fig.suptitle(campaign.name, fontsize=11)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _histogram(rows: list[dict[str, Any]], variants: list[str], metric: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    for v in variants:
        rs = [r for r in rows if not v or r.get("variant") == v]
        vals = [r["metrics"].get(metric) for r in rs]
        vals = [a for a in vals if _finite(a)]
        k = sum(r["verdict"] == "PASS" for r in rs)
        ci = wilson_interval(k, len(rs))
        lab = f"{v + ': ' if v else ''}success {k}/{len(rs)}" + (f" [{ci[0]:.0%}, {ci[1]:.0%}]" if ci else "")
        if vals:
            ax.hist(vals, bins=min(30, max(5, len(vals) // 4)), alpha=0.6, label=lab)
    ax.set_xlabel(_metric_label(metric))
    ax.set_ylabel("trials [count]")
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
