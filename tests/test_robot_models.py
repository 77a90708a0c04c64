"""Checks of the hand-written robot models assets/robots/{iiwa14,fr3}.xml and limits.yaml.

Every expected number below is hard-coded from the public sources the models were written from
(docs/models.md §1–2; attribution in assets/NOTICE); the tests read no external file.
  * iiwa14: menagerie kuka_iiwa_14/iiwa14.xml @ c71a0fa7 (frames, ranges, inertials, excludes) and
    Drake/KUKA brochure torque and velocity limits (docs/models.md §1).
  * FR3: menagerie franka_fr3/fr3.xml @ 0059d43 (frames, wider ranges, damping/armature/frictionloss,
    torque limits) and franka_description 1.0.1 robots/fr3/inertials.yaml full-precision inertials
    (docs/models.md §2).
  * Flange poses: forward kinematics at the home poses (docs/models.md §2, assets/robots/limits.yaml).
Conventions: SI units, quaternions (w, x, y, z), inertia tuples (ixx, iyy, izz, ixy, ixz, iyz) about
the COM in the link frame.
"""

from __future__ import annotations

import importlib.resources
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import mujoco
import numpy as np
import pytest
import yaml

# Tolerance table (the only tolerances used in this module). These compare model DATA, not computations:
# decimal → float parsing is correctly rounded on every machine, so "verbatim" numbers agree exactly
# (measured: bit for bit) and a 1e-12 tolerance only admits MuJoCo's own normalisations; the exact
# comparisons (assert_array_equal) are unit axes, gears and zeros written as integers in the XML.
TOL_EXACT = 1e-12  # numbers written verbatim in the XML (pos, COM, ranges, limits, dynamics)
TOL_QUAT = 1e-12  # body quats after MuJoCo's normalisation (one division by a norm: ≤ 2ε)
TOL_INERTIA = 1e-9  # kg m^2, full tensor rebuilt from body_inertia + body_iquat
TOL_MASS_SUM = 1e-9  # kg, sum of the masses as written
TOL_FK_EXACT = 1e-9  # m, iiwa flange at q = 0 (exact rational kinematics)
TOL_FK_FACTS = 1e-4  # m, FR3 flange at "ready" as rounded in limits.yaml (0.3069, 0, 0.5903)
TOL_FK_STORED = 1e-6  # m, home_site_pos_in_world written in limits.yaml (9 decimals). NOTE: iiwa14's
#   stored x (0.549659781) is 9.3e-7 off the model's FK (0.549660706): a stale value, not round-off (the
#   FK is deterministic to ~1e-15); the tolerance admits it, 9 decimals alone would allow 5e-10
TOL_PIN = 1e-10  # MuJoCo vs Pinocchio (same MJCF) mass matrix / gravity / FK: both ≲ 8·γ_3 relative
#   (7-link chains, either may contract to FMA), ≈ 1e-13 on |g| ≈ 50 N·m; measured ≤ 8.8e-13
MIN_DOWN_DOT = 0.999  # flange z . (-world z) at the home pose
MIN_LIMIT_MARGIN = 0.1  # rad, home pose distance to the joint limits


@dataclass(frozen=True)
class Link:
    """Expected data of one body (from the sources)."""

    name: str
    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float]  # as written (MuJoCo normalises)
    mass: float
    com: tuple[float, float, float]
    inertia: tuple[float, float, float, float, float, float]  # ixx iyy izz ixy ixz iyz


@dataclass(frozen=True)
class Robot:
    """Expected data of one robot model (from the sources)."""

    key: str  # key in limits.yaml, file stem
    base: Link  # fixed body (no joint)
    links: tuple[Link, ...]  # links 1..7, each with one hinge joint
    joints: tuple[str, ...]
    ranges: tuple[tuple[float, float], ...]
    torque: tuple[float, ...]
    velocity: tuple[float, ...]
    damping: tuple[float, ...]
    armature: tuple[float, ...]
    frictionloss: tuple[float, ...]
    site_pos: tuple[float, float, float]  # attachment_site in link7
    excludes: frozenset[frozenset[str]]  # at least these exclude pairs
    mass_links_1_7: float  # sum of the masses as written in the model


