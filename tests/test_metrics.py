"""Metrics (docs/metrics.md) on synthetic telemetry with known answers, and on a real run folder."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dockbench.telemetry.log import CHANNELS, atomic_save_npz
from dockbench.telemetry.metrics import (
    METRICS,
    compute_metrics,
    is_mating_target,
    metrics_from_run,
    quat_to_matrix,
    rotation_angle_between,
    scalar_metrics,
    segment_masks,
)
from dockbench.telemetry.run import write_json, write_manifest

#: Tolerances of this file (one table): exact constructions agree to rounding. The metrics are means,
#: RMS and peaks over ≤ 4001 samples (numpy pairwise sums: error ≤ ~log2(N)·ε ≈ 12ε relative, plus
#: the per-sample norms and the atan2 of the angles, ≤ ~10ε), so ≲ 25ε ≈ 6e-15 relative; measured
#: ≤ 1.8e-15 absolute on values ≤ 50. The angle tolerance is in degrees (rad → deg scales by 57).
TOL = {"exact_rel": 1e-12, "exact_abs": 1e-12, "angle_abs_deg": 1e-9}

DT = 1e-3
N = 4001  # t = 0 .. 4 s
NV = 7
I_A_END, I_B_END = 1500, 3000  # segment a = steps [0, 1500), b = [1500, 3000]; planner ends at 3.0 s
SEGMENTS = [{"name": "a", "t0": 0.0, "t1": 1.5}, {"name": "b", "t0": 1.5, "t1": 3.0}]
ERR_MM = {"a": 1.0, "b": 3.0, "after": 0.5}  # position error magnitude [mm]
ROT_DEG = {"a": 2.0, "b": 4.0, "after": 0.3}  # orientation error [deg], about the EE x axis
P_TIP_IN_D = np.array([3e-4, -4e-4, -0.08])  # seated tip in the target frame [m]
F_PEAK, F_STEADY, F_LAT, N_AXIAL, FT_OFFSET = 12.0, 5.0, 0.5, 0.2, 0.3  # N, N, N, N·m, N
# a substep spike between two samples: the truth force of step 2400 (9.6 N axial) scaled to 14 N, and
# one more contact than sampled at step 2250 (the substep-resolved channels of sim.wrench.SubstepContact)
I_SPIKE, F_SUBSTEP, I_COUNT, COUNT_SUBSTEP = 2400, 14.0, 2250, 5
Q_MIN = np.array([-2.0] * NV)
Q_MAX = np.array([3.0] * NV)
V_MAX = np.full(NV, 1.5)
SAT_STEPS = 1000


def _rot(axis: str, angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return {"x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
            "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])}[axis]


def _quat(R: np.ndarray) -> np.ndarray:
    import mujoco

    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R).ravel())
    return q


def _phase(i: int) -> str:
    return "a" if i < I_A_END else ("b" if i <= I_B_END else "after")


def synthetic(target_type: str | None = "drogue") -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Telemetry with known metrics. Target D at o_D, rotated 30° about world y (so the mating axis
    is not world z); the tool seated with its axis along −z_D; forces built along z_D / x_D."""
    t = np.arange(N) * DT
    R_D = _rot("y", math.radians(30.0))
    o_D = np.array([0.5, 0.1, 0.2])
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R_D, o_D
    R_des = R_D @ _rot("x", math.pi)  # seated: tool z = −z_D
    ch: dict[str, np.ndarray] = {}
    z_in_D = np.where(t < 3.0, 0.1 - 0.18 * np.clip(t / 3.0, 0, 1), -0.08)
    p_in_D = np.column_stack([np.full(N, P_TIP_IN_D[0]), np.full(N, P_TIP_IN_D[1]), z_in_D])
    p_in_D[I_B_END:, 2] = P_TIP_IN_D[2]
    ch["t"] = t
    ch["ee_pos"] = o_D + p_in_D @ R_D.T
    err = np.zeros((N, 3))
    quat = np.zeros((N, 4))
    R_all = np.zeros((N, 3, 3))
    for i in range(N):
        ph = _phase(i)
        err[i] = 1e-3 * ERR_MM[ph] * np.array({"a": [1, 0, 0], "b": [0, 1, 0], "after": [0, 0, 1]}[ph])
        R_all[i] = R_des @ _rot("x", math.radians(ROT_DEG[ph]))
        quat[i] = _quat(R_all[i])
    ch["ee_pos_des"] = ch["ee_pos"] - err
    ch["ee_quat"] = quat
    ch["ee_quat_des"] = np.tile(_quat(R_des), (N, 1))
    ch["ee_vel"] = np.zeros((N, 6))
    ch["ee_vel_des"] = np.zeros((N, 3))
    ch["ee_acc_des"] = np.zeros((N, 3))
    ch["ee_omega_des"] = np.zeros((N, 3))
    # contact: axial (along +z_D) triangle 0 → 12 N (step 2500) → 5 N, then steady 5 N + 0.5 N lateral
    f_ax = np.zeros(N)
    f_ax[2000:2501] = np.linspace(0.0, F_PEAK, 501)
    f_ax[2500:I_B_END] = np.linspace(F_PEAK, F_STEADY, I_B_END - 2500)
    f_ax[I_B_END:] = F_STEADY
    f_lat = np.where(np.arange(N) >= I_B_END, F_LAT, 0.0)
    n_ax = np.where(np.arange(N) >= I_B_END, N_AXIAL, 0.0)
    f_world = np.outer(f_ax, R_D[:, 2]) + np.outer(f_lat, R_D[:, 0])
    n_world = np.outer(n_ax, R_D[:, 2])
    for src, off in (("truth", 0.0), ("ext", FT_OFFSET)):
        fw = f_world + off * R_D[:, 2]
        ch[f"wrench_{src}_world"] = np.hstack([fw, n_world])
        ch[f"wrench_{src}_body"] = np.hstack([np.einsum("nji,nj->ni", R_all, fw),
                                              np.einsum("nji,nj->ni", R_all, n_world)])
    ch["wrench_used_world"] = ch["wrench_ext_world"].copy()
    ch["contact_count"] = np.zeros(N, dtype="i4")
    ch["contact_count"][2200:2300] = 4
    ch["contact_count"][I_B_END:] = 2
    ch["contact_count_all"] = ch["contact_count"].copy()
    # substep-resolved peaks: the samples, plus a spike the samples miss
    axis = R_D[:, 2] if target_type else np.array([0.0, 0.0, 1.0])
    f_peak = ch["wrench_truth_world"][:, :3].copy()
    f_peak[I_SPIKE] *= F_SUBSTEP / f_ax[I_SPIKE]
    ch["contact_force_peak"] = np.linalg.norm(f_peak, axis=1)
    ch["contact_axial_force_peak"] = np.abs(f_peak @ axis)
    ch["contact_count_peak"] = ch["contact_count"].copy()
    ch["contact_count_peak"][I_COUNT] = COUNT_SUBSTEP
    # safety
    mid, half = (Q_MAX + Q_MIN) / 2, (Q_MAX - Q_MIN) / 2
    q = np.tile(mid, (N, 1))
    q[:, 2] = mid[2] + 0.5 * half[2] * np.sin(2 * math.pi * t / 4.0)  # peak 50 % of the half range
    ch["q"] = q
    v = np.zeros((N, NV))
    v[:, 0] = 0.3 * V_MAX[0] * np.sin(math.pi * t / 4.0)  # peak 30 %
    ch["v"] = v
    ch["tau_cmd"] = np.zeros((N, NV))
    ch["tau_applied"] = np.zeros((N, NV))
    ch["saturated"] = (np.arange(N) < 2 * SAT_STEPS) & (np.arange(N) % 2 == 0)  # every other step: not sustained
    ch["manipulability"] = 0.1 + 0.03 * np.cos(2 * math.pi * t)
    ch["manipulability"][1234] = 0.042
    meta = {
        "T_world_target": T.tolist() if target_type else None,
        "target_type": target_type,
        "target_depth_total": 0.082,
        "segments": SEGMENTS,
        "planner_duration": 3.0,
        "q_min": Q_MIN.tolist(),
        "q_max": Q_MAX.tolist(),
        "v_max": V_MAX.tolist(),
        "tau_max": [100.0] * NV,
        "joint_names": [f"joint{i + 1}" for i in range(NV)],
        "robot": "synthetic",
        "status": "completed",
        "scenario": {"name": "synthetic", "planner": {"type": "p"}, "controller": {"type": "c"},
                     "gates": []},
    }
    assert set(CHANNELS) <= set(ch)
    return ch, meta


