"""In-orbit docking (issue 19): mounts, the target-riding reference, floating-body telemetry, the momentum
check, and the floating base's compiled kernel under the guard.

Tolerances: poses and twists computed two ways from the same state (MuJoCo's kinematics vs the closed-form
expressions of sim/orbit.py) agree to round-off, ≈ 10 ε |x| (bound 1e-12); finite differences of the
reference use δ = 1e-5 s (central, O(δ²) ≈ 1e-10 relative; bound 1e-7). The momentum-conservation bound is
the issue's 1e-6 relative; the runs measure ≈ 1e-8 (RK4 truncation), and an Euler run ≈ 1e-4.
"""

from __future__ import annotations

import math
import warnings

import mujoco
import numpy as np
import pytest
from dockbench.planners.base import Reference
from dockbench.sim import kernels
from dockbench.sim.errors import ScenarioError
from dockbench.sim.floating import FloatingBaseDynamics
from dockbench.sim.loop import build, run, simulate
from dockbench.sim.mounts import inertia_matrix
from dockbench.sim.orbit import TargetTracking
from dockbench.sim.scenario import scenario_from_dict

from tests.helpers import scenario_dict
from tests.orbit_helpers import orbit_dict
from tests.roundoff import assert_within_bound


# ------------------------------------------------------------------------------------------ config
@pytest.mark.parametrize(
    "edit, key, words",
    [
        (lambda d: d["robot"]["base"].pop("mass"), "robot.base.mass", "required for type free_floating"),
        (lambda d: d["robot"]["base"].update(inertia=[1.0, 1.0, 3.0]), "robot.base", "triangle inequality"),
        (lambda d: d["robot"]["base"].update(inertia=[1.0, 1.0]), "robot.base", "3 principal moments"),
        (lambda d: d["robot"]["base"].update(type="fixed"), "robot.base", "apply only to type free_floating"),
        (lambda d: d["robot"]["base"].update(type="floating"), "robot.base.type", "allowed: fixed, free_floating"),
        (lambda d: d["sim"].update(gravity=[0.0, 0.0, -9.81]), "robot.base.type", "needs sim.gravity = [0, 0, 0]"),
        (lambda d: d.setdefault("wrench", {}).update(force_source="observer"), "wrench.force_source",
         "momentum observer"),
        (lambda d: d["target"]["mount"].update(stiffness=[10.0, 1.0]), "target.mount", "only to type compliant"),
        (lambda d: d["target"]["mount"].update(type="compliant"), "target.mount.stiffness", "needs stiffness"),
        (lambda d: d["target"]["mount"].pop("inertia"), "target.mount.inertia", "required for type floating"),
        (lambda d: d["target"]["mount"].update(type="fixed"), "target.mount", "apply only to a moving target"),
    ],
)
def test_bad_mounts_are_rejected_with_the_key(edit, key: str, words: str) -> None:
    d = orbit_dict("iiwa14_orbit_floating_target")
    edit(d)
    with pytest.raises(ScenarioError) as exc:
        scenario_from_dict(d, file="x.yaml")
    msg = str(exc.value)
    assert msg.startswith(f"x.yaml: {key}") and words in msg, msg


def test_floating_target_under_gravity_is_rejected_but_a_compliant_one_is_not() -> None:
    d = scenario_dict("iiwa14_docking")
    d["sim"]["gravity"] = [0.0, 0.0, -9.81]
    d["target"]["mount"] = {"type": "floating", "mass": 100.0, "inertia": [5.0, 5.0, 5.0]}
    with pytest.raises(ScenarioError, match="target.mount.type: a floating target needs sim.gravity"):
        scenario_from_dict(d)
    d["target"]["mount"].update(type="compliant", stiffness=[1000.0, 100.0])
    scenario_from_dict(d)  # a test bed on the ground: allowed


