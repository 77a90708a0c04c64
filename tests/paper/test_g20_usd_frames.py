"""docs/theory/g20_hand.md §7 (the hand as a USD/PhysX articulation), equation by equation.

Needs usd-core (the physx extra); skipped with that reason without it.
"""

from __future__ import annotations

import numpy as np
import pytest

pxr = pytest.importorskip("pxr", reason="usd-core not installed; pip install 'dockbench[physx]'")

F32 = 2.0**-24
SEED = 7


def rot(axis, q):
    """Rodrigues, written here from the text: I + sin q [a]x + (1 − cos q) [a]x²."""
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(q) * k + (1 - np.cos(q)) * k @ k


@pytest.mark.parametrize("axis", [(1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)])
def test_usd_joint_frame_turns_about_the_mujoco_axis(axis):
    """R · R_a · Rot(e, q) · R_aᵀ = R · Rot(a, q), and R_a e = a exactly."""
    from dockbench.hand.usd import axis_frame, quat_matrix

    token, r_a_q = axis_frame(np.array(axis, float))
    e = np.eye(3)["XYZ".index(token)]
    r_a = quat_matrix(r_a_q)
    assert np.array_equal(r_a @ e, np.array(axis, float))  # exact: entries 0/±1
    rng = np.random.default_rng(SEED)
    r_parent = rot(rng.normal(size=3), rng.uniform(-3, 3))
    for q in rng.uniform(-2, 2, size=5):
        lhs = r_parent @ r_a @ rot(e, q) @ r_a.T
        rhs = r_parent @ rot(axis, q)
        np.testing.assert_allclose(lhs, rhs, rtol=0, atol=16 * np.finfo(float).eps)


def test_axis_frame_rejects_a_skew_axis():
    from dockbench.hand.usd import axis_frame
    from dockbench.sim.errors import ModelError

    with pytest.raises(ModelError, match="not a coordinate axis"):
        axis_frame(np.array([0.6, 0.8, 0.0]))


def test_mimic_gearing_is_minus_the_ratio():
    """q_A + G q_B = 0 with G = −r is q_A = r q_B, for every mimic joint of the spec."""
    from dockbench.hand.spec import load_spec
    from dockbench.hand.usd import build_stage, read_joints

    spec = load_spec()
    joints = {j.name: j for j in read_joints(build_stage(spec=spec))}
    n = 0
    for j in spec.joints:
        if j.mimic_of is None:
            continue
        u = joints[j.name]
        assert u.mimic_of == j.mimic_of
        assert abs(u.gearing - (-j.ratio)) <= F32 * j.ratio  # stored as float32
        q_b = 0.7
        assert abs(-u.gearing * q_b - j.ratio * q_b) <= F32 * j.ratio * q_b
        n += 1
    assert n == 5
