"""The HQP controller's fast paths equal their straightforward forms (controllers/hqp.py).

Pinned here, on random states and on states recorded from the docking scenarios:

* the feasibility verdict of the closed form in ``_build_task`` (``_constraints``) is the verdict of the
  stored rows' slacks (``_slacks``), including the joints whose velocity and position boxes do not
  intersect (they keep the velocity box);
* the closed form returned by ``compute`` is the QP solution when no constraint is active, and
  ``compute`` equals the numpy reference of the equations (tests/paper/test_hqp.py) on recorded states;
* :class:`ManipulabilityGradient` (a few BLAS calls) equals the per-joint running sums it replaced;
* daqp called directly returns bit for bit what ``qpsolvers.solve_problem(..., solver="daqp")``
  returns on the same problems (level 1, level 2, the level-2 band, an infeasible one), and leaves
  the problem arrays it is handed unchanged;
* ``solve()`` after ``compute()`` (rows not stored) assembles them and agrees.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import qpsolvers
from dockbench.controllers.feedforward import DissipationFeedforward
from dockbench.controllers.hqp import (
    STATUS_CLOSED_FORM,
    STATUS_QP,
    HQPConfig,
    HQPController,
    ManipulabilityGradient,
    manipulability_gradient,
)
from dockbench.planners.base import Reference
from dockbench.sim import kernels
from dockbench.sim.loop import build, simulate
from dockbench.sim.scenario import scenario_from_dict
from dockbench.sim.wrench import WrenchState

from tests.helpers import plain_scenario_dict
from tests.paper.test_hqp import _free_space, _random_states, _ref_near, _reference_problem
from tests.roundoff import assert_within_bound


def _rows_agree(ctrl: HQPController, snap, ref, want: dict, names=("lb", "ub", "h")) -> None:
    """The stored rows against the numpy reference within their round-off bounds."""
    b = ctrl.roundoff_bounds(snap, ref, ctrl.make_command())
    p = ctrl.prob
    assert_within_bound(
        "controller", ctrl.nv, [(k, getattr(p, k)) for k in names], [(k, want[k]) for k in names], [b[k] for k in names]
    )


def _slack_margin(ctrl: HQPController, snap, ref) -> float:
    """How far from zero the smallest slack must be for its sign to be beyond round-off: the bounds of
    q̈*, M q̈* and the rows (GUARD_C · n ε κ S each)."""
    b = ctrl.roundoff_bounds(snap, ref, ctrl.make_command())
    unit = kernels.GUARD_C * ctrl.nv * kernels.EPS
    return sum(unit * max(k, 1.0) * S for S, k in (b[n] for n in ("qdd_closed", "Mx", "lb", "h")))

# Tolerances: the round-off bound GUARD_C · n ε κ S of HQPController.roundoff_bounds (tests/roundoff.py) for
# the fast paths against the straightforward numpy forms (which sum in another order: np.linalg.eigh vs
# scipy's dsyevd, BLAS vs floats, numpy's SIMD exp/norm vs libm); and these:
#: ∇w evaluator vs the running sums: both solve with J Jᵀ, |Δ| ≤ C_GRAD · nv ε κ(J Jᵀ) max |∇w| (measured ratio
#: ≤ 0.05 on three BLAS code paths)
C_GRAD = 10.0
SEED = 11


@pytest.fixture(autouse=True)
def _python_reference():
    """Controllers built here run the Python path, the reference these tests pin (the compiled kernel is
    checked against it in tests/test_hqp_kernel.py)."""
    with kernels.forced("python"):
        yield


def _recorded_states(name: str, every: int = 400):
    """(setup, [(t, q, v, F/T wrench world)]) every ``every`` steps of a full run of ``name``."""
    s = build(scenario_from_dict(plain_scenario_dict(name)))
    tel, status, _, _ = simulate(s)
    assert status == "completed"
    ch = tel.channels()
    idx = range(0, len(ch["t"]), every)
    states = [(float(ch["t"][i]), ch["q"][i].copy(), ch["v"][i].copy(), ch["wrench_ext_world"][i].copy()) for i in idx]
    return build(scenario_from_dict(plain_scenario_dict(name))), states


# ------------------------------------------------------------------------------ feasibility test


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_fast_feasibility_test_agrees_with_the_constraint_rows(robot: str) -> None:
    s = build(scenario_from_dict(_free_space(robot)))
    rng = np.random.default_rng(SEED)
    tight = dataclasses.replace(s.plant, tau_max=np.full(s.plant.nv, 4.0))
    q_max = s.plant.q_max.copy()
    q_max[0] = s.q0[0] - 0.4  # joint 0 beyond its upper limit: its velocity and position boxes are disjoint
    outside = dataclasses.replace(s.plant, q_max=q_max, q_min=np.minimum(s.plant.q_min, q_max - 1.0))
    # (config, plant, scale of the joint offsets, of the velocities, of the wrench, of the reference error)
    configs = [
        (HQPConfig(), s.plant, 0.3, 0.02, 0.5, 0.002),
        (HQPConfig(w_th=10.0), s.plant, 0.3, 0.5, 5.0, 0.05),
        (
            HQPConfig(position_constraint="critical", wrench_compensation=True, sigmoid="shifted"),
            tight,
            0.3,
            0.3,
            5.0,
            0.02,
        ),
        (HQPConfig(feedforward="off"), tight, 0.3, 0.02, 0.5, 0.002),
        (HQPConfig(), outside, 0.05, 0.01, 0.05, 0.0005),
    ]
    seen = set()
    for n_cfg, (cfg, plant, dq, dv, fs, err) in enumerate(configs):
        ctrl = HQPController(cfg, plant, s.planner)
        w = WrenchState()
        for q, v in _random_states(s, 12, rng, dq=dq, dv=dv):
            snap = s.dynamics.update(q, v, 0.0)
            w.ext_world[:] = rng.normal(scale=fs, size=6)
            ref = _ref_near(snap, rng, err, rot_err=err)
            p = ctrl._build_task(snap, ref, w)
            fast = ctrl._closed_feasible
            assert ctrl._box_filled  # the Python path stores the rows every step
            ctrl._assemble_qp(snap)
            exact = bool(ctrl._slacks(p.qdd_closed, snap.M).min() >= 0.0)
            assert fast == exact
            # the numpy reference agrees away from the boundary (beyond the slacks' round-off)
            want = _reference_problem(ctrl, snap, ref, w)
            if abs(want["min_slack"]) > _slack_margin(ctrl, snap, ref):
                assert fast == (want["min_slack"] >= 0.0)
            _rows_agree(ctrl, snap, ref, want)
            seen.add((fast, n_cfg == len(configs) - 1))
    # feasible and infeasible states, and feasible ones with a joint whose boxes are disjoint (it keeps its
    # velocity box)
    assert {(True, False), (False, False), (True, True)} <= seen, seen


def test_fast_feasibility_test_on_recorded_docking_states() -> None:
    for name in ("iiwa14_docking_hqp", "fr3_docking_hqp"):
        s, states = _recorded_states(name)
        ctrl = s.controller
        ref, w = Reference(), WrenchState()
        for t, q, v, F in states:
            snap = s.dynamics.update(q, v, t)
            s.planner.evaluate(t, ref)
            w.ext_world[:] = F
            p = ctrl._build_task(snap, ref, w)
            fast = ctrl._closed_feasible
            ctrl._assemble_qp(snap)
            assert fast == bool(ctrl._slacks(p.qdd_closed, snap.M).min() >= 0.0), (name, t)


# ------------------------------------------------------------------------------ closed form = QP


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_closed_form_equals_the_qps_when_no_constraint_is_active(robot: str) -> None:
    s = build(scenario_from_dict(_free_space(robot)))
    rng = np.random.default_rng(SEED + 1)
    w = WrenchState()
    n = 0
    for extra in ({}, {"w_th": 10.0, "sigmoid": "shifted"}, {"wrench_compensation": True, "w_th": 10.0}):
        auto = HQPController(HQPConfig(**extra), s.plant, s.planner)
        always = HQPController(HQPConfig(qp_mode="always", **extra), s.plant, s.planner)
        cmd_a, cmd_q = auto.make_command(), always.make_command()
        for q, v in _random_states(s, 8, rng, dq=0.1, dv=0.05):
            snap = s.dynamics.update(q, v, 0.0)
            ref = _ref_near(snap, rng, 0.003, rot_err=0.001)
            w.ext_world[:] = rng.normal(scale=0.05, size=6)
            auto.compute(snap, ref, w, cmd_a)
            if auto.sol.status != STATUS_CLOSED_FORM:
                continue
            qdd_closed = auto.sol.qdd.copy()
            always.compute(snap, ref, w, cmd_q)
            assert always.sol.status == STATUS_QP and always.sol.n_active == 0
            # the same optimum in exact arithmetic; the level-2 QP solves the KKT system [M Jᵀ; J 0], of
            # condition ≲ κ(M) κ(Λ⁻¹): within the closed form's bound with that κ (measured ratio ≤ 1e-5)
            b = auto.roundoff_bounds(snap, ref, cmd_a)
            k_kkt = kernels.condition(snap.M) * b["qdd"][1]
            assert_within_bound(
                "controller", s.plant.nv, [("qdd", always.sol.qdd), ("tau", cmd_q.tau)],
                [("qdd", qdd_closed), ("tau", cmd_a.tau)], [(b["qdd"][0], k_kkt), (b["tau"][0], k_kkt)],
            )
            n += 1
    assert n >= 12


@pytest.mark.parametrize("name", ["iiwa14_docking_hqp", "fr3_docking_hqp"])
def test_compute_equals_the_numpy_reference_on_recorded_states(name: str) -> None:
    """compute() on states of a full docking run (free space, funnel contact, inserted): τ, q̈* and
    the diagnostics equal the straightforward numpy form of the equations."""
    s, states = _recorded_states(name)
    ctrl = s.controller
    plant = s.plant
    ff = DissipationFeedforward(plant.dof_frictionloss, plant.dof_damping, ctrl.config.feedforward)
    cmd = ctrl.make_command()
    ref, w = Reference(), WrenchState()
    n_sa = 0
    for t, q, v, F in states:
        snap = s.dynamics.update(q, v, t)
        s.planner.evaluate(t, ref)
        w.ext_world[:] = F
        want = _reference_problem(ctrl, snap, ref, w)
        n0 = ctrl.n_sa
        ctrl.compute(snap, ref, w, cmd)
        n_sa += ctrl.n_sa - n0
        assert ctrl.sol.status == STATUS_CLOSED_FORM  # the docking runs never need the QPs
        tau = snap.M @ want["qdd_closed"] + want["tau_offset"]
        tau += ff.compute(snap.v, tau)
        K, Fw = want["K_r"], want["F_ext"]
        b = ctrl.roundoff_bounds(snap, ref, cmd)
        assert_within_bound(
            "controller", ctrl.nv,
            [("qdd", ctrl.sol.qdd), ("tau", cmd.tau), ("diag", cmd.diag[5:])],
            [("qdd", want["qdd_closed"]), ("tau", tau), ("diag", np.array([want["alpha"], K[0], K[3], *Fw[:3]]))],
            [b["qdd"], b["tau"], b["diag_values"]],
        )
        # J q̈* = b in exact arithmetic: the residual is round-off of the terms of J q̈* and b
        S, kappa = b["level1_residual"]
        assert cmd.diag[4] == ctrl.sol.level1_residual <= kernels.GUARD_C * ctrl.nv * kernels.EPS * kappa * S
    if name.startswith("fr3"):
        assert n_sa > 0  # the FR3 run exercises the ∇w term


def test_solve_after_compute_assembles_the_rows() -> None:
    s = build(scenario_from_dict(_free_space()))
    tight = dataclasses.replace(s.plant, tau_max=np.full(s.plant.nv, 3.0))
    rng = np.random.default_rng(SEED + 2)
    statuses = set()
    for plant, err in ((s.plant, 0.002), (tight, 0.05)):
        ctrl = HQPController(HQPConfig(), plant, s.planner)
        cmd = ctrl.make_command()
        for q, v in _random_states(s, 4, rng, dq=0.1, dv=0.05):
            snap = s.dynamics.update(q, v, 0.0)
            ref = _ref_near(snap, rng, err)
            ctrl.compute(snap, ref, WrenchState(), cmd)
            qdd, status = ctrl.sol.qdd.copy(), ctrl.sol.status
            sol = ctrl.solve(snap)
            assert ctrl.prob.qp_assembled and sol.status == status
            if status == STATUS_CLOSED_FORM:  # the same closed form returned: the same array values
                np.testing.assert_array_equal(sol.qdd, qdd)
            else:  # the same QPs solved again, now cold-started: the active-set path (and its rounding) may differ
                b = ctrl.roundoff_bounds(snap, ref, cmd)
                bound = [(b["qdd"][0], kernels.condition(snap.M) * b["qdd"][1])]
                assert_within_bound("controller", ctrl.nv, [("qdd", sol.qdd)], [("qdd", qdd)], bound)
            _rows_agree(ctrl, snap, ref, _reference_problem(ctrl, snap, ref, WrenchState()))
            statuses.add(status)
    assert statuses == {STATUS_CLOSED_FORM, STATUS_QP}


# ------------------------------------------------------------------------------ ∇w


def _grad_w_running_sums(J: np.ndarray, w: float) -> np.ndarray:
    """The previous per-joint float implementation of ∇w (two running sums over the joints)."""
    P = np.linalg.solve(J @ J.T, J)
    cols = tuple(zip(J.T.tolist(), P.T.tolist(), strict=True))
    lower = []
    s0 = s1 = s2 = 0.0
    for (a0, a1, a2, b0, b1, b2), (c0, c1, c2, _, _, _) in cols:
        s0 += c1 * b2 - c2 * b1
        s1 += c2 * b0 - c0 * b2
        s2 += c0 * b1 - c1 * b0
        lower.append(a0 * s0 + a1 * s1 + a2 * s2)
    g = []
    u0 = u1 = u2 = 0.0
    for ((a0, a1, a2, b0, b1, b2), (c0, c1, c2, d0, d1, d2)), lo in zip(reversed(cols), reversed(lower), strict=True):
        g.append(w * (lo + b0 * u0 + b1 * u1 + b2 * u2))
        u0 += a1 * c2 - a2 * c1 + (b1 * d2 - b2 * d1)
        u1 += a2 * c0 - a0 * c2 + (b2 * d0 - b0 * d2)
        u2 += a0 * c1 - a1 * c0 + (b0 * d1 - b1 * d0)
    return np.array(g[::-1])


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_manipulability_gradient_evaluator_equals_the_running_sums(robot: str) -> None:
    s = build(scenario_from_dict(_free_space(robot)))
    rng = np.random.default_rng(SEED + 3)
    ev = ManipulabilityGradient(s.plant.nv)  # one evaluator reused across states (no state leaks)
    for q, _ in _random_states(s, 10, rng, dq=0.8):
        snap = s.dynamics.update(q, np.zeros(s.plant.nv), 0.0)
        J, w = snap.J_ee_lwa, snap.manipulability
        ref = _grad_w_running_sums(J, w)
        tol = C_GRAD * J.shape[1] * kernels.EPS * kernels.condition(J @ J.T) * np.abs(ref).max()
        np.testing.assert_allclose(ev(J) * w, ref, rtol=0, atol=tol)
        np.testing.assert_allclose(manipulability_gradient(J, w), ref, rtol=0, atol=tol)
    for n in (6, 7, 9):  # any full-row-rank (6, n) matrix
        J = rng.normal(size=(6, n))
        w = float(np.sqrt(np.linalg.det(J @ J.T)))
        ref = _grad_w_running_sums(J, w)
        tol = C_GRAD * n * kernels.EPS * kernels.condition(J @ J.T) * np.abs(ref).max()
        np.testing.assert_allclose(ManipulabilityGradient(n)(J) * w, ref, rtol=0, atol=tol)


# ------------------------------------------------------------------------------ daqp


def _qpsolvers_daqp(P, q, G, h, A, b, lb, ub):
    sol = qpsolvers.solve_problem(qpsolvers.Problem(P, q, G, h, A, b, lb, ub), solver="daqp")
    return sol.x if sol.found else None


def test_direct_daqp_equals_qpsolvers_bit_for_bit() -> None:
    s = build(scenario_from_dict(_free_space()))
    tight = dataclasses.replace(s.plant, tau_max=np.full(s.plant.nv, 3.0))
    ctrl = HQPController(HQPConfig(qp_mode="always"), tight, s.planner)
    assert ctrl._daqp_solve is not None
    rng = np.random.default_rng(SEED + 4)
    nv = s.plant.nv
    n_active = 0
    for q, v in _random_states(s, 8, rng, dq=0.1, dv=0.05):
        snap = s.dynamics.update(q, v, 0.0)
        p = ctrl.build_problem(snap, _ref_near(snap, rng, 0.05), WrenchState())
        before = {k: getattr(p, k).copy() for k in ("P1", "q1", "P2", "q2", "GJ", "lb", "ub", "h")}
        x1, _ = ctrl._qp(ctrl._qp1)
        np.testing.assert_array_equal(x1, _qpsolvers_daqp(p.P1, p.q1, p.G, p.h, None, None, p.lb, p.ub))
        p.b_eq[:] = p.J @ x1
        x2, _ = ctrl._qp(ctrl._qp2)
        np.testing.assert_array_equal(x2, _qpsolvers_daqp(p.P2, p.q2, p.G, p.h, p.J, p.b_eq, p.lb, p.ub))
        # the band problem of the level-2 retry
        ctrl._G2[: 2 * nv] = p.G
        ctrl._G2[2 * nv : 2 * nv + 6] = p.J
        ctrl._G2[2 * nv + 6 :] = -p.J
        ctrl._h2[: 2 * nv] = p.h
        ctrl._h2[2 * nv : 2 * nv + 6] = p.b_eq + 1e-9
        ctrl._h2[2 * nv + 6 :] = 1e-9 - p.b_eq
        x3, _ = ctrl._qp(ctrl._qp2_band)
        np.testing.assert_array_equal(x3, _qpsolvers_daqp(p.P2, p.q2, ctrl._G2, ctrl._h2, None, None, p.lb, p.ub))
        for k, a in before.items():
            np.testing.assert_array_equal(getattr(p, k), a, err_msg=k)
        n_active += ctrl.solve(snap).n_active
    assert n_active > 0, "the problems must have active constraints"
    # an infeasible problem fails both ways
    p.h[:] = -1.0
    assert ctrl._qp(ctrl._qp1)[0] is None
    assert _qpsolvers_daqp(p.P1, p.q1, p.G, p.h, None, None, p.lb, p.ub) is None


def test_daqp_warm_start_same_torques_fewer_iterations() -> None:
    """warm_start (default): a QP solved at consecutive control steps starts from the previous
    multipliers. Same torques as cold starts (to 1e-9 N·m), fewer daqp iterations in total."""
    from tests.paper.test_hqp import _free_space

    out = {}
    for warm in (False, True):
        d = _free_space(controller={"type": "hqp", "warm_start": warm}, offset=(0.0, 0.1, -0.05), max_torque=5.0)
        setup = build(scenario_from_dict(d))
        tel, status, _, _ = simulate(setup)
        s = setup.controller.summary()
        assert status == "completed" and s["qp_solved"] > 10 and s["qp_warm_start"] is warm
        out[warm] = (s["qp_iterations"], tel.tau_applied[: tel.n].copy())
    assert out[True][0] < out[False][0]
    np.testing.assert_allclose(out[True][1], out[False][1], rtol=0, atol=1e-9)
