"""Contact culling of the peg hole's boxes (sim/culling.py, docs/theory/peg_hole.md §5): the same simulation bit
for bit, fewer boxes in collision detection, no culled box ever in contact, the cached model left as it was."""

from __future__ import annotations

import numpy as np
import pytest
from dockbench.sim.loop import build, run
from dockbench.sim.scenario import scenario_from_dict

from tests.test_peg_hole import BASE, scenario_dict


def _runs(d: dict) -> tuple:
    """The scenario run with and without culling."""
    out = []
    for cull in (False, True):
        e = {**d, "target": {**d["target"], "cull_contacts": cull}}
        out.append(run(scenario_from_dict(e), out_root=None))
    return tuple(out)


@pytest.mark.parametrize("mount", ["fixed", "compliant"])
def test_culling_leaves_the_simulation_bit_identical(mount: str) -> None:
    """The iiwa14 peg scenario to past its first contacts in the bore (9 s: the tip enters the chamfer at ≈ 3 s),
    on a fixed and on a compliant (moving) hole mount: every telemetry channel equal, bit for bit, with and
    without culling; on average fewer than a third of the 97 boxes left in; no culled box found in contact.
    A culling that dropped a box in reach would change the contact forces (a miss, or different bytes)."""
    d = scenario_dict(BASE)
    d["sim"]["duration"] = 9.0
    if mount == "compliant":
        d["target"]["mount"] = {"type": "compliant", "mass": 2.0, "inertia": [0.01, 0.01, 0.01],
                                "stiffness": [2.0e4, 200.0], "damping": [100.0, 1.0]}
    off, on = _runs(d)
    assert off.meta["contact_culling"] is None
    stats = on.meta["contact_culling"]
    assert stats["boxes"] == 97 and stats["misses"] == 0
    assert stats["target_static"] == (mount == "fixed")  # the compliant mount: the body's own motion in the reach
    assert stats["mean_active"] < 97 / 3
    assert 0.0 < stats["max_reach_use"] < 1.0  # the tool never moved as far as the reach allowed
    assert float(np.max(off.telemetry["contact_count"])) > 0  # the run reached the contact
    for k in off.telemetry:
        assert np.array_equal(np.asarray(off.telemetry[k]), np.asarray(on.telemetry[k]), equal_nan=True), k
    assert off.metrics == on.metrics


def test_a_culling_run_changes_its_own_model_not_the_cached_one() -> None:
    """The culling rewrites contact flags of the run's own MjModel copy: the assembly it was built from (e.g. a
    campaign's cached one) keeps every box's flags."""
    from dockbench.sim.assembly import assemble

    sc = scenario_from_dict(scenario_dict(BASE))
    asm = assemble(sc)
    flags = (asm.model.geom_contype.copy(), asm.model.geom_conaffinity.copy())
    setup = build(sc, asm)
    assert setup.asm.model is not asm.model and setup.culling is not None
    setup.culling.update()  # from the start pose every box is far: all culled
    assert setup.culling.stats()["mean_active"] == 0
    assert not setup.asm.model.geom_contype[setup.culling.boxes].any()
    assert np.array_equal(asm.model.geom_contype, flags[0]) and np.array_equal(asm.model.geom_conaffinity, flags[1])


def test_cull_contacts_false_keeps_every_box() -> None:
    d = scenario_dict(BASE)
    d["target"]["cull_contacts"] = False
    setup = build(scenario_from_dict(d))
    assert setup.culling is None


def _logged_run(d: dict, path: str) -> tuple:
    """The scenario run with the culling's update on ``path`` (``python`` or ``compiled``; every other component
    on its compiled kernel either way, so that the two runs differ in the culling's path alone): the run, and
    after every update the culling's box set, g, its reach use and its full-pass count."""
    from dockbench.sim import kernels
    from dockbench.sim.loop import simulate

    with kernels.forced("compiled"):
        setup = build(scenario_from_dict(d))
        cull = setup.culling
        if path == "python":  # unbind the culling's kernel before its first update: its Python reference runs
            cull._kernel, cull.kernel = None, "python"
        assert cull.kernel == path
        log, update = [], cull.update

        def logged() -> None:
            update()
            log.append((cull.active.copy(), cull.g.copy(), cull.max_reach_use, cull.full_updates))

        cull.update = logged
        out = simulate(setup)
    return out, log, cull.stats()


@pytest.mark.parametrize("mount", ["fixed", "compliant"])
def test_the_compiled_update_is_the_python_one_float_for_float(mount: str) -> None:
    """sim/_culling_kernel.c against the Python reference over the peg's first contacts in the bore (4.5 s), on a
    fixed and on a compliant (moving) hole mount: after every control period the same box set, the same bounds g
    bit for bit, the same reach use and full passes; the same telemetry. A kernel that summed in another order
    or took another point's velocity would differ in g or the reach use at the last bits."""
    from dockbench.sim import kernels

    if kernels.load("sim._culling_kernel") is None:
        pytest.skip("sim._culling_kernel is not built")
    d = scenario_dict(BASE)
    d["sim"]["duration"] = 4.5
    if mount == "compliant":
        d["target"]["mount"] = {"type": "compliant", "mass": 2.0, "inertia": [0.01, 0.01, 0.01],
                                "stiffness": [2.0e4, 200.0], "damping": [100.0, 1.0]}
    (py, log_py, st_py), (c, log_c, st_c) = (_logged_run(d, "python"), _logged_run(d, "compiled"))
    assert len(log_py) == len(log_c) > 4000
    assert st_py == st_c and st_py["full_updates"] > 100 and 0 < st_py["mean_active"] < 97
    for i, (a, b) in enumerate(zip(log_py, log_c, strict=True)):
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[2:] == b[2:], i
    assert float(np.max(py.telemetry.contact_count)) > 0
    for k in ("q", "v", "tau_applied", "contact_count"):
        assert np.array_equal(getattr(py.telemetry, k), getattr(c.telemetry, k)), k
