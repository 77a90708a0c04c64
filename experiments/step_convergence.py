"""Contact convergence in the step size: every docking scenario at dt, dt/2 and dt/4.

    python experiments/step_convergence.py                      # scenarios/*docking*.yaml
    python experiments/step_convergence.py scenarios/gravity/*.yaml --json conv.json

The control period stays at the scenario's (1 ms); the MuJoCo timestep is divided by 1, 2 and 4, so a
control period has 1, 2 or 4 substeps. Per scenario the table gives the verdict and the peak truth
contact force at each step size: the substep-resolved peak (``contact.peak_force_truth``, the maximum
over every substep, sim.wrench.SubstepContact) and, in brackets, the peak of the truth channel, the
contact force that acted over a control period (its impulse / T_c: the mean over the period's substeps).
The last columns are the largest deviation of the substep peak from its dt value and whether the verdict
is the same at all three. The acceptance (docs/theory/ft_pipeline.md): the same verdict, peaks within 10 %.
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


def measure(path: Path, divisors: tuple[int, ...] = DIVISORS) -> dict:
    """{divisor: {verdict, status, peak, sampled, depth, chatter, share, steady}} for one scenario file
    (``chatter``: the :data:`CHATTER` counts, in order; ``share``: :data:`SHARE`; ``steady``: the :data:`STEADY`
    counts)."""
    import numpy as np
    import yaml
    from dockbench.sim.loop import run
    from dockbench.sim.scenario import scenario_from_dict

    out = {}
    for div in divisors:
        d = yaml.safe_load(path.read_text())
        sim = d.setdefault("sim", {}) or {}
        d["sim"] = sim
        sim["timestep"] = float(sim.get("control_period", 0.001)) / div
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
        }
    return out


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
    args = ap.parse_args(argv)
    divisors = args.divisors
    files = [Path(f) for f in args.scenarios] or sorted(Path("scenarios").glob("*docking*.yaml"))
    print("| scenario | " + " | ".join(f"dt/{k}: verdict, peak N (sampled)" for k in divisors)
          + " | max peak deviation | verdict |")
    print("|---|" + "---|" * len(divisors) + "---|---|")
    results, ok = {}, True
    for f in files:
        row = measure(f, divisors)
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


if __name__ == "__main__":
    sys.exit(main())
