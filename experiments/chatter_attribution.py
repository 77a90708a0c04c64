"""Who makes the chatter: the law, or the plant? One scenario's chatter counts with each cause switched off.

    python experiments/chatter_attribution.py scenarios/fr3_docking_se3.yaml
    python experiments/chatter_attribution.py scenarios/fr3_docking.yaml --divisors 1,4,8 --json out.json

The chatter metrics (``contact.force_spikes_truth``, ``contact.on_off_toggles_truth``,
``contact.releases_truth``; telemetry/metrics.py) count what the contact force does, whatever causes it.
Issue 16 asks for no *controller-made* chatter; this runs the scenario as shipped and with one cause removed
at a time, at each MuJoCo step ``dt / k`` (the control period stays):

* ``no force feedback``: ``controller.use_force_feedback: false`` (the law's F/T or observer term);
* ``no feedforward``: ``controller.feedforward: off`` (the joint friction/damping feedforward);
* ``law's force terms off``: both;
* ``no wall friction``: ``tool.friction`` and ``target.friction`` 0 (the cone stays elliptic);
* ``no joint dry friction``: the MuJoCo model's ``dof_frictionloss`` set to 0 after assembly (the laws read
  it from the model, so their feedforward sees no friction either).

A count that stays when the law's force terms are off and goes when a friction of the plant goes is the
plant's (the FR3's insertion rattle: docs/theory/force_control.md, "What is left"); one that goes with the
law's terms is the controller's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from dockbench.experiments.step_convergence import (
    CHATTER,
    SHARE,
    STEADY,
    chatter_table,
    parse_divisors,
)

from dockbench.cli import ArgumentParser

#: variant name → scenario overrides (key path → value); ``None`` marks the model-level change
VARIANTS: dict[str, dict[str, Any] | None] = {
    "as shipped": {},
    "no force feedback": {"controller.use_force_feedback": False},
    "no feedforward": {"controller.feedforward": "off"},
    "law's force terms off": {"controller.use_force_feedback": False, "controller.feedforward": "off"},
    "no wall friction": {"tool.friction": 0.0, "target.friction": 0.0},
    "no joint dry friction": None,
}


def variant_setup(path: str | Path, name: str, divisor: int):
    """(scenario, setup) of the scenario file ``path`` with variant ``name`` (its overrides applied through
    :func:`sim.scenario.load_scenario`) at its timestep divided by ``divisor``, built
    (:func:`sim.loop.build`) on an assembly whose model the variant may have changed."""
    from dockbench.sim.assembly import assemble
    from dockbench.sim.loop import build
    from dockbench.sim.scenario import load_scenario

    period = load_scenario(path).sim.control_period
    scenario = load_scenario(path, {**(VARIANTS[name] or {}), "sim.timestep": period / divisor})
    asm = assemble(scenario)
    if VARIANTS[name] is None:
        asm.model.dof_frictionloss[:] = 0.0
    return scenario, build(scenario, assembly=asm)


def run_variant(path: str | Path, name: str, divisor: int) -> dict[str, Any]:
    """One run of :func:`variant_setup`: {verdict, chatter (the :data:`CHATTER` counts), share (the densest
    0.1 s of spikes [%]), steady (the spikes and toggles at rest), peak}."""
    from dockbench.sim.loop import run

    scenario, setup = variant_setup(path, name, divisor)
    r = run(scenario, out_root=None, setup=setup)
    return {"verdict": r.verdict, "chatter": [r.metrics.get(k) for k in CHATTER], "share": r.metrics.get(SHARE),
            "steady": [r.metrics.get(k) for k in STEADY], "peak": r.metrics.get("contact.peak_force_truth")}


def table(results: dict[str, dict[int, dict[str, Any]]], divisors: tuple[int, ...]) -> list[str]:
    """Markdown rows: per variant and divisor ``spikes / toggles / releases (verdict)``."""
    return chatter_table(results, divisors, label="variant")


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", help="a scenario file with a contact (a docking)")
    ap.add_argument("--divisors", type=parse_divisors, default=(1,), help="timestep divisors, e.g. 1,4,8")
    ap.add_argument("--variants", default=None,
                    help=f"comma-separated subset of: {', '.join(VARIANTS)} (default: all)")
    ap.add_argument("--json", default=None, help="write the counts to this file")
    args = ap.parse_args(argv)
    names = list(VARIANTS) if args.variants is None else [v.strip() for v in args.variants.split(",")]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        print(f"error: --variants: unknown {unknown}; allowed: {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    path = Path(args.scenario)
    results: dict[str, dict[int, dict[str, Any]]] = {}
    for name in names:
        results[name] = {k: run_variant(path, name, k) for k in args.divisors}
        print(table({name: results[name]}, args.divisors)[-1], flush=True)
    print()
    print("\n".join(table(results, args.divisors)))
    if args.json:
        Path(args.json).write_text(json.dumps({n: {str(k): v for k, v in r.items()} for n, r in results.items()},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
