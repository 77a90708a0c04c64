"""The contact truth against the impulse the plant applied (issue 29 item 1).

    python experiments/contact_truth.py                                   # fr3 + iiwa14 floating, 4 integrators
    python experiments/contact_truth.py scenarios/orbit/fr3_orbit_floating_target.yaml --integrators rk4

For an isolated floating target only the tool's contact acts on it, so the impulse it receives is its
momentum change: Σᵢ truth_f(tᵢ) T_c = −(P_target(end) − P_target(0)) (Newton's third law; the truth is the
force ON the tool). Per run the table gives: the contact periods (``contact_count`` > 0), those whose truth
reads 0 N, ‖Σ truth impulse + ΔP_target‖ / ‖ΔP_target‖, the same for the F/T estimate (``wrench_ext_world``),
and the substep-resolved peak (``contact.peak_force_truth``). P_target = m_t v_c from the target's recorded
twist (``target_vel``: velocity of its centre of mass) and the model's target subtree mass.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):  # run as a script: this checkout's dockbench, not an installed one
    sys.path.insert(0, str(ROOT))
DEFAULT = ["scenarios/orbit/fr3_orbit_floating_target.yaml", "scenarios/orbit/iiwa14_orbit_floating_target.yaml"]


def measure(path: str, overrides: dict | None = None) -> dict:
    """Run one scenario (with ``overrides``) and return the impulse balance of its contact truth."""
    import numpy as np
    from dockbench.sim.loop import build, simulate
    from dockbench.sim.scenario import load_scenario
    from dockbench.telemetry.metrics import compute_metrics  # noqa: F401 - the peak metric below

    sc = load_scenario(ROOT / path if not Path(path).is_absolute() else path, overrides or None)
    s = build(sc)
    tel, status, msg, _ = simulate(s)
    A = {k: np.asarray(v[: tel.n]) for k, v in tel.arrays.items()}
    T_c = sc.sim.control_period
    m_t = float(s.asm.model.body_subtreemass[s.orbit.target_body])
    P = m_t * A["target_vel"][:, :3]
    dP = P[-1] - P[0]
    # row i holds the period that ends at t_i: rows 1..n-1 are the periods run (the last period is not recorded)
    J_truth = A["wrench_truth_world"][1:, :3].sum(axis=0) * T_c
    J_ft = A["wrench_ext_world"][1:, :3].sum(axis=0) * T_c
    cnt = A["contact_count"]
    fn = np.linalg.norm(A["wrench_truth_world"][:, :3], axis=1)
    contact = cnt > 0
    ndP = float(np.linalg.norm(dP))
    return {
        "scenario": sc.name, "integrator": sc.sim.integrator, "timestep": sc.sim.timestep, "status": status,
        "contact_periods": int(contact.sum()), "zero_truth_in_contact": int((contact & (fn == 0.0)).sum()),
        "dP_target": dP.tolist(), "truth_impulse": J_truth.tolist(), "ft_impulse": J_ft.tolist(),
        "truth_err_rel": float(np.linalg.norm(J_truth + dP)) / ndP if ndP else float("nan"),
        "ft_err_rel": float(np.linalg.norm(J_ft + dP)) / ndP if ndP else float("nan"),
        "peak_substep": float(A["contact_force_peak"].max()), "peak_sampled": float(fn.max()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", default=DEFAULT)
    ap.add_argument("--integrators", default="euler,implicit,implicitfast,rk4")
    ap.add_argument("--timestep", type=float, default=None, help="sim.timestep override (control period kept)")
    a = ap.parse_args(argv)
    print("| scenario | integrator | dt | contact periods | truth 0 N in contact | ‖J_truth + ΔP‖/‖ΔP‖ | "
          "‖J_FT + ΔP‖/‖ΔP‖ | ΔP_target [N·s] | peak (substep) [N] |")
    print("|---|---|---|---|---|---|---|---|---|")
    for path in a.scenarios:
        for integ in a.integrators.split(","):
            ov = {"sim.integrator": integ}
            if a.timestep:
                ov["sim.timestep"] = a.timestep
            r = measure(path, ov)
            print(f"| {r['scenario']} | {integ} | {r['timestep']:g} | {r['contact_periods']} | "
                  f"{r['zero_truth_in_contact']} | {r['truth_err_rel']:.2e} | {r['ft_err_rel']:.2e} | "
                  f"({r['dP_target'][0]:.4f}, {r['dP_target'][1]:.4f}, {r['dP_target'][2]:.4f}) | "
                  f"{r['peak_substep']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
