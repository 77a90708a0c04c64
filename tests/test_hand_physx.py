"""The G20 hand on PhysX (ovphysx, CPU): USD round trip against the MuJoCo model, hard write equal to the
MuJoCo bridge, PD settling with PhysX mimic joints, NaN reset, topics and CLI (docs/hand.md, "PhysX engine").

Skipped, with the reason, only when the ``physx`` extra is not installed (usd-core for the USD part;
ovphysx + physx-usd-schemas for the engine part). No GPU is used.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
from dockbench.hand.bridge import BridgeConfig, DriveMode, HandBridge, run_track_test
from dockbench.hand.spec import load_model, load_spec

try:
    import pxr  # noqa: F401

    USD_MISSING = ""
except ImportError as exc:
    USD_MISSING = f"usd-core not installed ({exc}); pip install 'dockbench[physx]'"

from dockbench.hand.physx_backend import physx_available  # noqa: E402 - needs nothing of the extra

PHYSX_MISSING = physx_available() or ""

needs_usd = pytest.mark.skipif(bool(USD_MISSING), reason=USD_MISSING)
needs_physx = pytest.mark.skipif(bool(PHYSX_MISSING), reason=PHYSX_MISSING)

F32 = 2.0**-24  # float32 unit round-off: the USD joint/mass attributes and every PhysX tensor are float32
FK_TOL = 1e-9  # [m] the FK bound; the double-precision chain is ~1e-15 here (8 products of 4×4)
DT = 1.0 / 120.0


@pytest.fixture(scope="module")
def spec():
    return load_spec()


@pytest.fixture(scope="module")
def model(spec):
    return load_model(spec)


@pytest.fixture(scope="module")
def stage(spec, model):
    if USD_MISSING:
        pytest.skip(USD_MISSING)
    from dockbench.hand.usd import build_stage

    return build_stage(spec=spec, model=model)


def _jid(model, name):
    return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)


def random_poses(model, spec, n, seed):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        yield {j: float(rng.uniform(*model.jnt_range[_jid(model, j)])) for j in spec.joint_names}


def fk_error(stage, model, q) -> float:
    """Max |p_usd - p_mujoco| [m] and |R_usd - R_mujoco| over all bodies at pose q."""
    from dockbench.hand.usd import MOUNT_POS, forward_kinematics

    d = mujoco.MjData(model)
    for name, v in q.items():
        d.qpos[model.jnt_qposadr[_jid(model, name)]] = v
    mujoco.mj_kinematics(model, d)
    fk = forward_kinematics(stage, q)
    worst = 0.0
    for b in range(1, model.nbody):
        t = fk[mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b)]
        worst = max(worst, float(np.abs(t[:3, 3] - (d.xpos[b] + MOUNT_POS)).max()),
                    float(np.abs(t[:3, :3] - d.xmat[b].reshape(3, 3)).max()))
    return worst


# ------------------------------------------------------------------------------ USD round trip
@needs_usd
def test_usd_joints_axes_limits_and_mimic_match_the_mujoco_model(stage, model, spec):
    from dockbench.hand.usd import read_joints

    joints = read_joints(stage)
    assert [j.name for j in joints] == list(spec.joint_names)
    for j in joints:
        k = _jid(model, j.name)
        child = int(model.jnt_bodyid[k])
        assert j.child == mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, child)
        assert j.parent == mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, int(model.body_parentid[child]))
        np.testing.assert_array_equal(j.axis_child, model.jnt_axis[k])  # ±1/0 survive float32 exactly
        # limits are stored in float32 degrees: |error| <= ulp of the degree value, in rad
        for got, want in ((j.lower, model.jnt_range[k, 0]), (j.upper, model.jnt_range[k, 1])):
            assert abs(got - want) <= 2 * F32 * abs(want) + 1e-15, (j.name, got, want)
        sj = spec.joint(j.name)
        assert j.mimic_of == sj.mimic_of
        if sj.mimic_of is not None:
            assert abs(j.gearing + sj.ratio) <= F32 * sj.ratio
    roll = next(j for j in joints if j.name == "thumb_cmc_roll")
    assert abs(roll.upper - 1.47) <= 2 * F32 * 1.47


@needs_usd
def test_usd_masses_and_inertias_match_the_mujoco_model(stage, model):
    from dockbench.hand.usd import HAND_PATH
    from pxr import UsdPhysics

    n = 0
    for b in range(1, model.nbody):
        prim = stage.GetPrimAtPath(f"{HAND_PATH}/{mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b)}")
        mass = UsdPhysics.MassAPI(prim)
        assert abs(mass.GetMassAttr().Get() - model.body_mass[b]) <= F32 * model.body_mass[b]
        np.testing.assert_allclose(np.array(mass.GetDiagonalInertiaAttr().Get()), model.body_inertia[b],
                                   rtol=F32, atol=0)
        np.testing.assert_allclose(np.array(mass.GetCenterOfMassAttr().Get()), model.body_ipos[b],
                                   rtol=0, atol=F32 * 0.1)  # |CoM| < 0.1 m
        pa = mass.GetPrincipalAxesAttr().Get()
        q = np.array([pa.GetReal(), *pa.GetImaginary()])
        # same rotation (q and -q): |<q, q_mj>| = 1 up to float32
        assert abs(abs(float(q @ model.body_iquat[b])) - 1.0) <= 4 * F32
        n += 1
    assert n == model.nbody - 1 == 22


@needs_usd
def test_usd_forward_kinematics_matches_mujoco_at_random_poses(stage, model, spec):
    worst = max(fk_error(stage, model, q) for q in random_poses(model, spec, 25, seed=1))
    assert worst <= FK_TOL, worst


@needs_usd
def test_the_fk_check_fails_on_a_shifted_body(spec, model):
    """The FK gate can fail: a body moved by 1 µm in the stage is caught."""
    from dockbench.hand.usd import HAND_PATH, build_stage
    from pxr import Gf, UsdGeom

    bad = build_stage(spec=spec, model=model)
    op = UsdGeom.Xformable(bad.GetPrimAtPath(f"{HAND_PATH}/index_distal")).GetOrderedXformOps()[0]
    op.Set(op.Get() + Gf.Vec3d(1e-6, 0, 0))
    q = next(random_poses(model, spec, 1, seed=2))
    assert fk_error(bad, model, q) > FK_TOL


@needs_usd
def test_usd_joint_frames_agree_with_the_body_rest_poses_to_float32(stage, model):
    """PhysX builds the chain from localPos0/localRot0 (float32): they must be the double rest poses."""
    from dockbench.hand.usd import JOINTS_PATH, quat_matrix, rest_transforms
    from pxr import UsdPhysics

    rest = rest_transforms(stage)
    for prim in stage.GetPrimAtPath(JOINTS_PATH).GetChildren():
        if not prim.IsA(UsdPhysics.RevoluteJoint):
            continue
        j = UsdPhysics.RevoluteJoint(prim)
        parent, child = (r.GetTargets()[0].name for r in (j.GetBody0Rel(), j.GetBody1Rel()))
        t_rel = np.linalg.solve(rest[parent], rest[child])
        np.testing.assert_allclose(np.array(j.GetLocalPos0Attr().Get()), t_rel[:3, 3], rtol=0, atol=2 * F32 * 0.2)
        r0 = quat_matrix(j.GetLocalRot0Attr().Get())
        r1 = quat_matrix(j.GetLocalRot1Attr().Get())
        np.testing.assert_allclose(r0 @ r1.T, t_rel[:3, :3], rtol=0, atol=8 * F32)


@needs_usd
def test_usd_physx_settings_and_selective_colliders(stage):
    from dockbench.hand import usd
    from pxr import UsdPhysics

    root = stage.GetPrimAtPath(f"{usd.JOINTS_PATH}/root_fixed")
    assert root.HasAPI(UsdPhysics.ArticulationRootAPI)
    get = lambda prim, a: prim.GetAttribute(a).Get()  # noqa: E731
    assert get(root, "physxArticulation:solverPositionIterationCount") == 32
    assert get(root, "physxArticulation:solverVelocityIterationCount") == 4
    assert get(root, "physxArticulation:sleepThreshold") == pytest.approx(0.005, rel=F32)
    assert get(root, "physxArticulation:enabledSelfCollisions") is True
    enabled = []
    for prim in stage.Traverse():
        if prim.HasAPI(UsdPhysics.CollisionAPI):
            assert get(prim, "physxCollision:contactOffset") == pytest.approx(0.001, rel=F32)
            assert get(prim, "physxCollision:restOffset") == pytest.approx(-0.0005, rel=F32)
            if UsdPhysics.CollisionAPI(prim).GetCollisionEnabledAttr().Get():
                enabled.append(prim.GetName())
        if prim.HasAPI(UsdPhysics.RigidBodyAPI):
            assert get(prim, "physxRigidBody:linearDamping") == get(prim, "physxRigidBody:angularDamping") == 6.0
            assert get(prim, "physxRigidBody:maxLinearVelocity") == 3.0
            assert get(prim, "physxRigidBody:maxAngularVelocity") == 360.0
        if prim.IsA(UsdPhysics.RevoluteJoint):
            assert get(prim, "physxJointAxis:angular:armature") == pytest.approx(0.05, rel=F32)
            assert get(prim, "physxJointAxis:angular:maxJointVelocity") == pytest.approx(171.887, rel=F32)
            assert UsdPhysics.DriveAPI(prim, "angular").GetMaxForceAttr().Get() >= 8.0
    assert sorted(enabled) == sorted(usd.SELECTIVE_COLLIDERS)
    hand = stage.GetPrimAtPath(usd.HAND_PATH)
    assert tuple(hand.GetAttribute("xformOp:translate").Get()) == (0.0, 0.45, 0.70)


@needs_usd
def test_usda_file_is_reproducible(tmp_path, spec):
    from dockbench.hand.usd import write_usda

    a = write_usda(tmp_path / "a.usda", spec=spec).read_text()
    b = write_usda(tmp_path / "b.usda", spec=spec).read_text()
    assert a == b and "PhysicsArticulationRootAPI" in a


# ------------------------------------------------------------------------------ the PhysX engine
@pytest.fixture(scope="module")
def px():
    if PHYSX_MISSING:
        pytest.skip(PHYSX_MISSING)
    from dockbench.hand import physx_backend

    return physx_backend


@needs_physx
def test_physx_reads_back_the_authored_limits_masses_and_link_poses(px, model, spec):
    """After a hard write at a random pose, PhysX's link poses are MuJoCo's body poses (float32)."""
    from dockbench.hand.usd import MOUNT_POS

    with px.PhysXHandBridge.create(px.config_for("kinematic"), spec, px.PhysXOptions(limit_margin=0.0)) as b:
        q = next(random_poses(model, spec, 1, seed=3))
        b.reset(q)
        b.step()
        d = mujoco.MjData(model)
        for name, v in q.items():
            d.qpos[model.jnt_qposadr[_jid(model, name)]] = v
        mujoco.mj_kinematics(model, d)
        poses = b.link_poses()
        assert len(poses) == 22
        for name, pose in poses.items():
            k = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
            # float32 link poses ~1 m from the origin, through a ≤ 6-joint chain: ≤ 64 ulp of 1 m
            np.testing.assert_allclose(pose[:3], d.xpos[k] + MOUNT_POS, rtol=0, atol=64 * F32)
        ranges = b.joint_ranges
        for i, name in enumerate(spec.joint_names):
            np.testing.assert_array_equal(ranges[i], model.jnt_range[_jid(model, name)])


def _track_commands(spec):
    """The track: open for 200 steps, half fist until 400, fist until 600, open again until 800."""
    return {0: "open", 200: "half_fist", 400: "fist", 600: "open"}, 800


@needs_physx
@pytest.mark.parametrize("slew_rad", [0.0, 0.01])
def test_hard_write_equals_the_mujoco_bridge_on_the_track(px, spec, slew_rad):
    """Same commands, same slew, no projection: PhysX's DOFs are the MuJoCo bridge's pose rounded to float32."""
    mj = HandBridge.standalone(BridgeConfig(mode="kinematic", slew_rad_s=slew_rad / DT, collision_project=False,
                                            dt=DT), spec, timestep=DT)
    plan, n = _track_commands(spec)
    worst = 0.0
    with px.PhysXHandBridge.create(px.config_for("kinematic", slew_rad), spec, px.PhysXOptions(limit_margin=0.0)) as ph:
        for b in (mj, ph):
            b.reset("open")
        for k in range(n):
            if k in plan:
                assert mj.command_preset(plan[k]).accepted and ph.command_preset(plan[k]).accepted
            mj.step()
            ph.step()
            worst = max(worst, float(np.max(np.abs(ph.applied_now - mj.applied_now))))
    # each PhysX pose is float32(cand) and the slew continues from it: ≤ one ulp of |q| ≤ 1.74 rad per
    # slewing step (a step moves a joint by L, so at most max|Δq|/L + 1 steps slew per segment)
    steps_slewing = 1 if slew_rad == 0 else 4 * (math.ceil(1.74 / slew_rad) + 1)
    assert worst <= steps_slewing * 2 * F32 * 1.74, worst
    assert np.array_equal(ph.snapshot().goal, mj.snapshot().goal)


@needs_physx
def test_pd_drive_settles_with_mimic_coupling_and_the_design_gains(px, spec):
    with px.PhysXHandBridge.create(px.config_for("pd"), spec) as b:
        res = run_track_test(b)
        assert res.passed, res
        gains = b.drive_gains
        assert gains["thumb_cmc_yaw"] == (10.0, 3.0, 8.0)  # effort 6 raised to maxForce 8
        assert gains["index_pip"] == (15.0, 2.5, 8.0)
        assert gains["index_dip"][:2] == (0.0, 0.0) and gains["thumb_ip"][:2] == (0.0, 0.0)
        q = dict(zip(spec.joint_names, b.snapshot().applied, strict=True))
        for j in spec.joints:
            if j.mimic_of is not None:  # PhysX mimic joint: q = ratio·q_driver (soft only through round-off)
                assert abs(q[j.name] - j.ratio * q[j.mimic_of]) <= 1e-3, j.name


@needs_physx
def test_track_test_gate_can_fail(px, spec):
    with px.PhysXHandBridge.create(px.config_for("pd"), spec) as b:
        res = run_track_test(b, open_steps=10, check_step=12)  # two steps after a half-fist command
        assert not res.passed and res.max_error > res.tolerance


@needs_physx
def test_nonfinite_physx_state_resets_to_open(px, spec):
    with px.PhysXHandBridge.create(px.config_for("pd"), spec) as b:
        b.reset("open")
        open_pose = b.snapshot().applied.copy()
        b.command_preset("fist")
        for _ in range(20):
            b.step()
        b._bind["vel"].write(np.full((1, 21), np.nan, np.float32))  # a blown-up solver state
        r = b.step()
        assert b.nonfinite_resets == 1 and r.fell_back
        snap = b.snapshot()
        np.testing.assert_array_equal(snap.applied, open_pose)
        np.testing.assert_array_equal(snap.goal, open_pose)
        for _ in range(5):
            r = b.step()
        assert b.nonfinite_resets == 1 and np.all(np.isfinite(b.snapshot().applied))


@needs_physx
def test_physx_bridge_config_and_errors(px, spec):
    c = px.config_for("kinematic", 0.01)
    assert c.dt == DT and c.slew_rad_s == pytest.approx(0.01 * 120) and not c.collision_project
    from dockbench.sim.errors import DockbenchError

    with pytest.raises(DockbenchError, match="--slew-rad must be >= 0"):
        px.config_for("kinematic", -1.0)
    with px.PhysXHandBridge.create(px.config_for("pd"), spec) as b:
        assert b.config.mode is DriveMode.PD
        with pytest.raises(DockbenchError, match="use step"):
            b.write_targets()


@needs_physx
def test_limit_margin_keeps_goals_inside_the_ranges(px, spec, model):
    """Default margin 0.05 rad: the fist goal stops 0.05 rad short of the upper limits, open 0.05 above 0."""
    from dockbench.sim.errors import DockbenchError

    with px.PhysXHandBridge.create(px.config_for("kinematic"), spec) as b:
        assert b.physx_options.limit_margin == px.LIMIT_MARGIN == 0.05
        mj = np.array([model.jnt_range[_jid(model, n)] for n in spec.joint_names])
        np.testing.assert_array_equal(b.joint_ranges, mj + [0.05, -0.05])
        b.command_preset("fist")
        b.step()
        q = dict(zip(spec.joint_names, b.snapshot().applied, strict=True))
        assert abs(q["index_pip"] - (1.74 - 0.05)) <= F32 * 2
        assert abs(q["index_mcp_pitch"] - (1.22 - 0.05)) <= F32 * 2
        b.reset("open")
        assert b.snapshot().applied[spec.joint("thumb_cmc_roll").index] == pytest.approx(0.05, abs=F32)
    with pytest.raises(DockbenchError, match="limit margin"):
        px.PhysXOptions(limit_margin=-0.01)


# ------------------------------------------------------------------------------ topics and CLI
def test_isaac_state_topic_name():
    from dockbench.bridges.g20_ros2 import DEFAULT_ISAAC_STATE_TOPIC, DEFAULT_STATE_TOPIC
    from dockbench.experiments import g20_bridge

    assert DEFAULT_ISAAC_STATE_TOPIC == "/sim/isaac/g20/left/joint_state"
    assert DEFAULT_STATE_TOPIC == "/sim/mujoco/g20/left/joint_state"
    p = g20_bridge.build_parser()
    assert g20_bridge._default_state_topic(p.parse_args(["--engine", "physx"])) == DEFAULT_ISAAC_STATE_TOPIC
    assert g20_bridge._default_state_topic(p.parse_args([])) == DEFAULT_STATE_TOPIC


@needs_physx
def test_physx_bridge_publishes_on_the_isaac_topic(px, spec):
    import threading

    from dockbench.bridges.g20_ros2 import DEFAULT_CMD_TOPIC, DEFAULT_ISAAC_STATE_TOPIC, run_g20_ros2
    from dockbench.bridges.ros2 import InProcessBus, InProcessTransport, JointState, wait_until

    with px.PhysXHandBridge.create(px.config_for("kinematic"), spec) as b:
        t = InProcessTransport(bus=InProcessBus())
        states = []
        t.create_subscription(DEFAULT_ISAAC_STATE_TOPIC, states.append)
        stop = threading.Event()
        runner = threading.Thread(target=lambda: run_g20_ros2(b, t, sim_state_topic=DEFAULT_ISAAC_STATE_TOPIC,
                                                              stop_event=stop))
        runner.start()
        try:
            assert wait_until(lambda: len(states) > 0, 5.0)
            t.create_publisher(DEFAULT_CMD_TOPIC).publish(JointState(position=spec.preset("half_fist")))
            from dockbench.hand.mapping import sdk_to_joint_positions

            want = sdk_to_joint_positions(spec.preset("half_fist"), spec)
            r = b.joint_ranges  # the design's 0.05 rad limit margin applies
            goal = np.clip(np.array([want[n] for n in spec.joint_names]), r[:, 0], r[:, 1])
            assert wait_until(lambda: np.max(np.abs(np.array(states[-1].position) - goal)) <= 1e-6, 5.0)
        finally:
            stop.set()
            runner.join(5.0)
            t.close()
        assert states[-1].name == spec.joint_names


@needs_physx
@pytest.mark.parametrize("extra", [[], ["--pd-drive"]])
def test_cli_track_test_on_physx(px, capsys, extra):
    from dockbench.experiments import g20_bridge

    assert g20_bridge.main(["--engine", "physx", "--track-test", *extra]) == 0
    assert capsys.readouterr().out.startswith("PASS: track test")


def test_cli_rejects_mixed_engine_options(capsys):
    from dockbench.experiments import g20_bridge

    assert g20_bridge.main(["--no-self-collision", "--track-test"]) == 1
    assert "only with --engine physx" in capsys.readouterr().err
    if not PHYSX_MISSING:
        assert g20_bridge.main(["--engine", "physx", "--colliders", "palm", "--track-test"]) == 1
        assert "MuJoCo engine only" in capsys.readouterr().err
        assert g20_bridge.main(["--engine", "physx", "--dt", "0.001", "--track-test"]) == 1
        assert "1/120" in capsys.readouterr().err
    assert g20_bridge.main(["--limit-margin", "0", "--track-test"]) == 1
    assert "only with --engine physx" in capsys.readouterr().err
