"""docs/theory/insertion.md: the keyed seat, the mating phase, the insertion supervisor's equations.

The supervisor (controllers/insertion.py) is driven here step by step without a simulator: an inner planner
that holds a fixed pose, a wrench state and a snapshot whose arrays the test writes. Each equation is
compared with its closed form; the bounds are stated per test.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from dockbench.controllers.insertion import (
    GOLDEN_ANGLE,
    CentringConfig,
    ComplianceConfig,
    GuardConfig,
    InsertionConfig,
    InsertionSupervisor,
    JamConfig,
    RecoveryConfig,
)
from dockbench.planners.base import Planner, PlannerContext, Reference
from dockbench.planners.quintic import quintic_blend
from dockbench.sim.errors import ScenarioError
from dockbench.sim.interfaces import R_D_EE_SEATED, rpy_to_matrix
from dockbench.telemetry.metrics import mating_phase_error, time_to_seat

EPS = float(np.finfo(float).eps)
T_C = 0.001


class _Hold(Planner):
    """A plan that holds the goal pose (duration ``T``, during which it moves at ``v`` along x)."""

    def __init__(self, ctx: PlannerContext, T: float = 0.0, v: float = 0.0):
        self.ctx, self.T, self.v = ctx, T, v

    @property
    def duration(self) -> float:
        return self.T

    def evaluate(self, t: float, out: Reference) -> None:
        s = min(max(t, 0.0), self.T)
        out.pos[:] = self.ctx.T_world_goal[:3, 3] + np.array([self.v * s, 0.0, 0.0])
        out.vel[:] = [self.v if t < self.T else 0.0, 0.0, 0.0]
        out.acc[:] = 0.0
        out.R[:] = self.ctx.T_world_goal[:3, :3]
        out.omega[:] = 0.0
        out.alpha[:] = 0.0


def _supervisor(config: InsertionConfig, T: float = 0.0, v: float = 0.0):
    """(supervisor, wrench state, snapshot): the goal at z = 0.2 m with the tool axis −z (approach axis +z)."""
    T_goal = np.eye(4)
    T_goal[:3, :3] = R_D_EE_SEATED
    T_goal[:3, 3] = [0.5, 0.0, 0.2]
    ctx = PlannerContext(T_world_start=T_goal.copy(), T_world_goal=T_goal, approach_axis_world=np.array([0, 0, 1.0]))
    sup = InsertionSupervisor(_Hold(ctx, T, v), config, T_C)
    wrench = SimpleNamespace(ext_body=np.zeros(6))
    snap = SimpleNamespace(T_world_ee=T_goal.copy())
    sup.bind(wrench, snap)
    return sup, wrench, snap


def test_keyed_seat_depth_and_capture() -> None:
    """The seated lug axis stands r_l / cos β above the V's apex (a circle of radius r_l touching two lines at
    ±β through the apex), so the seat depth is s_l − z_v − r_l / cos β; the deck stands at z_v + w tan β.
    Checked against the circle–line distance |(c − a)·n| = r_l for both faces (n the faces' unit normals),
    to round-off of a few products of numbers ≲ 0.1 m (bound 1e2 ε · 0.1 m)."""
    from tests.test_keyed import _pair, keyed_dict

    _, dr = _pair(keyed_dict())
    c, b, r = dr.config, dr.beta, dr.lug_radius
    centre = np.array([0.0, dr.lug_seat_height])  # (tangential, height) of the seated lug's axis
    apex = np.array([0.0, c.groove_height])
    for side in (1.0, -1.0):
        n = np.array([-side * math.sin(b), math.cos(b)])  # the face's normal, out of the slab into the V
        assert abs((centre - apex) @ n - r) <= 1e2 * EPS * 0.1
    assert dr.depth_total == pytest.approx(dr.tool_config.lug_height - c.groove_height - r / math.cos(b), abs=1e-16)
    assert dr.top_height == pytest.approx(c.groove_height + c.groove_half_width * math.tan(b), abs=1e-16)


@pytest.mark.parametrize("n", [2, 3, 4, 6])
def test_mating_phase_error_recovers_the_yaw_mod_the_period(n: int) -> None:
    """A probe seated with lug 0 in groove 0 and then turned by ψ about the mating axis has the phase error
    wrap(ψ) ∈ [−π/N, π/N) whatever the key and lug phases and the drogue's pose (exact up to the
    atan2 of a rotated unit vector: bound 1e2 ε rad)."""
    period = 2.0 * math.pi / n
    rng = np.random.default_rng(n)
    for _ in range(20):
        R_D = rpy_to_matrix(rng.uniform(-1.0, 1.0, 3))
        key, lug = rng.uniform(-math.pi, math.pi, 2)
        psi = rng.uniform(-0.49, 0.49) * period + period * rng.integers(-3, 4)
        R_seat = R_D @ R_D_EE_SEATED @ rpy_to_matrix(np.array([0.0, 0.0, -key - lug]))  # goal_in_target
        R_ee = R_D @ rpy_to_matrix(np.array([0.0, 0.0, psi])) @ R_D.T @ R_seat  # turned by ψ about z_D
        err = mating_phase_error(R_ee[None], R_D[None], period, key, lug)[0]
        expected = (psi + period / 2.0) % period - period / 2.0
        assert abs(err - expected) <= 1e2 * EPS


def test_time_to_seat_is_the_start_of_the_final_seated_stretch() -> None:
    t = np.arange(10) * 0.1
    e = np.array([5, 0, 0, 3, 0.5, 0.2, 0.0, -0.5, 0.9, 0.1]) * 1e-3
    assert time_to_seat(t, e, 1e-3) == t[4]
    assert time_to_seat(t, np.r_[e[:-1], 2e-3], 1e-3) == math.inf  # not seated at the end
    assert time_to_seat(t, np.zeros(10), 1e-3) == t[0]


def test_compliance_moves_the_reference_by_the_admittance() -> None:
    """With the filter off and a constant wrench (f ⊥ a and n ⊥ a, under the saturations and clips), the
    offsets after k steps are δp = k T_c G_t f_⊥ and δθ = k T_c G_r n_⊥ (a sum of k equal increments: bound
    k ε |δp|), the reference position is x_d + δp, R_d' = exp(δθ^) R_d and the fed-forward rates are the
    offsets' rates; below f_on nothing moves. The lead bounds are set out of the way (the snapshot does not
    follow the reference here)."""
    cc = ComplianceConfig(enabled=True, lateral_gain=0.002, tilt_gain=0.5, filter_time=0.0, max_lead=1.0,
                          max_lead_deg=90.0)
    sup, wrench, snap = _supervisor(InsertionConfig(compliance=cc))
    R = snap.T_world_ee[:3, :3]
    f_w, n_w = np.array([1.5, -0.5, 0.0]), np.array([0.0, 0.1, 0.0])  # world axes, ⊥ the tool axis
    wrench.ext_body[:3], wrench.ext_body[3:] = R.T @ f_w, R.T @ n_w
    out = Reference()
    k = 50
    for i in range(k):
        sup.evaluate(i * T_C, out)
    dp, dth = np.array(sup.dp), np.array(sup.dth)
    np.testing.assert_allclose(dp, k * T_C * cc.lateral_gain * f_w, rtol=0, atol=10 * k * EPS * np.abs(dp).max())
    np.testing.assert_allclose(dth, k * T_C * cc.tilt_gain * n_w, rtol=0, atol=10 * k * EPS * np.abs(dth).max())
    np.testing.assert_allclose(out.pos, snap.T_world_ee[:3, 3] + dp, atol=1e-15)
    np.testing.assert_allclose(out.vel, cc.lateral_gain * f_w, rtol=1e-9)
    from dockbench.sim.lie import so3_exp

    np.testing.assert_allclose(out.R, so3_exp(dth) @ R, atol=1e-15)
    wrench.ext_body[:] = 0.0  # out of contact: the offsets are held, the rates are zero
    sup.evaluate(k * T_C, out)
    assert sup.dp == list(dp) and np.all(out.vel == 0.0)


def test_wrench_filter_is_the_backward_euler_low_pass() -> None:
    """τ_f dw̄/dt = w − w̄ by backward Euler: a step w = f_0 gives w̄_k = f_0 (1 − (τ_f / (τ_f + T_c))^k), hence
    δp_k = T_c G_t Σ_{j≤k} w̄_j (the geometric sum, bound 1e2 k ε |δp|)."""
    cc = ComplianceConfig(enabled=True, lateral_gain=0.002, tilt_gain=0.0, filter_time=0.02, contact_force=1e-9,
                          max_lead=1.0)
    sup, wrench, snap = _supervisor(InsertionConfig(compliance=cc))
    f0 = 2.0
    wrench.ext_body[:3] = snap.T_world_ee[:3, :3].T @ np.array([f0, 0.0, 0.0])
    out = Reference()
    k = 40
    for i in range(k):
        sup.evaluate(i * T_C, out)
    q = cc.filter_time / (cc.filter_time + T_C)
    wbar = f0 * (1.0 - q ** np.arange(1, k + 1))
    expected = T_C * cc.lateral_gain * wbar.sum()
    assert abs(sup.dp[0] - expected) <= 1e2 * k * EPS * abs(expected)


def test_guard_clock_and_chain_rule() -> None:
    """After the first contact τ̇ = κ and κ follows κ_c with κ̇ = (κ_c − κ)/τ_κ (explicit Euler, κ clipped to
    [0, 1]); the reference's velocity is κ v_p(τ) (exact: one product). A plan at v = 10 mm/s, contact at
    step 0 (κ is first integrated at step 1): κ before step j is κ_c + (1 − κ_c)(1 − T_c/τ_κ)^(j−1), j ≥ 1."""
    gc = GuardConfig(enabled=True, speed_scale=0.3, ramp_time=0.05)
    sup, wrench, snap = _supervisor(InsertionConfig(guard=gc), T=1.0, v=0.01)
    wrench.ext_body[2] = 1.0  # ‖f‖ ≥ contact_force
    out = Reference()
    for j in range(30):
        kappa_j = sup.kappa
        expected = gc.speed_scale + (1 - gc.speed_scale) * (1 - T_C / gc.ramp_time) ** max(j - 1, 0)
        assert kappa_j == pytest.approx(expected, rel=1e-12)
        sup.evaluate(j * T_C, out)
        assert out.vel[0] == 0.01 * kappa_j
    assert sup.events[0]["event"] == "contact"


def _stall(sup, wrench, snap, steps: int, fa: float, dz_per_step: float) -> list[int]:
    """Drive ``steps`` steps with axial force f_a (along the approach axis +z, world) and the tip moving by
    ``dz_per_step`` along z from 10 mm above the goal; return the steps that flagged a jam."""
    out = Reference()
    wrench.ext_body[:3] = snap.T_world_ee[:3, :3].T @ np.array([0.0, 0.0, fa])
    z0 = snap.T_world_ee[2, 3] + 0.01
    jams = []
    for i in range(steps):
        snap.T_world_ee[2, 3] = z0 + i * dz_per_step
        sup.evaluate(i * T_C, out)
        if sup.buf[8] > 0.5:
            jams.append(i)
    return jams


def test_jam_detector_fires_on_a_stall_and_only_then() -> None:
    """A jam is a dwell with f_a ≥ F at every step and less than ``progress`` of insertion: stalled at 6 N it
    fires once per dwell (at step dwell / T_c); progressing at 5 mm/s (2 mm per dwell ≫ 0.5 mm), or stalled
    at a force below F, or within ``seat_margin`` of the goal, it never fires."""
    jc = JamConfig(enabled=True, force=4.0, progress=0.0005, dwell=0.4, seat_margin=0.004)
    cfg = InsertionConfig(jam=jc)
    n = int(round(jc.dwell / T_C))
    sup, wrench, snap = _supervisor(cfg)
    assert _stall(sup, wrench, snap, 2 * n + 5, fa=6.0, dz_per_step=0.0) == [n, 2 * n + 1]
    assert [e["event"] for e in sup.events] == ["jam", "jam"]
    sup, wrench, snap = _supervisor(cfg)
    assert _stall(sup, wrench, snap, 3 * n, fa=6.0, dz_per_step=-5e-6) == []
    sup, wrench, snap = _supervisor(cfg)
    assert _stall(sup, wrench, snap, 3 * n, fa=3.9, dz_per_step=0.0) == []
    sup, wrench, snap = _supervisor(cfg)
    snap.T_world_ee[2, 3] -= 0.0075  # 2.5 mm above the goal: seated, not jammed
    assert _stall(sup, wrench, snap, 3 * n, fa=6.0, dz_per_step=0.0) == []
    assert sup.events[0]["event"] == "reached"


def test_recovery_backs_off_by_the_quintic_and_counts_attempts() -> None:
    """On a jam with ``retry`` the reference backs off along a by ``backoff`` on a rest-to-rest quintic
    p(u) = p_0 + s(u)(p_1 − p_0) (checked at mid-segment to round-off), the attempt count rises, and after
    ``max_attempts`` insertions the supervisor gives up (events jam, backoff, ..., gave_up)."""
    jc = JamConfig(enabled=True, force=4.0, dwell=0.05)
    rc = RecoveryConfig(strategy="retry", max_attempts=2, backoff=0.01, speed=0.02, lateral_step=0.0,
                        tilt_step_deg=0.0)
    sup, wrench, snap = _supervisor(InsertionConfig(jam=jc, recovery=rc))
    n = int(round(jc.dwell / T_C))
    _stall(sup, wrench, snap, n + 1, fa=6.0, dz_per_step=0.0)
    assert sup.phase == "backoff" and sup.attempt == 2
    kind, t0, T, p0, p1, _, _ = sup._seg
    np.testing.assert_allclose(p1 - p0, [0.0, 0.0, rc.backoff], atol=1e-15)
    out = Reference()
    sup.evaluate(t0 + T / 2.0, out)
    s, _, _ = quintic_blend(0.5)
    np.testing.assert_allclose(out.pos, p0 + s * (p1 - p0), atol=1e-15)
    sup.phase, sup._streak_step = "reinsert", -1  # as after the re-insertion: the next stall exhausts the attempts
    _stall(sup, wrench, snap, n + 1, fa=6.0, dz_per_step=0.0)
    assert sup.phase == "gave_up"
    assert [e["event"] for e in sup.events] == ["jam", "backoff", "jam", "gave_up"]


def test_spiral_search_is_a_vogel_spiral() -> None:
    """Attempt k + 1's blind offset: lateral ``lateral_step``·√k at the angle k·(golden angle) in the plane ⊥ a,
    the tilt on the same spiral turned by 90° (so ‖δθ‖ = tilt_step·√k), yaw ±yaw_step·⌈k/2⌉ alternating."""
    rc = RecoveryConfig(strategy="retry", pattern="spiral", lateral_step=0.001, tilt_step_deg=1.0, yaw_step_deg=2.0)
    sup, _, _ = _supervisor(InsertionConfig(jam=JamConfig(enabled=True), recovery=rc))
    a = sup.axis
    pts = []
    for k in range(1, 7):
        sup.attempt = k
        p, th = sup._next_offset(np.zeros(3), np.zeros(3))
        assert abs(p @ a) <= 1e-18 and np.linalg.norm(p) == pytest.approx(rc.lateral_step * math.sqrt(k), rel=1e-14)
        th_lat = th - (th @ a) * a
        assert np.linalg.norm(th_lat) == pytest.approx(math.radians(1.0) * math.sqrt(k), rel=1e-14)
        assert abs(th_lat @ p) <= 1e-18  # turned by 90°
        assert th @ a == pytest.approx((1 if k % 2 else -1) * math.ceil(k / 2) * math.radians(2.0), rel=1e-14)
        pts.append(p)
    ang = [math.atan2(*(np.cross(pts[0], q) @ a, pts[0] @ q)) for q in pts[1:]]
    for k, phi in enumerate(ang, start=2):
        expected = ((k - 1) * GOLDEN_ANGLE + math.pi) % (2 * math.pi) - math.pi
        assert phi == pytest.approx(expected, abs=1e-12)


def _release_h(zeta: float) -> float:
    """h(ζ) of docs/theory/insertion.md §4: the peak speed of m ẍ + d ẋ + k x = 0 released from rest at
    x(0) = −F_s/k, in units of F_s/(m ω)."""
    if zeta == 1.0:
        return 1.0 / math.e
    r = math.sqrt(zeta * zeta - 1.0)
    a, b = zeta + r, zeta - r
    return ((a / b) ** (-b / (a - b)) - (a / b) ** (-a / (a - b))) / (a - b)


@pytest.mark.parametrize("d", [282.842712474619, 420.0, 560.0, 700.0])
def test_release_peak_speed_of_the_apparent_impedance(d: float) -> None:
    """The keyed FR3 Khatib insertion's m = 20 kg, k = 1000 N/m, released from the load F_s = 4.75 N
    (docs/theory/insertion.md §4): the peak speed of a fine RK4 integration (step 1e-5 s; its error O(h⁴ω⁴) ≪
    1e-9 relative) equals F_s h(ζ)/(m ω) to 1e-7 relative (the grid's sampling of the peak, ≤ ½ (ω h)²
    relative), and h(2)/h(1) = 0.594, h(2.47)/h(1) = 0.496 (the scenario's d = 700 N·s/m)."""
    m, k, f_s = 20.0, 1000.0, 4.75
    w, zeta = math.sqrt(k / m), d / (2.0 * math.sqrt(k * m))
    h = 1e-5
    x, v, vmax = -f_s / k, 0.0, 0.0

    def acc(x: float, v: float) -> float:
        return -(d * v + k * x) / m

    for _ in range(int(0.5 / h)):  # t* ≤ 0.11 s for ζ ≤ 2
        k1x, k1v = v, acc(x, v)
        k2x, k2v = v + 0.5 * h * k1v, acc(x + 0.5 * h * k1x, v + 0.5 * h * k1v)
        k3x, k3v = v + 0.5 * h * k2v, acc(x + 0.5 * h * k2x, v + 0.5 * h * k2v)
        k4x, k4v = v + h * k3v, acc(x + h * k3x, v + h * k3v)
        x += h / 6.0 * (k1x + 2 * k2x + 2 * k3x + k4x)
        v += h / 6.0 * (k1v + 2 * k2v + 2 * k3v + k4v)
        vmax = max(vmax, v)
    expected = f_s / (m * w) * _release_h(round(zeta, 12) if abs(zeta - 1.0) > 1e-9 else 1.0)
    assert vmax == pytest.approx(expected, rel=1e-7)
    assert _release_h(1.0 + 1e-6) == pytest.approx(1.0 / math.e, rel=1e-5)  # the overdamped form → 1/e
    assert _release_h(2.0) / _release_h(1.0) == pytest.approx(0.594, abs=5e-4)
    assert _release_h(700.0 / (2.0 * math.sqrt(k * m))) / _release_h(1.0) == pytest.approx(0.496, abs=5e-4)


class _Law:
    """A stand-in control law whose axial stiffness K_a the test sets."""

    def __init__(self, k: float):
        self.k = k

    def axial_stiffness(self, axis: np.ndarray, R_world_ee: np.ndarray) -> float:
        return self.k


def test_push_in_force_bounds_the_lead_by_the_laws_stiffness() -> None:
    """The push works in force: after the plan, with the tip stalled, the axial lead λ = aᵀ(x_d' − x) grows at
    G_a (F_d − f_p) (saturated at ``max_speed``) until λ = L(t) = min(F_max / K_a(t), ``max_axial_lead``), i.e.
    the law's spring pushes with K_a λ = F_max whatever its stiffness; when K_a rises the lead is pulled back
    to the new L at once (not fed forward as a rate), when it falls the lead grows to the new L. Bounds: the
    growth stops within one unsaturated increment T_c G_a (F_d − f_p) of L (the anti-windup drops the
    increment that would cross it, judged before the speed saturation); the
    pull-back is exact to round-off of a few sums of numbers ≲ 0.3 m (1e2 ε · 0.3 m)."""
    cc = ComplianceConfig(enabled=True, lateral_gain=0.0, tilt_gain=0.0, filter_time=0.0, axial_force=4.0,
                          axial_gain=0.01, max_speed=0.01, max_axial_offset=0.06, max_axial_lead=0.02,
                          max_push_force=5.0)
    sup, wrench, snap = _supervisor(InsertionConfig(compliance=cc))
    law = _Law(1000.0)
    sup.attach_law(law)
    a = snap.T_world_ee[:3, 2]  # the tool axis (−z world)
    wrench.ext_body[:3] = snap.T_world_ee[:3, :3].T @ (-1.0 * a)  # the contact pushes back with f_p = 1 N < F_d
    out = Reference()
    step = T_C * cc.axial_gain * (cc.axial_force - 1.0)
    tol = 1e2 * EPS * 0.3

    def lead() -> float:
        return float((out.pos - snap.T_world_ee[:3, 3]) @ a)

    t = 0.0
    for _ in range(700):  # 5 mm at 10 µm per step: 500 steps, then held
        sup.evaluate(t, out)
        t += T_C
    L = cc.max_push_force / law.k
    assert L - step - tol < lead() <= L + tol
    assert law.k * lead() == pytest.approx(cc.max_push_force, abs=law.k * (step + tol))
    assert abs(out.vel @ a) <= tol / T_C  # held: no rate fed forward
    law.k = 2500.0  # the law stiffens (the HQP's K_r back towards K_0): pulled back to F_max / K_a at once
    sup.evaluate(t, out)
    t += T_C
    assert lead() == pytest.approx(cc.max_push_force / law.k, abs=tol)
    assert abs(out.vel @ a) <= tol / T_C
    law.k = 100.0  # softer (K_r at its floor): F_max / K_a = 50 mm, the safety bound 20 mm holds it
    for _ in range(2000):
        sup.evaluate(t, out)
        t += T_C
    assert cc.max_axial_lead - step - tol < lead() <= cc.max_axial_lead + tol
    # without F_max the bound is the length max_axial_lead, whatever the stiffness (the former behaviour)
    cc0 = ComplianceConfig(**{**cc.__dict__, "max_push_force": 0.0})
    sup0, wrench0, snap0 = _supervisor(InsertionConfig(compliance=cc0))
    sup0.attach_law(_Law(1000.0))
    wrench0.ext_body[:] = wrench.ext_body
    out0 = Reference()
    for i in range(2500):
        sup0.evaluate(i * T_C, out0)
    assert cc.max_axial_lead - step - tol < float((out0.pos - snap0.T_world_ee[:3, 3]) @ a) <= cc.max_axial_lead + tol


def test_release_brake_holds_the_lead_at_zero_while_the_tip_runs_in() -> None:
    """With ``release_speed`` v_r: while the tip's axial speed aᵀ(x_k − x_{k−1}) / T_c exceeds v_r the lead bound
    is 0 (the reference never leads the tip along a); once the tip is at rest the held-back offset is given back at
    ``max_speed`` per second up to L = F_max / K_a. Bounds as in the test above (round-off of sums
    of numbers ≲ 0.3 m)."""
    cc = ComplianceConfig(enabled=True, lateral_gain=0.0, tilt_gain=0.0, filter_time=0.0, axial_force=4.0,
                          max_speed=0.01, max_axial_offset=0.06, max_axial_lead=0.02, max_push_force=5.0,
                          release_speed=0.02)
    sup, wrench, snap = _supervisor(InsertionConfig(compliance=cc))
    sup.attach_law(_Law(1000.0))
    a = snap.T_world_ee[:3, 2]
    wrench.ext_body[:3] = snap.T_world_ee[:3, :3].T @ (-1.0 * a)
    out = Reference()
    tol = 1e2 * EPS * 0.3
    t = 0.0
    for _ in range(700):  # stalled: the push loads the lead to L = 5 mm
        sup.evaluate(t, out)
        t += T_C
    assert float((out.pos - snap.T_world_ee[:3, 3]) @ a) == pytest.approx(0.005, abs=3e-5 + tol)
    for _ in range(20):  # the tip breaks free at 50 mm/s > v_r: the reference stays at the tip along a
        snap.T_world_ee[:3, 3] += 0.05 * T_C * a
        sup.evaluate(t, out)
        t += T_C
        assert float((out.pos - snap.T_world_ee[:3, 3]) @ a) <= tol  # never ahead of the tip
    assert sup.n_brake == 20
    # at rest again (the tip ran 1 mm past the held reference): the lead comes back at max_speed per step
    leads = [float((out.pos - snap.T_world_ee[:3, 3]) @ a)]
    for _ in range(3):
        sup.evaluate(t, out)
        t += T_C
        leads.append(float((out.pos - snap.T_world_ee[:3, 3]) @ a))
    np.testing.assert_allclose(np.diff(leads), cc.max_speed * T_C, atol=tol)


# ---------------------------------------------------------------------------------------------- the tilt search
def test_round_drogue_tilt_band_and_its_midpoint() -> None:
    """§2: with the nose's equator at x_t across the bore, the shaft clears the entrance for
    (−c − x_t)/ℓ_e ≤ θ ≤ (c − x_t)/ℓ_e (small angles). Checked on the exact 2-D geometry: the shaft axis from the
    equator point (x_t, 0) at angle θ meets the entrance height ℓ_e at x_t + ℓ_e tan θ, which must lie within
    ±c of the bore's axis (the shaft's radius is the bore's less c). The band's width is 2c/ℓ_e (1.146° for
    c = 0.3 mm, ℓ_e = 30 mm), its centre −x_t/ℓ_e; the moment-nulling equilibrium, the edge nearest the start, is
    0.573° at best (tip centred) and 1.146° with the tip on the wall. The tan θ ≈ θ error at 1.2° is
    θ³/3 ≈ 2e-6 rad, the bound used (1e-5 rad)."""
    c, ell = 0.0003, 0.030
    for x_t in (-c, -0.5 * c, 0.0, 0.2 * c, c):
        thetas = np.linspace(-0.05, 0.05, 200001)
        ok = np.abs(x_t + ell * np.tan(thetas)) <= c
        lo, hi = thetas[ok].min(), thetas[ok].max()
        assert lo == pytest.approx((-c - x_t) / ell, abs=1e-5)
        assert hi == pytest.approx((c - x_t) / ell, abs=1e-5)
        assert 0.5 * (lo + hi) == pytest.approx(-x_t / ell, abs=1e-5)
    assert math.degrees(2 * c / ell) == pytest.approx(1.146, abs=1e-3)
    assert math.degrees(c / ell) == pytest.approx(0.573, abs=1e-3)


def test_pivot_moment_and_centre_angle() -> None:
    """n_q = n + ℓ a0 × f is the moment about q = tip − ℓ a0 (n + (tip − q) × f, exact to round-off of a cross
    product); φ = asin(eᵀ(a0 × a)) recovers a rotation of a0 by φ about e ⊥ a0 (bound 1e2 ε)."""
    from dockbench.sim.lie import so3_exp

    rng = np.random.default_rng(3)
    a0 = np.array([0.0, 0.0, -1.0])
    f, n, ell = rng.normal(size=3), rng.normal(size=3), 0.03
    tip = np.array([0.5, 0.1, 0.2])
    q = tip - ell * a0
    np.testing.assert_allclose(InsertionSupervisor.pivot_moment(n, f, a0, ell), n + np.cross(tip - q, f),
                               atol=1e2 * EPS)
    for e in (np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])):
        for phi in (-0.04, 0.0, 0.02, 0.5):
            a = so3_exp(phi * e) @ a0
            assert InsertionSupervisor.centre_angle(a0, e, a) == pytest.approx(phi, abs=1e2 * EPS)