def write_synthetic_run(folder: Path, target_type: str | None = "drogue") -> Path:
    """A run folder (telemetry.npz, meta.json, summary.json) with the synthetic telemetry."""
    ch, meta = synthetic(target_type)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_save_npz(folder / "telemetry.npz", ch)
    write_json(folder / "meta.json", meta)
    write_json(folder / "summary.json", {"scenario": "synthetic", "status": "completed", "verdict": "PASS",
                                         "metrics": scalar_metrics(compute_metrics(ch, meta))})
    write_manifest(folder)  # the completeness marker: without it the folder loads as partial
    return folder


def _close(actual: float, desired: float) -> None:
    np.testing.assert_allclose(actual, desired, rtol=TOL["exact_rel"], atol=TOL["exact_abs"])


def test_tracking_per_segment_known_errors() -> None:
    ch, meta = synthetic()
    m = compute_metrics(ch, meta)
    na, nb = I_A_END, I_B_END - I_A_END + 1  # segment b includes its end sample (last segment)
    _close(m["segments"]["a"]["pos_rms"], 1e-3)
    _close(m["segments"]["a"]["pos_peak"], 1e-3)
    _close(m["segments"]["b"]["pos_rms"], 3e-3)
    _close(m["tracking.max_segment_pos_rms"], 3e-3)
    _close(m["tracking.max_segment_pos_peak"], 3e-3)
    _close(m["tracking.pos_rms"], 1e-3 * math.sqrt((na * 1.0 + nb * 9.0) / (na + nb)))
    _close(m["tracking.pos_peak"], 3e-3)
    _close(m["tracking.final_pos_error"], 0.5e-3)
    np.testing.assert_allclose(m["segments"]["a"]["rot_rms_deg"], 2.0, atol=TOL["angle_abs_deg"])
    np.testing.assert_allclose(m["segments"]["b"]["rot_peak_deg"], 4.0, atol=TOL["angle_abs_deg"])
    np.testing.assert_allclose(m["tracking.rot_rms_deg"], math.sqrt((na * 4.0 + nb * 16.0) / (na + nb)),
                               atol=TOL["angle_abs_deg"])
    np.testing.assert_allclose(m["tracking.max_segment_rot_rms_deg"], 4.0, atol=TOL["angle_abs_deg"])