# --- KUKA LBR iiwa 14 R820: docs/models.md §1 (menagerie c71a0fa7 + Drake limits) ---
IIWA = Robot(
    key="iiwa14",
    base=Link("base", (0, 0, 0), (1, 0, 0, 0), 5.0, (-0.1, 0, 0.07), (0.05, 0.06, 0.03, 0, 0, 0)),
    links=(
        Link("link1", (0, 0, 0.1575), (1, 0, 0, 0), 5.76, (0, -0.03, 0.12),
             (0.0333, 0.033, 0.0123, 0, 0, 0)),
        Link("link2", (0, 0, 0.2025), (0, 0, 1, 1), 6.35, (0.0003, 0.059, 0.042),
             (0.0305, 0.011, 0.0304, 0, 0, 0)),
        Link("link3", (0, 0.2045, 0), (0, 0, 1, 1), 3.5, (0, 0.03, 0.13),
             (0.025, 0.0238, 0.0076, 0, 0, 0)),
        Link("link4", (0, 0, 0.2155), (1, 1, 0, 0), 3.5, (0, 0.067, 0.034),
             (0.017, 0.006, 0.0164, 0, 0, 0)),
        Link("link5", (0, 0.1845, 0), (0, 0, 1, 1), 3.5, (0.0001, 0.021, 0.076),
             (0.01, 0.0087, 0.00449, 0, 0, 0)),
        Link("link6", (0, 0, 0.2155), (1, 1, 0, 0), 1.8, (0, 0.0006, 0.0004),
             (0.0049, 0.0036, 0.0047, 0, 0, 0)),
        Link("link7", (0, 0.081, 0), (0, 0, 1, 1), 1.2, (0, 0, 0.02),
             (0.001, 0.001, 0.001, 0, 0, 0)),
    ),
    joints=tuple(f"joint{i}" for i in range(1, 8)),
    ranges=((-2.96706, 2.96706), (-2.0944, 2.0944), (-2.96706, 2.96706), (-2.0944, 2.0944),
            (-2.96706, 2.96706), (-2.0944, 2.0944), (-3.05433, 3.05433)),
    torque=(320.0, 320.0, 176.0, 176.0, 110.0, 40.0, 40.0),
    velocity=(1.483529864195, 1.483529864195, 1.745329251994, 1.308996938996,
              2.268928027593, 2.356194490192, 2.356194490192),  # 85/85/100/75/130/135/135 deg/s
    damping=(0.0,) * 7,  # menagerie sets none
    armature=(0.0,) * 7,
    frictionloss=(0.0,) * 7,
    site_pos=(0, 0, 0.045),
    excludes=frozenset(frozenset(p) for p in (
        ("base", "link1"), ("base", "link2"), ("base", "link3"), ("link1", "link3"),
        ("link3", "link5"), ("link4", "link7"), ("link5", "link7"))),
    mass_links_1_7=25.61,
)

