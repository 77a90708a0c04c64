"""The uncertainty models of docs/theory/uncertainty.md (sim/uncertainty.py), checked numerically.

Statistics: every check draws from fixed seeds (numpy's PCG64 streams are the same on every platform), so
the tests are deterministic; the acceptance bands are those a correct sampler meets with probability
99.7% per statistic (3 standard errors, :func:`_check_stats`), so a wrong scale (a variance used as a
standard deviation, a missing √3 in the uniform's half-width) or a bias fails by many standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dockbench.sim.loop import build, simulate
from dockbench.sim.scenario import load_scenario
from dockbench.sim.uncertainty import (
    UncertaintyConfig,
    belief_transform,
    draw_belief,
    draw_ft_bias,
)

from tests.helpers import SCENARIOS, assert_within

DOCKING = SCENARIOS / "iiwa14_docking.yaml"
GRAVITY = SCENARIOS / "gravity" / "iiwa14_docking_gravity.yaml"
SIGMA_N = (0.5, 0.3, 0.2, 0.01, 0.02, 0.03)  # [N, N·m]


def _check_stats(x: np.ndarray, mean: np.ndarray, std: np.ndarray, kurtosis_excess: float = 0.0) -> None:
    """Sample mean within 3σ/√N of ``mean`` and sample std within 3 standard errors of ``std`` per column.

    The standard error of a sample standard deviation is σ·sqrt((κ − 1)/(4(N − 1))) with κ the kurtosis
    (3 for the normal: σ/√(2(N − 1)); 9/5 for the uniform: σ/√(5(N − 1)))."""
    n = x.shape[0]
    kappa = 3.0 + kurtosis_excess
    se_mean = std / math.sqrt(n)
    se_std = std * math.sqrt((kappa - 1.0) / (4.0 * (n - 1)))
    m, s = x.mean(axis=0), x.std(axis=0, ddof=1)
    ok = std > 0
    assert np.all(np.abs(m - mean)[ok] <= 3 * se_mean[ok]), (m, mean, se_mean)
    assert np.all(np.abs(s - std)[ok] <= 3 * se_std[ok]), (s, std, se_std)
    assert np.all(x[:, ~ok] == mean[~ok]), "an axis with σ = 0 must not move"


def test_recorded_ft_noise_has_the_configured_statistics() -> None:
    """The ft_noise channel of a 4 s run: zero mean and σ per sensor axis."""
    sc = load_scenario(DOCKING, {"sim.seed": 11, "uncertainty.ft_noise_std": list(SIGMA_N), "sim.duration": 4.0})
    tel, status, _, _ = simulate(build(sc))
    noise = tel.channels()["ft_noise"]
    assert status == "completed" and noise.shape == (4001, 6)
    _check_stats(noise, np.zeros(6), np.array(SIGMA_N))
    # white: the lag-1 autocorrelation of each axis within 3/√N of 0
    for k in range(6):
        r1 = np.corrcoef(noise[:-1, k], noise[1:, k])[0, 1]
        assert abs(r1) <= 3 / math.sqrt(len(noise)), (k, r1)


def test_noise_drawn_in_chunks_and_spilled_telemetry_equal_one_draw_of_the_run(monkeypatch, tmp_path) -> None:
    """The noise is drawn NOISE_CHUNK steps at a time (memory flat in the duration): the recorded channel
    equals one draw of the whole run (:func:`sim.uncertainty.ft_noise`, the same generator) bit for bit,
    for a run held in memory and for one whose telemetry spills to part files, with chunk boundaries of
    the noise (37 steps) and of the telemetry (100 rows) that do not coincide."""
    import dockbench.sim.uncertainty as unc_mod

    sc = load_scenario(DOCKING, {"sim.seed": 4, "uncertainty.ft_noise_std": list(SIGMA_N), "sim.duration": 0.5})
    whole = unc_mod.ft_noise(sc.uncertainty, 4, 501)
    ref, status, _, _ = simulate(build(sc))
    assert status == "completed" and np.array_equal(ref.channels()["ft_noise"], whole)
    monkeypatch.setattr(unc_mod, "NOISE_CHUNK", 37)
    tel, status, _, _ = simulate(build(sc), chunk_rows=100, spill_dir=tmp_path)
    assert status == "completed"
    ch = tel.channels()
    assert np.array_equal(ch["ft_noise"], whole)
    assert np.array_equal(ch["wrench_ext_world"], ref.channels()["wrench_ext_world"])


@pytest.mark.parametrize("path", [DOCKING, GRAVITY], ids=["gravity_off", "gravity_on"])
def test_noise_enters_the_pipeline_as_a_sensor_reading(path) -> None:
    """F_ext = −R_WS (r − b) − comp with r the reading: noise n (sensor axes) moves the world estimate by
    −R_WS n exactly, whatever the compensation (gravity on: the tool's weight is removed the same way).

    Bound: the estimate is −(R a) with a = f + n, rounded: |Δ| ≤ 4ε(|R||f| + |R||n|) per entry, compared
    at 1e-12 N (|f|, |n| ≲ 10 N: ≥ 10× headroom)."""
    sc = load_scenario(path, {"uncertainty.ft_noise_std": list(SIGMA_N), "sim.seed": 5})
    s = build(sc)
    s.uncertainty.start(10, s.wrench.comp[0:6], s.wrench.state, s.data.ctrl[s.asm.act_ids])
    wp, d = s.wrench, s.data
    T = s.dynamics.update(d.qpos[s.asm.qpos_adr], d.qvel[s.asm.dof_adr], 0.0).T_world_ee
    wp.comp[0:6] = 0.0
    base = wp.update(d, T).ext_world.copy()
    s.uncertainty.sense(3)
    noisy = wp.update(d, T).ext_world.copy()
    R = d.site_xmat[wp.site].reshape(3, 3)
    n = s.uncertainty.now
    assert_within(noisy[:3] - base[:3], -(R @ n[:3]), 1e-12, "force")
    assert_within(noisy[3:] - base[3:], -(R @ n[3:]), 1e-12, "moment")


@pytest.mark.parametrize("distribution,kurt", [("normal", 0.0), ("uniform", -1.2)])
def test_ft_bias_draws_have_the_configured_statistics(distribution, kurt) -> None:
    sigma = np.array([1.0, 0.5, 0.0, 0.05, 0.02, 0.01])
    cfg = UncertaintyConfig(ft_bias_std=tuple(sigma), distribution=distribution)
    x = np.array([draw_ft_bias(cfg, seed) for seed in range(4000)])
    _check_stats(x, np.zeros(6), sigma, kurt)
    if distribution == "uniform":
        assert np.all(np.abs(x) <= math.sqrt(3.0) * sigma + 1e-15)  # support [−√3σ, √3σ]
        assert np.all(np.abs(x).max(axis=0)[sigma > 0] > 0.99 * math.sqrt(3.0) * sigma[sigma > 0])


@pytest.mark.parametrize("distribution,kurt", [("normal", 0.0), ("uniform", -1.2)])
def test_belief_offset_draws_have_the_configured_statistics(distribution, kurt) -> None:
    sp, sr = np.array([0.002, 0.001, 0.0]), np.array([0.5, 0.0, 3.0])
    cfg = UncertaintyConfig(belief_position_std=tuple(sp), belief_rpy_std_deg=tuple(sr), distribution=distribution)
    draws = [draw_belief(cfg, seed) for seed in range(4000)]
    _check_stats(np.array([p for p, _ in draws]), np.zeros(3), sp, kurt)
    _check_stats(np.array([r for _, r in draws]), np.zeros(3), sr, kurt)


def test_the_run_applies_its_draws() -> None:
    """The bias reaches the pipeline (wrench.ft_bias + δb) and the belief is T_target · T_offset · T_δ (one
    4×4 product more: ≤ 4ε|T||T| per entry, compared at 1e-14)."""
    over = {"sim.seed": 7, "uncertainty.ft_bias_std": [0.5, 0.5, 0.5, 0.0, 0.0, 0.01],
            "uncertainty.belief_position_std": [0.002, 0.002, 0.0], "uncertainty.belief_rpy_std_deg": [1.0, 0.0, 5.0],
            "wrench.ft_bias": [0.1, 0.0, 0.0, 0.0, 0.0, 0.0]}
    sc = load_scenario(DOCKING, over)
    s = build(sc)
    db = draw_ft_bias(sc.uncertainty, 7)
    np.testing.assert_array_equal(s.wrench.ft_bias, np.array(sc.wrench.ft_bias) + db)
    dp, dr = draw_belief(sc.uncertainty, 7)
    T = sc.target.config.pose.matrix() @ sc.target.config.belief_offset.matrix() @ belief_transform(dp, dr)
    assert_within(s.asm.target.T_world_believed, T, 1e-14)
    assert s.uncertainty.record["ft_bias_drawn"] == db.tolist()
    assert s.uncertainty.record["belief_offset_drawn"] == {"position": dp.tolist(), "rpy_deg": dr.tolist()}
    # the planner aims at the believed drogue: the goal moved by the drawn offset (in the target's axes)
    plain = build(load_scenario(DOCKING, {"wrench.ft_bias": [0.1, 0, 0, 0, 0, 0]}))
    shift = s.T_world_goal[:3, 3] - plain.T_world_goal[:3, 3]
    assert np.linalg.norm(shift) > 1e-3
    # another seed draws another belief; the same seed the same one
    other = build(sc.replace({"sim.seed": 8}))
    assert not np.array_equal(other.asm.target.T_world_believed, s.asm.target.T_world_believed)
    np.testing.assert_array_equal(build(sc).asm.target.T_world_believed, s.asm.target.T_world_believed)


@pytest.mark.parametrize("sensing,control", [(3, 0), (0, 2), (2, 1)])
def test_delays_shift_the_signals_by_whole_control_periods(sensing, control) -> None:
    """wrench_used[k] = F̂[k − d_s] and tau_applied[k] = clip(τ_cmd[k − d_c]) exactly (copies), the first
    d_s rows the first estimate, the first d_c rows the plant's initial torque (0 at zero gravity)."""
    sc = load_scenario(DOCKING, {"uncertainty.sensing_delay": sensing, "uncertainty.control_delay": control,
                                 "sim.duration": 6.0})  # into the contact phase (first contact ≈ 4.7 s)
    s = build(sc)
    tel, status, _, _ = simulate(s)
    c = tel.channels()
    assert status == "completed"
    ext, used = c["wrench_ext_world"], c["wrench_used_world"]
    assert np.abs(ext).max() > 1.0  # in contact: the shift is tested on a signal that moves
    if sensing:
        np.testing.assert_array_equal(used[sensing:], ext[:-sensing])
        np.testing.assert_array_equal(used[:sensing], np.repeat(ext[:1], sensing, axis=0))
    else:
        np.testing.assert_array_equal(used, ext)
    clipped = np.minimum(np.maximum(c["tau_cmd"], -s.plant.tau_max), s.plant.tau_max)
    if control:
        np.testing.assert_array_equal(c["tau_applied"][control:], clipped[:-control])
        np.testing.assert_array_equal(c["tau_applied"][:control], 0.0)
    else:
        np.testing.assert_array_equal(c["tau_applied"], clipped)
    # saturation is judged on this step's command, not on the delayed torque
    np.testing.assert_array_equal(c["saturated"], np.any(clipped != c["tau_cmd"], axis=1))


def test_off_means_off_bit_for_bit() -> None:
    """An explicit all-zero uncertainty block (any seed) is the scenario without one, bit for bit."""
    from dockbench.telemetry.run import first_difference

    a = simulate(build(load_scenario(DOCKING, {"sim.duration": 5.0})))[0].channels()
    b = simulate(build(load_scenario(DOCKING, {"sim.duration": 5.0, "sim.seed": 99, "uncertainty": {
        "ft_noise_std": [0] * 6, "sensing_delay": 0, "distribution": "uniform"}})))[0].channels()
    assert first_difference(a, b) is None
    assert build(load_scenario(DOCKING)).uncertainty is None

