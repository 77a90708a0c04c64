"""The compiled SE(3) kernel (controllers/_se3_kernel.c) against the Python reference it replaces
(controllers/se3_lie.py SE3LieController.law and _compute_python, sim/lie.py,
planners/motion_reference.py).

The C kernel evaluates the same equations with its own float schedule (the rank-one forms of dexp
applied to vectors, a series of the coefficients truncated where the tail is below 2⁻⁶⁴, the rotation
log from the antisymmetric part), the Python reference with Pinocchio's log6 and 6×6 numpy matrices. So
they agree within a round-off bound, never bit for bit:

* the scalar functions (the coefficients of θ on every tier of the kernel's series and in closed form,
  the log on SE(3) up to θ = π) within their evaluation bounds;
* every intermediate of the law (T̃, λ, λ̇, λ̈*, Ṽ, F̃, γ, V̇_ref, the desired motion) and τ, q̈_ref within
  the kernel guard's bound 10 · n ε κ S with the S and κ of SE3LieController._guard_bounds (tests/roundoff.py),
  on random inputs: near-zero and near-π rotations, diagonal and full A, D, K, F_d zero and not, ω_d / α_d
  zero and not, world and pass-through desired motion, the shipped FR3 law (force filter, hybrid
  feedforward);
* the state of the force filter and of the hybrid feedforward's latch bit for bit (scalar code on both
  sides), through the latch's blend;
* every step of whole docking runs (iiwa14 and FR3 scenarios, and iiwa14 with the pass-through se3_topp
  planner): both paths on the very same states; and the runs of each path against each other (equal
  telemetry in free space; after contact round-off is amplified, so the docking metrics are compared);
* the fallback when Λ_b⁻¹ is not positive definite or the rotation log is undefined (then the Python path
  takes the step on both sides: bit for bit), bad buffers, no leaks.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import sys
import weakref

import numpy as np
import pytest
from dockbench.controllers.base import PlantInfo
from dockbench.controllers.se3_lie import SE3LieConfig, SE3LieController
from dockbench.planners.base import Reference
from dockbench.sim import kernels, lie
from dockbench.sim.loop import build, simulate
from dockbench.sim.scenario import scenario_from_dict
from dockbench.sim.wrench import WrenchState

from tests.helpers import scenario_dict
from tests.roundoff import assert_controllers_agree, assert_within_bound

SE3 = "controllers._se3_kernel"
_KMOD, _WHY = kernels.status(SE3)
pytestmark = pytest.mark.skipif(_KMOD is None, reason=f"{_WHY}; {kernels.BUILD_HINT}")

# Tolerance table (the only tolerances used in this module besides the guard's bound, tests/roundoff.py)
#: telemetry of the two paths' runs before the first contact (absolute; measured ≤ 7.3e-14 on 3 BLAS paths)
TOL_FREE_RUN = 1e-11
TOL_SEATED = 1e-5  # final EE position of the two paths' runs after contact [m] (measured ≤ 3.6e-8 on 3 BLAS paths)

SEED = 23
LAW = ("T_err", "lam", "lam_dot", "lam_ddot", "V_err", "F_err", "gamma", "dV_ref")
#: rotation errors [rad]: exact 0 (round-off only), series tiers, the series/closed-form switch, near π, π
ANGLES = (0.0, 1e-9, 1e-5, 0.02, 0.35, 1.49, 1.51, 2.5, 3.0, math.pi - 1e-6, math.pi)
#: the kernel's truncated series vs lie.coefficients' 14-term Horner sums: |Δ| ≤ C_SERIES ε Σ|c_k| x^k
#: (two Horner evaluations of ≤ 14 terms, γ_28 each, plus the kernel's dropped tail < 2⁻⁶⁴ |f|; measured ≤ 1)
C_SERIES = 56
#: the kernel's SE(3) log (antisymmetric-part axis, its own γ) vs Pinocchio's log6, |Δ| ≤ C_LOG ε (1 + |p|)
#: (1 + θ)²: each path's error is a few ε of its inputs (unit rotation entries, the translation p) amplified
#: by J_l3⁻¹ (entries ≤ (1 + θ)²); measured ≤ 0.6
C_LOG = 64


def _qdd_bound(py: SE3LieController, snap, s_law: float) -> kernels.Bounds:
    """S and κ of q̈_ref = M⁻¹J_bᵀ y − d_null q̇ (an nv-term product after the solve Λ_b⁻¹ y = rhs): the solve's
    part S_solve = max |M⁻¹J_bᵀ||y| with κ = κ(Λ_b⁻¹), and the plain part d_null max |q̇| plus V̇_ref's
    round-off (of size ``s_law``) carried through ‖M⁻¹J_bᵀ Λ_b‖∞ (sim.kernels.split_bound)."""
    Jb = snap.J_ee_body
    MinvJt = snap.Minv @ Jb.T
    Li = Jb @ MinvJt
    s_solve = kernels.magnitude(np.abs(MinvJt) @ np.abs(py._py["y"]))
    s_plain = py.config.d_null * kernels.magnitude(snap.v) + s_law * kernels.inf_norm_times_inverse(MinvJt, Li)
    return [kernels.split_bound(s_solve, kernels.condition(Li), s_plain)]


def _pair(config: SE3LieConfig, plant: PlantInfo, planner) -> tuple[SE3LieController, SE3LieController]:
    """(Python reference, compiled) controllers with the same configuration."""
    with kernels.forced("python"):
        py = SE3LieController(config, plant, planner)
    with kernels.forced("compiled"):
        ck = SE3LieController(config, plant, planner)
    return py, ck


def _assert_states_equal(py: SE3LieController, ck: SE3LieController) -> None:
    """The force filter's and the hybrid feedforward latch's state: the same scalar operations on both sides."""
    np.testing.assert_array_equal(ck.force_filter.state, py.force_filter.state, err_msg="force filter state")
    np.testing.assert_array_equal(ck.ff.state, py.ff.state, err_msg="hybrid feedforward state")


def _compare(py: SE3LieController, ck: SE3LieController, cmd_py, cmd_ck, snap, ref, w) -> None:
    """After compute() on the same inputs: τ, the law's results, the desired motion and q̈_ref within the
    guard's bounds (S and κ from the Python step); the force options' state bit for bit."""
    assert ck._from_kernel and not py._from_kernel, "each path must have run its own step"
    _assert_states_equal(py, ck)
    bounds = py._guard_bounds(snap, ref, w, cmd_py)
    s_law = bounds[1]
    assert_controllers_agree(ck, py, snap, ref, w, cmd_ck, cmd_py)  # τ, λ, λ̇, γ, V̇_ref
    names = (*LAW, "diag")
    got = [(n, getattr(ck, n)) for n in LAW] + [("diag", cmd_ck.diag.copy())]
    want = [(n, getattr(py, n)) for n in LAW] + [("diag", cmd_py.diag.copy())]
    # the (6, 18) product for λ̈* is 18 terms: n = 18 covers it
    assert_within_bound("controller", 18, got, want, [s_law] * len(names))
    # the desired motion: rotations of the world reference (three-term sums) and copies
    T_d, V_d, dV_d = py.desired_motion()
    s_motion = (3.0 * kernels.magnitude(T_d, V_d, dV_d, ref.flat[:9]) + 1.0, 1.0)
    motion = ("T_d", "V_d", "dV_d")
    assert_within_bound(
        "controller", 6, list(zip(motion, ck.desired_motion(), strict=True)),
        list(zip(motion, (T_d, V_d, dV_d), strict=True)), [s_motion] * 3,
    )
    assert_within_bound(
        "controller", py.plant.nv, [("q_ddot_ref", ck.q_ddot_ref)], [("q_ddot_ref", py.q_ddot_ref)],
        _qdd_bound(py, snap, s_law[0]),
    )


# ------------------------------------------------------------------------------ scalar functions


def test_jacobian_coeffs_agree_with_lie_on_every_tier() -> None:
    """The kernel's coefficients of θ (a series with 1 … 14 terms by tier, the closed forms from θ = 1.5)
    against lie.coefficients (14-term series, the same closed forms: equal there, the same operations and
    libm), at the switch, one ulp either side of it and on random x over 40 decades."""
    rng = np.random.default_rng(SEED)
    xs = [0.0, 5e-324, math.pi**2, 4 * math.pi**2 * 0.99, 30.0, lie._SERIES_X]
    xs += [float(np.nextafter(lie._SERIES_X, 0.0)), float(np.nextafter(lie._SERIES_X, 1e9))]
    xs += (10.0 ** rng.uniform(-30.0, 1.5, 3000)).tolist()
    series = (*lie._SERIES, lie._GAMMA, *lie._SERIES_D)
    for x in xs:
        got, want = _KMOD.jacobian_coeffs(x), lie.coefficients(x)
        if x >= lie._SERIES_X:
            assert tuple(got) == tuple(want), x
            continue
        for g, w, c in zip(got, want, series, strict=True):
            mag = sum(abs(ck) * x**k for k, ck in enumerate(c))
            assert abs(g - w) <= C_SERIES * kernels.EPS * mag, (x, g, w)


def test_se3_log_agrees_with_pinocchio_up_to_pi() -> None:
    """The kernel's SE(3) log (both branches of its rotation log: c > −0.9 and the near-π axis) against
    lie.se3_log (Pinocchio's log6), also at axes with equal components near π (where the kernel's choice
    of axis column ties)."""
    rng = np.random.default_rng(SEED + 1)
    cases = []
    for angle in ANGLES:
        for _ in range(200):
            axis = rng.normal(size=3)
            cases.append((rng.normal(size=3), angle * axis / np.linalg.norm(axis)))
    for angle in (2.8, 3.0, math.pi - 1e-6, math.pi):
        for axis in ((1, 1, 0.3), (1, -0.2, 1), (0.1, 1, 1), (1, 1, 1), (-1, 1, 1), (1, 1, 0), (0, 1, -1)):
            phi = angle * np.array(axis, dtype=float) / np.linalg.norm(axis)
            cases += [(np.zeros(3), phi), (rng.normal(size=3), phi)]
    for rho, phi in cases:
        T = lie.se3_exp(np.concatenate((rho, phi)))
        lam, _ = _KMOD.se3_log(*T[:3, :3].ravel().tolist(), *T[:3, 3].tolist())
        want = lie.se3_log(T)
        theta = float(np.linalg.norm(want[3:]))
        if theta > math.pi - 1e-5 and np.abs(np.array(lam[3:]) + want[3:]).max() < 1e-4:
            # at θ = π both ±φ are logarithms; with −φ the translation part is J_l3(−φ)⁻¹ p
            want = np.concatenate((lie.so3_left_jacobian_inv(-want[3:]) @ T[:3, 3], -want[3:]))
        bound = C_LOG * kernels.EPS * (1.0 + float(np.abs(T[:3, 3]).max())) * (1.0 + theta) ** 2
        assert np.abs(np.array(lam) - want).max() <= bound, (theta, lam, want)


# ------------------------------------------------------------------------------ random inputs


class _FixedMotion:
    """A pass-through (SE(3)) planner: motion_into writes the desired body motion it was given."""

    duration = 1.0

    def __init__(self) -> None:
        self.T, self.V, self.dV = np.eye(4), np.zeros(6), np.zeros(6)

    def evaluate(self, t: float, out: Reference) -> None:  # never used by the SE(3) controller
        raise AssertionError("pass-through planners are read through motion_into")

    def motion_into(self, t: float, T: np.ndarray, V: np.ndarray, dV: np.ndarray) -> None:
        T[...], V[...], dV[...] = self.T, self.V, self.dV


def _spd(rng, scale: float = 1.0) -> np.ndarray:
    B = rng.normal(size=(6, 6))
    return scale * (B @ B.T + 6.0 * np.eye(6))


#: the configurations of test_law_agrees_with_python_on_random_inputs before the force options were ported
_ORIGINAL = ("default", "Fd_velocity_ff_no_dnull", "full_gains", "full_gains_Fd_ff_off", "no_force_feedback")


def _configs(rng, base: SE3LieConfig) -> dict[str, SE3LieConfig]:
    A, K = _spd(rng), _spd(rng, 10.0)
    D = np.diag(rng.uniform(1.0, 5.0, 6))
    D[0, 3] = D[3, 0] = 0.5
    F_d = (1.0, -2.0, 0.5, 0.1, 0.2, -0.3)
    full = {k: tuple(map(tuple, M)) for k, M in (("a_matrix", A), ("d_matrix", D), ("k_matrix", K))}
    return {
        "default": SE3LieConfig(),
        "Fd_velocity_ff_no_dnull": SE3LieConfig(wrench_desired=F_d, d_null=0.0, feedforward="velocity"),
        "full_gains": SE3LieConfig(**full),
        "full_gains_Fd_ff_off": SE3LieConfig(**full, wrench_desired=F_d, feedforward="off"),
        "no_force_feedback": SE3LieConfig(use_force_feedback=False, d_diag=(0.0,) * 6),
        "scenario": base,  # FR3: the force filter and the hybrid feedforward
        "filter_hybrid_full_gains_Fd": SE3LieConfig(
            **full, wrench_desired=F_d, force_filter=0.005, feedforward="hybrid"
        ),
        "filter_no_force_feedback": SE3LieConfig(force_filter=0.005, feedforward="hybrid", use_force_feedback=False),
    }


@pytest.fixture(scope="module", params=["iiwa14", "fr3"])
def setup(request):
    with kernels.forced("python"):
        return build(scenario_from_dict(scenario_dict(f"{request.param}_docking_se3")))


@pytest.mark.parametrize("passthrough", [False, True], ids=["world_reference", "passthrough"])
def test_law_agrees_with_python_on_random_inputs(setup, passthrough: bool) -> None:
    """Random poses (T_world_ee overwritten), twists, wrenches and desired motions at every rotation
    error in ANGLES; ω_d, α_d, v_d, ȧ_d each exactly zero or random; five configurations."""
    s = setup
    rng = np.random.default_rng(SEED + (7 if passthrough else 3))
    for cname, cfg in _configs(rng, s.controller.config).items():
        planner = _FixedMotion() if passthrough else s.planner
        py, ck = _pair(cfg, s.plant, planner)
        assert ck.mref.passthrough == passthrough
        cmd_py, cmd_ck = py.make_command(), ck.make_command()
        ref, w = Reference(), WrenchState()
        # at θ = π exactly both ±φ are logarithms, and the kernel's log and Pinocchio's pick different ones for
        # about 1 state in 20: the configurations added with the force options (after the original five, so
        # that those keep their random states) run up to π − 1e-6
        angles = ANGLES if cname in _ORIGINAL else tuple(a for a in ANGLES if a < math.pi)
        for i, angle in enumerate(angles * 2):
            q = s.q0 + rng.uniform(-0.3, 0.3, s.plant.nv)
            snap = s.dynamics.update(q, rng.uniform(-0.5, 0.5, s.plant.nv), 0.01 * i)
            snap.T_world_ee[...] = lie.se3_exp(rng.normal(size=6))
            snap.twist_ee_body[:] = rng.normal(size=6)
            snap.dJdq_ee_body[:] = rng.normal(size=6)
            axis = rng.normal(size=3)
            T_d = snap.T_world_ee @ lie.se3_exp(
                np.concatenate((rng.normal(scale=0.1, size=3), angle * axis / np.linalg.norm(axis)))
            )
            zero = [bool(b) for b in rng.integers(0, 2, 4)]  # ω_d, α_d, v_d, ȧ_d exactly zero?
            vel, om, acc, al = (np.zeros(3) if z else rng.normal(size=3) for z in zero)
            if passthrough:
                planner.T[...] = T_d
                planner.V[:] = np.concatenate((vel, om))
                planner.dV[:] = np.concatenate((acc, al))
                ref.flat[:] = np.nan  # must not be read
            else:
                ref.pos[:], ref.R[...] = T_d[:3, 3], T_d[:3, :3]
                ref.vel[:], ref.omega[:], ref.acc[:], ref.alpha[:] = vel, om, acc, al
            w.ext_body[:] = rng.normal(scale=5.0, size=6)
            py.compute(snap, ref, w, cmd_py)
            ck.compute(snap, ref, w, cmd_ck)
            try:
                _compare(py, ck, cmd_py, cmd_ck, snap, ref, w)
            except AssertionError as exc:
                raise AssertionError(f"config {cname}, angle {angle}, zeros {zero}: {exc}") from exc
        assert ck.summary() == {"kernel": "compiled", "kernel_fallbacks": 0}
        assert py.summary()["kernel"] == "python"


def test_force_filter_and_hybrid_latch_through_the_blend(setup) -> None:
    """The shipped law of the scenario with the force filter and the hybrid feedforward (the FR3's; the
    iiwa14 has no joint friction, so its feedforward is inactive): 100 steps of 1 ms, 10 in free space
    (|F| < 1 N), then in contact (5 N, noisy): the filter's and the latch's state bit for bit at every step,
    the latch through w = 0, the blend and w = 1, τ and the law within the bounds."""
    s = setup
    cfg = dataclasses.replace(s.controller.config, force_filter=0.005, feedforward="hybrid")
    py, ck = _pair(cfg, s.plant, s.planner)
    rng = np.random.default_rng(SEED + 13)
    cmd_py, cmd_ck = py.make_command(), ck.make_command()
    ref, w = Reference(), WrenchState()
    blended = latched = 0
    for i in range(100):
        q, v = s.q0 + rng.uniform(-0.2, 0.2, s.plant.nv), rng.uniform(-0.3, 0.3, s.plant.nv)
        snap = s.dynamics.update(q, v, 0.001 * i)
        s.planner.evaluate(float(rng.uniform(0.0, s.planner.duration)), ref)
        w.ext_body[:] = rng.normal(scale=0.1 if i < 10 else 1.0, size=6)
        if i >= 10:
            w.ext_body[2] += 5.0
        py.compute(snap, ref, w, cmd_py)
        ck.compute(snap, ref, w, cmd_ck)
        try:
            _compare(py, ck, cmd_py, cmd_ck, snap, ref, w)
        except AssertionError as exc:
            raise AssertionError(f"step {i}: {exc}") from exc
        blended += 0.0 < py.ff.w < 1.0
        latched += py.ff.w == 1.0
    assert ck.kernel_fallbacks == 0 and py.force_filter.state[-1] == 1.0
    if py.ff.active:
        assert blended > 40 and latched > 30
    else:
        assert py.ff.w == 0.0


def test_rebinds_when_the_loop_objects_change(setup) -> None:
    """A new command / reference / wrench object rebinds the kernel (identity check), results follow."""
    s = setup
    rng = np.random.default_rng(SEED + 5)
    py, ck = _pair(SE3LieConfig(), s.plant, s.planner)
    snap = s.dynamics.update(s.q0 + rng.uniform(-0.2, 0.2, s.plant.nv), rng.uniform(-0.5, 0.5, s.plant.nv))
    for _ in range(3):
        ref, w = Reference(), WrenchState()
        s.planner.evaluate(float(rng.uniform(0.0, s.planner.duration)), ref)
        w.ext_body[:] = rng.normal(size=6)
        cmd_py, cmd_ck = py.make_command(), ck.make_command()
        py.compute(snap, ref, w, cmd_py)
        ck.compute(snap, ref, w, cmd_ck)
        _compare(py, ck, cmd_py, cmd_ck, snap, ref, w)
        assert ck._bound[1] is ref and ck._bound[3] is cmd_ck


# ------------------------------------------------------------------------------ whole runs


def _scenario(name: str):
    if name == "iiwa14_docking_se3topp":  # the se3_topp scenario, under the SE(3) controller
        d = scenario_dict(name)
        d["controller"] = {"type": "se3_lie"}
        return scenario_from_dict(d)
    return scenario_from_dict(scenario_dict(name))


RUNS = ["iiwa14_docking_se3", "fr3_docking_se3", "iiwa14_docking_se3topp"]


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNS)
def test_every_step_of_a_docking_run_equals_python(name: str) -> None:
    """The Python path runs the whole docking (approach, funnel, bore, seating); at every step the
    compiled controller computes on the same snapshot, reference and wrench: law results bit for bit
    (FR3: full A, so up to λ̈*), τ to round-off."""
    with kernels.forced("python"):
        s = build(_scenario(name))
    py = s.controller
    with kernels.forced("compiled"):
        ck = SE3LieController(py.config, s.plant, s.planner)
    cmd_ck = ck.make_command()
    compute = py.compute
    steps, peak = [0], [0.0]

    def both(snap, ref, wrench, cmd):
        compute(snap, ref, wrench, cmd)
        ck.compute(snap, ref, wrench, cmd_ck)
        try:
            _compare(py, ck, cmd, cmd_ck, snap, ref, wrench)
        except AssertionError as exc:
            raise AssertionError(f"step {steps[0]} (t = {snap.t:.3f} s): {exc}") from exc
        steps[0] += 1
        peak[0] = max(peak[0], float(np.abs(wrench.ext_body[:3]).max()))

    py.compute = both
    _, status, _, _ = simulate(s)
    assert status == "completed"
    assert steps[0] > 8000 and peak[0] > 1.0, "the run must reach contact"
    assert ck.mref.passthrough == (name == "iiwa14_docking_se3topp")
    assert ck.kernel_fallbacks == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNS)
def test_compiled_run_equals_python_run(name: str) -> None:
    """Each path runs its own simulation: the telemetry is equal (to TOL_FREE_RUN) until the first
    contact; after it, round-off is amplified by the stiff contact, so the docking metrics are compared
    (as tests/test_optimised_equals_reference.py does)."""
    from dockbench.telemetry.metrics import compute_metrics

    tel = {}
    for mode in ("python", "compiled"):
        with kernels.forced(mode):
            s = build(_scenario(name))
        t, status, _, _ = simulate(s)
        assert status == "completed"
        assert s.controller.summary()["kernel"] == mode
        tel[mode] = t.channels()
    a, b = tel["python"], tel["compiled"]
    contact = np.flatnonzero(a["contact_count_all"] > 0)
    assert contact.size > 0
    first = int(contact[0])
    assert first > 3000  # seconds of free-space motion
    for k, x in a.items():
        np.testing.assert_allclose(b[k][:first], x[:first], rtol=0, atol=TOL_FREE_RUN, err_msg=k)
    meta = {"q_min": -np.ones(7) * 3, "q_max": np.ones(7) * 3, "v_max": np.ones(7)}
    ma, mb = compute_metrics(a, meta), compute_metrics(b, meta)
    np.testing.assert_allclose(mb["contact.peak_force_truth"], ma["contact.peak_force_truth"], rtol=0.01)
    np.testing.assert_allclose(b["ee_pos"][-1], a["ee_pos"][-1], rtol=0, atol=TOL_SEATED)


# ------------------------------------------------------------------------------ fallback


def test_not_positive_definite_falls_back_to_the_python_path(setup) -> None:
    """M⁻¹ negated → Λ_b⁻¹ negative definite: the kernel's Cholesky fails, it writes nothing, and the
    Python path (np.linalg.solve) takes the step, bit for bit what the Python controller computes (the force
    filter and the hybrid latch advanced once, by the Python path); the next normal step runs the kernel
    again. The scenario's law with the force filter and the hybrid feedforward."""
    s = setup
    rng = np.random.default_rng(SEED + 9)
    cfg = dataclasses.replace(s.controller.config, force_filter=0.005, feedforward="hybrid")
    py, ck = _pair(cfg, s.plant, s.planner)
    cmd_py, cmd_ck = py.make_command(), ck.make_command()
    ref, w = Reference(), WrenchState()
    s.planner.evaluate(1.0, ref)
    w.ext_body[:] = rng.normal(size=6)
    w.ext_body[0] += 3.0  # |F| > 1 N: the hybrid latch runs
    for bad in (False, True, True, False):
        snap = s.dynamics.update(s.q0 + rng.uniform(-0.2, 0.2, s.plant.nv), rng.uniform(-0.5, 0.5, s.plant.nv))
        if bad:
            snap.Minv *= -1.0
        cmd_ck.tau[:] = cmd_ck.diag[:] = 12345.0
        py.compute(snap, ref, w, cmd_py)
        ck.compute(snap, ref, w, cmd_ck)
        assert ck._from_kernel is not bad
        if bad:  # the Python path ran on both sides: everything bit for bit
            for name in (*LAW, "q_ddot_ref"):
                np.testing.assert_array_equal(getattr(ck, name), getattr(py, name), err_msg=name)
            np.testing.assert_array_equal(cmd_ck.tau, cmd_py.tau)
            np.testing.assert_array_equal(cmd_ck.diag, cmd_py.diag)
            for a, b in zip(ck.desired_motion(), py.desired_motion(), strict=True):
                np.testing.assert_array_equal(a, b)
            _assert_states_equal(py, ck)
        else:
            _compare(py, ck, cmd_py, cmd_ck, snap, ref, w)
    assert ck.summary() == {"kernel": "compiled", "kernel_fallbacks": 2}


