"""The keyed interface (sim/keyed.py: keyed_probe + keyed_drogue): geometry, seat, mating phase, errors."""

from __future__ import annotations

import copy
import dataclasses
import math

import mujoco
import numpy as np
import pytest
import yaml
from dockbench.sim.errors import ScenarioError
from dockbench.sim.interfaces import R_D_EE_SEATED, KeyedDrogue, KeyedProbe, matrix_to_quat, rpy_to_matrix
from dockbench.sim.scenario import scenario_from_dict

from tests.helpers import EPS, SCENARIOS

KEYED = SCENARIOS / "keyed"


def keyed_dict(name: str = "iiwa14_keyed_hqp") -> dict:
    return yaml.safe_load((KEYED / f"{name}.yaml").read_text())


def _pair(d: dict) -> tuple[KeyedProbe, KeyedDrogue]:
    sc = scenario_from_dict(copy.deepcopy(d))
    probe = KeyedProbe(sc.tool.config)
    return probe, KeyedDrogue(sc.target.config, sc.tool.config.radius, sc.tool.config)


def _seated_model(d: dict, yaw_extra: float = 0.0, lift: float = 0.0) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """The drogue at the origin and the keyed probe (no arm) at the seated pose of ``goal_in_target``, turned by
    ``yaw_extra`` about the mating axis and lifted by ``lift`` [m] along it."""
    probe, drogue = _pair(d)
    cfg = drogue.config
    drogue = KeyedDrogue(dataclasses.replace(cfg, pose=type(cfg.pose)()), probe.config.radius, probe.config)
    drogue.T_world_target = np.eye(4)
    spec = mujoco.MjSpec()
    drogue.build(spec)
    T = drogue.goal_in_target()
    T[2, 3] = -drogue.depth_total + lift  # the tip exactly at the seat depth (no preload)
    R = rpy_to_matrix(np.array([0.0, 0.0, yaw_extra])) @ T[:3, :3]
    # the probe's flange is at the tip minus its length along the tool axis
    flange = T[:3, 3] - R[:, 2] * probe.length
    probe.build(spec, spec.worldbody, flange, matrix_to_quat(R))
    m = spec.compile()
    return m, mujoco.MjData(m)


def _distance(m: mujoco.MjModel, d: mujoco.MjData, a: str, b: str) -> float:
    mujoco.mj_forward(m, d)
    fromto = np.zeros(6)
    return float(mujoco.mj_geomDistance(m, d, m.geom(a).id, m.geom(b).id, 0.05, fromto))


def test_seated_lugs_touch_both_faces_of_their_grooves() -> None:
    """At the seat depth s_l − z_v − r_l / cos β every lug touches both V faces of its groove (distance 0) and
    nothing else: not the deck, not the bore (the shaft is centred), and the tip stands bottom_gap above the
    plate. MuJoCo's capsule–box distance is analytic: the bound is round-off of a few products of
    coordinates ≲ 0.1 m, 1e3 ε · 0.1 m ≈ 2e-14 m (≥ 10⁴× below a real gap of a micrometre)."""
    d = keyed_dict()
    m, data = _seated_model(d)
    probe, drogue = _pair(d)
    tol = 1e3 * EPS * 0.1
    n = drogue.config.keys
    groove_of = {}
    for k in range(n):
        dists = {i: min(_distance(m, data, f"lug_{k}", f"groove_{i}_{s}") for s in "pm") for i in range(n)}
        i = min(dists, key=dists.get)
        groove_of[k] = i
        for s in "pm":
            assert abs(_distance(m, data, f"lug_{k}", f"groove_{i}_{s}")) <= tol
        for j in range(len(drogue.deck_boxes())):
            assert _distance(m, data, f"lug_{k}", f"deck_{j}") > 1e-4
    assert sorted(groove_of.values()) == list(range(n))  # one lug per groove
    for j in range(drogue.config.segments):
        assert _distance(m, data, "probe_geom", f"bore_{j}") > 0.0
    assert _distance(m, data, "probe_geom", "seat") == pytest.approx(drogue.bottom_gap, abs=1e-9)