def test_inertia_forms() -> None:
    np.testing.assert_array_equal(inertia_matrix((1.0, 2.0, 2.5)), np.diag([1.0, 2.0, 2.5]))
    full = inertia_matrix((2.0, 3.0, 4.0, 0.1, -0.2, 0.3))
    np.testing.assert_array_equal(full, [[2.0, 0.1, -0.2], [0.1, 3.0, 0.3], [-0.2, 0.3, 4.0]])
    with pytest.raises(ScenarioError, match="positive definite"):
        inertia_matrix((1.0, 1.0, 1.0, 2.0, 0.0, 0.0))


# --------------------------------------------------------------------------------------- assembly
def test_free_floating_base_and_floating_target_are_assembled_as_declared() -> None:
    import pinocchio as pin

    d = orbit_dict("iiwa14_orbit_floating_target")
    s = build(scenario_from_dict(d))
    m, asm = s.asm.model, s.asm
    base = d["robot"]["base"]
    bus = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "spacecraft")
    assert m.body_mass[bus] == base["mass"]
    np.testing.assert_allclose(m.body_ipos[bus], base["com"], atol=1e-15)
    np.testing.assert_allclose(np.sort(m.body_inertia[bus]), np.sort(base["inertia"]), rtol=1e-12)
    root = int(m.jnt_bodyid[m.dof_jntid[asm.base_qvel.start]])
    assert m.jnt_type[m.body_jntadr[root]] == mujoco.mjtJoint.mjJNT_FREE and m.body_parentid[root] == 0
    # the Pinocchio free-flyer model carries the same mass as MuJoCo's chaser subtree
    np.testing.assert_allclose(pin.computeTotalMass(asm.pin_floating), m.body_subtreemass[root], rtol=1e-12)
    assert asm.pin_floating.nv == 13 and asm.pin_model.nv == 7 and s.dynamics.snap.floating
    tgt = asm.target_body
    mount = d["target"]["mount"]
    assert m.body_mass[tgt] == mount["mass"] and m.body_subtreemass[tgt] == mount["mass"]  # the walls are massless
    assert m.jnt_type[m.body_jntadr[tgt]] == mujoco.mjtJoint.mjJNT_FREE
    # the buses are visual only
    for g in range(m.ngeom):
        if m.geom_bodyid[g] == bus or mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) == "target_bus":
            assert m.geom_contype[g] == 0 and m.geom_conaffinity[g] == 0


def test_fixed_mounts_leave_the_scene_as_before() -> None:
    s = build(scenario_from_dict(scenario_dict("iiwa14_docking")))
    assert s.asm.pin_floating is None and s.orbit is None and not s.dynamics.snap.floating
    assert s.asm.model.nq == 7 and s.asm.target_body >= 0 and s.asm.target_qpos == slice(0, 0)


def test_initial_tumble_is_the_declared_twist_of_the_centre_of_mass() -> None:
    d = orbit_dict("iiwa14_orbit_tumbling_target")
    s = build(scenario_from_dict(d))
    m, data, b = s.asm.model, s.data, s.asm.target_body
    res = np.zeros(6)
    mujoco.mj_objectVelocity(m, data, mujoco.mjtObj.mjOBJ_BODY, b, res, 0)  # [ω; v] of the COM frame, world
    np.testing.assert_allclose(np.r_[res[3:], res[:3]], d["target"]["mount"]["twist"], rtol=0, atol=1e-15)


def test_compliant_target_has_its_springs_and_dampers() -> None:
    d = orbit_dict("iiwa14_testbed_compliant_target")
    s = build(scenario_from_dict(d))
    m, b = s.asm.model, s.asm.target_body
    mount = d["target"]["mount"]
    j0 = m.body_jntadr[b]
    types = [m.jnt_type[j] for j in range(j0, j0 + m.body_jntnum[b])]
    assert types == [mujoco.mjtJoint.mjJNT_SLIDE] * 3 + [mujoco.mjtJoint.mjJNT_BALL]
    np.testing.assert_array_equal(m.jnt_stiffness[j0 : j0 + 4], [mount["stiffness"][0]] * 3 + [mount["stiffness"][1]])
    dofs = range(m.body_dofadr[b], m.body_dofadr[b] + 6)
    np.testing.assert_array_equal(m.dof_damping[list(dofs)], [mount["damping"][0]] * 3 + [mount["damping"][1]] * 3)
    np.testing.assert_allclose(m.jnt_pos[j0 + 3], mount["com"], atol=1e-15)


