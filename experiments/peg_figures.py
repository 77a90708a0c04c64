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
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

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
        if s.get("status") not in ("completed", "unstable"):
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


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    a = sub.add_parser("force", help="contact force against time for several run folders, phases shaded")
    a.add_argument("runs", nargs="+", help="run folders (one law each, same case)")
    a.add_argument("--out", required=True, help="PNG file to write")
    b = sub.add_parser("violins", help="force-quality distributions per variant of a campaign folder")
    b.add_argument("folder", help="campaign folder (campaigns/<name>)")
    b.add_argument("--out", required=True, help="PNG file to write")
    args = ap.parse_args(argv)
    if args.what == "force":
        force_figure(args.runs, args.out)
    else:
        violin_figure(args.folder, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
