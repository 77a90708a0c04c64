"""Gymnasium environments over the docking loop (docs/gym.md is the reference).

::

    import gymnasium
    import dockbench.gym  # registers the dockbench/ environments

    env = gymnasium.make("dockbench/Docking-v0", scenario="keyed/iiwa14_keyed_khatib", action_mode="impedance")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    env.unwrapped.save_run("runs")  # the episode as a run folder (plots, export, gates)

The environment steps the same staged control cycle as :func:`dockbench.sim.loop.simulate`
(:class:`dockbench.sim.cycle.Cycle`): the policy acts every ``1 / policy_rate`` seconds and, in between, the
scenario's law runs the cycle at its control rate. The action enters the cycle through two stage variants
chosen when the episode's cycle is built: ``shape_reference`` (a pose offset after the plan stage) and
``torque_input`` (the act stage's τ from the policy); gains and the force set-point are changed on the law's
configuration between policy steps. With a zero action in ``impedance`` mode an episode is the run
``simulate`` gives, bit for bit (tests/test_gym.py).

Needs the ``gym`` extra (``pip install dockbench[gym]``: gymnasium).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dockbench.sim.extras import require

gymnasium = require("gymnasium", "gym", "dockbench.gym (the Gymnasium environments)")
from gymnasium import spaces  # noqa: E402
from mujoco import mju_mat2Quat  # noqa: E402

from dockbench.controllers.insertion import JamConfig  # noqa: E402
from dockbench.sim.cycle import Cycle, Outcome, Status  # noqa: E402
from dockbench.sim.scenario import Scenario, load_scenario, resolve_scenario, shipped_scenarios  # noqa: E402
from dockbench.telemetry.gates import SEAT_TOLERANCE  # noqa: E402

ACTION_MODES = ("impedance", "setpoint", "torque")

#: what ``reset`` draws by default (a campaign's random axes: key path → distribution; the drawn value
#: replaces the key, sim/campaign/spec.py): the belief error of the target's pose, the true target's pose
#: and the contact friction. F/T noise and bias are drawn by the scenario's ``uncertainty:`` block from the
#: episode's ``sim.seed`` (also drawn by ``reset``).
DEFAULT_RANDOMIZE: dict[str, dict[str, dict[str, float]]] = {
    "target.belief_offset.position[0]": {"uniform": {"low": -0.002, "high": 0.002}},
    "target.belief_offset.position[1]": {"uniform": {"low": -0.002, "high": 0.002}},
    "target.pose.position[0]": {"uniform": {"low": 0.54, "high": 0.56}},
    "target.pose.position[1]": {"uniform": {"low": -0.01, "high": 0.01}},
    "target.friction": {"uniform": {"low": 0.2, "high": 0.5}},
    "tool.friction": {"uniform": {"low": 0.2, "high": 0.5}},
}


@dataclass(frozen=True)
class RewardConfig:
    """Reward and termination (docs/gym.md, "Reward and termination"). Lengths in m, forces in N.

    Per policy step: ``progress_weight · (e_prev − e) / 1 mm`` (e = the seat error of the *true* target, the
    metric ``docking.seat_error``), ``− time_weight · Δt``; at the end: ``+ seat_bonus`` when seated,
    ``− force_penalty`` when the contact force exceeded ``force_limit``, ``− jam_penalty`` on a jam,
    ``− force_penalty`` when the simulation diverged.
    """

    progress_weight: float = 1.0
    time_weight: float = 0.0
    seat_bonus: float = 10.0
    #: |seat error| and lateral error [m] within which the tool counts as seated (the depth gate's tolerance)
    seat_tolerance: float = SEAT_TOLERANCE
    lateral_tolerance: float = 0.001
    #: seated for this long [s] ends the episode (terminated); None: never ends on seat
    seat_hold: float | None = 0.2
    #: peak ‖f‖ of the contact (truth) [N] that ends the episode; None: the scenario's
    #: ``contact.peak_force_truth`` gate, else 40 N
    force_limit: float | None = None
    force_penalty: float = 10.0
    #: a stall (the insertion supervisor's jam rule with its defaults: f_a ≥ 4 N for 0.4 s with < 0.5 mm of
    #: progress, armed more than 4 mm short of the seat) ends the episode; False: never
    jam: bool = True
    jam_penalty: float = 5.0


def _resolve(name_or_path: str | Path) -> Path:
    """A scenario file, a shipped name, or a shipped name without its folder (``iiwa14_keyed_khatib``)."""
    try:
        return resolve_scenario(name_or_path)
    except Exception:
        stem = str(name_or_path).removesuffix(".yaml")
        hits = [n for n in shipped_scenarios() if n.rsplit("/", 1)[-1] == stem]
        if len(hits) == 1:
            return resolve_scenario(hits[0])
        raise


def _scenario_gate_max(sc: Scenario, metric: str) -> float | None:
    for g in sc.gates:
        if g.metric == metric and g.max is not None:
            return float(g.max)
    return None


def _rotvec_matrix(w: np.ndarray) -> np.ndarray:
    """exp(ŵ) (Rodrigues)."""
    th = float(np.linalg.norm(w))
    if th == 0.0:
        return np.eye(3)
    k = w / th
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + math.sin(th) * K + (1.0 - math.cos(th)) * (K @ K)


class _Gains:
    """The law's stiffness K and damping D as the impedance action scales them (``n`` independent scales:
    Khatib 2 — translational, rotational; SE(3) 6 — the diagonals; HQP 6 — the axes of K_0 and of the
    derived D_r). The law scales its own gains (``set_gain_scales``, ``n_gain_scales``: KhatibController,
    SE3LieController, HQPController), so that its Python path and its compiled kernel see the same new
    gains, and reports its stiffness (``stiffness_diagonal``); a law without them takes no gain scales and
    reports zeros."""

    def __init__(self, ctrl: Any):
        self.ctrl = ctrl
        self.n = int(getattr(ctrl, "n_gain_scales", 0))
        self.k_scale, self.d_scale = np.ones(self.n), np.ones(self.n)

    def stiffness(self) -> np.ndarray:
        """The law's current stiffness diagonal (6): N/m ×3, N·m/rad ×3 (zeros: the law reports none)."""
        report = getattr(self.ctrl, "stiffness_diagonal", None)
        k = report() if report is not None else None
        return np.zeros(6) if k is None else k

    def set(self, k_scale: np.ndarray, d_scale: np.ndarray) -> bool:
        """Give the law these scales; False (nothing done) when they are the ones it has."""
        if self.n == 0 or (k_scale.tolist() == self.k_scale.tolist() and d_scale.tolist() == self.d_scale.tolist()):
            return False
        self.k_scale, self.d_scale = k_scale.copy(), d_scale.copy()
        self.ctrl.set_gain_scales(k_scale, d_scale)
        return True


