"""Compare runs side by side: robot × planner × controller with their metrics, as Markdown and CSV.

    python experiments/compare.py RUN_DIR... [--md OUT.md] [--csv OUT.csv] [--metrics a,b,...]
    python experiments/compare.py --scenarios scenarios/a.yaml scenarios/b.yaml [--out DIR] [--md ...]

A RUN_DIR is a run folder or any folder above run folders (``runs/``, ``runs/<scenario>/``): every
run folder below it is included (``--latest`` keeps only the newest run per scenario). With
``--scenarios`` the scenarios are run first (into ``--out``, default a temporary folder) and their runs
are added to the table. Metrics are recomputed from each run's telemetry
(:func:`telemetry.metrics.metrics_from_run`); verdicts are the ones recorded in summary.json.

Markdown shows lengths in mm and 4 significant digits; CSV keeps SI units and full precision. Without
``--md``/``--csv`` the Markdown table is printed. Runs with a free-floating base or a moving target
get a second table with the orbit metrics (:data:`ORBIT_METRICS`). docs/results.md is written by::

    python experiments/compare.py --scenarios scenarios/*.yaml scenarios/orbit/*.yaml --md docs/results.md

A page written again keeps the sections other tools generated into it (between ``<!-- BEGIN name -->`` and
``<!-- END name -->``: docs/results.md's "Paper vs dockbench", experiments/paper_vs_dockbench.py).
"""

from __future__ import annotations

import csv
import io
import math
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dockbench.sim.errors import DockbenchError, reports_errors
from dockbench.telemetry.log import atomic_write_text
from dockbench.telemetry.metrics import HEADLINE_METRICS

from dockbench.cli import ArgumentParser

#: The default columns (metric names of telemetry.metrics.METRICS), in table order.
DEFAULT_METRICS: tuple[str, ...] = (
    *HEADLINE_METRICS,
    "tracking.max_segment_pos_rms",
    "tracking.max_segment_pos_peak",
    "tracking.rot_rms_deg",
    "safety.joint_pos_use",
    "safety.min_manipulability",
    "safety.saturation_ratio",
    "contact.force_spikes_truth",
)

#: The columns of the second table, for runs with a free-floating base or a moving target (docs/metrics.md,
#: "Orbit"): docking and contact, then the floating bodies.
ORBIT_METRICS: tuple[str, ...] = (
    "docking.depth",
    "docking.lateral",
    "contact.peak_force_truth",
    "orbit.base_attitude_peak_deg",
    "orbit.base_attitude_final_deg",
    "orbit.base_drift",
    "orbit.target_speed_after_seating",
    "orbit.target_rate_after_seating_deg_s",
    "orbit.momentum_exchanged",
    "orbit.momentum_drift_rel",
    "orbit.com_deviation",
)

#: Identity columns before the metrics.
ID_COLUMNS: tuple[str, ...] = ("scenario", "robot", "planner", "controller", "verdict", "rtf")


@dataclass
class Row:
    """One run in the comparison."""

    scenario: str
    robot: str
    planner: str
    controller: str
    verdict: str
    rtf: float | None
    metrics: dict[str, Any] = field(default_factory=dict)
    run_dir: Path | None = None


def find_run_dirs(paths: Sequence[str | Path], latest: bool = False) -> list[Path]:
    """Run folders (holding telemetry.npz) at or below ``paths``, sorted by scenario then time.

    Raises:
        DockbenchError: a path does not exist or holds no run folder.
    """
    found: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise DockbenchError(f"{p}: no such folder")
        if (p / "telemetry.npz").is_file():
            found.append(p)
            continue
        below = sorted(f.parent for f in p.rglob("telemetry.npz"))
        if not below:
            raise DockbenchError(f"{p}: no run folder (with telemetry.npz) at or below it")
        found.extend(below)
    uniq = sorted(dict.fromkeys(found), key=lambda d: (d.parent.name, d.name))
    if latest:
        newest: dict[str, Path] = {}
        for d in uniq:
            newest[str(d.parent)] = d  # timestamps sort lexically
        uniq = sorted(newest.values(), key=lambda d: (d.parent.name, d.name))
    return uniq


def row_from_run(run_dir: str | Path) -> Row:
    """A table row from a run folder (metrics recomputed from its telemetry)."""
    from dockbench.telemetry.metrics import compute_metrics
    from dockbench.telemetry.run import Run

    run = Run.load(run_dir)
    sc = run.meta.get("scenario") or {}
    metrics = compute_metrics(run.channels, run.meta) if len(run.t) else {}
    timing = run.meta.get("timing") or run.summary.get("timing") or {}
    rtf = timing.get("real_time_factor")
    return Row(
        scenario=run.name,
        robot=str(run.meta.get("robot") or (sc.get("robot") or {}).get("type", "?")),
        planner=str((sc.get("planner") or {}).get("type", "?")),
        controller=str((sc.get("controller") or {}).get("type", "?")),
        verdict=str(run.summary.get("verdict", "?")),
        rtf=float(rtf) if isinstance(rtf, (int, float)) else None,
        metrics=metrics,
        run_dir=run.path,
    )


