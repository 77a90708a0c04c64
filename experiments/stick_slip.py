"""Stick-slip check of the joint friction feedforward's velocity keying (docs/theory/khatib.md §4).

    python experiments/stick_slip.py scenarios/peg/fr3_peg_khatib.yaml                  # at the start pose
    python experiments/stick_slip.py scenarios/peg/fr3_peg_khatib.yaml --run RUN_DIR --t 11.5   # a pose of a run

The velocity keying f tanh(q̇/ε) leaves a friction that falls with slope f/ε at rest: a negative damping of f/ε
per joint (4.1). Where it exceeds the damping the law gives that joint, B_ii, a joint held by stiction while the
law's spring builds up breaks away and runs. B is the law's own: −∂τ/∂q̇ of the scenario's controller at the pose,
with a static reference at the current pose, no force, the plant's Coriolis bias and J̇q̇ held at zero, and the
feedforward (and a friction integral) off — a central difference of the Python law over q̇ (the law is affine in
q̇ there, up to the SE(3) law's second-order dexp rate terms, which the central difference cancels). For the
Khatib law B is (4.2), B = Jᵀ Λ D_m J + d_null (I − Jᵀ Λ J M⁻¹) (tests/test_stick_slip.py checks the two agree).

Prints per joint f_i, B_ii, f_i/ε for the scenario's ε (``controller.feedforward_velocity_scale``) and the
smallest ε with f_i/ε ≤ B_ii on every joint with friction, ε_min = max_i f_i / B_ii (∞ where a joint with friction
has B_ii ≤ 0: the null-space term of (4.2) is not symmetric, and at some poses the law does not damp a joint on its
own; no ε satisfies the criterion there). Exit status 1 when the
scenario's ε is below ε_min (and its feedforward keys on the velocity: velocity or hybrid mode), else 0.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

from dockbench.cli import ArgumentParser

#: the q̇ step of the central difference [rad/s]: B is affine in q̇ (round-off ~ ε_mach |τ| / δ ≈ 1e-12 N·m·s/rad)
DELTA = 1e-3


def joint_damping(setup, q: np.ndarray) -> np.ndarray:
    """B (nv, nv) [N·m·s/rad]: −∂τ/∂q̇ of ``setup``'s control law at joint positions ``q`` (module docstring)."""
    from dockbench.planners.base import Reference
    from dockbench.sim.wrench import WrenchState

    ctrl0 = setup.controller
    cfg = dataclasses.replace(ctrl0.config, feedforward="off")
    for key, off in (("friction_integral", "off"), ("force_setpoint", None)):
        if hasattr(cfg, key):
            cfg = dataclasses.replace(cfg, **{key: off})
    nv = setup.plant.nv

    def tau(v: np.ndarray) -> np.ndarray:
        ctrl = type(ctrl0)(cfg, setup.plant, None)  # no planner: the SE(3) law echoes the reference below
        snap = setup.dynamics.update(q, v)
        snap.h[:] = 0.0
        snap.g[:] = 0.0
        snap.dJdq_ee_lwa[:] = 0.0
        snap.dJdq_ee_body[:] = 0.0
        ref = Reference()
        ref.pos[:] = snap.p_ee_in_world
        ref.R[:] = snap.R_world_ee
        ref.vel[:] = ref.omega[:] = ref.acc[:] = ref.alpha[:] = 0.0
        cmd = ctrl.make_command()
        ctrl.reset(snap, ref)
        ctrl._compute_python(snap, ref, WrenchState(), cmd)
        return cmd.tau.copy()

    B = np.empty((nv, nv))
    for j in range(nv):
        e = np.zeros(nv)
        e[j] = DELTA
        B[:, j] = -(tau(e) - tau(-e)) / (2.0 * DELTA)
    return B


def check(setup, q: np.ndarray) -> dict:
    """{f, B_diag, eps, f_over_eps, eps_min, velocity_keyed, undamped (joints with friction and B_ii ≤ 0), ok} for
    ``setup`` at ``q`` (module docstring)."""
    ctrl = setup.controller
    f = np.asarray(setup.plant.dof_frictionloss, dtype=float)
    B = joint_damping(setup, q)
    bd = np.diag(B).copy()
    eps = float(getattr(ctrl.config, "feedforward_velocity_scale", np.nan))
    has_f = f > 0.0
    # a joint with friction that the law does not damp on its own (B_ii ≤ 0: the null-space term of (4.2) is not
    # symmetric, so a diagonal entry can be negative at some poses) has no safe ε: ε_min = ∞
    undamped = has_f & (bd <= 0.0)
    if not has_f.any():
        eps_min = 0.0
    elif undamped.any():
        eps_min = float("inf")
    else:
        eps_min = float(np.max(f[has_f] / bd[has_f]))
    keyed = getattr(ctrl.config, "feedforward", "off") in ("velocity", "hybrid") and bool(has_f.any())
    return {"f": f, "B_diag": bd, "eps": eps, "f_over_eps": f / eps, "eps_min": eps_min, "velocity_keyed": keyed,
            "undamped": undamped, "ok": (not keyed) or eps >= eps_min}


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", help="scenario file or shipped name")
    ap.add_argument("--run", default=None, help="a run folder of this scenario: the pose at --t")
    ap.add_argument("--t", type=float, default=None, help="time [s] of the pose in --run (default: the end)")
    args = ap.parse_args(argv)
    from dockbench.sim.loop import build
    from dockbench.sim.scenario import load_scenario, resolve_scenario

    setup = build(load_scenario(resolve_scenario(args.scenario)))
    q = np.array(setup.q0, dtype=float)
    where = "the start pose"
    if args.run is not None:
        from dockbench.telemetry.run import Run

        frame = Run.load(Path(args.run)).to_frame()
        row = frame.iloc[-1] if args.t is None else frame[frame.index >= args.t].iloc[0]
        names = [c for c in frame.columns if c.startswith("q.")]
        q = row[names].to_numpy(dtype=float)
        where = f"t = {row.name:.3f} s of {args.run}"
    r = check(setup, q)
    print(f"{setup.scenario.name}: {type(setup.controller).__name__}, feedforward "
          f"{getattr(setup.controller.config, 'feedforward', 'off')}, ε = {r['eps']:g} rad/s, at {where}")
    print("| joint | f [N·m] | B_ii [N·m·s/rad] | f/ε [N·m·s/rad] | f/ε ≤ B_ii |")
    print("|---|---|---|---|---|")
    for i, (fi, bi, fe) in enumerate(zip(r["f"], r["B_diag"], r["f_over_eps"], strict=True)):
        print(f"| {i + 1} | {fi:.3f} | {bi:.1f} | {fe:.1f} | {'yes' if fi == 0.0 or fe <= bi else 'NO'} |")
    if r["undamped"].any():
        joints = ", ".join(str(i + 1) for i in np.flatnonzero(r["undamped"]))
        print(f"joint(s) {joints}: B_ii ≤ 0, the law does not damp them alone at this pose")
    print(f"ε_min = max f_i/B_ii = {r['eps_min']:.4f} rad/s; "
          + ("the feedforward does not key on the velocity" if not r["velocity_keyed"]
             else ("ok" if r["ok"] else f"ε = {r['eps']:g} is below it: stick-slip likely")))
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
