"""The peg_hole interface (sim/peg_hole.py, docs/theory/peg_hole.md): the built MuJoCo model has exactly the
configured clearance, bad parameters give one-line errors naming the key, and the shipped iiwa14 scenario seats
the peg under Factory's success criterion."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
from dockbench.sim.assembly import assemble
from dockbench.sim.errors import ScenarioError
from dockbench.sim.scenario import scenario_from_dict

from tests.helpers import scenario_dict

BASE = "peg/iiwa14_peg_khatib"


def _model(changes: dict | None = None) -> tuple[mujoco.MjModel, dict]:
    d = scenario_dict(BASE)
    for key, value in (changes or {}).items():
        block, k = key.split(".")
        d[block][k] = value
    return assemble(scenario_from_dict(d)).model, d


def _inner_faces(m: mujoco.MjModel, prefix: str) -> np.ndarray:
    """Distance [m] from the hole's axis to the inner face of each box named ``prefix_i`` (the box's half-size
    along its local axis that points radially, subtracted from its centre's radial distance), in the target frame."""
    body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "target")
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    R_t, o_t = d.xmat[body].reshape(3, 3), d.xpos[body]
    out = []
    for g in range(m.ngeom):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or ""
        if not name.startswith(prefix + "_"):
            continue
        c = R_t.T @ (d.geom_xpos[g] - o_t)
        er = np.array([c[0], c[1], 0.0]) / math.hypot(c[0], c[1])
        R = R_t.T @ d.geom_xmat[g].reshape(3, 3)
        k = int(np.argmax(np.abs(R.T @ er)))  # the local axis along the radial direction
        assert abs(abs(R[:, k] @ er) - 1.0) < 1e-12  # the bore's boxes stand square to the radius
        out.append(c @ er - m.geom_size[g][k])
    return np.array(out)


@pytest.mark.parametrize("clearance", [0.000114, 0.0001, 0.0005])
def test_the_built_model_has_the_configured_diametral_clearance(clearance: float) -> None:
    m, d = _model({"target.clearance": clearance})
    faces = _inner_faces(m, "bore")
    assert len(faces) == 32
    g = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "peg_geom")
    assert m.geom_type[g] == mujoco.mjtGeom.mjGEOM_CAPSULE
    r_peg = float(m.geom_size[g][0])
    assert r_peg == d["tool"]["diameter"] / 2.0
    # every inner face at the hole radius: δ = 2 (r_face − r_peg) up to the round-off of a few products and a
    # float32-free quaternion round trip (MuJoCo keeps geoms in double): 1e-12 m ≫ 1e3 ε · 10 mm
    np.testing.assert_allclose(2.0 * (faces - r_peg), clearance, rtol=0.0, atol=1e-12)


def test_the_chamfer_widens_the_mouth_by_its_width_and_the_bottom_lies_at_the_depth() -> None:
    m, d = _model()
    t = d["target"]
    r_hole = (d["tool"]["diameter"] + t["clearance"]) / 2.0
    body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "target")
    data = mujoco.MjData(m)
    mujoco.mj_kinematics(m, data)
    R_t, o_t = data.xmat[body].reshape(3, 3), data.xpos[body]
    # the chamfer ring: a cone of boxes from (r + c, 0) to (r, −c): its inner faces' planes pass through both points
    n_chamfer = 0
    for g in range(m.ngeom):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or ""
        if name.startswith("chamfer_"):
            R = R_t.T @ data.geom_xmat[g].reshape(3, 3)
            c = R_t.T @ (data.geom_xpos[g] - o_t)
            er = np.array([c[0], c[1], 0.0]) / math.hypot(c[0], c[1])
            n = R[:, 1] if R[:, 1] @ er > 0 else -R[:, 1]  # outward normal of the slab (local y)
            face = c - n * m.geom_size[g][1]
            for p in ((r_hole + t["chamfer"]) * er, r_hole * er - np.array([0, 0, t["chamfer"]])):
                assert abs((p - face) @ n) < 1e-12
            n_chamfer += 1
    assert n_chamfer == 32
    g = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "bottom")
    top = (R_t.T @ (data.geom_xpos[g] - o_t))[2] + m.geom_size[g][2]
    assert abs(top + t["depth"]) < 1e-12


@pytest.mark.parametrize(
    ("block", "changes", "key"),
    [
        ("target", {"chamfer": 0.03}, "target.chamfer"),           # a chamfer deeper than the hole
        ("target", {"outer_radius": 0.004}, "target.outer_radius"),  # the deck inside the mouth
        ("target", {"clearance": -0.0001}, "target.clearance"),      # interference
        ("target", {"depth": 0.06}, "tool.length"),                  # the hole deeper than the peg is long
        ("tool", {"length": 0.005}, "tool.length"),                  # a peg shorter than its diameter
        ("tool", {"tip": "chamfer", "chamfer": 0.005}, "tool.chamfer"),
        ("tool", {"tip": "square"}, "tool.tip"),
        ("tool", {"type": "probe", "diameter": None, "length": None}, "tool.type"),
    ],
)
def test_bad_parameters_give_a_one_line_error_naming_the_key(block: str, changes: dict, key: str) -> None:
    d = scenario_dict(BASE)
    for k, v in changes.items():
        if v is None:
            d[block].pop(k, None)
        else:
            d[block][k] = v
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(d, file="peg.yaml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("peg.yaml: ") and key in msg, msg


def test_the_iiwa14_peg_scenario_seats_the_peg_within_the_clearance() -> None:
    """The shipped scenario: seated at the bottom (Factory's criterion), centred within the radial play (plus the
    soft contact's penetration, < 10 µm at these forces), and the metrics of the benchmark present."""
    from dockbench.sim.loop import run

    d = scenario_dict(BASE)
    r = run(scenario_from_dict(d), out_root=None)
    assert r.verdict == "PASS", r.gates
    m = r.metrics
    assert m["docking.seat_height_fraction"] <= 0.04
    assert m["docking.lateral"] <= d["target"]["clearance"] / 2.0 + 1e-5
    assert 0.0 < m["contact.impulse_truth"] and 0.0 < m["contact.mean_force_truth"] <= m["contact.peak_force_truth"]
    assert math.isfinite(m["docking.time_to_seat"]) and m["insertion.jammed"] in (0, 1)
