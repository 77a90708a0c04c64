"""The compiled HQP kernel (controllers/_hqp_kernel.c) against the Python reference it replaces
(controllers/hqp.py, HQPController._compute_python on the closed-form path).

* F_ext about the EE, α, K_r, Δν, the copy of J (and q̈_2 without ∇w, the τ offset without wrench
  compensation) equal the Python floats path BIT FOR BIT (==), as do the diagnostics α, K_r, f_ext, the
  force set-point's s, F_d, f_a, I, the status, the counters and the state of the contact-force options
  (force filter, force set-point, hybrid feedforward latch: scalar code on both sides): random states of
  the iiwa14 and the shipped FR3 scenario configurations (hybrid feedforward, force set-point) with every
  configuration branch (the force filter, a set-point started at contact), the set-point's ramp and the
  latch's blend, and every rotation error up to π (on a plant with limits wide enough that the closed form
  is always feasible).
* Λ⁻¹, Λ, √s Λ^½, D_r, F_r, a, b, q̈*, M q̈*, τ agree within the round-off bound GUARD_C · n ε κ S of
  HQPController.roundoff_bounds (the kernel guard's, tests/roundoff.py), with κ = κ(Λ⁻¹) for everything
  downstream of the eigendecomposition: Λ and Λ^½ come from a cyclic Jacobi iteration in C and from
  LAPACK dsyevd in Python, whose eigenvectors of the small, close eigenvalues of Λ⁻¹ carry an error
  ≈ ε ‖Λ⁻¹‖ / gap that q̈* = … M⁻¹Jᵀ Λ (…) amplifies. Against a 50-digit evaluation of the same equations
  the compiled path is the closer one: test_compiled_path_is_the_closer_one_to_an_exact_evaluation.
* Bit for bit (==) is claimed only where both sides are our own scalar code (the same IEEE-754
  operations in the same order, C compiled without contraction, the same libm in one process).
* Every step of three whole docking runs (both paths on the very same states) and the runs of each path
  against each other (telemetry before the first contact; docking metrics after).
* Hand-backs (the closed form infeasible → the QPs, Λ⁻¹ not positive definite, Python's math raising):
  nothing written, the Python path takes the step, results and counters as a pure-Python controller's.
  The sensorless mode and qp_mode "always" never build the kernel.
* Bad buffers, an unbound kernel, strided matrices, no leaks.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import sys
import weakref

import numpy as np
import pytest
from dockbench.controllers.force_control import AxialForceSetpoint, ForceSetpointConfig
from dockbench.controllers.hqp import SETPOINT_DIAG, STATUS_CLOSED_FORM, STATUS_QP, HQPConfig, HQPController
from dockbench.planners.base import Reference
from dockbench.sim import kernels, lie
from dockbench.sim.loop import build, run, simulate
from dockbench.sim.scenario import scenario_from_dict
from dockbench.sim.wrench import WrenchState

from tests.helpers import scenario_dict
from tests.roundoff import assert_within_bound

HQP = "controllers._hqp_kernel"
_KMOD, _WHY = kernels.status(HQP)
pytestmark = pytest.mark.skipif(_KMOD is None, reason=f"{_WHY}; {kernels.BUILD_HINT}")

# Tolerance table (the only tolerances used in this module besides the guard's bound, tests/roundoff.py)
#: Jacobi vs LAPACK eigen-reconstructions V f(μ) Vᵀ on random matrices: |Δ| ≤ C_EIG · n ε κ |X| (n = 6;
#: the eigensolvers' backward errors are O(n ε ‖A‖) and f = 1/μ, μ^−½ have condition ≤ κ); measured
#: |Δ| / (n ε κ |X|) ≤ 0.72 on three BLAS code paths
C_EIG = 10.0
#: the ∇w/w port vs the evaluator: |Δ| ≤ C_GRAD · nv ε κ(J Jᵀ) max |∇w/w| (both solve with J Jᵀ); measured
#: ratio ≤ 0.3
C_GRAD = 10.0
#: the two paths' runs before the first contact, relative to max(1, |x|): the state (measured ≤ 3.6e-14 on
#: two BLAS code paths) and the torques, controller channels and F/T wrenches (which carry the τ difference
#: through the tool's acceleration; measured ≤ 6.3e-12, while the per-step round-off bound of τ reaches
#: 1.3e-7 (FR3) to 8.9e-6 (iiwa14) N·m along these runs)
TOL_FREE_RUN = 1e-12
TOL_FREE_RUN_CMD = 1e-9
TOL_SEATED = 1e-5  # final EE position of the two paths' runs after contact [m] (measured ≤ 3.2e-7)

SEED = 31
SCENES = ("iiwa14_docking_hqp", "fr3_docking_hqp", "fr3_docking_misaligned")
#: problem fields equal bit for bit (always: scalar code on both sides), and those equal to round-off (e_p's
#: rotation part is Pinocchio's log3 in Python and the kernel's own log in C)
EXACT = ("F_ext", "K_r", "dnu", "J")
TASK = ("Lambda_inv", "Lambda", "D_r", "F_r", "a", "b")
JOINT = ("qdd_posture", "qdd_closed", "tau_offset")
#: rotation errors [rad]: zero, small, the near-π branch of the log (c ≤ −0.9), π
ANGLES = (0.0, 1e-9, 0.02, 0.5, 2.0, 2.7, 3.0, math.pi - 1e-6, math.pi)


#: worst |Δ| / bound per quantity over the tests run (the round-off comparisons are not vacuous)
WORST: dict[str, float] = {}


def _rel(a, b) -> float:
    b = np.asarray(b, dtype=float)
    return float(np.abs(np.asarray(a) - b).max() / max(1.0, float(np.abs(b).max())))


def _pair(config: HQPConfig, plant, planner) -> tuple[HQPController, HQPController]:
    """(Python reference, compiled) controllers with the same configuration."""
    with kernels.forced("python"):
        py = HQPController(config, plant, planner)
    with kernels.forced("compiled"):
        ck = HQPController(config, plant, planner)
    assert py._kmod is None and ck._kmod is not None
    return py, ck


def _counters(ctrl: HQPController) -> dict:
    return {k: v for k, v in ctrl.summary().items() if not k.startswith("kernel")}


def _states(ctrl: HQPController) -> list[np.ndarray]:
    """The contact-force options' state arrays (filter, hybrid latch, set-point)."""
    return [ctrl.force_filter.state, ctrl.ff.state] + ([ctrl.setpoint.state] if ctrl.setpoint is not None else [])


def _assert_states_equal(py: HQPController, ck: HQPController) -> None:
    for a, b in zip(_states(ck), _states(py), strict=True):
        np.testing.assert_array_equal(a, b, err_msg="force options state")