def test_where_the_kernels_log_is_undefined_it_hands_the_step_to_python(setup) -> None:
    """A garbage rotation (trace < −3: the square root of a negative in the kernel's rotation log): the
    kernel returns its domain status instead of computing NaNs and writes nothing, the Python path takes
    the step (Pinocchio's log3 of whatever it is given), bit for bit the Python controller's."""
    s = setup
    snap = s.dynamics.update(s.q0, np.zeros(s.plant.nv))
    snap.T_world_ee[:3, :3] = -1e200 * np.eye(3)
    ref, w = Reference(), WrenchState()
    s.planner.evaluate(0.0, ref)
    ref.R[...] = np.eye(3)
    py, ck = _pair(SE3LieConfig(), s.plant, s.planner)
    cmd_py, cmd_ck = py.make_command(), ck.make_command()
    with np.errstate(all="ignore"):
        py.compute(snap, ref, w, cmd_py)
        ck.compute(snap, ref, w, cmd_ck)
    assert ck.kernel_fallbacks == 1 and not ck._from_kernel
    np.testing.assert_array_equal(cmd_ck.tau, cmd_py.tau)  # the same operations on both sides


# ------------------------------------------------------------------------------ binding


def _kernel_args(nv: int = 7) -> dict:
    """Valid SE3Kernel arguments (fresh arrays)."""
    Minv = np.eye(nv)
    return {
        "T_world_ee": np.eye(4),
        "twist_ee_body": np.zeros(6),
        "J_ee_body": np.hstack((np.eye(6), np.zeros((6, nv - 6)))),
        "dJdq_ee_body": np.zeros(6),
        "M": np.asfortranarray(np.eye(nv)),
        "Minv": Minv,
        "h": np.zeros(nv),
        "v": np.zeros(nv),
        "ref_flat": Reference().flat,
        "des_T": np.eye(4),
        "des_V": np.zeros(6),
        "des_dV": np.zeros(6),
        "ext_body": np.zeros(6),
        "tau": np.zeros(nv),
        "diag": np.zeros(6),
        "results": np.zeros(_KMOD.RESULTS_HEAD + 7 * nv),
        "G": np.zeros((6, 18)),
        "ff_f": np.zeros(nv),
        "ff_d": np.zeros(nv),
        "ff_half_f": np.ones(nv),
        "ff_g": np.zeros(nv),
        "gains": {
            "diagonal": True, "a_inv": (1.0,) * 6, "a_inv_d": (1.0,) * 6, "a_inv_k": (1.0,) * 6,
            "wrench_desired": (0.0,) * 6, "has_wrench_desired": False, "d_null": 10.0,
        },
        "passthrough": False,
        "ff_mode": 1,
        "ff_damping": False,
        "ff_vel_eps": 0.01,
        "ff_state": np.zeros(3),
        "filt_state": np.zeros(7),
        "ff_threshold": 1.0,
        "ff_dw": 0.02,
        "filt_on": False,
        "filt_beta": 1.0,
    }


