"""The G20 LEFT MJCF model: joint table, limits, collision layer, excludes, mounting, roll sign."""

from __future__ import annotations

import re

import mujoco
import numpy as np
import pytest
from dockbench.hand.mapping import sdk_to_joint_positions
from dockbench.hand.spec import default_model_xml, load_model, load_spec

ATOL_EXACT = 1e-9  # [rad] / [m] numbers that must match to rounding
FINGERS = ("index", "middle", "ring", "pinky")
FLEXION_CHANNELS = (0, 1, 2, 3, 4, 15, 16, 17, 18, 19)


@pytest.fixture(scope="module")
def spec():
    return load_spec()


@pytest.fixture(scope="module")
def model():
    return load_model()


def posed(model, q: dict) -> mujoco.MjData:
    d = mujoco.MjData(model)
    for name, value in q.items():
        d.qpos[model.joint(name).qposadr[0]] = value
    mujoco.mj_forward(model, d)
    return d


def contact_bodies(model, d) -> set[frozenset[str]]:
    return {
        frozenset((model.body(model.geom_bodyid[c.geom1]).name, model.body(model.geom_bodyid[c.geom2]).name))
        for c in d.contact
    }


def test_joint_table_21_hinges_16_active(model, spec):
    names = {model.joint(j).name for j in range(model.njnt)}
    assert model.njnt == 21
    assert names == set(spec.joint_names)
    assert all(model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE for j in range(model.njnt))
    assert len(spec.active_names) == 16 and len(spec.mimic_names) == 5
    assert set(spec.mimic_names) == {"thumb_ip"} | {f"{f}_dip" for f in FINGERS}
    # one position actuator <joint>_pos per active joint, ctrlrange = joint range
    assert model.nu == 16
    for a in range(model.nu):
        joint = model.joint(model.actuator_trnid[a, 0]).name
        assert model.actuator(a).name == joint + "_pos"
        # exact: the generator writes the joint's range as the ctrlrange (the same decimals)
        np.testing.assert_array_equal(model.actuator_ctrlrange[a], model.jnt_range[model.joint(joint).id])
    assert {model.joint(model.actuator_trnid[a, 0]).name for a in range(model.nu)} == set(spec.active_names)


def test_mimic_equalities_match_spec(model, spec):
    assert model.neq == 5
    for e in range(model.neq):
        assert model.eq_type[e] == mujoco.mjtEq.mjEQ_JOINT
        follower = model.joint(model.eq_obj1id[e]).name
        driver = model.joint(model.eq_obj2id[e]).name
        j = spec.joint(follower)
        assert j.mimic_of == driver
        np.testing.assert_allclose(model.eq_data[e, :5], [0, j.ratio, 0, 0, 0], atol=ATOL_EXACT)
    assert spec.joint("thumb_ip").ratio == 1.02  # exact: decimals parsed from the spec
    assert spec.joint("index_dip").ratio == 0.89


def test_limits_and_sdk_ranges_fit_the_model(model, spec):
    rng = {model.joint(j).name: model.jnt_range[j] for j in range(model.njnt)}
    np.testing.assert_array_equal(rng["thumb_cmc_roll"], [0.0, 1.47])  # exact: decimals written in the XML
    for f in FINGERS:
        np.testing.assert_array_equal(rng[f"{f}_mcp_pitch"], [0.0, 1.22])
        # mimic range = ratio * driver range
        np.testing.assert_allclose(rng[f"{f}_dip"], 0.89 * rng[f"{f}_pip"], atol=1e-4)
    np.testing.assert_allclose(rng["thumb_ip"], 1.02 * rng["thumb_mcp"], atol=1e-4)
    # every SDK channel maps exactly onto its joint's range: no clipping, full range reachable
    for ch in spec.channels:
        if ch.joint is None:
            continue
        np.testing.assert_allclose(
            [ch.arc_min / ch.divisor, ch.arc_max / ch.divisor], rng[ch.joint], atol=1e-4, err_msg=ch.joint
        )


def test_collision_layer_16_geoms(model):
    collidable = [g for g in range(model.ngeom) if model.geom_contype[g] or model.geom_conaffinity[g]]
    assert len(collidable) == 16
    bodies = sorted(model.body(model.geom_bodyid[g]).name for g in collidable)
    expected = sorted(
        ["g20_root", "thumb_metacarpals", "thumb_proximal", "thumb_distal"]
        + [f"{f}_{s}" for f in FINGERS for s in ("proximal", "middle", "distal")]
    )
    assert bodies == expected
    # every other geom is visual only, and every link has a visual geom
    visual = [g for g in range(model.ngeom) if g not in collidable]
    assert all(model.geom_contype[g] == 0 and model.geom_conaffinity[g] == 0 for g in visual)
    assert {model.geom_bodyid[g] for g in visual} == set(range(1, model.nbody))


def test_mounting_contract(model):
    """g20_root hangs from the world without a free joint; explicit inertials; no option/visual."""
    root = model.body("g20_root").id
    assert model.body_parentid[root] == 0
    assert model.body_jntnum[root] == 0
    assert not any(model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE for j in range(model.njnt))
    xml = re.sub(r"<!--.*?-->", "", default_model_xml(), flags=re.S)
    assert "<option" not in xml and "<visual" not in xml and "<light" not in xml
    spec = mujoco.MjSpec.from_string(xml)
    assert all(b.explicitinertial for b in spec.bodies if b.name != "world")
    masses = model.body_mass[1:]
    assert np.all(masses > 1e-4) and np.all(masses < 0.2)
    np.testing.assert_allclose(masses.sum(), 0.379, atol=0.002)  # [U1] link masses
    for f in ("thumb",) + FINGERS:
        assert model.site(f"{f}_tip").id >= 0