def _compare(py: HQPController, ck: HQPController, cmd_py, cmd_ck, snap, ref) -> None:
    """After compute() on the same inputs, the compiled step against the Python one."""
    p, k = py.prob, ck.prob
    for name in EXACT:
        np.testing.assert_array_equal(getattr(k, name), getattr(p, name), err_msg=name)
    assert k.alpha == p.alpha and k.w == p.w and not k.qp_assembled and not p.qp_assembled
    if py.config.k_sa == 0.0 or p.w >= py.config.w_th:  # no ∇w: q̈_2 on floats in the same order
        np.testing.assert_array_equal(k.qdd_posture, p.qdd_posture)
    if not py.config.wrench_compensation:
        np.testing.assert_array_equal(k.tau_offset, p.tau_offset)
    bounds = py.roundoff_bounds(snap, ref, cmd_py)
    bounds["e_p"] = bounds["task_rows"]
    pairs = [(name, getattr(k, name), getattr(p, name)) for name in ("e_p", *TASK, *JOINT)]
    pairs += [("Lambda_half_s", ck._LL[6:], py._LL[6:]), ("MinvJt", ck._MinvJt, py._MinvJt)]
    pairs += [("Mx", ck._Mx, py._Mx), ("tau", cmd_ck.tau, cmd_py.tau)]
    pairs += [("qdd", ck.sol.qdd, py.sol.qdd), ("qdd_level1", ck.sol.qdd_level1, py.sol.qdd_level1)]
    pairs += [("level1_residual", np.array([ck.sol.level1_residual]), np.array([py.sol.level1_residual]))]
    for name, a, b in pairs:
        ratio = assert_within_bound("controller", py.plant.nv, [(name, a)], [(name, b)], [bounds[name]])
        WORST[name] = max(WORST.get(name, 0.0), ratio)
    s, r = ck.sol, py.sol
    assert (s.status, s.primal_residual, s.n_active) == (r.status, r.primal_residual, r.n_active) == (0, 0.0, 0)
    assert s.solve_time > 0.0
    # diagnostics: status, primal residual, active count, α, K_r, f_ext equal; the level-1 residual as above
    # and the solve time (wall clock) not compared
    exact = [0, 2, 3, 5, 6, 7, 8, 9, 10] + list(range(11, 11 + len(SETPOINT_DIAG) * (py.setpoint is not None)))
    assert len(cmd_py.diag) == 11 + len(SETPOINT_DIAG) * (py.setpoint is not None)
    np.testing.assert_array_equal(cmd_ck.diag[exact], cmd_py.diag[exact])
    assert cmd_ck.diag[4] == s.level1_residual and cmd_ck.diag[1] == s.solve_time
    _assert_states_equal(py, ck)
    assert ck._closed_feasible and not ck._box_filled
    assert _counters(ck) == _counters(py)


def _compare_handed_back(py: HQPController, ck: HQPController, cmd_py, cmd_ck) -> None:
    """After a step the kernel handed back: the Python path ran on both sides, everything bit for bit (NaN
    equal to NaN), the wall-clock solve time aside."""
    assert not ck._kernel_step
    np.testing.assert_array_equal(cmd_ck.tau, cmd_py.tau)
    np.testing.assert_array_equal(np.delete(cmd_ck.diag, 1), np.delete(cmd_py.diag, 1))
    s, r = ck.sol, py.sol
    assert (s.status, s.primal_residual, s.n_active) == (r.status, r.primal_residual, r.n_active)
    for name in ("qdd", "qdd_level1"):
        np.testing.assert_array_equal(getattr(s, name), getattr(r, name), err_msg=name)
    for name in (*EXACT, *TASK, *JOINT):
        np.testing.assert_array_equal(getattr(ck.prob, name), getattr(py.prob, name), err_msg=name)
    if py.prob.qp_assembled:
        for name in ("lb", "ub", "h", "P1", "q1"):
            np.testing.assert_array_equal(getattr(ck.prob, name), getattr(py.prob, name), err_msg=name)
    assert _counters(ck) == _counters(py)
    _assert_states_equal(py, ck)  # advanced once, by the Python path (the kernel wrote nothing)


def _both(py: HQPController, ck: HQPController, snap, ref, w, cmd_py, cmd_ck) -> bool:
    """Both controllers compute the step and are compared; True when the kernel took it."""
    before = ck.kernel_fallbacks
    cmd_ck.tau[:] = 12345.0
    py.compute(snap, ref, w, cmd_py)
    ck.compute(snap, ref, w, cmd_ck)
    if ck.kernel_fallbacks == before:
        _compare(py, ck, cmd_py, cmd_ck, snap, ref)
        return True
    _compare_handed_back(py, ck, cmd_py, cmd_ck)
    return False


# ------------------------------------------------------------------------------ the C building blocks


def test_jacobi_eigendecomposition_agrees_with_lapack() -> None:
    """Random symmetric matrices, SPD with condition numbers up to 1e9 and indefinite: V orthogonal and
    A = V diag(μ) Vᵀ to 20 ε (Jacobi's own backward error: O(n ε) per sweep), the eigenvalues as LAPACK's to
    20 ε |μ|max, and (SPD) Λ = V diag(1/μ) Vᵀ and Λ^½ as from np.linalg.eigh within C_EIG · n ε κ |X|."""
    rng = np.random.default_rng(SEED)
    eps = np.finfo(float).eps
    for i in range(600):
        B = rng.normal(size=(6, 6))
        spd = i % 4 != 0
        A = B @ B.T + 10.0 ** rng.uniform(-9, 1) * np.eye(6) if spd else B + B.T
        mu, V = _KMOD.eigh(A)
        mu, V = np.array(mu), np.array(V)
        np.testing.assert_allclose(V.T @ V, np.eye(6), rtol=0, atol=20 * eps)
        np.testing.assert_allclose((V * mu) @ V.T, A, rtol=0, atol=20 * eps * np.abs(A).max())
        m2, V2 = np.linalg.eigh(A)
        np.testing.assert_allclose(np.sort(mu), m2, rtol=0, atol=20 * eps * np.abs(m2).max())
        if spd:
            kappa = m2.max() / m2.min()
            for f in (lambda m: 1.0 / m, lambda m: 1.0 / np.sqrt(m)):
                X, X2 = (V * f(mu)) @ V.T, (V2 * f(m2)) @ V2.T
                assert np.abs(X - X2).max() <= C_EIG * 6 * eps * kappa * np.abs(X2).max()
    # only the lower triangle is read (as dsyevd with lower=1)
    A = rng.normal(size=(6, 6))
    np.testing.assert_array_equal(np.array(_KMOD.eigh(A)[0]), np.array(_KMOD.eigh(np.tril(A) + np.tril(A, -1).T)[0]))
    for bad in (np.nan, np.inf, 1e200):
        A = np.eye(6)
        A[3, 1] = bad
        with pytest.raises(ArithmeticError, match="did not converge"):
            _KMOD.eigh(A)