def test_segment_masks_are_half_open_except_the_last() -> None:
    t = np.arange(N) * DT
    masks = segment_masks(t, SEGMENTS)
    assert masks["a"].sum() == I_A_END
    assert masks["b"].sum() == I_B_END - I_A_END + 1
    assert not np.any(masks["a"] & masks["b"])


def test_contact_known_force_trace_ft_and_truth() -> None:
    ch, meta = synthetic()
    m = compute_metrics(ch, meta)
    _close(m["contact.peak_force_truth"], F_SUBSTEP)  # substep-resolved: the spike between two samples
    _close(m["contact.peak_axial_force_truth"], F_SUBSTEP)
    _close(m["contact.steady_axial_force_truth"], F_STEADY)
    _close(m["contact.steady_lateral_force_truth"], F_LAT)
    _close(m["contact.peak_axial_moment_truth"], N_AXIAL)
    _close(m["contact.peak_wrench_norm_truth"], F_PEAK)
    _close(m["contact.peak_force_ft"], F_PEAK + FT_OFFSET)
    _close(m["contact.peak_axial_force_ft"], F_PEAK + FT_OFFSET)
    _close(m["contact.steady_axial_force_ft"], F_STEADY + FT_OFFSET)
    _close(m["contact.steady_lateral_force_ft"], F_LAT)
    _close(m["contact.peak_axial_moment_ft"], N_AXIAL)
    _close(m["contact.ft_truth_rms_diff"], FT_OFFSET)
    assert m["contact.max_contacts"] == COUNT_SUBSTEP and isinstance(m["contact.max_contacts"], int)


