"""The numpy references of the 1 kHz loop equal independent array evaluations of their equations.

The F/T wrench pipeline (sim/wrench.py) and the moving-target reference (sim/orbit.py) are numpy, one
statement per equation; their 3×3 products are sim/lie.py's element-wise forms (``mul3``, ``mul3t``,
``add_mul3``, ``matmul3``), which sum in the compiled kernels' order (tests/test_kernels.py checks the wrench
kernel against the reference bit for bit). Each test below evaluates the same equations a second, independent
way (``@``, ``np.cross``, straight from the docstrings) on random / simulated states, including contacts and
inertial compensation, and compares to round-off; the element-wise products are checked against the float sums
they stand for (the same operations: equal bit for bit) and against ``@``; the MotionReference adapter's two
entry points are checked against each other and against the array formulas.
"""

from __future__ import annotations

import numpy as np
import pytest
from dockbench.planners import PLANNERS, MotionReference, PlannerContext, Reference
from dockbench.sim import lie
from dockbench.sim.config import parse_config
from dockbench.sim.lie import so3_exp
from dockbench.sim.loop import build, simulate
from dockbench.sim.scenario import scenario_from_dict

from tests.helpers import planner_context, press_scenario
from tests.orbit_helpers import orbit_dict

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
    """The F/T pipeline written straight from sim/wrench.py's docstring with ``@`` and ``np.cross``."""
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
def test_wrench_pipeline_equals_an_independent_array_form(inertial: bool) -> None:
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
    _close(lie.cross3(a, b), np.cross(a, b), "cross3")


# ------------------------------------------------------------------------------------------ lie's 3×3 forms


def _float_sums(A: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A x as the Python float sums (A₀₀x₀ + A₀₁x₁) + A₀₂x₂ … (the compiled kernels' expressions)."""
    a, (x0, x1, x2) = A.tolist(), x.tolist()
    return np.array([r[0] * x0 + r[1] * x1 + r[2] * x2 for r in a])


def test_elementwise_products_are_the_kernels_float_sums_and_equal_matmul() -> None:
    """Same operations in the same order: bit for bit (sign of zero included); against BLAS's ``@`` to
    round-off (three-term sums: |Δ| ≤ 3 ε Σ|Aᵢⱼ xⱼ|)."""
    rng = np.random.default_rng(11)
    for trial in range(300):
        A = rng.normal(size=(3, 3)) * 10.0 ** rng.integers(-6, 6)
        B = rng.normal(size=(3, 3))
        x, p = rng.normal(size=3) * 10.0 ** rng.integers(-6, 6), rng.normal(size=3)
        if trial % 10 == 0:
            x[rng.integers(3)] = -0.0
        np.testing.assert_array_equal(lie.mul3(A, x), _float_sums(A, x))
        np.testing.assert_array_equal(lie.mul3t(A, x), _float_sums(A.T.copy(), x))
        np.testing.assert_array_equal(lie.matmul3(A, B), np.array([_float_sums(A, B[:, j]) for j in range(3)]).T)
        want = [p[i] + A[i, 0] * x[0] + A[i, 1] * x[1] + A[i, 2] * x[2] for i in range(3)]
        np.testing.assert_array_equal(lie.add_mul3(p, A, x), want)
        rows = np.stack((x, p))
        np.testing.assert_array_equal(lie.mul3(A, rows), np.stack((lie.mul3(A, x), lie.mul3(A, p))))
        np.testing.assert_array_equal(lie.mul3t(A, rows), np.stack((lie.mul3t(A, x), lie.mul3t(A, p))))
        bound = 3 * np.finfo(float).eps * (np.abs(A) @ np.abs(x))
        assert np.all(np.abs(lie.mul3(A, x) - A @ x) <= bound)
        assert np.all(np.abs(lie.mul3t(A, x) - A.T @ x) <= 3 * np.finfo(float).eps * (np.abs(A.T) @ np.abs(x)))
    with pytest.raises(AssertionError):  # the check can fail: a transposed product is not the product
        np.testing.assert_array_equal(lie.mul3t(A, x), _float_sums(A, x))


# ------------------------------------------------------------------------------------------ moving target


def _array_tracking(R: np.ndarray, o: np.ndarray, o_dot: np.ndarray, w: np.ndarray, R0: np.ndarray,
                    o0: np.ndarray, plan: Reference) -> dict[str, np.ndarray]:
    """sim/orbit.py's module-docstring equations with ``@`` and ``np.cross``."""
    R_D = R @ R0.T
    x = o + R_D @ (plan.pos - o0)
    r = x - o
    return {
        "pos": x,
        "vel": o_dot + np.cross(w, r) + R_D @ plan.vel,
        "acc": R_D @ plan.acc + 2.0 * np.cross(w, R_D @ plan.vel) + np.cross(w, np.cross(w, r)),
        "R": R_D @ plan.R,
        "omega": w + R_D @ plan.omega,
        "alpha": R_D @ plan.alpha + np.cross(w, R_D @ plan.omega),
    }


class _FixedPlan:
    """An inner planner that hands out one given plan (its duration that of the scenario's)."""

    def __init__(self, plan: Reference) -> None:
        self.plan = plan

    def evaluate(self, t: float, out: Reference) -> None:
        out.flat[:] = self.plan.flat


@pytest.mark.parametrize("name", ["iiwa14_orbit_floating_target", "iiwa14_testbed_compliant_target"])
def test_target_tracking_equals_an_independent_array_form(name: str, monkeypatch) -> None:
    """Random target states (free joint, or slides + ball) and a random plan with ω, α ≠ 0: the tracked
    reference against the equations evaluated with BLAS (sums of a few products of unit-size rotations:
    1e-12 relative)."""
    import mujoco

    s = build(scenario_from_dict(orbit_dict(name)))
    tracking, inner, d, m, b = s.planner, s.planner.inner, s.data, s.asm.model, s.asm.target_body
    qp, qv = s.asm.target_qpos, s.asm.target_qvel
    rng = np.random.default_rng(6)
    res = np.zeros(6)
    plan = Reference()
    duration = inner.duration
    for trial in range(6):
        if qp.stop - qp.start == 7:
            d.qpos[qp][:3] += rng.uniform(-0.05, 0.05, 3)
        else:
            d.qpos[qp][:3] = rng.uniform(-0.02, 0.02, 3)
        quat = np.r_[1.0, rng.uniform(-0.2, 0.2, 3)]
        d.qpos[qp][3:7] = quat / np.linalg.norm(quat)
        d.qvel[qv] = rng.uniform(-0.1, 0.1, 6)
        mujoco.mj_forward(m, d)
        t = float(rng.uniform(0.0, duration))
        inner.evaluate(t, plan)
        plan.omega[:], plan.alpha[:] = rng.normal(size=3), rng.normal(size=3)  # the general formulas
        # the target's state from MuJoCo's kinematics (independent of target_state())
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_XBODY, b, res, 0)  # [ω; v] of the body frame
        want = _array_tracking(d.xmat[b].reshape(3, 3), d.xpos[b].copy(), res[3:].copy(), res[:3].copy(),
                               tracking._R_init, tracking._o_init, plan)
        out = Reference()
        monkeypatch.setattr(tracking, "inner", _FixedPlan(plan))
        tracking.evaluate(t, out)
        for key, x in want.items():
            _close(getattr(out, key), x, f"{name} {key}, trial {trial}")


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