def test_manipulability_gradient_port_agrees_with_the_evaluator() -> None:
    from dockbench.controllers.hqp import ManipulabilityGradient

    rng = np.random.default_rng(SEED + 1)
    for nv in (6, 7, 9):
        for _ in range(30):
            J = rng.normal(size=(6, nv))
            want = ManipulabilityGradient(nv)(J)
            got = np.array(_KMOD.grad_w(np.asfortranarray(J)))
            scale = nv * np.finfo(float).eps * np.linalg.cond(J @ J.T) * np.abs(want).max()
            assert np.abs(got - want).max() <= C_GRAD * scale
    J = rng.normal(size=(6, 7))
    J[5] = J[4]  # rank 5: J Jᵀ singular (Python: dposv fails, np.linalg.solve)
    J[4] = 0.0
    with pytest.raises(ArithmeticError, match="not positive definite"):
        _KMOD.grad_w(J)


# ------------------------------------------------------------------------------ random inputs


@pytest.fixture(scope="module", params=SCENES)
def setup(request):
    with kernels.forced("python"):
        return build(scenario_from_dict(scenario_dict(request.param)))


#: a force set-point that starts at the first contact, with a proportional gain and no damping (the other
#: branches of kernel_setpoint_update; the shipped ones start at the planner's end with k_p = 0)
SETPOINT_AT_CONTACT = ForceSetpointConfig(
    force=5.0, ramp_time=0.05, start="contact", delay=0.01, k_p=0.5, k_i=40.0, i_max=1.0, damping=0.0
)


def _configs(base: HQPConfig) -> dict[str, HQPConfig]:
    """The scenario's configuration and one per branch of the step."""
    r = dataclasses.replace
    return {
        "scenario": base,
        "force_filter_hybrid": r(base, force_filter=0.005, feedforward="hybrid"),
        "setpoint_at_contact_torque_ff": r(base, force_setpoint=SETPOINT_AT_CONTACT, feedforward="torque"),
        "filter_no_force_feedback": r(base, force_filter=0.005, use_force_feedback=False),
        "grad_w_always": r(base, w_th=10.0),
        "grad_w_never": r(base, k_sa=0.0),
        "compensation_critical_velocity_ff": r(
            base, wrench_compensation=True, position_constraint="critical", feedforward="velocity"
        ),
        "no_force_feedback_ff_off_plain": r(base, use_force_feedback=False, feedforward="off", sigmoid="plain"),
        "shifted_k_alpha_0": r(base, sigmoid="shifted", k_alpha=0.0),
    }


def _random_step(
    s, rng, ref: Reference, w: WrenchState, dq=0.1, dv=0.02, err=0.003, force=2.0, moment=0.01, angle=None, t=0.01
):
    """A snapshot at time ``t`` and a random state near q0 (offsets within ``dq``, velocities within ``dv``), a
    reference near its EE pose (position within ``err``, rotation error up to ``err`` or ``angle``, desired
    velocities and accelerations of scale ``dv``) and a random F/T wrench (ext_world about the sensor
    origin: forces of scale ``force``, moments of scale ``moment``). The defaults keep the closed form
    feasible nearly always (the iiwa14's light last link turns a moment of 1 N·m into angular
    accelerations far beyond its velocity box)."""
    snap = s.dynamics.update(s.q0 + rng.uniform(-dq, dq, s.plant.nv), rng.uniform(-dv, dv, s.plant.nv), t)
    ref.pos[:] = snap.p_ee_in_world + rng.uniform(-err, err, 3)
    axis = rng.normal(size=3)
    rot = (angle if angle is not None else rng.uniform(0.0, err)) * axis / np.linalg.norm(axis)
    ref.R[:] = lie.so3_exp(rot) @ snap.R_world_ee
    ref.vel[:], ref.omega[:] = rng.normal(scale=dv, size=3), rng.normal(scale=dv, size=3)
    ref.acc[:], ref.alpha[:] = rng.normal(scale=dv, size=3), rng.normal(scale=dv, size=3)
    w.ext_world[:3] = rng.normal(scale=force, size=3)
    w.ext_world[3:] = rng.normal(scale=moment, size=3)
    return snap


def _t_start(ctrl: HQPController) -> float:
    """A time 0.1 s before the force set-point's ramp starts (0.01 s without one, or with start: contact)."""
    fs = ctrl.setpoint
    return fs.t0 - 0.1 if fs is not None and fs.t0 < math.inf else 0.01


def test_step_equals_python_on_random_inputs(setup) -> None:
    """Small errors (the closed form feasible nearly always, as in the docking runs): every configuration
    branch; the rare infeasible state is handed back and compared bit for bit. The time runs through the
    force set-point's ramp (20 ms a step, from 0.1 s before it)."""
    s = setup
    rng = np.random.default_rng(SEED + 2)
    for cname, cfg in _configs(s.controller.config).items():
        py, ck = _pair(cfg, s.plant, s.planner)
        cmd_py, cmd_ck = py.make_command(), ck.make_command()
        ref, w = Reference(), WrenchState()
        compiled = 0
        t0 = _t_start(py)
        for i in range(40):
            snap = _random_step(s, rng, ref, w, t=t0 + 0.02 * i)
            try:
                compiled += _both(py, ck, snap, ref, w, cmd_py, cmd_ck)
            except AssertionError as exc:
                raise AssertionError(f"config {cname}, state {i}: {exc}") from exc
        assert compiled >= 20, (cname, compiled)  # most states (K_r = K_0 of shifted_k_alpha_0: fewer)
        assert ck.summary()["kernel"] == "compiled" and py.summary()["kernel"] == "python"
        if cname == "grad_w_always":
            assert ck.n_sa == py.n_sa == 40
    assert WORST["tau"] > 0.0  # the round-off comparisons are not vacuous