# --- Franka FR3: docs/models.md §2 (menagerie 0059d43 + franka_description 1.0.1 inertials) ---
FR3 = Robot(
    key="fr3",
    base=Link("fr3_link0", (0, 0, 0), (1, 0, 0, 0), 2.3966, (-0.0172, 0.0004, 0.0745),
              (0.009, 0.0115, 0.0085, 0.0, 0.002, 0.0)),
    links=(
        Link("fr3_link1", (0, 0, 0.333), (1, 0, 0, 0), 2.9274653454,
             (4.128e-07, -0.0181251324, -0.038603597),
             (0.023927316485107913, 0.0224821613275756, 0.006350098258530016,
              1.3317903455714081e-05, -0.00011404774918616684, -0.0019950320628240115)),
        Link("fr3_link2", (0, 0, 0), (1, -1, 0, 0), 2.9355370338,
             (0.0031828864, -0.0743221644, 0.0088146084),
             (0.041938946257609425, 0.02514514885014724, 0.06170214472888839,
              0.00020257331521090626, 0.004077784227179924, -0.0042252158006570156)),
        Link("fr3_link3", (0, -0.316, 0), (1, 1, 0, 0), 2.2449013699,
             (0.0407015686, -0.0048200565, -0.0289730823),
             (0.02410142547240885, 0.01974053266708178, 0.019044494482244823,
              0.002404694559042109, -0.002856269270114313, -0.002104212683891874)),
        Link("fr3_link4", (0.0825, 0, 0), (1, 1, 0, 0), 2.6155955791,
             (-0.0459100965, 0.063049296, -0.0085187868),
             (0.03452998321913202, 0.028881621933049058, 0.04125471171146641,
              0.01322552265982813, 0.01015142998484113, -0.0009762833870704552)),
        Link("fr3_link5", (-0.0825, 0.384, 0), (1, -1, 0, 0), 2.3271207594,
             (-0.0016039605, 0.0292536262, -0.097296599),
             (0.051610278463662895, 0.04787729713371481, 0.016423625579357254,
              -0.005715173387783472, -0.0035673167625872135, 0.010673985108535986)),
        Link("fr3_link6", (0, 0, 0), (1, 1, 0, 0), 1.8170376524,
             (0.0597131221, -0.0410294666, -0.0101692726),
             (0.005412333594383447, 0.014058329545509979, 0.016080817924212554,
              0.006193456360285834, 0.0014219289306117652, -0.0013140753741120031)),
        Link("fr3_link7", (0.088, 0, 0), (1, 1, 0, 0), 0.6271432862,
             (0.0045225817, 0.0086261921, -0.0161633251),
             (0.00021092389150104718, 0.00017718568002411474, 5.993190599659971e-05,
              -2.433299114461931e-05, 4.564480393778983e-05, 8.744070223226438e-05)),
    ),
    joints=tuple(f"fr3_joint{i}" for i in range(1, 8)),
    # menagerie 0059d43 (wider) ranges
    ranges=((-2.9007, 2.9007), (-1.8361, 1.8361), (-2.9007, 2.9007), (-3.077, -0.1169),
            (-2.8763, 2.8763), (0.4398, 4.6216), (-3.0508, 3.0508)),
    torque=(87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0),
    velocity=(2.62, 2.62, 2.62, 2.62, 5.26, 4.18, 5.26),
    damping=(0.21,) * 7,
    armature=(0.195, 0.195, 0.195, 0.195, 0.074, 0.074, 0.074),
    frictionloss=(1.137, 1.137, 1.137, 1.137, 0.763, 0.44, 0.248),
    site_pos=(0, 0, 0.107),
    excludes=frozenset({frozenset(("fr3_link0", "fr3_link1"))}),
    # Full-precision franka_description sum. The menagerie's total 15.494813 kg is the sum of the
    # 6-digit rounded masses; it differs from this by 1.2e-5 kg (checked separately below).
    mass_links_1_7=15.4948010262,
)
FR3_MASS_MENAGERIE = 15.494813  # the menagerie model's mass of links 1-7
FR3_MASS_MENAGERIE_TOL = 2e-5  # covers the 1.2e-5 kg rounding difference above

ROBOTS = {r.key: r for r in (IIWA, FR3)}
RobotCase = pytest.mark.parametrize("robot", [IIWA, FR3], ids=lambda r: r.key)


def _resource(*parts: str) -> importlib.resources.abc.Traversable:
    res = importlib.resources.files("dockbench.assets")
    for part in parts:
        res = res / part
    return res


def _load(robot: Robot) -> mujoco.MjModel:
    with importlib.resources.as_file(_resource("robots", f"{robot.key}.xml")) as path:
        return mujoco.MjModel.from_xml_path(str(path))


@pytest.fixture(scope="module")
def models() -> dict[str, mujoco.MjModel]:
    return {key: _load(robot) for key, robot in ROBOTS.items()}


@pytest.fixture(scope="module")
def limits() -> dict:
    return yaml.safe_load(_resource("robots", "limits.yaml").read_text())


def _inertia_tensor(ixx: float, iyy: float, izz: float, ixy: float, ixz: float, iyz: float) -> np.ndarray:
    return np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])


def _quat_to_mat(quat: np.ndarray) -> np.ndarray:
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, np.asarray(quat, dtype=float))
    return mat.reshape(3, 3)


def _site_pose(model: mujoco.MjModel, q) -> tuple[np.ndarray, np.ndarray, mujoco.MjData]:
    data = mujoco.MjData(model)
    data.qpos[:] = q
    mujoco.mj_forward(model, data)
    site = model.site("attachment_site")
    return data.site_xpos[site.id].copy(), data.site_xmat[site.id].reshape(3, 3).copy(), data


# ------------------------------------------------------------------------------------------------
# Structure
# ------------------------------------------------------------------------------------------------