class _Bore:
    """A stand-in for the seated probe in the round drogue (no simulator): the tool follows the reference
    exactly except that its tilt (the rotation vector v from the start orientation R0, ⊥ the tool axis) is held
    in a disk of radius ρ about v_c, the tilts at which the shaft clears the bore (the shaft's upper end within
    a circle about the axis); beyond it the tool stays at the disk's nearest point and the contact exerts the
    moment −K_θ (v_ref − v_tool) (what the law's rotational spring presses on the edge). The tip follows the
    reference along the axis down to the seat, where the contact pushes back with 2 N."""

    def __init__(self, sup, wrench, snap, centre, radius, k_theta=100.0):
        self.sup, self.wrench, self.snap = sup, wrench, snap
        self.R0 = snap.T_world_ee[:3, :3].copy()
        self.seat = snap.T_world_ee[:3, 3].copy()
        self.centre, self.radius, self.k = np.asarray(centre, float), radius, k_theta
        self.moment_max = 0.0
        self.turn_max = 0.0

    def step(self, t, out):
        from dockbench.sim.lie import so3_exp, so3_log

        self.sup.evaluate(t, out)
        v_ref = so3_log(out.R @ self.R0.T)
        v_ref[2] = 0.0  # no yaw here
        d = v_ref - self.centre
        r = np.linalg.norm(d)
        v_tool = v_ref if r <= self.radius else self.centre + d * (self.radius / r)
        a0 = self.R0[:, 2]
        depth = min(float((out.pos - self.seat) @ a0), 0.0)  # the tip stops at the seat
        T = np.eye(4)
        T[:3, :3] = so3_exp(v_tool) @ self.R0
        T[:3, 3] = self.seat + depth * a0
        self.snap.T_world_ee[:] = T
        n = -self.k * (v_ref - v_tool)
        self.moment_max = max(self.moment_max, float(np.linalg.norm(n)))
        f = -2.0 * a0 if depth > -1e-5 else np.zeros(3)
        self.wrench.ext_body[:3] = T[:3, :3].T @ f
        self.wrench.ext_body[3:] = T[:3, :3].T @ n