def test_force_options_through_the_ramp_and_the_latch(setup) -> None:
    """The configurations with contact-force options (the shipped FR3 one, the force filter with the hybrid
    feedforward, the set-point started at contact): 120 steps of 10 ms from 0.1 s before the force
    set-point's start, 10 in free space (|f| < 1 N), then the target pushing back along the mating axis (5 N,
    noisy), so that the set-point ramps in (s: 0 → 1, the start-at-contact variant from the first contact),
    its integral runs and the hybrid latch goes through w = 0, the blend and w = 1; at every step the options'
    state, the diagnostics and the task rows as the Python path's (bit for bit), τ within the bounds."""
    s = setup
    ran = 0
    for cname in ("scenario", "force_filter_hybrid", "setpoint_at_contact_torque_ff"):
        cfg = _configs(s.controller.config)[cname]
        py, ck = _pair(cfg, s.plant, s.planner)
        if py.setpoint is None and py.ff.mode != "hybrid" and not py.force_filter.active:
            continue  # the iiwa14's scenario law has none
        ran += 1
        rng = np.random.default_rng(SEED + 12)
        cmd_py, cmd_ck = py.make_command(), ck.make_command()
        ref, w = Reference(), WrenchState()
        axis = np.array(py.setpoint.axis) if py.setpoint is not None else np.array([0.0, 0.0, 1.0])
        t0 = _t_start(py)
        compiled = ramped = blended = latched = 0
        for i in range(120):
            snap = _random_step(s, rng, ref, w, dv=0.01, err=0.001, moment=0.001, t=t0 + 0.01 * i)
            if i < 10:
                w.ext_world[:3] *= 0.1
            else:
                w.ext_world[:3] = axis * rng.normal(5.0, 0.5) + rng.normal(scale=0.2, size=3)
            try:
                compiled += _both(py, ck, snap, ref, w, cmd_py, cmd_ck)
            except AssertionError as exc:
                raise AssertionError(f"config {cname}, step {i}: {exc}") from exc
            ramped += py.setpoint is not None and 0.0 < py.setpoint.s < 1.0
            blended += 0.0 < py.ff.w < 1.0
            latched += py.ff.w == 1.0
        assert compiled > 100, (cname, compiled)
        if py.setpoint is not None:
            assert ramped > 3 and py.setpoint.s == 1.0 and py.setpoint.integral != 0.0, cname
        if py.ff.mode == "hybrid" and py.ff.active:
            assert blended > 40 and latched > 40, cname
        if py.force_filter.active:
            assert py.force_filter.state[-1] == 1.0, cname
    assert ran >= 2


def test_every_rotation_error_on_a_wide_plant(setup) -> None:
    """Rotation errors up to π − 1e-6 (both branches of the log), large wrenches and velocities: with limits
    that keep the closed form feasible the kernel takes every step and agrees with Python within the bounds.
    (At θ = π exactly both ±φ are logarithms, and the two logs may pick either: not compared here.)"""
    s = setup
    nv = s.plant.nv
    big = np.full(nv, 1e12)
    wide = dataclasses.replace(s.plant, tau_max=big, v_max=big, q_min=-big, q_max=big)
    rng = np.random.default_rng(SEED + 3)
    py, ck = _pair(s.controller.config, wide, s.planner)
    cmd_py, cmd_ck = py.make_command(), ck.make_command()
    ref, w = Reference(), WrenchState()
    for angle in [a for a in ANGLES if a < math.pi] * 3:
        snap = _random_step(s, rng, ref, w, dq=0.5, dv=0.5, err=0.05, force=30.0, moment=3.0, angle=angle)
        assert _both(py, ck, snap, ref, w, cmd_py, cmd_ck)
    assert ck.kernel_fallbacks == 0


