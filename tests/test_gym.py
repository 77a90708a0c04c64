"""dockbench.gym: the Gymnasium environment over the control cycle (docs/gym.md).

Short episodes (tens of milliseconds of simulated time) on iiwa14_docking: the checks are about the
environment's plumbing (spaces, seeding, the cycle it steps, reward and termination, run folders), not about
docking. Skipped when gymnasium (the ``gym`` extra) is not installed.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium", reason="the gym extra (gymnasium) is not installed")

from dockbench.sim.loop import build, simulate  # noqa: E402

from dockbench.gym import DockingEnv, RewardConfig  # noqa: E402

EPS = np.finfo(float).eps
SHORT = 0.06  # s: three policy steps at 50 Hz


def _env(**kw) -> DockingEnv:
    kw.setdefault("max_time", SHORT)
    return DockingEnv(kw.pop("scenario", "iiwa14_docking"), **kw)


@pytest.mark.parametrize("mode", ["impedance", "setpoint", "torque"])
def test_check_env_passes(mode):
    from gymnasium.utils.env_checker import check_env

    env = _env(action_mode=mode, policy_rate=50.0)
    check_env(env, skip_render_check=True)


def test_registered_ids_make_the_environment():
    env = gymnasium.make("dockbench/Docking-v0", scenario="iiwa14_keyed_khatib", max_time=SHORT)
    assert env.unwrapped.base_scenario.name == "iiwa14_keyed_khatib"  # the folder-less shipped name resolves
    obs, _ = env.reset(seed=3)
    assert env.observation_space.contains(obs)


def _rollout(env: DockingEnv, seed: int, n: int = 3):
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out = [obs]
    for _ in range(n):
        a = rng.uniform(-1.0, 1.0, env.action_space.shape)
        obs, r, term, trunc, info = env.step(a)
        out.append((obs, r, term, trunc))
    env.cycle.telemetry.finish()
    return out, env.cycle.telemetry.channels(), env.draw


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return np.array_equal(np.asarray(a), np.asarray(b))


def test_seeded_reset_reproduces_an_episode_bit_for_bit():
    """Two environments, the same seed and actions: the draws, every observation and reward and every
    telemetry channel are identical (the same operations in the same order); another seed draws otherwise."""
    uncertainty = {"uncertainty": {"ft_noise_std": [0.2, 0.2, 0.2, 0.005, 0.005, 0.005],
                                   "belief_position_std": [0.001, 0.001, 0.0005]}}
    a = _rollout(_env(overrides=uncertainty), seed=11)
    b = _rollout(_env(overrides=uncertainty), seed=11)
    assert _same(a[2], b[2])
    assert _same(a[0], b[0])
    assert _same(a[1], b[1])
    c = _rollout(_env(overrides=uncertainty), seed=12)
    assert a[2] != c[2]
    assert not np.array_equal(a[1]["wrench_ext_world"], c[1]["wrench_ext_world"])  # another noise sequence


def test_zero_impedance_action_is_the_simulate_run():
    """The env steps the cycle simulate runs: a zero action (no offset, unit gain scales) gives simulate's
    telemetry of the same scenario bit for bit."""
    env = _env(max_time=0.1)
    env.reset(seed=5)
    zero = np.zeros(env.action_space.shape)
    while not env.done:
        env.step(zero)
    env.cycle.telemetry.finish()
    got = env.cycle.telemetry.channels()
    assert env.i == 100
    want = simulate(build(env.scenario), 0.099).telemetry.channels()  # t = 0 … 99 ms: 100 steps
    assert got.keys() == want.keys()
    for k in want:
        assert np.array_equal(got[k], want[k], equal_nan=True), k


def test_impedance_offset_moves_the_reference_by_the_action():
    """a = (1, 0, 0, …): the reference position is the planner's plus offset_limit along the believed target's
    x axis; the rounding of x + δ − x is below 2 ε max|x| per component."""
    runs = []
    for ax in (0.0, 1.0):
        env = _env(randomize={})
        env.reset(seed=0)
        a = np.zeros(env.action_space.shape)
        a[0] = ax
        env.step(a)
        env.cycle.telemetry.finish()
        runs.append((env, env.cycle.telemetry.channels()["ee_pos_des"][: env.i]))
    env = runs[1][0]
    want = env.setup.asm.target.T_world_believed[:3, 0] * env.offset_limit[0]
    diff = runs[1][1] - runs[0][1]
    bound = 2 * EPS * np.max(np.abs(runs[0][1]))
    assert np.max(np.abs(diff - want)) <= bound


def test_khatib_gain_scales_reach_the_law():
    env = _env()
    env.reset(seed=0)
    a = np.zeros(env.action_space.shape)
    assert a.shape == (10,)  # offset 6, Khatib: k and k_rot scales, d and d_rot scales
    a[6], a[9] = 1.0, -1.0  # k × 4, d_rot / 4
    obs, *_ = env.step(a)
    c, b = env.setup.controller.config, env.base_scenario.controller.config
    assert abs(c.k - 4 * b.k) <= 4 * EPS * 4 * b.k  # exp(log 4) = 4 to a few ulp
    assert abs(c.d_rot - b.d_rot / 4) <= 4 * EPS * b.d_rot
    assert c.k_rot == b.k_rot and c.d == b.d
    assert np.array_equal(obs["stiffness"], [c.k] * 3 + [c.k_rot] * 3)


def test_se3_gain_scale_equals_the_scaled_scenario():
    """Scaling the SE(3) law's K and D from the first step is the run of a scenario with the scaled
    diagonals, bit for bit (the env re-derives what the law derives from its config)."""
    env = _env(scenario="iiwa14_docking_se3", randomize={}, max_time=0.04)
    env.reset(seed=0)
    a = np.zeros(env.action_space.shape)
    assert a.shape == (18,)
    a[6:12] = 0.5
    a[12:18] = -0.5
    while not env.done:
        env.step(a)
    env.cycle.telemetry.finish()
    got = env.cycle.telemetry.channels()
    b = env.base_scenario.controller.config
    s_k, s_d = np.exp(0.5 * math.log(4.0)), np.exp(-0.5 * math.log(4.0))
    sc = env.scenario.replace({"controller.k_diag": [float(x) for x in np.array(b.k_diag) * s_k],
                               "controller.d_diag": [float(x) for x in np.array(b.d_diag) * s_d]})
    want = simulate(build(sc), 0.039).telemetry.channels()
    for k in ("tau_cmd", "q", "v"):
        assert np.array_equal(got[k], want[k]), k


def test_hqp_stiffness_scales_equal_the_scaled_scenario():
    """The HQP law's six stiffness scales (K_0 per axis, its damping D_r derived from it) from the first step
    are the run of a scenario with the scaled k0, bit for bit (compiled kernel or Python path alike)."""
    env = _env(scenario="iiwa14_docking_hqp", randomize={}, max_time=0.04)
    env.reset(seed=0)
    a = np.zeros(env.action_space.shape)
    assert a.shape == (18,)  # offset 6, HQP: six stiffness and six damping scales
    a[6:12] = [0.5, -0.5, 1.0, -1.0, 0.25, 0.0]
    while not env.done:
        env.step(a)
    env.cycle.telemetry.finish()
    got = env.cycle.telemetry.channels()
    k0 = np.array(env.base_scenario.controller.config.k0) * np.exp(a[6:12] * math.log(4.0))
    sc = env.scenario.replace({"controller.k0": [float(x) for x in k0]})
    want = simulate(build(sc), 0.039).telemetry.channels()
    for k in ("tau_cmd", "q", "v"):
        assert np.array_equal(got[k], want[k]), k
    assert not np.array_equal(got["tau_cmd"], simulate(build(env.scenario), 0.039).telemetry.channels()["tau_cmd"])
    assert np.array_equal(env._obs()["stiffness"], k0)


def test_hqp_damping_scales_are_a_congruence_of_the_law_damping():
    """One control step from the same state: with scales d the law's D_r is diag(√d) D_r diag(√d) of the
    unscaled law (and K_r unchanged), so d_i scales axis i's damping and D_r stays symmetric positive
    definite. Bound: D_r is a product of two factors and a sum, each entry rounded a few times → 8 ε |D|."""
    d = np.array([4.0, 0.25, 2.0, 0.5, 1.0, 3.0])
    runs = []
    for scale in (np.ones(6), d):
        env = _env(scenario="iiwa14_docking_hqp", randomize={}, policy_rate=1000.0, max_time=0.002)
        env.reset(seed=0)
        a = np.zeros(env.action_space.shape)
        a[12:18] = np.log(scale) / math.log(4.0)
        env.step(a)
        p = env.setup.controller.prob
        runs.append((p.D_r.copy(), p.K_r.copy(), env._gains.d_scale.copy()))
    (D0, K0, _), (D1, K1, d_used) = runs
    assert np.max(np.abs(d_used - d)) <= 4 * EPS * np.max(d)  # exp(log d) to a few ulp
    sq = np.sqrt(d_used)
    want = sq[:, None] * D0 * sq
    assert np.max(np.abs(D1 - want)) <= 8 * EPS * np.max(np.abs(want))
    assert np.array_equal(K1, K0)
    assert np.max(np.abs(D1 - D1.T)) <= 8 * EPS * np.max(np.abs(D1))
    assert np.min(np.linalg.eigvalsh(0.5 * (D1 + D1.T))) > 0.0
    assert np.max(np.abs(D1 - D0)) > 0.1 * np.max(np.abs(D0))  # the scales did change the damping


def test_impedance_refuses_a_law_the_offset_cannot_reach():
    import dockbench

    sc = dockbench.load_scenario("iiwa14_docking_se3topp")  # the se3_topp planner ...
    sc = sc.replace(controller=dockbench.load_scenario("iiwa14_docking_se3").controller)  # ... and the SE(3) law
    with pytest.raises(ValueError, match="pass-through"):
        _env(scenario=sc)
    _env(scenario=sc, action_mode="torque")  # the other modes do not need the reference


def test_setpoint_and_torque_actions():
    env = _env(action_mode="setpoint")
    env.reset(seed=0)
    env.step(np.array([1.0]))
    assert env.setup.controller.config.force_setpoint.force == env.force_max
    assert env.setup.controller.setpoint.config.force == env.force_max
    env = _env(action_mode="torque", policy_rate=50.0)
    env.reset(seed=0)
    a = np.linspace(-0.01, 0.01, env.action_space.shape[0])
    env.step(a)
    env.cycle.telemetry.finish()
    tau = env.cycle.telemetry.channels()["tau_cmd"][: env.i]
    assert np.array_equal(tau, np.broadcast_to(a * env._tau_max, tau.shape))


def test_reward_and_termination_known_answers():
    # progress: (e_prev − e) / 1 mm, nothing else by default
    env = _env()
    _, info0 = env.reset(seed=0)
    _, r, term, trunc, info1 = env.step(np.zeros(env.action_space.shape))
    assert r == (info0["seat_error"] - info1["seat_error"]) / 0.001
    assert not term and not trunc
    env.step(np.zeros(env.action_space.shape))
    *_, term, trunc, info = env.step(np.zeros(env.action_space.shape))
    assert trunc and not term and info["end"] == "time"  # 3 policy steps = max_time
    # a force limit below the peak ends the first step with the penalty
    env = _env(reward={"force_limit": -1.0})
    _, info0 = env.reset(seed=0)
    _, r, term, _, info1 = env.step(np.zeros(env.action_space.shape))
    assert term and info1["end"] == "force"
    assert r == (info0["seat_error"] - info1["seat_error"]) / 0.001 - RewardConfig().force_penalty
    # seated (tolerances that always hold) from the end of the first 20 ms step; seat_hold = 20 ms later the
    # second step ends with the bonus
    env = _env(reward={"seat_tolerance": 1.0, "lateral_tolerance": 1.0, "seat_hold": 0.02})
    env.reset(seed=0)
    *_, term, _, _ = env.step(np.zeros(env.action_space.shape))
    assert not term
    _, r, term, _, info = env.step(np.zeros(env.action_space.shape))
    assert term and info["end"] == "seated" and r > 5.0  # + 10, progress of a few µs per step


def test_jam_rule():
    """The supervisor's jam rule: f_a ≥ 4 N for 0.4 s with < 0.5 mm of progress, armed beyond 4 mm."""
    env = _env()
    env.reset(seed=0)
    j = env._jammed
    assert not j(0.0, 0.02, 5.0)
    assert not j(0.2, 0.02, 5.0)
    assert j(0.4, 0.0199, 5.0)  # 0.1 mm in 0.4 s
    env._jam_since = None
    assert not j(0.0, 0.02, 5.0) and not j(0.4, 0.019, 5.0)  # 1 mm of progress: a new streak
    assert not j(0.8, 0.019, 3.9)  # below the force
    assert not j(1.0, 0.003, 5.0) and not j(1.5, 0.003, 5.0)  # seated side of the margin: disarmed


