"""Equation-level checks of the planners (docs/theory/planners.md): quintic, two-phase, SE(3)-TOPP (Theorem 1,
against toppra), circle + figure-8 (C² junctions) and the body-motion adapter."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dockbench.planners import PLANNERS, MotionReference, PlannerContext, Reference
from dockbench.planners.figure8 import Figure8Planner
from dockbench.planners.quintic import QUINTIC_PEAK_ACC, QUINTIC_PEAK_VEL
from dockbench.planners.se3_topp import RestToRestProfile, ScrewSegment, SE3TOPPPlanner
from dockbench.planners.two_phase import TwoPhasePlanner
from dockbench.sim import lie
from dockbench.sim.config import parse_config

from tests.helpers import EPS

# Tolerance table (the only tolerances used in this module). ε = 2.2e-16 (float64 machine epsilon).
TOL_EXACT = 1e-12  # closed-form endpoints, identities [m, m/s, m/s², rad]: a few roundings (3×3 / 4×4
#   BLAS products, libm sin/cos) on quantities ≤ ~1: ≲ 20ε ≈ 4e-15; measured ≤ 2e-15
TOL_DURATION = 16 * EPS  # closed-form durations against the test's restatement (relative): each side is
#   ≤ 8 correctly rounded scalar operations on positive terms (a norm of 3 terms, a sqrt, the max) → ≤ 8ε;
#   measured ≤ 0.85ε. A wrong constant (1.875, 10/√3) is ≥ 1e-3 off.
TOL_LIMIT = 1e-9  # relative slack when checking a limit is never exceeded
TOL_ACTIVE = 1e-3  # "limit active": within 0.1 % of the bound
TOL_FD = 1e-6  # central finite differences with step H_FD
TOL_JUNCTION = 1e-9  # jump of position / velocity / acceleration at a figure-8 junction
TOL_TOPPRA = 0.01  # relative duration difference to toppra's numerical optimum
H_FD = 1e-5
DT = 1e-3  # 1 kHz sampling
SEED = 7

V_APP, A_APP, W_APP, AL_APP = 0.10, 0.20, 0.20, 0.40  # approach defaults
V_DOCK, A_DOCK, W_DOCK, AL_DOCK = 0.02, 0.05, 0.05, 0.125  # docking defaults
LIM_APP = (np.array([V_APP] * 3 + [W_APP] * 3), np.array([A_APP] * 3 + [AL_APP] * 3))
LIM_DOCK = (np.array([V_DOCK] * 3 + [W_DOCK] * 3), np.array([A_DOCK] * 3 + [AL_DOCK] * 3))


def _pose(R: np.ndarray, p) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = p
    return T


def _rot(axis, angle: float) -> np.ndarray:
    a = np.asarray(axis, dtype=float)
    return lie.so3_exp(angle * a / np.linalg.norm(a))


def _build(name: str, ctx: PlannerContext, **cfg):
    cls = PLANNERS.get(name)
    return cls(parse_config(cls.Config, cfg), ctx)


def _docking_ctx(start_rot_deg: float = 35.0) -> PlannerContext:
    """Goal with the tool pointing down, approach axis not aligned with a world axis, a start pose
    0.17 m away rotated by ``start_rot_deg`` about a skew axis."""
    R_goal = _rot([1.0, 0.2, 0.0], math.pi * 0.9)
    T_goal = _pose(R_goal, [0.55, -0.10, 0.25])
    axis = np.array([0.1, -0.2, 1.0])
    axis /= np.linalg.norm(axis)
    T_start = _pose(R_goal @ _rot([0.3, -0.5, 0.8], math.radians(start_rot_deg)), [0.45, 0.02, 0.40])
    return PlannerContext(T_world_start=T_start, T_world_goal=T_goal, approach_axis_world=axis)


def _sample(planner, t_end: float, dt: float = DT):
    ts = np.arange(0.0, t_end + 0.5 * dt, dt)
    ref = Reference()
    P, V, A = (np.empty((ts.size, 3)) for _ in range(3))
    for i, t in enumerate(ts):
        planner.evaluate(t, ref)
        P[i], V[i], A[i] = ref.pos, ref.vel, ref.acc
    return ts, P, V, A


# ==================================================================================== quintic


def test_quintic_endpoints_limits_and_duration():
    ctx = _docking_ctx(0.0)
    p = _build("quintic", ctx, v_max=0.05, a_max=0.1)
    L = float(np.linalg.norm(ctx.T_world_goal[:3, 3] - ctx.T_world_start[:3, 3]))
    T_expected = max(QUINTIC_PEAK_VEL * L / 0.05, math.sqrt(QUINTIC_PEAK_ACC * L / 0.1))
    np.testing.assert_allclose(p.duration, T_expected, rtol=TOL_DURATION)
    s0, s1 = p.state(0.0), p.state(p.duration)
    np.testing.assert_allclose(s0.pos, ctx.T_world_start[:3, 3], atol=TOL_EXACT)
    np.testing.assert_allclose(s1.pos, ctx.T_world_goal[:3, 3], atol=TOL_EXACT)
    for s in (s0, s1, p.state(p.duration + 1.0)):
        np.testing.assert_allclose(np.r_[s.vel, s.acc], 0.0, atol=TOL_EXACT)
    _, _, V, A = _sample(p, p.duration)
    vmax, amax = np.linalg.norm(V, axis=1).max(), np.linalg.norm(A, axis=1).max()
    assert vmax <= 0.05 * (1 + TOL_LIMIT) and amax <= 0.1 * (1 + TOL_LIMIT)
    # the binding limit is reached (shortest duration): within the 1 kHz sampling resolution
    assert max(vmax / 0.05, amax / 0.1) > 1 - TOL_ACTIVE


# ==================================================================================== two-phase


def test_two_phase_waypoints_rest_points_and_durations():
    ctx = _docking_ctx(0.0)
    p: TwoPhasePlanner = _build("two_phase", ctx)
    p_goal = ctx.T_world_goal[:3, 3]
    p_pre = p_goal + 0.10 * ctx.approach_axis_world
    np.testing.assert_allclose(p.pre_dock_pose[:3, 3], p_pre, atol=TOL_EXACT)
    np.testing.assert_array_equal(p.pre_dock_pose[:3, :3], ctx.T_world_goal[:3, :3])  # exact: a copy
    L1 = float(np.linalg.norm(p_pre - ctx.T_world_start[:3, 3]))
    T1 = max(1.875 * L1 / V_APP, math.sqrt(10 / math.sqrt(3) * L1 / A_APP))
    T2 = max(1.875 * 0.10 / V_DOCK, math.sqrt(10 / math.sqrt(3) * 0.10 / A_DOCK))
    np.testing.assert_allclose(p.durations, (T1, T2), rtol=TOL_DURATION)
    np.testing.assert_allclose(p.total_duration, T1 + T2, rtol=TOL_DURATION)
    assert [s.name for s in p.segments] == ["approach", "docking"]
    for t, pos in ((0.0, ctx.T_world_start[:3, 3]), (T1, p_pre), (T1 + T2, p_goal), (T1 + T2 + 5, p_goal)):
        s = p.state(t)
        np.testing.assert_allclose(s.pos, pos, atol=TOL_EXACT)
        np.testing.assert_allclose(np.r_[s.vel, s.acc], 0.0, atol=TOL_EXACT)
        np.testing.assert_array_equal(s.R, ctx.T_world_goal[:3, :3])  # exact: the constant R_goal, copied


def test_two_phase_limits_per_phase_at_1khz():
    ctx = _docking_ctx(0.0)
    p = _build("two_phase", ctx)
    ts, P, V, A = _sample(p, p.total_duration)
    T1 = p.durations[0]
    for mask, vlim, alim in ((ts < T1, V_APP, A_APP), (ts >= T1, V_DOCK, A_DOCK)):
        vn, an = np.linalg.norm(V[mask], axis=1), np.linalg.norm(A[mask], axis=1)
        assert vn.max() <= vlim * (1 + TOL_LIMIT), vn.max()
        assert an.max() <= alim * (1 + TOL_LIMIT), an.max()
        assert max(vn.max() / vlim, an.max() / alim) > 1 - TOL_ACTIVE
    # docking is a straight insertion along −axis
    d = P[ts >= T1] - ctx.T_world_goal[:3, 3]
    lateral = d - np.outer(d @ ctx.approach_axis_world, ctx.approach_axis_world)
    np.testing.assert_allclose(lateral, 0.0, atol=TOL_EXACT)


# ==================================================================================== SE(3)-TOPP


def _theorem1_duration(xi, v_lim, a_lim) -> float:
    """Independent restatement of Theorem 1 + the analytic profile duration."""
    nz = np.abs(xi) > 1e-12
    v = min(v_lim[nz] / np.abs(xi[nz]))
    a = min(a_lim[nz] / np.abs(xi[nz]))
    return 1 / v + v / a if v * v < a else 2 / math.sqrt(a)


def test_rest_to_rest_profile_closed_forms():
    trap = RestToRestProfile(0.5, 1.0)  # v² = 0.25 < 1 → trapezoid
    assert not trap.triangle
    # the profile forms T = 2 t_acc + (1 − 2 s_acc)/v, the test 1/v + v/a: ≤ 8 roundings (TOL_DURATION)
    np.testing.assert_allclose(trap.duration, 1 / 0.5 + 0.5 / 1.0, rtol=TOL_DURATION)
    tri = RestToRestProfile(2.0, 1.0)  # v² = 4 ≥ 1 → triangle
    assert tri.triangle
    np.testing.assert_allclose(tri.duration, 2.0, rtol=TOL_DURATION)
    for prof in (trap, tri):
        # exact: at and beyond the ends the profile returns the literal rest states
        np.testing.assert_array_equal(prof(prof.duration), (1.0, 0.0, 0.0))
        np.testing.assert_array_equal(prof(0.0), (0.0, 0.0, 0.0))
        # s is the integral of ṡ (midpoint rule on a fine grid)
        ts = np.linspace(0, prof.duration, 20001)
        sd = np.array([prof(t)[1] for t in ts])
        np.testing.assert_allclose(np.trapezoid(sd, ts), 1.0, atol=1e-6)
        np.testing.assert_allclose(prof(0.5 * prof.duration)[0], 0.5, atol=TOL_EXACT)  # symmetric


def test_se3_topp_structure_and_rest_boundaries():
    ctx = _docking_ctx()
    p: SE3TOPPPlanner = _build("se3_topp", ctx)
    T2 = p.pre_dock_pose
    np.testing.assert_array_equal(T2[:3, :3], ctx.T_world_goal[:3, :3])  # goal orientation (exact: a copy)
    np.testing.assert_allclose(
        T2[:3, 3], ctx.T_world_goal[:3, 3] + 0.10 * ctx.approach_axis_world, atol=TOL_EXACT
    )
    assert [s.name for s in p.segments] == ["approach", "docking"]
    # exact: t0 of the docking segment is the approach duration, copied; the total is the same one sum
    assert p.segments[1].t0 == p.durations[0]
    assert p.total_duration == sum(p.durations)
    for t, T_exp in (
        (0.0, ctx.T_world_start),
        (p.durations[0], T2),
        (p.total_duration, ctx.T_world_goal),
        (p.total_duration + 3.0, ctx.T_world_goal),
        (-1.0, ctx.T_world_start),
    ):
        T, V, dV = p.motion(t)
        np.testing.assert_allclose(T, T_exp, atol=TOL_EXACT)
        np.testing.assert_allclose(V, 0.0, atol=TOL_EXACT)
    # just before the end of the approach the pose approaches T2 and the twist → 0 (rest-to-rest)
    T, V, _ = p.motion(p.durations[0] - 1e-9)
    np.testing.assert_allclose(T, T2, atol=1e-9)
    np.testing.assert_allclose(V, 0.0, atol=1e-8)
    # durations are Theorem 1's analytic ones
    for seg, lim in zip(p.screw_segments, (LIM_APP, LIM_DOCK), strict=True):
        np.testing.assert_allclose(seg.duration, _theorem1_duration(seg.xi, *lim), rtol=TOL_DURATION)


def test_se3_topp_limits_respected_and_active_at_1khz():
    ctx = _docking_ctx()
    p = _build("se3_topp", ctx)
    V_all, dV_all = np.empty(6), np.empty(6)
    T_buf = np.empty((4, 4))
    for seg, (v_lim, a_lim) in zip(p.segments, (LIM_APP, LIM_DOCK), strict=True):
        ts = np.arange(seg.t0, seg.t1, DT)[1:]
        active = 0
        for t in ts:
            p.motion_into(t, T_buf, V_all, dV_all)
            rv, ra = np.abs(V_all) / v_lim, np.abs(dV_all) / a_lim
            assert rv.max() <= 1 + TOL_LIMIT and ra.max() <= 1 + TOL_LIMIT, (seg.name, t, rv, ra)
            active += max(rv.max(), ra.max()) >= 1 - TOL_ACTIVE
        assert active >= 0.99 * ts.size, (seg.name, active, ts.size)


def test_se3_topp_geodesic_midpoint():
    # pure 90° rotation: at T/2 the pose is rotated by exactly 45° about the same axis
    R_a = _rot([0.2, 0.3, 1.0], 0.4)
    axis_body = np.array([1.0, -2.0, 0.5]) / np.linalg.norm([1.0, -2.0, 0.5])
    T_a = _pose(R_a, [0.3, 0.1, 0.2])
    T_b = T_a @ _pose(_rot(axis_body, math.pi / 2), [0, 0, 0])
    seg = ScrewSegment("rot", T_a, T_b, *LIM_APP)
    Tm = np.empty((4, 4))
    seg.motion_into(0.5 * seg.duration, Tm, np.empty(6), np.empty(6))
    rel = lie.so3_log(R_a.T @ Tm[:3, :3])
    np.testing.assert_allclose(rel, (math.pi / 4) * axis_body, atol=TOL_EXACT)
    np.testing.assert_allclose(Tm[:3, 3], T_a[:3, 3], atol=TOL_EXACT)
    # general screw: T(½) = T_a Exp(ξ/2), i.e. (T_a⁻¹ T(½))² = T_a⁻¹ T_b
    ctx = _docking_ctx()
    g = _build("se3_topp", ctx).screw_segments[0]
    g.motion_into(0.5 * g.duration, Tm, np.empty(6), np.empty(6))
    half = lie.se3_inv(g.T_a) @ Tm
    np.testing.assert_allclose(half @ half, lie.se3_inv(g.T_a) @ g.T_b, atol=TOL_EXACT)


def _switch_times(p: SE3TOPPPlanner) -> list[float]:
    out = []
    for seg in p.screw_segments:
        pr = seg.profile
        out += [seg.t0, seg.t0 + pr.t_acc, seg.t0 + pr.t_acc + pr.t_cruise, seg.t0 + pr.duration]
    return out


def _smooth_times(p: SE3TOPPPlanner, n: int, seed: int) -> np.ndarray:
    """Random instants at least 10 H_FD away from every switching time of s̈."""
    rng = np.random.default_rng(seed)
    sw = np.array(_switch_times(p))
    ts = rng.uniform(0, p.total_duration, 4 * n)
    ts = ts[np.min(np.abs(ts[:, None] - sw[None, :]), axis=1) > 10 * H_FD]
    return ts[:n]


def test_se3_topp_motion_matches_finite_differences():
    ctx = _docking_ctx()
    p = _build("se3_topp", ctx)
    for t in _smooth_times(p, 25, SEED):
        T, V, dV = p.motion(t)
        Tp, Vp, _ = p.motion(t + H_FD)
        Tm, Vm, _ = p.motion(t - H_FD)
        T_inv = lie.se3_inv(T)
        V_fd = (lie.se3_log(T_inv @ Tp) - lie.se3_log(T_inv @ Tm)) / (2 * H_FD)
        np.testing.assert_allclose(V, V_fd, atol=TOL_FD)
        np.testing.assert_allclose(dV, (Vp - Vm) / (2 * H_FD), atol=TOL_FD)
        # V̇_d = ξ s̈ and V_d = ξ ṡ exactly (the same elementwise products of the same floats)
        seg = p.screw_segments[0] if t < p.durations[0] else p.screw_segments[1]
        _, sd, sdd = seg.s_profile(t)
        np.testing.assert_array_equal(V, seg.xi * sd)
        np.testing.assert_array_equal(dV, seg.xi * sdd)


def test_se3_topp_world_reference_matches_finite_differences():
    """pos/vel/acc and R/ω/α of evaluate() are consistent; acc includes ω × v."""
    ctx = _docking_ctx()
    p = _build("se3_topp", ctx)
    r, rp, rm = Reference(), Reference(), Reference()
    cross_term_seen = 0.0
    h = 1e-4
    for t in _smooth_times(p, 25, SEED + 1):
        if not (h * 20 < t < p.durations[0] - 20 * h or t > p.durations[0] + 20 * h):
            continue
        p.evaluate(t, r)
        p.evaluate(t + h, rp)
        p.evaluate(t - h, rm)
        np.testing.assert_allclose(r.vel, (rp.pos - rm.pos) / (2 * h), atol=TOL_FD)
        np.testing.assert_allclose(r.acc, (rp.pos - 2 * r.pos + rm.pos) / h**2, atol=1e-5)
        np.testing.assert_allclose(r.acc, (rp.vel - rm.vel) / (2 * h), atol=TOL_FD)
        omega_fd = lie.so3_log(rp.R @ rm.R.T) / (2 * h)  # world angular velocity
        np.testing.assert_allclose(r.omega, omega_fd, atol=TOL_FD)
        np.testing.assert_allclose(r.alpha, (rp.omega - rm.omega) / (2 * h), atol=TOL_FD)
        _, _, dV = p.motion(t)
        cross_term_seen = max(cross_term_seen, float(np.linalg.norm(r.acc - r.R @ dV[:3])))
    assert cross_term_seen > 1e-3  # the ω × v term is not negligible in this scene (test can fail)


def _toppra_duration(xi: np.ndarray, v_lim: np.ndarray, a_lim: np.ndarray, n_grid: int = 1000) -> float:
    ta = pytest.importorskip("toppra")
    import toppra.algorithm as algo
    import toppra.constraint as constraint

    ta.setup_logging("WARNING")
    ss = np.linspace(0.0, 1.0, 5)
    path = ta.SplineInterpolator(ss, ss[:, None] * xi[None, :])  # q(s) = ξ s, exactly linear
    pc_v = constraint.JointVelocityConstraint(np.stack((-v_lim, v_lim), axis=1))
    pc_a = constraint.JointAccelerationConstraint(
        np.stack((-a_lim, a_lim), axis=1), discretization_scheme=constraint.DiscretizationType.Interpolation
    )
    inst = algo.TOPPRA(
        [pc_v, pc_a], path, gridpoints=np.linspace(0.0, 1.0, n_grid + 1), parametrizer="ParametrizeConstAccel"
    )
    traj = inst.compute_trajectory(0.0, 0.0)
    assert traj is not None, "toppra failed"
    return float(traj.duration)


TOPPRA_CASES = {
    # name: (T_a, relative motion T_a⁻¹ T_b, limits)
    "pure_translation_x": (_pose(np.eye(3), [0.5, 0, 0.3]), _pose(np.eye(3), [0.08, 0, 0]), LIM_APP),
    "pure_translation_diag_dock": (
        _pose(_rot([1, 0, 0], 3.0), [0.4, 0.1, 0.2]),
        _pose(np.eye(3), [0.05, -0.03, 0.02]),
        LIM_DOCK,
    ),
    "pure_rotation_90deg": (
        _pose(_rot([0, 1, 1], 0.5), [0.3, 0, 0.4]),
        _pose(_rot([0, 0, 1], math.pi / 2), [0, 0, 0]),
        LIM_APP,
    ),
    "screw_40deg": (
        _pose(_rot([1, 2, 3], 1.0), [0.5, -0.2, 0.3]),
        _pose(_rot([0.3, -0.5, 0.8], math.radians(40)), [0.12, -0.05, 0.09]),
        LIM_APP,
    ),
    "short_triangle": (_pose(np.eye(3), [0.5, 0, 0.3]), _pose(np.eye(3), [0.03, 0.01, 0]), LIM_APP),
    "near_pi_rotation": (
        _pose(np.eye(3), [0.5, 0, 0.3]),
        _pose(_rot([1, -1, 0.5], math.pi - 0.05), [0.1, 0.2, -0.1]),
        LIM_APP,
    ),
}


@pytest.mark.parametrize("case", sorted(TOPPRA_CASES))
def test_se3_topp_duration_matches_toppra(case):
    T_a, T_rel, (v_lim, a_lim) = TOPPRA_CASES[case]
    seg = ScrewSegment(case, T_a, T_a @ T_rel, v_lim, a_lim)
    if case == "short_triangle":
        assert seg.profile.triangle
    elif case == "pure_translation_x":
        np.testing.assert_allclose(seg.duration, 1.3, rtol=1e-12)  # 1/1.25 + 1.25/2.5
    t_toppra = _toppra_duration(seg.xi, v_lim, a_lim)
    np.testing.assert_allclose(seg.duration, t_toppra, rtol=TOL_TOPPRA)


def test_compare_planners_reference_figures():
    """The reference scene reproduces Ren & Shan's 6.7 s (SE(3)-TOPP) vs 10.9 s (two-phase)."""
    from dockbench.experiments.compare_planners import compare, reference_scene

    res = compare(reference_scene())
    np.testing.assert_allclose(res["se3_topp"], (1.3, 5.4, 6.7), rtol=1e-12)
    np.testing.assert_allclose(res["two_phase"][2], 10.9, atol=0.01)