def test_compiled_path_is_the_closer_one_to_an_exact_evaluation() -> None:
    """On states of the FR3 docking run (where the two paths differ most): q̈* and M q̈* + h − Jᵀ F_ext evaluated
    in 50-digit arithmetic from the same float inputs. Both paths are within the round-off bound of
    HQPController.roundoff_bounds of the exact values (each correct evaluation is within half of it). The
    compiled path is the closer one here (measured: τ within 1.3e-13 relative, the Python path's dsyevd
    eigenvectors within 4.3e-12); that ordering depends on the LAPACK build, so it is reported, not
    asserted."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 50
    s = build(scenario_from_dict(scenario_dict("fr3_docking_hqp")))
    py, ck = _pair(s.controller.config, s.plant, s.planner)
    cmd_py, cmd_ck = py.make_command(), ck.make_command()
    steps = []

    def record(snap, ref, wrench, cmd):
        if len(steps) < 12 and round(snap.t * 1000) % 350 == 0:
            steps.append((snap.q.copy(), snap.v.copy(), snap.t, ref.copy(), wrench.ext_world.copy()))
        s.controller._compute_python(snap, ref, wrench, cmd)

    s.controller.compute = record
    simulate(s, duration=4.5)
    ratios = {"py": 0.0, "ck": 0.0}
    w = WrenchState()
    for q, v, t, ref, F in steps:
        snap = s.dynamics.update(q, v, t)
        w.ext_world[:] = F
        py.compute(snap, ref, w, cmd_py)
        ck.compute(snap, ref, w, cmd_ck)
        assert ck.kernel_fallbacks == 0
        p = py.prob  # the inputs: J, M⁻¹, M, h and the bit-exact floats F_ext, K_r, e_p, Δν, q̈_2 (∇w aside)
        J, Minv, M = (mp.matrix(a.tolist()) for a in (snap.J_ee_lwa, snap.Minv, snap.M))
        Li = J * Minv * J.T
        E, Q = mp.eigsy((Li + Li.T) / 2)
        scale = mp.mpf(max(1.0 - p.alpha, py.config.k_min_ratio))
        Lam = Q * mp.diag([1 / E[i] for i in range(6)]) * Q.T
        Lh = Q * mp.diag([1 / mp.sqrt(E[i] / scale) for i in range(6)]) * Q.T
        S0 = py._S0.tolist()
        Dr = mp.matrix([[Lh[i, j] * S0[i][j] for j in range(6)] for i in range(6)])
        kr, ep = p.K_r.tolist(), p.e_p.tolist()
        Fr = -(Dr * mp.matrix(p.dnu.tolist())) - mp.matrix([kr[i] * ep[i] for i in range(6)])
        b = mp.matrix([*ref.acc.tolist(), *ref.alpha.tolist()]) + Li * (Fr + mp.matrix(p.F_ext.tolist()))
        b = b - mp.matrix(snap.dJdq_ee_lwa.tolist())
        q2 = mp.matrix(p.qdd_posture.tolist())
        x = q2 + Minv * J.T * Lam * (b - J * q2)
        offset = mp.matrix(snap.h.tolist())
        if py.config.wrench_compensation:  # the default: τ = M q̈* + h − Jᵀ F_ext
            offset = offset - J.T * mp.matrix(p.F_ext.tolist())
        tau = M * x + offset
        x_f = np.array([float(x[i]) for i in range(s.plant.nv)])
        tau_f = np.array([float(tau[i]) for i in range(s.plant.nv)])
        bounds = py.roundoff_bounds(snap, ref, cmd_py)
        for key, ctrl in (("py", py), ("ck", ck)):
            got = [("qdd_closed", ctrl.prob.qdd_closed), ("tau", ctrl._Mx + ctrl.prob.tau_offset)]
            exact = [("qdd_closed", x_f), ("tau", tau_f)]
            r = assert_within_bound("controller", s.plant.nv, got, exact, [bounds["qdd_closed"], bounds["Mx"]])
            ratios[key] = max(ratios[key], r)
    assert len(steps) == 12
    assert 0.0 < ratios["ck"] < 1.0 and 0.0 < ratios["py"] < 1.0, ratios


def test_rebinds_when_the_loop_objects_change(setup) -> None:
    s = setup
    rng = np.random.default_rng(SEED + 4)
    py, ck = _pair(s.controller.config, s.plant, s.planner)
    for _ in range(3):
        ref, w = Reference(), WrenchState()
        cmd_py, cmd_ck = py.make_command(), ck.make_command()
        snap = _random_step(s, rng, ref, w, dv=0.01, err=0.001, moment=0.001)
        assert _both(py, ck, snap, ref, w, cmd_py, cmd_ck)
        assert ck._bound[1] is ref and ck._bound[3] is cmd_ck


def test_solve_and_build_problem_after_a_compiled_step(setup) -> None:
    """The public API after a compiled compute(): solve() assembles the rows of that step (the kernel does
    not store them) and returns the closed form; build_problem() runs the Python path."""
    s = setup
    rng = np.random.default_rng(SEED + 5)
    py, ck = _pair(s.controller.config, s.plant, s.planner)
    ref, w = Reference(), WrenchState()
    snap = _random_step(s, rng, ref, w, dv=0.01, err=0.001, moment=0.001)
    py.compute(snap, ref, w, py.make_command())
    ck.compute(snap, ref, w, ck.make_command())
    assert ck._kernel_step  # the scalars are synchronised on first access
    sol_py, sol_ck = py.solve(snap), ck.solve(snap)
    assert sol_ck.status == sol_py.status == STATUS_CLOSED_FORM and ck.prob.qp_assembled
    # the rows are assembled in Python on both sides, from the state (exact) and from b, q̈*, q̈_2 and the τ
    # offset (round-off): q1 = −(Jᵀ b + ε M q̈*) within S = max |J|ᵀ S_b + ε ‖M‖∞ S_q̈, κ(Λ⁻¹); q2 = −M q̈_2
    # within ‖M‖∞ S_q̈₂; h = τ_max ∓ offset within the offset's S; the others from exact inputs
    for name in ("lb", "ub", "P1", "P2"):
        np.testing.assert_array_equal(getattr(ck.prob, name), getattr(py.prob, name), err_msg=name)
    b = py.roundoff_bounds(snap, ref, py.make_command())
    s_b, kappa = b["b"]
    m_inf = float(np.abs(snap.M).sum(axis=1).max())
    s_q1 = s_b * float(np.abs(py.prob.J).sum(axis=0).max()) + py.config.regularization * b["Mx"][0]
    s_q2, k_q2 = b["qdd_posture"]
    names = ("q1", "q2", "h")
    assert_within_bound(
        "controller", s.plant.nv, [(n, getattr(ck.prob, n)) for n in names], [(n, getattr(py.prob, n)) for n in names],
        [(s_q1, kappa), (m_inf * s_q2, k_q2), b["tau_offset"]],
    )
    p_py, p_ck = py.build_problem(snap, ref, w), ck.build_problem(snap, ref, w)
    for name in (*EXACT, *TASK, *JOINT, "lb", "ub", "h", "P1", "q1"):
        np.testing.assert_array_equal(getattr(p_ck, name), getattr(p_py, name), err_msg=name)


# ------------------------------------------------------------------------------ whole runs


@pytest.mark.slow
@pytest.mark.parametrize("name", SCENES)
def test_every_step_of_a_docking_run_equals_python(name: str) -> None:
    """The Python path runs the whole docking (approach, funnel, bore, seating; on the FR3 most steps with
    ∇w); at every step the compiled controller computes on the same snapshot, reference and wrench."""
    with kernels.forced("python"):
        s = build(scenario_from_dict(scenario_dict(name)))
    py = s.controller
    with kernels.forced("compiled"):
        ck = HQPController(py.config, s.plant, s.planner)
    cmd_ck = ck.make_command()
    compute = py.compute
    steps, peak = [0], [0.0]

    def both(snap, ref, wrench, cmd):
        compute(snap, ref, wrench, cmd)
        ck.compute(snap, ref, wrench, cmd_ck)
        try:
            _compare(py, ck, cmd, cmd_ck, snap, ref)
        except AssertionError as exc:
            raise AssertionError(f"step {steps[0]} (t = {snap.t:.3f} s): {exc}") from exc
        steps[0] += 1
        peak[0] = max(peak[0], float(np.abs(wrench.ext_world[:3]).max()))

    py.compute = both
    _, status, _, _ = simulate(s)
    assert status == "completed"
    assert steps[0] > 8000 and peak[0] > 1.0, "the run must reach contact"
    assert ck.kernel_fallbacks == 0
    if name.startswith("fr3"):
        assert ck.n_sa > steps[0] // 2  # the ∇w branch runs in C


@pytest.mark.slow
@pytest.mark.parametrize("name", SCENES)
def test_compiled_run_equals_python_run(name: str) -> None:
    """Each path runs its own simulation: the telemetry agrees until the first contact (the state to
    TOL_FREE_RUN, the torques, controller channels and wrenches to TOL_FREE_RUN_CMD: per step the paths
    differ within the round-off bound of HQPController.roundoff_bounds, which the stable free-space loop
    does not amplify; the wall-clock qp_solve_time not compared); after it the stiff contact amplifies
    round-off, so the docking metrics are compared (TOL_SEATED)."""
    res = {}
    for mode in ("python", "compiled"):
        with kernels.forced(mode):
            s = build(scenario_from_dict(scenario_dict(name)))
        r = run(s.scenario, out_root=None, setup=s)
        assert r.status == "completed" and r.verdict == "PASS"
        summary = s.controller.summary()
        assert summary["kernel"] == mode and summary["kernel_fallbacks"] == 0 and summary["qp_solved"] == 0
        res[mode] = r
    a, b = res["python"].telemetry, res["compiled"].telemetry
    contact = np.flatnonzero(a["contact_count_all"] > 0)
    first = int(contact[0])
    assert first > 3000  # seconds of free-space motion
    for k, x in a.items():
        if k == "ctrl_qp_solve_time":
            continue
        tol = TOL_FREE_RUN_CMD if k.startswith(("tau_", "ctrl_", "wrench_")) else TOL_FREE_RUN
        assert _rel(b[k][:first], x[:first]) <= tol, (k, _rel(b[k][:first], x[:first]))
    ma, mb = res["python"].metrics, res["compiled"].metrics
    np.testing.assert_allclose(mb["contact.peak_force_truth"], ma["contact.peak_force_truth"], rtol=0.01)
    np.testing.assert_allclose(mb["docking.depth"], ma["docking.depth"], rtol=0, atol=TOL_SEATED)
    np.testing.assert_allclose(mb["docking.lateral"], ma["docking.lateral"], rtol=0, atol=TOL_SEATED)
    np.testing.assert_allclose(b["ee_pos"][-1], a["ee_pos"][-1], rtol=0, atol=TOL_SEATED)


# ------------------------------------------------------------------------------ hand-backs


def test_infeasible_closed_form_hands_back_to_the_qps(setup) -> None:
    """Steps whose closed form violates a constraint alternate with feasible ones (a large wrench on the
    tool drives the task acceleration beyond the velocity box), then a 3 N·m torque limit makes every
    step infeasible: each infeasible step is handed back (nothing written), the Python path solves the
    QPs, and torques, diagnostics, problem, solution and counters (warm starts included) equal a
    pure-Python controller's bit for bit; the feasible steps run the kernel."""
    s = setup
    rng = np.random.default_rng(SEED + 6)
    tight = dataclasses.replace(s.plant, tau_max=np.full(s.plant.nv, 3.0))
    for plant, n in ((s.plant, 30), (tight, 10)):
        py, ck = _pair(s.controller.config, plant, s.planner)
        cmd_py, cmd_ck = py.make_command(), ck.make_command()
        ref, w = Reference(), WrenchState()
        handed = 0
        for i in range(n):
            large = i % 3 != 0 or plant is tight
            kw = {"dv": 0.5, "err": 0.1, "force": 50.0, "moment": 50.0} if large else {"dv": 0.01, "moment": 0.001}
            snap = _random_step(s, rng, ref, w, **kw)
            handed += not _both(py, ck, snap, ref, w, cmd_py, cmd_ck)
        assert py.n_qp == handed == ck.kernel_fallbacks
        if plant is tight:
            assert handed == n
        else:
            assert n // 3 <= handed < n, handed  # both kinds of step occurred
        assert py.n_qp_iterations > 0 and _counters(ck) == _counters(py)


