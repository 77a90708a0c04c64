"""The spine's docking scenarios pass their gates, and contact converges in the step size."""

from __future__ import annotations

import pytest

from sim.loop import run
from sim.scenario import load_scenario, scenario_from_dict
from tests.helpers import SCENARIOS, scenario_dict


@pytest.mark.parametrize("name", ["iiwa14_docking", "fr3_docking"])
def test_docking_scenario_passes(name: str) -> None:
    r = run(load_scenario(SCENARIOS / f"{name}.yaml"), out_root=None)
    assert r.verdict == "PASS", r.gates
    assert r.metrics["contact.peak_force_truth"] > 0.1, "the scenario must actually make contact"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["iiwa14_docking", "fr3_docking"])
def test_step_size_convergence(name: str) -> None:
    """dt and dt/2 at the same 1 ms control period: same verdict, peak truth force within 10%,
    final depth within 0.2 mm."""
    results = {}
    for dt in (0.001, 0.0005):
        d = scenario_dict(name)
        d["sim"]["timestep"] = dt
        results[dt] = run(scenario_from_dict(d), out_root=None)
    a, b = results[0.001], results[0.0005]
    assert a.verdict == b.verdict == "PASS"
    fa, fb = a.metrics["contact.peak_force_truth"], b.metrics["contact.peak_force_truth"]
    assert abs(fa - fb) <= 0.10 * max(fa, fb), (fa, fb)
    assert abs(a.metrics["docking.depth"] - b.metrics["docking.depth"]) <= 2e-4


@pytest.mark.parametrize("nose", ["round", "cone"])
def test_probe_nose_geometry_and_docking(nose: str) -> None:
    """round: one capsule of the shaft radius whose hemisphere ends at the tip (L = L_shaft + r_p);
    cone: one convex mesh (L = L_shaft + tip_length). The default scenario docks with either."""
    import mujoco
    import numpy as np

    from sim.loop import build

    d = scenario_dict("iiwa14_docking")
    d["tool"]["nose"] = nose
    sc = scenario_from_dict(d)
    setup = build(sc)
    m, data = setup.asm.model, setup.data
    g = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "probe_geom")
    tool = sc.tool.config
    if nose == "round":
        assert m.geom_type[g] == mujoco.mjtGeom.mjGEOM_CAPSULE
        np.testing.assert_allclose(m.geom_size[g][:2], [tool.radius, tool.shaft_length / 2])
        L = tool.shaft_length + tool.radius
    else:
        assert m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH
        L = tool.shaft_length + tool.tip_length
    mujoco.mj_forward(m, data)
    ee = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, "ee")
    ft = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, "ft_sensor")
    np.testing.assert_allclose(np.linalg.norm(data.site_xpos[ee] - data.site_xpos[ft]), L, atol=1e-12)
    if nose == "round":  # the capsule's far end is the tip: its centre + half-length + radius along the axis
        axis = data.geom_xmat[g].reshape(3, 3)[:, 2]
        tip = data.geom_xpos[g] + (m.geom_size[g][1] + m.geom_size[g][0]) * axis
        np.testing.assert_allclose(tip, data.site_xpos[ee], atol=1e-12)
    r = run(sc, out_root=None)
    assert r.verdict == "PASS", r.gates