def _centring(centre, radius, **kw):
    ce = CentringConfig(enabled=True, **kw)
    cc = ComplianceConfig(enabled=True, lateral_gain=0.0, tilt_gain=0.0, axial_force=2.0)
    sup, wrench, snap = _supervisor(InsertionConfig(compliance=cc, centring=ce))
    bore = _Bore(sup, wrench, snap, centre, radius)
    out = Reference()
    n_steps = int((ce.settle_time + sup.centring_reserve() + 2.0) / T_C)
    done, i_done = len(sup._centre_stages()) + 1, None
    for i in range(n_steps):
        bore.step(i * T_C, out)
        bore.turn_max = max(bore.turn_max, abs(sup._centre_psi) if 0 <= sup.centre_stage < done - 1 else 0.0)
        if sup.centre_stage == done and i_done is None:
            i_done = i
        if i_done is not None and i >= i_done + 500:  # 0.5 s of the push after the return
            break
    return sup, bore, snap, ce


@pytest.mark.parametrize("direction", [(1.0, 0.0), (0.0, -1.0), (0.6, -0.8), None])
def test_tilt_search_finds_both_edges_and_ends_on_the_axis(direction) -> None:
    """The search of §2 on the stand-in bore: the play is a disk of tilts of radius ρ = 2c/ℓ_e = 1.146° (the
    shaft's ends free across the bore) about the true axis v_c, and the probe starts on the disk's edge (where a
    moment-nulling compliance leaves it: v_c = ρ u from the start, u the direction; None: started on the axis).
    The sweep about e1 stops at the two chord ends at the start's e2 tilt, whose midpoint is v_c's e1 component
    exactly for a disk; the sweep about e2 then finds v_c's e2 component. The detection offset (n_th / K_θ, plus
    the 20 ms filter's lag at 1°/s) is equal on both sides and, measured as the tool's angle (held at the edge),
    cancels. Bound: the servo stops within its arrival tolerance (0.05°) on each axis, √2 · 0.05° in all, plus
    the sweep's step ω T_c = 0.001° on each edge: 0.073°. Every sweep found its edge (none bounded by
    range_deg), and the moment stayed bounded: a sweep detects on n_eᵀ e ≥ n_th, and where the sweep runs along
    the disk's tangent (the start on the edge in the direction of the other axis, u = ±e2 for the e1 sweep) the
    outward moment is normal to e: after a turn ψ past the tangent point it is K_θ ψ²/(2ρ) with the component
    K_θ ψ³/(2ρ²) along e, so detection comes at ψ* = (2ρ² n_th / K_θ)^(1/3) with ‖n‖ = K_θ ψ*²/(2ρ) = 0.137 N·m,
    plus one filter lag at 1°/s (K_θ ω τ_f = 0.035 N·m) and a step: 0.18 N·m (6 N on a 30 mm lever); elsewhere
    n_th plus the lag. The tip is back at the seat at the end (within the return's 0.1 mm)."""
    rho = math.radians(1.146)
    u = np.zeros(3) if direction is None else np.array([*direction, 0.0]) / np.hypot(*direction)
    v_c = rho * u
    sup, bore, snap, ce = _centring(v_c, rho)
    assert [e["event"] for e in sup.events][-2:] == ["centre_start", "centred"]
    assert len(sup.centring_log) == 2 and not any(any(s["bounded"]) for s in sup.centring_log)
    from dockbench.sim.lie import so3_log

    v_tool = so3_log(snap.T_world_ee[:3, :3] @ bore.R0.T)
    assert math.degrees(np.linalg.norm(v_tool[:2] - v_c[:2])) <= math.sqrt(2.0) * ce.tolerance_deg + 0.002
    k, lag = bore.k, bore.k * math.radians(ce.rate_deg) * 0.02
    psi = (2.0 * rho**2 * ce.moment / k) ** (1.0 / 3.0)
    tangent = direction is not None and abs(direction[0]) == 1.0  # u = ±world x: the e1 sweep runs on a tangent
    assert bore.moment_max <= (k * psi**2 / (2.0 * rho) if tangent else ce.moment) + lag + 0.01
    # the return ends within 0.1 mm of where the tip settled (or on the seat's push-back): back at the seat
    assert float((snap.T_world_ee[:3, 3] - bore.seat) @ bore.R0[:, 2]) == pytest.approx(0.0, abs=1e-4 + 1e-6)


