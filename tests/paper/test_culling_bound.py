"""docs/theory/peg_hole.md §5: the separating-axis lower bound on a capsule–box distance (sim/culling.py) is never
above MuJoCo's exact distance, equals it when a face separates the pair, and is what the culling's reach is
compared with."""

from __future__ import annotations

import mujoco
import numpy as np
from dockbench.sim.culling import _PERM_K, _PERM_M, box_distance_bound

XML = """<mujoco><worldbody>
<body name="b" pos="0.1 -0.2 0.3" quat="0.9 0.1 0.3 0.2">
  <geom name="box" type="box" size="0.01 0.004 0.02" pos="0.01 0.02 -0.01" quat="0.7 0.2 -0.4 0.1"/>
</body>
<body name="t" mocap="true"><geom name="cap" type="capsule" size="0.004 0.02"/></body>
</worldbody></mujoco>"""


def _bound(m: mujoco.MjModel, d: mujoco.MjData) -> float:
    """The bound of the model's one capsule (geom 1) against its one box (geom 0), from their world poses."""
    Rb = d.geom_xmat[0].reshape(3, 3)
    Rc = d.geom_xmat[1].reshape(3, 3)
    p = (Rb.T @ (d.geom_xpos[1] - d.geom_xpos[0]))[None]
    w = (Rb.T @ Rc[:, 2])[None]
    H = m.geom_size[0][None]
    return float(box_distance_bound(p, w, H, H[:, _PERM_K], H[:, _PERM_M], m.geom_size[1][1], m.geom_size[1][0])[0])


def test_the_bound_is_never_above_the_exact_capsule_box_distance() -> None:
    """3000 random poses within a few centimetres of the box: bound ≤ exact distance, up to rounding (both
    are sums of a few products of numbers ≤ 0.1 m: 1e-15 m is ≈ 100 ulp of headroom). A bound that ignored
    the edge axes or used a wrong half size would break it (the second test shows it is not trivially low)."""
    m = mujoco.MjModel.from_xml_string(XML)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(7)
    apart = 0
    for _ in range(3000):
        d.mocap_pos[0] = np.array([0.1, -0.2, 0.3]) + rng.normal(0.0, 0.03, 3)
        q = rng.normal(size=4)
        d.mocap_quat[0] = q / np.linalg.norm(q)
        mujoco.mj_kinematics(m, d)
        exact = mujoco.mj_geomDistance(m, d, 1, 0, 1.0, None)
        if exact > 0.0:
            apart += 1
            assert _bound(m, d) <= exact + 1e-15
    assert apart > 1000


def test_the_bound_is_exact_for_a_capsule_beside_a_face_and_across_an_edge() -> None:
    """A capsule parallel to a face at 1 mm and one across an edge at 1 mm: the bound equals MuJoCo's distance
    (to 1e-12 m: MuJoCo's capsule–box routine is closed form in float64). (A capsule *parallel* to an edge
    past it is bounded only by the face axes: lower than the distance, the bound's slack.)"""
    m = mujoco.MjModel.from_xml_string(XML)
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    Rb = d.geom_xmat[0].reshape(3, 3)
    H = m.geom_size[0]
    r = m.geom_size[1][0]
    cases = []
    # beside the +x face, axis along the box's z: the face separates
    cases.append((d.geom_xpos[0] + Rb @ np.array([H[0] + r + 0.001, 0.0, 0.0]), Rb[:, 2]))
    # past the (+x, +y) edge, across it (axis ⟂ the edge and the diagonal): the edge axis u × e_z separates
    off = np.array([1.0, 1.0, 0.0]) / np.sqrt(2.0) * (r + 0.001)
    cases.append((d.geom_xpos[0] + Rb @ (np.array([H[0], H[1], 0.0]) + off), Rb @ np.array([1.0, -1.0, 0.0])))
    for pos, axis in cases:
        z = axis / np.linalg.norm(axis)
        x = np.cross(z, [1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.cross(z, [0.0, 1.0, 0.0])
        x /= np.linalg.norm(x)
        R = np.column_stack((x, np.cross(z, x), z))
        q = np.empty(4)
        mujoco.mju_mat2Quat(q, R.ravel())
        d.mocap_pos[0], d.mocap_quat[0] = pos, q
        mujoco.mj_kinematics(m, d)
        exact = mujoco.mj_geomDistance(m, d, 1, 0, 1.0, None)
        assert abs(exact - 0.001) < 1e-9
        assert abs(_bound(m, d) - exact) < 1e-12