@RobotCase
def test_model_sizes_and_names(models, robot):
    m = models[robot.key]
    assert (m.nq, m.nv, m.nu) == (7, 7, 7)
    assert m.njnt == 7
    assert [m.joint(i).name for i in range(m.njnt)] == list(robot.joints)
    assert [m.body(i).name for i in range(1, m.nbody)] == [robot.base.name] + [lk.name for lk in robot.links]
    # base fixed to the world, one hinge per link about local +z
    assert m.body(robot.base.name).jntnum[0] == 0
    assert m.body(robot.base.name).parentid[0] == 0
    for i, link in enumerate(robot.links):
        body = m.body(link.name)
        assert body.jntnum[0] == 1 and m.jnt_bodyid[i] == body.id
        assert m.jnt_type[i] == mujoco.mjtJoint.mjJNT_HINGE
        np.testing.assert_array_equal(m.jnt_axis[i], [0, 0, 1])
        np.testing.assert_array_equal(m.jnt_pos[i], [0, 0, 0])


def test_model_file_conventions():
    """<mujoco model=...>, compiler settings, no <option>, primitive geoms only (no meshes)."""
    for robot in ROBOTS.values():
        root = ET.fromstring(_resource("robots", f"{robot.key}.xml").read_text())
        assert root.tag == "mujoco" and root.get("model") == robot.key
        compiler = root.find("compiler")
        assert compiler.get("angle") == "radian" and compiler.get("autolimits") == "true"
        assert root.find("option") is None
        assert root.find("asset") is None
        assert not root.findall(".//geom[@mesh]")
        assert root.find(".//custom") is None


@RobotCase
def test_link_frames(models, robot):
    m = models[robot.key]
    for link in (robot.base, *robot.links):
        body = m.body(link.name)
        np.testing.assert_allclose(body.pos, link.pos, rtol=0, atol=TOL_EXACT, err_msg=link.name)
        quat = np.asarray(link.quat, dtype=float)
        np.testing.assert_allclose(body.quat, quat / np.linalg.norm(quat), rtol=0, atol=TOL_QUAT,
                                   err_msg=link.name)


@RobotCase
def test_joint_ranges(models, robot):
    m = models[robot.key]
    assert m.jnt_limited.all()
    np.testing.assert_allclose(m.jnt_range, robot.ranges, rtol=0, atol=TOL_EXACT)


@RobotCase
def test_torque_actuators(models, robot):
    m = models[robot.key]
    limit = np.asarray(robot.torque)
    assert [m.actuator(i).name for i in range(m.nu)] == [f"act_{j}" for j in robot.joints]
    for i in range(m.nu):
        assert m.actuator_trntype[i] == mujoco.mjtTrn.mjTRN_JOINT
        assert m.actuator_trnid[i, 0] == i
        assert m.actuator_gaintype[i] == mujoco.mjtGain.mjGAIN_FIXED
        assert m.actuator_biastype[i] == mujoco.mjtBias.mjBIAS_NONE
        np.testing.assert_array_equal(m.actuator_gainprm[i, :1], [1.0])
        np.testing.assert_array_equal(m.actuator_gear[i], [1, 0, 0, 0, 0, 0])
    assert m.actuator_ctrllimited.all()
    np.testing.assert_allclose(m.actuator_ctrlrange, np.c_[-limit, limit], rtol=0, atol=TOL_EXACT)
    assert m.jnt_actfrclimited.all()
    np.testing.assert_allclose(m.jnt_actfrcrange, np.c_[-limit, limit], rtol=0, atol=TOL_EXACT)


@RobotCase
def test_joint_dynamics(models, robot):
    """FR3: menagerie damping/armature/frictionloss. iiwa14: none (menagerie sets none)."""
    m = models[robot.key]
    np.testing.assert_allclose(m.dof_damping, robot.damping, rtol=0, atol=TOL_EXACT)
    np.testing.assert_allclose(m.dof_armature, robot.armature, rtol=0, atol=TOL_EXACT)
    np.testing.assert_allclose(m.dof_frictionloss, robot.frictionloss, rtol=0, atol=TOL_EXACT)
    np.testing.assert_array_equal(m.jnt_stiffness, np.zeros(7))


@RobotCase
def test_attachment_site(models, robot):
    m = models[robot.key]
    site = m.site("attachment_site")
    assert m.body(site.bodyid[0]).name == robot.links[-1].name
    np.testing.assert_allclose(site.pos, robot.site_pos, rtol=0, atol=TOL_EXACT)
    np.testing.assert_array_equal(site.quat, [1, 0, 0, 0])


