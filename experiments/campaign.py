"""Run a campaign (parameter sweep or Monte Carlo study) from one YAML file.

    python experiments/campaign.py scenarios/campaigns/iiwa14_stiffness_sweep.yaml
    python experiments/campaign.py CAMPAIGN.yaml --jobs 2 --out campaigns
    python experiments/campaign.py CAMPAIGN.yaml --executor ray [--address auto | HOST:PORT]
    python experiments/campaign.py CAMPAIGN.yaml --dry-run

Writes ``<out>/<campaign name>/``: one folder per trial (summary, meta, telemetry by the campaign's
``telemetry:`` policy), ``results.csv`` (one row per trial), ``summary.json`` (per cell: success rate with
its Wilson 95% interval, median / p95 of the key metrics) and figures. Rerunning the same command
resumes: finished trials are skipped. The format is documented in docs/campaigns.md.

Exit codes: 0 = every trial ran (whatever their verdicts: failures are results), 1 = error (bad campaign or
scenario: the message names the file and key) or interrupted (rerun to resume).
"""

from __future__ import annotations

import sys
import time

from dockbench.sim.errors import DockbenchError

from dockbench.cli import ArgumentParser


def _fmt(x, spec=".3g") -> str:
    return "–" if x is None else format(x, spec)


def format_report(report) -> str:
    """The end-of-campaign table: totals, timing, and the cells (up to 40)."""
    s = report.summary
    tm = s["timing"]
    lines = [f"campaign   {s['campaign']}  ({s['finished']}/{s['trials']} trials; ran {report.ran}, "
             f"skipped {report.skipped} already done)"]
    ci = s.get("wilson95")
    lines.append(f"success    {s['passed']}/{s['finished']}" + (f"  ({s['success_rate']:.1%}, Wilson 95% "
                 f"[{ci[0]:.1%}, {ci[1]:.1%}])" if ci else ""))
    if report.ran:
        lines.append(
            f"timing     wall {tm['wall_s']:.1f} s on {tm['workers']} worker(s) ({tm['executor']}); Σ loop "
            f"{tm['sum_loop_s']:.1f} s → wall / (Σ loop / workers) = {_fmt(tm['wall_over_ideal'], '.3f')}; "
            f"overhead per trial {_fmt(tm['median_overhead_s'] and 1e3 * tm['median_overhead_s'], '.1f')} ms "
            f"(median, {_fmt(tm['median_overhead_share'] and 100 * tm['median_overhead_share'], '.1f')}% of a "
            f"trial); load {tm['load_avg_start']} → {tm['load_avg_end']}")
    t = s["telemetry"]
    lines.append(f"telemetry  {t['policy']}: {t['kept']} kept ({t['kept_mb']:.1f} MB"
                 + (f", {t['over_budget']} over the {t['budget_mb']:g} MB budget" if t["over_budget"] else "")
                 + f"); folder {s['disk_mb']:.1f} MB"
                 + (f" ({s['stale_trials']} trial folders of an earlier version of the campaign: --fresh removes them)"
                    if s.get("stale_trials") else ""))
    cells = s["cells"]
    if cells:
        width = min(60, max(len(c) for c in cells))
        key = s["metrics"][0] if s["metrics"] else None
        lines.append(f"  {'cell':<{width}}  {'pass':>7}  {'rate':>6}  {'Wilson 95%':>15}"
                     + (f"  {'median ' + key:>30}" if key else ""))
        for k, (name, c) in enumerate(cells.items()):
            if k == 40:
                lines.append(f"  … {len(cells) - 40} more cells in summary.json")
                break
            w = c["wilson95"]
            med = c["metrics"].get(key, {}).get("median") if key else None
            lines.append(f"  {name[:width]:<{width}}  {c['passed']:>3}/{c['trials']:<3}  {c['success_rate']:>6.0%}  "
                         f"[{w[0]:5.1%}, {w[1]:5.1%}]" + (f"  {_fmt(med, '30.4g')}" if key else ""))
    if report.damaged:
        lines.append(f"damaged    {len(report.damaged)} trial record(s) were damaged and ran again (summary.json: "
                     "damaged)")
    if report.interrupted:
        lines.append("interrupted: rerun the same command to resume")
    lines.append(f"folder     {report.out_dir}")
    if report.figures:
        lines.append(f"figures    {', '.join(p.name for p in report.figures)}")
    return "\n".join(lines)


def with_overrides(camp, sets: list[str], telemetry: str | None = None):
    """``camp`` with the command line's ``--set KEY=VALUE`` items merged after its own ``set:`` and, when given,
    its telemetry policy replaced (a DockbenchError naming a recursive or too deeply nested value)."""
    import dataclasses

    from dockbench.sim.overrides import format_path, parse_assignment

    if sets:
        extra = {}
        for item in sets:
            try:
                path, value = parse_assignment(item)
            except RecursionError:  # a recursive YAML value (&a [*a]) or one nested too deep
                raise DockbenchError(f"--set {item[:60]}: a recursive or too deeply nested value") from None
            extra[format_path(path)] = value
        camp = dataclasses.replace(camp, set={**(camp.set or {}), **extra})
    if telemetry:
        camp = dataclasses.replace(camp, telemetry=telemetry)
    return camp