def test_tilt_search_is_bounded_in_angle() -> None:
    """A play wider than ``range_deg`` (no edge to find): each sweep stops range_deg from where its stage began
    (bounded, flagged), the reference never turns further (bound: one sweep step ω T_c), and the tool ends
    half-way between the two bounds, where it started (within the servo's tolerance and a step). A centring
    without the push that seats the probe is refused."""
    sup, bore, snap, ce = _centring(np.zeros(3), math.radians(10.0), range_deg=1.0)
    assert all(s["bounded"] == [True, True] for s in sup.centring_log)
    step = ce.rate_deg * T_C
    assert math.degrees(bore.turn_max) <= ce.range_deg + step * 1.001
    for s in sup.centring_log:
        assert s["edge_plus_deg"] == pytest.approx(ce.range_deg, abs=2 * step)
        assert s["edge_minus_deg"] == pytest.approx(-ce.range_deg, abs=2 * step)
        assert abs(s["final_deg"]) <= ce.tolerance_deg + 2 * step
    cfg = ComplianceConfig(enabled=True, lateral_gain=0.0, tilt_gain=0.0, axial_force=2.0)
    with pytest.raises(ScenarioError, match="centring needs"):
        InsertionConfig(compliance=ComplianceConfig(enabled=True), centring=CentringConfig(enabled=True)).validate()
    InsertionConfig(compliance=cfg, centring=CentringConfig(enabled=True)).validate()