@RobotCase
def test_geoms_and_contact_excludes(models, robot):
    m = models[robot.key]
    primitives = {int(t) for t in (mujoco.mjtGeom.mjGEOM_CAPSULE, mujoco.mjtGeom.mjGEOM_CYLINDER,
                                    mujoco.mjtGeom.mjGEOM_SPHERE)}
    for g in range(m.ngeom):
        assert int(m.geom_type[g]) in primitives, m.geom(g).name
        if m.geom_group[g] == 3:
            assert (m.geom_contype[g], m.geom_conaffinity[g]) == (1, 1), m.geom(g).name
        else:
            assert m.geom_group[g] == 2, m.geom(g).name
            assert (m.geom_contype[g], m.geom_conaffinity[g]) == (0, 0), m.geom(g).name
    # every body has at least one collision geom, and few of them (speed)
    per_body = np.bincount(m.geom_bodyid[m.geom_group == 3], minlength=m.nbody)[1:]
    assert (per_body >= 1).all() and (per_body <= 3).all(), per_body
    excludes = {
        frozenset((m.body(sig >> 16).name, m.body(sig & 0xFFFF).name)) for sig in m.exclude_signature
    }
    assert robot.excludes <= excludes, robot.excludes - excludes


# ------------------------------------------------------------------------------------------------
# Inertial parameters
# ------------------------------------------------------------------------------------------------


@RobotCase
def test_masses(models, robot):
    m = models[robot.key]
    for link in (robot.base, *robot.links):
        assert m.body(link.name).mass[0] == pytest.approx(link.mass, abs=TOL_EXACT), link.name
    total = sum(m.body(link.name).mass[0] for link in robot.links)
    assert total == pytest.approx(robot.mass_links_1_7, abs=TOL_MASS_SUM)


def test_fr3_mass_matches_menagerie_total(models):
    total = sum(models["fr3"].body(link.name).mass[0] for link in FR3.links)
    assert total == pytest.approx(FR3_MASS_MENAGERIE, abs=FR3_MASS_MENAGERIE_TOL)


@RobotCase
def test_inertia_tensors_and_coms(models, robot):
    """Full tensor R diag(I) R^T rebuilt from body_iquat/body_inertia equals the published full tensor."""
    m = models[robot.key]
    for link in (robot.base, *robot.links):
        body = m.body(link.name)
        rot = _quat_to_mat(body.iquat)
        tensor = rot @ np.diag(body.inertia) @ rot.T
        np.testing.assert_allclose(tensor, _inertia_tensor(*link.inertia), rtol=0, atol=TOL_INERTIA,
                                   err_msg=link.name)
        np.testing.assert_allclose(body.ipos, link.com, rtol=0, atol=TOL_EXACT, err_msg=link.name)


# ------------------------------------------------------------------------------------------------
# Kinematics, home poses, limits.yaml
# ------------------------------------------------------------------------------------------------


def test_iiwa_flange_at_zero(models):
    pos, rot, _ = _site_pose(models["iiwa14"], np.zeros(7))
    np.testing.assert_allclose(pos, [0, 0, 1.306], rtol=0, atol=TOL_FK_EXACT)
    np.testing.assert_allclose(rot, np.eye(3), rtol=0, atol=TOL_FK_EXACT)


def test_fr3_flange_at_ready(models):
    ready = [0, -np.pi / 4, 0, -3 * np.pi / 4, 0, np.pi / 2, np.pi / 4]
    pos, rot, _ = _site_pose(models["fr3"], ready)
    np.testing.assert_allclose(pos, [0.3069, 0, 0.5903], rtol=0, atol=TOL_FK_FACTS)
    np.testing.assert_allclose(pos, [0.306891, 0, 0.590282], rtol=0, atol=TOL_FK_STORED)
    s = np.sqrt(0.5)
    np.testing.assert_allclose(rot, [[s, -s, 0], [-s, -s, 0], [0, 0, -1]], rtol=0, atol=TOL_FK_STORED)


@RobotCase
def test_limits_yaml_matches_model(models, limits, robot):
    m = models[robot.key]
    entry = limits[robot.key]
    assert entry["model"] == f"robots/{robot.key}.xml"
    assert entry["site"] == "attachment_site"
    assert entry["joint_names"] == list(robot.joints)
    assert entry["actuator_names"] == [m.actuator(i).name for i in range(m.nu)]
    np.testing.assert_allclose(entry["torque_limit_Nm"], robot.torque, rtol=0, atol=TOL_EXACT)
    np.testing.assert_allclose(entry["torque_limit_Nm"], m.actuator_ctrlrange[:, 1], rtol=0, atol=TOL_EXACT)
    np.testing.assert_allclose(entry["velocity_limit_rad_s"], robot.velocity, rtol=0, atol=TOL_EXACT)
    assert len(entry["home"]) == 7


