"""The contact truth against the impulse the plant applied (issue 29 item 1).

    python experiments/contact_truth.py                                   # fr3 + iiwa14 floating, 4 integrators
    python experiments/contact_truth.py scenarios/orbit/fr3_orbit_floating_target.yaml --integrators rk4
    python experiments/contact_truth.py --peaks scenarios/orbit/fr3_orbit_floating_target.yaml   # dt, dt/2, dt/4

For an isolated floating target only the tool's contact acts on it, so the impulse it receives is its
momentum change: Σᵢ truth_f(tᵢ) T_c = −(P_target(end) − P_target(0)) (Newton's third law; the truth is the
force ON the tool). Per run the table gives: the contact periods (``contact_count`` > 0), those whose truth
reads 0 N, ‖Σ truth impulse + ΔP_target‖ / ‖ΔP_target‖, the same for the F/T estimate (``wrench_ext_world``),
and the substep-resolved peak (``contact.peak_force_truth``). P_target = m_t v_c from the target's recorded
twist (``target_vel``: velocity of its centre of mass) and the model's target subtree mass.

``--peaks``: the substep peak at dt, dt/2 and dt/4 (control period kept), from the loop
(``contact.peak_force_truth``) and from an independent per-substep read (:class:`IndependentRead`): the
plant stepped by ``mj_step`` itself, and the four RK4 stages (one evaluation for an Euler-type integrator)
re-run from the substep's start state on a scratch MjData with full ``mj_forward`` calls, the tool's
contact force summed contact by contact with ``mj_contactForce`` (not ``cfrc_ext``): the peak of every
evaluation, and (last column) the peak of the substep's acting force (RK4: weighted by b).
"""

from __future__ import annotations

import sys
from pathlib import Path

from dockbench.cli import ArgumentParser

ROOT = Path(__file__).resolve().parents[1]
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


def independent_read_class():
    """A :class:`sim.wrench.SubstepContact` whose :meth:`step` steps the plant with ``mj_step`` and reads
    the force that acted over each substep independently of the loop's code (module docstring)."""
    import math

    import mujoco
    import numpy as np
    from dockbench.sim.wrench import SubstepContact

    class IndependentRead(SubstepContact):
        peak = 0.0  # the largest force of an evaluation (a substep's, or an RK4 stage's)
        mean_peak = 0.0  # the largest acting force of a substep (RK4: its stage-weighted mean)

        def __init__(self, pipeline, m, d, nsub, n_steps, axis):
            super().__init__(pipeline, m, d, nsub, n_steps, axis)
            if not self.resolved:  # Euler-type at one substep: step it here too
                self.resolved = True
                self._root, self._tb = pipeline.root_body, pipeline.tool_body
                self.cfrc[self._tb] = d.cfrc_ext[pipeline.tool_bodies].sum(axis=0)
                pipeline.attach_acting(self)

        def _force(self, dd) -> tuple[np.ndarray, int]:
            wp, f6, f = self.wp, np.zeros(6), np.zeros(3)
            n = 0
            for c in range(dd.ncon):
                g1, g2 = dd.contact.geom[c]
                t1, t2 = wp.is_tool_geom[g1], wp.is_tool_geom[g2]
                if t1 == t2:
                    continue
                n += 1
                mujoco.mj_contactForce(self.m, dd, c, f6)
                # force geom1 exerts on geom2 in the contact frame: on the tool it is +, or − when the tool is geom1
                f += (1.0 if t2 else -1.0) * (dd.contact.frame[c].reshape(3, 3).T @ f6[:3])
            return f, n

        def step(self, i: int) -> None:
            m, d = self.m, self.d
            if not hasattr(self, "_pre"):
                self._pre, self._scr = mujoco.MjData(m), mujoco.MjData(m)
            pre, scr, h = self._pre, self._scr, m.opt.timestep
            fsum, fmax, cmax = np.zeros(3), 0.0, 0
            for _ in range(self.nsub):
                mujoco.mj_copyData(pre, m, d)
                mujoco.mj_step(m, d)  # the plant, MuJoCo's own step
                mujoco.mj_copyData(scr, m, pre)
                mujoco.mj_forward(m, scr)
                f, n = self._force(scr)
                smax = math.sqrt(float(f @ f))
                if self.rk4:
                    q0, v0 = pre.qpos.copy(), pre.qvel.copy()
                    f, F, v = f / 6.0, scr.qacc.copy(), v0
                    for a, b in ((0.5, 1 / 3), (0.5, 1 / 3), (1.0, 1 / 6)):
                        q = q0.copy()
                        mujoco.mj_integratePos(m, q, v * a, h)
                        v = v0 + (F * a) * h
                        scr.qpos[:], scr.qvel[:], scr.time = q, v, pre.time + a * h
                        scr.qacc_warmstart[:] = pre.qacc_warmstart
                        mujoco.mj_forward(m, scr)
                        fi, ni = self._force(scr)
                        f, F, n = f + b * fi, scr.qacc.copy(), max(n, ni)
                        smax = max(smax, math.sqrt(float(fi @ fi)))
                fsum += f
                fmax = max(fmax, smax)
                type(self).mean_peak = max(type(self).mean_peak, math.sqrt(float(f @ f)))
                cmax = max(cmax, n)
            type(self).peak = max(type(self).peak, fmax)
            f = fsum / self.nsub
            c = d.subtree_com[self._root]
            self.cfrc[self._tb] = (*(-np.cross(c, f)), *f)  # force only (moment about c omitted: not compared)
            self.count = cmax
            self.last[:] = (fmax, abs(float(f @ self.axis)), cmax)

    return IndependentRead


