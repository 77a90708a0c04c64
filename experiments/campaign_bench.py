"""Measure what a campaign costs beyond its trials' control loops (docs/performance.md, "Campaigns").

    python experiments/campaign_bench.py --trials 200 --jobs 2        # the efficiency of a campaign
    python experiments/campaign_bench.py --fit                       # fixed cost per trial vs per simulated second
    python experiments/campaign_bench.py --cli 5                     # a fresh CLI process per trial, for comparison

``--trials N``: N trials of ``scenarios/iiwa14_docking.yaml`` (repeats of the shipped scenario) on ``--jobs``
workers of the local pool, timed like ``experiments/campaign.py`` (from before the pool starts to the
last file); prints wall / (Σ loop / workers) — 1 would be the loops alone, perfectly packed — the median
overhead per trial (the trial's time in its worker minus its loop) and its share of the trial.

``--fit``: trials of the same scenario at four run lengths (``sim.settle_time`` 0.5, 4.5, 8.5, 16.5 s:
7.4 to 23.4 s simulated), five each, in this process; least-squares lines trial = a + b·T_sim and
loop = a' + b'·T_sim give the fixed cost per trial (a) and the cost per simulated second (b).

``--cli K``: K runs of ``python experiments/run_docking.py`` in fresh processes (imports, model, loop,
metrics and the run folder each time), against the median trial of the in-process campaign.

Shared machines are noisy: the numbers are ratios measured in one session, with the load average printed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dockbench.cli import ArgumentParser, child_env

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO / "scenarios" / "iiwa14_docking.yaml"


def _campaign_file(folder: Path, name: str, extra: dict) -> Path:
    import yaml

    data = {"name": name, "base": str(SCENARIO), **extra}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def efficiency(trials: int, jobs: int, out: Path, telemetry: str = "failures") -> dict:
    """N repeats of the docking on ``jobs`` workers: wall, Σ loop, their ratio, overhead per trial."""
    from dockbench.sim.campaign import load_campaign, run_campaign
    from dockbench.sim.campaign.executors import make_executor

    path = _campaign_file(out, f"bench_{trials}", {"repeats": trials, "telemetry": telemetry})
    camp = load_campaign(path)
    load0 = os.getloadavg()
    started = time.perf_counter()
    ex = make_executor("local", jobs)
    try:
        rep = run_campaign(camp, out, ex, progress=None, figures=False, fresh=True, started=started)
    finally:
        ex.close()
    tm = rep.summary["timing"]
    rows = rep.rows
    return {
        "trials": trials, "workers": tm["workers"], "wall_s": tm["wall_s"], "sum_loop_s": tm["sum_loop_s"],
        "wall_over_ideal": tm["wall_over_ideal"], "median_trial_s": tm["median_trial_s"],
        "median_loop_s": statistics.median(r["loop_s"] for r in rows),
        "median_overhead_s": tm["median_overhead_s"], "median_overhead_share": tm["median_overhead_share"],
        "disk_mb": rep.summary["disk_mb"], "load_start": list(load0), "load_end": list(os.getloadavg()),
    }


def fit(out: Path, per_length: int = 5) -> dict:
    """Fixed cost per trial and cost per simulated second (least squares over four run lengths)."""
    import numpy as np
    from dockbench.sim.campaign import load_campaign, run_campaign
    from dockbench.sim.campaign.executors import InlineExecutor

    path = _campaign_file(out, "bench_fit", {
        "axes": [{"key": "sim.settle_time", "values": [0.5, 4.5, 8.5, 16.5], "name": "settle"}],
        "repeats": per_length + 1, "telemetry": "none",
    })
    rep = run_campaign(load_campaign(path), out, InlineExecutor(), progress=None, figures=False, fresh=True)
    rows = [r for r in rep.rows if r["repeat"] > 0]  # repeat 0 of the first length compiled the model
    T = np.array([r["sim_s"] for r in rows])
    A = np.stack([np.ones_like(T), T], axis=1)
    res = {}
    for key in ("trial_s", "loop_s", "overhead_s"):
        y = np.array([r[key] for r in rows])
        (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
        res[key] = {"fixed_s": float(a), "per_sim_s": float(b)}
    first = [r for r in rep.rows if r["repeat"] == 0 and r["cell"] == "settle=0.5"][0]
    res["first_trial_overhead_s"] = first["overhead_s"]
    res["load"] = list(os.getloadavg())
    return res


def cli_runs(k: int, out: Path) -> dict:
    """K fresh processes of run_docking.py: wall time each (imports, build, loop, metrics, run folder)."""
    times = []
    for _ in range(k):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(REPO / "experiments" / "run_docking.py"), "--scenario", str(SCENARIO),
                        "--no-progress", "--out", str(out / "cli")], check=False, capture_output=True,
                       env=child_env({**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}))
        times.append(time.perf_counter() - t0)
    return {"runs": k, "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=0, help="trials of the efficiency campaign (0 = skip)")
    ap.add_argument("--jobs", type=int, default=None, help="workers (default: every core)")
    ap.add_argument("--telemetry", default="failures", choices=("all", "failures", "none"))
    ap.add_argument("--fit", action="store_true", help="fixed cost per trial vs cost per simulated second")
    ap.add_argument("--cli", type=int, default=0, help="fresh CLI processes to time (0 = skip)")
    ap.add_argument("--out", default=None, help="where the campaigns go (default: a temporary folder)")
    ap.add_argument("--json", default=None, help="write the numbers here")
    args = ap.parse_args(argv)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="campaign_bench_"))
    out.mkdir(parents=True, exist_ok=True)
    result: dict = {"machine": {"cores": os.cpu_count(), "load": list(os.getloadavg())}}
    if args.trials:
        e = result["efficiency"] = efficiency(args.trials, args.jobs, out, args.telemetry)
        print(f"{e['trials']} trials on {e['workers']} workers: wall {e['wall_s']:.1f} s, "
              f"Σ loop {e['sum_loop_s']:.1f} s → wall / (Σ loop / workers) = {e['wall_over_ideal']:.3f}; "
              f"median trial {1e3 * e['median_trial_s']:.0f} ms "
              f"(loop {1e3 * e['median_loop_s']:.0f} ms), overhead {1e3 * e['median_overhead_s']:.1f} ms = "
              f"{100 * e['median_overhead_share']:.1f}% of a trial; folder {e['disk_mb']:.1f} MB; load "
              f"{e['load_start'][0]:.2f} → {e['load_end'][0]:.2f}")
    if args.fit:
        f = result["fit"] = fit(out)
        print(f"per trial: {1e3 * f['trial_s']['fixed_s']:.1f} ms fixed + {1e3 * f['trial_s']['per_sim_s']:.1f} ms per "
              f"simulated second (loop {1e3 * f['loop_s']['fixed_s']:.1f} ms + {1e3 * f['loop_s']['per_sim_s']:.1f} "
              f"ms/s; overhead {1e3 * f['overhead_s']['fixed_s']:.1f} ms + {1e3 * f['overhead_s']['per_sim_s']:.2f} "
              f"ms/s); a worker's first trial: {1e3 * f['first_trial_overhead_s']:.0f} ms overhead")
    if args.cli:
        c = result["cli"] = cli_runs(args.cli, out)
        print(f"fresh CLI process per run: median {c['median_s']:.2f} s (min {c['min_s']:.2f}, max {c['max_s']:.2f})")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
