"""Circle + figure-8 tracking reference around the start point C (docs/theory/planners.md).

Schedule (defaults; every number is a Config key)::

    [0, 1.5)     transition_in   ramp onto the circle from rest at C
    [1.5, 6.5)   circle          vertical circle, y–z plane, r = 0.10 m, 0.2 Hz (one full turn)
    [6.5, 8.0)   transition_mid  cross-fade circle → figure-8 (both moving at full rate)
    [8.0, 13.0)  figure8         p = C + [a_x sin φ, a_y sin 2φ, 0], a_x = 0.10, a_y = 0.07 m, 0.2 Hz;
                                 its last 1.5 s (stop_duration) ramp φ̇ down to 0, ending at C
    [13.0, ...)  hold            at C, at rest

Shapes (world axes, C = p_start). Both pass through C at phase 0 so that the reference can start and
end at rest at C without leaving its path::

    circle:    c(φ) = r [0, sin φ, 1 − cos φ]       (centre C + r e_z, starts at C heading +y)
    figure-8:  f(φ) = [a_x sin φ, a_y sin 2φ, 0]   (crossing point C)

C² junctions by construction (every junction is also C³):

* Phase time scaling ("quintic time scaling of the phase"): a phase rate ramps between 0 and ω with
  the quintic blend s(u) = 10u³ − 15u⁴ + 6u⁵, u = (t − t_a)/T_ramp::

      ramp up:   φ̇ = ω s(u),       φ = ω T_ramp S(u),            S(u) = ∫₀ᵘ s = u⁴(5/2 − 3u + u²)
      ramp down: φ̇ = ω (1 − s(u)), φ = φ_a + ω T_ramp (u − S(u))

  so φ, φ̇ and φ̈ = ±ω s'(u)/T_ramp are continuous with the constant-rate pieces (s' = s'' = 0 at the
  ends). For a shape g, p = C + g(φ), ṗ = g'(φ) φ̇, p̈ = g''(φ) φ̇² + g'(φ) φ̈ are then continuous.
  transition_in is a ramp-up ON the circle (phase advance ω T/2), so the circle segment starts at
  φ_c = ω_c T_in / 2 (0.3π with the defaults) and makes exactly f_c · T_circle turns.
  The figure-8 phase is offset so that its ramp-down ends exactly at φ_8 = 2πm (at C, at rest).
* Shape switch (transition_mid): the two paths cannot meet at rest at a common point within the
  fixed times, so the reference cross-fades between the two MOVING references with the quintic
  blend σ(u): p = C + (1 − σ) c(φ_c) + σ f(φ_8), giving
  ṗ = (1−σ)ċ + σḟ + σ̇ (f − c),  p̈ = (1−σ)c̈ + σf̈ + 2σ̇(ḟ − ċ) + σ̈ (f − c);
  σ̇ = σ̈ = 0 at both ends makes it C² with the circle before and the figure-8 after.

Orientation is fixed at the start orientation (ω = α = 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from dockbench.planners.base import PLANNERS, Planner, PlannerContext, Reference, Segment, constant_orientation
from dockbench.sim.config import param
from dockbench.sim.errors import ScenarioError

TWO_PI = 2.0 * math.pi


def quintic_blend_integral(u: float) -> float:
    """S(u) = ∫₀ᵘ s(v) dv = u⁴(5/2 − 3u + u²) of the quintic blend (unclamped polynomial)."""
    u2 = u * u
    return u2 * u2 * (2.5 - 3.0 * u + u2)


def _quintic_poly(u: float) -> tuple[float, float, float]:
    """s, s', s'' of 10u³ − 15u⁴ + 6u⁵ WITHOUT clamping (for one-sided limits at piece ends)."""
    u2 = u * u
    u3 = u2 * u
    return (
        u3 * (10.0 - 15.0 * u + 6.0 * u2),
        30.0 * u2 * (1.0 - 2.0 * u + u2),
        60.0 * u * (1.0 - 3.0 * u + 2.0 * u2),
    )