@pytest.mark.parametrize(
    ("name", "value", "error", "message"),
    [
        ("twist_ee_body", np.zeros(5), ValueError, "twist_ee_body must hold 6 floats, got 5"),
        ("h", np.zeros(7, dtype=np.float32), TypeError, "h must be float64"),
        ("v", np.zeros(7, dtype=int), TypeError, "v must be float64"),
        ("dJdq_ee_body", np.zeros(12)[::2], TypeError, "dJdq_ee_body must be a contiguous float64 array"),
        ("ext_body", [0.0] * 6, TypeError, "ext_body must be a contiguous float64 array"),
        ("M", np.eye(7), None, None),  # C order as well as Fortran order
        ("diag", np.frombuffer(bytes(48)), TypeError, "diag must be a contiguous writable float64 array"),
        ("results", np.zeros(10), ValueError, "results must hold 133 floats, got 10"),
        ("J_ee_body", np.zeros((7, 6)), ValueError, r"J_ee_body has the wrong shape \(expected a 6 x 7"),
        ("J_ee_body", np.zeros(42), ValueError, "J_ee_body has the wrong shape"),
        ("T_world_ee", np.eye(4, dtype=np.float32), ValueError, "T_world_ee must be float64"),
        ("Minv", np.eye(6), ValueError, "Minv has the wrong shape"),
        ("G", np.zeros((18, 6)), ValueError, "G has the wrong shape"),
        ("des_T", None, TypeError, "des_T must be a float64 array"),
        ("gains", (1.0,) * 25, TypeError, "SE3Kernel: gains must be a dict of name -> value, got tuple"),
        ("ff_mode", 4, ValueError, "ff_mode must be 0"),
        ("ff_state", np.zeros(4), ValueError, "ff_state must hold 3 floats, got 4"),
        ("filt_state", np.zeros(6), ValueError, "filt_state must hold 7 floats, got 6"),
        ("filt_state", np.frombuffer(bytes(56)), TypeError, "filt_state must be a contiguous writable float64 array"),
        ("filt_beta", "x", TypeError, None),
    ],
)
def test_bad_buffers_raise_errors_that_name_the_argument(name, value, error, message) -> None:
    args = _kernel_args()
    args[name] = value
    if error is None:
        assert _KMOD.SE3Kernel(**args).step() == 0
        return
    with pytest.raises(error, match=message):
        _KMOD.SE3Kernel(**args)