def test_a_lug_off_phase_is_held_above_the_seat() -> None:
    """Turned by ψ within the capture (asin(w/r) ≈ 26° at R_out), a lug still reaching the seat depth penetrates
    its V face (the face holds it higher: yaw matters mechanically). Turned beyond the capture (40°, 60°: between
    the grooves) the lug rests on the deck: lifted until its axis stands r_l above the deck's top face it touches
    the deck (distance 0 within the analytic bound of the seated test) and penetrates nothing, so the tip is held
    top_height + r_l − (z_v + r_l / cos β) ≈ 19 mm short of the seat."""
    d = keyed_dict()
    _, drogue = _pair(d)
    tol = 1e3 * EPS * 0.1
    assert math.degrees(math.asin(drogue.config.groove_half_width / drogue.config.groove_outer_radius)) > 25.0
    m, data = _seated_model(d, yaw_extra=math.radians(10.0))
    deepest = min(_distance(m, data, "lug_0", f"groove_{i}_{s}") for i in range(3) for s in "pm")
    assert deepest < -1e-3  # more than a millimetre into a face
    lift = drogue.top_height + drogue.lug_radius - drogue.lug_seat_height
    assert lift > 0.015
    for deg in (40.0, 60.0):
        m, data = _seated_model(d, yaw_extra=math.radians(deg), lift=lift)
        n_deck = len(drogue.deck_boxes())
        on_deck = min(_distance(m, data, f"lug_{k}", f"deck_{j}") for k in range(3) for j in range(n_deck))
        assert abs(on_deck) <= tol, (deg, on_deck)
        for k in range(3):
            for g in range(m.ngeom):
                name = m.geom(g).name
                if name.startswith(("groove_", "deck_", "funnel", "bore", "seat")):
                    assert _distance(m, data, f"lug_{k}", name) >= -tol, (deg, k, name)


def test_deck_boxes_stay_out_of_the_grooves() -> None:
    """No deck box top face reaches into a V (tangential distance < w from a groove's centre line, on the
    groove's side of the axis): sampled on an 11 × 11 grid of each top face."""
    _, drogue = _pair(keyed_dict())
    c = drogue.config
    for center, R, size in drogue.deck_boxes():
        for u in np.linspace(-1.0, 1.0, 11):
            for v in np.linspace(-1.0, 1.0, 11):
                p = center + R @ np.array([u * size[0], v * size[1], size[2]])
                for a in drogue.groove_azimuths():
                    er = np.array([math.cos(a), math.sin(a), 0.0])
                    et = np.array([-math.sin(a), math.cos(a), 0.0])
                    if p @ er > 0.0:
                        assert abs(p @ et) >= c.groove_half_width - 1e-12, (center, a)
        assert center[2] + size[2] == pytest.approx(drogue.top_height, abs=1e-15)


def test_keyed_probe_inertia_is_the_cylinder_plus_the_rods() -> None:
    """The declared inertia equals an independent sum over point masses (the shaft as a solid cylinder, each lug
    as 4000 points along its rod): the midpoint rule's error on a rod is m L²/(12 n²) ≈ 1e-12 kg·m² here.
    With lug_mass 0 it is the plain probe's inertia."""
    d = keyed_dict()
    probe, _ = _pair(d)
    m, com, I = probe.inertia()
    c = probe.config
    L = probe.length
    parts = [(c.mass, np.array([0.0, 0.0, L / 2.0]))]
    n = 4000
    z = L - c.lug_height
    for a in probe.lug_azimuths():
        e = np.array([math.cos(a), math.sin(a), 0.0])
        for s in (np.arange(n) + 0.5) / n:
            parts.append((c.lug_mass / n, np.array([0.0, 0.0, z]) + e * s * c.lug_reach))
    M = sum(p[0] for p in parts)
    C = sum(p[0] * p[1] for p in parts) / M
    Icyl = c.mass * np.diag([(3 * c.radius**2 + L**2) / 12, (3 * c.radius**2 + L**2) / 12, c.radius**2 / 2])
    J = Icyl + c.mass * ((parts[0][1] - C) @ (parts[0][1] - C) * np.eye(3) - np.outer(parts[0][1] - C, parts[0][1] - C))
    for mi, pi in parts[1:]:
        r = pi - C
        J += mi * (r @ r * np.eye(3) - np.outer(r, r))
    assert m == pytest.approx(M, rel=1e-14)
    np.testing.assert_allclose(com, C, atol=1e-15)
    np.testing.assert_allclose(I, J, atol=1e-10)
    d["tool"]["lug_mass"] = 0.0
    probe0, _ = _pair(d)
    m0, com0, I0 = probe0.inertia()
    assert m0 == c.mass and com0[2] == pytest.approx(L / 2.0, abs=1e-16)
    np.testing.assert_allclose(np.diag(I0), np.diag(Icyl), rtol=1e-14)