class DockingEnv(gymnasium.Env):
    """A docking episode of a scenario as a Gymnasium environment (docs/gym.md).

    Args:
        scenario: a scenario file, a shipped name (``iiwa14_docking``, ``keyed/iiwa14_keyed_khatib``; the
            folder may be left out when the name is unique) or a :class:`Scenario`.
        action_mode: ``impedance`` | ``setpoint`` | ``torque`` (docs/gym.md, "Actions").
        policy_rate: policy steps per second [Hz] (default 50; ``torque``: the control rate).
        max_time: episode length [s] (default: the scenario's duration, planner + settle time).
        randomize: key path → ``{"uniform": {low, high}}`` | ``{"normal": {mean, std}}`` drawn by ``reset``
            (None: :data:`DEFAULT_RANDOMIZE` when the scenario has a target; ``{}``: none).
        overrides: applied to the scenario once (key paths, as ``Scenario.replace``), e.g. an ``uncertainty``
            block.
        reward: a :class:`RewardConfig` or a mapping of its fields.
        offset_limit: the largest reference offset [m, rad] (impedance mode: position, rotation).
        gain_ratio: the stiffness / damping scales span [1/gain_ratio, gain_ratio] (log scale).
        force_max: the largest force set-point [N] (setpoint mode).
        record: keep the episode's telemetry (needed by :meth:`save_run`).
        kernel_check: the kernel guard's period (as ``simulate``).
    """

    metadata = {"render_modes": []}  # noqa: RUF012

    def __init__(
        self,
        scenario: str | Path | Scenario = "iiwa14_docking",
        *,
        action_mode: str = "impedance",
        policy_rate: float | None = None,
        max_time: float | None = None,
        randomize: dict[str, Any] | None = None,
        overrides: Any = None,
        reward: RewardConfig | dict[str, Any] | None = None,
        offset_limit: tuple[float, float] = (0.01, 0.1),
        gain_ratio: float = 4.0,
        force_max: float = 20.0,
        record: bool = True,
        kernel_check: int | None = None,
    ):
        if action_mode not in ACTION_MODES:
            raise ValueError(f"action_mode must be one of {ACTION_MODES}, got {action_mode!r}")
        sc = scenario if isinstance(scenario, Scenario) else load_scenario(_resolve(scenario))
        if overrides is not None:
            sc = sc.replace(overrides)
        if sc.sim.end_after_seated is not None:  # the episode's own seat rule ends it (reward.seat_hold, a bonus)
            raise ValueError(
                f"{sc.source_file or sc.name}: sim.end_after_seated ends a run, not an episode; an episode ends "
                "when seated by the reward's seat_hold (DockingEnv(reward={'seat_hold': ...})): remove the key "
                "(e.g. overrides={'sim.end_after_seated': None})")
        if action_mode == "setpoint" and getattr(sc.controller.config, "force_setpoint", False) is False:
            raise ValueError(f"action_mode setpoint needs a law with a force set-point (khatib, hqp), "
                             f"not {sc.controller.type!r}")
        if action_mode == "setpoint" and sc.controller.config.force_setpoint is None:
            sc = sc.replace({"controller.force_setpoint": {"force": 0.0, "start": "contact"}})
        if not record:
            sc = sc.replace({"telemetry.enabled": False})
        self.base_scenario, self.action_mode = sc, action_mode
        self.randomize = (DEFAULT_RANDOMIZE if sc.target is not None else {}) if randomize is None else dict(randomize)
        self.reward_config = reward if isinstance(reward, RewardConfig) else RewardConfig(**(reward or {}))
        self.offset_limit, self.gain_ratio, self.force_max = offset_limit, float(gain_ratio), float(force_max)
        self.kernel_check = kernel_check
        T_c = sc.sim.control_period
        rate = policy_rate if policy_rate is not None else (1.0 / T_c if action_mode == "torque" else 50.0)
        self.steps_per_action = max(1, int(round(1.0 / (rate * T_c))))
        self.policy_period = self.steps_per_action * T_c
        self._max_time = max_time
        # a first build fixes the spaces' sizes (joints, gain scales)
        from dockbench.sim.loop import build

        self._build = build
        setup = build(sc)
        nv = setup.plant.nv
        mref = getattr(setup.controller, "mref", None)
        if action_mode == "impedance" and mref is not None and mref.passthrough:
            raise ValueError(
                f"action_mode impedance: the {sc.controller.type} law reads the body motion of the "
                f"{sc.planner.type} planner directly (planners/motion_reference.py, pass-through), so an offset of "
                "the reference would not reach it; use a position planner (e.g. quintic) or another law"
            )
        self._n_gain = _Gains(setup.controller).n if action_mode == "impedance" else 0
        self._tau_max = np.array(setup.plant.tau_max, dtype=float)
        if action_mode == "impedance":
            n = 6 + 2 * self._n_gain
        elif action_mode == "setpoint":
            n = 1
        else:
            n = nv
        self.action_space = spaces.Box(-1.0, 1.0, shape=(n,), dtype=np.float64)
        self._action_shape = (n,)
        inf = np.inf
        self.observation_space = spaces.Dict({
            "pose": spaces.Box(-inf, inf, shape=(7,), dtype=np.float64),
            "goal_error": spaces.Box(-inf, inf, shape=(3,), dtype=np.float64),
            "twist": spaces.Box(-inf, inf, shape=(6,), dtype=np.float64),
            "wrench": spaces.Box(-inf, inf, shape=(6,), dtype=np.float64),
            "q": spaces.Box(-inf, inf, shape=(nv,), dtype=np.float64),
            "v": spaces.Box(-inf, inf, shape=(nv,), dtype=np.float64),
            "stiffness": spaces.Box(0.0, inf, shape=(6,), dtype=np.float64),
            "time": spaces.Box(0.0, inf, shape=(1,), dtype=np.float64),
        })
        self.setup = None
        self.cycle: Cycle | None = None
        self.scenario: Scenario | None = None

    # ------------------------------------------------------------------ episode
    def _draw(self) -> dict[str, Any]:
        """This episode's overrides: every random key and ``sim.seed`` (from :attr:`np_random`)."""
        rng = self.np_random
        over: dict[str, Any] = {}
        for key in sorted(self.randomize):
            spec = self.randomize[key]
            if "uniform" in spec:
                over[key] = float(rng.uniform(spec["uniform"]["low"], spec["uniform"]["high"]))
            elif "normal" in spec:
                over[key] = float(spec["normal"]["mean"] + spec["normal"]["std"] * rng.standard_normal())
            else:
                raise ValueError(f"randomize[{key!r}] needs 'uniform' or 'normal', got {spec!r}")
        over["sim.seed"] = int(rng.integers(0, 2**31 - 1))
        return over

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.draw = self._draw()
        sc = self.base_scenario.replace(self.draw)
        self.scenario = sc
        setup = self.setup = self._build(sc)
        duration = setup.duration if self._max_time is None else self._max_time
        # whole policy periods: ⌈duration / policy period⌉ of them (t = 0 … n T_c − T_c)
        self.n_steps = self.steps_per_action * max(1, math.ceil(duration / self.policy_period - 1e-9))
        mode = self.action_mode
        self._dp = np.zeros(3)
        self._dR = np.eye(3)
        self._shaping = [False, False]  # [the reference is offset (δp ≠ 0 or δθ ≠ 0), it is rotated (δθ ≠ 0)]
        self._action_key: list[float] | None = None  # the last action applied (as a list: an exact comparison)
        self._tau_in = np.zeros(setup.plant.nv) if mode == "torque" else None
        target = setup.asm.target
        self._R_believed = target.T_world_believed[:3, :3].copy() if target is not None else np.eye(3)
        self.cycle = cyc = Cycle(
            setup, self.n_steps, kernel_check=self.kernel_check,
            shape_reference=self._shaper() if mode == "impedance" else None, torque_input=self._tau_in,
        )
        self._gains = _Gains(setup.controller)
        self._fs_base = getattr(setup.controller.config, "force_setpoint", None)
        unc = setup.uncertainty
        if unc is not None and unc.sensing_delay > 0:
            self._w_used = unc.w_delayed
        else:
            self._w_used = cyc.w_obs if cyc.observer is not None else setup.wrench.state
        self._truth = setup.wrench.state.truth_world
        self._truth_rows = cyc.telemetry.arrays["wrench_truth_world"] if sc.telemetry.enabled else None
        self._snap = setup.dynamics.snap
        self._T_c = sc.sim.control_period
        # the cycle's step with the action's reference offset, and without it (while the offset is zero)
        self._step_shaped = cyc.step
        self._step_plain = cyc.step if cyc.step_unshaped is None else cyc.step_unshaped
        self._bind_observation(setup)
        self.i = 0
        self.status: tuple[Status, str] = (Status.COMPLETED, "")
        self._status_name = str(Status.COMPLETED)
        self.done = False
        self._wall = 0.0
        # reward state
        rc = self.reward_config
        self._force_limit = rc.force_limit if rc.force_limit is not None else (
            _scenario_gate_max(sc, "contact.peak_force_truth") or 40.0)
        self._jam = JamConfig()
        self._jam_since: float | None = None
        self._jam_r0 = 0.0
        self._seated_since: float | None = None
        self.peak_force = 0.0
        e, lat = self._seat()
        self._e_prev = e
        return self._obs(), self._info(e, lat, "")

    def _bind_observation(self, setup: Any) -> None:
        """What :meth:`_obs` and :meth:`_seat` read and write, bound once an episode: views of the loop's
        arrays (they never move during a run), the episode's constants (the believed and the true target's
        pose are fixed over an episode) and the observation's own parts (pose and goal error, filled in place
        each policy step; stiffness and time)."""
        snap, target = self._snap, setup.asm.target
        Tb = target.T_world_believed if target is not None else np.eye(4)
        self._RbT, self._ob = Tb[:3, :3].T, Tb[:3, 3]  # believed target frame: Rbᵀ, origin (world)
        self._goal_b = self._RbT @ (setup.T_world_goal[:3, 3] - self._ob)  # the goal in the believed frame
        self._x_ee, self._R_ee = snap.p_ee_in_world, snap.R_world_ee
        self._dx = np.zeros(3)
        self._R_rel = np.zeros((3, 3))  # Rbᵀ R_ee (C-contiguous: mju_mat2Quat reads it as 9 floats)
        self._R_rel9 = self._R_rel.reshape(9)
        if target is not None:
            T = target.T_world_target
            self._RtT, self._ot, self._zt = T[:3, :3].T, T[:3, 3], T[:3, 2]  # true target: Rᵀ, origin, axis
            self._depth = float(target.depth_total)
        self._f_used = self._w_used.ext_world[:3]
        self._dx_true, self._p_true = np.zeros(3), np.zeros(3)
        # the observation is one array, [pose 7, goal_error 3 | twist 6 | wrench 6 | q | v | stiffness 6, time 1],
        # made by one concatenate of these parts; its entries are views of it
        self._pg, self._kt = np.zeros(10), np.zeros(7)
        self._o_p, self._o_quat, self._o_goal = self._pg[0:3], self._pg[3:7], self._pg[7:10]
        self._kt[0:6] = self._gains.stiffness()  # rewritten when the gain scales change (the only change)
        nv = setup.plant.nv
        sizes = (7, 3, 6, 6, nv, nv, 6, 1)
        ends = np.cumsum(sizes).tolist()
        self._obs_slices = tuple(slice(b - n, b) for n, b in zip(sizes, ends, strict=True))

    def _shaper(self) -> Any:
        """The impedance action's offset of the planner's reference (the plan stage's variant):
        x_d' = x_d + δp, R_d' = exp(δθ^) R_d (δp, δθ world; the buffers :meth:`_apply` writes). Run only while
        there is an offset (:meth:`_run_steps`: the cycle's unshaped step otherwise, the planner's reference as
        it is, which x_d + 0 would be)."""
        dp, dR, shaping, add, matmul, copyto = self._dp, self._dR, self._shaping, np.add, np.matmul, np.copyto
        R_tmp = np.zeros((3, 3))

        def shape(t: float, ref: Any) -> None:
            add(ref.pos, dp, ref.pos)
            if shaping[1]:
                matmul(dR, ref.R, R_tmp)
                copyto(ref.R, R_tmp)

        return shape

    # ------------------------------------------------------------------ action
    def _apply(self, a: np.ndarray) -> None:
        mode = self.action_mode
        if mode == "impedance":
            p_lim, r_lim = self.offset_limit
            np.dot(self._R_believed, a[0:3] * p_lim, out=self._dp)  # believed target frame → world
            w = a[3:6] * r_lim
            w0, w1, w2 = w.tolist()
            rotate = w0 != 0.0 or w1 != 0.0 or w2 != 0.0
            if rotate:
                self._dR[:] = _rotvec_matrix(self._R_believed @ w)
            d0, d1, d2 = self._dp.tolist()
            self._shaping[0] = rotate or d0 != 0.0 or d1 != 0.0 or d2 != 0.0
            self._shaping[1] = rotate
            n = self._n_gain
            if n:
                scales = np.exp(a[6 : 6 + 2 * n] * math.log(self.gain_ratio))
                if self._gains.set(scales[:n], scales[n:]):
                    self._kt[0:6] = self._gains.stiffness()
        elif mode == "setpoint":
            ctrl = self.setup.controller
            force = 0.5 * (float(a[0]) + 1.0) * self.force_max
            if ctrl.setpoint.config.force != force:
                fs = dataclasses.replace(ctrl.setpoint.config, force=force)
                ctrl.setpoint.config = fs
                ctrl.config = dataclasses.replace(ctrl.config, force_setpoint=fs)  # a new config: the kernel rebinds
        else:
            np.multiply(a, self._tau_max, out=self._tau_in)

    def step(self, action: Any):
        if self.cycle is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError("the episode has ended: call reset()")
        a = np.asarray(action, dtype=np.float64).reshape(self._action_shape)
        key = a.tolist()
        if key != self._action_key:  # the action the law has already (the same floats) is not applied again
            self._action_key = key
            self._apply(np.minimum(np.maximum(a, -1.0), 1.0))
        why = ""
        c0 = time.perf_counter()
        i0 = self.i
        end = min(i0 + self.steps_per_action, self.n_steps)
        tel = self.cycle.telemetry
        # the peak ‖f_truth‖ of the period: from the rows the cycle recorded (one vector operation) when they
        # stay in the telemetry block over the period, else read step by step
        from_rows = tel.recording and not (i0 <= tel.spill_at < end)
        i, peak2 = self._run_steps(i0, end, from_rows)
        stop = self.status[0] is not Status.COMPLETED
        if from_rows and i > i0:
            F = self._truth_rows[i0 - tel.base : i - tel.base, :3]
            peak2 = float(np.einsum("ij,ij->i", F, F).max())  # the largest ‖f_truth‖² of the steps' contact
        self.i = i
        self._wall += time.perf_counter() - c0
        peak = math.sqrt(peak2)
        if peak > self.peak_force:
            self.peak_force = peak
        rc = self.reward_config
        t = i * self._T_c
        e, lat = self._seat()
        reward = rc.progress_weight * (self._e_prev - e) / 0.001 - rc.time_weight * self.policy_period
        self._e_prev = e
        terminated = False
        if stop:
            terminated, why = True, self._status_name
            reward -= rc.force_penalty
        elif peak > self._force_limit:
            terminated, why = True, "force"
            reward -= rc.force_penalty
        elif rc.jam and self._jammed(t, e, self._axial_force()):
            terminated, why = True, "jam"
            reward -= rc.jam_penalty
        else:
            seated = abs(e) <= rc.seat_tolerance and lat <= rc.lateral_tolerance
            if seated and self._seated_since is None:
                self._seated_since = t
            elif not seated:
                self._seated_since = None
            if seated and rc.seat_hold is not None and t - self._seated_since >= rc.seat_hold - 1e-12:
                terminated, why = True, "seated"
                reward += rc.seat_bonus
        truncated = not terminated and i >= self.n_steps
        if truncated:
            why = "time"
        self.done = terminated or truncated
        info = self._info(e, lat, why)
        info["peak_force"] = peak
        return self._obs(), float(reward), terminated, truncated, info

    def _run_steps(self, i0: int, end: int, from_rows: bool) -> tuple[int, float]:
        """Control steps i0 … end − 1 of the cycle (fewer when one stops the run: :attr:`status` says why).
        Returns (the next step, the largest ‖f_truth‖² read step by step, 0 with ``from_rows``)."""
        step = self._step_shaped if self._shaping[0] else self._step_plain
        i, peak2 = i0, 0.0
        try:
            if from_rows:
                for i in range(i0, end):
                    if step(i):
                        self._stopped(self.cycle.stopped)
                        return i + 1, 0.0
                return end, 0.0
            f3, dot = self._truth[:3], np.dot
            for i in range(i0, end):
                stop = step(i)
                f2 = dot(f3, f3)  # ‖f_truth‖² of the contact this step read
                if f2 > peak2:
                    peak2 = f2
                if stop:
                    self._stopped(self.cycle.stopped)
                    return i + 1, peak2
            return end, peak2
        except (np.linalg.LinAlgError, FloatingPointError, ValueError) as exc:
            self._stopped((Status.DIVERGED, f"numerical failure at t = {i * self._T_c:.4f} s (step {i}): {exc}"))
            return i, peak2

    def _stopped(self, status: tuple[Status, str]) -> None:
        self.status = status
        self._status_name = str(status[0])

    def _jammed(self, t: float, r: float, f_a: float) -> bool:
        """The insertion supervisor's jam rule (controllers/insertion.py) at the policy rate, with its defaults."""
        j = self._jam
        if r <= j.seat_margin or f_a < j.force:
            self._jam_since = None
            return False
        if self._jam_since is None:
            self._jam_since, self._jam_r0 = t, r
            return False
        if t - self._jam_since >= j.dwell - 1e-12:
            if self._jam_r0 - r < j.progress:
                return True
            self._jam_since, self._jam_r0 = t, r  # progress over a full dwell: a new streak
        return False

    # ------------------------------------------------------------------ observation
    def _seat(self) -> tuple[float, float]:
        """(seat error [m], lateral error [m]) against the true target (as the metrics docking.seat_error,
        docking.lateral; fixed targets: the initial pose)."""
        if self.setup.asm.target is None:
            return 0.0, 0.0
        np.subtract(self._x_ee, self._ot, out=self._dx_true)
        np.matmul(self._RtT, self._dx_true, out=self._p_true)  # the tool in the true target's frame
        p0, p1, p2 = self._p_true.tolist()
        e = self._depth + p2
        return e, math.hypot(p0, p1)

    def _axial_force(self) -> float:
        """The used wrench's force along the true target's axis [N] (the jam rule's f_a)."""
        if self.setup.asm.target is None:
            return 0.0
        return float(self._f_used @ self._zt)

    def _obs(self) -> dict[str, np.ndarray]:
        """The observation (docs/gym.md, "Observations"): views of one new array (the loop rewrites the arrays
        it is made from; the stiffness part is kept up to date by :meth:`_apply`)."""
        snap = self._snap
        np.subtract(self._x_ee, self._ob, out=self._dx)
        np.matmul(self._RbT, self._dx, out=self._o_p)  # the tool's position in the believed target frame
        np.matmul(self._RbT, self._R_ee, out=self._R_rel)  # its rotation in that frame
        quat = self._o_quat
        mju_mat2Quat(quat, self._R_rel9)  # (w, x, y, z), w ≥ 0
        if not quat[0] >= 0.0:
            np.negative(quat, out=quat)
        np.subtract(self._o_p, self._goal_b, out=self._o_goal)
        self._kt[6] = self.i * self._T_c
        o = np.concatenate((self._pg, snap.twist_ee_lwa, self._w_used.ext_world, snap.q, snap.v, self._kt))
        s_pose, s_goal, s_twist, s_wrench, s_q, s_v, s_k, s_t = self._obs_slices
        return {"pose": o[s_pose], "goal_error": o[s_goal], "twist": o[s_twist], "wrench": o[s_wrench],
                "q": o[s_q], "v": o[s_v], "stiffness": o[s_k], "time": o[s_t]}

    def _info(self, e: float, lat: float, why: str) -> dict[str, Any]:
        return {"seat_error": e, "lateral": lat, "t": self.i * self._T_c, "end": why, "status": self._status_name,
                "peak_force_episode": self.peak_force, "sim_seed": self.draw["sim.seed"]}

    # ------------------------------------------------------------------ run folder
    def save_run(self, out_root: str | Path | None = "runs") -> Any:
        """The episode so far as a run folder under ``out_root/<scenario>/`` (telemetry, meta, metrics, gates:
        as ``dockbench.run`` writes it) and its :class:`RunResult`; ``out_root=None``: scored the same way, no
        folder written (``dockbench.gym_campaign``: the campaign writes the trial's). Ends the episode (reset()
        starts another). A run that ended before the planner's end is INCOMPLETE, as any short run."""
        if self.cycle is None:
            raise RuntimeError("nothing to save: call reset() and step() first")
        if not self.scenario.telemetry.enabled:
            raise RuntimeError("the environment was made with record=False: no telemetry to save")
        from dockbench.sim.loop import _finish_run
        from dockbench.sim.scenario import folder_name
        from dockbench.telemetry.run import RunFolder

        tel = self.cycle.telemetry
        tel.finish()
        n = tel.n
        wall = self._wall
        T_c = self.scenario.sim.control_period
        timing = {"wall_s": wall, "sim_s": n * T_c, "real_time_factor": n * T_c / wall if wall > 0 else float("inf"),
                  "steps": n, "us_per_step": 1e6 * wall / max(n, 1)}
        status, message = self.status
        outcome = Outcome(tel, status, message, timing, self.cycle.guard)
        folder = None if out_root is None else RunFolder.create(out_root, folder_name(self.scenario.name))
        self.done = True
        self.cycle = None
        return _finish_run(self.setup, folder, outcome)


#: the registered tasks: id → keyword arguments of :class:`DockingEnv`
TASKS: dict[str, dict[str, Any]] = {
    "dockbench/Docking-v0": {},
    "dockbench/KeyedDocking-v0": {"scenario": "keyed/iiwa14_keyed_khatib"},
    "dockbench/DockingSE3-v0": {"scenario": "iiwa14_docking_se3"},
    "dockbench/DockingSetpoint-v0": {"action_mode": "setpoint"},
    "dockbench/DockingTorque-v0": {"action_mode": "torque"},
}


def register() -> None:
    """Register :data:`TASKS` with Gymnasium (done on import; a second call is a no-op)."""
    for env_id, kwargs in TASKS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point="dockbench.gym:DockingEnv", kwargs=kwargs)


register()

__all__ = ["ACTION_MODES", "DEFAULT_RANDOMIZE", "TASKS", "DockingEnv", "RewardConfig", "register"]
