"""Contact-force tools shared by the Khatib and HQP laws: a force filter and an axial force set-point.

Both are Python-only options (a controller that uses either runs its Python reference; see
docs/theory/force_control.md). F_ext is the environment-on-tool wrench (world axes) the law is given
(F/T sensor, contact truth or momentum observer).

Force filter (``force_filter`` [s], 0 = off)
    F̄_k = F̄_{k−1} + β (F_k − F̄_{k−1}),   β = 1 − exp(−T/τ_f)   (first order, exact for a held input)
    The law uses F̄ wherever it uses F_ext. Why: a force read at step k acts on the plant from step k,
    and MuJoCo's soft contact answers an applied push in the SAME step (the constraint takes a share
    d ≈ solimp of it), so a law that feeds the force back with gain G closes the sampled loop
    f_{k+1} = c − G F̄_k. Unfiltered (β = 1) its pole is −G: for G > 1 the force flips fully on and off
    every second step. With the filter the pole is 1 − β (1 + G): no sign flip for β ≤ 1 / (1 + G), i.e.
    τ_f ≥ T / ln((1 + G) / G). (Khatib: G = d Λ_aa / m times 1 + the slope of the friction feedforward,
    which is 2 for the torque keying at τ_pre ≈ 0: at the FR3 seat Λ_aa = 9.86 kg, m = 20 kg, G ≈ 1.4.)

Axial force set-point (``force_setpoint:``, hybrid impedance)
    a = the mating axis (the planner's approach axis, unit, out of the target), f_a = aᵀ f̄ the axial
    contact force (> 0 when the target pushes the tool back), s(t) ∈ [0, 1] the ramp, F_d(t) = s(t) F.
    Along a the law's position impedance is faded out by s: the axial components of the pose error, of
    the reference velocity and acceleration and of the measured force are removed with weight s (the law
    then damps the absolute axial velocity), and a task force along a is added:
        F_f = −a (F_d + k_p (F_d − f_a) + I + d_f v_a),    I_k = clamp(I_{k−1} + k_i T (F_d − f_a), ±i_max)
    (I is held while f_a ≤ ``contact_threshold``: no wind-up before the target pushes back)
    (v_a = aᵀẋ the axial velocity of the tool: d_f adds axial damping to the force mode.)
    At rest (task acceleration zero) the plant balances F_f + f_a a = 0 along a, so f_a = F_d + k_p (F_d −
    f_a) + I: the feed-forward alone gives f_a = F_d, the integral removes what the joint friction and the
    model hold back. The proportional term closes the same sampled loop as above (gain k_p β).
    Ramp: s = clip((t − t_0) / ramp_time, 0, 1) from t_0 = the planner's end plus ``delay``
    (``start: planner_end``) or the first step with ‖f̄‖ > ``contact_threshold`` plus ``delay``
    (``start: contact``). The integral runs only while s > 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from sim.config import param
from sim.errors import ScenarioError


@dataclass(frozen=True)
class ForceSetpointConfig:
    force: float = param(
        unit="N", ge=0.0, le=1e4, doc="commanded axial contact force F (environment on tool, along +a)"
    )
    ramp_time: float = param(0.5, unit="s", gt=0.0, le=3600.0, doc="linear ramp of F_d = s F, s: 0 → 1")
    start: Literal["planner_end", "contact"] = param(
        "planner_end", doc="when the ramp starts: the planner's end, or the first contact (‖f̄‖ > contact_threshold)"
    )
    delay: float = param(0.0, unit="s", ge=0.0, le=86400.0, doc="extra time after the start event")
    contact_threshold: float = param(1.0, unit="N", gt=0.0, le=1e4, doc="‖f̄‖ that counts as contact (start: contact)")
    k_p: float = param(0.0, ge=0.0, le=1e3, doc="proportional force feedback gain (dimensionless)")
    k_i: float = param(10.0, unit="1/s", ge=0.0, le=1e5, doc="integral gain on the force error")
    i_max: float = param(5.0, unit="N", ge=0.0, le=1e4, doc="clamp of the integral term I")
    damping: float = param(
        0.0, unit="N·s/m", ge=0.0, le=1e6,
        doc="extra axial damping d_f of the force mode (caps the speed at which the set-point drives the tool "
        "into the target: ≈ F / (d_f + the law's own axial damping))",
    )


def first_order_beta(time_constant: float, period: float) -> float:
    """β = 1 − exp(−T/τ_f) of the force filter (1 when τ_f = 0: no filtering)."""
    if time_constant < 0.0:
        raise ScenarioError(f"must be >= 0 s, got {time_constant}", key="force_filter")
    return 1.0 if time_constant == 0.0 else 1.0 - math.exp(-period / time_constant)


class ForceFilter:
    """First-order low-pass of an n-vector (module docstring); starts from the first input."""

    def __init__(self, n: int, time_constant: float, period: float):
        self.beta = first_order_beta(time_constant, period)
        self.active = self.beta < 1.0
        self.out = np.zeros(n)
        self._started = False

    def reset(self) -> None:
        self._started = False
        self.out[:] = 0.0

    def update(self, x: list[float]) -> list[float]:
        """F̄ (a list of floats, also written to :attr:`out`) after the input ``x`` (a list of floats)."""
        if not self._started:
            self._started = True
            y = list(x)
        else:
            b = self.beta
            y = [yi + b * (xi - yi) for yi, xi in zip(self.out.tolist(), x, strict=True)]
        self.out[:] = y
        return y


class AxialForceSetpoint:
    """State and per-step evaluation of the axial force set-point (module docstring).

    Args:
        config: the ``force_setpoint:`` block.
        axis: (3,) the mating axis a in world axes (normalised here).
        period: control period T [s].
        planner_end: the planner's duration [s] (``start: planner_end``).
    """

    def __init__(self, config: ForceSetpointConfig, axis: np.ndarray, period: float, planner_end: float):
        a = np.asarray(axis, dtype=float).reshape(3)
        n = float(np.linalg.norm(a))
        if not n > 1e-9:
            raise ScenarioError(f"the mating axis must be a non-zero 3-vector, got {a.tolist()}", key="force_setpoint")
        self.config = config
        self.axis = tuple((a / n).tolist())
        self.period = period
        self.planner_end = planner_end
        self.reset()

    def reset(self) -> None:
        c = self.config
        self.t0 = self.planner_end + c.delay if c.start == "planner_end" else math.inf
        self.integral = 0.0
        self.s = 0.0
        self.force_desired = 0.0
        self.force_axial = 0.0
        self.force_cmd = 0.0

    def update(self, t: float, f: list[float], v: list[float]) -> float:
        """Advance to time ``t`` [s] with the law's force f̄ = ``f`` (3 floats, world, [N]) and the tool's
        velocity ``v`` (3 floats, world, [m/s]); return s.

        Also sets :attr:`force_desired` F_d, :attr:`force_axial` f_a and :attr:`force_cmd` = the
        magnitude F_d + k_p (F_d − f_a) + I + d_f v_a of the task force F_f = −a force_cmd.
        """
        c = self.config
        a0, a1, a2 = self.axis
        f0, f1, f2 = f
        fa = a0 * f0 + a1 * f1 + a2 * f2
        self.force_axial = fa
        if self.t0 == math.inf and math.sqrt(f0 * f0 + f1 * f1 + f2 * f2) > c.contact_threshold:
            self.t0 = t + c.delay
        s = (t - self.t0) / c.ramp_time
        s = 0.0 if s <= 0.0 else (1.0 if s >= 1.0 else s)
        self.s = s
        fd = s * c.force
        self.force_desired = fd
        if s > 0.0:
            if fa > c.contact_threshold:  # anti-windup: integrate only while the target pushes back
                i = self.integral + c.k_i * self.period * (fd - fa)
                self.integral = min(max(i, -c.i_max), c.i_max)
            self.force_cmd = fd + c.k_p * (fd - fa) + self.integral
            if c.damping > 0.0:
                self.force_cmd += c.damping * (a0 * v[0] + a1 * v[1] + a2 * v[2])
        else:
            self.force_cmd = 0.0
        return s

    def remove_axial(self, x: tuple[float, float, float] | list[float], weight: float) -> tuple[float, float, float]:
        """x − weight · a (aᵀ x) for a 3-vector ``x``."""
        a0, a1, a2 = self.axis
        x0, x1, x2 = x
        k = weight * (a0 * x0 + a1 * x1 + a2 * x2)
        return x0 - k * a0, x1 - k * a1, x2 - k * a2

    def task_force(self) -> tuple[float, float, float]:
        """F_f = −a · force_cmd (world axes) [N]."""
        a0, a1, a2 = self.axis
        m = self.force_cmd
        return -m * a0, -m * a1, -m * a2


def mating_axis_of(planner: object | None) -> np.ndarray:
    """The planner's approach axis (out of the target's mouth), world axes."""
    ctx = getattr(planner, "ctx", None)
    axis = getattr(ctx, "approach_axis_world", None)
    if axis is None:
        raise ScenarioError(
            "force_setpoint needs the planner's approach axis (a planner built with a PlannerContext)",
            key="force_setpoint",
        )
    return np.asarray(axis, dtype=float)