def test_chatter_metrics_of_the_smooth_trace_are_zero_and_qp_share() -> None:
    """The synthetic contact (a smooth 0 → 12 → 5 N triangle, then 5 N steady) has no spike, no single-step
    contact state, no release and no ripple in the final window; the QPs ran on every 10th step: 10 %."""
    ch, meta = synthetic()
    _add_qp_status(ch)
    m = compute_metrics(ch, meta)
    assert m["contact.force_spikes_truth"] == 0 and m["contact.force_spikes_ft"] == 0
    assert m["contact.on_off_toggles_truth"] == 0 and m["contact.releases_truth"] == 0
    _close(m["contact.axial_force_ripple_truth"], 0.0)
    _close(m["controller.qp_share"], 100.0 * len(range(0, N, 10)) / N)
    del ch["ctrl_qp_status"]
    assert "controller.qp_share" not in compute_metrics(ch, meta)  # only for controllers with QPs


def _add_qp_status(ch: dict[str, np.ndarray]) -> None:
    """The HQP's ``ctrl_qp_status`` channel: its QPs ran on every 10th step."""
    ch["ctrl_qp_status"] = np.where(np.arange(len(ch["t"])) % 10 == 0, 1.0, 0.0)


def _add_insertion(ch: dict[str, np.ndarray], meta: dict) -> None:
    """A keyed target (N = 3) and the insertion supervisor's channels: a jam at step 5, attempt 2 after it."""
    n = len(ch["t"])
    meta.update(target_yaw_period=2.0 * math.pi / 3.0, target_key_phase=0.0, tool_lug_phase=0.0)
    ch["ins_attempt"] = np.where(np.arange(n) > 5, 2.0, 1.0)
    ch["ins_jam"] = np.where(np.arange(n) == 5, 1.0, 0.0)


def _contact_trace() -> tuple[np.ndarray, np.ndarray]:
    """(axial force, ‖f‖) [N]: 5 N steady contact with known events (see the test)."""
    f = np.full(200, 5.0)
    f[20] += 1.0   # one-step spike up (counted)
    f[40] -= 0.8   # one-step spike down (counted)
    f[60:70] += 0.2 * (-1.0) ** np.arange(10)  # period-2 ripple, 0.4 N steps: below the 0.5 N threshold
    f[80:82] += 2.0  # a two-step excursion (not a one-step spike)
    f[100] = 0.0   # a one-step loss of contact: a spike AND a single-step contact state
    f[150:160] = 0.0  # a 10-step release (not a toggle), ...
    f[190:] = 0.0     # ... and the final release
    return f, np.abs(f)


def test_chatter_metrics_count_what_they_name() -> None:
    """force_spike_count: samples differing from BOTH neighbours by > 0.5 N in the same direction while both
    neighbours are in contact; on_off_toggle_count: single-sample contact states after the first contact;
    release_count: in → out transitions (hysteresis 0.5 N on, 0.05 N off)."""
    from dockbench.telemetry.metrics import contact_states, force_spike_count, on_off_toggle_count, release_count

    f, n = _contact_trace()
    assert force_spike_count(f, n) == 3  # steps 20, 40, 100
    assert on_off_toggle_count(n) == 1  # step 100
    assert release_count(n) == 3  # steps 100, 150, 190
    st = contact_states(np.array([0.0, 0.6, 0.3, 0.04, 0.2, 0.5, 0.49]))
    assert st.tolist() == [False, True, True, False, False, True, True]  # hysteresis
    # the metrics can fail: a period-2 on/off limit cycle after the first contact
    cyc = np.tile([0.0, 4.0], 50)
    assert on_off_toggle_count(cyc) == 98 and release_count(cyc) == 49
    osc = 5.0 + np.tile([-1.0, 1.0], 50)  # a ±1 N period-2 oscillation in contact
    assert force_spike_count(osc, np.abs(osc)) == 98


