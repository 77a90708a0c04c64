"""The SE(3) controller's 1 kHz float paths equal their array / matrix forms (controllers/se3_lie.py,
planners/motion_reference.py, sim/lie.py).

* :meth:`MotionReference.floats_from_reference` (what the controller reads) equals the arrays of
  :meth:`MotionReference.update_from_reference` bit for bit for every planner; its fixed-orientation
  shortcut (ω = α = 0) equals the general conversion, kept here verbatim as the reference.
* The controller's shortcuts for ω_d = 0 / α_d = 0 equal its general path evaluated with the same
  exact zeros, bit for bit.
* :meth:`error_state` / :meth:`reference_acceleration` (the equation-level API of the tests) reproduce
  what :meth:`compute` used, bit for bit.
* Over whole docking runs (free space and contact; diagonal and full A, D, K) compute() equals the
  matrix-form equations (tests/paper/test_se3_lie.py ``_matrix_form``: lie.dexp, lie.dexp_dot, lie.Ad,
  np.linalg.solve) to round-off at every checked step.
"""

from __future__ import annotations

import numpy as np
import pytest

from controllers.se3_lie import SE3LieConfig, SE3LieController
from planners import PLANNERS, MotionReference, PlannerContext, Reference
from sim import kernels
from sim.config import parse_config
from sim.lie import so3_exp
from sim.loop import build, simulate
from sim.scenario import scenario_from_dict
from sim.wrench import WrenchState
from tests.helpers import kernel_scenario_dict, planner_context
from tests.paper.test_se3_lie import _matrix_form
from tests.roundoff import assert_within_bound

SEED = 11


@pytest.fixture(autouse=True)
def _python_reference():
    """Controllers built here run the Python float path, the reference these tests pin (the compiled
    kernel is checked against it in tests/test_se3_kernel.py)."""
    with kernels.forced("python"):
        yield


def _ctx() -> PlannerContext:
    return planner_context()


