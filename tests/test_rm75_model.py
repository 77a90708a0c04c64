"""Our dual RM75 URDF: loads in MuJoCo directly, names, limits, inertias, mounts and FK vs docs/models.md §4."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from importlib import resources

import mujoco
import numpy as np
import pytest

RESOURCE = ("robots", "dual_rm75", "dual_rm75.urdf")
POS_TOL = 2e-4    # [m] the derived positions below are rounded to 0.1 mm
AXIS_TOL = 2e-4   # [-] the derived axes below are rounded to 1e-4
FK_TOL = 1e-9     # [m, -] our URDF vs the DH table below (both use exact pi/2)
MIRROR_TOL = 1e-3  # [m] left/right mount asymmetry of the vendor numbers is 0.1 mm

# [S1] RM75-B canonical limits / masses (docs/models.md §4)
LIMITS = [3.106, 2.2689, 3.106, 2.356, 3.106, 2.234, 6.28]
MASSES = [1.574, 1.217, 1.11, 0.685, 0.619, 0.602, 0.107]
BASE_MASS = 1.862
# [S1]-derived standard DH: d, alpha (a = 0, offsets 0); T_i = Rz(q) Tz(d) Rx(alpha)
DH_D = [0.2405, 0.0, 0.256, 0.0, 0.21, 0.0, 0.144]
DH_ALPHA = [-np.pi / 2, np.pi / 2, -np.pi / 2, np.pi / 2, -np.pi / 2, np.pi / 2, 0.0]
# [S3] vendor home pose ("hands forward") and derived geometry (docs/models.md §4)
HOME_LEFT = [-0.47, 0.0, -0.50, -2.04, 0.62, 1.09, -0.59]
HOME_RIGHT = [0.47, 0.0, 0.50, 2.04, -0.62, -1.09, 0.59]
SHOULDER_IN_BODY = {"l": [0.2638, -0.0335, 0.8505], "r": [-0.2639, -0.0333, 0.8505]}
J1_AXIS_IN_BODY = {"l": [0.9063, -0.4226, 0.0], "r": [-0.9063, -0.4226, 0.0]}


@pytest.fixture(scope="module")
def urdf_text():
    return resources.files("dockbench.assets").joinpath(*RESOURCE).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def model():
    with resources.as_file(resources.files("dockbench.assets").joinpath(*RESOURCE)) as path:
        return mujoco.MjModel.from_xml_path(str(path))


def frame(model, data, body):
    b = model.body(body).id
    return data.xpos[b].copy(), data.xmat[b].reshape(3, 3).copy()


def in_body(model, data, body):
    """Pose of ``body`` in body_base_link."""
    p0, R0 = frame(model, data, "body_base_link")
    p, R = frame(model, data, body)
    return R0.T @ (p - p0), R0.T @ R


def set_q(model, data, side, q):
    for k, v in enumerate(q, start=1):
        data.qpos[model.joint(f"{side}_joint{k}").qposadr[0]] = v


def dh_fk(q):
    T = np.eye(4)
    for qi, d, al in zip(q, DH_D, DH_ALPHA, strict=True):
        c, s, ca, sa = np.cos(qi), np.sin(qi), np.cos(al), np.sin(al)
        T = T @ np.array([[c, -s * ca, s * sa, 0], [s, c * ca, -c * sa, 0], [0, sa, ca, d], [0, 0, 0, 1]])
    return T


def test_primitive_geometry_only_and_names(urdf_text, model):
    root = ET.fromstring(urdf_text)
    shapes = {child.tag for g in root.iter("geometry") for child in g}
    assert shapes <= {"box", "cylinder", "sphere"}
    assert root.find(".//mesh") is None
    names = [model.joint(i).name for i in range(model.njnt)]
    assert names == [f"l_joint{k}" for k in range(1, 8)] + [f"r_joint{k}" for k in range(1, 8)]
    assert all(model.jnt_type[i] == mujoco.mjtJoint.mjJNT_HINGE for i in range(model.njnt))
    for side in "lr":
        for k in range(1, 8):
            assert model.body(f"{side}_link{k}").parentid == model.body(
                f"{side}_link{k - 1}" if k > 1 else f"{side}_base_link").id


def test_limits_and_inertials_are_the_s1_values(model):
    for side in "lr":
        ranges = np.array([model.joint(f"{side}_joint{k}").range for k in range(1, 8)])
        # exact: the decimals written in the URDF (decimal → float parsing is correctly rounded)
        np.testing.assert_array_equal(ranges, np.stack([-np.array(LIMITS), LIMITS], axis=1))
        masses = [model.body(f"{side}_link{k}").mass[0] for k in range(1, 8)]
        np.testing.assert_allclose(masses, MASSES, rtol=1e-12)
        assert model.body(f"{side}_base_link").mass[0] == pytest.approx(BASE_MASS)
        assert BASE_MASS + sum(masses) == pytest.approx(7.776)


def test_single_arm_chain_matches_the_dh_table(model):
    data = mujoco.MjData(model)
    rng = np.random.default_rng(7)
    for _ in range(5):
        q = rng.uniform(-np.array(LIMITS), LIMITS)
        set_q(model, data, "l", q)
        set_q(model, data, "r", q)
        mujoco.mj_kinematics(model, data)
        for side, yaw in (("l", 0.0), ("r", np.pi)):  # the right arm's joint 1 origin is yawed by pi
            pb, Rb = frame(model, data, f"{side}_base_link")
            p7, R7 = frame(model, data, f"{side}_link7")
            Rz = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]])
            T = dh_fk(q)
            np.testing.assert_allclose(Rb.T @ (p7 - pb), Rz @ T[:3, 3], atol=FK_TOL)
            np.testing.assert_allclose(Rb.T @ R7, Rz @ T[:3, :3], atol=FK_TOL)


def test_zero_pose_flange_and_mounts(model):
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    for side in "lr":
        pb, Rb = frame(model, data, f"{side}_base_link")
        p7, _ = frame(model, data, f"{side}_link7")
        np.testing.assert_allclose(Rb.T @ (p7 - pb), [0, 0, 0.8505], atol=1e-12)  # arm straight out
        p_sh, R1 = in_body(model, data, f"{side}_link1")
        np.testing.assert_allclose(p_sh, SHOULDER_IN_BODY[side], atol=POS_TOL)
        np.testing.assert_allclose(R1[:, 2], J1_AXIS_IN_BODY[side], atol=AXIS_TOL)
    np.testing.assert_allclose(frame(model, data, "body_base_link")[0], [0, 0, 0.18], atol=1e-12)


def test_vendor_home_pose_points_both_hands_forward_symmetrically(model):
    data = mujoco.MjData(model)
    set_q(model, data, "l", HOME_LEFT)
    set_q(model, data, "r", HOME_RIGHT)
    mujoco.mj_kinematics(model, data)
    pl, Rl = in_body(model, data, "l_link7")
    pr, Rr = in_body(model, data, "r_link7")
    np.testing.assert_allclose(pl * [-1, 1, 1], pr, atol=MIRROR_TOL)
    assert Rl[:, 2] @ [0, -1, 0] > 0.99 and Rr[:, 2] @ [0, -1, 0] > 0.99  # flange z ~ forward (-y)
    # docs/models.md §4 gives the flanges at (±0.346, -0.35, 0.745) with the vendor's shorter link7 (0.115 m,
    # d7 here 0.144): moving our flange back by 0.029 m along its z must land there (rounded values)
    np.testing.assert_allclose(pl - 0.029 * Rl[:, 2], [0.346, -0.35, 0.745], atol=0.01)


def test_right_arm_mirrors_the_left_for_negated_joint_angles(model):
    data = mujoco.MjData(model)
    rng = np.random.default_rng(11)
    for _ in range(5):
        q = rng.uniform(-1.5, 1.5, 7)
        set_q(model, data, "l", q)
        set_q(model, data, "r", -q)
        mujoco.mj_kinematics(model, data)
        for k in range(1, 8):
            pl, _ = in_body(model, data, f"l_link{k}")
            pr, _ = in_body(model, data, f"r_link{k}")
            np.testing.assert_allclose(pl * [-1, 1, 1], pr, atol=MIRROR_TOL)