def test_free_advance_carries_a_free_tool_on_to_the_contact() -> None:
    """The free advance (docs/theory/insertion.md §3): after the plan, out of contact, the axial offset grows by
    T_c v_free per step up to d_free, with the rate v_free fed forward along the tool axis a; the lateral part is
    held; during the plan and once in contact it does not act (in contact the push of step 2 does). Without
    ``free_push_speed`` (the former behaviour) a free tool's reference stays where the plan left it: this test
    fails on it. Bounds: sums of ≤ 3000 increments of 3 µm, round-off ≤ 3000 ε · 0.01 m, taken as 1e4 ε · 0.01 m."""
    cc = ComplianceConfig(enabled=True, lateral_gain=0.0, tilt_gain=0.0, filter_time=0.0, axial_force=2.0,
                          max_axial_offset=0.06, free_push_speed=0.003, free_push_depth=0.005)
    tol = 1e4 * EPS * 0.01
    step = cc.free_push_speed * T_C
    # during the plan (duration 0.5 s) nothing; then 5 mm at 3 µm per step (1667 steps), then held
    sup, wrench, snap = _supervisor(InsertionConfig(compliance=cc), T=0.5)
    a = snap.T_world_ee[:3, 2]
    out = Reference()
    for i in range(500):
        sup.evaluate(i * T_C, out)
    assert sup.dp == [0.0, 0.0, 0.0]
    offs = []
    for i in range(500, 2500):
        sup.evaluate(i * T_C, out)
        offs.append(float(np.array(sup.dp) @ a))
    k = np.arange(1, len(offs) + 1)
    np.testing.assert_allclose(offs, np.minimum(k * step, cc.free_push_depth), rtol=0.0, atol=tol)
    np.testing.assert_allclose(np.array(sup.dp) - offs[-1] * a, 0.0, atol=tol)  # no lateral part
    assert sup.summary()["free_advance_steps"] == int(math.ceil(cc.free_push_depth / step - 1e-9))
    # fed forward while advancing
    sup, wrench, snap = _supervisor(InsertionConfig(compliance=cc), T=0.0)
    sup.evaluate(0.0, out)
    assert float(out.vel @ a) == pytest.approx(cc.free_push_speed, abs=tol / T_C)
    # in contact: the push's rate G_a (F_d − f_p) instead (f_p = 1 N: 10 µm per step at G_a = 0.01)
    wrench.ext_body[:3] = snap.T_world_ee[:3, :3].T @ (-1.0 * a)
    before = float(np.array(sup.dp) @ a)
    sup.evaluate(T_C, out)
    assert float(np.array(sup.dp) @ a) - before == pytest.approx(T_C * cc.axial_gain * (cc.axial_force - 1.0),
                                                                 abs=tol)
    # the former behaviour: held out of contact
    cc0 = ComplianceConfig(**{**cc.__dict__, "free_push_speed": 0.0})
    sup0, _, _ = _supervisor(InsertionConfig(compliance=cc0), T=0.0)
    for i in range(100):
        sup0.evaluate(i * T_C, out)
    assert sup0.dp == [0.0, 0.0, 0.0]