def _general_body_motion(ref: Reference):
    """The world → body conversion of planners/motion_reference.py written once, without the
    ω = α = 0 shortcut (the float code before the shortcut was added)."""
    (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = ref.R.tolist()
    p0, p1, p2 = ref.pos.tolist()
    a0, a1, a2 = ref.vel.tolist()
    b0, b1, b2 = ref.omega.tolist()
    c0, c1, c2 = ref.acc.tolist()
    e0, e1, e2 = ref.alpha.tolist()
    v0 = r00 * a0 + r10 * a1 + r20 * a2
    v1 = r01 * a0 + r11 * a1 + r21 * a2
    v2 = r02 * a0 + r12 * a1 + r22 * a2
    w0 = r00 * b0 + r10 * b1 + r20 * b2
    w1 = r01 * b0 + r11 * b1 + r21 * b2
    w2 = r02 * b0 + r12 * b1 + r22 * b2
    dV = (
        (r00 * c0 + r10 * c1 + r20 * c2) - (w1 * v2 - w2 * v1),
        (r01 * c0 + r11 * c1 + r21 * c2) - (w2 * v0 - w0 * v2),
        (r02 * c0 + r12 * c1 + r22 * c2) - (w0 * v1 - w1 * v0),
        r00 * e0 + r10 * e1 + r20 * e2,
        r01 * e0 + r11 * e1 + r21 * e2,
        r02 * e0 + r12 * e1 + r22 * e2,
    )
    return (r00, r01, r02, r10, r11, r12, r20, r21, r22, p0, p1, p2), (v0, v1, v2, w0, w1, w2), dV


# ------------------------------------------------------------------------------ MotionReference


@pytest.mark.parametrize("name", ["quintic", "two_phase", "figure8", "se3_topp"])
def test_floats_from_reference_equal_the_arrays(name: str) -> None:
    cls = PLANNERS.get(name)
    p = cls(parse_config(cls.Config, {}), _ctx())
    a, b = MotionReference(p), MotionReference(p)
    ref = Reference()
    for t in np.linspace(0.0, p.duration * 1.1, 23):
        t = float(t)
        p.evaluate(t, ref)
        a.update_from_reference(ref, t)
        T_d, V_d, dV_d = b.floats_from_reference(ref, t)
        np.testing.assert_array_equal(np.array(T_d[:9]).reshape(3, 3), a.T[:3, :3])
        np.testing.assert_array_equal(T_d[9:], a.T[:3, 3])
        np.testing.assert_array_equal(V_d, a.V)
        np.testing.assert_array_equal(dV_d, a.dV)
        if not a.passthrough:
            assert (T_d, V_d, dV_d) == _general_body_motion(ref)


def test_fixed_orientation_shortcut_equals_the_general_conversion() -> None:
    """Random references with ω, α each either random or exactly zero: the conversion equals the general
    formula with its exact zeros (== also holds for zeros of either sign)."""
    mr = MotionReference(PLANNERS.get("quintic")(parse_config(PLANNERS.get("quintic").Config, {}), _ctx()))
    rng = np.random.default_rng(SEED)
    ref = Reference()
    for omega_zero in (True, False):
        for alpha_zero in (True, False):
            for _ in range(5):
                ref.pos[:], ref.vel[:], ref.acc[:] = rng.normal(size=3), rng.normal(size=3), rng.normal(size=3)
                ref.R[:] = so3_exp(rng.normal(size=3))
                ref.omega[:] = 0.0 if omega_zero else rng.normal(size=3)
                ref.alpha[:] = 0.0 if alpha_zero else rng.normal(size=3)
                assert mr.floats_from_reference(ref, 0.0) == _general_body_motion(ref)


# ------------------------------------------------------------------------------ controller


class _TruthyZero(float):
    """0.0 that is truthy: sends the controller down its general path with the very same exact zeros."""

    def __bool__(self) -> bool:
        return True


def _snapshot_states(robot: str = "iiwa14"):
    s = build(scenario_from_dict(kernel_scenario_dict(f"{robot}_docking_se3")))
    rng = np.random.default_rng(SEED + 1)
    for _ in range(4):
        q = s.q0 + rng.uniform(-0.2, 0.2, s.plant.nv)
        v = rng.uniform(-0.5, 0.5, s.plant.nv)
        yield s, s.dynamics.update(q, v, 0.0), rng


def test_zero_velocity_shortcuts_equal_the_general_path() -> None:
    """_law with ω_d = 0 and α_d = 0 (skipping R̃ω_d, p̃ × R̃ω_d, R̃α_d, … and their ad terms) returns and
    stores exactly what its general path computes with the same exact zeros."""
    for s, snap, rng in _snapshot_states():
        ctrl = SE3LieController(SE3LieConfig(), s.plant, s.planner)
        T = snap.T_world_ee.tolist()
        V = snap.twist_ee_body.tolist()
        T_d = tuple((snap.T_world_ee[:3, :3] @ so3_exp(rng.normal(scale=0.2, size=3))).ravel().tolist()) + tuple(
            (snap.T_world_ee[:3, 3] + rng.normal(scale=0.02, size=3)).tolist()
        )
        F = rng.normal(scale=5.0, size=6).tolist()
        v_d, a_d = tuple(rng.normal(size=3).tolist()), tuple(rng.normal(size=3).tolist())
        z, tz = (0.0, 0.0, 0.0), (_TruthyZero(0.0),) * 3
        results = []
        for zeros in (z, tz):
            out = ctrl._law(T, V, T_d, v_d + zeros, F, a_d + zeros)
            results.append(
                (out, ctrl._lam_t, ctrl._lamd_t, ctrl._l2_t, ctrl._gamma_t, ctrl._Verr_t, ctrl._Ferr_t, ctrl._Tt)
            )
        assert results[0] == results[1]


@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])
def test_equation_level_api_reproduces_compute(robot: str) -> None:
    """error_state + reference_acceleration on the arrays of the desired motion compute() used give the
    same λ, λ̇, γ, λ̈*, V̇_ref bit for bit."""
    for s, snap, rng in _snapshot_states(robot):
        ctrl = s.controller
        ref = Reference()
        s.planner.evaluate(float(rng.uniform(0.0, s.planner.duration)), ref)
        w = WrenchState()
        w.ext_body[:] = rng.normal(scale=5.0, size=6)
        cmd = ctrl.make_command()
        ctrl.compute(snap, ref, w, cmd)
        got = [ctrl.lam, ctrl.lam_dot, ctrl.gamma, ctrl.lam_ddot, ctrl.dV_ref]
        np.testing.assert_array_equal(cmd.diag, got[0])
        T_d, V_d, dV_d = ctrl.desired_motion()
        ctrl.error_state(snap.T_world_ee, snap.twist_ee_body, T_d, V_d, w.ext_body)
        ctrl.reference_acceleration(dV_d)
        for a, b in zip(got, [ctrl.lam, ctrl.lam_dot, ctrl.gamma, ctrl.lam_ddot, ctrl.dV_ref], strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.slow
@pytest.mark.parametrize("robot", ["iiwa14", "fr3"])  # fr3: full A, D, K and joint friction feedforward
def test_docking_run_equals_matrix_form(robot: str) -> None:
    """Every 20th step of the whole docking run (approach, funnel, bore, seating): compute() = the
    matrix-form equations (lie.dexp, np.linalg.solve, BLAS) within the round-off bound of
    SE3LieController._guard_bounds: τ and q̈_ref with κ(Λ_b⁻¹), the law's quantities with S of the law and
    κ = κ₂(dexp_λ) (the matrix form solves with it where the float path applies the closed-form inverse),
    with contact forces along the way."""
    from sim import lie

    s = build(scenario_from_dict(kernel_scenario_dict(f"{robot}_docking_se3")))
    ctrl = s.controller
    compute = ctrl.compute
    worst = [0.0]
    peak_force = [0.0]
    step = [0]

    def checked(snap, ref, wrench, cmd):
        compute(snap, ref, wrench, cmd)
        step[0] += 1
        if step[0] % 20:
            return
        F = wrench.ext_body
        peak_force[0] = max(peak_force[0], float(np.abs(F[:3]).max()))
        want = _matrix_form(ctrl, snap, *ctrl.desired_motion(), F)
        got = {k: getattr(ctrl, k) for k in want if k != "tau"} | {"tau": cmd.tau}
        (s_tau, k_tau), (s_law, _) = ctrl._guard_bounds(snap, ref, wrench, cmd)[:2]
        k_law = float(np.linalg.cond(lie.dexp(-ctrl.lam)))
        bounds = {k: (s_law, k_law) for k in want} | {"tau": (s_tau, k_tau)}
        bounds["q_ddot_ref"] = (
            kernels.magnitude(np.abs(ctrl._MinvJt) @ np.abs(ctrl._y) + ctrl.config.d_null * np.abs(snap.v)) + s_law,
            k_tau,
        )
        names = list(want)
        r = assert_within_bound(
            "controller", 18, [(k, got[k]) for k in names], [(k, want[k]) for k in names], [bounds[k] for k in names]
        )
        worst[0] = max(worst[0], r)

    ctrl.compute = checked
    _, status, _, _ = simulate(s)
    assert status == "completed"
    assert peak_force[0] > 1.0, "the run must reach contact"
    assert 0.0 < worst[0] < 1.0, worst