def test_steady_chatter_counts_only_the_final_window() -> None:
    """contact.steady_force_spikes_truth / steady_on_off_toggles_truth: the chatter counts over the final
    window (the tool at rest in contact), not over the run: a spike and a toggle before the window do not
    count, a period-2 oscillation and a one-step drop-out inside it do, and the window follows ``window``
    (the synthetic run: 4 s, the tool in steady contact from 3 s)."""
    ch, meta = synthetic()
    axis = np.asarray(meta["T_world_target"])[:3, 2]
    w = ch["wrench_truth_world"]
    keys = ("contact.force_spikes_truth", "contact.on_off_toggles_truth",
            "contact.steady_force_spikes_truth", "contact.steady_on_off_toggles_truth")

    def counts(window: float = 1.0) -> np.ndarray:
        m = compute_metrics(ch, meta, window=window)
        return np.array([m[k] for k in keys])

    c0, c0_short = counts(), counts(0.5)
    w[2700, :3] += 2.0 * axis  # a spike at 2.7 s (before the final second, t ≥ 3 s)
    w[2800, :3] = 0.0  # contact lost for one step at 2.8 s (a toggle, and a downward spike)
    assert (counts() - c0).tolist() == [2, 1, 0, 0]
    w[3300:3340, :3] += np.outer(np.tile([-1.0, 1.0], 20), axis)  # ±1 N period-2 in the window: 40 spikes
    w[3800, :3] = 0.0  # a one-step drop-out in the window: one toggle, one spike
    assert (counts() - c0).tolist() == [2 + 40 + 1, 1 + 1, 40 + 1, 1]
    assert (counts(0.5) - c0_short)[2:].tolist() == [1, 1]  # the last 0.5 s hold only the drop-out


def test_spike_share_is_that_of_the_densest_tenth_of_a_second() -> None:
    """contact.max_spike_share_truth: the largest share [%] of one-step spikes among the 100 steps of any
    0.1 s window (1 ms rows): a ±1 N period-2 oscillation over 0.1 s makes every step a spike (100 %), a spike
    on every 4th step over 0.2 s a quarter of every window (25 %)."""
    ch, meta = synthetic()
    axis = np.asarray(meta["T_world_target"])[:3, 2]
    assert compute_metrics(ch, meta)["contact.max_spike_share_truth"] == 0.0
    clean = ch["wrench_truth_world"].copy()
    ch["wrench_truth_world"][3300:3400, :3] += np.outer(np.tile([-1.0, 1.0], 50), axis)
    _close(compute_metrics(ch, meta)["contact.max_spike_share_truth"], 100.0)
    ch["wrench_truth_world"] = clean
    ch["wrench_truth_world"][3300:3500:4, :3] += 2.0 * axis
    _close(compute_metrics(ch, meta)["contact.max_spike_share_truth"], 25.0)


def test_peak_metrics_use_the_samples_without_substep_channels() -> None:
    """A run folder without the substep-resolved channels (older runs): peaks of the sampled truth."""
    ch, meta = synthetic()
    for name in ("contact_force_peak", "contact_axial_force_peak", "contact_count_peak"):
        del ch[name]
    m = compute_metrics(ch, meta)
    _close(m["contact.peak_force_truth"], F_PEAK)
    _close(m["contact.peak_axial_force_truth"], F_PEAK)
    assert m["contact.max_contacts"] == 4


def test_seat_error_and_saturation_window() -> None:
    ch, meta = synthetic()
    m = compute_metrics(ch, meta)
    _close(m["docking.seat_error"], meta["target_depth_total"] + P_TIP_IN_D[2])  # seat − depth
    _close(m["safety.max_saturation_window"], 50.0)  # every other step in the first 2 s
    ch["saturated"] = (np.arange(N) % 5) == 0  # every 5th step: 50 of the 250 steps of every window
    _close(compute_metrics(ch, meta)["safety.max_saturation_window"], 20.0)
    ch["saturated"] = (np.arange(N) >= 3000) & (np.arange(N) < 3250)  # 0.25 s pinned: 100 %
    _close(compute_metrics(ch, meta)["safety.max_saturation_window"], 100.0)


def test_safety_known_values() -> None:
    ch, meta = synthetic()
    m = compute_metrics(ch, meta)
    np.testing.assert_allclose(m["safety.joint_pos_use"], 50.0, rtol=1e-9)  # sin peak at step 1000
    np.testing.assert_allclose(m["safety.joint_vel_use"], 30.0, rtol=1e-9)  # sin peak at step 2000
    _close(m["safety.min_manipulability"], 0.042)
    _close(m["safety.saturation_ratio"], 100.0 * SAT_STEPS / N)