def peaks(path: str, integrator: str | None, divisors=(1, 2, 4)) -> list[dict]:
    """The loop's and the independent read's substep peak at dt / k (control period kept)."""
    import dockbench.sim.loop as loop
    import numpy as np
    from dockbench.sim.loop import build, simulate
    from dockbench.sim.scenario import load_scenario

    rows = []
    for k in divisors:
        ov = {} if integrator is None else {"sim.integrator": integrator}
        sc = load_scenario(ROOT / path, ov or None)
        ov["sim.timestep"] = sc.sim.control_period / k
        sc = load_scenario(ROOT / path, ov)
        tel, status, _, _ = simulate(build(sc))
        own = float(np.max(tel.arrays["contact_force_peak"][: tel.n]))
        cls = independent_read_class()
        saved = loop.SubstepContact
        loop.SubstepContact = cls
        try:
            s = build(sc)
            s.wrench._kmod = None  # the pipeline reads the substitute's rows (the kernel binds MjData's)
            tel2, status2, _, _ = simulate(s)
        finally:
            loop.SubstepContact = saved
        rows.append({"k": k, "timestep": sc.sim.timestep, "integrator": sc.sim.integrator, "loop": own,
                     "independent": cls.peak, "mean": cls.mean_peak, "status": (status, status2)})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", default=DEFAULT)
    ap.add_argument("--integrators", default="euler,implicit,implicitfast,rk4")
    ap.add_argument("--timestep", type=float, default=None, help="sim.timestep override (control period kept)")
    ap.add_argument("--peaks", action="store_true", help="substep peak at dt, dt/2, dt/4 (loop and independent read)")
    a = ap.parse_args(argv)
    if a.peaks:
        print("| scenario | integrator | dt | peak, loop [N] | peak, independent read [N] | vs dt (independent) | "
              "peak of the substep's acting (mean) force [N] |")
        print("|---|---|---|---|---|---|---|")
        for path in a.scenarios:
            for integ in a.integrators.split(","):
                rows = peaks(path, integ)
                for r in rows:
                    dev = r["independent"] / rows[0]["independent"] - 1.0
                    print(f"| {Path(path).stem} | {integ} | {r['timestep']:g} | {r['loop']:.3f} | "
                          f"{r['independent']:.3f} | {dev:+.1%} | {r['mean']:.3f} |", flush=True)
        return 0
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
