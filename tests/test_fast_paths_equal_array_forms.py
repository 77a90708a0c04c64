"""The float fast paths of the 1 kHz loop equal their straightforward numpy array forms to round-off.

The F/T wrench pipeline and the quintic planner do their 3-vector algebra on Python floats (cheaper than
numpy calls at this size). Each test below runs the array implementation of the same equations (kept
here as the reference) next to the fast one on random / simulated states, including contacts and
inertial compensation; the MotionReference adapter's two entry points are checked against each other
and against the array formulas.
"""

from __future__ import annotations

import numpy as np
import pytest
from dockbench.planners import PLANNERS, MotionReference, PlannerContext, Reference
from dockbench.sim.config import parse_config
from dockbench.sim.lie import so3_exp
from dockbench.sim.loop import build, simulate
from dockbench.sim.scenario import scenario_from_dict
from dockbench.sim.wrench import cross3

from tests.helpers import planner_context, press_scenario

#: relative round-off allowed between the float and the array forms of the short sums (3-term dot products,
#: cross products, a few additions: |Δ| ≤ ~10 ε (1 + |lever|) |x|, so 1e-12 ≈ 4500 ε is ≥ 100× that);
#: quantities that pass through a linear solve (Khatib's τ) use the controller's own round-off bound
#: instead (tests/roundoff.py: GUARD_C · n ε κ(Λ⁻¹) S)
TOL_ROUNDOFF = 1e-12


def _close(a, b, name: str) -> None:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    scale = max(1.0, float(np.abs(b).max()))
    np.testing.assert_allclose(a, b, rtol=0, atol=TOL_ROUNDOFF * scale, err_msg=name)


# ------------------------------------------------------------------------------------------ wrench


def _array_wrench(wp, d, T_world_ee: np.ndarray) -> dict[str, np.ndarray]:
    """The array-form F/T pipeline (previous implementation)."""
    R_WS = d.site_xmat[wp.site].reshape(3, 3)
    p_S = d.site_xpos[wp.site].copy()
    raw = np.concatenate((d.sensordata[wp.f_adr : wp.f_adr + 3], d.sensordata[wp.n_adr : wp.n_adr + 3]))
    ext = -np.concatenate((R_WS @ raw[:3], R_WS @ raw[3:]))
    if wp.inertial_compensation:
        wp._subtract_inertial(d, p_S, ext)

    def to_body(w):
        R, p_E = T_world_ee[:3, :3], T_world_ee[:3, 3]
        return np.concatenate((R.T @ w[:3], R.T @ (w[3:] + np.cross(p_S - p_E, w[:3]))))

    geom = d.contact.geom[: d.ncon]
    count = int(np.count_nonzero(wp.is_tool_geom[geom[:, 0]] != wp.is_tool_geom[geom[:, 1]])) if d.ncon else 0
    truth = np.zeros(6)
    if count:
        cf = d.cfrc_ext[wp.tool_bodies].sum(axis=0)
        truth[:3] = cf[3:]
        truth[3:] = cf[:3] + np.cross(d.subtree_com[wp.root_body] - p_S, cf[3:])
    return {
        "ft_raw": raw,
        "ext_world": ext,
        "ext_body": to_body(ext),
        "truth_world": truth,
        "truth_body": to_body(truth) if count else np.zeros(6),
        "contact_count": np.array(count),
    }


@pytest.mark.parametrize("inertial", [False, True])
def test_wrench_pipeline_float_form_equals_array_form(inertial: bool) -> None:
    d = press_scenario(settle_time=0.5)
    d["wrench"] = {"inertial_compensation": inertial}
    s = build(scenario_from_dict(d))
    simulate(s)
    data = s.data
    assert data.ncon > 0
    rng = np.random.default_rng(2)
    for trial in range(4):
        T = np.eye(4)
        T[:3, :3] = so3_exp(rng.normal(size=3))
        T[:3, 3] = rng.normal(scale=0.3, size=3)
        st = s.wrench.update(data, T)
        want = _array_wrench(s.wrench, data, T)
        for name, x in want.items():
            _close(getattr(st, name), x, f"{name}, trial {trial}")
        assert st.contact_count > 0
    # a fresh MjData (no contacts yet) is picked up, not the cached one
    import mujoco

    d2 = mujoco.MjData(s.asm.model)
    mujoco.mj_forward(s.asm.model, d2)
    st = s.wrench.update(d2, T)
    want = _array_wrench(s.wrench, d2, T)
    for name, x in want.items():
        _close(getattr(st, name), x, f"{name}, fresh data")