def test_episode_saves_as_a_run_folder(tmp_path):
    import dockbench

    env = _env(max_time=0.1)
    env.reset(seed=2)
    while not env.done:
        env.step(np.zeros(env.action_space.shape))
    result = env.save_run(tmp_path)
    run = dockbench.Run.load(result.run_dir)
    assert run.meta["status"] == "completed"
    assert len(run.t) == env.i == 100
    assert result.verdict == "INCOMPLETE"  # 0.1 s is shorter than the planner
    assert "contact.peak_force_truth" in result.metrics
    # what applies to any run folder applies to an episode's: a figure, the MCAP and Rerun exports
    import matplotlib

    matplotlib.use("Agg")
    from dockbench.telemetry import plots

    plots.fig_contact_force(run)
    if importlib.util.find_spec("mcap") is not None:
        from dockbench.telemetry import export

        export.write_mcap(result.run_dir, tmp_path / "episode.mcap")
        assert (tmp_path / "episode.mcap").stat().st_size > 0
    if importlib.util.find_spec("rerun") is not None:
        from dockbench.telemetry import export

        export.write_rrd(result.run_dir, tmp_path / "episode.rrd")
        assert (tmp_path / "episode.rrd").stat().st_size > 0


def test_async_vector_env_runs_two_processes():
    from gymnasium.vector import AsyncVectorEnv

    venv = AsyncVectorEnv([lambda: _env(max_time=0.04)] * 2)
    try:
        obs, _ = venv.reset(seed=[0, 1])
        assert obs["q"].shape == (2, 7)
        obs, r, term, trunc, _ = venv.step(np.zeros((2, 10)))
        assert r.shape == (2,)
    finally:
        venv.close()