@dataclass(frozen=True)
class Figure8Config:
    transition_duration: float = param(1.5, unit="s", ge=1e-3, le=600.0, doc="transition_in and transition_mid length")
    circle_radius: float = param(0.10, unit="m", ge=1e-4, le=1.0, doc="vertical (y-z) circle radius")
    circle_frequency: float = param(0.2, unit="Hz", ge=1e-3, le=10.0, doc="circle revolutions per second")
    circle_duration: float = param(5.0, unit="s", ge=1e-3, le=3600.0, doc="time on the circle at full rate")
    figure8_ax: float = param(0.10, unit="m", ge=1e-4, le=1.0, doc="figure-8 amplitude along world x")
    figure8_ay: float = param(0.07, unit="m", ge=1e-4, le=1.0, doc="figure-8 amplitude along world y")
    figure8_frequency: float = param(0.2, unit="Hz", ge=1e-3, le=10.0, doc="figure-8 cycles per second")
    figure8_duration: float = param(5.0, unit="s", ge=1e-3, le=3600.0, doc="figure-8 segment length (incl. stop ramp)")
    stop_duration: float = param(
        1.5, unit="s", ge=1e-3, le=600.0, doc="ramp of the figure-8 phase rate to 0 at the end of the figure-8 segment"
    )
    hold_duration: float = param(2.0, unit="s", ge=0.0, le=3600.0, doc="length of the 'hold' metrics segment")

    def validate(self) -> None:
        if self.stop_duration > self.figure8_duration:
            raise ScenarioError(
                f"must be <= figure8_duration ({self.figure8_duration} s), got {self.stop_duration}",
                key="stop_duration",
            )


