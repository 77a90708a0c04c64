"""The HQP's level-2 posture terms on a free-floating base (issue 29 item 2): what they do to the bus.

    python experiments/hqp_floating_posture.py          # HQP (shipped; ∇w forced on; k_sa: 0) and the Khatib run
    python experiments/hqp_floating_posture.py --set controller.k_j=0    # overrides of the first (shipped) run

Per run: the manipulability w* = sqrt(det(J* J*ᵀ)) at t = 0 and t = 1 s, how many steps had the
singularity-avoidance term on (the controller's ``n_sa``), the
largest joint speed outside contact as a fraction of its limit (rows with no tool contact in the period),
the largest joint displacement from the start within the first 2 s, the bus's peak angular rate, the arm's
peak linear momentum ‖P_arm‖ and angular momentum about its own centre of mass ‖L_arm‖ (the arm = the
subtree of the first link, tool included; MuJoCo's ``subtree_linvel`` / ``subtree_angmom`` at the recorded
states, every 10th step), and the verdict.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dockbench.cli import ArgumentParser

ROOT = Path(__file__).resolve().parents[1]

HQP = "scenarios/orbit/iiwa14_orbit_floating_target_hqp.yaml"
KHATIB = "scenarios/orbit/iiwa14_orbit_floating_target.yaml"


class ArmMomentum:
    """Step observer: the arm's ‖P‖ and ‖L about its COM‖ at the loop's state every ``every`` steps."""

    stop_reason = ""

    def __init__(self, every: int = 10):
        self.every = every
        self.P: list[float] = []
        self.L: list[float] = []

    def start(self, setup, tel) -> None:
        import mujoco

        self.m, self.d = setup.asm.model, setup.data
        self.scr = mujoco.MjData(self.m)
        base = setup.orbit.base_body
        self.arm = next(b for b in range(self.m.nbody) if int(self.m.body_parentid[b]) == base
                        and self.m.body_jntnum[b] > 0)

    def step(self, i: int, t: float) -> bool:
        import mujoco
        import numpy as np

        s = self.scr
        s.qpos[:], s.qvel[:] = self.d.qpos, self.d.qvel
        mujoco.mj_kinematics(self.m, s)
        mujoco.mj_comPos(self.m, s)
        mujoco.mj_comVel(self.m, s)
        mujoco.mj_subtreeVel(self.m, s)
        self.P.append(float(np.linalg.norm(s.subtree_linvel[self.arm]) * self.m.body_subtreemass[self.arm]))
        self.L.append(float(np.linalg.norm(s.subtree_angmom[self.arm])))
        return False

    def finish(self, status: str) -> None:
        pass


def measure(path: str, overrides: list[str] | None = None) -> dict:
    import numpy as np
    from dockbench.sim.loop import build, simulate
    from dockbench.sim.scenario import load_scenario
    from dockbench.telemetry.gates import evaluate_gates  # noqa: F401
    from dockbench.telemetry.metrics import compute_metrics  # noqa: F401

    sc = load_scenario(ROOT / path, overrides or None)
    s = build(sc)
    obs = ArmMomentum()
    tel, status, msg, _ = simulate(s, step_observer=obs)
    A = {k: np.asarray(v[: tel.n]) for k, v in tel.arrays.items()}
    t, v, q = A["t"], A["v"], A["q"]
    free = A["contact_count_peak"] == 0
    ratio = np.abs(v) / s.plant.v_max
    w = A["manipulability"]
    i1 = int(np.searchsorted(t, 1.0))
    i2 = int(np.searchsorted(t, 2.0))
    rate = np.degrees(np.linalg.norm(A["base_vel"][:, 3:], axis=1))
    k_sa = getattr(s.controller.config, "k_sa", 0.0)
    jmax = int(np.argmax(ratio[free].max(axis=0))) if free.any() else -1
    return {
        "name": sc.name, "controller": sc.controller.type, "k_sa": k_sa, "status": status,
        "w0": float(w[0]), "w1": float(w[i1]), "w_min": float(w.min()),
        "sa_steps": int(getattr(s.controller, "n_sa", 0)),
        "v_ratio_free": float(ratio[free].max()) if free.any() else float("nan"), "joint": jmax + 1,
        "v_free": float(np.abs(v[free]).max()) if free.any() else float("nan"),
        "dq_2s": float(np.abs(q[:i2] - q[0]).max()),
        "bus_rate_deg_s": float(rate.max()), "P_arm": max(obs.P), "L_arm": max(obs.L),
    }


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], help="override for the HQP run (key=value)")
    a = ap.parse_args(argv)
    runs = [(HQP, a.set), (HQP, ["controller.floating_singularity_avoidance=true"]), (HQP, ["controller.k_sa=0"]),
            (KHATIB, [])]
    print("| scenario | overrides | w*(0) | w*(1 s) | ∇w steps | max |q̇|/q̇_max outside contact (joint, rad/s) | "
          "max |Δq| in 2 s [rad] | bus rate [°/s] | ‖P_arm‖ [N·s] | ‖L_arm‖ [N·m·s] | status |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for path, ov in runs:
        r = measure(path, ov)
        print(f"| {r['name']} | {' '.join(ov) or '—'} | {r['w0']:.4f} | {r['w1']:.4f} | {r['sa_steps']} | "
              f"{r['v_ratio_free']:.1%} (j{r['joint']}, {r['v_free']:.3f}) | {r['dq_2s']:.3f} | "
              f"{r['bus_rate_deg_s']:.3f} | {r['P_arm']:.3f} | {r['L_arm']:.3f} | {r['status']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