def test_open_pose_has_zero_contacts(model, spec):
    d = posed(model, sdk_to_joint_positions(spec.preset("open"), spec))
    assert d.ncon == 0
    d0 = posed(model, {})
    assert d0.ncon == 0


def test_excludes_do_not_rely_on_filterparent(model, spec):
    """The 28 excludes cover the kinematic neighbours: with the host's parent filter disabled (it
    is an <option> of whatever model the hand is attached to) the open hand still has no contact."""
    assert model.nexclude == 28
    m = load_model()
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_FILTERPARENT
    for pose in (spec.preset("open"), spec.preset("half_fist")):
        assert posed(m, sdk_to_joint_positions(pose, spec)).ncon == 0
    # without the excludes, the neighbours would touch: drop them and the open hand is in contact
    s = mujoco.MjSpec.from_string(default_model_xml())
    for ex in list(s.excludes):
        s.delete(ex)
    m2 = s.compile()
    m2.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_FILTERPARENT
    assert posed(m2, sdk_to_joint_positions(spec.preset("open"), spec)).ncon > 0


def test_fist_still_makes_fingertip_palm_and_neighbour_contacts(model, spec):
    """Excludes must not hide real contacts: the closed end of every flexion channel pushes the
    fingertips into the palm; with the thumb beside the index (not opposed) it lands on the index."""
    closed = list(spec.preset("open"))
    for c in FLEXION_CHANNELS:
        closed[c] = 0
    pairs = contact_bodies(model, posed(model, sdk_to_joint_positions(closed, spec)))
    for f in FINGERS:
        assert frozenset(("g20_root", f"{f}_distal")) in pairs, pairs
    assert frozenset(("thumb_distal", "index_distal")) in pairs, pairs


def test_roll_sign_fans_out_open_preset(model, spec):
    """OPEN rolls (+0.134, +0.042, -0.046, -0.174 rad) rotate each finger about +X through its roll
    pivot: tip y moves by -(z_tip - z_pivot) sin(roll) -> index and middle toward -Y, ring and pinky
    toward +Y, so neighbouring tips move apart."""
    q_open = sdk_to_joint_positions(spec.preset("open"), spec)
    q_flat = dict(q_open, **{f"{f}_mcp_roll": 0.0 for f in FINGERS})
    d_open, d_flat = posed(model, q_open), posed(model, q_flat)
    tip = {f: (d_flat.site(f"{f}_tip").xpos.copy(), d_open.site(f"{f}_tip").xpos.copy()) for f in FINGERS}
    for f in FINGERS:
        pivot = d_flat.body(f"{f}_metacarpals").xpos
        flat, opened = tip[f]
        roll = q_open[f"{f}_mcp_roll"]
        dz = flat[2] - pivot[2]
        expected_y = pivot[1] + (flat[1] - pivot[1]) * np.cos(roll) - dz * np.sin(roll)
        np.testing.assert_allclose(opened[1], expected_y, atol=ATOL_EXACT, err_msg=f)
    y = {f: tip[f][1][1] for f in FINGERS}
    y0 = {f: tip[f][0][1] for f in FINGERS}
    assert y["index"] < y0["index"] - 0.01  # index away from middle (toward -Y) by > 10 mm
    assert y["pinky"] > y0["pinky"] + 0.01  # pinky away from ring (toward +Y)
    assert y["middle"] - y["index"] > y0["middle"] - y0["index"] + 0.005
    assert y["pinky"] - y["ring"] > y0["pinky"] - y0["ring"] + 0.005


def test_attach_with_prefix_keeps_units_and_names():
    """The hand attaches to a flange site of a degree-based parent: names get the prefix, joint
    ranges stay in radians, excludes / equalities / actuators come along."""
    parent = mujoco.MjSpec.from_string(
        '<mujoco><worldbody><body name="arm"><joint name="j1" range="-90 90"/>'
        '<geom size="0.02" contype="0" conaffinity="0"/><site name="flange" pos="0 0 0.1"/></body>'
        "</worldbody></mujoco>"
    )
    parent.attach(mujoco.MjSpec.from_string(default_model_xml()), prefix="hand/", site=parent.site("flange"))
    m = parent.compile()
    standalone = load_model()
    # exact: the same XML compiled twice
    np.testing.assert_array_equal(m.joint("hand/thumb_cmc_roll").range, standalone.joint("thumb_cmc_roll").range)
    np.testing.assert_allclose(m.joint("j1").range, np.deg2rad([-90, 90]), atol=ATOL_EXACT)
    assert (m.nexclude, m.neq, m.nu) == (28, 5, 16)
    assert m.actuator("hand/index_pip_pos").id >= 0
    assert m.body("hand/g20_root").id >= 0
    hand_mass = sum(m.body_mass[b] for b in range(m.nbody) if m.body(b).name.startswith("hand/"))
    np.testing.assert_allclose(hand_mass, standalone.body_mass.sum(), atol=ATOL_EXACT)
