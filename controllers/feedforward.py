"""Joint dissipation feedforward: cancel the plant's dry friction and viscous damping (docs/theory/khatib.md §4).

With f = dof_frictionloss [N·m] and d = dof_damping [N·m·s/rad] read from the assembled MjModel
(never duplicated as constants):

* velocity mode: τ_ff = f · tanh(q̇ / ε), ε = ``velocity_scale`` (default 0.01 rad/s)
* torque mode (default): τ_ff = f · tanh((τ_pre − g(q)) / (f/2)), τ_pre = the torque before this term,
  g(q) the gravity torque (``Snapshot.g``; zero at zero gravity)
* hybrid mode: the torque mode until the first contact (the law's force ‖f̄‖ > ``contact_threshold``,
  default 1 N), then the velocity mode, blended linearly over ``blend_time`` (default 50 ms):
  τ_ff = (1 − w) f tanh((τ_pre − g)/(f/2)) + w f tanh(q̇/ε), w: 0 → 1 from the first contact on
  (latched). The latch state is the array :attr:`DissipationFeedforward.state`, which the compiled kernels
  share (``kernel_feedforward`` in sim/_kernel_math.h implements all four modes).
* always: τ_damp = d · q̇ (MuJoCo applies −d q̇)

Joints with f = 0 get no friction term (no division by zero).

Why the torque mode keys on τ_pre − g: the term is meant to help the joint move in the direction the
control law pushes it. The part of τ_pre that holds the arm against gravity, g(q), moves nothing (it
is cancelled by the plant's own g); keyed on the full τ_pre, a joint whose gravity torque is larger
than f/2 would get a constant ±f in the direction of g whatever the task asks, i.e. an unmodelled
offset of up to f per joint (on the FR3, 10.9 N → 24.5 N peak contact force when gravity is turned on).
τ_pre − g is the task torque (task, null-space and Coriolis terms), the same key as at zero gravity,
so the in-orbit results are unchanged bit for bit (g = 0 there) and the lab (gravity-on) results do
not depend on g. docs/theory/khatib.md §4 states it; tests/paper/test_feedforward.py checks both.

Why the hybrid mode: keyed on τ_pre, the term flips sign whenever the law's torque on a joint crosses
zero. At rest in contact that is where the law's torque sits (it only balances the contact force), and
the joint, whose dry friction MuJoCo models as a regularised constraint that carries no torque at zero
velocity, passes the ±f flip straight to the contact: a limit cycle of ±(Jᵀ)⁺f (one-step force spikes
of 1–3 N on the FR3, and through force feedback a period-2 oscillation). Keyed on q̇ it is zero at
rest and cannot flip there; in free space, where the torque keying gives the better tracking (the
term leads the motion instead of following it), nothing changes. docs/theory/force_control.md.

Why ε matters (stick-slip): keyed on q̇, the friction the term leaves uncompensated, f (1 − tanh(|q̇|/ε)),
falls from f at rest to 0 in motion with slope f/ε at q̇ = 0: a negative viscous damping of f/ε per joint. Where
it exceeds the damping the law gives the joint, a joint held by stiction while the law's spring builds up slips
and runs (the spring is sized to beat f, the friction then vanishes) and throws the tool onto whatever stops it;
the peak of that impact moves with the physics step and the CPU's round-off. A larger ε keeps f/ε below the
law's damping (docs/theory/khatib.md §4).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from dockbench.sim.config import param

FeedforwardMode = Literal["torque", "velocity", "hybrid", "off"]

#: velocity scale of the smooth sign in velocity mode [rad/s]
VELOCITY_EPS = 0.01
#: hybrid mode: the law's contact force that latches the velocity keying [N], and the blend time [s]
HYBRID_CONTACT_THRESHOLD = 1.0
HYBRID_BLEND_TIME = 0.05


def velocity_scale_param() -> Any:
    """The ``feedforward_velocity_scale`` field of a law's config: ε [rad/s] of the velocity keying."""
    return param(
        VELOCITY_EPS, unit="rad/s", gt=0.0, le=10.0,
        doc="ε of the velocity keying τ_ff = f tanh(q̇/ε) (feedforward velocity and hybrid): the friction left "
        "uncompensated falls with slope f/ε at rest, a negative damping that must stay below the law's joint "
        "damping or a joint held by stiction slips and runs (docs/theory/khatib.md §4)",
    )