# -------------------------------------------------------------------------- the riding reference
def _random_target_state(s, rng) -> None:
    asm, d = s.asm, s.data
    qp, qv = asm.target_qpos, asm.target_qvel
    if qp.stop - qp.start == 7:  # free joint: around the initial pose
        d.qpos[qp][:3] += rng.uniform(-0.05, 0.05, 3)
    else:
        d.qpos[qp][:3] = rng.uniform(-0.02, 0.02, 3)
    quat = np.r_[1.0, rng.uniform(-0.1, 0.1, 3)]
    d.qpos[qp][3:7] = quat / np.linalg.norm(quat)
    d.qvel[qv] = rng.uniform(-0.05, 0.05, 6)


@pytest.mark.parametrize("name", ["iiwa14_orbit_floating_target", "iiwa14_testbed_compliant_target"])
def test_target_state_equals_mujocos_kinematics(name: str) -> None:
    s = build(scenario_from_dict(orbit_dict(name)))
    assert isinstance(s.planner, TargetTracking)
    m, d, b = s.asm.model, s.data, s.asm.target_body
    rng = np.random.default_rng(4)
    res = np.zeros(6)
    for _ in range(5):
        _random_target_state(s, rng)
        mujoco.mj_forward(m, d)
        R, o, od, w = s.planner.target_state()
        np.testing.assert_allclose(R, d.xmat[b].reshape(3, 3), rtol=0, atol=1e-12)
        np.testing.assert_allclose(o, d.xpos[b], rtol=0, atol=1e-12)
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_XBODY, b, res, 0)  # [ω; v] of the body frame
        np.testing.assert_allclose(w, res[:3], rtol=0, atol=1e-12)
        np.testing.assert_allclose(od, res[3:], rtol=0, atol=1e-12)


