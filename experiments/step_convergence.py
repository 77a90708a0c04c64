"""Contact convergence in the step size: every docking scenario at dt, dt/2 and dt/4.

    python experiments/step_convergence.py                      # scenarios/*docking*.yaml
    python experiments/step_convergence.py scenarios/gravity/*.yaml --json conv.json
    python experiments/step_convergence.py scenarios/tilt/iiwa14_tilt_hqp.yaml --set sim.noslip_iterations=10

The control period stays at the scenario's (1 ms); the MuJoCo timestep is divided by 1, 2 and 4, so a
control period has 1, 2 or 4 substeps. Per scenario the table gives the verdict and the peak truth
contact force at each step size: the substep-resolved peak (``contact.peak_force_truth``, the maximum
over every substep, sim.wrench.SubstepContact) and, in brackets, the peak of the truth channel, the
contact force that acted over a control period (its impulse / T_c: the mean over the period's substeps).
The last columns are the largest deviation of the substep peak from its dt value and whether the verdict
is the same at all three. The acceptance (docs/theory/ft_pipeline.md): the same verdict, peaks within 10 %.

A peak made by one stick-slip or landing event can move by more than 10 % when the start moves by a
micrometre, at a fixed step: then no single run converges and the question is whether the step moves the
peak's distribution. ``--ensemble N`` runs each scenario from N starts at every step size (the scenario's
own, and N − 1 with ``start.offset`` moved by a draw of N(0, σ²) per world axis, σ = ``--perturb``, 1 µm
by default; the same draws at every step) and reports per step the runs that passed and the median peak
with its range. The acceptance then: the same number passed, medians within 10 % (docs/theory/ft_pipeline.md §4).

    python experiments/step_convergence.py scenarios/tilt/iiwa14_tilt_se3.yaml --ensemble 8
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dockbench.cli import ArgumentParser

DIVISORS = (1, 2, 4)
#: the chatter counts the ``--chatter`` table shows, in its order
CHATTER = ("contact.force_spikes_truth", "contact.on_off_toggles_truth", "contact.releases_truth")
#: what the FR3 dockings gate (a cycle of the loop): the densest 0.1 s of spikes [%], and the spikes and
#: toggles at rest in the final window
SHARE = "contact.max_spike_share_truth"
STEADY = ("contact.steady_force_spikes_truth", "contact.steady_on_off_toggles_truth")


def measure(path: Path, divisors: tuple[int, ...] = DIVISORS, sets: list[str] | None = None,
            start_shift: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> dict:
    """{divisor: {verdict, status, peak, sampled, depth, chatter, share, steady, failed}} for one scenario file
    (``chatter``: the :data:`CHATTER` counts, in order; ``share``: :data:`SHARE`; ``steady``: the :data:`STEADY`
    counts; ``failed``: the metrics of the gates that failed), with the ``--set`` assignments ``sets`` applied
    first (``sim.timestep`` is then divided) and ``start_shift`` [m, world axes] added to ``start.offset``."""
    import numpy as np
    import yaml
    from dockbench.sim.loop import run
    from dockbench.sim.overrides import merge_overrides
    from dockbench.sim.scenario import scenario_from_dict

    out = {}
    for div in divisors:
        d, _ = merge_overrides(yaml.safe_load(path.read_text()), sets or [], where="--set")
        sim = d.setdefault("sim", {}) or {}
        d["sim"] = sim
        sim["timestep"] = float(sim.get("control_period", 0.001)) / div
        if any(start_shift):
            start = d.get("start") or {}
            d["start"] = start
            base = start.get("offset", (0.0, 0.0, 0.0))
            start["offset"] = [float(a) + b for a, b in zip(base, start_shift, strict=False)]
        r = run(scenario_from_dict(d, file=str(path)), out_root=None)
        sampled = float(np.max(np.linalg.norm(r.telemetry["wrench_truth_world"][:, :3], axis=1)))
        out[div] = {
            "verdict": r.verdict,
            "status": r.status,
            "peak": r.metrics["contact.peak_force_truth"],
            "sampled": sampled,
            "depth": r.metrics.get("docking.depth"),
            "chatter": [r.metrics.get(k) for k in CHATTER],
            "share": r.metrics.get(SHARE),
            "steady": [r.metrics.get(k) for k in STEADY],
            "failed": [g["metric"] for g in r.gates if g["verdict"] != "PASS"],
        }
    return out


def start_shifts(n: int, sigma: float, seed: int = 0) -> list[tuple[float, float, float]]:
    """The ``--ensemble`` starts: n shifts of ``start.offset`` [m, world axes], the first zero (the scenario
    itself), the others N(0, σ²) per axis from a generator seeded with ``seed`` (the same list on every call)."""
    import numpy as np

    draws = np.random.default_rng(seed).normal(0.0, sigma, size=(max(n - 1, 0), 3))
    return [(0.0, 0.0, 0.0)] + [tuple(float(x) for x in row) for row in draws]


def ensemble_row(cases: list[dict], divisors: tuple[int, ...]) -> dict:
    """Summary of one scenario's ensemble (``cases``: one :func:`measure` result per start): per divisor the
    runs that passed, the median, smallest and largest peak, the gates that failed in any run; the largest
    deviation of a median from the first divisor's, the first divisor's spread (max − min) / median, and
    whether the acceptance holds (the same number passed at every step, medians within 10 %)."""
    import numpy as np

    per = {}
    for k in divisors:
        peaks = np.array([c[k]["peak"] for c in cases], dtype=float)
        failed = sorted({m for c in cases for m in c[k].get("failed", ())})
        per[k] = {"passed": sum(c[k]["verdict"] == "PASS" for c in cases), "runs": len(cases),
                  "median": float(np.median(peaks)), "min": float(peaks.min()), "max": float(peaks.max()),
                  "failed": failed}
    base = per[divisors[0]]
    dev = max(abs(per[k]["median"] - base["median"]) / base["median"] for k in divisors) if base["median"] > 0 else 0.0
    spread = (base["max"] - base["min"]) / base["median"] if base["median"] > 0 else 0.0
    same = len({per[k]["passed"] for k in divisors}) == 1
    return {"steps": per, "median_deviation": dev, "spread": spread, "same_passed": same,
            "ok": same and dev <= 0.10}


def parse_divisors(text: str) -> tuple[int, ...]:
    """``"1,2,4"`` → (1, 2, 4): distinct integers 1..64 with 1 first (the scenario's own step is the
    reference of every deviation)."""
    try:
        divs = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--divisors: comma-separated integers, got {text!r}") from None
    if not divs or divs[0] != 1 or len(set(divs)) != len(divs) or not all(1 <= k <= 64 for k in divs):
        raise argparse.ArgumentTypeError(f"--divisors: distinct integers in 1..64 starting with 1, got {text!r}")
    return divs


def _counts(values) -> str:
    """``a / b / c`` of integer counts, ``–`` for a missing one."""
    return " / ".join("–" if x is None else str(int(x)) for x in values)


def chatter_table(results: dict[str, dict], divisors: tuple[int, ...], label: str = "scenario") -> list[str]:
    """Markdown rows: per row of ``results`` (a scenario, or what ``label`` names) and divisor
    ``spikes / toggles / releases``, the densest 0.1 s of spikes and the spikes and toggles at rest in the
    final window when the row has them (``[densest 0.1 s s %, at rest a / b]``) and the verdict."""
    rows = [f"| {label} | " + " | ".join(f"dt/{k}: spikes / toggles / releases" for k in divisors) + " |",
            "|---|" + "---|" * len(divisors)]
    for name, row in results.items():
        cells = []
        for k in divisors:
            cell, share, steady = _counts(row[k]["chatter"]), row[k].get("share"), row[k].get("steady")
            if steady:
                dense = "" if share is None else f"densest 0.1 s {share:.0f} %, "
                cell += f" [{dense}at rest {_counts(steady)}]"
            cells.append(cell + f" ({row[k]['verdict']})")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", help="scenario files (default: scenarios/*docking*.yaml)")
    ap.add_argument("--json", default=None, help="write the measurements to this file")
    ap.add_argument("--divisors", type=parse_divisors, default=DIVISORS,
                    help="timestep divisors, comma-separated, starting with 1 (default 1,2,4)")
    ap.add_argument("--chatter", action="store_true", help="also print the chatter counts at each step size")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                    help="override a scenario key in every run (repeatable), as run_docking.py --set")
    ap.add_argument("--ensemble", type=int, default=1, metavar="N",
                    help="runs per step size from N starts (the scenario's and N − 1 shifted by --perturb); "
                    "report the passes and the median peak (default 1: the scenario alone)")
    ap.add_argument("--perturb", type=float, default=1e-6, metavar="SIGMA",
                    help="standard deviation of the --ensemble start shifts per world axis [m] (default 1e-6)")
    args = ap.parse_args(argv)
    divisors = args.divisors
    files = [Path(f) for f in args.scenarios] or sorted(Path("scenarios").glob("*docking*.yaml"))
    if args.ensemble < 1 or not 0.0 < args.perturb <= 1e-3:
        ap.error(f"--ensemble ≥ 1 and 0 < --perturb ≤ 1e-3 m, got {args.ensemble} and {args.perturb}")
    if args.ensemble > 1:
        return _main_ensemble(files, divisors, args)
    print("| scenario | " + " | ".join(f"dt/{k}: verdict, peak N (sampled)" for k in divisors)
          + " | max peak deviation | verdict |")
    print("|---|" + "---|" * len(divisors) + "---|---|")
    results, ok = {}, True
    for f in files:
        row = measure(f, divisors, args.sets)
        results[f.stem] = row
        base = row[1]["peak"]
        dev = max(abs(row[k]["peak"] - base) / base for k in divisors) if base > 0 else 0.0
        same = len({row[k]["verdict"] for k in divisors}) == 1
        ok &= same and dev <= 0.10
        cells = " | ".join(f"{row[k]['verdict']}, {row[k]['peak']:.3f} ({row[k]['sampled']:.3f})" for k in divisors)
        print(f"| {f.stem} | {cells} | {100 * dev:.1f} % | {'same' if same else 'CHANGED'} |", flush=True)
    if args.chatter:
        print()
        print("\n".join(chatter_table(results, divisors)))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0 if ok else 1


def _main_ensemble(files: list[Path], divisors: tuple[int, ...], args: argparse.Namespace) -> int:
    """``--ensemble``: one row per scenario, passes and the median peak [min–max] per step size."""
    print(f"| scenario ({args.ensemble} starts, σ = {args.perturb:g} m) | "
          + " | ".join(f"dt/{k}: passed, median peak N [min–max]" for k in divisors)
          + " | spread at dt | max median deviation | passes |")
    print("|---|" + "---|" * len(divisors) + "---|---|---|")
    shifts = start_shifts(args.ensemble, args.perturb)
    results, ok = {}, True
    for f in files:
        cases = [measure(f, divisors, args.sets, shift) for shift in shifts]
        row = ensemble_row(cases, divisors)
        results[f.stem] = {"cases": cases, "summary": row, "shifts": shifts}
        ok &= row["ok"]
        cells = " | ".join(f"{s['passed']}/{s['runs']}, {s['median']:.2f} [{s['min']:.2f}–{s['max']:.2f}]"
                           + (f" (failed: {', '.join(s['failed'])})" if s["failed"] else "")
                           for s in (row["steps"][k] for k in divisors))
        print(f"| {f.stem} | {cells} | {100 * row['spread']:.1f} % | {100 * row['median_deviation']:.1f} % | "
              f"{'same' if row['same_passed'] else 'CHANGED'} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