def test_not_positive_definite_lambda_inv_hands_back(setup) -> None:
    """M⁻¹ negated (Λ⁻¹ negative definite) or a zero row of J (Λ⁻¹ singular): the Jacobi eigenvalues are
    not positive, the kernel writes nothing, and the Python path takes the step (whatever it computes
    there, bit for bit what the Python controller computes); the next normal step runs the kernel."""
    s = setup
    rng = np.random.default_rng(SEED + 7)
    py, ck = _pair(s.controller.config, s.plant, s.planner)
    cmd_py, cmd_ck = py.make_command(), ck.make_command()
    ref, w = Reference(), WrenchState()
    for bad in (None, "negated", "zero_row", None):
        snap = _random_step(s, rng, ref, w, dv=0.01, err=0.001, moment=0.001)
        if bad == "negated":
            snap.Minv *= -1.0
        elif bad == "zero_row":
            snap.J_ee_lwa[5] = 0.0
            snap.manipulability = 1.0  # no ∇w (Python would raise in np.linalg.solve there)
        with np.errstate(all="ignore"):
            assert _both(py, ck, snap, ref, w, cmd_py, cmd_ck) == (bad is None)
    assert ck.kernel_fallbacks == 2


def test_where_the_kernels_log_is_undefined_it_hands_the_step_to_python(setup) -> None:
    """A garbage rotation (trace < −3: the square root of a negative in the kernel's near-π log): the kernel
    returns its domain status and writes nothing, the Python path takes the step (Pinocchio's log3 of
    whatever it is given), bit for bit the Python controller's."""
    s = setup
    snap = s.dynamics.update(s.q0, np.zeros(s.plant.nv))
    snap.T_world_ee[:3, :3] = -1e200 * np.eye(3)
    ref, w = Reference(), WrenchState()
    py, ck = _pair(s.controller.config, s.plant, s.planner)
    cmd_py, cmd_ck = py.make_command(), ck.make_command()
    with np.errstate(all="ignore"):
        py.compute(snap, ref, w, cmd_py)
        ck.compute(snap, ref, w, cmd_ck)
    assert ck.kernel_fallbacks == 1
    np.testing.assert_array_equal(cmd_ck.tau, cmd_py.tau)  # the same operations on both sides


def test_sensorless_and_qp_always_run_the_python_path() -> None:
    """The momentum observer (sensorless scenario) and qp_mode "always" never build the kernel: the
    Python path runs every step, even with DOCKBENCH_KERNELS=compiled."""
    with kernels.forced("compiled"):
        s = build(scenario_from_dict(scenario_dict("fr3_docking_hqp_sensorless")))
        always = HQPController(
            dataclasses.replace(s.controller.config, force_source="sensor", qp_mode="always"), s.plant, s.planner
        )
    assert s.controller.observer is not None
    _, status, _, _ = simulate(s, duration=0.2)
    assert status == "completed"
    summary = s.controller.summary()
    assert summary["kernel"] == "python" and summary["kernel_fallbacks"] == 0 and summary["qp_steps"] > 100
    assert s.controller._kernel is None
    rng = np.random.default_rng(SEED + 8)
    ref, w = Reference(), WrenchState()
    snap = _random_step(s, rng, ref, w)
    always.compute(snap, ref, w, always.make_command())
    assert always.summary()["kernel"] == "python" and always._kernel is None and always.sol.status == STATUS_QP


# ------------------------------------------------------------------------------ binding


