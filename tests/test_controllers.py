"""controllers/: registry, typed configs, diagnostics plumbing, the HQP's problem record, and the
scenarios that exercise the HQP / SE(3) controllers (all must PASS their docking gates)."""

from __future__ import annotations

import numpy as np
import pytest
from dockbench.controllers.base import CONTROLLERS, Command
from dockbench.controllers.hqp import HQPConfig, HQPController, HQPProblem
from dockbench.controllers.observer import MomentumObserver
from dockbench.controllers.se3_lie import SE3LieConfig, SE3LieController
from dockbench.planners.base import Reference
from dockbench.sim.errors import ScenarioError
from dockbench.sim.loop import build, run
from dockbench.sim.robots import get_robot
from dockbench.sim.scenario import load_scenario, scenario_from_dict
from dockbench.sim.wrench import WrenchState

from dockbench import controllers
from tests.helpers import EPS, SCENARIOS, assert_within

NEW_SCENARIOS = (
    "iiwa14_docking_hqp", "iiwa14_docking_se3", "fr3_docking_hqp", "fr3_docking_se3",
    "fr3_docking_hqp_sensorless", "iiwa14_docking_misaligned", "fr3_docking_misaligned",
)


def _hold(controller: dict, robot: str = "iiwa14") -> dict:
    return {"name": "hold", "robot": {"type": robot, "q_init": list(get_robot(robot).home)},
            "sim": {"duration": 0.2}, "planner": {"type": "quintic"}, "controller": controller}


def test_package_registers_all_controllers() -> None:
    assert {"khatib", "hqp", "se3_lie"} <= set(CONTROLLERS.names())
    assert controllers.observer.MomentumObserver is MomentumObserver
    with pytest.raises(ScenarioError, match=r"unknown controller type 'hqpp'; known: hqp, khatib, se3_lie"):
        scenario_from_dict(_hold({"type": "hqpp"}))


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ({"type": "hqp", "solver": "osqp"}, r"controller\.solver: got 'osqp'; allowed: daqp, proxqp, quadprog"),
        ({"type": "hqp", "sigmoid": "tanh"}, r"controller\.sigmoid: got 'tanh'; allowed: plain, shifted"),
        ({"type": "hqp", "k0": [1, 2, 3]}, r"controller\.k0: expected a list of 6 values, got 3"),
        ({"type": "hqp", "k_min_ratio": 1.5}, r"controller\.k_min_ratio: must be <= 1\.0"),
        ({"type": "hqp", "force_source": "magic"}, r"allowed: sensor, observer"),
        ({"type": "hqp", "observer_gain": 5000.0}, r"controller\.observer_gain: must be < 2000"),
        ({"type": "hqp", "k_alpha_typo": 1.0}, r"unknown key 'k_alpha_typo'"),
        ({"type": "se3_lie", "a_diag": [1, 1, 1, 1, 1, -1]}, r"controller\.a_diag\[5\]: must be > 0"),
        ({"type": "se3_lie", "feedforward": "on"}, r"allowed: torque, velocity, hybrid, off"),
    ],
)
def test_config_errors_name_the_key_and_allowed_values(block: dict, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        scenario_from_dict(_hold(block), file="x.yaml")


@pytest.mark.parametrize("block", [{"type": "hqp"}, {"type": "hqp", "force_source": "observer"},
                                   {"type": "se3_lie"}, {"type": "khatib"}])
def test_at_rest_on_the_goal_the_command_is_zero_and_diagnostics_fill(block: dict) -> None:
    """Zero gravity, at rest exactly at the reference: every law commands zero torque."""
    s = build(scenario_from_dict(_hold(block)))
    ref = Reference()
    s.planner.evaluate(0.0, ref)
    snap = s.dynamics.update(s.q0, np.zeros(s.plant.nv), 0.0)
    s.controller.reset(snap, ref)
    cmd = s.controller.make_command()
    assert isinstance(cmd, Command) and cmd.diag.shape == (len(s.controller.diag_names),)
    for _ in range(3):
        s.controller.compute(snap, ref, WrenchState(), cmd)
    np.testing.assert_allclose(cmd.tau, 0.0, atol=1e-9)
    assert np.all(np.isfinite(cmd.diag))


def test_hqp_build_problem_is_a_typed_record_reused_in_place() -> None:
    s = build(scenario_from_dict(_hold({"type": "hqp"})))
    ctrl = s.controller
    assert isinstance(ctrl, HQPController)
    ref = Reference()
    s.planner.evaluate(0.0, ref)
    snap = s.dynamics.update(s.q0, np.zeros(7), 0.0)
    p = ctrl.build_problem(snap, ref, WrenchState())
    assert isinstance(p, HQPProblem) and p.qp_assembled
    nv = s.plant.nv
    assert p.P1.shape == (nv, nv) and p.G.shape == (2 * nv, nv) and p.h.shape == (2 * nv,)
    # exact: copies of M and its negation
    np.testing.assert_array_equal(p.P2, snap.M)
    np.testing.assert_array_equal(p.G[:nv], snap.M)
    np.testing.assert_array_equal(p.G[nv:], -snap.M)
    # JᵀJ from two BLAS calls (a stored Jᵀ vs a transposed view: possibly different kernels), then + εM:
    # each side ≤ γ_6 |J|ᵀ|J| + ε (|JᵀJ| + ε|M|) per entry, so both together within 16ε (|J|ᵀ|J| + ε|M|)
    eps_reg = HQPConfig().regularization
    mag = np.abs(p.J).T @ np.abs(p.J) + eps_reg * np.abs(snap.M)
    assert_within(p.P1, p.J.T @ p.J + eps_reg * snap.M, 16 * EPS * mag)
    P1_id = id(p.P1)
    p2 = ctrl.build_problem(snap, ref, WrenchState())
    assert p2 is p and id(p2.P1) == P1_id  # preallocated, updated in place
    summary = ctrl.summary()
    assert set(summary) >= {"qp_steps", "qp_failures", "qp_solved", "qp_solver"}


def test_controllers_are_constructible_without_a_planner() -> None:
    """SE(3) falls back to the loop's world reference when no planner is given."""
    s = build(scenario_from_dict(_hold({"type": "se3_lie"})))
    ctrl = SE3LieController(SE3LieConfig(), s.plant, None)
    ref = Reference()
    s.planner.evaluate(0.0, ref)
    ref.pos[0] += 0.01
    snap = s.dynamics.update(s.q0, np.zeros(7), 0.0)
    cmd = ctrl.make_command()
    ctrl.compute(snap, ref, WrenchState(), cmd)
    # λ_v = R_eeᵀ (p_d − p): 1 cm along world x
    np.testing.assert_allclose(ctrl.lam[:3], snap.R_world_ee.T @ np.array([0.01, 0.0, 0.0]), atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("name", NEW_SCENARIOS)
def test_new_docking_scenarios_pass(name: str) -> None:
    sc = load_scenario(SCENARIOS / f"{name}.yaml")
    assert sc.controller.type in ("hqp", "se3_lie")
    assert {g.metric for g in sc.gates} >= {"docking.depth", "contact.peak_force_truth", "docking.lateral",
                                            "docking.tilt_deg", "safety.saturation_ratio"}
    r = run(sc, out_root=None)
    assert r.verdict == "PASS", r.gates
    assert r.metrics["contact.peak_force_truth"] > 0.1, "the scenario must actually make contact"
    assert r.timing["sim_s"] <= 10.0
    if sc.controller.type == "hqp":
        assert r.meta["controller_summary"]["qp_failures"] == 0