def _jam_with_lead(backoff_from: str, lead: float):
    """A supervisor whose push has led the reference ``lead`` past the stalled tip (axial offset), driven into a
    jam; returns (supervisor, snapshot, reference at the jam step, the approach axis)."""
    cc = ComplianceConfig(enabled=True, lateral_gain=0.0, tilt_gain=0.0, filter_time=0.0, axial_force=2.0,
                          max_axial_offset=0.06, max_axial_lead=0.01)
    jc = JamConfig(enabled=True, force=1.5, dwell=0.05, seat_margin=0.004)
    rc = RecoveryConfig(strategy="retry", backoff=0.004, backoff_from=backoff_from, lateral_step=0.0,
                        tilt_step_deg=0.0) if backoff_from == "tip" else RecoveryConfig(
        strategy="retry", backoff=0.012, backoff_from=backoff_from, lateral_step=0.0, tilt_step_deg=0.0)
    sup, wrench, snap = _supervisor(InsertionConfig(compliance=cc, jam=jc, recovery=rc))
    a_hat = sup.axis
    snap.T_world_ee[:3, 3] += 0.01 * a_hat  # the tip stalled 10 mm above the believed goal (on the deck)
    # the push's offset (the reference `lead` past the tip along the tool axis) and a lateral offset the deck's
    # contact left (2 mm, −1 mm)
    sup.dp = (-lead * a_hat + np.array([0.002, -0.001, 0.0])).tolist()
    wrench.ext_body[:3] = snap.T_world_ee[:3, :3].T @ (cc.axial_force * a_hat)  # f_p = F_d: the push is balanced
    out = Reference()
    n = int(round(jc.dwell / T_C))
    refs = []
    for i in range(n + 1):
        sup.evaluate(i * T_C, out)
        refs.append(out.pos.copy())
    assert sup.phase == "backoff"
    return sup, snap, refs[-1], a_hat


