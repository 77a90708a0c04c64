"""Evaluate a policy over a campaign's trials: the campaign's results table, with a policy on the Gymnasium env.

    python experiments/gym_campaign.py CAMPAIGN.yaml --policy zero --jobs 2
    python experiments/gym_campaign.py CAMPAIGN.yaml --policy docs/examples/gym_spiral_baseline.py:SpiralPolicy \\
        --allow-plugins --jobs 2 --out gym_campaigns
    python experiments/gym_campaign.py CAMPAIGN.yaml --policy my_pkg.policies:make_policy --allow-plugins \\
        --action-mode impedance --policy-rate 50 --set sim.duration=2.0
    python experiments/gym_campaign.py CAMPAIGN.yaml --policy zero --executor ray [--address auto | HOST:PORT]

Every trial of the campaign (the campaign runner's trial ids, scenarios and seeds) runs as one episode of
``dockbench.gym.DockingEnv`` under the policy, to the scenario's end, and is recorded as the campaign tool
records a trial: ``<out>/<campaign name>/`` holds ``trials/``, ``results.csv``, ``summary.json`` and the
figures in the campaign's format (``dockbench campaign report`` and ``dockbench compare`` read it), plus
``policy.json`` (which policy made it). Rerunning the same command resumes. docs/gym.md, "Evaluating a
policy over a campaign".

``--policy``: ``zero`` (the zero action: in impedance mode the scenario's law alone), ``MODULE:NAME`` or
``FILE.py:NAME``: NAME is called with each trial's environment and returns the policy (a callable
``policy(obs) -> action`` or an object with ``.predict(obs, deterministic=True)``); it is Python code, imported
only with ``--allow-plugins``.

Exit codes: 0 = every trial ran (whatever their verdicts), 1 = error or interrupted (rerun to resume).
"""

from __future__ import annotations

import sys

from dockbench.experiments.campaign import add_executor_arguments
from dockbench.sim.errors import DockbenchError

from dockbench.cli import ArgumentParser


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("campaign", help="campaign YAML file (docs/campaigns.md)")
    ap.add_argument("--policy", required=True,
                    help="zero | MODULE:NAME | FILE.py:NAME (NAME(env) returns the policy; needs --allow-plugins)")
    ap.add_argument("--allow-plugins", action="store_true",
                    help="import the policy's module or file (and the plugins the campaign's scenarios name): "
                    "Python code, run in the driver and every worker")
    ap.add_argument("--out", default="gym_campaigns",
                    help="parent folder of the campaign's folder (default: gym_campaigns)")
    ap.add_argument("--name", default=None,
                    help="the campaign folder's name (default: the campaign's name)")
    add_executor_arguments(ap)
    ap.add_argument("--action-mode", default="impedance", help="impedance (default), setpoint or torque")
    ap.add_argument("--policy-rate", type=float, default=None,
                    help="policy steps per second [Hz] (default 50; torque: the control rate)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override of every trial's scenario (after the campaign's set; repeatable)")
    ap.add_argument("--telemetry", choices=("all", "failures", "none"), default=None,
                    help="override the campaign's telemetry policy")
    ap.add_argument("--fresh", action="store_true", help="delete the campaign's folder first (no resume)")
    ap.add_argument("--no-figures", action="store_true", help="no figures")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--max-hours", type=float, default=24.0,
                    help="refuse a campaign estimated to take longer (default 24; 0 = no limit)")
    args = ap.parse_args(argv)
    if args.allow_plugins:  # the environment carries the opt-in to the local workers (as experiments/campaign.py)
        import os

        os.environ["DOCKBENCH_ALLOW_PLUGINS"] = "1"

    import dataclasses

    from dockbench.experiments.campaign import format_report, with_overrides
    from dockbench.sim.campaign import load_campaign

    try:
        from dockbench.gym_campaign import evaluate_policy

        camp = load_campaign(args.campaign)
        camp = with_overrides(camp, args.set, args.telemetry)
        if args.name:
            from dockbench.sim.campaign.spec import cell_folder

            if cell_folder(args.name) != args.name or args.name in (".", ".."):
                raise DockbenchError(f"--name {args.name!r}: a folder name of [A-Za-z0-9._=+-]")
            camp = dataclasses.replace(camp, name=args.name)
        from dockbench.sim.campaign.executors import make_executor

        from dockbench.gym_campaign import import_policy

        import_policy(args.policy, True if args.allow_plugins else None)  # a bad policy before any worker starts
        executor = make_executor(args.executor, args.jobs, args.address)
        try:
            report = evaluate_policy(
                camp, args.policy, args.out, executor=executor, action_mode=args.action_mode,
                policy_rate=args.policy_rate, allow_plugins=True if args.allow_plugins else None,
                progress=None if args.no_progress else sys.stderr, figures=not args.no_figures, fresh=args.fresh,
                max_hours=args.max_hours or None,
            )
        finally:
            executor.close()
    except DockbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: rerun the same command to resume", file=sys.stderr)
        return 1
    print(format_report(report))
    print(f"policy     {args.policy} ({args.action_mode}; {report.out_dir / 'policy.json'})")
    return 1 if report.interrupted else 0


if __name__ == "__main__":
    raise SystemExit(main())