# ==================================================================================== figure-8


def _figure8(**cfg) -> Figure8Planner:
    T0 = _pose(_rot([0.2, 1.0, 0.1], 2.0), [0.5, -0.1, 0.4])
    ctx = PlannerContext(T_world_start=T0, T_world_goal=T0, approach_axis_world=np.array([0, 0, 1.0]))
    return _build("figure8", ctx, **cfg)


def test_figure8_schedule_and_segments():
    p = _figure8()
    assert p.duration == pytest.approx(13.0, abs=1e-12)
    names = [s.name for s in p.segments]
    assert names == ["transition_in", "circle", "transition_mid", "figure8", "hold"]
    lengths = [s.t1 - s.t0 for s in p.segments]
    np.testing.assert_allclose(lengths, [1.5, 5.0, 1.5, 5.0, 2.0], atol=1e-12)
    for a, b in zip(p.segments, p.segments[1:], strict=False):
        assert a.t1 == b.t0  # exact: both are the same breakpoint float


@pytest.mark.parametrize(
    "cfg", [{}, {"circle_duration": 3.3, "figure8_frequency": 0.3, "stop_duration": 0.8}]
)
def test_figure8_is_c2_at_every_junction(cfg):
    p = _figure8(**cfg)
    left, right = Reference(), Reference()
    for k in range(1, 6):
        tb = p.breakpoints[k]
        p.evaluate_piece(k - 1, tb, left)  # one-sided limit from the left (piece k−1's formula)
        p.evaluate_piece(k, tb, right)
        for name in ("pos", "vel", "acc"):
            np.testing.assert_allclose(
                getattr(left, name),
                getattr(right, name),
                atol=TOL_JUNCTION,
                err_msg=f"{p.piece_names[k]} {name}",
            )
        # and through the public evaluate(), just before / after
        p.evaluate(tb - 1e-12, left)
        p.evaluate(tb + 1e-12, right)
        for name in ("pos", "vel", "acc"):
            np.testing.assert_allclose(getattr(left, name), getattr(right, name), atol=TOL_JUNCTION)
    # rest at C at both ends
    for t in (0.0, p.duration, p.duration + 4.0):
        s = p.state(t)
        np.testing.assert_allclose(s.pos, p.center, atol=TOL_EXACT)
        np.testing.assert_allclose(np.r_[s.vel, s.acc], 0.0, atol=TOL_EXACT)


