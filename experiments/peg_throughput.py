"""Throughput of the peg-in-hole benchmark: simulated seconds per wall second and per CPU second of one core,
with the contacts per step (docs/results.md, "Factory peg-in-hole").

    python experiments/peg_throughput.py scenarios/peg/iiwa14_peg_khatib.yaml --runs 3
    python experiments/peg_throughput.py scenarios/peg/*.yaml --timesteps 0.001,0.00025 --json thr.json
    python experiments/peg_throughput.py scenarios/peg/*.yaml --runs 1 --culling both   # culling's gain, same bytes?

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


def measure(path: Path, timestep: float | None, runs: int, culling: bool | None = None) -> dict:
    """Medians over ``runs`` of sim/wall, sim/cpu, mean contacts per step in contact, peak contacts (``culling``:
    ``target.cull_contacts`` forced on or off; None = the scenario's). ``telemetry``: the last run's."""
    import numpy as np
    import yaml
    from dockbench.sim.loop import run
    from dockbench.sim.scenario import scenario_from_dict

    d = yaml.safe_load(path.read_text())
    if timestep is not None:
        d.setdefault("sim", {})["timestep"] = timestep
    if culling is not None:
        d.setdefault("target", {})["cull_contacts"] = culling
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
    med["culling"] = r.meta["contact_culling"]
    med["telemetry"] = r.telemetry
    return med


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="+", help="scenario files")
    ap.add_argument("--runs", type=int, default=3, help="runs per scenario and timestep (default 3)")
    ap.add_argument("--timesteps", default=None,
                    help="physics timesteps [s], comma-separated (default: the scenario's own)")
    ap.add_argument("--culling", choices=("scenario", "on", "off", "both"), default="scenario",
                    help="target.cull_contacts: the scenario's, forced on or off, or both (off then on per timestep, "
                    "their telemetry compared bit for bit; docs/theory/peg_hole.md §5)")
    ap.add_argument("--json", default=None, help="write the measurements to this file")
    args = ap.parse_args(argv)
    modes = {"scenario": [None], "on": [True], "off": [False], "both": [False, True]}[args.culling]
    steps = [None] if args.timesteps is None else [float(x) for x in args.timesteps.split(",")]
    out = {}
    print("| scenario | timestep [ms] | culling | sim s / wall s | sim s / CPU s | contacts per step in contact "
          "| max contacts | verdicts | boxes in (mean), misses |")
    print("|---|---|---|---|---|---|---|---|---|")
    for f in args.scenarios:
        for dt in steps:
            tel = {}
            for cull in modes:
                m = measure(Path(f), dt, args.runs, cull)
                tel[cull] = m.pop("telemetry")
                out[f"{Path(f).stem}@{dt}@{cull}"] = m
                shown = "scenario's" if dt is None else f"{dt * 1e3:g}"
                c = m["culling"]
                boxes = "–" if c is None else f"{c['mean_active']:.1f} of {c['boxes']}, {c['misses']}"
                print(f"| {Path(f).stem} | {shown} | {'scenario' if cull is None else ('on' if cull else 'off')} | "
                      f"{m['wall']:.2f} | {m['cpu']:.2f} | {m['contacts']:.1f} | {m['max_contacts']:g} | "
                      f"{', '.join(m['verdicts'])} | {boxes} |", flush=True)
            if len(modes) == 2:
                from dockbench.telemetry.run import first_difference

                diff = first_difference(tel[False], tel[True])  # None: every channel bit for bit
                out[f"{Path(f).stem}@{dt}@same"] = diff is None
                print(f"|  | | culling on/off: telemetry {'bit-identical' if diff is None else 'DIFFERENT: ' + diff} "
                      "| | | | | | |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    print(f"load average {os.getloadavg()}, {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