def add_executor_arguments(ap: ArgumentParser, whose: str = "") -> None:
    """``--jobs``, ``--executor`` and ``--address``: where a campaign's trials run (also gym_campaign.py and
    tune.py; ``whose`` qualifies the workers in ``--jobs``' help, e.g. " of each candidate's campaign")."""
    ap.add_argument("--jobs", "-j", type=int, default=None,
                    help=f"worker processes{whose} (default: every core; 1 = run in this process)")
    ap.add_argument("--executor", choices=("local", "ray"), default="local",
                    help="local process pool (default) or Ray (pip extra 'ray'; docs/campaigns.md)")
    ap.add_argument("--address", default=None,
                    help="--executor ray: the cluster's address HOST:PORT (auto = this machine's cluster; "
                    "token authentication: RAY_AUTH_MODE=token and the token, docs/campaigns.md 'A Ray cluster'); "
                    "default: a local instance")


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaign", help="campaign YAML file (docs/campaigns.md)")
    ap.add_argument("--out", default="campaigns", help="parent folder of campaign folders (default: campaigns)")
    add_executor_arguments(ap)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override of every trial's scenario (after the campaign's set; repeatable)")
    ap.add_argument("--samples", type=int, default=None, help="override the campaign's samples (random draws per cell)")
    ap.add_argument("--repeats", type=int, default=None, help="override the campaign's repeats (seeds per sample)")
    ap.add_argument("--telemetry", choices=("all", "failures", "none"), default=None,
                    help="override the campaign's telemetry policy")
    ap.add_argument("--fresh", action="store_true", help="delete the campaign's folder first (no resume)")
    ap.add_argument("--dry-run", action="store_true", help="list the cells and the number of trials, run nothing")
    ap.add_argument("--no-figures", action="store_true", help="no figures")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--allow-plugins", action="store_true",
                    help="import the plugins the base scenario or set: names (Python code, run in the driver and "
                    "every worker); without this (or DOCKBENCH_ALLOW_PLUGINS=1) such a campaign is refused "
                    "(docs/extending.md)")
    ap.add_argument("--max-hours", type=float, default=24.0,
                    help="refuse a campaign estimated to take longer (default 24; 0 = no limit)")
    ap.add_argument("--no-disk-check", action="store_true",
                    help="run even when the estimated disk (records + telemetry budget) exceeds the free space")
    args = ap.parse_args(argv)
    if args.allow_plugins:  # the environment carries the opt-in to the local workers; Ray's get it from the
        # driver's runtime env (sim/plugins.py, sim/campaign/executors.py)
        import os

        os.environ["DOCKBENCH_ALLOW_PLUGINS"] = "1"

    import dataclasses

    import yaml
    from dockbench.sim.campaign import load_campaign, run_campaign
    from dockbench.sim.campaign.executors import make_executor

    try:
        camp = load_campaign(args.campaign)
        camp = with_overrides(camp, args.set, args.telemetry)
        if args.samples is not None or args.repeats is not None:
            from dockbench.sim.campaign.spec import campaign_from_dict

            data = yaml.safe_load(camp.file.read_text())
            data.update({k: v for k, v in (("samples", args.samples), ("repeats", args.repeats)) if v is not None})
            checked = campaign_from_dict(data, camp.file)  # the same checks as the file's own keys
            camp = dataclasses.replace(camp, samples=checked.samples, repeats=checked.repeats)
        if args.dry_run:
            from dockbench.sim.campaign.executors import available_cores
            from dockbench.sim.campaign.runner import _fmt_s, estimate

            est = estimate(camp, args.jobs or available_cores())
            print(f"campaign {camp.name}: {camp.n_cells} cells × {camp.samples} samples × {camp.repeats} repeats = "
                  f"{camp.n_trials} trials; ≈ {_fmt_s(est['hours'] * 3600)} "
                  f"on {args.jobs or available_cores()} worker(s) "
                  f"(for {est['sim_s_per_trial']:g} s simulated a trial), ≤ {est['disk_mb']:.1f} MB of disk")
            if camp.n_trials > 100_000:
                return 0
            trials = camp.trials()
            cells = list(dict.fromkeys(t.cell for t in trials))
            for c in cells[:50]:
                print(f"  {c}")
            if len(cells) > 50:
                print(f"  … {len(cells) - 50} more")
            return 0
        started = time.perf_counter()
        executor = make_executor(args.executor, args.jobs, args.address)
        try:
            report = run_campaign(camp, args.out, executor, progress=None if args.no_progress else sys.stderr,
                                  figures=not args.no_figures, fresh=args.fresh, started=started,
                                  max_hours=args.max_hours or None, check_disk=not args.no_disk_check)
        finally:
            executor.close()
        print(format_report(report))
    except DockbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: rerun the same command to resume", file=sys.stderr)
        return 1
    return 1 if report.interrupted else 0


if __name__ == "__main__":
    raise SystemExit(main())