def test_goal_puts_each_lug_over_a_believed_groove() -> None:
    """Whatever multiple of 2π/N start.free_yaw picks, the goal orientation puts lug 0 on a groove centre line of
    the believed drogue (phase 0 mod 2π/N)."""
    from dockbench.sim.loop import build
    from dockbench.telemetry.metrics import mating_phase_error

    for name in ("iiwa14_keyed_hqp", "fr3_keyed_se3"):
        d = keyed_dict(name)
        d["target"]["key_phase_deg"] = 17.0
        d["tool"]["lug_phase_deg"] = 40.0
        s = build(scenario_from_dict(d))
        Tb = s.asm.target.T_world_believed
        err = mating_phase_error(s.T_world_goal[None, :3, :3], Tb[None, :3, :3], s.asm.target.yaw_period,
                                 s.asm.target.key_phase, s.asm.target.lug_phase)
        assert abs(err[0]) < 1e-12
        # and the goal is the seated pose: the tool axis along −z of the believed drogue
        np.testing.assert_allclose(Tb[:3, :3].T @ s.T_world_goal[:3, 2], [0, 0, -1], atol=1e-12)
    assert np.allclose(R_D_EE_SEATED @ R_D_EE_SEATED, np.eye(3))


@pytest.mark.parametrize(
    ("change", "key", "text"),
    [
        ({"tool": {"type": "probe", "radius": 0.01}}, "tool.type", "needs the keyed probe"),
        ({"target.keys": 4}, "target.keys", "must equal the probe's lugs (3), got 4"),
        ({"target.bore_length": 0.02}, "target.bore_length", "lengthen the bore"),
        ({"target.groove_inner_radius": 0.033}, "target.groove_inner_radius", "stand outside the funnel"),
        ({"target.groove_half_width": 0.03}, "target.groove_half_width", "neighbouring grooves"),
        ({"tool.lug_reach": 0.036}, "tool.lug_reach", "must reach into the grooves"),
        ({"tool.lug_height": 0.2}, "tool.lug_height", "lug_height <"),
    ],
)
def test_keyed_geometry_errors_name_the_key(change: dict, key: str, text: str) -> None:
    d = keyed_dict()
    for k, v in change.items():
        if "." in k:
            block, leaf = k.split(".")
            d[block][leaf] = v
        else:
            d[k] = v
    with pytest.raises(ScenarioError) as exc:
        scenario_from_dict(d, file="scenarios/keyed/x.yaml")
    assert str(exc.value).startswith("scenarios/keyed/x.yaml:") and key in str(exc.value) and text in str(exc.value)