def test_backoff_from_the_tip_releases_the_contact() -> None:
    """``backoff_from: tip``: at the jam the position offset is folded into the segment (the reference does not
    jump: p_0 = x_d' of the jam step, δp = 0) and the retreat ends ``backoff`` behind the tip along â however far
    the push led the reference, (p_1 − x)ᵀâ = b, on the belief's axis (the lateral offset taken back); the tip
    stalled 10 mm above the believed goal: the plan's lead is 10 mm, the push's offset 0–8 mm on top. With
    ``reference`` and the same 4 mm backoff the retreat ends 14 mm *past* the tip (the defect: the tool never
    lifts off). Round-off of sums of numbers ≲ 0.6 m: 1e2 ε · 0.6 m."""
    tol = 1e2 * EPS * 0.6
    for lead in (0.0, 0.003, 0.008):
        sup, snap, ref_jam, a_hat = _jam_with_lead("tip", lead)
        kind, t0, T, p0, p1, _, _ = sup._seg
        dp = np.array(sup.dp)
        assert sup.dp == [0.0, 0.0, 0.0]  # the offset folded in
        np.testing.assert_allclose(p0 + dp, ref_jam, atol=tol)  # continuous at the jam
        tip = snap.T_world_ee[:3, 3]
        assert float((p1 + dp - tip) @ a_hat) == pytest.approx(sup.config.recovery.backoff, abs=tol)
        # the lateral offset taken back on the way (no search offset here): p_1 at the belief's axis
        lat = p1 - float(p1 @ a_hat) * a_hat
        goal = sup.p_goal - float(sup.p_goal @ a_hat) * a_hat
        np.testing.assert_allclose(lat, goal, atol=tol)
        out = Reference()
        sup.evaluate(t0 + T + T_C, out)  # after the segment: the reference b behind the tip (out of contact now)
        assert float((out.pos - tip) @ a_hat) >= sup.config.recovery.backoff - tol
    # the former rule, measured from the reference: a 4 mm backoff under an 18 mm lead ends 14 mm past the tip
    cc = ComplianceConfig(enabled=True, axial_force=2.0, max_axial_lead=0.001)  # (a lead bound it accepts)
    cfg = InsertionConfig(compliance=cc, jam=JamConfig(enabled=True, dwell=0.05, force=1.5),
                          recovery=RecoveryConfig(strategy="retry", backoff=0.004, lateral_step=0.0, tilt_step_deg=0.0))
    sup, wrench, snap = _supervisor(cfg)
    a_hat = sup.axis
    snap.T_world_ee[:3, 3] += 0.01 * a_hat
    sup.dp = (-0.008 * a_hat).tolist()
    wrench.ext_body[:3] = snap.T_world_ee[:3, :3].T @ (2.0 * a_hat)
    out = Reference()
    for i in range(51):
        sup.evaluate(i * T_C, out)
    _, _, _, p0, p1, _, _ = sup._seg
    lead = 0.010 + 0.008  # the plan's goal 10 mm past the stalled tip, the push's offset 8 mm more
    assert float((p1 + np.array(sup.dp) - snap.T_world_ee[:3, 3]) @ a_hat) == pytest.approx(0.004 - lead, abs=tol)