def test_figure8_reference_is_consistent_with_finite_differences():
    p = _figure8()
    r, rp, rm = Reference(), Reference(), Reference()
    h = 1e-5
    for t in np.random.default_rng(SEED).uniform(0, 13.5, 60):
        p.evaluate(t, r)
        p.evaluate(t + h, rp)
        p.evaluate(t - h, rm)
        np.testing.assert_allclose(r.vel, (rp.pos - rm.pos) / (2 * h), atol=TOL_FD)
        np.testing.assert_allclose(r.acc, (rp.vel - rm.vel) / (2 * h), atol=TOL_FD)


def test_figure8_shapes_amplitudes_and_rates():
    p = _figure8()
    C = p.center
    ts, P, V, _ = _sample(p, 13.0)
    seg = {s.name: (ts >= s.t0) & (ts < s.t1) for s in p.segments}
    # circle: x = C_x, every point at distance r from C + r e_z, full turn (y ∈ ±r, z ∈ [0, 2r]), speed r ω
    d = P[seg["circle"]] - C
    np.testing.assert_allclose(d[:, 0], 0.0, atol=TOL_EXACT)
    np.testing.assert_allclose(np.linalg.norm(d - [0, 0, 0.10], axis=1), 0.10, atol=TOL_EXACT)
    np.testing.assert_allclose(
        [d[:, 1].min(), d[:, 1].max(), d[:, 2].min(), d[:, 2].max()], [-0.10, 0.10, 0.0, 0.20], atol=1e-6
    )
    np.testing.assert_allclose(
        np.linalg.norm(V[seg["circle"]], axis=1), 0.10 * 2 * math.pi * 0.2, atol=TOL_EXACT
    )
    # transition_in also stays on the circle (phase ramp, no spatial blend)
    d_in = P[seg["transition_in"]] - C
    np.testing.assert_allclose(np.linalg.norm(d_in - [0, 0, 0.10], axis=1), 0.10, atol=TOL_EXACT)
    # figure-8: horizontal (z = C_z), y = a_y sin 2φ with x = a_x sin φ, amplitudes reached
    d8 = P[seg["figure8"]] - C
    np.testing.assert_allclose(d8[:, 2], 0.0, atol=TOL_EXACT)
    np.testing.assert_allclose([np.abs(d8[:, 0]).max(), np.abs(d8[:, 1]).max()], [0.10, 0.07], atol=1e-6)
    # (y/a_y)² = 4 (x/a_x)² (1 − (x/a_x)²) on the whole lemniscate
    xn, yn = d8[:, 0] / 0.10, d8[:, 1] / 0.07
    np.testing.assert_allclose(yn**2, 4 * xn**2 * (1 - xn**2), atol=1e-12)
    # figure-8 runs at 0.2 Hz until the stop ramp: φ̇ = ω_8
    t = 9.0
    phi, dphi, _ = p.figure8_phase(t, 3)
    assert dphi == 2 * math.pi * 0.2  # exact: ω_8 = (2π)·f, the same product
    np.testing.assert_allclose(
        p.state(t).vel[:2], [0.10 * math.cos(phi) * dphi, 0.14 * math.cos(2 * phi) * dphi], atol=TOL_EXACT
    )
    # orientation fixed at the start orientation
    np.testing.assert_array_equal(p.state(5.0).R, p.R_start)  # exact: the constant R_start, copied


