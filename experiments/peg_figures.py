"""Figures of the peg-in-hole benchmark (docs/results.md, "Factory peg-in-hole"): the contact force against time
for several laws on one case, phases shaded, and the force-quality distributions of a campaign per law.

    python experiments/peg_figures.py force RUN_DIR [RUN_DIR ...] --out docs/img/peg_force_vs_time.png
    python experiments/peg_figures.py violins campaigns/factory_peg --out docs/img/factory_peg_force_quality.png

``force``: one panel per run folder (each a law on the same case), the truth contact force ‖f‖ [N] (its
substep-resolved peak per control period as a thin line, when recorded) against time, with the phases shaded
from the run's own telemetry: free motion (before the first contact, ‖f‖ ≥ 0.5 N), insertion (from the first
contact to ``docking.time_to_seat``) and seated (from then on); the panel title gives the law, peak, impulse
and time to seat.
``violins``: from every trial's summary.json of a campaign folder, one violin per variant (a law on a robot)
of the peak and mean contact force, the contact impulse and the time to seat (seated trials only).
``table``: the force-quality table of docs/results.md from the same summaries (Markdown on stdout): per
variant the trials, success with its Wilson 95 % interval, the failures by where the tip stopped (at the mouth:
less than 2 mm below it, on the top face or the chamfer; short: in the bore, more than 4 % of the depth above
the bottom; other: seated but failing another gate), the peak force's p50 / p95 / max and whether the p95 meets
the robot's limit, the mean force in contact, the impulse, the time to seat (seated trials), the jam rate and
the retries (trials that needed more than one attempt); then the failed trials (the belief's lateral and axial
error from meta.json's true and believed target frames, where the tip stopped, peak, attempts, tilt) and the
issue's numbers (per robot: laws at ≥ 95 % success, as point estimates and by the Wilson interval's lower end;
every law's p95 peak against the robot's limit).

    python experiments/peg_figures.py table campaigns/factory_peg
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from dockbench.telemetry.gates import SIMULATED_STATUSES

from dockbench.cli import ArgumentParser

CONTACT_ON = 0.5


def force_figure(run_dirs: list[str], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from dockbench.telemetry.metrics import compute_metrics
    from dockbench.telemetry.run import Run

    fig, axes = plt.subplots(len(run_dirs), 1, figsize=(8, 2.2 * len(run_dirs)), sharex=True, squeeze=False)
    for ax, d in zip(axes[:, 0], run_dirs, strict=True):
        run = Run.load(d)
        ch, meta = run.channels, run.meta
        m = compute_metrics(ch, meta)
        t = np.asarray(ch["t"])
        f = np.linalg.norm(np.asarray(ch["wrench_truth_world"])[:, :3], axis=1)
        on = np.flatnonzero(f >= CONTACT_ON)
        t_c = float(t[on[0]]) if on.size else float(t[-1])
        t_s = float(m.get("docking.time_to_seat", math.inf))
        t_s = min(t_s, float(t[-1]))
        for (a, b, colour, label) in ((t[0], t_c, "#dde8f5", "free motion"), (t_c, t_s, "#f8e3c8", "insertion"),
                                      (t_s, t[-1], "#d8f0d8", "within 1 mm of the bottom")):
            if b > a:
                ax.axvspan(a, b, color=colour, label=label, lw=0)
        if "contact_force_peak" in ch:
            ax.plot(t, ch["contact_force_peak"], lw=0.5, color="0.55", label="substep peak")
        ax.plot(t, f, lw=0.9, color="k", label="‖f‖ (period mean)")
        sc = meta.get("scenario") or {}
        law = (sc.get("controller") or {}).get("type", "?")
        ax.set_title(f"{sc.get('name', Path(d).parent.name)} ({law}): peak {m['contact.peak_force_truth']:.1f} N, "
                     f"impulse {m['contact.impulse_truth']:.2f} N·s, seated at {t_s:.2f} s", fontsize=9)
        ax.set_ylabel("contact force [N]")
    axes[0, 0].legend(loc="upper left", fontsize=7, ncol=5)
    axes[-1, 0].set_xlabel("t [s]")
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    print(f"wrote {out}")


def violin_figure(folder: str, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data: dict[str, dict[str, list[float]]] = {}
    for f in sorted(Path(folder, "trials").glob("*/*/summary.json")):
        s = json.loads(f.read_text())
        if s.get("status") not in SIMULATED_STATUSES:
            continue
        var = s["trial"]["params"].get("variant", s["trial"]["cell"])
        row = data.setdefault(var, {})
        for k, v in s["metrics"].items():
            if isinstance(v, (int, float)) and v is not None and math.isfinite(v):
                row.setdefault(k, []).append(float(v))
    panels = [("contact.peak_force_truth", "peak contact force [N]"),
              ("contact.mean_force_truth", "mean contact force in contact [N]"),
              ("contact.impulse_truth", "contact impulse [N·s]"),
              ("docking.time_to_seat", "time to seat [s] (seated trials)")]
    names = list(data)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8))
    for ax, (key, label) in zip(axes, panels, strict=True):
        vals = [data[n].get(key, []) or [math.nan] for n in names]
        ok = [i for i, v in enumerate(vals) if len(v) > 1]
        if ok:
            ax.violinplot([vals[i] for i in ok], positions=ok, showmedians=True)
        for i, v in enumerate(vals):
            ax.plot([i] * len(v), v, ".", ms=2, color="k", alpha=0.5)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=45, ha="right", fontsize=8)
        ax.set_title(label, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=130)
    print(f"wrote {out} ({', '.join(f'{n}: {len(next(iter(data[n].values()), []))}' for n in names)} trials)")


#: the issue's p95 peak-force limits per robot [N] (the scenarios' gates)
PEAK_LIMIT = {"iiwa14": 25.0, "fr3": 35.0}
#: Factory's success threshold (fraction of the hole's depth) and the "at the mouth" band [m] below the mouth
SUCCESS_FRACTION = 0.04
MOUTH_BAND = 0.002


def _quantile(v: list[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics (numpy's default)."""
    import numpy as np

    return float(np.quantile(np.asarray(v, dtype=float), q)) if v else math.nan