def test_strided_matrices_are_read_in_their_own_layout() -> None:
    """T, J_b, M, M⁻¹ as C arrays, Fortran arrays or strided views give the same step."""
    rng = np.random.default_rng(SEED + 11)
    base = _kernel_args()
    base["T_world_ee"][...] = lie.se3_exp(rng.normal(size=6))
    base["J_ee_body"][...] = rng.normal(size=(6, 7))
    B = rng.normal(size=(7, 7))
    base["M"] = B @ B.T + 7 * np.eye(7)
    base["Minv"] = np.linalg.inv(base["M"])
    base["v"][:] = rng.normal(size=7)
    taus = []
    for layout in ("C", "F", "strided"):
        args = dict(base, tau=np.zeros(7), diag=np.zeros(6), results=np.zeros(base["results"].size))
        for k in ("T_world_ee", "J_ee_body", "M", "Minv"):
            a = base[k]
            if layout == "F":
                args[k] = np.asfortranarray(a)
            elif layout == "strided":
                big = np.zeros((a.shape[0], 2 * a.shape[1]))
                big[:, ::2] = a
                args[k] = big[:, ::2]
            else:
                args[k] = np.ascontiguousarray(a)
        assert _KMOD.SE3Kernel(**args).step() == 0
        taus.append(args["tau"])
    np.testing.assert_array_equal(taus[1], taus[0])
    np.testing.assert_array_equal(taus[2], taus[0])


