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


def test_the_reach_speed_is_mujocos_velocity_at_the_point_and_bounds_every_capsule_point() -> None:
    """Eq. (4)'s speeds: ``spatial_speed`` (MuJoCo's ``cvel`` moved to a point, v(p) = v_c − (p − c) × ω) equals
    ``mj_objectVelocity`` at a geom's origin and at a body's origin (mjOBJ_XBODY) to round-off (1e-12 m/s on speeds
    of order 1: a few products of numbers ≤ 10), and ‖v‖ + ‖ω‖ ρ_T bounds the speed of every point of the
    capsule, ρ_T = ‖c‖ + l + r measured from the geom's origin (random points in it, random velocities)."""
    from dockbench.sim.culling import bounding_capsule, spatial_speed

    xml = """<mujoco><worldbody><body pos="0.1 0.2 0.3"><freejoint/>
      <geom type="box" size=".1 .1 .1" pos="0.3 0 0"/>
      <body pos="0 0.1 0"><joint type="hinge" axis="0 1 0"/><joint type="slide"/>
        <geom type="capsule" size=".01 .05" pos="0 0.02 0.2" quat="0.9 0.3 0.1 0"/></body></body>
    </worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(3)
    cap = 1
    c, u, half, r = bounding_capsule(m, cap)
    rho = float(np.linalg.norm(c)) + half + r
    for _ in range(200):
        d.qpos[3:7] = rng.normal(size=4)
        d.qpos[3:7] /= np.linalg.norm(d.qpos[3:7])
        d.qpos[7:] = rng.normal(size=m.nq - 7)
        d.qvel[:] = rng.normal(0.0, 2.0, m.nv)
        mujoco.mj_forward(m, d)
        b = int(m.geom_bodyid[cap])
        for kind, obj, point, body in ((mujoco.mjtObj.mjOBJ_GEOM, cap, d.geom_xpos[cap], b),
                                       (mujoco.mjtObj.mjOBJ_XBODY, 1, d.xpos[1], 1)):
            ref = np.zeros(6)
            mujoco.mj_objectVelocity(m, d, kind, obj, ref, 0)
            v, w = spatial_speed(d.cvel, d.subtree_com, body, int(m.body_rootid[body]), point)
            assert abs(v - np.linalg.norm(ref[3:])) < 1e-12 and abs(w - np.linalg.norm(ref[:3])) < 1e-12
        v, w = spatial_speed(d.cvel, d.subtree_com, b, int(m.body_rootid[b]), d.geom_xpos[cap])
        R = d.geom_xmat[cap].reshape(3, 3)
        ref = np.zeros(6)
        for _ in range(5):  # a point of the capsule: on its segment, then up to r away
            s = rng.uniform(-half, half)
            off = rng.normal(size=3)
            pt = d.geom_xpos[cap] + R @ (c + s * u + r * rng.uniform() * off / np.linalg.norm(off))
            mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_GEOM, cap, ref, 0)
            vp = ref[3:] + np.cross(ref[:3], pt - d.geom_xpos[cap])
            assert np.linalg.norm(vp) <= v + w * rho + 1e-12
