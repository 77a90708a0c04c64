"""docs/theory/peg_hole.md: the two-point-contact tilt, the ring's corner radius (from the built MuJoCo model)
and the contact impulse of the metrics."""

from __future__ import annotations

import math

import mujoco
import numpy as np
from dockbench.sim.assembly import assemble
from dockbench.sim.peg_hole import max_tilt, ring_corner_radius
from dockbench.sim.scenario import scenario_from_dict
from dockbench.telemetry.metrics import contact_impulse

from tests.helpers import EPS, scenario_dict


def test_max_tilt_solves_the_two_point_contact_equation_and_tends_to_clearance_over_depth() -> None:
    d_p, d_h = 0.007986, 0.0081
    for ell in (0.002, 0.005, 0.0125, 0.025):
        th = max_tilt(d_p, d_h, ell)
        # the root: d_p cos θ + ℓ sin θ = d_h to the round-off of a few operations on 10 mm numbers
        assert abs(d_p * math.cos(th) + ell * math.sin(th) - d_h) < 64 * EPS * d_h
        # to second order θ = δ/ℓ + d_p θ² / (2 ℓ): θ ≥ δ/ℓ, the relative excess ≈ d_p δ / (2 ℓ²) (bounded here
        # with a factor 2 for the higher orders)
        small = (d_h - d_p) / ell
        assert small <= th and (th - small) / small < 2.0 * d_p * (d_h - d_p) / (2 * ell**2)
    # Factory's hole at full depth: 0.26°
    assert abs(math.degrees(max_tilt(d_p, d_h, 0.025)) - 0.2613) < 5e-4
    # a short engagement (√(d_p² + ℓ²) ≤ d_h: ℓ ≤ 1.35 mm here) cannot wedge: the peg may lie across the hole
    assert max_tilt(d_p, d_h, 0.001) == math.pi / 2.0


def test_the_ring_corners_of_the_built_bore_lie_at_r_over_cos_pi_over_n() -> None:
    d = scenario_dict("peg/iiwa14_peg_khatib")
    m = assemble(scenario_from_dict(d)).model
    data = mujoco.MjData(m)
    mujoco.mj_kinematics(m, data)
    body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "target")
    R_t, o_t = data.xmat[body].reshape(3, 3), data.xpos[body]
    planes = []  # (inward unit normal n in the xy plane, offset: n·p = −r on the face)
    for g in range(m.ngeom):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or ""
        if name.startswith("bore_"):
            c = R_t.T @ (data.geom_xpos[g] - o_t)
            er = np.array([c[0], c[1]]) / math.hypot(c[0], c[1])
            R = R_t.T @ data.geom_xmat[g].reshape(3, 3)
            k = int(np.argmax(np.abs(R[:2].T @ er)))
            planes.append((er, c[:2] @ er - m.geom_size[g][k]))
    n = len(planes)
    r_h = (d["tool"]["diameter"] + d["target"]["clearance"]) / 2.0
    for i in range(n):
        (a, ra), (b, rb) = planes[i], planes[(i + 1) % n]
        corner = np.linalg.solve(np.stack([a, b]), np.array([ra, rb]))
        assert abs(np.linalg.norm(corner) - ring_corner_radius(r_h, n)) < 1e-12


def test_contact_impulse_is_the_integral_of_the_period_means() -> None:
    """Each truth sample is the mean force over its control period, so Σ f_k T_c is the impulse exactly; for a
    half-sine pulse F sin(π t / T) sampled at period ends the sum is within F T_c of the integral 2 F T / π (the
    pulse moves by at most F π T_c / T ≤ F over a period; one period's worth at most at each end)."""
    Tc, F, T = 1e-3, 7.0, 0.3
    t = np.arange(0.0, 1.0, Tc)
    const = np.full(len(t), F)
    assert abs(contact_impulse(t, const) - F * Tc * len(t)) < len(t) * EPS * F
    f = np.where(t < T, F * np.sin(np.pi * np.clip(t, 0.0, T) / T), 0.0)
    assert abs(contact_impulse(t, f) - 2.0 * F * T / math.pi) < F * Tc
    assert contact_impulse(t[:1], const[:1]) == 0.0
