"""Refresh tests/regression/baseline.json on purpose: run the gated scenarios, record their key metrics.

    python -m tests.regression.refresh_baseline                      # every gated scenario
    python -m tests.regression.refresh_baseline --scenario NAME ...  # only these (others kept)
    python -m tests.regression.refresh_baseline --dry-run            # show the changes, write nothing

Run it from the repository root. Tolerances already in the file are kept (they are curated by hand), a
scenario entry's own ``tolerances`` (for a metric ill-conditioned in that scenario, with the ``reason``) too;
a metric without one gets its entry from ``DEFAULT_TOLERANCES``. A scenario whose gates do not PASS is
not recorded (its old entry stays) unless ``--allow-fail``. Without ``--scenario``, entries of
scenarios that no longer exist (or lost their gates) are dropped. Review the printed diff and commit
the file with the change that moved the numbers.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from pathlib import Path
from typing import Any

from tests.regression import (
    BASELINE_PATH,
    DEFAULT_TOLERANCES,
    REFRESH_COMMAND,
    REPO,
    baseline_metrics,
    gated_scenarios,
    load_baseline,
    scenario_name,
)


def run_gated(path: Path) -> tuple[str, dict[str, Any], list[str]]:
    """Run one scenario without writing a run folder: (verdict, metrics, gated metric names)."""
    from dockbench.sim.loop import run
    from dockbench.sim.scenario import load_scenario

    sc = load_scenario(path)
    result = run(sc, out_root=None)
    return result.verdict, result.metrics, [g.metric for g in sc.gates]


def _fmt(v: Any) -> str:
    return "—" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", nargs="+", default=None, help="scenario names (default: every gated one)")
    ap.add_argument("--allow-fail", action="store_true", help="record scenarios whose gates do not pass")
    ap.add_argument("--dry-run", action="store_true", help="print the changes without writing")
    ap.add_argument("--baseline", default=str(BASELINE_PATH), help="baseline file (default: %(default)s)")
    args = ap.parse_args(argv)

    from dockbench.sim.errors import DockbenchError

    path = Path(args.baseline)
    baseline = load_baseline(path)
    scen = baseline.setdefault("scenarios", {})
    tols = baseline.setdefault("tolerances", {})
    files = {scenario_name(f): f for f in gated_scenarios()}
    if args.scenario:
        unknown = [n for n in args.scenario if n not in files]
        if unknown:
            print(f"error: not a gated scenario: {', '.join(unknown)}; gated: {', '.join(sorted(files))}",
                  file=sys.stderr)
            return 1
        selected = {n: files[n] for n in args.scenario}
    else:
        selected = files
        for stale in sorted(set(scen) - set(files)):
            print(f"drop   {stale} (no gated scenario of that name)")
            del scen[stale]

    status = 0
    t0 = time.perf_counter()
    for name, f in sorted(selected.items()):
        try:
            verdict, metrics, gated = run_gated(f)
        except DockbenchError as exc:
            print(f"error  {name}: {exc}", file=sys.stderr)
            status = 1
            continue
        if verdict != "PASS" and not args.allow_fail:
            print(f"skip   {name}: verdict {verdict} (fix the scenario, or --allow-fail to record anyway)")
            status = 1
            continue
        new = baseline_metrics(metrics, gated)
        old = (scen.get(name) or {}).get("metrics") or {}
        # a metric whose change does not show in 6 significant digits (round-off) is counted, not listed
        shown = [m for m in sorted(set(new) | set(old)) if _fmt(old.get(m)) != _fmt(new.get(m))]
        small = sum(1 for m in set(new) | set(old) if old.get(m) != new.get(m)) - len(shown)
        note = f"; {small} below the 6th significant digit" if small else ""
        print(f"record {name} ({verdict}): {len(shown)} metric(s) changed{note}")
        for m in shown:
            print(f"    {m:<36} {_fmt(old.get(m)):>12} → {_fmt(new.get(m))}")
        for m in sorted(new):
            if m not in tols:
                tols[m] = dict(DEFAULT_TOLERANCES.get(m, DEFAULT_TOLERANCES["default"]))
        own = (scen.get(name) or {}).get("tolerances")  # a scenario's own tolerances stay (set by hand, with reason)
        scen[name] = {"file": str(Path(f).resolve().relative_to(REPO)), "metrics": new}
        if own:
            scen[name]["tolerances"] = own
    tols.setdefault("default", dict(DEFAULT_TOLERANCES["default"]))

    import mujoco
    import numpy as np

    baseline["_doc"] = (
        "Key metrics per gated scenario for tests/regression/test_regression.py. A value drifts when "
        "|value - baseline| > abs + rel*|baseline| (per-metric tolerances below; a scenario's own "
        "\"tolerances\", each with the \"reason\" its width was measured from, replace them for that scenario). "
        f"Refresh on purpose with `{REFRESH_COMMAND}` and commit."
    )
    baseline["_generated"] = {
        "utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "mujoco": mujoco.__version__,
        "numpy": np.__version__,
        "python": sys.version.split()[0],
    }
    ordered = {k: baseline[k] for k in ("_doc", "_generated", "tolerances") if k in baseline}
    ordered["scenarios"] = {k: scen[k] for k in sorted(scen)}
    print(f"{len(selected)} scenario(s) in {time.perf_counter() - t0:.1f} s")
    if args.dry_run:
        print("dry run: nothing written")
        return status
    from dockbench.telemetry.log import atomic_write_text

    atomic_write_text(path, json.dumps(ordered, indent=2) + "\n")
    print(f"wrote {path}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
