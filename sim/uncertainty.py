"""Uncertainty for Monte Carlo studies: F/T noise and bias, control and sensing delays, and an error in the
estimate of the target's pose (docs/theory/uncertainty.md). Everything is off by default and, when on,
drawn from ``sim.seed`` alone, so a run is reproducible from its scenario and a campaign's trials from
their derived seeds.

The scenario's ``uncertainty:`` block (:class:`UncertaintyConfig`)::

    uncertainty:
      ft_noise_std: [0.2, 0.2, 0.2, 0.01, 0.01, 0.01]   # white noise per sensor axis [N, N·m], each control step
      ft_bias_std: [0.5, 0.5, 0.5, 0.0, 0.0, 0.0]       # a constant bias drawn once per run [N, N·m]
      sensing_delay: 2                                  # the controller sees the wrench of 2 periods ago
      control_delay: 1                                  # the plant receives the torque of 1 period ago
      belief_position_std: [0.002, 0.002, 0.0]          # target-pose estimate error [m], target axes
      belief_rpy_std_deg: [0.0, 0.0, 1.0]               # [deg], roll/pitch/yaw
      distribution: normal                              # of the per-run draws: normal | uniform (same std)

Models (k: control step, T_c: control period):

* F/T reading: r_k = f_S(t_k) + b + n_k in sensor axes [f; n], with n_k ~ N(0, diag(σ_n²)) independent
  in k and per axis, and b = ``wrench.ft_bias`` + δb, δb ~ D(0, σ_b²) drawn once. The reading enters the
  F/T pipeline (sim/wrench.py) where the simulated bias always did, so gravity compensation, the tare
  and the transport to the EE frame treat it like a real sensor's. The noise is recorded in the
  telemetry channel ``ft_noise`` (N, 6).
* Sensing delay d_s: the controller (and, with a free-floating base, the base-mobility term) at step k
  uses the wrench estimate of step k − d_s (the first estimate before that); ``wrench_used_world``
  records what it used, ``wrench_ext_world`` the undelayed estimate.
* Control delay d_c: the torque applied during step k is the clipped command of step k − d_c (the
  plant's initial torque before that: zero, or the gravity hold); ``tau_applied`` records it.
* Target-pose estimate: T_believed = T_target · T_offset · T_δ with T_offset = ``target.belief_offset``
  and T_δ = (R(δr), δp), δp ~ D(0, σ_p²) in the believed target frame, δr ~ D(0, σ_r²) roll/pitch/yaw
  (R = Rz Ry Rx). Recorded in meta.json (``uncertainty.belief_offset_drawn``, ``T_world_target_believed``).

D is the normal distribution or the uniform one on [−√3 σ, √3 σ] (the same standard deviation σ).
Independent random streams (numpy ``SeedSequence(sim.seed, spawn_key=(stream,))``) feed the noise, the
bias and the belief draws, so turning one on does not change the others' values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from dockbench.sim.config import param

#: the random streams of one run (spawn keys of ``SeedSequence(sim.seed)``)
STREAM_FT_NOISE = 1
STREAM_FT_BIAS = 2
STREAM_BELIEF = 3

#: the largest delay accepted [control periods]
MAX_DELAY = 1000
#: F/T noise is drawn this many control steps at a time (memory flat in the run's duration; the draws
#: are the same numbers as one draw of the whole run, :func:`ft_noise`)
NOISE_CHUNK = 16384

_ZERO6 = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class UncertaintyConfig:
    ft_noise_std: tuple[float, float, float, float, float, float] = param(
        _ZERO6, unit="N | N·m", length=6, ge=0.0, le=1e4,
        doc="white Gaussian noise on the F/T reading, standard deviation per sensor axis [fx fy fz nx ny nz], "
        "drawn each control step from sim.seed (telemetry channel ft_noise)",
    )
    ft_bias_std: tuple[float, float, float, float, float, float] = param(
        _ZERO6, unit="N | N·m", length=6, ge=0.0, le=1e4,
        doc="a constant F/T bias drawn once per run (standard deviation per sensor axis), added to wrench.ft_bias",
    )
    sensing_delay: int = param(
        0, ge=0, le=MAX_DELAY,
        doc="the controller uses the wrench estimate of this many control periods ago",
    )
    control_delay: int = param(
        0, ge=0, le=MAX_DELAY,
        doc="the plant receives the (clipped) torque computed this many control periods ago",
    )
    belief_position_std: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0), unit="m", length=3, ge=0.0, le=1.0,
        doc="target-pose estimate error: a position offset drawn once per run, in the believed target frame, "
        "composed after target.belief_offset",
    )
    belief_rpy_std_deg: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0), unit="deg", length=3, ge=0.0, le=90.0,
        doc="target-pose estimate error: roll/pitch/yaw drawn once per run (R = Rz Ry Rx), after target.belief_offset",
    )
    distribution: Literal["normal", "uniform"] = param(
        "normal",
        doc="distribution of the per-run draws (F/T bias, belief offset): normal, or uniform on [−√3σ, √3σ] "
        "(the same standard deviation)",
    )

    @property
    def active(self) -> bool:
        """True when any uncertainty is on."""
        return (
            any(self.ft_noise_std) or any(self.ft_bias_std) or self.sensing_delay > 0 or self.control_delay > 0
            or any(self.belief_position_std) or any(self.belief_rpy_std_deg)
        )


def stream(seed: int, key: int) -> np.random.Generator:
    """The random generator of stream ``key`` of a run seeded with ``seed``."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(int(key),)))