def test_lugs_on_the_deck_fail_the_gates_and_the_retry_seats_them() -> None:
    """scenarios/keyed/iiwa14_keyed_khatib_recovery.yaml believes the drogue turned by 60° (half-way between two
    of the N = 3 mating phases): with the recovery off the lugs stay on the deck, 19 mm short, and the depth and
    phase gates fail it while the detector records the stall as jams; with the retry (the scenario as shipped,
    the run shared with the regression suite) it seats on attempt 2 after one jam, with the events in order."""
    from dockbench.sim.loop import run

    from tests.regression.test_regression import _run

    path = KEYED / "iiwa14_keyed_khatib_recovery.yaml"
    d = yaml.safe_load(path.read_text())
    d["insertion"]["recovery"]["strategy"] = "none"
    r = run(scenario_from_dict(d, file=str(path)), out_root=None)
    failed = {g["metric"] for g in r.gates if g["verdict"] != "PASS"}
    assert r.verdict == "FAIL" and {"docking.depth", "docking.phase_deg"} <= failed
    assert r.metrics["docking.seat_error"] > 0.015 and r.metrics["docking.phase_deg"] > 50.0
    assert r.metrics["insertion.jams"] >= 1 and r.metrics["insertion.attempts"] == 1
    assert r.metrics["docking.time_to_seat"] == math.inf
    ok = _run(path)
    assert ok.verdict == "PASS"
    assert ok.metrics["insertion.attempts"] == 2 and ok.metrics["insertion.jams"] == 1
    kinds = [e["event"] for e in ok.meta["insertion_events"]]
    assert kinds[kinds.index("jam"):] == ["jam", "backoff", "reinsert", "reached"]
    assert ok.metrics["docking.time_to_seat"] > ok.meta["insertion_events"][kinds.index("reinsert")]["t"]


def test_make_target_passes_the_tool_config_only_to_targets_that_take_it() -> None:
    """A target class with the two-argument constructor (a plugin written before the keyed drogue) is built as
    before; the keyed drogue gets the tool's config and checks its geometry against it."""
    from dockbench.sim.interfaces import Plate, make_target

    class TwoArg(Plate):
        def __init__(self, config, tool_radius):
            super().__init__(config, tool_radius)

    d = keyed_dict()
    sc = scenario_from_dict(copy.deepcopy(d))
    plate_cfg = scenario_from_dict({**copy.deepcopy(d), "target": {"type": "plate"}, "tool": {"type": "probe"}}).target
    assert isinstance(make_target(TwoArg, plate_cfg.config, 0.01, sc.tool.config), TwoArg)
    keyed = make_target(KeyedDrogue, sc.target.config, sc.tool.config.radius, sc.tool.config)
    assert keyed.tool_config is sc.tool.config
    with pytest.raises(ScenarioError, match="needs the keyed probe"):
        make_target(KeyedDrogue, sc.target.config, 0.01, None)


@pytest.mark.parametrize("name", ["fr3_keyed_khatib", "fr3_keyed_se3", "fr3_keyed_hqp"])
def test_each_law_reports_its_axial_stiffness_to_the_supervisor(name: str) -> None:
    """The insertion supervisor's push in force (docs/theory/insertion.md §3) reads the law's stiffness along the
    tool axis: the law built on the supervisor attaches itself, and law_axial_stiffness gives Khatib's k, the
    SE(3) law's bᵀ K_vv b (b = Rᵀa the tool axis in EE axes: K_vv,zz exactly for a diagonal K, one
    product of unit-vector components: bound 1e2 ε K) and the HQP's aᵀ diag(K_r) a (K_0 before its first
    step; after it K_r = K_0 max(1 − α, k_min_ratio))."""
    from dockbench.controllers.insertion import InsertionSupervisor, law_axial_stiffness
    from dockbench.sim.loop import build

    d = yaml.safe_load((SCENARIOS / "keyed" / f"{name}.yaml").read_text())
    s = build(scenario_from_dict(d, file=f"{name}.yaml"))
    sup, law = s.planner, s.controller
    assert isinstance(sup, InsertionSupervisor) and sup._law is law
    R = s.T_world_goal[:3, :3]
    a = R[:, 2]
    k = law_axial_stiffness(law, a, R)
    c = d["controller"]
    expected = {"khatib": lambda: c["k"], "se3_lie": lambda: c["k_diag"][2], "hqp": lambda: c["k0"][2]}[c["type"]]()
    assert k == pytest.approx(expected, rel=1e2 * EPS)
    if c["type"] == "hqp":
        law._prob.K_r[:3] = law.K0[:3] * c.get("k_min_ratio", 0.3)  # at the floor K_min (as in a jam)
        assert law_axial_stiffness(law, a, R) == pytest.approx(0.3 * c["k0"][2], rel=1e2 * EPS)