def _kernel_args(nv: int = 7) -> dict:
    """Valid HQPKernel arguments (fresh arrays; the closed form of this state is feasible)."""
    J = np.hstack((np.eye(6), np.zeros((6, nv - 6))))
    consts = np.tile([-1e3, 1e3, -1e3, 1e3, 1e3, 0.0], (nv, 1))
    return {
        "J_ee_lwa": J,
        "T_world_ee": np.eye(4),
        "T_world_sensor": np.eye(4),
        "twist_ee_lwa": np.zeros(6),
        "ref_flat": Reference().flat,
        "ext_world": np.zeros(6),
        "M": np.asfortranarray(np.eye(nv)),
        "Minv": np.eye(nv),
        "h": np.zeros(nv),
        "q": np.zeros(nv),
        "v": np.zeros(nv),
        "dJdq_ee_lwa": np.zeros(6),
        "k0": np.full(6, 100.0),
        "S0": np.full((6, 6), 20.0),
        "q_ref": np.zeros(nv),
        "joint_consts": consts,
        "ff_f": np.zeros(nv),
        "ff_d": np.zeros(nv),
        "ff_half_f": np.ones(nv),
        "ff_g": np.zeros(nv),
        "tau": np.zeros(nv),
        "diag": np.zeros(_KMOD.NDIAG),
        "J": np.zeros((6, nv)),
        "vec6": np.zeros((8, 6)),
        "Lambda_inv": np.zeros((6, 6)),
        "LL": np.zeros((12, 6)),
        "D_r": np.zeros((6, 6)),
        "MinvJt": np.zeros((nv, 6)),
        "qdd_posture": np.zeros(nv),
        "qdd_closed": np.zeros(nv),
        "tau_offset": np.zeros(nv),
        "Mx": np.zeros(nv),
        "qdd": np.zeros(nv),
        "qdd_level1": np.zeros(nv),
        "results": np.zeros(_KMOD.NRESULTS),
        "gains": {
            "k_alpha": 0.5, "sigmoid_plain": True, "k_min_ratio": 0.3, "k_j": 5.0, "d_j": 10.0, "k_sa": 500.0,
            "w_th": 0.08, "inv_horizon": 20.0, "k2": 800.0, "k2_horizon": 40.0, "use_force_feedback": True,
            "wrench_compensation": False,
        },
        "ff_mode": 1,
        "ff_damping": False,
        "ff_vel_eps": 0.01,
        "ff_state": np.zeros(3),
        "filt_state": np.zeros(7),
        "fs_state": np.zeros(6),
        "ff_threshold": 1.0,
        "ff_dw": 0.02,
        "filt_on": False,
        "filt_beta": 1.0,
        "fs_on": False,
        "fs_params": AxialForceSetpoint.kernel_args_off()["fs_params"],
    }


def _kernel_args_with_options(nv: int = 7) -> dict:
    """:func:`_kernel_args` with the force filter, the force set-point (axis z, 5 N, started at t = 0, its
    ramp 1 s) and the hybrid feedforward on, and a contact force of 3 N along the axis: every option's state
    changes in a step at t = 0.5."""
    args = _kernel_args(nv)
    args["ext_world"][2] = 3.0
    args["ff_f"][:] = 0.5
    args["ff_half_f"][:] = 0.25
    args |= {
        "ff_mode": 3, "filt_on": True, "filt_beta": 0.2, "fs_on": True, "diag": np.zeros(_KMOD.NDIAG + 4),
        "fs_params": {
            "axis_x": 0.0, "axis_y": 0.0, "axis_z": 1.0, "force": 5.0, "ramp_time": 1.0, "delay": 0.0,
            "contact_threshold": 1.0, "k_p": 0.0, "k_i_period": 0.01, "i_max": 5.0, "damping": 10.0,
        },
    }
    return args


@pytest.mark.parametrize(
    ("name", "value", "error", "message"),
    [
        ("twist_ee_lwa", np.zeros(5), ValueError, "twist_ee_lwa must hold 6 floats, got 5"),
        ("h", np.zeros(7, dtype=np.float32), TypeError, "h must be float64"),
        ("q", np.zeros(7, dtype=int), TypeError, "q must be float64"),
        ("dJdq_ee_lwa", np.zeros(12)[::2], TypeError, "dJdq_ee_lwa must be a contiguous float64 array"),
        ("ext_world", [0.0] * 6, TypeError, "ext_world must be a contiguous float64 array"),
        ("M", np.eye(7), None, None),  # C order as well as Fortran order
        ("diag", np.frombuffer(bytes(88)), TypeError, "diag must be a contiguous writable float64 array"),
        ("diag", np.zeros(10), ValueError, "diag must hold 11 floats, got 10"),
        ("results", np.zeros(3), ValueError, "results must hold 4 floats, got 3"),
        ("J_ee_lwa", np.zeros((7, 6)), ValueError, r"J_ee_lwa has the wrong shape \(expected a 6 x 7"),
        ("J_ee_lwa", np.zeros(42), ValueError, "J_ee_lwa has the wrong shape"),
        ("T_world_sensor", np.eye(4, dtype=np.float32), ValueError, "T_world_sensor must be float64"),
        ("Minv", np.eye(6), ValueError, "Minv has the wrong shape"),
        ("joint_consts", np.zeros((6, 7)), ValueError, "joint_consts has the wrong shape"),
        ("vec6", np.zeros((8, 6))[:, ::-1].copy().T, ValueError, "vec6 has the wrong shape"),
        ("LL", np.zeros((12, 6)).view(np.int64), ValueError, "LL must be float64"),
        ("D_r", np.frombuffer(bytes(288)).reshape(6, 6), TypeError, "D_r must be a writable float64 array"),
        ("S0", None, TypeError, "S0 must be a float64 array"),
        ("ff_mode", 4, ValueError, "ff_mode must be 0"),
        ("ff_state", np.zeros(2), ValueError, "ff_state must hold 3 floats, got 2"),
        ("filt_state", np.zeros(6), ValueError, "filt_state must hold 7 floats, got 6"),
        ("fs_state", np.frombuffer(bytes(48)), TypeError, "fs_state must be a contiguous writable float64 array"),
        ("fs_params", (0.0,) * 11, TypeError, "HQPKernel: fs_params must be a dict of name -> value, got tuple"),
        ("fs_params", {"axis_x": 0.0}, ValueError, "HQPKernel: fs_params is missing the key 'axis_y'"),
        ("fs_params", dict.fromkeys(("axis_x", "axis_y", "axis_z", "force", "ramp_time", "delay",
                                     "contact_threshold", "k_p", "k_i_period", "i_max", "damping"), "a"),
         TypeError, r"HQPKernel: fs_params\['axis_x'\] must be a float, got str"),
        ("fs_on", True, ValueError, "diag must hold 15 floats, got 11"),  # the set-point's 4 diagnostics
    ],
)
def test_bad_buffers_raise_errors_that_name_the_argument(name, value, error, message) -> None:
    args = _kernel_args()
    args[name] = value
    if error is None:
        assert _KMOD.HQPKernel(**args).step(1.0, 0.0) == 0
        return
    with pytest.raises(error, match=message):
        _KMOD.HQPKernel(**args)