def test_safety_ignores_unlimited_joints() -> None:
    ch, meta = synthetic()
    meta = {**meta, "q_min": [-math.inf] * NV, "q_max": [math.inf] * NV, "v_max": [math.inf] * NV}
    m = compute_metrics(ch, meta)
    assert m["safety.joint_pos_use"] == 0.0 and m["safety.joint_vel_use"] == 0.0


def test_docking_in_a_rotated_target_frame() -> None:
    ch, meta = synthetic()
    m = compute_metrics(ch, meta)
    _close(m["docking.depth"], -P_TIP_IN_D[2])
    _close(m["docking.lateral"], float(np.hypot(P_TIP_IN_D[0], P_TIP_IN_D[1])))
    np.testing.assert_allclose(m["docking.tilt_deg"], ROT_DEG["after"], atol=TOL["angle_abs_deg"])


def test_window_changes_steady_values() -> None:
    ch, meta = synthetic()
    # the last 0.5 s see an axial force of 7 N instead of 5 N
    axis = np.asarray(meta["T_world_target"])[:3, 2]
    ch["wrench_truth_world"][N - 500:, :3] += 2.0 * axis
    m1 = compute_metrics(ch, meta, window=1.0)
    m05 = compute_metrics(ch, meta, window=0.4999)
    _close(m05["contact.steady_axial_force_truth"], F_STEADY + 2.0)
    _close(m1["contact.steady_axial_force_truth"], F_STEADY + 2.0 * 500 / 1000)


def test_docking_metrics_only_for_mating_targets() -> None:
    for target in (None, "plate"):
        ch, meta = synthetic(target)
        m = compute_metrics(ch, meta)
        assert not any(k.startswith("docking.") for k in m), target
    if True:  # without a target the axial force is along world +z
        ch, meta = synthetic(None)
        m = compute_metrics(ch, meta)
        axis = _rot("y", math.radians(30.0))[:, 2]
        _close(m["contact.peak_axial_force_truth"], F_SUBSTEP * axis[2])
    assert is_mating_target("drogue") and is_mating_target("drogue_floating")
    assert not is_mating_target("plate") and not is_mating_target(None)


def _add_hand(ch: dict[str, np.ndarray]) -> None:
    """G20 hand channels: goal 0 → 0.5 rad at step 2000; the applied pose ends 0.01 rad short."""
    goal = np.zeros((N, 21))
    goal[2000:] = 0.5
    applied = np.minimum(goal, 0.49)
    applied[1999] = 0.0
    ch["hand_goal"], ch["hand_applied"] = goal, applied
    ch["hand_penetration"] = np.zeros(N)
    ch["hand_penetration"][2100] = 2e-4
    ch["hand_projected"] = (np.arange(N) >= 2000) & (np.arange(N) < 2010)
    ch["hand_fell_back"] = np.isin(np.arange(N), (2001, 2002, 2003)).astype(float)


def test_hand_metrics_when_the_hand_channels_exist() -> None:
    ch, meta = synthetic()
    assert not any(k.startswith("hand.") for k in compute_metrics(ch, meta))
    _add_hand(ch)
    m = compute_metrics(ch, meta)
    _close(m["hand.max_preset_error"], 0.01)
    _close(m["hand.max_penetration"], 2e-4)
    _close(m["hand.projected_ratio"], 100.0 * 10 / N)
    assert m["hand.fallback_count"] == 3


def test_every_computed_metric_is_documented() -> None:
    from tests.orbit_helpers import add_orbit

    ch, meta = synthetic()
    _add_hand(ch)
    _add_qp_status(ch)
    add_orbit(ch, meta)
    _add_insertion(ch, meta)
    m = compute_metrics(ch, meta)
    assert m["insertion.attempts"] == 2 and m["insertion.jams"] == 1
    assert set(scalar_metrics(m)) == set(METRICS)
    assert set(k for k in m if k != "segments") == set(METRICS)