@pytest.mark.parametrize("backoff, ok", [(0.004, False), (0.008, False), (0.0081, True)])
def test_backoff_shorter_than_the_push_lead_is_refused(backoff: float, ok: bool) -> None:
    """With ``backoff_from: reference`` and a push, a backoff ≤ ``max_axial_lead`` may never lift the tool off:
    refused at load time, naming the key and the allowed values; ``backoff_from: tip`` accepts it."""
    cc = ComplianceConfig(enabled=True, axial_force=2.0, max_axial_lead=0.008)
    jc = JamConfig(enabled=True)
    cfg = InsertionConfig(compliance=cc, jam=jc, recovery=RecoveryConfig(strategy="retry", backoff=backoff))
    if ok:
        cfg.validate()
    else:
        with pytest.raises(ScenarioError, match=r"backoff_from: tip") as err:
            cfg.validate()
        assert err.value.key == "recovery.backoff"
    InsertionConfig(compliance=cc, jam=jc,
                    recovery=RecoveryConfig(strategy="retry", backoff=backoff, backoff_from="tip")).validate()
    # without a push the rule does not apply
    InsertionConfig(compliance=ComplianceConfig(enabled=True), jam=jc,
                    recovery=RecoveryConfig(strategy="retry", backoff=backoff)).validate()


def test_free_advance_needs_a_push_and_a_depth_within_the_clip() -> None:
    """``free_push_speed`` > 0 without a push, or a ``free_push_depth`` beyond ``max_axial_offset``, is refused."""
    with pytest.raises(ScenarioError) as err:
        InsertionConfig(compliance=ComplianceConfig(enabled=True, free_push_speed=0.003)).validate()
    assert err.value.key == "compliance.free_push_speed"
    with pytest.raises(ScenarioError) as err:
        InsertionConfig(compliance=ComplianceConfig(enabled=True, axial_force=2.0, free_push_speed=0.003,
                                                    free_push_depth=0.02, max_axial_offset=0.01)).validate()
    assert err.value.key == "compliance.free_push_depth"


def test_a_fresh_retry_pushes_only_after_its_reinsertion() -> None:
    """With ``backoff_from: tip`` the re-insertion is the new attempt's plan: in contact during its segment the
    push does not move the offset (its own motion inserts), and at the segment's end it does, at
    G_a (F_d − f_p) per second; with ``reference`` (the former rule) the push acts from the re-insertion's
    start. Round-off of sums of numbers ≲ 0.6 m: 1e2 ε · 0.6 m."""
    tol = 1e2 * EPS * 0.6
    for mode, pushes_during in (("tip", False), ("reference", True)):
        cc = ComplianceConfig(enabled=True, lateral_gain=0.0, tilt_gain=0.0, filter_time=0.0, axial_force=2.0,
                              max_axial_offset=0.06, max_axial_lead=0.05)
        jc = JamConfig(enabled=True, force=1.5, dwell=0.05, seat_margin=0.004)
        rc = RecoveryConfig(strategy="retry", backoff=0.06, backoff_from=mode, lateral_step=0.0, tilt_step_deg=0.0)
        sup, wrench, snap = _supervisor(InsertionConfig(compliance=cc, jam=jc, recovery=rc))
        a = snap.T_world_ee[:3, 2]
        snap.T_world_ee[:3, 3] -= 0.01 * a  # stalled 10 mm above the goal
        wrench.ext_body[:3] = snap.T_world_ee[:3, :3].T @ (-2.5 * a)  # f_p = 2.5 N ≥ F_d: the push is still
        out = Reference()
        for i in range(51):
            sup.evaluate(i * T_C, out)
        kind, t0, T, *_ = sup._seg
        sup.evaluate(t0 + T + T_C, out)  # the backoff's end: the re-insertion starts
        assert sup.phase == "reinsert"
        _, t1, T1, *_ = sup._seg
        wrench.ext_body[:3] = snap.T_world_ee[:3, :3].T @ (-1.0 * a)  # f_p = 1 N < F_d: the push would advance
        before = float(np.array(sup.dp) @ a)
        sup.evaluate(t1 + 0.5 * T1, out)
        moved = float(np.array(sup.dp) @ a) - before
        step = T_C * cc.axial_gain * (cc.axial_force - 1.0)
        assert moved == pytest.approx(step if pushes_during else 0.0, abs=tol)
        sup.evaluate(t1 + T1 + T_C, out)  # the segment has ended: the push acts in both modes, every step
        sup.evaluate(t1 + T1 + 2 * T_C, out)
        assert float(np.array(sup.dp) @ a) - before - moved == pytest.approx(2 * step, abs=tol)
