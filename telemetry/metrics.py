"""Run metrics in three layers (docs/metrics.md, after Ren & Shan Table 10), from telemetry alone.

Inputs: the channels of :mod:`telemetry.log` and the run's ``meta`` (target pose, planner segments,
joint limits). :func:`metrics_from_run` computes them from a run folder, :func:`compute_metrics` from
in-memory channels (the control loop calls it at the end of a run). docs/metrics.md is the reference.

Tracking (e = position error ``ee_pos − ee_pos_des`` [m], θ = angle of ``R_des Rᵀ`` [deg]):

* over the planned motion (0 ≤ t ≤ planner_duration): RMS √(mean ‖e‖²), peak max ‖e‖, and the same
  for θ;
* per planner segment k (``meta["segments"]``, the half-open interval t0 ≤ t < t1; the segment that
  ends last also includes its end point): RMS / peak of ‖e‖ and θ; ``tracking.max_segment_*`` is the
  worst segment.

Contact (from both the F/T pipeline, suffix ``_ft``, and the contact truth, suffix ``_truth``). The
mating axis a is +z of the TRUE target frame D (+z out of the mouth); with no target, world +z.

* axial force  f_a = fᵀa of the env-on-tool force in world axes (positive when the target pushes the
  tool back out); peak = max |f_a|, steady = mean f_a over the final window;
* lateral force ‖f − f_a a‖, steady = mean over the final window;
* peak force ‖f‖; peak wrench norm ‖[f; n]‖ of the body wrench (EE axes, about the EE origin; mixed
  units N and N·m, as in Ren & Shan);
* peak axial moment max |nᵀ a| with n the body moment about the EE origin and a in EE axes;
* ``contact.ft_truth_rms_diff`` = RMS ‖f_ft − f_truth‖ (the tool's inertial load in dynamic contact).
* chatter (truth force, per control step; :func:`contact_states`, :func:`force_spike_count`,
  :func:`on_off_toggle_count`, :func:`release_count`): the tool is in contact from a step with
  ‖f‖ ≥ :data:`CONTACT_ON` = 0.5 N until one with ‖f‖ < :data:`CONTACT_OFF` = 0.05 N (hysteresis).
  A one-step force spike is a step k whose axial force differs from BOTH neighbours by more than
  :data:`SPIKE_THRESHOLD` = 0.5 N in the same direction while both neighbours are in contact (an up or down
  excursion of a single step: the signature of a feedforward that flips sign, or of a period-2
  limit cycle); ``contact.force_spikes_{truth,ft}`` counts them. ``contact.on_off_toggles_truth`` counts
  the steps after the first contact whose contact state differs from both neighbours (a contact made or
  lost for a single step: the force switching fully on and off every second period), and
  ``contact.releases_truth`` every loss of contact after the first one (a rattle). The axial ripple is
  max − min of the axial force over the final window. ``contact.steady_force_spikes_truth`` and
  ``contact.steady_on_off_toggles_truth`` count the same over the final window only, the tool at rest in
  contact: a limit cycle of the closed loop (a feedforward flipping sign at rest, a delayed force feedback
  with loop gain near 1) persists there, the plant's stick-slip rattle, which needs sliding, does not; they
  converge in the step where the whole-run counts do not (docs/theory/force_control.md, "What is left").
  ``contact.max_spike_share_truth`` [%] is the largest share of spike steps in any 0.1 s window
  (:data:`SPIKE_SHARE_WINDOW`): a period-2 cycle of the loop makes nearly every step a spike (a transient one
  too, before the tool comes to rest), the plant's rattle at most 37 % in the shipped FR3 dockings down to dt/8.

Safety: joint position use max |q − q_mid| / (½ range) [%], velocity use max |q̇| / q̇_max [%], the
minimum manipulability √det(J Jᵀ), the saturation ratio = share of steps with any joint torque
clipped [%], and the largest such share over any 0.25 s window [%] (the instability detector's
signal, telemetry.gates). Joints with an infinite range or velocity limit count 0 %.

Hand (only when the run has the G20 hand's ``hand_*`` channels): :func:`hand.effector.hand_metrics`.

Docking (only for mating targets, :data:`MATING_TARGETS`; tip p and tool axis z_tool = EE +z), means
over the final ``window`` seconds:

* depth   = −z of the tip in D [m] (the mouth is z = 0);
* seat error = seat depth − depth [m], the seat depth (mouth → seat) from the target geometry
  (``meta["target_depth_total"]``); the seat gate (telemetry.gates) holds it within ±1 mm;
* lateral = √(x² + y²) of the tip in D [m];
* tilt    = ∠(z_tool, −z_D) [deg].

"steady" and docking values use the last ``window`` = 1 s of the run (t_end − window < t ≤ t_end).

A moving target (``target.mount`` floating or compliant, sim/mounts.py) records its pose (``target_pos``,
``target_quat``): the docking layer and the axial/lateral split then use the target frame D(t) of each
sample instead of the configured pose.

Orbit (runs with a free-floating base or a moving target, the channels of sim/orbit.py):

* base attitude disturbance = angle of R_base(0)ᵀ R_base(t) [deg]: peak over the run, mean over the final
  window; base drift = ‖p_base − p_base(0)‖ [m], mean over the final window;
* target speed ‖v‖ of its centre of mass [m/s] and rate ‖ω‖ [deg/s] after seating (final window means);
* momentum exchanged at contact = ‖P_target(end) − P_target(t_c⁻)‖ [N·s] and the same for its angular
  momentum about its own centre of mass [N·m·s], t_c⁻ the last sample before the first tool contact (0
  without contact);
* for an ISOLATED system (free-floating base or no robot base on the world, and a floating target or
  none): momentum drift = max_t max(‖P(t) − P(0)‖ / S_P, ‖L(t) − L(0)‖ / S_L) with S_P, S_L the largest
  Σ of the parts' momentum magnitudes over the run (``momentum_abs``: the momentum the parts exchange),
  and the centre-of-mass line deviation max_t ‖C(t) − C(0) − P(0) t / m‖ [m] (m the system mass).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from dockbench.telemetry.gates import SEAT_TOLERANCE, window_share

#: metric name → (unit, meaning). Gate specs are checked against these names at scenario load.
METRICS: dict[str, tuple[str, str]] = {
    "tracking.pos_rms": ("m", "EE position error RMS over the planned motion"),
    "tracking.pos_peak": ("m", "EE position error peak over the planned motion"),
    "tracking.rot_rms_deg": ("deg", "EE orientation error RMS over the planned motion"),
    "tracking.rot_peak_deg": ("deg", "EE orientation error peak over the planned motion"),
    "tracking.final_pos_error": ("m", "EE position error, mean over the final window"),
    "tracking.max_segment_pos_rms": ("m", "worst per-segment position RMS"),
    "tracking.max_segment_pos_peak": ("m", "worst per-segment position peak"),
    "tracking.max_segment_rot_rms_deg": ("deg", "worst per-segment orientation RMS"),
    "tracking.max_segment_rot_peak_deg": ("deg", "worst per-segment orientation peak"),
    "contact.peak_force_truth": ("N", "peak |f| of the contact truth wrench"),
    "contact.peak_force_ft": ("N", "peak |f| of the F/T wrench"),
    "contact.peak_wrench_norm_truth": ("N|N·m", "peak ‖[f; n]‖ of the truth wrench (about the EE)"),
    "contact.peak_wrench_norm_ft": ("N|N·m", "peak ‖[f; n]‖ of the F/T wrench (about the EE)"),
    "contact.peak_axial_force_truth": ("N", "peak |axial contact force| (truth)"),
    "contact.peak_axial_force_ft": ("N", "peak |axial contact force| (F/T)"),
    "contact.steady_axial_force_truth": ("N", "mean axial force over the window (truth)"),
    "contact.steady_axial_force_ft": ("N", "mean axial force over the window (F/T)"),
    "contact.steady_lateral_force_truth": ("N", "mean lateral force magnitude over the window (truth)"),
    "contact.steady_lateral_force_ft": ("N", "mean lateral force magnitude over the window (F/T)"),
    "contact.peak_axial_moment_truth": ("N·m", "peak |moment about the mating axis| at the EE (truth)"),
    "contact.peak_axial_moment_ft": ("N·m", "peak |moment about the mating axis| at the EE (F/T)"),
    "contact.max_contacts": ("", "largest number of simultaneous tool contacts"),
    "contact.impulse_truth": ("N·s", "contact impulse ∫‖f‖ dt of the truth force over the run"),
    "contact.mean_force_truth": ("N", "mean ‖f‖ of the truth force over the steps in contact (‖f‖ ≥ 0.5 N)"),
    "contact.ft_truth_rms_diff": ("N", "RMS of ‖f_ft − f_truth‖ over the run"),
    "contact.force_spikes_truth": ("", "one-step axial force spikes (> 0.5 N to both neighbours) in contact (truth)"),
    "contact.force_spikes_ft": ("", "one-step axial force spikes (> 0.5 N to both neighbours) in contact (F/T)"),
    "contact.on_off_toggles_truth": (
        "", "steps after the first contact whose contact state differs from both neighbours"
    ),
    "contact.releases_truth": ("", "losses of contact after the first contact (‖f‖ falls below 0.05 N)"),
    "contact.max_spike_share_truth": (
        "%", "largest share of one-step axial force spikes among the steps of any 0.1 s window (truth)"
    ),
    "contact.steady_force_spikes_truth": (
        "", "one-step axial force spikes in the final window (at rest in contact: a limit cycle of the loop)"
    ),
    "contact.steady_on_off_toggles_truth": (
        "", "single-step contact toggles in the final window (at rest in contact: a limit cycle of the loop)"
    ),
    "contact.axial_force_ripple_truth": ("N", "max − min of the axial force over the final window (truth)"),
    "controller.qp_share": ("%", "share of control steps on which the HQP solved its QPs (closed form infeasible)"),
    "safety.joint_pos_use": ("%", "max |q − mid| / half-range over joints and time"),
    "safety.joint_vel_use": ("%", "max |q̇| / q̇_max over joints and time"),
    "safety.min_manipulability": ("", "minimum sqrt(det(J Jᵀ))"),
    "safety.saturation_ratio": ("%", "share of steps with any torque clipped"),
    "safety.max_saturation_window": ("%", "largest share of torque-clipped steps in any 0.25 s window"),
    "docking.depth": ("m", "insertion depth of the tip below the mouth (window mean)"),
    "docking.seat_error": ("m", "seat depth (from the target geometry) minus docking.depth; > 0: short of the seat"),
    "docking.lateral": ("m", "tip distance from the target axis (window mean)"),
    "docking.tilt_deg": ("deg", "tool-axis tilt from the mating axis (window mean)"),
    "docking.phase_deg": (
        "deg", "keyed target: absolute mating phase error (probe yaw from the keys, wrapped to ±180°/N; window mean)"
    ),
    "docking.seat_height_fraction": (
        "", "docking.seat_error / seat depth: the tip's height above the seat as a share of the hole's depth "
        "(Factory's peg-insert success: ≤ 0.04)"
    ),
    "docking.time_to_seat": (
        "s", "first time from which the tip stays within the seat tolerance of the seat to the end (inf: not seated)"
    ),
    "insertion.attempts": ("", "insertion attempts (1 + the recovery's retries; insertion supervisor)"),
    "insertion.jams": ("", "stalled insertions the jam detector found (insertion supervisor)"),
    "insertion.jammed": ("", "1 if the jam detector found a stalled insertion in the run, else 0 (the jam flag)"),
    "orbit.base_attitude_peak_deg": ("deg", "peak rotation of the free-floating base from its initial attitude"),
    "orbit.base_attitude_final_deg": ("deg", "base rotation from its initial attitude, mean over the final window"),
    "orbit.base_drift": ("m", "base origin displacement from its initial position, mean over the final window"),
    "orbit.base_drift_peak": ("m", "peak base origin displacement from its initial position"),
    "orbit.target_speed_after_seating": ("m/s", "moving target: centre-of-mass speed, mean over the final window"),
    "orbit.target_rate_after_seating_deg_s": ("deg/s", "moving target: angular rate, mean over the final window"),
    "orbit.momentum_exchanged": ("N·s", "‖ΔP‖ of the target from before the first tool contact to the end"),
    "orbit.angular_momentum_exchanged": ("N·m·s", "‖ΔL‖ of the target about its centre of mass, same interval"),
    "orbit.momentum_drift_rel": ("", "isolated system: max relative change of total linear/angular momentum"),
    "orbit.com_deviation": ("m", "isolated system: max distance of the system COM from its straight line"),
    "hand.max_preset_error": ("rad", "G20 hand: worst |applied − goal| at the end of a hold window"),
    "hand.max_penetration": ("m", "G20 hand: max self-penetration depth"),
    "hand.projected_ratio": ("%", "G20 hand: share of steps that ran the collision projection"),
    "hand.fallback_count": ("", "G20 hand: steps whose projection fell back to the last safe pose"),
}

#: The metrics every report leads with (run summary, comparison table, regression baseline).
HEADLINE_METRICS: tuple[str, ...] = (
    "docking.depth",
    "docking.lateral",
    "docking.tilt_deg",
    "contact.peak_force_truth",
    "contact.peak_force_ft",
    "contact.steady_axial_force_truth",
    "tracking.pos_rms",
)

#: Target types (or type prefixes) with a mating axis, for which the docking layer is computed.
MATING_TARGETS: tuple[str, ...] = ("drogue", "keyed_drogue", "peg_hole")

#: Default length [s] of the final window for steady and docking values.
DEFAULT_WINDOW = 1.0

#: chatter metrics (module docstring): contact on at ‖f‖ ≥ CONTACT_ON, off below CONTACT_OFF [N]; a
#: one-step spike differs from both neighbours by more than SPIKE_THRESHOLD [N]
CONTACT_ON = 0.5
CONTACT_OFF = 0.05
SPIKE_THRESHOLD = 0.5
#: window [s] of ``contact.max_spike_share_truth``: 100 control periods at 1 ms
SPIKE_SHARE_WINDOW = 0.1


def contact_states(f_norm: np.ndarray, on: float = CONTACT_ON, off: float = CONTACT_OFF) -> np.ndarray:
    """(N,) bool: in contact from a sample with ‖f‖ ≥ ``on`` until one with ‖f‖ < ``off`` [N] (hysteresis)."""
    f = np.asarray(f_norm, dtype=float)
    out = np.zeros(len(f), dtype=bool)
    state = False
    for i, x in enumerate(f.tolist()):
        if state:
            state = not x < off
        else:
            state = x >= on
        out[i] = state
    return out


def force_spike_mask(
    f_axial: np.ndarray, f_norm: np.ndarray, threshold: float = SPIKE_THRESHOLD, on: float = CONTACT_ON
) -> np.ndarray:
    """(N,) bool, True at the one-step spikes: samples k (1 ≤ k ≤ N−2) with f_k − f_{k±1} both >
    ``threshold`` or both < −``threshold`` [N] while ‖f_{k−1}‖ and ‖f_{k+1}‖ ≥ ``on`` (both neighbours in
    contact)."""
    f = np.asarray(f_axial, dtype=float)
    n = np.asarray(f_norm, dtype=float)
    out = np.zeros(len(f), dtype=bool)
    if len(f) < 3:
        return out
    d1, d2 = f[1:-1] - f[:-2], f[1:-1] - f[2:]
    up = (d1 > threshold) & (d2 > threshold)
    down = (d1 < -threshold) & (d2 < -threshold)
    out[1:-1] = (up | down) & (n[:-2] >= on) & (n[2:] >= on)
    return out


def force_spike_count(
    f_axial: np.ndarray, f_norm: np.ndarray, threshold: float = SPIKE_THRESHOLD, on: float = CONTACT_ON
) -> int:
    """The number of one-step spikes (:func:`force_spike_mask`)."""
    return int(np.count_nonzero(force_spike_mask(f_axial, f_norm, threshold, on)))


def on_off_toggle_count(f_norm: np.ndarray, on: float = CONTACT_ON, off: float = CONTACT_OFF) -> int:
    """Samples after the first contact whose contact state (:func:`contact_states`) differs from both
    neighbours: a contact made or lost for one sample."""
    st = contact_states(f_norm, on, off)
    if len(st) < 3 or not st.any():
        return 0
    single = (st[1:-1] != st[:-2]) & (st[1:-1] != st[2:])
    single[: max(int(np.argmax(st)) - 1, 0)] = False  # from the first contact on
    return int(np.count_nonzero(single))


def release_count(f_norm: np.ndarray, on: float = CONTACT_ON, off: float = CONTACT_OFF) -> int:
    """Losses of contact (in → out transitions of :func:`contact_states`) after the first contact."""
    st = contact_states(f_norm, on, off)
    return int(np.count_nonzero(st[:-1] & ~st[1:]))


def mating_phase_error(
    R_world_ee: np.ndarray, R_world_D: np.ndarray, period: float, key_phase: float, lug_phase: float
) -> np.ndarray:
    """(N,) mating phase error [rad] of a keyed interface: the azimuth in D of the tool's lug-0 direction
    e = (cos φ_0, sin φ_0, 0) (tool axes), v = R_world_Dᵀ R_world_ee e, minus the key phase ψ_k, wrapped to
    [−period/2, period/2) (period = 2π/N)."""
    e = np.array([math.cos(lug_phase), math.sin(lug_phase), 0.0])
    v = np.einsum("nji,njk,k->ni", R_world_D, R_world_ee, e)  # R_Dᵀ R_ee e
    az = np.arctan2(v[:, 1], v[:, 0]) - key_phase
    return (az + period / 2.0) % period - period / 2.0


def time_to_seat(t: np.ndarray, seat_error: np.ndarray, tolerance: float) -> float:
    """The first time t_k [s] from which |seat_error| ≤ ``tolerance`` [m] holds at every sample to the end of
    the run; +inf when the last sample is not seated (never seated: an infinite time, which compares equal to
    itself, unlike NaN)."""
    ok = np.abs(np.asarray(seat_error, dtype=float)) <= tolerance
    if len(ok) == 0 or not ok[-1]:
        return math.inf
    bad = np.flatnonzero(~ok)
    return float(t[0] if bad.size == 0 else t[bad[-1] + 1])


def contact_impulse(t: np.ndarray, f_norm: np.ndarray) -> float:
    """∫‖f‖ dt [N·s] of a contact force sampled once per control period: Σ_k ‖f_k‖ T_c with T_c the sample
    spacing (each truth sample is the force that acted over its control period: its impulse / T_c)."""
    t = np.asarray(t, dtype=float)
    if len(t) < 2:
        return 0.0
    dt = float(t[1] - t[0])
    return float(np.sum(np.asarray(f_norm, dtype=float)) * dt)


def quat_to_matrix(q: np.ndarray) -> np.ndarray:
    """(..., 4) (w, x, y, z) → (..., 3, 3) rotation matrices (the quaternion is normalised first)."""
    q = np.asarray(q, dtype=float)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    R = np.empty(q.shape[:-1] + (3, 3))
    R[..., 0, 0] = 1 - 2 * (y * y + z * z)
    R[..., 0, 1] = 2 * (x * y - w * z)
    R[..., 0, 2] = 2 * (x * z + w * y)
    R[..., 1, 0] = 2 * (x * y + w * z)
    R[..., 1, 1] = 1 - 2 * (x * x + z * z)
    R[..., 1, 2] = 2 * (y * z - w * x)
    R[..., 2, 0] = 2 * (x * z - w * y)
    R[..., 2, 1] = 2 * (y * z + w * x)
    R[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return R


def rotation_angle_between(qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
    """Angle [rad] of the relative rotation between quaternion arrays (N, 4): 2·acos|⟨q_a, q_b⟩|.

    Uses ``2·atan2(‖q_a × q_b‖-part, |⟨q_a, q_b⟩|)`` so small angles keep full precision (acos loses
    half the digits near 1).
    """
    qa = np.asarray(qa, dtype=float)
    qb = np.asarray(qb, dtype=float)
    qa = qa / np.linalg.norm(qa, axis=-1, keepdims=True)
    qb = qb / np.linalg.norm(qb, axis=-1, keepdims=True)
    dot = np.sum(qa * qb, axis=-1)
    # vector part of conj(q_a) ⊗ q_b
    wa, va = qa[..., 0], qa[..., 1:]
    wb, vb = qb[..., 0], qb[..., 1:]
    vec = wa[..., None] * vb - wb[..., None] * va - np.cross(va, vb)
    return 2.0 * np.arctan2(np.linalg.norm(vec, axis=-1), np.abs(dot))


def position_error(ch: dict[str, np.ndarray]) -> np.ndarray:
    """(N,) ‖ee_pos − ee_pos_des‖ [m]."""
    return np.linalg.norm(ch["ee_pos"] - ch["ee_pos_des"], axis=1)


def orientation_error_deg(ch: dict[str, np.ndarray]) -> np.ndarray:
    """(N,) angle of the orientation error between ``ee_quat`` and ``ee_quat_des`` [deg]."""
    return np.degrees(rotation_angle_between(ch["ee_quat"], ch["ee_quat_des"]))


def mating_axis(meta: dict[str, Any]) -> np.ndarray:
    """(3,) +z of the true target frame in world axes; world +z when there is no target."""
    T = meta.get("T_world_target")
    return np.array([0.0, 0.0, 1.0]) if T is None else np.asarray(T, dtype=float)[:3, 2].copy()


def target_frames(ch: dict[str, np.ndarray], meta: dict[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """(R_world_D (N, 3, 3), o_D (N, 3)) of every sample: the recorded pose of a moving target, else the
    configured pose repeated; None without a target."""
    if "target_pos" in ch and "target_quat" in ch:
        return quat_to_matrix(ch["target_quat"]), np.asarray(ch["target_pos"], dtype=float)
    T = meta.get("T_world_target")
    if T is None:
        return None
    T = np.asarray(T, dtype=float)
    n = len(ch["t"])
    return np.broadcast_to(T[:3, :3], (n, 3, 3)), np.broadcast_to(T[:3, 3], (n, 3))


def mating_axes(ch: dict[str, np.ndarray], meta: dict[str, Any]) -> np.ndarray:
    """(N, 3) +z of the target frame of each sample (moving targets), else :func:`mating_axis` repeated."""
    if "target_quat" in ch:
        return quat_to_matrix(ch["target_quat"])[:, :, 2]
    return np.broadcast_to(mating_axis(meta), (len(ch["t"]), 3))


def axial_force(wrench_world: np.ndarray, meta: dict[str, Any], ch: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """(N,) force along the mating axis (+z_D) [N] from an (N, 6) env-on-tool world wrench (the axis of each
    sample for a moving target when its channels ``ch`` are given)."""
    if ch is not None and "target_quat" in ch:
        return np.einsum("ni,ni->n", wrench_world[:, :3], mating_axes(ch, meta))
    return wrench_world[:, :3] @ mating_axis(meta)


def is_mating_target(target_type: str | None) -> bool:
    """True for target types that have a mating axis (docking metrics apply)."""
    return bool(target_type) and any(str(target_type).startswith(p) for p in MATING_TARGETS)


def segment_masks(t: np.ndarray, segments: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """name → boolean mask of the samples in each segment: t0 ≤ t < t1, and t ≤ t1 for the segment
    that ends last (so the final sample of the motion is counted once)."""
    if not segments:
        return {}
    t_last_end = max(float(s["t1"]) for s in segments)
    eps = 1e-9
    out = {}
    for s in segments:
        t0, t1 = float(s["t0"]), float(s["t1"])
        upper = (t <= t1 + eps) if t1 >= t_last_end else (t < t1 - eps)
        out[str(s["name"])] = (t >= t0 - eps) & upper
    return out


def final_window_mask(t: np.ndarray, window: float) -> np.ndarray:
    """Samples of the last ``window`` seconds, t_end − window < t ≤ t_end (1000 samples for 1 s at
    1 ms; the whole run when it is shorter than the window). The 1 ns margin keeps the boundary
    sample out whatever the rounding of t."""
    return t > t[-1] - window + 1e-9


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x)))) if x.size else float("nan")


def _peak(x: np.ndarray) -> float:
    return float(np.max(x)) if x.size else float("nan")


def _use_percent(value_abs: np.ndarray, limit: np.ndarray) -> float:
    """100 · max(value / limit) over finite, positive limits (0 when no limit applies)."""
    limit = np.asarray(limit, dtype=float)
    ok = np.isfinite(limit) & (limit > 0)
    if not np.any(ok) or value_abs.size == 0:
        return 0.0
    return float(100.0 * np.max(value_abs[:, ok] / limit[ok]))


def compute_metrics(
    ch: dict[str, np.ndarray], meta: dict[str, Any], window: float = DEFAULT_WINDOW
) -> dict[str, Any]:
    """All metrics of :data:`METRICS` that apply to this run, plus per-segment tracking tables.

    Args:
        ch: telemetry channels (``Run.load(dir).channels`` or ``Telemetry.channels()``).
        meta: run metadata with keys ``T_world_target`` (4x4 nested list or None), ``target_type``,
            ``segments`` (list of {name, t0, t1} [s]), ``planner_duration`` [s], ``q_min``/``q_max``
            [rad] and ``v_max`` [rad/s].
        window: length [s] of the final window for steady and docking values.

    Returns:
        metric name → float (int for ``contact.max_contacts``), and ``"segments"`` → {segment name →
        {pos_rms, pos_peak [m], rot_rms_deg, rot_peak_deg [deg], t0, t1 [s]}}. Metrics that do not apply
        (docking without a mating target) are absent.
    """
    out: dict[str, Any] = {}
    t = np.asarray(ch["t"], dtype=float)
    if len(t) == 0:
        return out
    w_mask = final_window_mask(t, window)

    # ---- tracking
    pos_err = position_error(ch)
    rot_err = orientation_error_deg(ch)
    T_plan = float(meta.get("planner_duration", t[-1]))
    motion = t <= T_plan + 1e-9
    out["tracking.pos_rms"] = _rms(pos_err[motion])
    out["tracking.pos_peak"] = _peak(pos_err[motion])
    out["tracking.rot_rms_deg"] = _rms(rot_err[motion])
    out["tracking.rot_peak_deg"] = _peak(rot_err[motion])
    out["tracking.final_pos_error"] = float(np.mean(pos_err[w_mask]))
    segs: dict[str, dict[str, float]] = {}
    bounds = {str(s["name"]): (float(s["t0"]), float(s["t1"])) for s in meta.get("segments", [])}
    for name, mask in segment_masks(t, meta.get("segments", [])).items():
        if not np.any(mask):
            continue
        segs[name] = {
            "t0": bounds[name][0],
            "t1": bounds[name][1],
            "pos_rms": _rms(pos_err[mask]),
            "pos_peak": _peak(pos_err[mask]),
            "rot_rms_deg": _rms(rot_err[mask]),
            "rot_peak_deg": _peak(rot_err[mask]),
        }
    if segs:
        out["segments"] = segs
        out["tracking.max_segment_pos_rms"] = max(s["pos_rms"] for s in segs.values())
        out["tracking.max_segment_pos_peak"] = max(s["pos_peak"] for s in segs.values())
        out["tracking.max_segment_rot_rms_deg"] = max(s["rot_rms_deg"] for s in segs.values())
        out["tracking.max_segment_rot_peak_deg"] = max(s["rot_peak_deg"] for s in segs.values())

    # ---- contact
    axes = mating_axes(ch, meta)  # (N, 3): the target's +z of each sample
    R_world_ee = quat_to_matrix(ch["ee_quat"])
    axis_ee = np.einsum("nji,nj->ni", R_world_ee, axes)  # R_world_eeᵀ a, (N, 3)
    for src, key in (("truth", "wrench_truth"), ("ft", "wrench_ext")):
        f_world = ch[f"{key}_world"][:, :3]
        w_body = ch[f"{key}_body"]
        f_norm = np.linalg.norm(f_world, axis=1)
        axial = np.einsum("ni,ni->n", f_world, axes)
        lateral = np.linalg.norm(f_world - axial[:, None] * axes, axis=1)
        if src == "truth" and "contact_force_peak" in ch:  # substep-resolved (SubstepContact)
            out["contact.peak_force_truth"] = _peak(np.asarray(ch["contact_force_peak"], dtype=float))
            out["contact.peak_axial_force_truth"] = _peak(np.asarray(ch["contact_axial_force_peak"], dtype=float))
        else:
            out[f"contact.peak_force_{src}"] = _peak(f_norm)
            out[f"contact.peak_axial_force_{src}"] = _peak(np.abs(axial))
        out[f"contact.peak_wrench_norm_{src}"] = _peak(np.linalg.norm(w_body, axis=1))
        out[f"contact.steady_axial_force_{src}"] = float(np.mean(axial[w_mask]))
        out[f"contact.steady_lateral_force_{src}"] = float(np.mean(lateral[w_mask]))
        out[f"contact.peak_axial_moment_{src}"] = _peak(np.abs(np.sum(w_body[:, 3:] * axis_ee, axis=1)))
        spikes = force_spike_mask(axial, f_norm)
        out[f"contact.force_spikes_{src}"] = int(np.count_nonzero(spikes))
        if src == "truth":
            out["contact.max_spike_share_truth"] = window_share(spikes, t, SPIKE_SHARE_WINDOW)[0]
            out["contact.on_off_toggles_truth"] = on_off_toggle_count(f_norm)
            out["contact.releases_truth"] = release_count(f_norm)
            # the same counts at rest (the final window): what a limit cycle of the closed loop leaves, the
            # plant's stick-slip rattle (which needs sliding) does not
            out["contact.steady_force_spikes_truth"] = force_spike_count(axial[w_mask], f_norm[w_mask])
            out["contact.steady_on_off_toggles_truth"] = on_off_toggle_count(f_norm[w_mask])
            out["contact.axial_force_ripple_truth"] = float(np.ptp(axial[w_mask]))
    diff = np.linalg.norm(ch["wrench_ext_world"][:, :3] - ch["wrench_truth_world"][:, :3], axis=1)
    out["contact.ft_truth_rms_diff"] = _rms(diff)
    f_truth = np.linalg.norm(ch["wrench_truth_world"][:, :3], axis=1)
    out["contact.impulse_truth"] = contact_impulse(t, f_truth)
    in_contact = f_truth >= CONTACT_ON
    out["contact.mean_force_truth"] = float(np.mean(f_truth[in_contact])) if np.any(in_contact) else 0.0
    counts = ch["contact_count_peak"] if "contact_count_peak" in ch else ch["contact_count"]  # substep-resolved
    out["contact.max_contacts"] = int(np.max(counts))

    # ---- safety
    q_min = np.asarray(meta["q_min"], dtype=float)
    q_max = np.asarray(meta["q_max"], dtype=float)
    finite = np.isfinite(q_min) & np.isfinite(q_max)
    lo, hi = np.where(finite, q_min, 0.0), np.where(finite, q_max, 0.0)
    mid = (hi + lo) / 2.0
    half = np.where(finite, (hi - lo) / 2.0, np.inf)  # unlimited joints count 0 %
    out["safety.joint_pos_use"] = _use_percent(np.abs(ch["q"] - mid), half)
    out["safety.joint_vel_use"] = _use_percent(np.abs(ch["v"]), np.asarray(meta["v_max"], dtype=float))
    out["safety.min_manipulability"] = float(np.min(ch["manipulability"]))
    out["safety.saturation_ratio"] = float(100.0 * np.mean(ch["saturated"]))
    out["safety.max_saturation_window"] = window_share(ch["saturated"], t)[0]

    # ---- controller (the HQP's qp_status channel: 0 closed form, ≥ 1 the QPs ran)
    if "ctrl_qp_status" in ch:
        out["controller.qp_share"] = float(100.0 * np.mean(np.asarray(ch["ctrl_qp_status"]) >= 1.0))

    # ---- docking
    frames = target_frames(ch, meta)
    if frames is not None and is_mating_target(meta.get("target_type")):
        R_D, o_D = frames[0][w_mask], frames[1][w_mask]
        p_in_D = np.einsum("nji,nj->ni", R_D, ch["ee_pos"][w_mask] - o_D)  # R_world_Dᵀ (p − o_D)
        out["docking.depth"] = float(np.mean(-p_in_D[:, 2]))
        seat = meta.get("target_depth_total")
        if seat is not None:
            out["docking.seat_error"] = float(seat) - out["docking.depth"]
            if float(seat) > 0.0:
                out["docking.seat_height_fraction"] = out["docking.seat_error"] / float(seat)
        out["docking.lateral"] = float(np.mean(np.linalg.norm(p_in_D[:, :2], axis=1)))
        z_tool = R_world_ee[w_mask][:, :, 2]
        # angle via atan2(‖a × b‖, a·b): exact for small tilts
        minus_z = -R_D[:, :, 2]
        tilt = np.arctan2(np.linalg.norm(np.cross(z_tool, minus_z), axis=1), np.einsum("ni,ni->n", z_tool, minus_z))
        out["docking.tilt_deg"] = float(np.mean(np.degrees(tilt)))
        period = meta.get("target_yaw_period")
        if period:  # a keyed target: the mating phase
            err = mating_phase_error(R_world_ee[w_mask], R_D, float(period), float(meta.get("target_key_phase") or 0.0),
                                     float(meta.get("tool_lug_phase") or 0.0))
            out["docking.phase_deg"] = float(np.mean(np.degrees(np.abs(err))))
        if seat is not None:
            Rf, of = frames
            p_all = np.einsum("nji,nj->ni", Rf, ch["ee_pos"] - of)
            out["docking.time_to_seat"] = time_to_seat(t, float(seat) + p_all[:, 2], SEAT_TOLERANCE)

    # ---- insertion supervisor (controllers/insertion.py)
    if "ins_attempt" in ch:
        out["insertion.attempts"] = int(np.max(ch["ins_attempt"]))
        out["insertion.jams"] = int(np.count_nonzero(np.asarray(ch["ins_jam"]) > 0.5))
        out["insertion.jammed"] = int(out["insertion.jams"] > 0)

    # ---- orbit (free-floating base, moving target; sim/orbit.py)
    out.update(orbit_metrics(ch, meta, w_mask))

    # ---- hand (runs with the G20 hand's telemetry channels; definitions in hand.effector)
    if "hand_goal" in ch and "hand_applied" in ch:
        from dockbench.hand.effector import hand_metrics

        out.update(hand_metrics(ch))
    return out


def _angle_from_first(quat: np.ndarray) -> np.ndarray:
    """(N,) rotation angle [rad] of each orientation (w, x, y, z) relative to the first."""
    q = np.asarray(quat, dtype=float)
    return rotation_angle_between(np.broadcast_to(q[0], q.shape), q)


def is_isolated(meta: dict[str, Any]) -> bool:
    """True when no external force acts on the moving bodies: the robot base floats (or there is no fixed
    base: always one here) and the target floats or there is none."""
    return meta.get("base_type") == "free_floating" and meta.get("target_mount") in (None, "floating")


def orbit_metrics(ch: dict[str, np.ndarray], meta: dict[str, Any], w_mask: np.ndarray) -> dict[str, float]:
    """The ``orbit.*`` metrics of the run (module docstring) from the channels of sim/orbit.py; {} when the
    run has none of them."""
    out: dict[str, float] = {}
    if "base_quat" in ch:
        att = np.degrees(_angle_from_first(ch["base_quat"]))
        drift = np.linalg.norm(ch["base_pos"] - ch["base_pos"][0], axis=1)
        out["orbit.base_attitude_peak_deg"] = float(np.max(att))
        out["orbit.base_attitude_final_deg"] = float(np.mean(att[w_mask]))
        out["orbit.base_drift"] = float(np.mean(drift[w_mask]))
        out["orbit.base_drift_peak"] = float(np.max(drift))
    if "target_vel" in ch:
        v = ch["target_vel"]
        out["orbit.target_speed_after_seating"] = float(np.mean(np.linalg.norm(v[w_mask, :3], axis=1)))
        out["orbit.target_rate_after_seating_deg_s"] = float(np.degrees(np.mean(np.linalg.norm(v[w_mask, 3:], axis=1))))
        pt = ch["momentum_target"]
        contact = np.flatnonzero(np.asarray(ch.get("contact_count_peak", ch["contact_count"])) > 0)
        i0 = max(int(contact[0]) - 1, 0) if contact.size else len(pt) - 1
        out["orbit.momentum_exchanged"] = float(np.linalg.norm(pt[-1, :3] - pt[i0, :3]))
        out["orbit.angular_momentum_exchanged"] = float(np.linalg.norm(pt[-1, 3:] - pt[i0, 3:]))
    if "momentum" in ch and is_isolated(meta):
        P = ch["momentum"]
        scale = np.max(ch["momentum_abs"], axis=0)
        dP = np.max(np.linalg.norm(P[:, :3] - P[0, :3], axis=1)) / max(scale[0], 1e-300)
        dL = np.max(np.linalg.norm(P[:, 3:] - P[0, 3:], axis=1)) / max(scale[1], 1e-300)
        out["orbit.momentum_drift_rel"] = float(max(dP, dL))
        mass = meta.get("orbit_mass")
        if mass:
            t = np.asarray(ch["momentum_t"], dtype=float)
            C = ch["system_com"]
            line = C[0] + np.outer(t - t[0], P[0, :3] / float(mass))
            out["orbit.com_deviation"] = float(np.max(np.linalg.norm(C - line, axis=1)))
    return out


def metrics_from_run(run_dir: str | Path, window: float = DEFAULT_WINDOW) -> dict[str, Any]:
    """:func:`compute_metrics` on a run folder alone (telemetry.npz + meta.json via ``Run.load``)."""
    from dockbench.telemetry.run import Run

    run = Run.load(run_dir)
    return compute_metrics(run.channels, run.meta, window=window)


def scalar_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """The flat name → number part of a metrics dict (drops the nested ``segments`` table)."""
    return {k: v for k, v in metrics.items() if k in METRICS and isinstance(v, (int, float))}


def finite_or_none(x: float) -> float | None:
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None
