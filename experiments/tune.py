"""Robust gain tuning over a campaign with Optuna (docs/tuning.md).

    python experiments/tune.py scenarios/studies/fr3_keyed_khatib.yaml
    python experiments/tune.py STUDY.yaml --candidates 40 --jobs 2 --out studies
    python experiments/tune.py --compare scenarios/studies/fr3_keyed_*.yaml --candidates 8 --md docs/results.md

Writes ``<out>/<study name>/``: ``study.db`` (Optuna's SQLite storage), ``shipped/`` (the campaign with the
scenario's own values), ``candidates/c0000/`` … (each candidate's campaign folder: results.csv, summary.json),
``candidates.csv``, ``study.json`` and two figures. Rerunning the same command resumes the study (after any
kill: no candidate lost, none evaluated twice). ``--compare`` runs every study with the same budget and
writes the tuned-vs-shipped table (Markdown) and its figures.

Exit codes: 0 = the study holds its candidates, 1 = an error (a bad study file: the message names the file and
key) or an interruption (rerun to resume), 64 = a command-line usage error.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from dockbench.experiments.campaign import add_executor_arguments
from dockbench.sim.errors import DockbenchError

from dockbench.cli import ArgumentParser

PEAK = "contact.peak_force_truth"
SEAT_TIME = "docking.time_to_seat"


def _f(x: Any, spec: str = ".3g") -> str:
    return "–" if x is None else format(x, spec)


def _stats_cells(s: dict[str, Any]) -> list[str]:
    ci = s.get("wilson95")
    pk = s.get(PEAK) or {}
    ts = s.get(SEAT_TIME) or {}
    rate = f"{s['passed']}/{s['trials']}" + (f" ({s['success_rate']:.0%})" if s.get("success_rate") is not None else "")
    return [rate, f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "–", _f(pk.get("median"), ".1f"), _f(pk.get("p95"), ".1f"),
            _f(pk.get("max"), ".1f"), _f(ts.get("median"), ".2f")]


def _params(params: dict[str, Any], study: Any) -> str:
    """``key = value, …``; a tied parameter (``key: [a, b]``) as ``a = b = value``."""
    labels = {p.key: p.label for p in study.search}
    return ", ".join(f"{labels.get(k, k)} = {v:.4g}" if isinstance(v, float)
                     else f"{labels.get(k, k)} = {v}" for k, v in params.items())


def _shipped_values(study) -> dict[str, Any]:
    """The searched keys' values in the (first) base scenario as shipped, resolved by the scenario schema (a
    key the file leaves out shows its default)."""
    from dockbench.sim.campaign.runner import _read_base
    from dockbench.sim.overrides import parse_path
    from dockbench.sim.scenario import scenario_from_dict

    t = study.campaign.trials()[0]
    resolved = scenario_from_dict(t.scenario_data(_read_base(t.base)), file=str(t.base))
    out = {}
    for p in study.search:
        values = []
        for key in p.keys:
            node: Any = resolved
            try:
                for part in parse_path(key, where="search"):
                    node = node[part] if isinstance(part, int) else getattr(node, part)
            except (AttributeError, IndexError, TypeError):
                node = "(default)"
            values.append(node)
        # tied keys shipped with different values show each (a = b = 1000 / 800)
        out[p.key] = values[0] if all(v == values[0] for v in values) else " / ".join(map(str, values))
    return out


def table(pairs: list[tuple[Any, Any]]) -> list[str]:
    """The tuned-vs-shipped rows, one pair per study."""
    lines = ["| law | gains | success | Wilson 95% | median peak [N] | p95 peak [N] | max peak [N] | "
             "median time to seat [s] | values |",
             "|---|---|---|---|---|---|---|---|---|"]
    for study, rep in pairs:
        if rep.shipped:
            lines.append(f"| {study.label} | shipped | " + " | ".join(_stats_cells(rep.shipped))
                         + f" | {_params(_shipped_values(study), study)} |")
        tuned = rep.tuned
        if tuned is not None:
            how = ", the best of the confirmed on the envelope" if rep.confirmed is not None else ""
            lines.append(f"| {study.label} | tuned ({Path(tuned.folder).name}{how}) | "
                         + " | ".join(_stats_cells(tuned.stats)) + f" | {_params(tuned.params, study)} |")
        else:
            lines.append(f"| {study.label} | tuned | no feasible candidate of {len(rep.candidates)} | | | | | | |")
        for what, after in (("envelope", rep.envelope), ("held out", rep.holdout)):
            for key in ("shipped", "tuned"):
                held = (after or {}).get(key)
                if held:
                    lines.append(f"| {study.label} | {key}, {what} | " + " | ".join(_stats_cells(held)) + " | |")
    return lines


def figures(pairs: list[tuple[Any, Any]], folder: Path, prefix: str) -> list[Path]:
    """The optimisation history (success rate's Wilson lower bound and p95 peak per candidate, best so far) and
    the p95 peak vs success scatter with each law's Pareto front and its shipped gains."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7.5, 6.0), sharex=True)
    for k, (study, rep) in enumerate(pairs):
        color = f"C{k}"
        nums = [c.number for c in rep.candidates]
        low = [(c.stats.get("wilson95") or [None])[0] for c in rep.candidates]
        p95 = [(c.stats.get(PEAK) or {}).get("p95") for c in rep.candidates]
        pruned = [c.state == "PRUNED" for c in rep.candidates]
        ax1.plot(nums, low, "-", color=color, alpha=0.4)
        ax1.scatter([n for n, p in zip(nums, pruned, strict=True) if not p],
                    [v for v, p in zip(low, pruned, strict=True) if not p], color=color, label=study.label, s=18)
        ax1.scatter([n for n, p in zip(nums, pruned, strict=True) if p],
                    [v for v, p in zip(low, pruned, strict=True) if p], facecolors="none", edgecolors=color, s=18)
        p95 = [v if v is not None else float("nan") for v in p95]
        ax2.scatter([n for n, p in zip(nums, pruned, strict=True) if not p],
                    [v for v, p in zip(p95, pruned, strict=True) if not p], color=color, s=18)
        ax2.scatter([n for n, p in zip(nums, pruned, strict=True) if p],
                    [v for v, p in zip(p95, pruned, strict=True) if p], facecolors="none", edgecolors=color, s=18)
        best = None
        run = []
        for c in rep.candidates:  # best p95 so far among the feasible candidates
            v = (c.stats.get(PEAK) or {}).get("p95")
            if c.feasible and v is not None:
                best = v if best is None else min(best, v)
            run.append(best if best is not None else float("nan"))
        ax2.step(nums, run, where="post", color=color)
        if rep.shipped:
            ax2.axhline(rep.shipped[PEAK]["p95"], color=color, ls=":", lw=1)
    ax1.set_ylabel("success: Wilson 95% lower bound")
    ax1.set_ylim(-0.02, 1.02)
    from matplotlib.ticker import MaxNLocator

    ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax1.legend(fontsize=8, title="filled: complete, hollow: pruned", title_fontsize=7)
    ax2.set_ylabel("p95 peak truth contact force [N]")
    ax2.set_xlabel("candidate")
    ax2.set_title("line: best feasible so far; dotted: shipped gains; hollow: pruned (its trials so far)", fontsize=8)
    fig.tight_layout()
    hist = folder / f"{prefix}_history.png"
    fig.savefig(hist, dpi=110)
    plt.close(fig)

    from dockbench.sim.campaign.study import Term, pareto_front

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for k, (study, rep) in enumerate(pairs):
        color = f"C{k}"
        done = [c for c in rep.candidates if c.state == "COMPLETE"]
        xs = [(c.stats.get(PEAK) or {}).get("p95") for c in done]
        ys = [c.stats.get("success_rate") for c in done]
        ax.scatter(xs, ys, color=color, s=16, alpha=0.5, label=f"{study.label} candidates")
        pts = [c for c, x in zip(done, xs, strict=True) if x is not None]
        if pts:
            import dataclasses

            view = dataclasses.replace(study, objectives=(Term("success_rate", direction="maximize"),
                                                          Term("p95", PEAK, direction="minimize")), mode="pareto")
            tagged = [dataclasses.replace(c, values=[c.stats["success_rate"], c.stats[PEAK]["p95"]]) for c in pts]
            front = sorted(pareto_front(view, tagged), key=lambda c: c.values[1])
            ax.plot([c.values[1] for c in front], [c.values[0] for c in front], "-o", color=color, ms=4)
        if rep.shipped:
            ax.scatter([rep.shipped[PEAK]["p95"]], [rep.shipped["success_rate"]], marker="*", s=150, color=color,
                       edgecolors="k", label=f"{study.label} shipped")
    ax.set_xlabel("p95 peak truth contact force [N]")
    ax.set_ylabel("success rate")
    ax.set_title("candidates, Pareto front (line) and shipped gains (star)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    par = folder / f"{prefix}_pareto.png"
    fig.savefig(par, dpi=110)
    plt.close(fig)
    out = [hist, par]
    imp = importance_figure(pairs, folder / f"{prefix}_importance.png")
    env = envelope_figure(pairs, folder / f"{prefix}_envelope.png")
    return out + [f for f in (imp, env) if f is not None]


def _short(key: str) -> str:
    """A searched key without its section (controller., insertion.compliance.): figure labels."""
    for head in ("insertion.compliance.", "insertion.guard.", "insertion.", "controller."):
        key = key.replace(head, "")
    return key


def param_importances(study, rep) -> dict[str, float] | None:
    """Each searched parameter's importance for the study's objective over its complete candidates: Optuna's
    PED-ANOVA (``PedAnovaImportanceEvaluator``: how differently the best candidates' values are distributed
    from all candidates'; no extra dependency), normalised to sum 1. None with fewer than 3 complete
    candidates, a multi-objective study or when the evaluator cannot separate them."""
    import optuna
    from dockbench.sim.campaign.study import DB_FILE

    if len(study.directions) != 1 or sum(c.state == "COMPLETE" for c in rep.candidates) < 3:
        return None
    ostudy = optuna.load_study(study_name=study.name, storage=f"sqlite:///{(rep.out_dir / DB_FILE).resolve()}")
    try:
        imp = optuna.importance.get_param_importances(
            ostudy, evaluator=optuna.importance.PedAnovaImportanceEvaluator())
    except (RuntimeError, ValueError):
        return None
    total = sum(imp.values())
    return {k: v / total for k, v in imp.items()} if total > 0 else None


def importance_figure(pairs: list[tuple[Any, Any]], path: Path) -> Path | None:
    """Per law, its parameters' importances (:func:`param_importances`) as horizontal bars; None when no law
    has them."""
    import matplotlib.pyplot as plt

    rows = [(study, param_importances(study, rep)) for study, rep in pairs]
    rows = [(s, imp) for s, imp in rows if imp]
    if not rows:
        return None
    labels = {p.key: _short(p.label) for s, _ in rows for p in s.search}
    fig, axes = plt.subplots(1, len(rows), figsize=(3.6 * len(rows), 2.8), squeeze=False)
    for k, (ax, (study, imp)) in enumerate(zip(axes[0], rows, strict=True)):
        keys = sorted(imp, key=imp.get)
        ax.barh([labels.get(x, x) for x in keys], [imp[x] for x in keys], color=f"C{k}")
        ax.set_xlim(0, 1)
        ax.set_title(study.label, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("importance (PED-ANOVA)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _grid_peaks(study, rep, key: str) -> tuple[Any, np.ndarray, np.ndarray] | None:
    """The envelope campaign's peak truth contact force per cell of its first two grid axes (the max over
    the other axes' cases) for ``key`` (shipped | tuned): (the two axes, the (ny, nx) array, NaN where no
    trial ran, and the (ny, nx) counts of trials that failed a gate); None without an envelope run or with
    fewer than two grid axes."""
    import csv

    env = rep.envelope and rep.envelope.get(key)
    grid = [a for a in study.envelope.grid_axes if len(a.keys) == 1] if study.envelope is not None else []
    if not env or len(grid) < 2:
        return None
    ax_x, ax_y = grid[0], grid[1]
    out = np.full((len(ax_y.values), len(ax_x.values)), np.nan)
    failed = np.zeros(out.shape, dtype=int)
    # results.csv writes a one-key axis' value in the column of the axis' name
    cells_x, cells_y = ([str(v[0]) for v in a.values] for a in (ax_x, ax_y))
    with open(rep.out_dir / env["folder"] / "results.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            try:
                ix, iy = cells_x.index(row[ax_x.name]), cells_y.index(row[ax_y.name])
                peak = float(row[PEAK])
            except (KeyError, ValueError):
                continue
            out[iy, ix] = peak if np.isnan(out[iy, ix]) else max(out[iy, ix], peak)
            failed[iy, ix] += row.get("verdict") != "PASS"
    return (ax_x, ax_y), out, failed


def envelope_figure(pairs: list[tuple[Any, Any]], path: Path) -> Path | None:
    """Per law (columns), the shipped and the tuned values (rows): the largest peak truth contact force over
    each cell of the envelope's first two axes (the other axes' cases folded in), as a heat map with the
    values written in; None when no study ran an envelope of two or more grid axes."""
    import matplotlib.pyplot as plt

    cols = []
    for study, rep in pairs:
        maps = {k: _grid_peaks(study, rep, k) for k in ("shipped", "tuned")}
        if all(m is not None for m in maps.values()):
            cols.append((study, maps))
    if not cols:
        return None
    vmax = max(float(np.nanmax(m[1])) for _, maps in cols for m in maps.values())
    fig, axes = plt.subplots(2, len(cols), figsize=(3.4 * len(cols), 6.4), squeeze=False)
    for j, (study, maps) in enumerate(cols):
        for i, key in enumerate(("shipped", "tuned")):
            (ax_x, ax_y), val, failed = maps[key]
            ax = axes[i][j]
            im = ax.imshow(val, origin="lower", cmap="viridis", vmin=0.0, vmax=vmax)
            for (r, c), v in np.ndenumerate(val):
                if not np.isnan(v):
                    bad = f"\n{failed[r, c]} failed" if failed[r, c] else ""
                    ax.text(c, r, f"{v:.1f}{bad}", ha="center", va="center", fontsize=7,
                            color="w" if v < 0.6 * vmax else "k", fontweight="bold" if bad else "normal")
            ax.set_xticks(range(len(ax_x.labels)), ax_x.labels, fontsize=7)
            ax.set_yticks(range(len(ax_y.labels)), ax_y.labels if j == 0 else [], fontsize=7)
            ax.set_xlabel(ax_x.name, fontsize=8)
            if j == 0:
                ax.set_ylabel(ax_y.name, fontsize=8)
            ax.set_title(f"{study.label}, {key}", fontsize=9)
    fig.colorbar(im, ax=axes, shrink=0.8, label="largest peak truth contact force [N]")
    fig.suptitle("the whole envelope: each cell's largest peak over the other axes' cases (and the trials that "
                 "failed a gate)", fontsize=9)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def _timing_text(study, rep) -> str:
    """A law's candidates and the campaign wall time they took (from every session: each candidate keeps
    its campaign's), and this session's study-layer overhead when it evaluated any."""
    n = len(rep.candidates)
    wall = sum(c.wall_s for c in rep.candidates)
    text = f"{study.label}: {n} candidates in {wall:.0f} s of campaign wall time" + (
        f" ({n / wall * 3600:.0f} per hour)" if wall > 0 else "")
    t = rep.timing
    if t.get("evaluated") and t.get("study_overhead_share") is not None:
        text += (f", {t['evaluated']} of them in this session with a study-layer overhead of "
                 f"{100 * t['study_overhead_share']:.1f} %")
    return text


def _after_text(study) -> str:
    """What the envelope and held-out rows are (the campaigns run after the study), for the section's text."""
    out = ""
    for what, camp in (("envelope", study.envelope), ("held out", study.holdout)):
        if camp is None:
            continue
        grid = ", ".join(f"{a.name} ({len(a.values)})" for a in camp.grid_axes)
        rand = [a.name for a in camp.axes if a not in camp.grid_axes]
        desc = (f"the grid {grid}" if grid else "") + (" × " if grid and rand else "") + (
            f"{camp.samples} random draws of {', '.join(rand)} (seed {camp.seed})" if rand else "")
        out += (f" Rows '{what}': the shipped values and the tuned candidate's on {camp.n_trials} trials "
                f"({desc})" + (", cases the tuner never saw." if what == "held out" else
                               ", the whole envelope the tuning cases were drawn from."))
        if what == "envelope" and study.confirm > 1:
            out += (f" The study's {study.confirm} best feasible candidates ran on the envelope; the tuned values "
                    "are the one that meets the constraints there with the best objective value.")
    return out


def section(pairs: list[tuple[Any, Any]], figs: list[Path], page: str | None, budget: int) -> str:
    import os

    study0 = pairs[0][0]
    camp = study0.campaign
    axes = ", ".join(f"{a.name} ({len(a.values)})" for a in camp.grid_axes)
    obj = " then ".join(f"{t.direction} {t.label}" for t in study0.objectives)
    cons = ", ".join(f"{t.label}" + (f" ≥ {t.min:g}" if t.min is not None else "")
                     + (f" ≤ {t.max:g}" if t.max is not None else "") for t in study0.constraints) or "none"
    timing = [_timing_text(s, r) for s, r in pairs]
    lines = [
        "<!-- BEGIN tune-compare (generated by experiments/tune.py --compare) -->",
        "## Tuned vs shipped gains",
        "",
        f"`dockbench tune --compare {' '.join(str(s.file) for s, _ in pairs)} --candidates {budget}`: each law "
        f"tuned by the same procedure with the same budget — {budget} candidates × {camp.n_trials} trials "
        f"(the campaign's grid: {axes or 'one cell'}), sampler {study0.sampler['type']} (seed "
        f"{study0.sampler['seed']}), objective {obj}, constraints {cons}"
        + (", pruned once a constraint cannot hold" if study0.prune else "") + ". "
        "A trial succeeds when it passes every gate of its scenario. Shipped: the scenario's own values on the "
        "same campaign. Tuned: the best feasible candidate (docs/tuning.md). Peaks are over every trial."
        + _after_text(study0),
        "",
        *table(pairs),
        "",
        "Timing: " + "; ".join(timing) + ".",
        "",
    ]
    base = Path(page).parent if page else Path.cwd()
    for f in figs:
        rel = os.path.relpath(f, base)
        lines.append(f"![{f.stem.replace('_', ' ')}]({rel})")
        lines.append("")
    lines.append("<!-- END tune-compare -->")
    return "\n".join(lines) + "\n"


def _print_report(study, rep) -> None:
    t = rep.timing
    print(f"study      {study.name} ({study.label}): {len(rep.candidates)} candidates "
          f"({sum(c.state == 'PRUNED' for c in rep.candidates)} pruned), {rep.timing['evaluated']} evaluated now"
          + (f", resumed {rep.resumed}" if rep.resumed else ""))
    if t["evaluated"]:
        print(f"timing     wall {t['wall_s']:.1f} s, campaigns {t['campaigns_wall_s']:.1f} s → study overhead "
              f"{_f(t['study_overhead_share'] and 100 * t['study_overhead_share'], '.2f')} %; "
              f"{_f(t['candidates_per_hour'], '.1f')} candidates/hour on {t['workers']} worker(s)")
    for line in table([(study, rep)]):
        print(line)
    print(f"folder     {rep.out_dir}")


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("studies", nargs="+", help="study YAML file(s) (docs/tuning.md); several need --compare")
    ap.add_argument("--out", default="studies", help="parent folder of the study folders (default: studies)")
    ap.add_argument("--candidates", type=int, default=None,
                    help="the budget: finished candidates the study should hold (default: the study's candidates)")
    add_executor_arguments(ap, " of each candidate's campaign")
    ap.add_argument("--compare", action="store_true",
                    help="tune every study with the same budget and write the tuned-vs-shipped table and figures")
    ap.add_argument("--md", default=None, metavar="PAGE",
                    help="--compare: write the table as a section of this markdown page (e.g. docs/results.md) and "
                    "the figures to its img/ folder; default: print it")
    ap.add_argument("--no-shipped", action="store_true", help="do not run the shipped gains' campaign")
    ap.add_argument("--no-envelope", action="store_true",
                    help="do not run the shipped and best values on the study's whole envelope (envelope:)")
    ap.add_argument("--no-holdout", action="store_true",
                    help="do not run the shipped and best values on the study's held-out cases (holdout:)")
    ap.add_argument("--fresh", action="store_true", help="delete the study folder first (no resume)")
    ap.add_argument("--stop-after", type=int, default=None, metavar="N",
                    help="evaluate at most N candidates in this session (the rest on a rerun)")
    ap.add_argument("--no-progress", action="store_true", help="no per-candidate lines")
    args = ap.parse_args(argv)
    if len(args.studies) > 1 and not args.compare:
        ap.error("several study files need --compare")
    if args.md and not args.compare:
        ap.error("--md writes the --compare table")
    if args.candidates is not None and args.candidates < 1:
        ap.error("--candidates must be >= 1")

    from dockbench.sim.campaign.executors import make_executor
    from dockbench.sim.campaign.study import load_study, run_study

    try:
        studies = [load_study(f) for f in args.studies]
        if args.compare:
            budgets = {s.candidates for s in studies}
            if args.candidates is None and len(budgets) > 1:
                raise DockbenchError(f"the studies have different budgets ({sorted(budgets)} candidates): a fair "
                                     "comparison tunes each with the same; pass --candidates N")
            trials = {s.campaign.n_trials for s in studies}
            if len(trials) > 1:
                raise DockbenchError(f"the studies' campaigns have different trial counts ({sorted(trials)}): a fair "
                                     "comparison runs each law on the same envelope")
        budget = args.candidates or studies[0].candidates
        executor = make_executor(args.executor, args.jobs, args.address)
        pairs = []
        try:
            for s in studies:
                rep = run_study(s, args.out, executor, candidates=budget, shipped=not args.no_shipped,
                                fresh=args.fresh, progress=None if args.no_progress else sys.stderr,
                                stop_after=args.stop_after, holdout=not args.no_holdout,
                                envelope=not args.no_envelope)
                pairs.append((s, rep))
                _print_report(s, rep)
        finally:
            executor.close()
        if not args.compare:
            s, rep = pairs[0]
            figs = figures(pairs, rep.out_dir, "study")
            print(f"figures    {', '.join(str(f) for f in figs)}")
            return 0
        from dockbench.experiments.compare import emit_section

        img = Path(args.md).parent / "img" if args.md else Path(args.out)
        figs = figures(pairs, img, "tune_compare")
        emit_section(section(pairs, figs, args.md, budget), args.md, "tuned-vs-shipped")
    except DockbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: rerun the same command to resume", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
