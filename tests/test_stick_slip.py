"""experiments/stick_slip.py: the law's joint damping B by a central difference of the Python law equals the
Khatib closed form (docs/theory/khatib.md (4.2)), and the check flags the FR3 peg's former ε and passes its current
one.

Bound for B: the difference quotient of an affine function is exact up to round-off, ≈ 2 ε_mach |τ| / (2 δ) with
|τ| ≤ 100 N·m and δ = 1e-3 rad/s: 2e-11 N·m·s/rad; the closed form's own solve error is ≤ n ε_mach κ(Λ⁻¹) |B|. We
allow 1e-6 |B|max + 1e-9 (the dropped null-space projection would change B by O(d_null) = 10)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from dockbench.experiments.stick_slip import check, joint_damping
from dockbench.sim.loop import build
from dockbench.sim.scenario import load_scenario

from tests.helpers import REPO


@pytest.fixture(scope="module")
def peg_khatib():
    return build(load_scenario(REPO / "scenarios" / "peg" / "fr3_peg_khatib.yaml"))


def test_the_numerical_joint_damping_is_the_khatib_closed_form(peg_khatib) -> None:
    s = peg_khatib
    c = s.controller.config
    q = np.array(s.q0, dtype=float) + np.random.default_rng(3).uniform(-0.2, 0.2, s.plant.nv)
    B = joint_damping(s, q)
    snap = s.dynamics.update(q, np.zeros(s.plant.nv))
    J, Mi = snap.J_ee_lwa, snap.Minv
    Lam = np.linalg.inv(J @ Mi @ J.T)
    Dm = np.diag([c.d / c.m] * 3 + [c.d_rot / c.m_rot] * 3)
    want = J.T @ Lam @ Dm @ J + c.d_null * (np.eye(s.plant.nv) - J.T @ Lam @ J @ Mi)
    assert np.abs(B - want).max() <= 1e-6 * np.abs(want).max() + 1e-9


def test_the_check_flags_the_former_scale_and_passes_the_shipped_one(peg_khatib) -> None:
    s = peg_khatib
    shipped = check(s, np.array(s.q0, dtype=float))
    assert shipped["velocity_keyed"] and shipped["eps"] == 0.1 and shipped["ok"]
    assert 0.01 < shipped["eps_min"] < 0.1
    s.controller.config = dataclasses.replace(s.controller.config, feedforward_velocity_scale=0.01)
    try:
        former = check(s, np.array(s.q0, dtype=float))
    finally:
        s.controller.config = dataclasses.replace(s.controller.config, feedforward_velocity_scale=0.1)
    assert not former["ok"] and former["eps_min"] == pytest.approx(shipped["eps_min"], rel=1e-12)
    assert np.all(former["f_over_eps"][:4] > former["B_diag"][:4])


def test_a_joint_the_law_does_not_damp_on_its_own_has_no_safe_scale() -> None:
    """fr3_docking at its start pose: B_44 < 0 (the null-space term of (4.2) is not symmetric), so ε_min = ∞ and
    the check fails whatever ε."""
    s = build(load_scenario(REPO / "scenarios" / "fr3_docking.yaml"))
    r = check(s, np.array(s.q0, dtype=float))
    assert r["B_diag"][3] < 0.0 and r["eps_min"] == float("inf") and not r["ok"]
