"""The insertion supervisor: an outer compliance loop on the reference, jam detection and recovery
(docs/theory/insertion.md). Off unless a scenario's ``insertion:`` block turns a part on.

:class:`InsertionSupervisor` wraps the scenario's planner. Every control step it reads the F/T wrench the
controller reads (``WrenchState.ext_body``: environment on tool, EE axes, about the EE origin = the tip)
and the EE pose of the step's snapshot, and shapes the reference the controller then tracks. All vectors
below are world axes at the tip; a is the tool axis (EE +z), T_c the control period.

Compliance (``insertion.compliance``): an admittance on the reference, i.e. a remote centre of compliance
at the tip realised by the outer loop, whatever the law and the arm's joint friction (the F/T measures the
contact directly). With f, n the measured force and moment about the tip, f_⊥ = f − (aᵀf) a,
n_⊥ = n − (aᵀn) a, n_a = aᵀn and the push-back f_p = −aᵀf (a points from the flange to the tip, into the
target), f and n first low-passed with the time constant τ_f (``filter_time``), while ‖f‖ ≥ f_on (contact)::

    δṗ = sat_v(G_t f_⊥ + G_a (F_d − f_p) a),   δθ̇ = sat_ω(G_r n_⊥ + G_y n_a a),
    δp ← clip(δp + T_c δṗ, p_max),   δθ ← clip(δθ + T_c δθ̇, θ_max)           (norm clips)

(the axial term only with F_d > 0 and once the plan has ended or a re-insertion has begun, its part aᵀδp
clipped to ±``max_axial_offset`` and the lateral rest to p_max), and out of contact both rates are zero (the
offsets are held) — except, with ``free_push_speed`` v_free > 0, the free advance: where the push would act
but the tool is out of contact, δṗ = v_free a while aᵀδp < ``free_push_depth`` (a tool the believed depth left
short and free in the bore is carried on until the contact pushes back). The controller tracks
x_d' = x_d + δp, R_d' = exp(δθ^) R_d (a rotation about the tip), ẋ_d' = ẋ_d + δṗ, ω_d' = ω_d + δθ̇.
The steady state nulls the lateral force and the moment about the tip: the lateral and angular errors of the
belief are absorbed by moving the reference, not by loading the walls.

Jam detection (``insertion.jam``): with a the believed approach axis (out of the mouth) and the believed goal
x_g, the remaining depth r = (x − x_g)ᵀa and the axial force f_a = fᵀa (> 0: the target pushes the tool
back out). Armed while r > ``seat_margin``; a jam is a dwell of ``dwell`` seconds during which f_a ≥
``force`` at every step and r decreased by less than ``progress`` (a stalled insertion). A streak starts at
the first step with f_a ≥ ``force`` and restarts whenever a full dwell shows progress.

Recovery (``insertion.recovery``, ``strategy: retry``): on a jam (while attempts remain) the reference backs
off along a by ``backoff`` (a rest-to-rest quintic at ``speed``; with ``backoff_from: tip`` the push's axial
offset is folded in, the retreat ends ``backoff`` behind the tip, and the offset's lateral part is taken
back on the way), moving the search offset of the next
attempt in on the way (lateral δs ⊥ a, a rotation about the tip), then re-inserts to the goal carrying that
offset, and holds there. Attempt k + 1's offset (``pattern``):

* ``wrench``: the previous offset plus one step in the direction the jam's wrench points: ``lateral_step``
  along f_⊥, ``tilt_step_deg`` about n_⊥, ``yaw_step_deg`` about a with the sign of n_a (the walls push
  the tool towards where it fits);
* ``spiral``: a blind pattern, lateral ``lateral_step`` √k on a golden-angle (Vogel) spiral, the tilt
  ``tilt_step_deg`` √k on the same spiral turned by 90°, and the yaw ±``yaw_step_deg``·⌈k/2⌉ alternating.

After ``max_attempts`` insertions the supervisor holds and records ``gave_up``.

Telemetry (scalar channels): ``ins_dp_{x,y,z}`` [m] and ``ins_dth_{x,y,z}`` [rad] the compliance offsets,
``ins_phase`` (:data:`PHASES`), ``ins_attempt`` (1, 2, ...), ``ins_jam`` (1 on a step that detected a jam),
``ins_kappa`` (the guard's clock rate κ).
Events (``meta["insertion_events"]``): ``jam``, ``backoff``, ``reinsert``, ``reached`` (r ≤ seat_margin,
first time per attempt), ``gave_up``, each with t, attempt, r and f_a. telemetry/metrics.py derives
``insertion.attempts``, ``insertion.jams`` and ``docking.time_to_seat`` from telemetry alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from dockbench.planners.base import Planner, Reference, Segment
from dockbench.planners.quintic import quintic_blend, quintic_duration
from dockbench.sim.config import param
from dockbench.sim.errors import ScenarioError
from dockbench.sim.lie import so3_exp, so3_log

#: ``ins_phase`` codes: following the plan, backing off, re-inserting (then holding the goal), given up
PHASES = {"plan": 0, "backoff": 1, "reinsert": 2, "gave_up": 3}
#: golden angle [rad] of the spiral pattern
GOLDEN_ANGLE = math.pi * (3.0 - math.sqrt(5.0))
#: acceleration limit [m/s²] of the recovery's quintic segments
RECOVERY_ACCEL = 0.05
#: the supervisor's telemetry channels → unit
CHANNELS: dict[str, str] = {
    "ins_dp_x": "m", "ins_dp_y": "m", "ins_dp_z": "m",
    "ins_dth_x": "rad", "ins_dth_y": "rad", "ins_dth_z": "rad",
    "ins_phase": "", "ins_attempt": "", "ins_jam": "", "ins_kappa": "",
}


@dataclass(frozen=True)
class ComplianceConfig:
    enabled: bool = param(False, doc="shape the reference with the measured wrench (an RCC at the tip)")
    lateral_gain: float = param(
        0.02, unit="m/(N·s)", ge=0.0, le=1.0, doc="G_t: reference speed per newton of lateral force"
    )
    tilt_gain: float = param(
        0.5, unit="rad/(N·m·s)", ge=0.0, le=100.0, doc="G_r: reference rate per N·m of moment about the lateral axes"
    )
    yaw_gain: float = param(
        0.0, unit="rad/(N·m·s)", ge=0.0, le=100.0, doc="G_y: reference rate per N·m of moment about the tool axis"
    )
    axial_force: float = param(
        0.0, unit="N", ge=0.0, le=1000.0,
        doc="F_d: push the reference along the tool axis until the contact pushes back with this (0 = off)",
    )
    axial_gain: float = param(
        0.01, unit="m/(N·s)", ge=0.0, le=1.0, doc="G_a: reference speed along the tool axis per newton of F_d − f_p"
    )
    max_axial_offset: float = param(0.01, unit="m", gt=0.0, le=1.0, doc="clip of the axial offset |aᵀδp|")
    contact_force: float = param(0.5, unit="N", gt=0.0, le=1000.0, doc="f_on: the offsets move only while ‖f‖ ≥ this")
    max_lead: float = param(
        0.002, unit="m", gt=0.0, le=1.0,
        doc="anti-windup: the lateral offset stops growing once the reference leads the tip laterally by this",
    )
    max_axial_lead: float = param(
        0.015, unit="m", gt=0.0, le=1.0,
        doc="anti-windup of the push: the axial offset stops growing once the reference leads the tip along the tool "
        "axis by this (the spring load that would throw the probe forward when the contact gives way: ½ F_d²/K)",
    )
    max_push_force: float = param(
        0.0, unit="N", ge=0.0, le=1000.0,
        doc="F_max: the push and the guarded plan work in force: after the first contact the reference's axial lead "
        "over the tip is bounded by F_max / K_a(t), K_a the law's current stiffness along the tool axis "
        "(law_axial_stiffness), and taken back to it when K_a rises; max_axial_lead stays the safety bound "
        "(0 = off: the push's lead bound is max_axial_lead alone and the plan's lead is not bounded)",
    )
    release_speed: float = param(
        0.0, unit="m/s", ge=0.0, le=1.0,
        doc="with max_push_force: while the tip runs into the target faster than this, the axial lead is held at "
        "zero (a stuck tip that breaks free is not driven on by the spring it stored; 0 = off)",
    )
    free_push_speed: float = param(
        0.0, unit="m/s", ge=0.0, le=1.0,
        doc="v_free: where the push acts (the plan ended, or a re-insertion's segment ended) but the tool is out of "
        "contact (‖f̄‖ < contact_force), the reference advances along the tool axis at this speed while its axial "
        "offset aᵀδp is below free_push_depth: a tool the believed depth left short and free is carried on until "
        "the contact pushes back (0 = off: out of contact the offsets are held)",
    )
    free_push_depth: float = param(
        0.005, unit="m", gt=0.0, le=1.0,
        doc="d_free: the free advance's bound, the axial offset past the plan's end (≤ max_axial_offset)",
    )
    max_lead_deg: float = param(
        2.0, unit="deg", gt=0.0, le=180.0,
        doc="anti-windup: the rotation offset stops growing once the reference orientation leads the tool's by this",
    )
    filter_time: float = param(
        0.02, unit="s", ge=0.0, le=10.0,
        doc="τ_f of the first-order low-pass on f and n before the admittance uses them (0 = off)",
    )
    max_speed: float = param(0.01, unit="m/s", gt=0.0, le=1.0, doc="saturation of ‖δṗ‖")
    max_rate_deg: float = param(10.0, unit="deg/s", gt=0.0, le=360.0, doc="saturation of ‖δθ̇‖")
    max_offset: float = param(0.01, unit="m", gt=0.0, le=1.0, doc="p_max: clip of ‖δp‖")
    max_rotation_deg: float = param(10.0, unit="deg", gt=0.0, le=180.0, doc="θ_max: clip of ‖δθ‖")


@dataclass(frozen=True)
class GuardConfig:
    enabled: bool = param(False, doc="slow the plan down once the tool touches the target (a guarded insertion)")
    speed_scale: float = param(0.3, gt=0.0, le=1.0, doc="κ_c: the plan's clock rate after the first contact")
    ramp_time: float = param(0.1, unit="s", gt=0.0, le=100.0, doc="time constant τ_κ with which κ follows its target")
    force_slow: float = param(
        0.0, unit="N", ge=0.0, le=1000.0, doc="F_1: above this push-back the clock slows further (0 = off)"
    )
    force_stop: float = param(0.0, unit="N", ge=0.0, le=1000.0, doc="F_2 > F_1: at this push-back the clock stops")
    contact_force: float = param(0.5, unit="N", gt=0.0, le=1000.0, doc="‖f‖ that counts as the first contact")
    slow_depth: float = param(
        0.0, unit="m", ge=0.0, le=1.0,
        doc="also slow down once the tip is within this distance of the believed goal along the approach axis "
        "(0 = on contact only)",
    )


@dataclass(frozen=True)
class JamConfig:
    enabled: bool = param(False, doc="detect stalled insertions (needed by the recovery)")
    force: float = param(4.0, unit="N", gt=0.0, le=1000.0, doc="axial force f_a at or above which a stall counts")
    progress: float = param(
        0.0005, unit="m", gt=0.0, le=1.0, doc="insertion progress over the dwell below which it is a jam"
    )
    dwell: float = param(0.4, unit="s", gt=0.0, le=100.0, doc="how long the stall must last")
    seat_margin: float = param(
        0.004, unit="m", gt=0.0, le=1.0,
        doc="disarmed within this remaining depth of the believed goal (seated, not jammed)",
    )


@dataclass(frozen=True)
class RecoveryConfig:
    strategy: Literal["none", "retry"] = param("none", doc="none: only record jams; retry: back off and re-insert")
    max_attempts: int = param(4, ge=1, le=100, doc="insertion attempts in total, the first included")
    backoff: float = param(0.012, unit="m", gt=0.0, le=1.0, doc="retreat along the approach axis")
    backoff_from: Literal["reference", "tip"] = param(
        "reference",
        doc="what the backoff is measured from: reference (the reference without the compliance's offset retreats "
        "by backoff, the offset kept on top: with a push, backoff must exceed max_axial_lead or the tool may never "
        "lift off) or tip (the compliance's position offset is folded into the retreat, which ends backoff behind "
        "the tip along the approach axis, at the belief plus the next search offset: the contact is released "
        "whatever the push's lead, and each attempt starts from its search offset alone)",
    )
    speed: float = param(0.02, unit="m/s", gt=0.0, le=1.0, doc="peak speed of the backoff and re-insertion")
    pattern: Literal["wrench", "spiral"] = param(
        "wrench", doc="search offsets: wrench (a step where the jam's wrench points) or spiral (blind)"
    )
    lateral_step: float = param(0.001, unit="m", ge=0.0, le=0.1, doc="lateral search step")
    tilt_step_deg: float = param(1.5, unit="deg", ge=0.0, le=45.0, doc="tilt search step about the lateral axes")
    yaw_step_deg: float = param(0.0, unit="deg", ge=0.0, le=180.0, doc="yaw search step about the tool axis")


@dataclass(frozen=True)
class CentringConfig:
    enabled: bool = param(
        False,
        doc="after the seat, search the bore's play on both sides and put the tool on its axis: a rotation about the "
        "tip (the shaft's upper end between the entrance's edges), then about the entrance (the tip between the "
        "walls), each about two axes ⊥ the tool axis (docs/theory/insertion.md §2)",
    )
    settle_speed: float = param(
        0.001, unit="m/s", gt=0.0, le=1.0,
        doc="the search starts once the plan has ended and the tip's axial speed stayed below this for settle_time",
    )
    settle_time: float = param(0.5, unit="s", gt=0.0, le=100.0, doc="how long the tip must stay below settle_speed")
    lift: float = param(
        0.0005, unit="m", ge=0.0, le=0.05,
        doc="the tip is held this far back from where it settled during the search (off the seat plate: no friction "
        "at the tip), then pushed home",
    )
    lift_gain: float = param(5.0, unit="1/s", gt=0.0, le=1000.0, doc="k_l: reference speed per metre of lift error")
    rate_deg: float = param(1.0, unit="deg/s", gt=0.0, le=90.0, doc="ω_s: sweep rate of the reference")
    range_deg: float = param(
        2.5, unit="deg", gt=0.0, le=45.0,
        doc="the bound in angle: a sweep that finds no edge within this of its start stops there",
    )
    moment: float = param(
        0.05, unit="N·m", gt=0.0, le=100.0,
        doc="n_th: an edge is where the contact's moment about the pivot, against the sweep, reaches this",
    )
    max_force: float = param(
        5.0, unit="N", gt=0.0, le=1000.0, doc="the bound in force: a sweep also stops where ‖f̄‖ reaches this"
    )
    pivot_length: float = param(
        0.0, unit="m", ge=0.0, le=1.0,
        doc="ℓ_p: the second stage turns about the point this far behind the tip along the tool axis (the bore's "
        "entrance: bore length − nose radius); 0 = tilt about the tip only",
    )
    gain: float = param(4.0, unit="1/s", gt=0.0, le=1000.0, doc="g: the servo's rate per radian to the midpoint")
    hold_time: float = param(
        0.5, unit="s", gt=0.0, le=100.0,
        doc="the servo holds each midpoint at least this long, and until |φ − φ_m| ≤ tolerance_deg (at most "
        "2 range_deg / rate_deg longer)",
    )
    tolerance_deg: float = param(0.05, unit="deg", gt=0.0, le=10.0, doc="the servo's arrival tolerance")


@dataclass(frozen=True)
class InsertionConfig:
    guard: GuardConfig = field(default_factory=GuardConfig)
    compliance: ComplianceConfig = field(default_factory=ComplianceConfig)
    jam: JamConfig = field(default_factory=JamConfig)
    recovery: RecoveryConfig = field(default_factory=RecoveryConfig)
    centring: CentringConfig = field(default_factory=CentringConfig)

    @property
    def active(self) -> bool:
        """Whether any part is on (else the planner is used unwrapped)."""
        return self.guard.enabled or self.compliance.enabled or self.jam.enabled

    def validate(self) -> None:
        g = self.guard
        if g.force_stop > 0.0 and not g.force_stop > g.force_slow:
            raise ScenarioError(
                f"must exceed guard.force_slow = {g.force_slow} N, got {g.force_stop}", key="guard.force_stop"
            )
        if self.recovery.strategy == "retry" and not self.jam.enabled:
            raise ScenarioError("strategy retry needs insertion.jam.enabled: true (a recovery starts at a jam)",
                                key="recovery.strategy")
        cc, rc = self.compliance, self.recovery
        if cc.free_push_speed > 0.0 and not (cc.enabled and cc.axial_force > 0.0):
            raise ScenarioError("free_push_speed > 0 needs insertion.compliance.enabled: true with axial_force > 0 "
                                "(the free advance extends the push)", key="compliance.free_push_speed")
        if cc.free_push_speed > 0.0 and cc.free_push_depth > cc.max_axial_offset:
            raise ScenarioError(f"must be <= compliance.max_axial_offset = {cc.max_axial_offset} m, got "
                                f"{cc.free_push_depth}", key="compliance.free_push_depth")
        if (rc.strategy == "retry" and rc.backoff_from == "reference" and cc.enabled and cc.axial_force > 0.0
                and rc.backoff <= cc.max_axial_lead):
            raise ScenarioError(
                f"must exceed compliance.max_axial_lead = {cc.max_axial_lead} m with backoff_from: reference (the "
                f"push's axial lead stays on top of the retreat, so a shorter backoff may never lift the tool off), "
                f"got {rc.backoff}; allowed: backoff > {cc.max_axial_lead}, or recovery.backoff_from: tip",
                key="recovery.backoff")
        if self.centring.enabled and not (self.compliance.enabled and self.compliance.axial_force > 0.0):
            raise ScenarioError("centring needs insertion.compliance.enabled: true with axial_force > 0 (the push "
                                "that seats the probe before and after the search)", key="centring.enabled")


def law_axial_stiffness(law: Any, axis: np.ndarray, R_world_ee: np.ndarray) -> float | None:
    """The control law's current translational stiffness along the world unit vector ``axis`` [N/m], aᵀ K a (the
    spring force per metre of reference lead along a at rest), as of its last step: the law's own
    ``axial_stiffness(axis, R_world_ee)`` (Khatib: k; HQP: Σ_i K_r,i a_i², K_0 before the first step; SE(3): bᵀ K_vv b,
    b = Rᵀ a; controllers/*.py), None for a law without one (the supervisor then keeps the length bound).

    A law with a force set-point fades its axial stiffness by s(t) (controllers/force_control.py); with one
    configured the built-in laws report none (None)."""
    own = getattr(law, "axial_stiffness", None)
    return None if own is None else own(axis, R_world_ee)


def _clip_norm(x: list[float], limit: float) -> list[float]:
    n = math.sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2])
    if n > limit:
        s = limit / n
        return [x[0] * s, x[1] * s, x[2] * s]
    return x


class InsertionSupervisor(Planner):
    """The scenario's planner with the outer compliance loop, jam detection and recovery (module
    docstring). :meth:`bind` (called by the loop before the first step) hands it the wrench state and the
    snapshot it reads; :attr:`sources` are the views the loop records as the ``ins_*`` channels."""

    def __init__(self, inner: Planner, config: InsertionConfig, control_period: float):
        self.inner = inner
        self.config = config
        self.ctx = inner.ctx
        self.dt = float(control_period)
        self.axis = np.array(inner.ctx.approach_axis_world, dtype=float)
        self.axis /= np.linalg.norm(self.axis)
        self.p_goal = np.array(inner.ctx.T_world_goal[:3, 3], dtype=float)
        self.R_goal = np.array(inner.ctx.T_world_goal[:3, :3], dtype=float)
        self.buf = np.zeros(len(CHANNELS))  # [δp, δθ, phase, attempt, jam]: the telemetry sources
        self.sources = {name: self.buf[i : i + 1] for i, name in enumerate(CHANNELS)}
        self._wrench = None
        self._snap = None
        self._law = None  # the control law (Controller.axial_stiffness), attached by the law itself
        self.events: list[dict[str, Any]] = []
        self.reset()

    # ------------------------------------------------------------------ planner protocol
    @property
    def duration(self) -> float:
        return self.inner.duration

    @property
    def segments(self) -> tuple[Segment, ...]:
        return self.inner.segments

    @property
    def reserve_time(self) -> float:
        """Extra run time [s]: the guard's slower clock, the time to give back an axial offset the push's lead
        bound held back (``max_axial_offset`` / ``max_speed``), the free advance over its bound once
        (``free_push_depth`` / ``free_push_speed``) and, for the recovery, per retry a dwell, a backoff (with
        ``backoff_from: tip`` lengthened by ``max_axial_lead``, the lead it may give back) and a re-insertion."""
        rc, gc = self.config.recovery, self.config.guard
        out = self.inner.duration * (1.0 / gc.speed_scale - 1.0) + gc.ramp_time if gc.enabled else 0.0
        cc = self.config.compliance
        if cc.enabled and cc.max_push_force > 0.0:  # the lead bound may hold the plan back by up to the axial clip,
            out += cc.max_axial_offset / cc.max_speed  # given back at max_speed
        ce = self.config.centring
        if ce.enabled:
            out += ce.settle_time + self.centring_reserve() + 1.0 + ce.lift / cc.max_speed
        if cc.enabled and cc.free_push_speed > 0.0:  # the free advance over its whole bound, once
            out += cc.free_push_depth / cc.free_push_speed
        if rc.strategy == "retry":
            extra = cc.max_axial_lead if rc.backoff_from == "tip" else 0.0  # the lead given back as well
            t_back = quintic_duration(rc.backoff + extra, rc.speed, RECOVERY_ACCEL)
            t_in = quintic_duration(rc.backoff + extra + 0.03, rc.speed, RECOVERY_ACCEL)
            out += (rc.max_attempts - 1) * (self.config.jam.dwell + t_back + t_in)
        return out

    def centring_reserve(self) -> float:
        """The longest the search can take [s]: per stage a sweep of ``range_deg`` out, one of 2 ``range_deg``
        back, and ``hold_time`` plus 2 ``range_deg`` / ``rate_deg`` at the midpoint; two stages about the tip and,
        with ``pivot_length`` > 0, two about the entrance."""
        ce = self.config.centring
        return len(self._centre_stages()) * (5.0 * ce.range_deg / ce.rate_deg + ce.hold_time)

    def _centre_stages(self) -> tuple[tuple[int, float], ...]:
        """(axis index 0/1, pivot length) of each stage of the search."""
        lp = self.config.centring.pivot_length
        tip = ((0, 0.0), (1, 0.0))
        return tip + ((0, lp), (1, lp)) if lp > 0.0 else tip

    def attach_law(self, law: Any) -> None:
        """Called by the control law built on this planner (controllers/base.py): the push reads its stiffness."""
        self._law = law

    def axial_lead_bound(self, a: np.ndarray, R: np.ndarray) -> float:
        """L(t) = min(F_max / K_a(t), ``max_axial_lead``) with F_max > 0 and a law that reports K_a, else
        ``max_axial_lead``: the reference may lead the tip along a by at most the lead at which the law's spring
        pushes with F_max (docs/theory/insertion.md §3)."""
        cc = self.config.compliance
        if cc.max_push_force > 0.0 and self._law is not None:
            k = law_axial_stiffness(self._law, a, R)
            if k is not None and k > 0.0:
                return min(cc.max_push_force / k, cc.max_axial_lead)
        return cc.max_axial_lead

    def bind(self, wrench: Any, snap: Any) -> None:
        """Read ``wrench.ext_body`` and ``snap.T_world_ee`` every step; resets the state (a new run)."""
        self._wrench = wrench
        self._snap = snap
        self.reset()

    def reset(self) -> None:
        self.dp = [0.0, 0.0, 0.0]
        self.dth = [0.0, 0.0, 0.0]
        self.phase = "plan"
        self.attempt = 1
        self.events = []
        self._streak_step = -1  # step index where the current stall streak started (-1: none)
        self._streak_r = 0.0
        self._reached = False
        self._step = 0
        self._t = 0.0
        self._w_filt = [0.0] * 6
        self._tip_prev = None  # the tip's position at the previous step (its axial speed, release_speed)
        self.n_brake = 0  # steps on which the release brake held the lead at zero
        self.n_free = 0  # steps on which the free advance moved the reference (free_push_speed)
        self._seg_done = False  # the recovery's current segment has reached its end
        self.tau = 0.0  # the plan's clock (= t unless the guard slowed it down)
        self._t_last = 0.0
        self.kappa = 1.0
        self._t_prev_kappa = 0.0
        self._t_contact = -1.0  # time of the first contact (guard), -1: none yet
        # the search offset of the current attempt (lateral (3,), rotation vector (3,)) and the segment
        self.search_p = np.zeros(3)
        self.search_th = np.zeros(3)
        self._seg = None  # (kind, t0, T, p0, p1, th0, th1)
        # the two-sided search of the bore's play (centring): stage -1 waiting for the seat, 0.. the stages, then done
        self.centre_stage = -1
        self._centre_sub = 0  # +1: sweeping out, -1: sweeping back, 0: servo to the midpoint
        self._centre_t_settled = -1.0  # time since which the tip has been slow (-1: not slow)
        self._centre_tip_prev = None
        self._centre_a0 = None  # tool axis where the search started (world)
        self._centre_e = None  # (e1, e2): the search's rotation axes ⊥ a0
        self._centre_p_seat = None
        self._centre_psi = 0.0  # the reference's rotation in this stage [rad]
        self._centre_t0 = 0.0  # start of the servo
        self._centre_edges = [0.0, 0.0]  # φ at the + and − edges [rad]
        self._centre_bounded = [False, False]  # edge not found within range_deg (bounded) on that side
        self.centring_log: list[dict[str, Any]] = []
        self.buf[:] = 0.0
        self.buf[7] = 1.0
        self.buf[9] = 1.0

    # ------------------------------------------------------------------ the step
    def evaluate(self, t: float, out: Reference) -> None:
        self._t = t
        if self._snap is None:  # not bound (a planner query outside the loop): the plain plan
            self.inner.evaluate(t, out)
            return
        if self.phase == "plan":
            self._plan_reference(t, out)
        else:
            self._recovery_reference(t, out)
        c = self.config
        T = self._snap.T_world_ee
        R = T[:3, :3]
        wb = self._wrench.ext_body
        f_b, n_b = wb[:3], wb[3:]
        f = R @ f_b
        n = R @ n_b
        jam = False
        if c.jam.enabled and self.phase != "gave_up":
            jam = self._detect(T[:3, 3], f)
        if c.centring.enabled and self.phase == "plan":
            if self.centre_stage < 0:
                self._centre_wait(t, T[:3, 3])
            if 0 <= self.centre_stage <= len(self._centre_stages()):  # the stages, then the return
                self._centre(t, T, f, n, out)
            else:
                self._comply(R[:, 2], f, n, out, tilt=self.centre_stage < 0)
        elif c.compliance.enabled:
            self._comply(R[:, 2], f, n, out)
        self.buf[0:3] = self.dp
        self.buf[3:6] = self.dth
        self.buf[6] = PHASES[self.phase]
        self.buf[7] = self.attempt
        self.buf[8] = 1.0 if jam else 0.0
        self.buf[9] = self.kappa
        self._step += 1
        if jam:
            self._on_jam(t, out, f, n)

    def _plan_reference(self, t: float, out: Reference) -> None:
        """The inner plan at the plan clock τ. With the guard, τ̇ = κ: 1 until the first contact, then falling
        linearly to κ_c over ``ramp_time``; the reference's rates follow the chain rule,
        v = κ v_p(τ), a = κ² a_p(τ) + κ̇ v_p(τ) (and ω, α alike)."""
        gc = self.config.guard
        if not gc.enabled:
            self.tau = t
            self.inner.evaluate(t, out)
            return
        self.tau += self.kappa * (t - self._t_last)
        self._t_last = t
        if self._t_contact < 0.0:
            f0, f1, f2 = self._wrench.ext_body[:3].tolist()
            r = self.remaining(self._snap.T_world_ee[:3, 3])
            if math.sqrt(f0 * f0 + f1 * f1 + f2 * f2) >= gc.contact_force:
                self._t_contact = t
                self._event("contact", r, None)
            elif r <= gc.slow_depth:
                self._t_contact = t
                self._event("slow_zone", r, None)
        target = 1.0 if self._t_contact < 0.0 else gc.speed_scale
        if gc.force_stop > 0.0:  # force-limited progress: κ* falls from κ_c at F_1 to 0 at F_2
            fp = float(self._wrench.ext_body[:3] @ (self._snap.T_world_ee[:3, :3].T @ self.axis))  # fᵀa, push-back
            target *= min(max((gc.force_stop - fp) / (gc.force_stop - gc.force_slow), 0.0), 1.0)
        kdot = (target - self.kappa) / gc.ramp_time
        self.inner.evaluate(self.tau, out)
        k = self.kappa
        if k != 1.0 or kdot != 0.0:
            out.acc *= k * k
            out.acc += kdot * out.vel
            out.vel *= k
            out.alpha *= k * k
            out.alpha += kdot * out.omega
            out.omega *= k
        self.kappa = min(max(k + kdot * (t - self._t_prev_kappa), 0.0), 1.0) if t > self._t_prev_kappa else k
        self._t_prev_kappa = t

    def _comply(self, a: np.ndarray, f: np.ndarray, n: np.ndarray, out: Reference, tilt: bool = True) -> None:
        """The compliance of §3; ``tilt=False`` (after the centring search) keeps the push and the lateral
        admittance (which relieves a tip pressed on the wall by the law's lateral spring) but not the rotational
        one: the search put the tool on the bore's axis, and a friction moment while seating would lean it back."""
        cc = self.config.compliance
        f0, f1, f2 = f.tolist()
        n0, n1, n2 = n.tolist()
        if cc.filter_time > 0.0:
            f0, f1, f2, n0, n1, n2 = self._low_pass(f0, f1, f2, n0, n1, n2)
        if math.sqrt(f0 * f0 + f1 * f1 + f2 * f2) >= cc.contact_force:
            a0, a1, a2 = a.tolist()
            fa = a0 * f0 + a1 * f1 + a2 * f2
            na = a0 * n0 + a1 * n1 + a2 * n2
            g, gr, gy = cc.lateral_gain, *((cc.tilt_gain, cc.yaw_gain) if tilt else (0.0, 0.0))
            # the push (f_p = −aᵀf) only once the plan has ended or a re-insertion has begun: during the plan its
            # own motion inserts, and an offset run ahead of it would meet the next obstacle at speed; during a
            # backoff it would fight the retreat
            # with backoff_from: tip a retry is a fresh attempt: its re-insertion inserts, the push acts at its end
            # (_push_ended); otherwise the push acts during the whole re-insertion
            fresh = self.config.recovery.backoff_from == "tip"
            push = cc.axial_force > 0.0 and (self._push_ended() or (self.phase == "reinsert" and not fresh))
            ga = cc.axial_gain * (cc.axial_force + fa) if push else 0.0
            v = [g * (f0 - fa * a0), g * (f1 - fa * a1), g * (f2 - fa * a2)]
            w = _clip_norm(
                [
                    gr * (n0 - na * a0) + gy * na * a0,
                    gr * (n1 - na * a1) + gy * na * a1,
                    gr * (n2 - na * a2) + gy * na * a2,
                ],
                math.radians(cc.max_rate_deg),
            )
            dt = self.dt
            # anti-windup: an increment that would make the reference lead the tool by more than the bound (lateral
            # position, orientation) is dropped, so no spring load builds up behind a stuck contact to snap free
            T = self._snap.T_world_ee
            e_p = (out.pos - T[:3, 3]).tolist()  # the plan's own lead (before the offsets)
            e_r = so3_log(out.R @ T[:3, :3].T).tolist()
            v = self._unless_lead_grows(v, self.dp, e_p, cc.max_lead, (a0, a1, a2), dt)
            w = self._unless_lead_grows(w, self.dth, e_r, math.radians(cc.max_lead_deg), None, dt)
            if ga != 0.0:
                lead_max = self.axial_lead_bound(a, T[:3, :3])
                lead_ax = e_p[0] * a0 + e_p[1] * a1 + e_p[2] * a2 + self.dp[0] * a0 + self.dp[1] * a1 + self.dp[2] * a2
                new_ax = lead_ax + dt * ga
                if abs(new_ax) > lead_max and abs(new_ax) > abs(lead_ax):
                    ga = 0.0
            v = _clip_norm([v[0] + ga * a0, v[1] + ga * a1, v[2] + ga * a2], cc.max_speed)
            p0, p1, p2 = self.dp
            dp = [p0 + dt * v[0], p1 + dt * v[1], p2 + dt * v[2]]
            if cc.axial_force > 0.0:  # the axial part (along the tool axis) and the lateral part clipped apart
                ax = a0 * dp[0] + a1 * dp[1] + a2 * dp[2]
                lat = _clip_norm([dp[0] - ax * a0, dp[1] - ax * a1, dp[2] - ax * a2], cc.max_offset)
                ax = min(max(ax, -cc.max_axial_offset), cc.max_axial_offset)
                dp = [lat[0] + ax * a0, lat[1] + ax * a1, lat[2] + ax * a2]
            else:
                dp = _clip_norm(dp, cc.max_offset)
            r0, r1, r2 = self.dth
            dth = _clip_norm([r0 + dt * w[0], r1 + dt * w[1], r2 + dt * w[2]], math.radians(cc.max_rotation_deg))
            # the rates the offsets actually moved at (zero once a clip holds them)
            v = [(dp[0] - p0) / dt, (dp[1] - p1) / dt, (dp[2] - p2) / dt]
            w = [(dth[0] - r0) / dt, (dth[1] - r1) / dt, (dth[2] - r2) / dt]
            self.dp, self.dth = dp, dth
            out.vel += v
            out.omega += w
        elif cc.free_push_speed > 0.0 and self._push_ended():
            self._free_advance(a, out)
        if cc.max_push_force > 0.0:
            self._bound_lead(a, out)
        out.pos += self.dp
        if self.dth[0] or self.dth[1] or self.dth[2]:
            out.R[:] = so3_exp(np.array(self.dth)) @ out.R

    def _low_pass(self, f0: float, f1: float, f2: float, n0: float, n1: float, n2: float) -> list[float]:
        """One step of the wrench low-pass of §3 (filter time τ_f > 0): w̄ ← w̄ + k (w − w̄), k = T_c / (τ_f + T_c)
        (backward Euler of τ_f dw̄/dt = w − w̄), for the measured [f; n] (world axes, at the tip); returns w̄."""
        k = self.dt / (self.config.compliance.filter_time + self.dt)
        w0, w1, w2, w3, w4, w5 = self._w_filt
        self._w_filt = [w0 + k * (f0 - w0), w1 + k * (f1 - w1), w2 + k * (f2 - w2),
                        w3 + k * (n0 - w3), w4 + k * (n1 - w4), w5 + k * (n2 - w5)]
        return self._w_filt

    def _push_ended(self) -> bool:
        """Whether the motion the push completes has ended: the plan's clock past its duration, or the
        re-insertion's segment at its end (the free advance starts only then)."""
        if self.phase == "plan":
            return self.tau >= self.inner.duration
        return self.phase == "reinsert" and self._seg_done

    def _free_advance(self, a: np.ndarray, out: Reference) -> None:
        """The free advance (docs/theory/insertion.md §3): out of contact after the plan, the axial offset grows
        at v_free, δp ← δp + T_c v_free a, while aᵀδp < d_free (the last step clipped to d_free); the lateral part
        and the rotation offset are held."""
        cc = self.config.compliance
        dp = np.array(self.dp)
        off = float(dp @ a)
        step = min(cc.free_push_speed * self.dt, cc.free_push_depth - off)
        if step <= 0.0:
            return
        self.dp = (dp + step * a).tolist()
        self.n_free += 1
        out.vel += (step / self.dt) * a

    def _bound_lead(self, a: np.ndarray, out: Reference) -> None:
        """The push in force (docs/theory/insertion.md §3): after the first contact (or the plan's end) the
        reference's axial lead over the tip, λ = aᵀ(x_d + δp − x), is held at most L(t) (``axial_lead_bound``;
        0 while the tip runs into the target faster than ``release_speed``): an excess is taken out of the axial
        offset at once (down to −``max_axial_offset``; the reference then does not advance along a: the axial
        parts of its velocity and acceleration are zeroed), and an offset the bound held back (aᵀδp < 0) is given
        back at up to ``max_speed`` while λ < L(t)."""
        cc = self.config.compliance
        T = self._snap.T_world_ee
        tip = T[:3, 3]
        v_a = float((tip - self._tip_prev) @ a) / self.dt if self._tip_prev is not None else 0.0
        self._tip_prev = tip.copy()
        started = self.phase == "reinsert" or (
            self.phase == "plan" and (self._t_contact >= 0.0 or self.tau >= self.inner.duration)
        )
        if not started:
            return
        dp = np.array(self.dp)
        off = float(dp @ a)
        lam = float((out.pos - tip) @ a) + off
        L = self.axial_lead_bound(a, T[:3, :3])
        if cc.release_speed > 0.0 and v_a > cc.release_speed:
            L = 0.0
            self.n_brake += 1
        if lam > L:
            new = max(off - (lam - L), -cc.max_axial_offset)
        elif off < 0.0:
            new = off + min(L - lam, -off, cc.max_speed * self.dt)
        else:
            return
        self.dp = (dp + (new - off) * a).tolist()
        if new < off:  # held back: the reference does not advance along a
            out.vel -= float(out.vel @ a) * a
            out.acc -= float(out.acc @ a) * a

    # ------------------------------------------------------------------ centring (the two-sided search)
    def _centre_wait(self, t: float, tip: np.ndarray) -> None:
        """Start the search once the plan has ended and the tip's axial speed has stayed below ``settle_speed``
        for ``settle_time`` (the push has seated it, or it has stopped)."""
        ce = self.config.centring
        prev, self._centre_tip_prev = self._centre_tip_prev, tip.copy()
        if prev is None or self.tau < self.inner.duration:
            self._centre_t_settled = -1.0
            return
        a = self._snap.T_world_ee[:3, 2]
        if abs(float((tip - prev) @ a)) / self.dt >= ce.settle_speed:
            self._centre_t_settled = -1.0
            return
        if self._centre_t_settled < 0.0:
            self._centre_t_settled = t
        if t - self._centre_t_settled + 1e-12 < ce.settle_time:
            return
        a0 = a.copy()
        e1 = np.cross(a0, [1.0, 0.0, 0.0])
        if np.linalg.norm(e1) < 0.5:
            e1 = np.cross(a0, [0.0, 1.0, 0.0])
        e1 /= np.linalg.norm(e1)
        self._centre_a0, self._centre_e = a0, (e1, np.cross(a0, e1))
        self._centre_p_seat = tip.copy()
        self._centre_begin(0)
        self._event("centre_start", self.remaining(tip), None)

    def _centre_begin(self, stage: int) -> None:
        self.centre_stage = stage
        self._centre_sub = 1
        self._centre_psi = 0.0
        self._centre_edges = [0.0, 0.0]
        self._centre_bounded = [False, False]

    @staticmethod
    def centre_angle(a0: np.ndarray, e: np.ndarray, a: np.ndarray) -> float:
        """φ: the tool axis a's rotation from a0 about the unit axis e ⊥ a0, asin(eᵀ(a0 × a)) [rad]."""
        return math.asin(min(max(float(e @ np.cross(a0, a)), -1.0), 1.0))

    @staticmethod
    def pivot_moment(n: np.ndarray, f: np.ndarray, a0: np.ndarray, length: float) -> np.ndarray:
        """The contact's moment about the pivot q = tip − ℓ a0 (ℓ behind the tip on the tool axis):
        n_q = n + (tip − q) × f = n + ℓ a0 × f."""
        return n + length * np.cross(a0, f)

    def _centre(self, t: float, T: np.ndarray, f: np.ndarray, n: np.ndarray, out: Reference) -> None:
        """One step of the search (docs/theory/insertion.md §2): the tip held ``lift`` back from where it settled;
        the reference turned about the pivot q = tip − ℓ a0 about e at ±ω_s until the contact's moment about q
        opposes the turn with n_th (or ‖f̄‖ reaches ``max_force``, or the turn ``range_deg``): the edges φ_+, φ_−
        of the tool's angle φ about e; then φ is servoed to the midpoint (φ_+ + φ_−)/2 for ``hold_time``."""
        ce, cc = self.config.centring, self.config.compliance
        dt = self.dt
        if cc.filter_time > 0.0:  # the compliance's low-pass, kept running (§3, step 1)
            w = self._low_pass(*f.tolist(), *n.tolist())
            f, n = np.array(w[:3]), np.array(w[3:])
        stages = self._centre_stages()
        ret = self.centre_stage == len(stages)
        axis_i, ell = stages[min(self.centre_stage, len(stages) - 1)]
        a0, e = self._centre_a0, self._centre_e[axis_i]
        tip = T[:3, 3]
        phi = self.centre_angle(a0, e, T[:3, 2])
        m = float(self.pivot_moment(n, f, a0, ell) @ e)
        rate = math.radians(ce.rate_deg)
        sub = self._centre_sub
        if ret:
            dpsi = 0.0
        elif sub != 0:
            edge = sub * m <= -ce.moment or float(np.linalg.norm(f)) >= ce.max_force
            bounded = abs(self._centre_psi) >= math.radians(ce.range_deg) and sub * self._centre_psi > 0.0
            if edge or bounded:
                j = 0 if sub > 0 else 1
                self._centre_edges[j] = phi
                self._centre_bounded[j] = not edge
                if sub > 0:
                    self._centre_sub = -1
                else:
                    self._centre_sub = 0
                    self._centre_t0 = t
                dpsi = 0.0
            else:
                dpsi = sub * rate * dt
        else:
            mid = 0.5 * (self._centre_edges[0] + self._centre_edges[1])
            dpsi = min(max(ce.gain * (mid - phi), -rate), rate) * dt
            held = t - self._centre_t0 + 1e-12
            arrived = abs(mid - phi) <= math.radians(ce.tolerance_deg)
            if held >= ce.hold_time and (arrived or held >= ce.hold_time + 2.0 * ce.range_deg / ce.rate_deg):
                self.centring_log.append({
                    "stage": self.centre_stage, "pivot_length": ell, "axis": e.tolist(),
                    "edge_plus_deg": math.degrees(self._centre_edges[0]),
                    "edge_minus_deg": math.degrees(self._centre_edges[1]),
                    "bounded": list(self._centre_bounded), "final_deg": math.degrees(phi),
                })
                self._centre_begin(self.centre_stage + 1)  # the next stage, or the return
        self._centre_psi += dpsi
        # the lift: an integral servo of the tip's axial position to `lift` behind where it settled
        s_ax = float((tip - self._centre_p_seat) @ a0)
        v_ax = min(max(-ce.lift_gain * (s_ax + ce.lift), -cc.max_speed), cc.max_speed)
        if ret:  # the return: the tip servoed towards `lift` past where it settled until it is back within
            # 0.1 mm of that point or the target pushes back along the axis; then the push of §3 takes over
            v_ax = min(max(-ce.lift_gain * (s_ax - max(ce.lift, 1e-4)), -cc.max_speed), cc.max_speed)
            if s_ax >= -1e-4 or -float(f @ a0) >= cc.contact_force:
                self.centre_stage = len(self._centre_stages()) + 1
                self._event("centred", self.remaining(tip), None)
                v_ax = 0.0
        # the turn about q moves the reference's tip by dψ e × (tip − q) = dψ ℓ (e × a0)
        d_p = v_ax * dt * a0 + dpsi * ell * np.cross(e, a0)
        d_th = dpsi * e
        self.dp = (np.array(self.dp) + d_p).tolist()
        self.dth = (np.array(self.dth) + d_th).tolist()
        out.vel += d_p / dt
        out.omega += d_th / dt
        out.pos += self.dp
        out.R[:] = so3_exp(np.array(self.dth)) @ out.R

    @staticmethod
    def _unless_lead_grows(
        rate: list[float], offset: list[float], lead0: list[float], bound: float,
        axis: tuple[float, float, float] | None, dt: float,
    ) -> list[float]:
        """``rate``, or zeros when the step would leave the lead (``lead0`` + offset, projected ⊥ ``axis`` when
        given) above ``bound`` and larger than before."""
        # 3-vectors on Python floats, written out (this runs twice per step in contact)
        o0, o1, o2 = lead0[0] + offset[0], lead0[1] + offset[1], lead0[2] + offset[2]  # the lead now
        n0, n1, n2 = o0 + dt * rate[0], o1 + dt * rate[1], o2 + dt * rate[2]  # and after the step
        if axis is not None:
            a0, a1, a2 = axis
            ko, kn = o0 * a0 + o1 * a1 + o2 * a2, n0 * a0 + n1 * a1 + n2 * a2
            o0, o1, o2 = o0 - ko * a0, o1 - ko * a1, o2 - ko * a2
            n0, n1, n2 = n0 - kn * a0, n1 - kn * a1, n2 - kn * a2
        n_new = math.sqrt(n0 * n0 + n1 * n1 + n2 * n2)
        if n_new > bound and n_new > math.sqrt(o0 * o0 + o1 * o1 + o2 * o2):
            return [0.0, 0.0, 0.0]
        return rate

    # ------------------------------------------------------------------ jam detection
    def remaining(self, p_tip: np.ndarray) -> float:
        """Remaining depth r = (x − x_g)ᵀa [m] of the tip above the believed goal."""
        return float((p_tip - self.p_goal) @ self.axis)

    def _detect(self, p_tip: np.ndarray, f: np.ndarray) -> bool:
        jc = self.config.jam
        r = self.remaining(p_tip)
        fa = float(f @ self.axis)
        if r <= jc.seat_margin:
            if not self._reached:
                self._reached = True
                self._event("reached", r, fa)
            self._streak_step = -1
            return False
        if fa < jc.force or self.phase == "backoff":
            self._streak_step = -1
            return False
        i = self._step
        if self._streak_step < 0:
            self._streak_step, self._streak_r = i, r
            return False
        if (i - self._streak_step) * self.dt + 1e-12 < jc.dwell:
            return False
        if self._streak_r - r < jc.progress:
            self._streak_step = -1
            self._jam_r, self._jam_fa = r, fa
            return True
        self._streak_step, self._streak_r = i, r  # progress: a new dwell starts here
        return False

    def _event(self, kind: str, r: float | None, fa: float | None) -> None:
        self.events.append({"t": self._t, "event": kind, "attempt": self.attempt,
                            "remaining_depth": r, "axial_force": fa})

    # ------------------------------------------------------------------ recovery
    def _on_jam(self, t: float, out: Reference, f: np.ndarray, n: np.ndarray) -> None:
        self._event("jam", self._jam_r, self._jam_fa)
        rc = self.config.recovery
        if rc.strategy != "retry":
            return
        if self.attempt >= rc.max_attempts:
            self.phase = "gave_up"
            self._event("gave_up", self._jam_r, self._jam_fa)
            self._seg = ("hold", t, 0.0, out.pos - self.dp, out.pos - self.dp, self.search_th, self.search_th)
            return
        p_next, th_next = self._next_offset(f, n)
        if rc.backoff_from == "tip":
            # the position offset is folded into the segment's start (the reference is unchanged at this step);
            # the retreat gives back the reference's lead λ = (x − x_d')ᵀâ over the tip, then `backoff`, and the
            # offset's part ⊥ â: the next attempt starts from the belief plus its search offset alone
            ax = self.axis
            dp = np.array(self.dp)
            lam = max(float((self._snap.T_world_ee[:3, 3] - out.pos) @ ax), 0.0)
            p_ref = out.pos.copy()
            self.dp = [0.0, 0.0, 0.0]
            p_back = p_ref - (dp - float(dp @ ax) * ax) + (rc.backoff + lam) * ax + (p_next - self.search_p)
        else:
            p_ref = out.pos - np.array(self.dp)  # the reference without the compliance offset (kept on top)
            p_back = p_ref + rc.backoff * self.axis + (p_next - self.search_p)
        T = quintic_duration(float(np.linalg.norm(p_back - p_ref)), rc.speed, RECOVERY_ACCEL)
        self._seg = ("backoff", t, T, p_ref, p_back, self.search_th.copy(), th_next)
        self.search_p, self.search_th = p_next, th_next
        self.phase = "backoff"
        self._seg_done = False
        self.attempt += 1
        self._reached = False
        self._event("backoff", self._jam_r, self._jam_fa)

    def _next_offset(self, f: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rc = self.config.recovery
        a = self.axis
        k = self.attempt  # the retry about to start is number k (1, 2, ...)
        lat, tilt, yaw = rc.lateral_step, math.radians(rc.tilt_step_deg), math.radians(rc.yaw_step_deg)
        if rc.pattern == "wrench":
            f_l = f - (f @ a) * a
            n_l = n - (n @ a) * a
            dp = lat * f_l / max(np.linalg.norm(f_l), 1e-9) if np.linalg.norm(f_l) > 1e-6 else np.zeros(3)
            dth = tilt * n_l / max(np.linalg.norm(n_l), 1e-9) if np.linalg.norm(n_l) > 1e-9 else np.zeros(3)
            dth = dth + yaw * math.copysign(1.0, float(n @ a)) * a
            return self.search_p + dp, self.search_th + dth
        # spiral: lateral and tilt on golden-angle spirals in the plane ⊥ a, yaw alternating
        e1 = np.cross(a, [1.0, 0.0, 0.0])
        if np.linalg.norm(e1) < 1e-6:
            e1 = np.cross(a, [0.0, 1.0, 0.0])
        e1 /= np.linalg.norm(e1)
        e2 = np.cross(a, e1)
        phi = k * GOLDEN_ANGLE
        rad = math.sqrt(k)
        p = lat * rad * (math.cos(phi) * e1 + math.sin(phi) * e2)
        th = tilt * rad * (-math.sin(phi) * e1 + math.cos(phi) * e2)
        th = th + yaw * (1 if k % 2 else -1) * math.ceil(k / 2) * a
        return p, th

    def _recovery_reference(self, t: float, out: Reference) -> None:
        kind, t0, T, p0, p1, th0, th1 = self._seg
        u = 1.0 if T <= 0.0 else (t - t0) / T
        s, ds, dds = quintic_blend(u)
        d = p1 - p0
        out.pos[:] = p0 + s * d
        if T > 0.0 and 0.0 < u < 1.0:
            out.vel[:] = (ds / T) * d
            out.acc[:] = (dds / (T * T)) * d
        else:
            out.vel[:] = 0.0
            out.acc[:] = 0.0
        th = th0 + s * (th1 - th0)
        out.R[:] = so3_exp(th) @ self.R_goal
        # ω of exp((θ0 + s Δθ)^): the exact left Jacobian is not needed for the small search rotations,
        # whose rate is fed forward as ṡ Δθ (the impedance corrects the second-order remainder)
        out.omega[:] = (ds / T) * (th1 - th0) if T > 0.0 and 0.0 < u < 1.0 else 0.0
        out.alpha[:] = 0.0
        self._seg_done = u >= 1.0
        if u >= 1.0 and kind == "backoff":
            goal = self.p_goal + self.search_p
            T_in = quintic_duration(float(np.linalg.norm(goal - p1)), self.config.recovery.speed, RECOVERY_ACCEL)
            self._seg = ("reinsert", t, T_in, p1.copy(), goal, th1, th1)
            self.phase = "reinsert"
            self._seg_done = False
            self._event("reinsert", None, None)

    def summary(self) -> dict[str, Any]:
        """Run-level record for meta.json / summary.json."""
        out = {
            "attempts": self.attempt,
            "jams": sum(1 for e in self.events if e["event"] == "jam"),
            "gave_up": self.phase == "gave_up",
            "release_brake_steps": self.n_brake,
            "final_offset": {"dp": list(self.dp), "dth": list(self.dth)},
            "search_offset": {"dp": self.search_p.tolist(), "dth": self.search_th.tolist()},
        }
        if self.config.compliance.free_push_speed > 0.0:
            out["free_advance_steps"] = self.n_free
        if self.config.centring.enabled:
            out["centring"] = self.centring_log
        return out