@pytest.mark.parametrize("nv", [6, 9])
def test_joint_space_part_for_any_number_of_joints(nv: int) -> None:
    """τ = h − d_null M q̇ + J_bᵀ(y − F), Λ_b⁻¹ y = V̇_ref − J̇_b q̇ + d_null V, torque-mode feedforward,
    against numpy for nv ≠ 7 (V̇_ref read back from the results buffer)."""
    rng = np.random.default_rng(SEED + nv)
    args = _kernel_args(nv)
    J = rng.normal(size=(6, nv))
    B = rng.normal(size=(nv, nv))
    M = B @ B.T + nv * np.eye(nv)
    f, d = rng.uniform(0.0, 2.0, nv), rng.uniform(0.0, 1.0, nv)
    args |= {
        "J_ee_body": J,
        "M": M,
        "Minv": np.linalg.inv(M),
        "h": rng.normal(size=nv),
        "v": rng.normal(size=nv),
        "twist_ee_body": rng.normal(size=6),
        "dJdq_ee_body": rng.normal(size=6),
        "ext_body": rng.normal(size=6),
        "ff_f": f,
        "ff_d": d,
        "ff_half_f": f / 2.0,
        "ff_g": rng.normal(size=nv),  # the torque-mode key is τ_pre − g
        "ff_damping": True,
    }
    args["T_world_ee"][:3, 3] = (0.1, -0.2, 0.05)
    assert _KMOD.SE3Kernel(**args).step() == 0
    o, n = _KMOD.RESULTS_LAYOUT["dV_ref"]
    dV_ref = args["results"][o : o + n]
    Li = J @ args["Minv"] @ J.T
    y = np.linalg.solve(Li, dV_ref - args["dJdq_ee_body"] + 10.0 * args["twist_ee_body"])
    tau = args["h"] - 10.0 * M @ args["v"] + J.T @ (y - args["ext_body"])
    ff = f * np.tanh((tau - args["ff_g"]) / (f / 2.0)) + d * args["v"]
    tau = tau + ff
    # the guard's bound of τ (SE3LieController._guard_bounds): S = 3 max(|J|ᵀ(|y| + |F|) + d_null |M||q̇| + |h|)
    # + max |τ_ff|, κ = κ(Λ_b⁻¹)
    a = np.abs
    S = 3.0 * kernels.magnitude(a(J).T @ (a(y) + a(args["ext_body"])) + 10.0 * a(M) @ a(args["v"]) + a(args["h"]))
    S += kernels.magnitude(ff)
    assert_within_bound("controller", nv, [("tau", args["tau"])], [("tau", tau)], [(S, kernels.condition(Li))])


