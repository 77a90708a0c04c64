"""The misalignment envelope as a campaign: every base scenario × believed-pose errors × step sizes.

    python experiments/envelope.py run [--scenarios scenarios/keyed/*.yaml] [--jobs 2] [--out FILE.jsonl]
    python experiments/envelope.py report [--cases FILE.jsonl] [--md docs/results.md] [--figure PNG]
    python experiments/envelope.py run --quick        # 1 case per scenario and step size (a smoke test)

A case is one base scenario with its ``target.belief_offset`` replaced by a lateral offset (dx, dy) in the
target frame, a yaw ψ about the mating axis and a tilt θ about the target's x (or y) axis, run at the
scenario's timestep divided by each ``--dt-div`` (the control period stays). The default envelope is the
issue's: lateral 0, ±3, ±6 mm along x and along y (a cross of 9 points), ψ ∈ {−15, 0, 15} deg, θ ∈ {−3, 0,
3} deg about x, at dt and dt/2: 81 cases per scenario and step size. Each case is judged by its scenario's
own gates. Results are appended to a JSON-lines file, one record per case, so a stopped campaign resumes
where it stopped (cases already in the file are skipped).

``report`` turns the file into the "Misalignment envelope" section of docs/results.md (between
``<!-- BEGIN envelope -->`` and ``<!-- END envelope -->``; experiments/compare.py keeps it when it rewrites
the page): the success rate per robot × controller at each step size, whether every case kept its verdict
between them, the peak truth contact force over the envelope, time to seat and attempts, success-rate heat
maps over the lateral offsets and over yaw × tilt, and the failures; ``--figure`` also draws the lateral heat
maps as an image.

This is a plain loop over the cases (a process pool with ``--jobs``) with a per-case report (verdict changes
between step sizes, with and without the supervisor). The same envelope on the 3 × 3 lateral grid runs
through the campaign tool: ``python experiments/campaign.py scenarios/campaigns/keyed_envelope.yaml``
(docs/campaigns.md), whose section of docs/results.md is the current result.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from dockbench.cli import ArgumentParser

BEGIN = "<!-- BEGIN envelope (experiments/envelope.py report --md docs/results.md) -->"
END = "<!-- END envelope -->"
DEFAULT_OUT = "runs/envelope/cases.jsonl"
#: metrics recorded per case
RECORDED = (
    "docking.seat_error", "docking.lateral", "docking.tilt_deg", "docking.phase_deg", "docking.time_to_seat",
    "contact.peak_force_truth", "contact.force_spikes_truth", "insertion.attempts", "insertion.jams",
)


def lateral_points(pattern: str, mm: Iterable[float]) -> list[tuple[float, float]]:
    """Lateral offsets [m]: ``cross`` = each value along x and along y (0 once), ``grid`` = every (x, y) pair."""
    vals = sorted({float(v) for v in mm} | {0.0})
    if pattern == "grid":
        return [(x * 1e-3, y * 1e-3) for x in vals for y in vals]
    pts = [(0.0, 0.0)] + [(v * 1e-3, 0.0) for v in vals if v != 0.0] + [(0.0, v * 1e-3) for v in vals if v != 0.0]
    return pts


def cases(scenarios: list[Path], lateral: list[tuple[float, float]], yaws: list[float], tilts: list[float],
          tilt_axis: str, divs: list[int]) -> list[dict[str, Any]]:
    """Every (scenario, dx, dy, ψ, θ, dt divisor) as a case record (without results)."""
    out = []
    for path, (dx, dy), yaw, tilt, div in itertools.product(scenarios, lateral, yaws, tilts, divs):
        axes = ("x", "y") if tilt_axis == "both" else (tilt_axis,)
        for axis in axes:
            if tilt == 0.0 and axis != axes[0]:
                continue
            out.append({"scenario": str(path), "dx": dx, "dy": dy, "yaw_deg": yaw, "tilt_deg": tilt,
                        "tilt_axis": axis, "dt_div": div})
    return out


def case_key(c: dict[str, Any]) -> tuple:
    return (Path(c["scenario"]).stem, round(c["dx"] * 1e6), round(c["dy"] * 1e6), c["yaw_deg"], c["tilt_deg"],
            c["tilt_axis"], c["dt_div"])


def run_case(c: dict[str, Any]) -> dict[str, Any]:
    """Run one case and return its record (the case plus verdict, failed gates and :data:`RECORDED` metrics)."""
    import yaml
    from dockbench.sim.errors import DockbenchError
    from dockbench.sim.loop import run
    from dockbench.sim.scenario import scenario_from_dict

    d = yaml.safe_load(Path(c["scenario"]).read_text())
    rpy = [c["tilt_deg"] if c["tilt_axis"] == "x" else 0.0, c["tilt_deg"] if c["tilt_axis"] == "y" else 0.0,
           c["yaw_deg"]]
    d["target"]["belief_offset"] = {"position": [c["dx"], c["dy"], 0.0], "rpy_deg": rpy}
    d["sim"]["timestep"] = float(d["sim"].get("timestep", 0.001)) / c["dt_div"]
    if c.get("no_insertion"):  # the "before" measurement: the same case without the insertion supervisor
        d.pop("insertion", None)
    t0 = time.perf_counter()
    rec = dict(c)
    try:
        r = run(scenario_from_dict(d, file=c["scenario"]), out_root=None)
    except DockbenchError as exc:  # a diverged run is a failed case, with the reason
        rec.update(verdict="FAIL", status="diverged", failed=[str(exc)[:200]], metrics={})
    else:
        rec.update(
            verdict=r.verdict, status=r.status,
            failed=[g["metric"] for g in r.gates if g["verdict"] != "PASS"],
            metrics={k: _num(r.metrics.get(k)) for k in RECORDED},
            robot=r.meta["robot"], controller=r.meta["scenario"]["controller"]["type"],
        )
    rec["wall_s"] = time.perf_counter() - t0
    return rec


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def load_records(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cmd_run(args: argparse.Namespace) -> int:
    scen = [Path(p) for p in args.scenarios]
    if args.quick:
        todo = cases(scen, [(0.003, 0.0)], [15.0], [3.0], "x", [int(v) for v in args.dt_div.split(",")])
    else:
        todo = cases(scen, lateral_points(args.lateral, [float(v) for v in args.lateral_mm.split(",")]),
                     [float(v) for v in args.yaw_deg.split(",")], [float(v) for v in args.tilt_deg.split(",")],
                     args.tilt_axis, [int(v) for v in args.dt_div.split(",")])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {case_key(r) for r in load_records(out)}
    for c in todo:
        c["no_insertion"] = bool(args.no_insertion)
    todo = [c for c in todo if case_key(c) not in done]
    print(f"{len(todo)} cases to run ({len(done)} already in {out}), {args.jobs} process(es)", flush=True)
    t0 = time.perf_counter()
    with out.open("a") as fh, ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_case, c) for c in todo]
        for k, fut in enumerate(as_completed(futures), 1):
            rec = fut.result()
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            if k % 10 == 0 or k == len(todo):
                print(f"  {k}/{len(todo)}  ({time.perf_counter() - t0:.0f} s)", flush=True)
    return 0


# ------------------------------------------------------------------------------------------- report
def _pair(r: dict[str, Any]) -> tuple[str, str]:
    return r.get("robot") or Path(r["scenario"]).stem.split("_")[0], r.get("controller") or "?"


def _pct(n: int, d: int) -> str:
    return f"{100.0 * n / d:.0f} %" if d else "–"


def summary(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (robot, controller): the counts and extremes the report prints."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by[_pair(r)].append(r)
    out = {}
    for pair, recs in sorted(by.items()):
        divs = sorted({r["dt_div"] for r in recs})
        row: dict[str, Any] = {"divs": divs}
        for div in divs:
            rs = [r for r in recs if r["dt_div"] == div]
            row[div] = {
                "n": len(rs), "pass": sum(r["verdict"] == "PASS" for r in rs),
                "seated": sum("docking.depth" not in r["failed"] and r["status"] != "diverged" for r in rs),
                "peak_max": max((r["metrics"].get("contact.peak_force_truth") or 0.0) for r in rs),
                "tts": sorted(v for r in rs if (v := r["metrics"].get("docking.time_to_seat")) is not None),
                "attempts_max": max((r["metrics"].get("insertion.attempts") or 1) for r in rs),
            }
        keyed: dict[tuple, dict[int, str]] = defaultdict(dict)
        for r in recs:
            keyed[case_key(r)[:-1]][r["dt_div"]] = r["verdict"]
        both = [v for v in keyed.values() if len(v) == len(divs)]
        row["agree"] = sum(len(set(v.values())) == 1 for v in both)
        row["compared"] = len(both)
        out[pair] = row
    return out


def report(records: list[dict[str, Any]]) -> str:
    """The envelope section of docs/results.md (module docstring)."""
    if not records:
        return f"{BEGIN}\n\n(no cases recorded)\n\n{END}\n"
    summ = summary(records)
    divs = sorted({r["dt_div"] for r in records})
    yaws = sorted({r["yaw_deg"] for r in records})
    tilts = sorted({(r["tilt_deg"], r["tilt_axis"]) for r in records})
    lats = sorted({(r["dx"], r["dy"]) for r in records})
    scen = sorted({Path(r["scenario"]).as_posix() for r in records})
    n_cases = len({case_key(r)[:-1] for r in records}) // max(len(summ), 1)
    per_div = {d: len({case_key(r) for r in records if r["dt_div"] == d}) // max(len(summ), 1) for d in divs}
    lines = [
        BEGIN, "",
        "## Misalignment envelope (keyed interface)", "",
        "Generated — do not edit by hand. Regenerate with `python experiments/envelope.py run` then",
        "`python experiments/envelope.py report --md docs/results.md --figure docs/envelope.png`.",
        f"Base scenarios: {', '.join(f'`{s}`' for s in scen)}. Each case replaces the believed pose error "
        "(`target.belief_offset`) by a lateral offset in the target frame (mm: "
        + ", ".join(f"({dx * 1e3:g}, {dy * 1e3:g})" for dx, dy in lats)
        + f"), a yaw about the mating axis ({', '.join(f'{y:g}' for y in yaws)} deg) and a tilt ("
        + ", ".join(f"{t:g}° about {a}" for t, a in tilts)
        + f"): {n_cases} cases per scenario; cases per scenario run at each step size: "
        + ", ".join(f"{_dt(d)} {per_div[d]}" for d in divs)
        + " (see the tables for which; the control period stays 1 ms), judged by the scenario's own gates "
        "(seated within 1 mm of the seat of "
        "the keyed geometry, mating phase ≤ 1°, lateral ≤ 0.5 mm, tilt ≤ 0.5°, peak truth contact force ≤ 15 N on "
        "the iiwa14 and ≤ 25 N on the FR3, saturation ≤ 1 %).", "",
        "| robot | controller | " + " | ".join(f"PASS at {_dt(d)}" for d in divs)
        + " | same verdict at " + " and ".join(_dt(d) for d in divs)
        + " | peak force max [N] | time to seat median / max [s] | attempts max |",
        "|---|---|" + "---:|" * len(divs) + "---:|---:|---:|---:|",
    ]
    for (robot, ctrl), row in summ.items():
        have = [d for d in divs if d in row]  # a pair may lack a step size (a campaign still running)
        cells = [f"{row[d]['pass']}/{row[d]['n']} ({_pct(row[d]['pass'], row[d]['n'])})" if d in row else "–"
                 for d in divs]
        peak = max(row[d]["peak_max"] for d in have)
        tts = row[have[0]]["tts"]
        tts_s = f"{tts[len(tts) // 2]:.1f} / {tts[-1]:.1f}" if tts else "–"
        lines.append(
            f"| {robot} | {ctrl} | " + " | ".join(cells)
            + f" | {row['agree']}/{row['compared']} | {peak:.1f} | {tts_s}"
            + f" | {max(row[d]['attempts_max'] for d in have)} |"
        )
    # heat maps: success over the lateral offsets (all yaw and tilt cases), and over yaw × tilt (all offsets)
    lines += ["", f"Success rate at {_dt(divs[0])} over the lateral offsets (every yaw and tilt case of each offset; "
              "rows y, columns x, mm):", ""]
    xs = sorted({dx for dx, _ in lats})
    ys = sorted({dy for _, dy in lats}, reverse=True)
    for pair in summ:
        recs = [r for r in records if _pair(r) == pair and r["dt_div"] == divs[0]]
        lines += [f"**{pair[0]} / {pair[1]}**", "", "| y \\ x | " + " | ".join(f"{x * 1e3:g}" for x in xs) + " |",
                  "|---:|" + "---:|" * len(xs)]
        for y in ys:
            cells = []
            for x in xs:
                rs = [r for r in recs if r["dx"] == x and r["dy"] == y]
                cells.append(_pct(sum(r["verdict"] == "PASS" for r in rs), len(rs)) if rs else "")
            lines.append(f"| {y * 1e3:g} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [f"Success rate and peak truth contact force [N] at {_dt(divs[0])} over yaw × tilt "
              "(every lateral offset):",
              "", "| robot | controller | " + " | ".join(f"ψ {y:g}°, θ {t:g}° ({a})" for y in yaws for t, a in tilts)
              + " |", "|---|---|" + "---:|" * (len(yaws) * len(tilts))]
    for pair in summ:
        recs = [r for r in records if _pair(r) == pair and r["dt_div"] == divs[0]]
        cells = []
        for y in yaws:
            for t, a in tilts:
                rs = [r for r in recs if r["yaw_deg"] == y and r["tilt_deg"] == t and r["tilt_axis"] == a]
                pk = max(((r["metrics"].get("contact.peak_force_truth") or 0.0) for r in rs), default=0.0)
                cells.append(f"{_pct(sum(r['verdict'] == 'PASS' for r in rs), len(rs))}, {pk:.1f}" if rs else "")
        lines.append(f"| {pair[0]} | {pair[1]} | " + " | ".join(cells) + " |")
    fails = [r for r in records if r["verdict"] != "PASS"]
    lines += ["", f"Failed cases ({len(fails)}): which gates failed, counted over the cases of each pair and "
              "step size.",
              "", "| robot | controller | dt | gates failed (cases) |", "|---|---|---|---|"]
    tally: dict[tuple, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in fails:
        for g in r["failed"] or [r["status"]]:
            tally[(*_pair(r), r["dt_div"])][g] += 1
    for (robot, ctrl, div), gates in sorted(tally.items()):
        lines.append(f"| {robot} | {ctrl} | {_dt(div)} | " + ", ".join(f"`{g}` ({n})" for g, n in sorted(gates.items()))
                     + " |")
    wall = sum(r.get("wall_s", 0.0) for r in records)
    lines += ["", f"{len(records)} runs, {wall / 3600:.2f} h of process time.", "", END]
    return "\n".join(lines) + "\n"


def before_after(records: list[dict[str, Any]], before: list[dict[str, Any]]) -> str:
    """A table over the cases run both without the insertion supervisor (``run --no-insertion``) and with it:
    per robot × controller the verdicts, the cases seated (docking.depth passed) and the peak truth force."""
    after = {case_key(r): r for r in records}
    by: dict[tuple[str, str], list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for b in before:
        a = after.get(case_key(b))
        if a is not None:
            by[_pair(a)].append((b, a))
    if not by:
        return ""
    lat = sorted({(b["dx"], b["dy"]) for b in before})
    lines = [
        "", "Without and with the insertion supervisor (the `insertion:` block of each scenario dropped: "
        "`run --no-insertion`), on the cases run both ways (lateral (mm) "
        + ", ".join(f"({dx * 1e3:g}, {dy * 1e3:g})" for dx, dy in lat)
        + f"; yaw {', '.join(f'{y:g}' for y in sorted({b['yaw_deg'] for b in before}))}°; tilt "
        + ", ".join(f"{t:g}" for t in sorted({b["tilt_deg"] for b in before})) + "°):", "",
        "| robot | controller | cases | PASS without | seated without | peak force max without [N] | PASS with | "
        "seated with | peak force max with [N] |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (robot, ctrl), pairs in sorted(by.items()):
        def count(rs: list[dict[str, Any]]) -> tuple[int, int, float]:
            return (sum(r["verdict"] == "PASS" for r in rs),
                    sum("docking.depth" not in r["failed"] and r["status"] != "diverged" for r in rs),
                    max((r["metrics"].get("contact.peak_force_truth") or 0.0) for r in rs))
        pb, sb, fb = count([b for b, _ in pairs])
        pa, sa, fa = count([a for _, a in pairs])
        n = len(pairs)
        lines.append(f"| {robot} | {ctrl} | {n} | {pb}/{n} | {sb}/{n} | {fb:.1f} | {pa}/{n} | {sa}/{n} | {fa:.1f} |")
    return "\n".join(lines) + "\n"


def _dt(div: int) -> str:
    return "dt" if div == 1 else f"dt/{div}"


def figure(records: list[dict[str, Any]], path: Path) -> None:
    """The lateral success-rate heat maps (one panel per robot × controller) with the peak force per offset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    summ = summary(records)
    div = min(r["dt_div"] for r in records)
    xs = sorted({r["dx"] for r in records})
    ys = sorted({r["dy"] for r in records})
    pairs = list(summ)
    robots = sorted({p[0] for p in pairs})
    ctrls = sorted({p[1] for p in pairs})
    fig, axes = plt.subplots(len(robots), len(ctrls), figsize=(3.2 * len(ctrls), 3.0 * len(robots)), squeeze=False)
    for i, robot in enumerate(robots):
        for j, ctrl in enumerate(ctrls):
            ax = axes[i][j]
            grid = np.full((len(ys), len(xs)), np.nan)
            peak = np.full_like(grid, np.nan)
            for r in records:
                if _pair(r) != (robot, ctrl) or r["dt_div"] != div:
                    continue
                iy, ix = ys.index(r["dy"]), xs.index(r["dx"])
                ok = 1.0 if r["verdict"] == "PASS" else 0.0
                grid[iy, ix] = ok if np.isnan(grid[iy, ix]) else grid[iy, ix] + ok
                pk = r["metrics"].get("contact.peak_force_truth") or 0.0
                peak[iy, ix] = pk if np.isnan(peak[iy, ix]) else max(peak[iy, ix], pk)
            counts = np.zeros_like(grid)
            for r in records:
                if _pair(r) == (robot, ctrl) and r["dt_div"] == div:
                    counts[ys.index(r["dy"]), xs.index(r["dx"])] += 1
            with np.errstate(invalid="ignore"):
                rate = grid / counts
            ax.imshow(rate, origin="lower", vmin=0, vmax=1, cmap="RdYlGn",
                      extent=(-0.5, len(xs) - 0.5, -0.5, len(ys) - 0.5))
            for iy in range(len(ys)):
                for ix in range(len(xs)):
                    if counts[iy, ix]:
                        ax.text(ix, iy, f"{100 * rate[iy, ix]:.0f}%\n{peak[iy, ix]:.0f} N", ha="center", va="center",
                                fontsize=7)
            ax.set_xticks(range(len(xs)), [f"{x * 1e3:g}" for x in xs])
            ax.set_yticks(range(len(ys)), [f"{y * 1e3:g}" for y in ys])
            ax.set_title(f"{robot} / {ctrl}", fontsize=9)
            ax.set_xlabel("lateral x [mm]", fontsize=8)
            ax.set_ylabel("lateral y [mm]", fontsize=8)
    fig.suptitle(f"Envelope success rate (over yaw × tilt) and peak force per lateral offset ({_dt(div)})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cmd_report(args: argparse.Namespace) -> int:
    records = load_records(Path(args.cases))
    text = report(records)
    if args.before:
        text = text.replace(f"\n{END}", before_after(records, load_records(Path(args.before))) + f"\n{END}")
    if args.figure and records:
        figure(records, Path(args.figure))
        text = text.replace(END, f"![envelope heat maps]({Path(args.figure).name})\n\n{END}")
    from dockbench.experiments.compare import emit_section

    emit_section(text, args.md, f"envelope ({len(records)} runs)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the cases (resumes)")
    keyed = [f"scenarios/keyed/{r}_keyed_{c}.yaml" for r in ("iiwa14", "fr3") for c in ("khatib", "hqp", "se3")]
    keyed = [p if Path(p).is_file() else f"experiments/open/{Path(p).name}" for p in keyed]  # FR3 HQP: see there
    r.add_argument("--scenarios", nargs="+", default=keyed)
    r.add_argument("--lateral", choices=("cross", "grid"), default="cross")
    r.add_argument("--lateral-mm", default="-6,-3,3,6")
    r.add_argument("--yaw-deg", default="-15,0,15")
    r.add_argument("--tilt-deg", default="-3,0,3")
    r.add_argument("--tilt-axis", choices=("x", "y", "both"), default="x")
    r.add_argument("--dt-div", default="1,2", help="timestep divisors (1 = the scenario's dt)")
    r.add_argument("--jobs", type=int, default=1)
    r.add_argument("--out", default=DEFAULT_OUT)
    r.add_argument("--no-insertion", action="store_true",
                   help="drop each scenario's insertion: block (the supervisor off: the baseline to compare with)")
    r.add_argument("--quick", action="store_true", help="one case (3 mm, 15° yaw, 3° tilt) per scenario and dt")
    p = sub.add_parser("report", help="write the report")
    p.add_argument("--cases", default=DEFAULT_OUT)
    p.add_argument("--md", default=None)
    p.add_argument("--figure", default=None, help="also draw the lateral heat maps into this PNG")
    p.add_argument("--before", default=None, help="records of `run --no-insertion`: add the before/after table")
    args = ap.parse_args(argv)
    return cmd_run(args) if args.cmd == "run" else cmd_report(args)


if __name__ == "__main__":
    raise SystemExit(main())