def test_iiwa_velocity_limits_in_degrees(limits):
    entry = limits["iiwa14"]
    # the YAML stores the rad/s values to 12 decimals (≤ 5e-13 rounding; measured 3.7e-13); deg2rad is an
    # elementwise product, correctly rounded
    np.testing.assert_allclose(np.deg2rad(entry["velocity_limit_deg_s"]), entry["velocity_limit_rad_s"],
                               rtol=0, atol=1e-12)


def test_fr3_home_is_franka_ready(limits):
    ready = [0, -np.pi / 4, 0, -3 * np.pi / 4, 0, np.pi / 2, np.pi / 4]
    np.testing.assert_allclose(limits["fr3"]["home"], ready, rtol=0, atol=TOL_EXACT)


@RobotCase
def test_home_pose(models, limits, robot):
    """Flange points down, no contacts, within limits by >= 0.1 rad, matches the stored position."""
    m = models[robot.key]
    q_home = np.asarray(limits[robot.key]["home"], dtype=float)
    margin = np.minimum(q_home - m.jnt_range[:, 0], m.jnt_range[:, 1] - q_home)
    assert (margin >= MIN_LIMIT_MARGIN).all(), margin
    pos, rot, data = _site_pose(m, q_home)
    assert rot[:, 2] @ np.array([0.0, 0.0, -1.0]) > MIN_DOWN_DOT
    assert data.ncon == 0
    np.testing.assert_allclose(pos, limits[robot.key]["home_site_pos_in_world"], rtol=0, atol=TOL_FK_STORED)


def test_iiwa_home_is_a_bent_pose_in_front(models, limits):
    """About 0.55 m in front of the base at about 0.45 m height, and away from singularities."""
    m = models["iiwa14"]
    q_home = np.asarray(limits["iiwa14"]["home"], dtype=float)
    pos, _, data = _site_pose(m, q_home)
    assert 0.5 <= pos[0] <= 0.6 and abs(pos[1]) < 1e-9 and 0.4 <= pos[2] <= 0.5, pos
    jac_pos, jac_rot = np.zeros((3, 7)), np.zeros((3, 7))
    mujoco.mj_jacSite(m, data, jac_pos, jac_rot, m.site("attachment_site").id)
    sigma_min = np.linalg.svd(np.vstack([jac_pos, jac_rot]), compute_uv=False)[-1]
    assert sigma_min > 0.1, sigma_min


# ------------------------------------------------------------------------------------------------
# Pinocchio built from the same MJCF agrees with MuJoCo (DESIGN: one source for both)
# ------------------------------------------------------------------------------------------------


@RobotCase
def test_pinocchio_from_same_mjcf_agrees(models, limits, robot):
    pin = pytest.importorskip("pinocchio")
    m = models[robot.key]
    with importlib.resources.as_file(_resource("robots", f"{robot.key}.xml")) as path:
        pm = pin.buildModelFromMJCF(str(path))
    assert pm.nq == m.nq and pm.nv == m.nv
    np.testing.assert_allclose(pm.lowerPositionLimit, m.jnt_range[:, 0], rtol=0, atol=TOL_EXACT)
    np.testing.assert_allclose(pm.upperPositionLimit, m.jnt_range[:, 1], rtol=0, atol=TOL_EXACT)

    q = np.asarray(limits[robot.key]["home"], dtype=float)
    pos, rot, data = _site_pose(m, q)
    pd = pm.createData()
    mass_matrix = pin.crba(pm, pd, q)  # includes the armature, like MuJoCo's M
    mass_matrix = np.triu(mass_matrix) + np.triu(mass_matrix, 1).T
    mass_matrix_mj = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, data, mass_matrix_mj)
    np.testing.assert_allclose(mass_matrix, mass_matrix_mj, rtol=0, atol=TOL_PIN)

    pm.gravity.linear[:] = m.opt.gravity
    np.testing.assert_allclose(pin.computeGeneralizedGravity(pm, pd, q), data.qfrc_bias, rtol=0, atol=TOL_PIN)

    pin.framesForwardKinematics(pm, pd, q)
    frame = pd.oMf[pm.getFrameId("attachment_site")]
    np.testing.assert_allclose(frame.translation, pos, rtol=0, atol=TOL_PIN)
    np.testing.assert_allclose(frame.rotation, rot, rtol=0, atol=TOL_PIN)
