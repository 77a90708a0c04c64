"""How well a free-floating run keeps its momentum, per integrator × constraint solver × step size.

    python experiments/orbit_momentum.py [SCENARIO] [--dt 0.001,0.0005] [--md table.md]

Runs the scenario (default: scenarios/orbit/iiwa14_orbit_floating_target.yaml, an isolated system) with
each combination and prints ``orbit.momentum_drift_rel``, ``orbit.com_deviation``, the verdict and the
real-time factor (docs/theory/floating_base.md, "Momentum and the integrator"). Exit 1 on a bad scenario.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from dockbench.sim.errors import reports_errors

from dockbench.cli import ArgumentParser

COMBOS = (("implicitfast", "newton"), ("rk4", "newton"), ("rk4", "pgs"))


@reports_errors
def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("scenario", nargs="?", default="scenarios/orbit/iiwa14_orbit_floating_target.yaml")
    p.add_argument("--dt", default="0.001,0.0005", help="comma-separated MuJoCo time steps [s]")
    p.add_argument("--md", help="also write the table as Markdown to this file")
    args = p.parse_args(argv)
    from dockbench.sim.loop import run
    from dockbench.sim.scenario import scenario_from_dict

    base = yaml.safe_load(Path(args.scenario).read_text())
    rows = ["| integrator | solver | dt [s] | momentum drift (rel.) | COM off its line [m] | verdict | real time |",
            "|---|---|---|---|---|---|---|"]
    for dt in (float(x) for x in args.dt.split(",")):
        for integrator, solver in COMBOS:
            d = copy.deepcopy(base)
            d.setdefault("sim", {}).update(timestep=dt, integrator=integrator, solver=solver)
            r = run(scenario_from_dict(d, file=args.scenario), out_root=None)
            m = r.metrics
            row = (f"| {integrator} | {solver} | {dt:g} | {m.get('orbit.momentum_drift_rel', float('nan')):.2e} | "
                   f"{m.get('orbit.com_deviation', float('nan')):.2e} | {r.verdict} | "
                   f"{r.timing['real_time_factor']:.1f}× |")
            rows.append(row)
            print(row, flush=True)
    if args.md:
        Path(args.md).write_text("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
