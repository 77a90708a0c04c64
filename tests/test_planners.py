"""Registry and configuration-level checks of the planners package."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from dockbench.planners import PLANNERS, MotionReference, PlannerContext, Reference
from dockbench.planners.base import Planner
from dockbench.sim.config import describe_config, parse_config
from dockbench.sim.errors import ModelError, ScenarioError

from dockbench import planners

EXPECTED_TYPES = {"quintic", "two_phase", "se3_topp", "figure8"}


def _ctx(axis=(0.0, 0.0, 1.0)) -> PlannerContext:
    T_goal = np.eye(4)
    T_goal[:3, 3] = (0.5, 0.0, 0.3)
    T_start = np.eye(4)
    T_start[:3, 3] = (0.4, 0.1, 0.5)
    return PlannerContext(T_world_start=T_start, T_world_goal=T_goal, approach_axis_world=np.array(axis))


def test_importing_planners_registers_every_type():
    assert EXPECTED_TYPES <= set(PLANNERS.names())
    for name in EXPECTED_TYPES:
        cls = PLANNERS.get(name)
        assert issubclass(cls, Planner)
        assert cls.type_name == name
        assert dataclasses.is_dataclass(cls.Config)
        assert cls.Config.__dataclass_params__.frozen
    assert planners.MotionReference is MotionReference


def test_unknown_planner_type_lists_known_types():
    with pytest.raises(ScenarioError) as err:
        PLANNERS.get("spline", file="scenarios/x.yaml", key="planner.type")
    msg = str(err.value)
    assert msg.startswith("scenarios/x.yaml: planner.type: ")
    for name in EXPECTED_TYPES:
        assert name in msg


@pytest.mark.parametrize("name", sorted(EXPECTED_TYPES))
def test_unknown_key_is_rejected(name):
    with pytest.raises(ScenarioError, match="unknown key 'vmax'; allowed keys: "):
        parse_config(PLANNERS.get(name).Config, {"vmax": 1.0}, file="s.yaml", path="planner")


@pytest.mark.parametrize(
    "name, key, value, match",
    [
        ("two_phase", "standoff", -0.1, "must be >= 0.001 m, got -0.1"),
        ("two_phase", "docking_v_max", "fast", "expected a number"),
        ("se3_topp", "approach_w_max", 0.0, "must be >= 0.001 rad/s"),
        ("figure8", "circle_radius", -1, "must be >= 0.0001 m"),
        ("figure8", "hold_duration", -1, "must be >= 0.0 s"),
    ],
)
def test_bad_values_are_rejected_with_key_path(name, key, value, match):
    with pytest.raises(ScenarioError, match=match) as err:
        parse_config(PLANNERS.get(name).Config, {key: value}, file="s.yaml", path="planner")
    assert f"planner.{key}" in str(err.value)


def test_figure8_stop_ramp_must_fit_in_figure8_segment():
    with pytest.raises(ScenarioError, match="stop_duration: must be <= figure8_duration"):
        parse_config(
            PLANNERS.get("figure8").Config, {"figure8_duration": 1.0, "stop_duration": 1.5}, path="planner"
        )


def test_documented_defaults():
    two = parse_config(PLANNERS.get("two_phase").Config, {})
    assert (two.standoff, two.approach_v_max, two.approach_a_max, two.docking_v_max, two.docking_a_max) == (
        0.10,
        0.10,
        0.20,
        0.02,
        0.05,
    )
    topp = parse_config(PLANNERS.get("se3_topp").Config, {})
    assert (topp.approach_w_max, topp.docking_w_max) == (0.20, 0.05)
    assert (topp.approach_alpha_max, topp.docking_alpha_max) == (0.40, 0.125)
    f8 = parse_config(PLANNERS.get("figure8").Config, {})
    assert (f8.transition_duration, f8.circle_radius, f8.circle_frequency, f8.circle_duration) == (
        1.5,
        0.10,
        0.2,
        5.0,
    )
    assert (f8.figure8_ax, f8.figure8_ay, f8.figure8_frequency, f8.figure8_duration) == (0.10, 0.07, 0.2, 5.0)


@pytest.mark.parametrize("name", sorted(EXPECTED_TYPES))
def test_every_config_field_is_documented(name):
    rows = describe_config(PLANNERS.get(name).Config)
    assert rows
    for key, _allowed, unit, _default, doc in rows:
        assert doc, f"{name}.{key} has no doc"
        assert unit, f"{name}.{key} has no unit"


@pytest.mark.parametrize("name", sorted(EXPECTED_TYPES))
def test_planners_hold_after_duration_and_segments_are_contiguous(name):
    cls = PLANNERS.get(name)
    p = cls(parse_config(cls.Config, {}), _ctx())
    a, b = Reference(), Reference()
    p.evaluate(p.duration, a)
    p.evaluate(p.duration + 10.0, b)
    for field in Reference.__slots__:
        np.testing.assert_allclose(getattr(a, field), getattr(b, field), atol=1e-12)
    np.testing.assert_allclose(np.r_[b.vel, b.acc, b.omega, b.alpha], 0.0, atol=1e-12)
    segs = p.segments
    assert segs[0].t0 == 0.0  # exact: a literal
    for s0, s1 in zip(segs, segs[1:], strict=False):
        assert s0.t1 == s1.t0  # exact: the same breakpoint float
    # the evaluated record is finite everywhere
    for t in np.linspace(-1.0, p.duration + 1.0, 57):
        p.evaluate(t, a)
        assert all(np.all(np.isfinite(getattr(a, f))) for f in Reference.__slots__)


def test_zero_approach_axis_is_a_model_error():
    cls = PLANNERS.get("two_phase")
    with pytest.raises(ModelError, match="approach_axis_world"):
        cls(parse_config(cls.Config, {}), _ctx(axis=(0.0, 0.0, 0.0)))


def test_se3_topp_start_at_predock_has_zero_length_approach():
    cls = PLANNERS.get("se3_topp")
    ctx = _ctx()
    T_start = ctx.T_world_goal.copy()
    T_start[:3, 3] += 0.10 * np.asarray(ctx.approach_axis_world)
    ctx = PlannerContext(
        T_world_start=T_start, T_world_goal=ctx.T_world_goal, approach_axis_world=ctx.approach_axis_world
    )
    p = cls(parse_config(cls.Config, {}), ctx)
    assert p.durations[0] == 0.0  # exact: a zero screw has no profile and the literal duration 0
    np.testing.assert_allclose(p.durations[1], 1 / 0.2 + 0.2 / 0.5, rtol=1e-12)  # 0.1 m at 0.02 / 0.05
    T, V, _ = p.motion(0.0)
    np.testing.assert_allclose(T, T_start, atol=1e-12)
    np.testing.assert_array_equal(V, 0.0)  # exact: V = ξ ṡ with ṡ(0) = 0


def test_motion_reference_update_is_allocation_stable():
    """update() writes into the same buffers (the controller may hold references to them)."""
    cls = PLANNERS.get("se3_topp")
    p = cls(parse_config(cls.Config, {}), _ctx())
    mr = MotionReference(p)
    ids = (id(mr.T), id(mr.V), id(mr.dV))
    T_prev = mr.update(0.5).T.copy()
    mr.update(1.0)
    assert (id(mr.T), id(mr.V), id(mr.dV)) == ids
    assert not np.allclose(mr.T, T_prev)


def test_se3_topp_motion_at_the_evaluated_time_is_the_same_motion():
    """motion_into copies the motion evaluate() computed at the same t (the loop evaluates the world
    reference, then an SE(3) controller asks for the body motion at that t): the same floats as a
    fresh computation, and any other t is computed afresh."""
    from dockbench.planners.se3_topp import SE3TOPPConfig, SE3TOPPPlanner

    from tests.helpers import planner_context

    fresh = SE3TOPPPlanner(SE3TOPPConfig(), planner_context())
    cached = SE3TOPPPlanner(SE3TOPPConfig(), planner_context())
    ref = Reference()
    for t in (0.0, 0.37, 1.2, cached.duration * 0.7, cached.duration + 1.0):
        cached.evaluate(t, ref)
        for tq in (t, t + 0.013):
            a, b = fresh.motion(tq), cached.motion(tq)
            for x, y in zip(a, b, strict=True):
                assert np.array_equal(x, y), (t, tq)  # exact: the same function on the same t


def test_se3_topp_end_pose_is_computed_once_and_is_the_computed_one():
    """At s = 1 a segment holds T_b at rest: the first call at s = 1 computes T_a Exp(ξ) and keeps it, later
    calls copy it (the long seated hold no longer pays an SE(3) exponential per step). The copy equals what
    a segment without the kept pose computes, bit for bit, and a call before the end still computes afresh."""
    from dockbench.planners.se3_topp import SE3TOPPConfig, SE3TOPPPlanner

    from tests.helpers import planner_context

    p = SE3TOPPPlanner(SE3TOPPConfig(), planner_context())
    seg = p.screw_segments[1]
    end = p.total_duration
    assert seg._T_end is None
    T_end = p.motion(end + 0.5)[0]
    kept = seg._T_end
    assert kept is not None and np.array_equal(kept, T_end)  # exact: a copy of the computed pose
    for t in (end, end + 3.0, end + 100.0):
        seg._T_end = None  # what a fresh segment computes at s = 1
        computed = p.motion(t)
        seg._T_end = kept
        copied = p.motion(t)
        for x, y in zip(computed, copied, strict=True):
            assert np.array_equal(x, y), t  # exact: the same floats
    before = p.motion(end - 0.2)[0]  # s < 1: computed, not the kept end pose
    assert not np.array_equal(before, T_end)
    assert seg._T_end is kept


def test_se3_topp_evaluate_at_a_held_clock_rewrites_the_whole_reference():
    """A clock held still (the insertion guard's κ = 0) evaluates the plan at the same t step after step: the
    motion is not recomputed, but every field of the reference is written again (the supervisor adds its
    offsets to it in place after each evaluation), equal bit for bit to a fresh planner's."""
    from dockbench.planners.se3_topp import SE3TOPPConfig, SE3TOPPPlanner

    from tests.helpers import planner_context

    held = SE3TOPPPlanner(SE3TOPPConfig(), planner_context())
    t = 0.4 * held.duration
    ref, fresh_ref = Reference(), Reference()
    held.evaluate(t, ref)
    for field in Reference.__slots__:  # what a supervisor does to the reference after the evaluation
        getattr(ref, field)[...] += 1.0
    held.evaluate(t, ref)
    SE3TOPPPlanner(SE3TOPPConfig(), planner_context()).evaluate(t, fresh_ref)
    for field in Reference.__slots__:
        assert np.array_equal(getattr(ref, field), getattr(fresh_ref, field)), field  # exact: the same floats