def force_quality_rows(folder: str) -> list[dict]:
    """One row per variant of a campaign folder's trials (``table``)."""
    from dockbench.sim.campaign.stats import wilson_interval

    by: dict[str, list[dict]] = {}
    for f in sorted(Path(folder, "trials").glob("*/*/summary.json")):
        s = json.loads(f.read_text())
        meta = json.loads((f.parent / "meta.json").read_text()) if (f.parent / "meta.json").exists() else {}
        var = s["trial"]["params"].get("variant", s["trial"]["cell"])
        by.setdefault(var, []).append({"s": s, "depth": meta.get("target_depth_total")})
    rows = []
    for var, trials in by.items():
        n = len(trials)
        ok = [t for t in trials if t["s"].get("verdict") == "PASS"]
        mouth = short = other = 0
        for t in trials:
            if t["s"].get("verdict") == "PASS":
                continue
            m = t["s"].get("metrics") or {}
            frac = m.get("docking.seat_height_fraction")
            depth = t["depth"] or 0.025
            if frac is None or not math.isfinite(frac):
                other += 1
            elif frac > 1.0 - MOUTH_BAND / depth:
                mouth += 1
            elif frac > SUCCESS_FRACTION:
                short += 1
            else:
                other += 1

        def vals(key: str, pick=trials) -> list[float]:
            out = []
            for t in pick:
                v = (t["s"].get("metrics") or {}).get(key)
                if isinstance(v, (int, float)) and math.isfinite(v):
                    out.append(float(v))
            return out

        peak = vals("contact.peak_force_truth")
        robot = var.split("_", 1)[0]
        lim = PEAK_LIMIT.get(robot, math.nan)
        lo_hi = wilson_interval(len(ok), n)
        rows.append({
            "variant": var, "n": n, "k": len(ok), "wilson": lo_hi, "mouth": mouth, "short": short, "other": other,
            "peak": (_quantile(peak, 0.5), _quantile(peak, 0.95), max(peak) if peak else math.nan), "limit": lim,
            "mean": _quantile(vals("contact.mean_force_truth"), 0.5),
            "impulse": (_quantile(vals("contact.impulse_truth"), 0.5), _quantile(vals("contact.impulse_truth"), 0.95)),
            "seat": (_quantile(vals("docking.time_to_seat"), 0.5), _quantile(vals("docking.time_to_seat"), 0.95)),
            "jams": int(sum(vals("insertion.jammed"))),
            "retried": sum(1 for v in vals("insertion.attempts") if v > 1),
        })
    return rows


def force_quality_table(folder: str) -> str:
    """The Markdown table of :func:`force_quality_rows`."""
    head = ("| variant (robot_law) | trials | success | Wilson 95 % | failed: at the mouth / short in the bore / "
            "other | peak force p50 / p95 / max [N] | p95 ≤ limit | mean force in contact p50 [N] | "
            "impulse p50 / p95 [N·s] | time to seat p50 / p95 [s] (seated) | jam rate | retried |")
    lines = [head, "|" + "---|" * 12]
    for r in force_quality_rows(folder):
        lo, hi = r["wilson"] if r["wilson"] else (math.nan, math.nan)
        p50, p95, pmax = r["peak"]
        lines.append(
            f"| {r['variant']} | {r['n']} | {100.0 * r['k'] / r['n']:.0f} % ({r['k']}/{r['n']}) | "
            f"[{100.0 * lo:.0f} %, {100.0 * hi:.0f} %] | {r['mouth']} / {r['short']} / {r['other']} | "
            f"{p50:.1f} / {p95:.1f} / {pmax:.1f} | {'yes' if p95 <= r['limit'] else 'no'} ({r['limit']:.0f} N) | "
            f"{r['mean']:.2f} | {r['impulse'][0]:.2f} / {r['impulse'][1]:.2f} | "
            f"{r['seat'][0]:.2f} / {r['seat'][1]:.2f} | {r['jams']}/{r['n']} | {r['retried']}/{r['n']} |"
        )
    return "\n".join(lines)


