"""Contact convergence in the step size: every docking scenario at dt, dt/2 and dt/4.

    python experiments/step_convergence.py                      # scenarios/*docking*.yaml
    python experiments/step_convergence.py scenarios/gravity/*.yaml --json conv.json

The control period stays at the scenario's (1 ms); the MuJoCo timestep is divided by 1, 2 and 4, so a
control period has 1, 2 or 4 substeps. Per scenario the table gives the verdict and the peak truth
contact force at each step size: the substep-resolved peak (``contact.peak_force_truth``, the maximum
over every substep, sim.wrench.SubstepContact) and, in brackets, the peak of the force sampled once per
control period, which is what a reading at the last substep sees. The last columns are the largest
deviation of the substep peak from its dt value and whether the verdict is the same at all three. The
acceptance (docs/theory/ft_pipeline.md): the same verdict, peaks within 10 %.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DIVISORS = (1, 2, 4)


def measure(path: Path) -> dict:
    """{divisor: {verdict, peak, sampled, depth}} for one scenario file."""
    import numpy as np
    import yaml
    from dockbench.sim.loop import run
    from dockbench.sim.scenario import scenario_from_dict

    out = {}
    for div in DIVISORS:
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
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", help="scenario files (default: scenarios/*docking*.yaml)")
    ap.add_argument("--json", default=None, help="write the measurements to this file")
    args = ap.parse_args(argv)
    files = [Path(f) for f in args.scenarios] or sorted(Path("scenarios").glob("*docking*.yaml"))
    print("| scenario | " + " | ".join(f"dt/{k}: verdict, peak N (sampled)" for k in DIVISORS)
          + " | max peak deviation | verdict |")
    print("|---|" + "---|" * len(DIVISORS) + "---|---|")
    results, ok = {}, True
    for f in files:
        row = measure(f)
        results[f.stem] = row
        base = row[1]["peak"]
        dev = max(abs(row[k]["peak"] - base) / base for k in DIVISORS) if base > 0 else 0.0
        same = len({row[k]["verdict"] for k in DIVISORS}) == 1
        ok &= same and dev <= 0.10
        cells = " | ".join(f"{row[k]['verdict']}, {row[k]['peak']:.3f} ({row[k]['sampled']:.3f})" for k in DIVISORS)
        print(f"| {f.stem} | {cells} | {100 * dev:.1f} % | {'same' if same else 'CHANGED'} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