def test_step_arguments_must_be_two_floats() -> None:
    k = _KMOD.HQPKernel(**_kernel_args())
    with pytest.raises(TypeError):
        k.step("w", 0.0)
    with pytest.raises(TypeError):
        k.step(1.0, "t")
    with pytest.raises(TypeError, match=r"takes 2 arguments \(1 given\)"):
        k.step(1.0)
    assert k.step(1, 0) == 0  # ints are converted


def test_an_unbound_kernel_refuses_to_step() -> None:
    k = _KMOD.HQPKernel.__new__(_KMOD.HQPKernel)
    with pytest.raises(RuntimeError, match="not bound"):
        k.step(1.0, 0.0)
    args = _kernel_args()
    k = _KMOD.HQPKernel(**args)
    assert k.step(1.0, 0.0) == 0
    with pytest.raises(ValueError):
        k.__init__(**dict(args, twist_ee_lwa=np.zeros(3)))  # a failed re-init unbinds
    with pytest.raises(RuntimeError, match="not bound"):
        k.step(1.0, 0.0)


def test_strided_matrices_are_read_and_written_in_their_own_layout() -> None:
    """J, M, M⁻¹, T (read) and the problem matrices (written) as C arrays, Fortran arrays or strided views
    give the same step."""
    rng = np.random.default_rng(SEED + 9)
    base = _kernel_args()
    base["J_ee_lwa"] = rng.normal(size=(6, 7))
    B = rng.normal(size=(7, 7))
    base["M"] = B @ B.T + 7 * np.eye(7)
    base["Minv"] = np.linalg.inv(base["M"])
    base["T_world_ee"][...] = lie.se3_exp(rng.normal(scale=0.1, size=6))
    base["v"][:] = rng.normal(scale=0.1, size=7)
    outs = []
    for layout in ("C", "F", "strided"):
        args = dict(base)
        for k in ("J_ee_lwa", "M", "Minv", "T_world_ee", "J", "vec6", "Lambda_inv", "LL", "D_r", "MinvJt"):
            a = base[k]
            if layout == "F":
                args[k] = np.asfortranarray(a)
            elif layout == "strided":
                big = np.zeros((a.shape[0], 2 * a.shape[1]))
                big[:, ::2] = a
                args[k] = big[:, ::2]
            else:
                args[k] = np.ascontiguousarray(a)
        for k in ("tau", "diag", "results", "qdd_closed"):
            args[k] = np.zeros_like(base[k])
        assert _KMOD.HQPKernel(**args).step(0.01, 0.0) == 0  # w < w_th: ∇w too
        outs.append([np.array(args[k]) for k in ("tau", "qdd_closed", "J", "vec6", "LL", "D_r", "MinvJt")])
    for other in outs[1:]:
        for a, b in zip(other, outs[0], strict=True):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(outs[0][2], base["J_ee_lwa"])


def test_hand_back_writes_nothing() -> None:
    """Each hand-back status: the outputs and the force options' state keep their previous contents (the
    same step with a feasible closed form changes every one of them). (STATUS_GRAD, J Jᵀ of ∇w not positive
    definite, cannot be reached with Λ⁻¹ = J M⁻¹ Jᵀ positive definite but by round-off: its test is
    test_manipulability_gradient_port_agrees_with_the_evaluator.)"""
    args = _kernel_args_with_options()
    outs = (
        "tau",
        "diag",
        "J",
        "vec6",
        "Lambda_inv",
        "LL",
        "D_r",
        "MinvJt",
        "qdd_posture",
        "qdd_closed",
        "tau_offset",
        "Mx",
        "qdd",
        "qdd_level1",
        "results",
    )
    states = {"ff_state": [0.0, 0.0, 0.0], "filt_state": [0.5] * 6 + [1.0], "fs_state": [0.0, 1.0, 0, 0, 0, 0]}
    a = dict(args, **{k: np.array(v) for k, v in states.items()})
    assert _KMOD.HQPKernel(**a).step(1.0, 0.5) == _KMOD.STATUS_OK
    for k, v in states.items():
        assert np.any(a[k] != np.array(v)), (k, a[k])  # the step advances every option's state
    np.testing.assert_array_equal(a["ff_state"], [1.0, 1.0, 0.02])  # latched (|f̄| > 1 N), w = T / T_blend
    np.testing.assert_array_equal(a["filt_state"], [0.4, 0.4, 0.5 + 0.2 * (3.0 - 0.5), 0.4, 0.4, 0.4, 1.0])
    assert a["fs_state"][2] == 0.5 and a["diag"][11:].tolist() == [0.5, 2.5, 0.5 + 0.2 * 2.5, a["fs_state"][1]]
    cases = {
        _KMOD.STATUS_INFEASIBLE: {"joint_consts": np.tile([1.0, 2.0, -1e3, 1e3, 1e3, 0.0], (7, 1))},
        _KMOD.STATUS_EIG: {"Minv": -np.eye(7)},
        _KMOD.STATUS_DOMAIN: {"T_world_ee": np.diag([-1e200, -1e200, -1e200, 1.0])},
    }
    for status, change in cases.items():
        a = dict(args, **change)
        for k in outs:
            a[k] = np.full_like(args[k], 7.0)
        for k, v in states.items():
            a[k] = np.array(v)
        assert _KMOD.HQPKernel(**a).step(1.0, 0.5) == status
        for k in outs:
            assert np.all(a[k] == 7.0), (status, k)
        for k, v in states.items():
            np.testing.assert_array_equal(a[k], v, err_msg=f"{status} {k}")


def test_buffers_are_held_while_bound_and_released_after() -> None:
    """The kernel keeps its arrays alive and releases every buffer on deallocation or a failed bind
    (reference counts back to where they were: nothing leaks)."""
    args = _kernel_args()
    arrays = [v for v in args.values() if isinstance(v, np.ndarray)]
    before = [sys.getrefcount(a) for a in arrays]
    kernels_ = [_KMOD.HQPKernel(**args) for _ in range(50)]
    assert all(sys.getrefcount(a) > b for a, b in zip(arrays, before, strict=True))
    del kernels_
    for bad in ("results", "MinvJt", "ff_half_f"):  # fail after some buffers are bound
        with pytest.raises((ValueError, TypeError)):
            _KMOD.HQPKernel(**dict(args, **{bad: np.zeros(1)}))
    gc.collect()
    assert [sys.getrefcount(a) for a in arrays] == before
    tau = np.zeros(7)
    ref = weakref.ref(tau)
    k = _KMOD.HQPKernel(**dict(args, tau=tau))
    del tau
    assert ref() is not None  # held by the kernel
    del k
    assert ref() is None
