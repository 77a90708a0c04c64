"""Contact-force tools shared by the Khatib and HQP laws: a force filter and an axial force set-point.

Both are ported to the compiled kernels of the three laws (controllers/_khatib_kernel.c, _hqp_kernel.c,
_se3_kernel.c: the filter; Khatib and HQP: the set-point), which share their state with this Python code
through the arrays :attr:`ForceFilter.state` and :attr:`AxialForceSetpoint.state` (``kernel_args``); see
docs/theory/force_control.md. F_ext is the environment-on-tool wrench (world axes) the law is given
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
from typing import Any, Literal

import numpy as np
from dockbench.sim.config import param
from dockbench.sim.errors import ScenarioError


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
    """First-order low-pass of an n-vector (module docstring); starts from the first input.

    The state is one array, :attr:`state` = [F̄ (n); started (1.0 once the first input was taken)], which a
    compiled kernel is bound to (:meth:`kernel_args`): the Python path and the kernel advance the same state.
    """

    def __init__(self, n: int, time_constant: float, period: float):
        self.beta = first_order_beta(time_constant, period)
        self.active = self.beta < 1.0
        self.state = np.zeros(n + 1)
        #: F̄ of the last update (a view of :attr:`state`)
        self.out = self.state[:n]

    def reset(self) -> None:
        self.state[:] = 0.0

    def update(self, x: list[float]) -> list[float]:
        """F̄ (a list of floats, also written to :attr:`out`) after the input ``x`` (a list of floats)."""
        st = self.state
        if st[-1] == 0.0:  # not started: F̄ = the first input
            y = list(x)
        else:
            b = self.beta
            y = [yi + b * (xi - yi) for yi, xi in zip(self.out.tolist(), x, strict=True)]
        st[:] = (*y, 1.0)
        return y

    def kernel_args(self) -> dict:
        """This filter as the compiled kernels take it: whether it is on, β and the state array it shares."""
        return {"filt_on": self.active, "filt_beta": float(self.beta), "filt_state": self.state}


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
        #: [t0, integral, s, force_desired, force_axial, force_cmd] (:attr:`STATE`)
        self.state = np.zeros(len(self.STATE))
        self.reset()

    #: the names of the entries of :attr:`state`
    STATE = ("t0", "integral", "s", "force_desired", "force_axial", "force_cmd")

    def reset(self) -> None:
        c = self.config
        st = self.state
        st[:] = 0.0
        st[0] = self.planner_end + c.delay if c.start == "planner_end" else math.inf

    # the state lives in one array (shared with the compiled kernels, kernel_args): t0 the ramp's start [s]
    # (inf until the start event), the integral I [N], and the last update's s, F_d, f_a [N] and force_cmd [N]
    t0 = property(lambda self: float(self.state[0]), lambda self, v: self.state.__setitem__(0, v))
    integral = property(lambda self: float(self.state[1]), lambda self, v: self.state.__setitem__(1, v))
    s = property(lambda self: float(self.state[2]))
    force_desired = property(lambda self: float(self.state[3]))
    force_axial = property(lambda self: float(self.state[4]))
    force_cmd = property(lambda self: float(self.state[5]))

    def kernel_args(self) -> dict:
        """This set-point as the compiled kernels take it (Khatib, HQP): ``fs_on``, ``fs_params`` = its constants
        by name (the mating axis a, the ``force_setpoint:`` block, k_i T; the kernels read them by these names:
        ``KERNEL_SETPOINT_FIELDS`` in sim/_kernel_math.h) and the state array ``fs_state``."""
        c = self.config
        a0, a1, a2 = self.axis
        params = {
            "axis_x": a0, "axis_y": a1, "axis_z": a2, "force": float(c.force), "ramp_time": float(c.ramp_time),
            "delay": float(c.delay), "contact_threshold": float(c.contact_threshold), "k_p": float(c.k_p),
            "k_i_period": c.k_i * self.period, "i_max": float(c.i_max), "damping": float(c.damping),
        }
        return {"fs_on": True, "fs_params": params, "fs_state": self.state}

    @staticmethod
    def kernel_args_off() -> dict:
        """The compiled kernels' set-point arguments when there is no set-point (every constant 0 and a state
        array of its size that the kernel never touches)."""
        params = dict.fromkeys(
            ("axis_x", "axis_y", "axis_z", "force", "ramp_time", "delay", "contact_threshold", "k_p", "k_i_period",
             "i_max", "damping"), 0.0,
        )
        return {"fs_on": False, "fs_params": params, "fs_state": np.zeros(len(AxialForceSetpoint.STATE))}

    def update(self, t: float, f: list[float], v: list[float]) -> float:
        """Advance to time ``t`` [s] with the law's force f̄ = ``f`` (3 floats, world, [N]) and the tool's
        velocity ``v`` (3 floats, world, [m/s]); return s.

        Also sets :attr:`force_desired` F_d, :attr:`force_axial` f_a and :attr:`force_cmd` = the
        magnitude F_d + k_p (F_d − f_a) + I + d_f v_a of the task force F_f = −a force_cmd.
        """
        c = self.config
        st = self.state
        t0, integral = float(st[0]), float(st[1])
        a0, a1, a2 = self.axis
        f0, f1, f2 = f
        fa = a0 * f0 + a1 * f1 + a2 * f2
        if t0 == math.inf and math.sqrt(f0 * f0 + f1 * f1 + f2 * f2) > c.contact_threshold:
            t0 = t + c.delay
        s = (t - t0) / c.ramp_time
        s = 0.0 if s <= 0.0 else (1.0 if s >= 1.0 else s)
        fd = s * c.force
        if s > 0.0:
            if fa > c.contact_threshold:  # anti-windup: integrate only while the target pushes back
                i = integral + c.k_i * self.period * (fd - fa)
                integral = min(max(i, -c.i_max), c.i_max)
            force_cmd = fd + c.k_p * (fd - fa) + integral
            if c.damping > 0.0:
                force_cmd += c.damping * (a0 * v[0] + a1 * v[1] + a2 * v[2])
        else:
            force_cmd = 0.0
        st[:] = (t0, integral, s, fd, fa, force_cmd)
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


def state_values(force_filter: ForceFilter, setpoint: AxialForceSetpoint | None, feedforward: object) -> np.ndarray:
    """The per-step state of the contact-force options as one finite array, for the kernel guard's comparison
    (sim/kernels.py): the filter's state, the hybrid feedforward's latch (``feedforward.state``) and, with a
    set-point, its state with t0 written as (t0 started: 1/0, t0 or 0) (t0 is inf until the start event).
    Every entry is the same scalar operations in the Python path and in the compiled kernels."""
    parts = [force_filter.state, feedforward.state]  # type: ignore[attr-defined]
    if setpoint is not None:
        st = setpoint.state
        started = math.isfinite(st[0])
        parts.append(np.array([1.0 if started else 0.0, st[0] if started else 0.0]))
        parts.append(st[1:])
    return np.concatenate(parts)


#: diagnostics a law adds when its force set-point is on: the ramp s, F_d [N], f_a [N] and the integral I [N]
SETPOINT_DIAG = ("fs_s", "fs_force_desired", "fs_force_axial", "fs_integral")


def force_filter_param(signal: str) -> Any:
    """The ``force_filter`` field of a law's config: τ_f [s] of the low-pass on ``signal`` (0 = off)."""
    return param(
        0.0, unit="s", ge=0.0, le=10.0,
        doc=f"time constant τ_f of a first-order low-pass on {signal} before the law uses it (0 = off; "
        "docs/theory/force_control.md)",
    )


def force_setpoint_param() -> Any:
    """The ``force_setpoint`` field of a law's config (a :class:`ForceSetpointConfig`, or None = off)."""
    return param(None, doc="hybrid impedance: a commanded contact force along the mating axis (null = off)")


def build_setpoint(
    config: ForceSetpointConfig | None, planner: Any, control_period: float
) -> AxialForceSetpoint | None:
    """The :class:`AxialForceSetpoint` of a law's ``force_setpoint`` along ``planner``'s mating axis (None when
    ``config`` is None)."""
    if config is None:
        return None
    return AxialForceSetpoint(config, mating_axis_of(planner), control_period, planner.duration)
