"""Throughput of the peg-in-hole benchmark: simulated seconds per wall second and per CPU second of one core,
with the contacts per step (docs/results.md, "Factory peg-in-hole").

    python experiments/peg_throughput.py scenarios/peg/iiwa14_peg_khatib.yaml --runs 3
    python experiments/peg_throughput.py scenarios/peg/*.yaml --timesteps 0.001,0.00025 --json thr.json

Each scenario runs ``--runs`` times in this process (compiled kernels, telemetry in memory, no run folder) at
each physics timestep of ``--timesteps`` (the control period stays the scenario's). Per (scenario, timestep)
the table gives the medians over the runs of: simulated seconds per wall second and per CPU second of this
process (``time.process_time``: on a shared machine the wall figure carries the other processes' load, the
CPU figure does not), and the contacts per control step — the mean of ``contact_count`` (the tool's contacts at
the step's last substep) over the steps with any contact, and its maximum over every substep
(``contact.max_contacts``). Quote the machine and its load average with the numbers.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

from dockbench.cli import ArgumentParser


def measure(path: Path, timestep: float | None, runs: int) -> dict:
    """Medians over ``runs`` of sim/wall, sim/cpu, mean contacts per step in contact, peak contacts."""
    import numpy as np
    import yaml
    from dockbench.sim.loop import run
    from dockbench.sim.scenario import scenario_from_dict

    d = yaml.safe_load(path.read_text())
    if timestep is not None:
        d.setdefault("sim", {})["timestep"] = timestep
    rows = []
    for _ in range(runs):
        sc = scenario_from_dict(d, file=str(path))
        w0, c0 = time.perf_counter(), time.process_time()
        r = run(sc, out_root=None)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        sim_s = float(r.telemetry["t"][-1])
        counts = np.asarray(r.telemetry["contact_count"], dtype=float)
        rows.append({"wall": sim_s / wall, "cpu": sim_s / cpu, "sim_s": sim_s, "verdict": r.verdict,
                     "contacts": float(np.mean(counts[counts > 0])) if np.any(counts > 0) else 0.0,
                     "max_contacts": int(r.metrics["contact.max_contacts"])})
    med = {k: statistics.median(x[k] for x in rows) for k in ("wall", "cpu", "sim_s", "contacts", "max_contacts")}
    med["verdicts"] = sorted({x["verdict"] for x in rows})
    return med


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="+", help="scenario files")
    ap.add_argument("--runs", type=int, default=3, help="runs per scenario and timestep (default 3)")
    ap.add_argument("--timesteps", default=None,
                    help="physics timesteps [s], comma-separated (default: the scenario's own)")
    ap.add_argument("--json", default=None, help="write the measurements to this file")
    args = ap.parse_args(argv)
    steps = [None] if args.timesteps is None else [float(x) for x in args.timesteps.split(",")]
    out = {}
    print("| scenario | timestep [ms] | sim s / wall s | sim s / CPU s | contacts per step in contact | max contacts "
          "| verdicts |")
    print("|---|---|---|---|---|---|---|")
    for f in args.scenarios:
        for dt in steps:
            m = measure(Path(f), dt, args.runs)
            out[f"{Path(f).stem}@{dt}"] = m
            shown = "scenario's" if dt is None else f"{dt * 1e3:g}"
            print(f"| {Path(f).stem} | {shown} | {m['wall']:.2f} | {m['cpu']:.2f} | {m['contacts']:.1f} | "
                  f"{m['max_contacts']:g} | {', '.join(m['verdicts'])} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    print(f"load average {os.getloadavg()}, {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