# ==================================================================================== adapter


def test_motion_reference_position_only_fixed_orientation():
    ctx = _docking_ctx(0.0)
    p = _build("two_phase", ctx)
    mr = MotionReference(p)
    assert not mr.passthrough
    R_d = ctx.T_world_goal[:3, :3]
    peak_speed = 0.0
    for t in np.linspace(0.1, p.duration - 0.1, 13):
        mr.update(t)
        peak_speed = max(peak_speed, float(np.linalg.norm(mr.V[:3])))
        s = p.state(t)
        # exact: the adapter copies R and p and writes literal zeros for a fixed orientation
        np.testing.assert_array_equal(mr.T[:3, :3], R_d)
        np.testing.assert_array_equal(mr.T[:3, 3], s.pos)
        np.testing.assert_allclose(mr.V[:3], R_d.T @ s.vel, atol=TOL_EXACT, rtol=0)
        np.testing.assert_array_equal(mr.V[3:], 0.0)
        np.testing.assert_allclose(mr.dV[:3], R_d.T @ s.acc, atol=TOL_EXACT, rtol=0)
        np.testing.assert_array_equal(mr.dV[3:], 0.0)
    assert peak_speed > 1e-2  # moving instants were checked


class _PositionOnly:
    """Hides motion_into so the adapter must rebuild (T, V, V̇) from the world Reference."""

    def __init__(self, planner):
        self._p = planner

    def evaluate(self, t, out):
        self._p.evaluate(t, out)


def test_motion_reference_se3_passthrough_and_general_conversion():
    ctx = _docking_ctx()
    p = _build("se3_topp", ctx)
    mr = MotionReference(p)
    assert mr.passthrough
    conv = MotionReference(_PositionOnly(p))
    assert not conv.passthrough
    for t in _smooth_times(p, 20, SEED + 2):
        T, V, dV = p.motion(t)
        mr.update(t)
        # exact: pass-through, the planner's motion_into on the same t
        np.testing.assert_array_equal(mr.T, T)
        np.testing.assert_array_equal(mr.V, V)
        np.testing.assert_array_equal(mr.dV, dV)
        # the world → body conversion (with its −ω_b × v_b term) recovers the same body motion
        conv.update(t)
        np.testing.assert_allclose(conv.T, T, atol=TOL_EXACT)
        np.testing.assert_allclose(conv.V, V, atol=TOL_EXACT)
        np.testing.assert_allclose(conv.dV, dV, atol=TOL_EXACT)
        # dV is the time derivative of V
        Vp = mr.update(t + H_FD).V.copy()
        Vm = mr.update(t - H_FD).V.copy()
        np.testing.assert_allclose(dV, (Vp - Vm) / (2 * H_FD), atol=TOL_FD)