def run_scenarios(files: Sequence[str | Path], out_root: str | Path) -> list[Path]:
    """Run each scenario file into ``out_root``; return the run folders (diverged runs included)."""
    from dockbench.sim.errors import SimulationDiverged
    from dockbench.sim.loop import run
    from dockbench.sim.scenario import load_scenario

    dirs = []
    for f in files:
        sc = load_scenario(f)
        print(f"running {f} ...", file=sys.stderr)
        try:
            r = run(sc, out_root=out_root)
            dirs.append(r.run_dir)
        except SimulationDiverged as exc:
            print(f"  diverged: {exc}", file=sys.stderr)
            folder = Path(out_root) / sc.name
            if folder.is_dir():
                dirs.append(sorted(folder.iterdir())[-1])
    return dirs


def _unit(metric: str) -> str:
    from dockbench.telemetry.metrics import METRICS

    return METRICS[metric][0] if metric in METRICS else ""


def _display(metric: str, value: Any) -> tuple[str, str]:
    """(display unit, formatted value) for Markdown: metres shown in mm, 4 significant digits."""
    unit = _unit(metric)
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return (("mm" if unit == "m" else unit), "–")
    if unit == "m":
        return "mm", f"{1e3 * value:.4g}"
    if isinstance(value, int):
        return unit, str(value)
    return unit, f"{value:.4g}"


def _header(metric: str) -> str:
    unit, _ = _display(metric, None)
    return f"{metric} [{unit}]" if unit else metric


def _md_escape(text: str) -> str:
    """Escape the characters that would break a Markdown table cell."""
    return text.replace("|", "\\|")