def test_small_rotation_angle_keeps_precision() -> None:
    theta = 1e-7
    qa = np.array([[1.0, 0.0, 0.0, 0.0]])
    qb = np.array([[math.cos(theta / 2), math.sin(theta / 2), 0.0, 0.0]])
    np.testing.assert_allclose(rotation_angle_between(qa, qb), theta, rtol=1e-9)
    # q ≡ −q: the vector part of conj(q) ⊗ (−q) is −w v + w v − v × v, the same products cancelling, so
    # exactly 0 (tolerance 1e-15 for a reordering of the formula)
    np.testing.assert_allclose(rotation_angle_between(qb, -qb), 0.0, atol=1e-15)
    # 1 − 2 sin²(θ/2) vs cos θ and 2 cos(θ/2) sin(θ/2) vs sin θ: ≤ 2 roundings of entries ≤ 1 each side
    # (≤ 2ε = 4.4e-16 absolute; measured 1e-23)
    R = quat_to_matrix(qb)[0]
    np.testing.assert_allclose(R, _rot("x", theta), rtol=0, atol=1e-15)


def test_metrics_from_run_folder(tmp_path: Path) -> None:
    folder = write_synthetic_run(tmp_path / "run")
    ch, meta = synthetic()
    expected = compute_metrics(ch, meta)
    got = metrics_from_run(folder)
    assert set(scalar_metrics(got)) == set(scalar_metrics(expected))
    for k in scalar_metrics(expected):
        # exact: the same function on the same float64 channels (the npz round trip is lossless)
        np.testing.assert_allclose(got[k], expected[k], rtol=0, atol=0, err_msg=k)


def test_real_run_folder_metrics_match_summary(tmp_path: Path) -> None:
    from dockbench.sim.loop import run
    from dockbench.sim.scenario import scenario_from_dict

    from tests.helpers import scenario_dict

    d = scenario_dict("iiwa14_docking")
    d["sim"]["duration"] = 1.0
    r = run(scenario_from_dict(d), out_root=tmp_path)
    got = metrics_from_run(r.run_dir)
    recorded = r.metrics
    assert set(scalar_metrics(got)) == set(scalar_metrics(recorded))
    for k, v in scalar_metrics(recorded).items():
        # exact: the same function on the same float64 channels (the npz round trip is lossless)
        np.testing.assert_allclose(got[k], v, rtol=0, atol=0, err_msg=k)
    assert got["docking.depth"] < 0.0  # 1 s in, the tip is still above the mouth


def test_empty_telemetry_gives_no_metrics() -> None:
    ch, meta = synthetic()
    empty = {k: v[:0] for k, v in ch.items()}
    assert compute_metrics(empty, meta) == {}


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metric_names_have_a_layer_and_unit(name: str) -> None:
    layer = name.split(".")[0]
    assert layer in ("tracking", "contact", "safety", "docking", "hand", "controller", "orbit", "insertion")
    unit, doc = METRICS[name]
    assert isinstance(unit, str) and doc


def test_docs_metrics_page_lists_every_metric() -> None:
    from tests.helpers import REPO

    page = (REPO / "docs" / "metrics.md").read_text()
    missing = [name for name in METRICS if f"`{name}`" not in page]
    assert not missing, f"docs/metrics.md does not document: {missing}"


def test_run_accessors(tmp_path: Path) -> None:
    from dockbench.sim.errors import DockbenchError
    from dockbench.telemetry.run import Run, RunSegment

    run = Run.load(write_synthetic_run(tmp_path / "run"))
    ch = run.channel("wrench_truth_world")
    assert ch.unit == "N|N·m" and ch.data.shape == (N, 6) and "truth" in ch.doc
    assert run.channel("ee_pos").unit == "m"
    with pytest.raises(DockbenchError, match="no channel 'ee_posn'; channels: t, q, v"):
        run.channel("ee_posn")
    assert run.segments == (RunSegment("a", 0.0, 1.5), RunSegment("b", 1.5, 3.0))
    assert run.planner_duration == 3.0 and run.complete and run.status == "completed"
    assert run.joint_names == [f"joint{i + 1}" for i in range(NV)]
    assert run.name == "synthetic"