def _num(metrics: dict, key: str, spec: str) -> str:
    v = metrics.get(key)
    return format(v, spec) if isinstance(v, (int, float)) and math.isfinite(v) else "–"


def failed_trials_table(folder: str) -> str:
    """The failed trials of a campaign folder (Markdown): per trial the belief's lateral error (the distance
    between the believed and the true hole axis, perpendicular to the true axis z_t) and axial error (the true
    mouth's height above the believed one along z_t, out of the hole), from meta.json's ``T_world_target`` and
    ``T_world_target_believed``; the seat height fraction, peak truth force, attempts and tilt from summary.json."""
    import numpy as np

    lines = ["| trial | lateral error [mm] | axial error [mm] | seat height fraction | peak [N] | attempts "
             "| tilt [°] |", "|---|---|---|---|---|---|---|"]
    for f in sorted(Path(folder, "trials").glob("*/*/summary.json")):
        s = json.loads(f.read_text())
        if s.get("verdict") == "PASS" or not (f.parent / "meta.json").exists():
            continue
        meta = json.loads((f.parent / "meta.json").read_text())
        T, B = np.asarray(meta["T_world_target"]), np.asarray(meta["T_world_target_believed"])
        z = T[:3, 2]
        d = T[:3, 3] - B[:3, 3]
        axial = float(d @ z)
        lateral = float(np.linalg.norm(d - axial * z))
        m = s.get("metrics") or {}
        lines.append(f"| `{f.parent.parent.name}/{f.parent.name}` | {1e3 * lateral:.2f} | {1e3 * axial:+.2f} | "
                     f"{_num(m, 'docking.seat_height_fraction', '.3f')} | {_num(m, 'contact.peak_force_truth', '.1f')} "
                     f"| {_num(m, 'insertion.attempts', '.0f')} | {_num(m, 'docking.tilt_deg', '.2f')} |")
    return "\n".join(lines)


def issue_numbers(rows: list[dict], target: float = 0.95) -> str:
    """The issue's success and force targets read off :func:`force_quality_rows`, per robot: how many laws reach
    ``target`` success as point estimates and with the Wilson interval's lower end, and whether every law's p95
    peak is within the robot's limit."""
    out = []
    for robot in sorted({r["variant"].split("_", 1)[0] for r in rows}):
        rs = sorted((r for r in rows if r["variant"].startswith(robot + "_")), key=lambda r: r["variant"])
        point = sum(1 for r in rs if r["k"] >= target * r["n"])
        lower = sum(1 for r in rs if r["wilson"] and r["wilson"][0] >= target)
        rates = ", ".join(f"{r['variant'].split('_', 1)[1]} {100.0 * r['k'] / r['n']:.0f} %" for r in rs)
        p95 = [r["peak"][1] for r in rs]
        within = all(p <= rs[0]["limit"] for p in p95)
        out.append(f"{robot}: {point} of {len(rs)} laws at ≥ {100 * target:.0f} % success as point estimates "
                   f"({rates}), {lower} with the Wilson interval's lower end at ≥ {100 * target:.0f} %; p95 of the "
                   f"peak within {rs[0]['limit']:.0f} N for {'every law' if within else 'not every law'} "
                   f"({', '.join(f'{p:.1f} N' for p in p95)})")
    return "; ".join(out) + "."


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    a = sub.add_parser("force", help="contact force against time for several run folders, phases shaded")
    a.add_argument("runs", nargs="+", help="run folders (one law each, same case)")
    a.add_argument("--out", required=True, help="PNG file to write")
    b = sub.add_parser("violins", help="force-quality distributions per variant of a campaign folder")
    b.add_argument("folder", help="campaign folder (campaigns/<name>)")
    b.add_argument("--out", required=True, help="PNG file to write")
    c = sub.add_parser("table", help="the force-quality table (Markdown) of a campaign folder")
    c.add_argument("folder", help="campaign folder (campaigns/<name>)")
    args = ap.parse_args(argv)
    if args.what == "force":
        force_figure(args.runs, args.out)
    elif args.what == "table":
        print(force_quality_table(args.folder))
        print()
        print(failed_trials_table(args.folder))
        print()
        print(issue_numbers(force_quality_rows(args.folder)))
    else:
        violin_figure(args.folder, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