def markdown_table(rows: Sequence[Row], metrics: Sequence[str] = DEFAULT_METRICS) -> str:
    """A Markdown table: identity columns then one column per metric (units in the header)."""
    cols = ["scenario", "robot", "planner", "controller", "verdict", "RT factor"]
    cols += [_md_escape(_header(m)) for m in metrics]
    align = ["---"] * 5 + ["---:"] * (1 + len(metrics))
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join(align) + "|"]
    for r in rows:
        cells = [_md_escape(x) for x in (r.scenario, r.robot, r.planner, r.controller)]
        cells += [f"**{r.verdict}**" if r.verdict == "FAIL" else r.verdict,
                  "–" if r.rtf is None else f"{r.rtf:.1f}×"]
        cells += [_display(m, r.metrics.get(m))[1] for m in metrics]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def csv_table(rows: Sequence[Row], metrics: Sequence[str] = DEFAULT_METRICS) -> str:
    """CSV with SI values at full precision; metric headers carry the unit (``name [unit]``)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(ID_COLUMNS) + [f"{m} [{_unit(m)}]" if _unit(m) else m for m in metrics] + ["run_dir"])
    for r in rows:
        vals = []
        for m in metrics:
            v = r.metrics.get(m)
            vals.append("" if v is None or (isinstance(v, float) and not math.isfinite(v)) else repr(v))
        w.writerow([r.scenario, r.robot, r.planner, r.controller, r.verdict,
                    "" if r.rtf is None else f"{r.rtf:.3f}"] + vals + [str(r.run_dir or "")])
    return buf.getvalue()


def results_markdown(rows: Sequence[Row], metrics: Sequence[str], command: str) -> str:
    """The full docs/results.md page: how it was made, the table, the metric legend."""
    from dockbench.telemetry.metrics import METRICS

    lines = [
        "# Results",
        "",
        "Generated — do not edit by hand. Regenerate with:",
        "",
        "```",
        command,
        "```",
        "",
        "One row per run: robot × planner × controller with key metrics (definitions in",
        "[metrics.md](metrics.md)); lengths in mm, angles in degrees, forces in N. `verdict` is the",
        "scenario's gates (PASS / FAIL / INCOMPLETE); `RT factor` = simulated time / wall time on the",
        "machine that generated the table. `–` = the metric does not apply (e.g. docking metrics of a",
        "free-space tracking run).",
        "",
        markdown_table(rows, metrics).rstrip("\n"),
        "",
    ]
    orbit = [r for r in rows if any(k.startswith("orbit.") for k in r.metrics)]
    legend = list(metrics)
    if orbit:
        lines += [
            "In orbit (a free-floating base or a moving target; docs/theory/floating_base.md): the bus's",
            "attitude change and drift, the target's motion after seating, the momentum exchanged at contact",
            "and, for isolated systems, the momentum drift and the centre of mass's distance from its line.",
            "",
            markdown_table(orbit, ORBIT_METRICS).rstrip("\n"),
            "",
        ]
        legend += [m for m in ORBIT_METRICS if m not in legend]
    lines += ["| metric | unit (SI) | meaning |", "|---|---|---|"]
    for m in legend:
        unit, doc = METRICS.get(m, ("", ""))
        lines.append(f"| `{m}` | {_md_escape(unit) or '–'} | {_md_escape(doc)} |")
    return "\n".join(lines) + "\n"


def write_section(page: Path, text: str) -> None:
    """Write a generated section (``text``: ``<!-- BEGIN name ... -->`` … ``<!-- END name -->``) into the markdown
    ``page``: it replaces the page's section of the same name, or is appended (the page is written atomically).
    :func:`kept_sections` keeps it when this tool rewrites the page."""
    import re

    name = re.search(r"<!-- BEGIN (\S+)", text).group(1)
    old = page.read_text() if page.is_file() else ""
    pattern = r"<!-- BEGIN " + re.escape(name) + r".*?-->.*?<!-- END " + re.escape(name) + r" -->\n?"
    if re.search(pattern, old, flags=re.S):
        new = re.sub(pattern, lambda _: text, old, flags=re.S)
    else:
        new = old.rstrip("\n") + "\n\n" + text if old else text
    atomic_write_text(page, new)


def emit_section(text: str, page: str | Path | None, what: str) -> None:
    """A generated section's output: written into ``page`` (:func:`write_section`) with a line saying so, or,
    without a page, printed (the generator tools' ``--md`` option)."""
    if page:
        write_section(Path(page), text)
        print(f"wrote the {what} section of {page}")
    else:
        sys.stdout.write(text)


def kept_sections(page: str) -> str:
    """The generated sections of another tool in an existing page (``<!-- BEGIN name ... -->`` … ``<!-- END name
    -->``, e.g. experiments/paper_vs_dockbench.py's), which rewriting the page keeps, in their order."""
    import re

    blocks = re.findall(r"<!-- BEGIN (\S+).*?-->.*?<!-- END \1 -->\n?", page, flags=re.S)
    out = []
    for name in blocks:
        pattern = r"<!-- BEGIN " + re.escape(name) + r".*?-->.*?<!-- END " + re.escape(name) + r" -->\n?"
        m = re.search(pattern, page, re.S)
        out.append(m.group(0).rstrip("\n") + "\n")
    return "\n".join(out)


def _metric_list(arg: str | None) -> tuple[str, ...]:
    from dockbench.telemetry.metrics import METRICS

    if not arg:
        return DEFAULT_METRICS
    names = tuple(m.strip() for m in arg.split(",") if m.strip())
    unknown = [m for m in names if m not in METRICS]
    if unknown:
        raise DockbenchError(f"unknown metric(s) {', '.join(unknown)}; known: {', '.join(sorted(METRICS))}")
    return names


def _compress_glob(files: Sequence[str]) -> list[str]:
    """Show ``DIR/*.yaml`` instead of the list the shell expanded, for each folder whose files are all of
    it (in the order the folders first appear)."""
    by_folder: dict[str, list[str]] = {}
    for f in files:
        by_folder.setdefault(str(Path(f).parent), []).append(str(Path(f)))
    out: list[str] = []
    for folder, given in by_folder.items():
        every = sorted(str(p) for p in Path(folder).glob("*.yaml"))
        out += [f"{folder}/*.yaml"] if every and sorted(given) == every else given
    return out


@reports_errors
def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", nargs="*", help="run folders or folders above them")
    ap.add_argument("--scenarios", nargs="+", default=[], help="scenario files to run first")
    ap.add_argument("--out", default=None,
                    help="where --scenarios writes its runs (default: a temporary folder)")
    ap.add_argument("--latest", action="store_true", help="only the newest run per scenario")
    ap.add_argument("--metrics", default=None, help="comma-separated metric names (default: a key set)")
    ap.add_argument("--md", default=None, help="write the Markdown page here")
    ap.add_argument("--csv", default=None, help="write the CSV table here")
    args = ap.parse_args(argv)
    if not args.run_dirs and not args.scenarios:
        ap.error("give RUN_DIR... and/or --scenarios FILE...")
    command = "dockbench compare " + " ".join(
        (["--scenarios", *_compress_glob(args.scenarios)] if args.scenarios else []) + list(args.run_dirs)
        + (["--latest"] if args.latest else []) + (["--metrics", args.metrics] if args.metrics else [])
        + (["--md", args.md] if args.md else []) + (["--csv", args.csv] if args.csv else [])
    )
    metrics = _metric_list(args.metrics)
    with tempfile.TemporaryDirectory(prefix="dockbench_compare_") as tmp:
        dirs: list[Path] = []
        if args.run_dirs:
            dirs += find_run_dirs(args.run_dirs, latest=args.latest)
        if args.scenarios:
            dirs += run_scenarios(args.scenarios, args.out or tmp)
        rows = [row_from_run(d) for d in dirs]
        if args.out is None and args.scenarios:
            for r in rows:  # the temporary run folders disappear
                if r.run_dir is not None and str(r.run_dir).startswith(tmp):
                    r.run_dir = None
    if args.md:
        page = results_markdown(rows, metrics, command)
        kept = kept_sections(Path(args.md).read_text() if Path(args.md).is_file() else "")
        atomic_write_text(args.md, page + ("\n" + kept if kept else ""))
        print(f"wrote {args.md} ({len(rows)} runs)")
    if args.csv:
        atomic_write_text(args.csv, csv_table(rows, metrics))
        print(f"wrote {args.csv} ({len(rows)} runs)")
    if not args.md and not args.csv:
        print(markdown_table(rows, metrics), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