def draw(rng: np.random.Generator, std: np.ndarray, distribution: str) -> np.ndarray:
    """Zero-mean draws with standard deviation ``std`` (per entry): normal, or uniform on [−√3σ, √3σ]."""
    std = np.asarray(std, dtype=float)
    if distribution == "uniform":
        return rng.uniform(-1.0, 1.0, std.shape) * (math.sqrt(3.0) * std)
    return rng.standard_normal(std.shape) * std


def draw_ft_bias(cfg: UncertaintyConfig, seed: int) -> np.ndarray:
    """δb (6,) [N, N·m], sensor axes."""
    return draw(stream(seed, STREAM_FT_BIAS), np.array(cfg.ft_bias_std), cfg.distribution)


def draw_belief(cfg: UncertaintyConfig, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(δp (3,) [m], δr (3,) [deg]) of the target-pose estimate error (one generator: position first)."""
    rng = stream(seed, STREAM_BELIEF)
    dp = draw(rng, np.array(cfg.belief_position_std), cfg.distribution)
    dr = draw(rng, np.array(cfg.belief_rpy_std_deg), cfg.distribution)
    return dp, dr


def ft_noise(cfg: UncertaintyConfig, seed: int, n_steps: int) -> np.ndarray:
    """(n_steps, 6) white noise n_k [N, N·m]: standard normal draws (k-major) scaled per axis."""
    rng = stream(seed, STREAM_FT_NOISE)
    return rng.standard_normal((n_steps, 6)) * np.array(cfg.ft_noise_std)


class UncertaintyRuntime:
    """The per-run state of :class:`UncertaintyConfig` inside the control loop (sim/loop.py ``simulate``).

    Built by :func:`sim.loop.build` only when the block is :attr:`~UncertaintyConfig.active`; without it
    the loop pays a few ``is``/boolean tests per step. Per step, when on:

    * :meth:`sense` (before the F/T pipeline): ``comp[0:6] = b + n_k`` (the pipeline adds it to the reading);
    * :meth:`delay_wrench`: push the estimate, return the one of ``sensing_delay`` steps ago;
    * :meth:`delay_torque`: push the clipped torque, write the one of ``control_delay`` steps ago.

    Args:
        cfg: the scenario's block.
        seed: ``sim.seed``.
        bias: (6,) the run's bias b = wrench.ft_bias + δb (sensor axes) [N, N·m].
    """

    def __init__(self, cfg: UncertaintyConfig, seed: int, bias: np.ndarray):
        self.cfg = cfg
        self.seed = int(seed)
        self.bias = np.array(bias, dtype=float)
        self.noisy = any(cfg.ft_noise_std)
        self.sensing_delay = int(cfg.sensing_delay)
        self.control_delay = int(cfg.control_delay)
        #: the drawn noise of steps noise_base … noise_base + len(noise) - 1 [N, N·m]; ``now``: this step's
        self.noise = np.zeros((0, 6))
        self.noise_base = 0
        self.now = np.zeros(6)
        #: name → (shape, unit) for Telemetry(extra_shaped=...)
        self.channels: dict[str, tuple[tuple[int, ...], str]] = {"ft_noise": ((6,), "N|N·m")} if self.noisy else {}
        self.record: dict[str, Any] = {"seed": self.seed}

    def start(self, n_steps: int, comp6: np.ndarray, w_state: Any, tau0: np.ndarray) -> None:
        """Before the first step: draw the noise of the first steps (at most :data:`NOISE_CHUNK` of the
        ``n_steps``; the rest as the run gets there, from the same generator), bind the pipeline's offset buffer
        ``comp6`` (``WrenchPipeline.comp[0:6]``), and fill the delay lines with the first values (the
        wrench state buffer ``w_state`` is read at the first :meth:`delay_wrench`; ``tau0``: the torque
        the plant holds before the first command)."""
        from dockbench.sim.wrench import WrenchState

        self._comp6 = comp6
        if self.noisy:
            self._n_steps = int(n_steps)
            self._rng = stream(self.seed, STREAM_FT_NOISE)
            self._std = np.array(self.cfg.ft_noise_std)
            self.noise_base = 0
            self.noise = self._rng.standard_normal((min(self._n_steps, NOISE_CHUNK), 6)) * self._std
        self._k = 0
        self.w_delayed = WrenchState()
        self._w_ring = np.zeros((self.sensing_delay + 1, w_state.buf.size))
        self._c_ring = [0] * (self.sensing_delay + 1)
        self._w_filled = False
        self._t_ring = np.repeat(np.asarray(tau0, dtype=float)[None, :], self.control_delay + 1, axis=0)
        self._t_k = 0

    def sense(self, i: int) -> None:
        """Step ``i``'s F/T offset: b + n_i (steps in increasing order; ``now`` = n_i, which the loop
        records as the ``ft_noise`` channel)."""
        j = i - self.noise_base
        if j >= len(self.noise):  # the next chunk of draws (the stream continues where it stopped)
            self.noise_base, j = i, 0
            self.noise = self._rng.standard_normal((max(1, min(self._n_steps - i, NOISE_CHUNK)), 6)) * self._std
        self.now = self.noise[j]
        np.add(self.bias, self.now, out=self._comp6)

    def delay_wrench(self, w: Any) -> Any:
        """Push the estimate ``w`` (a WrenchState) and return the one of ``sensing_delay`` steps ago."""
        n = self.sensing_delay + 1
        ring = self._w_ring
        if not self._w_filled:  # before the first estimate the controller holds it
            ring[:] = w.buf
            self._c_ring = [w.contact_count] * n
            self._w_filled = True
        k = self._k
        ring[k] = w.buf
        self._c_ring[k] = w.contact_count
        k = (k + 1) % n  # the oldest entry
        self._k = k
        out = self.w_delayed
        out.buf[:] = ring[k]
        out.contact_count = self._c_ring[k]
        return out

    def delay_torque(self, tau: np.ndarray, out: np.ndarray) -> None:
        """Push the clipped torque ``tau`` and write the one of ``control_delay`` steps ago into ``out``."""
        ring = self._t_ring
        k = self._t_k
        ring[k] = tau
        k = (k + 1) % (self.control_delay + 1)
        self._t_k = k
        out[:] = ring[k]

    def summary(self) -> dict[str, Any]:
        """What was drawn, for meta.json."""
        return dict(self.record)


def belief_transform(dp: np.ndarray, dr_deg: np.ndarray) -> np.ndarray:
    """T_δ (4, 4) from δp [m] and δr (roll, pitch, yaw) [deg] (R = Rz Ry Rx)."""
    from dockbench.sim.interfaces import rpy_to_matrix

    T = np.eye(4)
    T[:3, :3] = rpy_to_matrix(np.radians(dr_deg))
    T[:3, 3] = dp
    return T


def make_runtime(cfg: UncertaintyConfig, seed: int, ft_bias: np.ndarray) -> UncertaintyRuntime | None:
    """The run's :class:`UncertaintyRuntime` (the per-run draws made), or None when nothing is on."""
    if not cfg.active:
        return None
    bias = np.array(ft_bias, dtype=float)
    rt = UncertaintyRuntime(cfg, seed, bias)
    if any(cfg.ft_bias_std):
        db = draw_ft_bias(cfg, seed)
        rt.bias = bias + db
        rt.record["ft_bias_drawn"] = db.tolist()
    if any(cfg.belief_position_std) or any(cfg.belief_rpy_std_deg):
        dp, dr = draw_belief(cfg, seed)
        rt.record["belief_offset_drawn"] = {"position": dp.tolist(), "rpy_deg": dr.tolist()}
    rt.record["ft_bias"] = rt.bias.tolist()
    return rt