@PLANNERS.register("figure8")
class Figure8Planner(Planner):
    """Circle then figure-8 around C = p_start, C² everywhere, fixed orientation R_start.

    Attributes:
        center: (3,) C [m], world.
        breakpoints: piece boundaries [s]: (0, t_in, t_circle_end, t_mid_end, t_stop_start, t_end).
        piece_names: names of the 6 pieces (the 5 metric segments, figure8 split in 'figure8' and
            'figure8_stop'); piece k is valid on [breakpoints[k], breakpoints[k+1]) (hold: to ∞).
    """

    Config = Figure8Config

    piece_names = ("transition_in", "circle", "transition_mid", "figure8", "figure8_stop", "hold")

    def __init__(self, config: Figure8Config, ctx: PlannerContext):
        super().__init__(config, ctx)
        T0 = np.array(ctx.T_world_start, dtype=float).reshape(4, 4)
        self.center = T0[:3, 3].copy()
        self.R_start = T0[:3, :3].copy()
        self._orientation = constant_orientation(self.R_start)
        c = config
        self.w_c = TWO_PI * c.circle_frequency
        self.w_8 = TWO_PI * c.figure8_frequency
        Ttr = c.transition_duration
        t1 = Ttr
        t2 = t1 + c.circle_duration
        t3 = t2 + Ttr
        t5 = t3 + c.figure8_duration
        t4 = t5 - c.stop_duration
        self.breakpoints = (0.0, t1, t2, t3, t4, t5)
        # circle phase: ramp-up on [0, t1], then φ_c = φ_c1 + ω_c (t − t1)
        self.phi_c1 = 0.5 * self.w_c * Ttr
        # figure-8 phase: ends at φ_end = 2πm at t5; constant rate before t4
        advance = 0.5 * self.w_8 * c.stop_duration + self.w_8 * (t4 - t2)
        self.phi_8_end = TWO_PI * math.ceil(advance / TWO_PI)
        self.phi_8_4 = self.phi_8_end - 0.5 * self.w_8 * c.stop_duration  # φ_8 at t4
        self._c = np.empty((3, 3))  # rows: value, d/dt, d²/dt² of the circle offset
        self._f = np.empty((3, 3))  # same for the figure-8 offset

    # ---------------------------------------------------------------------------------- properties
    @property
    def duration(self) -> float:
        return self.breakpoints[-1]

    @property
    def total_duration(self) -> float:
        return self.breakpoints[-1]

    @property
    def segments(self) -> tuple[Segment, ...]:
        b = self.breakpoints
        return (
            Segment("transition_in", b[0], b[1]),
            Segment("circle", b[1], b[2]),
            Segment("transition_mid", b[2], b[3]),
            Segment("figure8", b[3], b[5]),
            Segment("hold", b[5], b[5] + self.config.hold_duration),
        )

    # ---------------------------------------------------------------------------------- phases
    def circle_phase(self, t: float, piece: int) -> tuple[float, float, float]:
        """(φ_c, φ̇_c, φ̈_c) with piece 0's ramp law or the constant-rate law (pieces ≥ 1)."""
        w = self.w_c
        if piece == 0:
            T = self.config.transition_duration
            u = t / T
            s, ds, _ = _quintic_poly(u)
            return w * T * quintic_blend_integral(u), w * s, w * ds / T
        return self.phi_c1 + w * (t - self.breakpoints[1]), w, 0.0

    def figure8_phase(self, t: float, piece: int) -> tuple[float, float, float]:
        """(φ_8, φ̇_8, φ̈_8) with the constant-rate law (pieces 2, 3) or piece 4's ramp-down law."""
        w = self.w_8
        t4 = self.breakpoints[4]
        if piece == 4:
            T = self.config.stop_duration
            u = (t - t4) / T
            s, ds, _ = _quintic_poly(u)
            return self.phi_8_4 + w * T * (u - quintic_blend_integral(u)), w * (1.0 - s), -w * ds / T
        return self.phi_8_4 - w * (t4 - t), w, 0.0

    # ---------------------------------------------------------------------------------- shapes
    def _circle(self, phi: float, dphi: float, ddphi: float) -> np.ndarray:
        """Rows [c, ċ, c̈] (3, 3) of c(φ) = r [0, sin φ, 1 − cos φ]."""
        r = self.config.circle_radius
        s, co = math.sin(phi), math.cos(phi)
        out = self._c
        out[:, 0] = 0.0
        out[0, 1], out[0, 2] = r * s, r * (1.0 - co)
        out[1, 1], out[1, 2] = r * co * dphi, r * s * dphi
        out[2, 1] = r * (-s * dphi * dphi + co * ddphi)
        out[2, 2] = r * (co * dphi * dphi + s * ddphi)
        return out

    def _figure8(self, phi: float, dphi: float, ddphi: float) -> np.ndarray:
        """Rows [f, ḟ, f̈] (3, 3) of f(φ) = [a_x sin φ, a_y sin 2φ, 0]."""
        ax, ay = self.config.figure8_ax, self.config.figure8_ay
        s1, c1 = math.sin(phi), math.cos(phi)
        s2, c2 = math.sin(2.0 * phi), math.cos(2.0 * phi)
        out = self._f
        out[:, 2] = 0.0
        out[0, 0], out[0, 1] = ax * s1, ay * s2
        out[1, 0], out[1, 1] = ax * c1 * dphi, 2.0 * ay * c2 * dphi
        out[2, 0] = ax * (-s1 * dphi * dphi + c1 * ddphi)
        out[2, 1] = ay * (-4.0 * s2 * dphi * dphi + 2.0 * c2 * ddphi)
        return out

    # ---------------------------------------------------------------------------------- evaluation
    def piece_at(self, t: float) -> int:
        """Index of the piece whose formula applies at time t [s] (left-closed intervals)."""
        b = self.breakpoints
        for k in range(5, 0, -1):
            if t >= b[k]:
                return k
        return 0

    def evaluate_piece(self, piece: int, t: float, out: Reference) -> None:
        """Fill ``out`` with piece ``piece``'s formula at t (extrapolated outside its interval; used
        for one-sided junction checks). :meth:`evaluate` = evaluate_piece(piece_at(t), t)."""
        out.orientation[:] = self._orientation  # R, ω = 0, α = 0 in one copy
        if piece <= 0 and t <= 0.0 or piece >= 5:
            out.pos[...] = self.center
            out.vel[...] = 0.0
            out.acc[...] = 0.0
            return
        if piece in (0, 1):
            g = self._circle(*self.circle_phase(t, piece))
        elif piece in (3, 4):
            g = self._figure8(*self.figure8_phase(t, piece))
        else:  # cross-fade, piece 2
            c = self._circle(*self.circle_phase(t, 2))
            f = self._figure8(*self.figure8_phase(t, 2))
            T = self.config.transition_duration
            sg, dsg, ddsg = _quintic_poly((t - self.breakpoints[2]) / T)
            dsg /= T
            ddsg /= T * T
            d0 = f[0] - c[0]
            d1 = f[1] - c[1]
            np.multiply(c, 1.0 - sg, out=c)
            c += sg * f  # rows: (1−σ)c + σf
            c[1] += dsg * d0
            c[2] += 2.0 * dsg * d1 + ddsg * d0
            g = c
        np.add(self.center, g[0], out=out.pos)
        out.vel[...] = g[1]
        out.acc[...] = g[2]

    def evaluate(self, t: float, out: Reference) -> None:
        self.evaluate_piece(self.piece_at(t), t, out)