def test_robosuite_compare_dockbench_worker(capsys):
    """experiments/robosuite_compare.py's dockbench child: the episode it times is the requested length at the
    requested policy rate (robosuite's side needs its own venv and is not run here)."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "experiments" / "robosuite_compare.py"
    spec = importlib.util.spec_from_file_location("robosuite_compare", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(["--worker", "dockbench", "--worker-args",
              json.dumps({"scenario": "iiwa14_docking", "seconds": 0.06, "policy_rate": 50.0, "episodes": 1})])
    out = capsys.readouterr().out
    r = json.loads(out.split("RESULT ", 1)[1])
    assert r["steps"] == 3 and len(r["walls"]) == 1 and r["walls"][0] > 0.0
    assert len(r["cpus"]) == 1 and r["cpus"][0] > 0.0  # the child's CPU time of the same episode
    assert abs(r["sim_s"] - 0.06) <= 1e-12 and r["timestep"] == 0.001 and r["control_period"] == 0.001
    assert "import robosuite" in mod.ROBOSUITE_WORKER and "SIMULATION_TIMESTEP" in mod.ROBOSUITE_WORKER


def test_a_scenario_that_ends_runs_when_seated_is_refused_with_the_reward_key_to_use():
    """sim.end_after_seated would end the cycle under the episode (a stop the environment scores as a failure);
    the episode's seat rule is the reward's seat_hold."""
    with pytest.raises(ValueError, match="seat_hold"):
        _env(overrides={"sim.end_after_seated": 2.0})
    env = _env(overrides={"sim.end_after_seated": None})
    assert env.base_scenario.sim.end_after_seated is None