def test_truth_helper_and_cross3_agree_with_numpy() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=3), rng.normal(size=3)
    _close(cross3(a, b, np.zeros(3)), np.cross(a, b), "cross3")


# ------------------------------------------------------------------------------- planners/adapter


def _ctx() -> PlannerContext:
    return planner_context()


def test_quintic_float_form_equals_array_form() -> None:
    cls = PLANNERS.get("quintic")
    p = cls(parse_config(cls.Config, {}), _ctx())
    from dockbench.planners.quintic import quintic_blend

    out = Reference()
    T = p.duration
    for t in np.concatenate(([-1.0, 0.0, T, 2 * T], np.linspace(0.0, T, 37))):
        p.evaluate(float(t), out)
        s, ds, dds = quintic_blend(t / T)
        _close(out.pos, p.p0 + p.delta * s, f"pos at {t}")
        _close(out.vel, p.delta * (ds / T), f"vel at {t}")
        _close(out.acc, p.delta * (dds / (T * T)), f"acc at {t}")
        np.testing.assert_array_equal(out.R, p.R_goal)
        np.testing.assert_array_equal(out.omega, 0.0)
        np.testing.assert_array_equal(out.alpha, 0.0)


def _array_body_motion(ref: Reference) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = ref.R, ref.pos
    V = np.concatenate((ref.R.T @ ref.vel, ref.R.T @ ref.omega))
    dV = np.concatenate((ref.R.T @ ref.acc - np.cross(V[3:], V[:3]), ref.R.T @ ref.alpha))
    return T, V, dV


@pytest.mark.parametrize("name", ["quintic", "two_phase", "figure8", "se3_topp"])
def test_motion_reference_from_reference_equals_update(name: str) -> None:
    cls = PLANNERS.get(name)
    p = cls(parse_config(cls.Config, {}), _ctx())
    a, b = MotionReference(p), MotionReference(p)
    ref = Reference()
    ids = (id(b.T), id(b.V), id(b.dV))
    for t in np.linspace(0.0, p.duration * 1.1, 23):
        t = float(t)
        p.evaluate(t, ref)
        a.update(t)
        b.update_from_reference(ref, t)
        np.testing.assert_array_equal(b.T, a.T)
        np.testing.assert_array_equal(b.V, a.V)
        np.testing.assert_array_equal(b.dV, a.dV)
        if not a.passthrough:
            T, V, dV = _array_body_motion(ref)
            _close(a.T, T, f"T at {t}")
            _close(a.V, V, f"V at {t}")
            _close(a.dV, dV, f"dV at {t}")
    assert (id(b.T), id(b.V), id(b.dV)) == ids


def test_motion_reference_converts_a_general_reference() -> None:
    """ω, α ≠ 0 (not produced by the fixed-orientation planners): the general V̇_d formula."""
    cls = PLANNERS.get("quintic")
    mr = MotionReference(cls(parse_config(cls.Config, {}), _ctx()))
    rng = np.random.default_rng(9)
    ref = Reference()
    for _ in range(5):
        ref.pos[:], ref.vel[:], ref.acc[:] = rng.normal(size=3), rng.normal(size=3), rng.normal(size=3)
        ref.R[:] = so3_exp(rng.normal(size=3))
        ref.omega[:], ref.alpha[:] = rng.normal(size=3), rng.normal(size=3)
        mr.update_from_reference(ref, 0.0)
        T, V, dV = _array_body_motion(ref)
        _close(mr.T, T, "T")
        _close(mr.V, V, "V")
        _close(mr.dV, dV, "dV")