def test_an_unbound_kernel_refuses_to_step() -> None:
    k = _KMOD.SE3Kernel.__new__(_KMOD.SE3Kernel)
    with pytest.raises(RuntimeError, match="not bound"):
        k.step()
    args = _kernel_args()
    k = _KMOD.SE3Kernel(**args)
    with pytest.raises(ValueError):
        k.__init__(**dict(args, twist_ee_body=np.zeros(3)))  # a failed re-init unbinds
    with pytest.raises(RuntimeError, match="not bound"):
        k.step()


def test_buffers_are_held_while_bound_and_released_after() -> None:
    """The kernel keeps its arrays alive and releases every buffer on deallocation or a failed bind
    (reference counts back to where they were: nothing leaks)."""
    args = _kernel_args()
    arrays = [v for v in args.values() if isinstance(v, np.ndarray)]
    before = [sys.getrefcount(a) for a in arrays]
    kernels_ = [_KMOD.SE3Kernel(**args) for _ in range(50)]
    assert all(sys.getrefcount(a) > b for a, b in zip(arrays, before, strict=True))
    del kernels_
    for bad in ("results", "G", "ff_half_f"):  # fail after some buffers are bound
        with pytest.raises((ValueError, TypeError)):
            _KMOD.SE3Kernel(**dict(args, **{bad: np.zeros(1)}))
    gc.collect()
    assert [sys.getrefcount(a) for a in arrays] == before
    tau = np.zeros(7)
    ref = weakref.ref(tau)
    k = _KMOD.SE3Kernel(**dict(args, tau=tau))
    del tau
    assert ref() is not None  # held by the kernel
    del k
    assert ref() is None