class DissipationFeedforward:
    """Preallocated evaluator of τ_ff + τ_damp (see module docstring)."""

    def __init__(
        self,
        frictionloss: np.ndarray,
        damping: np.ndarray,
        mode: FeedforwardMode = "torque",
        period: float = 0.001,
        contact_threshold: float = HYBRID_CONTACT_THRESHOLD,
        blend_time: float = HYBRID_BLEND_TIME,
        velocity_scale: float = VELOCITY_EPS,
    ):
        self.f = np.asarray(frictionloss, dtype=float).copy()
        #: ε [rad/s] of the velocity keying f tanh(q̇/ε)
        self.velocity_scale = float(velocity_scale)
        self.d = np.asarray(damping, dtype=float).copy()
        self.mode = mode
        self.active_f = self.f > 0.0
        self._half_f = np.where(self.active_f, self.f / 2.0, 1.0)
        self.any_friction = bool(np.any(self.active_f)) and mode != "off"
        self.any_damping = bool(np.any(self.d != 0.0)) and mode != "off"
        self.out = np.zeros_like(self.f)
        self._dv = np.zeros_like(self.f)
        #: False when there is nothing to compensate (the loop can skip the call)
        self.active = self.any_friction or self.any_damping
        self.contact_threshold = float(contact_threshold)
        self._dw = float(period) / float(blend_time) if blend_time > 0.0 else 1.0
        #: hybrid mode: [latched (1.0 from the first contact on), n (calls since the latch), w (the weight of
        #: the velocity keying, min(1, n T / T_blend))], one array that the compiled kernels share
        self.state = np.zeros(3)
        self._tq = np.zeros_like(self.f)

    @property
    def latched(self) -> bool:
        """Hybrid mode: whether the first contact has latched the velocity keying."""
        return bool(self.state[0])

    @property
    def w(self) -> float:
        """Hybrid mode: the weight w of the velocity keying (0 until the first contact, then → 1)."""
        return float(self.state[2])

    def reset(self) -> None:
        """Forget the contact latch of the hybrid mode."""
        self.state[:] = 0.0

    def kernel_args(self, g: np.ndarray) -> dict:
        """This feedforward as the compiled kernels take it (``kernel_feedforward`` in sim/_kernel_math.h):
        f, d, f/2 (1 where f = 0), the gravity torque array ``g`` the kernel reads each step (the
        snapshot's ``g``), the mode code (0 inactive, 1 torque, 2 velocity, 3 hybrid), whether the damping
        term is on, the velocity scale ε, and for the hybrid mode its contact threshold [N], its blend step
        T / T_blend and its latch state array :attr:`state`."""
        codes = {"torque": 1, "velocity": 2, "hybrid": 3}
        return {
            "ff_f": self.f,
            "ff_d": self.d,
            "ff_half_f": self._half_f,
            "ff_g": g,
            "ff_mode": codes[self.mode] if self.active else 0,
            "ff_damping": self.any_damping,
            "ff_vel_eps": self.velocity_scale,
            "ff_threshold": self.contact_threshold,
            "ff_dw": self._dw,
            "ff_state": self.state,
        }

    def compute(
        self, v: np.ndarray, tau_pre: np.ndarray, g: np.ndarray | None = None, force: float = 0.0
    ) -> np.ndarray:
        """τ_ff + τ_damp [N·m] for joint velocities ``v`` [rad/s], the pre-feedforward torque ``tau_pre``
        [N·m], the gravity torque ``g`` [N·m] it contains (None: zero gravity) and the law's contact-force
        magnitude ``force`` [N] (read by the hybrid mode only)."""
        out = self.out
        mode = self.mode
        if mode == "off":
            out[:] = 0.0
            return out
        if mode == "hybrid":
            st = self.state
            latched, n, w = st.tolist()
            if not latched and force > self.contact_threshold:
                latched = 1.0
            if latched and w < 1.0:
                n += 1.0
                w = min(1.0, n * self._dw)
            st[:] = (latched, n, w)
            if w >= 1.0:
                mode = "velocity"
            elif w <= 0.0:
                mode = "torque"
            else:  # blend: (1 − w) torque keying + w velocity keying
                tq = self._tq
                if g is None:
                    np.copyto(tq, tau_pre)
                else:
                    np.subtract(tau_pre, g, out=tq)
                np.divide(tq, self._half_f, out=tq)
                np.tanh(tq, out=tq)
                np.divide(v, self.velocity_scale, out=out)
                np.tanh(out, out=out)
                out -= tq
                out *= w
                out += tq
                mode = ""
        if mode == "velocity":
            np.divide(v, self.velocity_scale, out=out)
            np.tanh(out, out=out)
        elif mode == "torque":
            if g is None:
                np.divide(tau_pre, self._half_f, out=out)
            else:
                np.subtract(tau_pre, g, out=out)
                np.divide(out, self._half_f, out=out)
            np.tanh(out, out=out)
        out *= self.f  # f = 0 joints → 0
        if self.any_damping:
            np.multiply(self.d, v, out=self._dv)
            out += self._dv
        return out