def test_reference_rides_on_the_target() -> None:
    """At the initial target pose and at rest the tracked reference IS the plan; for a target moving with a
    constant twist (constant ṗ and body-axes ω of its free joint: no angular or linear acceleration) the
    tracked velocity and acceleration are the time derivatives of the tracked position and velocity, and
    the plan seen from the target frame is unchanged."""
    s = build(scenario_from_dict(orbit_dict("iiwa14_orbit_floating_target")))
    tracking, inner = s.planner, s.planner.inner
    m, d = s.asm.model, s.data
    qp, qv = s.asm.target_qpos, s.asm.target_qvel
    t0 = 0.6 * inner.duration  # mid-approach: the plan itself moves
    a, b = Reference(), Reference()
    tracking.evaluate(t0, a)
    inner.evaluate(t0, b)
    np.testing.assert_array_equal(a.flat, b.flat)
    q0 = d.qpos[qp].copy()
    d.qvel[qv] = (0.01, -0.02, 0.005, 0.03, -0.02, 0.04)
    delta = 1e-5

    def at(t: float) -> Reference:
        d.qpos[qp] = q0
        full = d.qpos.copy()
        mujoco.mj_integratePos(m, full, d.qvel, t - t0)
        d.qpos[qp] = full[qp]
        r = Reference()
        tracking.evaluate(t, r)
        return r

    r0, rp, rm = at(t0), at(t0 + delta), at(t0 - delta)
    np.testing.assert_allclose(r0.vel, (rp.pos - rm.pos) / (2 * delta), rtol=0, atol=1e-7 * np.abs(r0.vel).max())
    np.testing.assert_allclose(r0.acc, (rp.vel - rm.vel) / (2 * delta), rtol=0,
                               atol=1e-7 * max(np.abs(r0.acc).max(), 1e-3))
    Rdot = (rp.R - rm.R) / (2 * delta)
    w = Rdot @ r0.R.T
    np.testing.assert_allclose(r0.omega, [w[2, 1], w[0, 2], w[1, 0]], rtol=0, atol=1e-8)
    np.testing.assert_allclose(r0.alpha, (rp.omega - rm.omega) / (2 * delta), rtol=0, atol=1e-8)
    # in the target's frame the plan is unchanged
    R_t, o_t, _, _ = tracking.target_state()
    at(t0)
    R_t, o_t, _, _ = tracking.target_state()
    R0, o0 = tracking._R_init, tracking._o_init
    np.testing.assert_allclose(R_t.T @ (r0.pos - o_t), R0.T @ (b.pos - o0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(R_t.T @ r0.R, R0.T @ b.R, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------------- telemetry
def test_momentum_channels_equal_the_sum_over_bodies() -> None:
    """OrbitTelemetry.derive (subtree sensors) against Σ m_i v_i and Σ (I_i ω_i + m_i c_i × v_i) body by body
    (mj_objectVelocity of each body's centre of mass), at random states of the whole scene."""
    s = build(scenario_from_dict(orbit_dict("iiwa14_orbit_tumbling_target")))
    m, d, orbit = s.asm.model, s.data, s.orbit
    rng = np.random.default_rng(8)
    n = 5

    class Tel:  # the few attributes derive() reads
        pass

    tel = Tel()
    tel.n = n
    tel.arrays = {k: np.zeros((n, *shape)) for k, (shape, _) in orbit.channels.items()}
    tel.arrays["t"] = np.arange(n) * 0.001
    tel.raw = {k: np.zeros((n, w)) for k, w in orbit.raw.items()}
    want = np.zeros((n, 6))
    res = np.zeros(6)
    for i in range(n):
        d.qpos[s.asm.base_qpos][:3] = rng.uniform(-0.1, 0.1, 3)
        d.qvel[:] = rng.uniform(-0.2, 0.2, m.nv)
        d.qpos[s.asm.qpos_adr] = s.q0 + rng.uniform(-0.2, 0.2, 7)
        mujoco.mj_forward(m, d)
        for k, src in orbit.sources.items():
            tel.raw[k][i] = src
        for body in range(1, m.nbody):
            mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, body, res, 0)  # [ω; v] at the COM, world
            mass, c = m.body_mass[body], d.xipos[body]
            R = d.ximat[body].reshape(3, 3)
            want[i, :3] += mass * res[3:]
            want[i, 3:] += R @ (m.body_inertia[body] * (R.T @ res[:3])) + mass * np.cross(c, res[3:])
    orbit.derive(tel)
    np.testing.assert_allclose(tel.arrays["momentum"], want, rtol=0, atol=1e-12 * np.abs(want).max())
    # the target's own momentum, base pose and twist
    b = s.asm.target_body
    np.testing.assert_allclose(tel.arrays["momentum_target"][-1, :3], m.body_mass[b] * d.cvel[b, 3:], atol=1e-12)


def _run(name: str, **sim) -> object:
    d = orbit_dict(name)
    d["sim"].update(sim)
    return run(scenario_from_dict(d), out_root=None)


def test_momentum_is_conserved_over_a_whole_docking_run() -> None:
    """Chaser + floating target, no external force: total linear and angular momentum stay constant to
    ≤ 1e-6 of the momentum the parts exchange, through contact; the system's centre of mass stays on its
    straight line (here: at rest). Euler's O(dt) drift breaks both gates: they can fail."""
    r = _run("iiwa14_orbit_floating_target")
    m = r.metrics
    assert r.verdict == "PASS", r.gates
    assert m["orbit.momentum_drift_rel"] < 1e-6 and m["orbit.com_deviation"] < 1e-6
    assert np.max(r.telemetry["contact_count"]) > 0  # contact happened
    assert np.max(r.telemetry["momentum_abs"][:, 0]) > 0.1  # the parts exchanged momentum
    euler = _run("iiwa14_orbit_floating_target", integrator="implicitfast", solver="newton")
    assert euler.metrics["orbit.momentum_drift_rel"] > 1e-5, euler.metrics["orbit.momentum_drift_rel"]
    failed = {g["metric"] for g in euler.gates if g["verdict"] != "PASS"}
    assert "orbit.momentum_drift_rel" in failed and euler.verdict == "FAIL"


def test_tumbling_target_keeps_the_total_angular_momentum() -> None:
    r = _run("iiwa14_orbit_tumbling_target")
    L = r.telemetry["momentum"][:, 3:]
    assert np.linalg.norm(L[0]) > 0.1  # the tumble's angular momentum (21.3 kg·m² × 0.6 deg/s, moved to the origin)
    np.testing.assert_allclose(L, np.broadcast_to(L[0], L.shape), rtol=0, atol=1e-6 * np.linalg.norm(L[0]))
    assert r.verdict == "PASS", r.gates


def test_compliant_target_deflects_by_force_over_stiffness() -> None:
    """The test bed's static deflection along the mating axis is the steady axial force over k_lin (the
    bore and seat press only along the axis at the end; 5 % for the residual lateral terms)."""
    r = _run("iiwa14_testbed_compliant_target")
    k_lin = orbit_dict("iiwa14_testbed_compliant_target")["target"]["mount"]["stiffness"][0]
    z = r.telemetry["target_pos"][:, 2]
    deflection = z[0] - np.mean(z[-500:])
    f_axial = r.metrics["contact.steady_axial_force_truth"]
    assert f_axial > 0.1
    np.testing.assert_allclose(deflection, f_axial / k_lin, rtol=0.05)


# ------------------------------------------------------------------------------------- kernels
floating_built = pytest.mark.skipif(
    kernels.status("sim._floating_kernel")[0] is None or kernels.status("sim._dynamics_kernel")[0] is None,
    reason=f"a floating-base kernel is not built or stale; {kernels.BUILD_HINT}",
)


@floating_built
@pytest.mark.parametrize(
    "name", ["iiwa14_orbit_floating_target", "fr3_orbit_floating_target", "iiwa14_orbit_floating_target_se3"]
)
def test_floating_kernels_agree_with_the_python_reference(name: str) -> None:
    """The compiled path (kinematics kernel on the full state + the reduction kernel) and the Python path
    give the same snapshot within the guard's bound, at random states (base twist included)."""
    s = build(scenario_from_dict(orbit_dict(name)))
    asm, data = s.asm, s.data
    fk = s.dynamics
    assert fk.kernel == "compiled" and fk._fk is not None
    with kernels.forced("python"):
        f = asm.floating_frame_ids
        py = FloatingBaseDynamics(asm.pin_floating, f[asm.tool.ee_site], f[asm.tool.sensor_site],
                                  body_frame=fk.body_frame, sensor_pose=fk.sensor_pose, world_drift=fk.world_drift)
    py.bind_base(data.qpos[asm.base_qpos], data.qvel[asm.base_qvel])
    assert py.kernel == "python"
    rng = np.random.default_rng(31)
    for _ in range(8):
        data.qpos[asm.base_qpos] = np.r_[rng.uniform(-0.3, 0.3, 3), (x := rng.normal(size=4)) / np.linalg.norm(x)]
        data.qvel[asm.base_qvel] = rng.uniform(-0.3, 0.3, 6)
        q, v = rng.uniform(s.plant.q_min, s.plant.q_max), rng.uniform(-1, 1, 7)
        fk.update(q, v)
        got = fk._reduce_guard_values()
        py.update(q, v)
        assert_within_bound("dynamics", 13, got, py._reduce_guard_values(), py._reduce_guard_bounds())
        for name_ in ("twist_ee_lwa", "T_world_ee", "T_world_sensor"):
            np.testing.assert_allclose(getattr(fk.snap, name_), getattr(py.snap, name_), rtol=0, atol=1e-14)


EDITED_W = 12345.0


@floating_built
def test_an_edited_reduction_trips_the_guard_and_is_what_runs(monkeypatch) -> None:
    original = FloatingBaseDynamics._reduce_python

    def edited(self):
        original(self)
        self.snap.manipulability = EDITED_W

    monkeypatch.setattr(FloatingBaseDynamics, "_reduce_python", edited)
    d = orbit_dict("iiwa14_orbit_fixed_target")
    d["sim"]["duration"] = 0.2
    with kernels.forced("auto"), kernels.checking(kernels.DEFAULT_CHECK_EVERY):
        match = r"kernel guard: the compiled dynamics kernel \(sim._floating_kernel\) .* at step 0"
        with pytest.warns(RuntimeWarning, match=match):
            r = run(scenario_from_dict(d), out_root=None)
    (bad,) = r.meta["kernel_mismatch"]
    assert bad["kernel"] == "sim._floating_kernel" and bad["quantity"] == "manipulability"
    assert r.meta["kernels"]["dynamics"] == "python"
    assert np.all(r.telemetry["manipulability"] == EDITED_W)


@floating_built
def test_unedited_floating_kernels_never_trip_the_guard_through_contact() -> None:
    d = orbit_dict("iiwa14_orbit_floating_target")
    s = build(scenario_from_dict(d))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = simulate(s, kernel_check=7)
    assert out.status == "completed" and not out.guard.mismatches and out.guard.checks > 1000
    assert out.guard.max_ratio["dynamics"] < 1.0
    assert np.max(out.telemetry.channels()["contact_count"]) > 0


def test_guarded_floating_run_equals_the_unguarded_one() -> None:
    d = orbit_dict("iiwa14_orbit_fixed_target")
    d["sim"]["duration"] = 1.0
    sc = scenario_from_dict(d)
    a = simulate(build(sc), kernel_check=0)[0].channels()
    b = simulate(build(sc), kernel_check=3)[0].channels()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_python_and_compiled_floating_runs_dock_alike() -> None:
    """The whole docking run with every kernel off ends where the compiled one does (contact amplifies
    round-off; docking metrics within 1e-6 m / 1e-4 deg)."""
    sc = scenario_from_dict(orbit_dict("iiwa14_orbit_fixed_target"))
    with kernels.forced("python"):
        py = run(sc, out_root=None)
    assert py.meta["kernels"]["dynamics"] == "python"
    co = run(sc, out_root=None)
    tols = (("docking.depth", 1e-6), ("docking.lateral", 1e-6), ("docking.tilt_deg", 1e-4), ("orbit.base_drift", 1e-6))
    for k, tol in tols:
        assert math.isclose(py.metrics[k], co.metrics[k], abs_tol=tol), (k, py.metrics[k], co.metrics[k])


def test_orbit_telemetry_is_saved_and_reloaded(tmp_path) -> None:
    from dockbench.telemetry.run import Run

    d = orbit_dict("iiwa14_orbit_floating_target")
    d["sim"]["duration"] = 0.3
    r = run(scenario_from_dict(d), out_root=tmp_path)
    back = Run.load(r.run_dir)
    for k in ("base_pos", "base_quat", "base_vel", "target_pos", "target_vel", "momentum", "system_com", "momentum_t"):
        np.testing.assert_array_equal(back.channels[k], r.telemetry[k], err_msg=k)
    assert back.meta["base_type"] == "free_floating" and back.meta["target_mount"] == "floating"


def test_video_replay_puts_the_floating_bodies_where_they_were(tmp_path) -> None:
    """telemetry.video replays the base's and the target's joint states with the arm's: MuJoCo's kinematics
    of the replayed qpos put the base and the target at their recorded poses."""
    from dockbench.telemetry.run import Run
    from dockbench.telemetry.video import _floating_replay, load_render_model

    d = orbit_dict("iiwa14_orbit_tumbling_target")
    d["sim"]["duration"] = 0.5
    r = run(scenario_from_dict(d), out_root=tmp_path)
    back = Run.load(r.run_dir)
    model = load_render_model(r.run_dir / "scene.xml")
    replay = _floating_replay(model, back)
    assert len(replay) == 2
    data = mujoco.MjData(model)
    base = int(model.jnt_bodyid[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "base_free")])
    tgt = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "target")
    i = len(back.t) - 1
    for adr, poses in replay:
        data.qpos[adr : adr + poses.shape[1]] = poses[i]
    mujoco.mj_kinematics(model, data)
    np.testing.assert_allclose(data.xpos[base], back.channels["base_pos"][i], atol=1e-12)
    np.testing.assert_allclose(data.xpos[tgt], back.channels["target_pos"][i], atol=1e-12)
    np.testing.assert_allclose(data.xquat[tgt], back.channels["target_quat"][i], atol=1e-12)
