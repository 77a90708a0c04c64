"""The G20 hand as a USD PhysX articulation, authored from the project's own MuJoCo model.

One source of kinematics: the compiled ``assets/hands/g20_left.xml`` (:func:`hand.spec.load_model`)
gives every body frame, joint axis and range, link mass / CoM / principal inertia and the collision
capsules and box; this module writes them as a USD stage that PhysX (``ovphysx``) simulates. Nothing
is typed twice, so the two engines cannot drift apart (tests/test_hand_physx.py checks the round trip).

Layout (Z up, metres, kilograms, USD angles in degrees as the UsdPhysics schema requires)::

    /World                          Xform
    /World/physicsScene             PhysicsScene (+ PhysxSceneAPI: 120 steps/s, CPU broadphase)
    /World/g20_left                 Xform at MOUNT_POS (identity rotation): the hand frame
    /World/g20_left/<body>          one Xform per MuJoCo body (flat, URDF-importer style), RigidBodyAPI,
                                    MassAPI, PhysxRigidBodyAPI; its rest pose (all joints 0) in the hand
                                    frame as a double translate + double quaternion
    /World/g20_left/<body>/<geom>   the MuJoCo collision geoms (``*_col``): Capsule (axis Z) / Cube
    /World/g20_left/joints/root_fixed  FixedJoint world -> g20_root, ArticulationRootAPI (fixed base)
    /World/g20_left/joints/<joint>  RevoluteJoint parent -> child, PhysicsDriveAPI:angular,
                                    PhysxJointAxisAPI:angular, PhysxMimicJointAPI:rotX on mimic joints

Joint frames: MuJoCo's joints sit at the child body origin (``jnt_pos`` = 0, checked) with an axis in
the child frame. The USD joint frame is the child origin rotated by ``R_a`` so that the joint's X axis is
the MuJoCo axis: axis ±X -> ``axis = X`` with ``R_a`` = identity or 180° about Z (exact in float),
axis Y -> ``axis = Y`` with ``R_a`` = identity. Then ``localRot1 = R_a``, ``localPos1 = 0``,
``localPos0`` / ``localRot0`` = the child's rest pose in the parent (MuJoCo ``body_pos`` / ``body_quat``)
composed with ``R_a``. The UsdPhysics schema stores joint frames as float32 (``point3f``/``quatf``);
the body rest poses are double, and :func:`forward_kinematics` works from those.

PhysX settings (the design's Isaac bridge, docs/hand.md): articulation solver 32 position / 4 velocity
iterations, sleep threshold 0.005, self-collision on (switchable); per link max linear velocity 3 m/s,
max angular velocity 360 deg/s, linear/angular damping 6.0, gravity per ``hand_gravity``; per joint
max velocity 171.887 deg/s (3 rad/s), armature 0.05, drive maxForce >= 8; colliders contactOffset
0.001 m, restOffset -0.0005 m, and only the palm and the five distal links collide (selective).

Requires ``usd-core`` (``pip install 'dockbench[physx]'``); importing this module without it raises
:class:`ModuleNotFoundError` naming the extra.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
from dockbench.hand.spec import HandSpec, load_model, load_spec
from dockbench.sim.errors import ModelError

try:
    from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics
except ModuleNotFoundError as exc:  # pragma: no cover - exercised only without the extra
    raise ModuleNotFoundError(
        "hand.usd needs OpenUSD (usd-core): pip install 'dockbench[physx]'"
    ) from exc

MOUNT_POS = (0.0, 0.45, 0.70)
"""World position of the hand frame (g20_root) [m], identity rotation (the design's mount)."""

HAND_PATH = "/World/g20_left"
"""USD path of the hand's Xform (the hand frame)."""
JOINTS_PATH = HAND_PATH + "/joints"
"""USD scope holding the joints."""

SOLVER_POSITION_ITERATIONS = 32
SOLVER_VELOCITY_ITERATIONS = 4
SLEEP_THRESHOLD = 0.005
"""Articulation sleep threshold (PhysX mass-normalised kinetic energy) [m²/s²]."""
MAX_JOINT_VELOCITY_DEG_S = 171.887
"""Joint max velocity [deg/s] (= 3.0 rad/s)."""
JOINT_ARMATURE = 0.05
"""Joint armature [kg·m²]."""
LINK_DAMPING = 6.0
"""Per-link linear and angular damping [1/s]."""
MAX_LINEAR_VELOCITY = 3.0
"""Per-link max linear velocity [m/s]."""
MAX_ANGULAR_VELOCITY_DEG_S = 360.0
"""Per-link max angular velocity [deg/s]."""
CONTACT_OFFSET = 0.001
"""Collider contact offset [m]."""
REST_OFFSET = -0.0005
"""Collider rest offset [m] (negative: shapes rest 0.5 mm inside each other)."""
MIN_DRIVE_MAX_FORCE = 8.0
"""Angular drives with a max force below this get this [N·m]."""
PHYSICS_HZ = 120.0
"""Physics rate of the design [Hz] (dt = 1/120 s)."""

SELECTIVE_COLLIDERS = ("palm_col", "thumb_distal_col", "index_distal_col", "middle_distal_col",
                       "ring_distal_col", "pinky_distal_col")
"""The collision geoms that collide in PhysX (palm + the five distal links); the other ``*_col`` geoms
are authored with ``physics:collisionEnabled = false``."""


@dataclasses.dataclass(frozen=True)
class UsdHandOptions:
    """What the authored stage varies on.

    Attributes:
        self_collision: PhysxArticulationAPI ``enabledSelfCollisions``.
        hand_gravity: gravity acts on the hand's links (else ``physxRigidBody:disableGravity``).
        mount_pos: world position of the hand frame [m].
        drive_stiffness, drive_damping, drive_max_force: per joint (spec table order) drive gains as
            authored [N·m/rad, N·m·s/rad, N·m] (converted to the schema's per-degree units); the
            backend rewrites them at run time through the tensor API.
    """

    self_collision: bool = True
    hand_gravity: bool = False
    mount_pos: tuple[float, float, float] = MOUNT_POS
    drive_stiffness: tuple[float, ...] | None = None
    drive_damping: tuple[float, ...] | None = None
    drive_max_force: tuple[float, ...] | None = None


def _quat(q) -> Gf.Quatd:
    """MuJoCo (w, x, y, z) -> Gf.Quatd."""
    return Gf.Quatd(float(q[0]), Gf.Vec3d(float(q[1]), float(q[2]), float(q[3])))


def _quatf(q: Gf.Quatd) -> Gf.Quatf:
    return Gf.Quatf(q.GetReal(), Gf.Vec3f(q.GetImaginary()))


def axis_frame(axis: np.ndarray) -> tuple[str, Gf.Quatd]:
    """USD axis token and the rotation ``R_a`` (child frame <- joint frame) for a MuJoCo hinge axis.

    Raises:
        ModelError: an axis that is not ±X, ±Y or ±Z (the G20 has none).
    """
    a = np.asarray(axis, dtype=float)
    k = int(np.argmax(np.abs(a)))
    if not np.allclose(np.abs(a), np.eye(3)[k], atol=0.0):
        raise ModelError(f"g20 USD: joint axis {a.tolist()} is not a coordinate axis")
    token = "XYZ"[k]
    if a[k] > 0:
        return token, Gf.Quatd(1.0)
    # flip: 180° about an axis orthogonal to the joint axis (exact in float)
    other = Gf.Vec3d(0, 0, 1) if k != 2 else Gf.Vec3d(1, 0, 0)
    return token, Gf.Quatd(0.0, other)


def build_stage(
    options: UsdHandOptions | None = None, spec: HandSpec | None = None, model=None
) -> Usd.Stage:
    """Author the hand articulation in a new in-memory stage (see the module docstring).

    Args:
        options: :class:`UsdHandOptions` (defaults: the design's settings, no hand gravity).
        spec: hand spec (joint table, mimic ratios); default the packaged G20 LEFT spec.
        model: compiled MuJoCo model of the hand; default :func:`hand.spec.load_model` of ``spec``.

    Raises:
        ModelError: a joint with ``jnt_pos`` ≠ 0 or a non-coordinate axis, a spec joint missing.
    """
    import mujoco

    opts = options if options is not None else UsdHandOptions()
    spec = spec if spec is not None else load_spec()
    m = model if model is not None else load_model(spec)
    stage = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    world = UsdGeom.Xform.Define(stage, "/World")
    stage.SetDefaultPrim(world.GetPrim())

    scene = UsdPhysics.Scene.Define(stage, "/World/physicsScene")
    scene.CreateGravityDirectionAttr(Gf.Vec3f(0, 0, -1))
    scene.CreateGravityMagnitudeAttr(9.81)
    sp = scene.GetPrim()
    sp.AddAppliedSchema("PhysxSceneAPI")
    sp.CreateAttribute("physxScene:timeStepsPerSecond", Sdf.ValueTypeNames.UInt).Set(int(PHYSICS_HZ))
    sp.CreateAttribute("physxScene:enableGPUDynamics", Sdf.ValueTypeNames.Bool).Set(False)
    sp.CreateAttribute("physxScene:broadphaseType", Sdf.ValueTypeNames.Token).Set("MBP")
    sp.CreateAttribute("physxScene:solverType", Sdf.ValueTypeNames.Token).Set("TGS")

    hand = UsdGeom.Xform.Define(stage, HAND_PATH)
    hand.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*opts.mount_pos))
    UsdGeom.Scope.Define(stage, JOINTS_PATH)

    # rest pose of every body in the hand frame (all joints 0), double precision
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    root_id = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "g20_root")
    p_root = d.xpos[root_id].copy()
    r_root = d.xmat[root_id].reshape(3, 3).copy()

    body_path: dict[int, str] = {}
    for b in range(1, m.nbody):
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b)
        path = f"{HAND_PATH}/{name}"
        body_path[b] = path
        x = UsdGeom.Xform.Define(stage, path)
        pos = r_root.T @ (d.xpos[b] - p_root)
        rot = r_root.T @ d.xmat[b].reshape(3, 3)
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, rot.ravel())
        x.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*pos.tolist()))
        x.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(_quat(quat))
        prim = x.GetPrim()
        UsdPhysics.RigidBodyAPI.Apply(prim)
        mass = UsdPhysics.MassAPI.Apply(prim)
        mass.CreateMassAttr(float(m.body_mass[b]))
        mass.CreateCenterOfMassAttr(Gf.Vec3f(*m.body_ipos[b].tolist()))
        mass.CreateDiagonalInertiaAttr(Gf.Vec3f(*m.body_inertia[b].tolist()))
        mass.CreatePrincipalAxesAttr(_quatf(_quat(m.body_iquat[b])))
        prim.AddAppliedSchema("PhysxRigidBodyAPI")
        for attr, value in (("linearDamping", LINK_DAMPING), ("angularDamping", LINK_DAMPING),
                            ("maxLinearVelocity", MAX_LINEAR_VELOCITY),
                            ("maxAngularVelocity", MAX_ANGULAR_VELOCITY_DEG_S)):
            prim.CreateAttribute(f"physxRigidBody:{attr}", Sdf.ValueTypeNames.Float).Set(value)
        prim.CreateAttribute("physxRigidBody:disableGravity", Sdf.ValueTypeNames.Bool).Set(not opts.hand_gravity)

    # collision geoms (MuJoCo class g20_collision: names *_col)
    for g in range(m.ngeom):
        gname = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or ""
        if not gname.endswith("_col"):
            continue
        parent = body_path[int(m.geom_bodyid[g])]
        path = f"{parent}/{gname}"
        size = m.geom_size[g]
        if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_CAPSULE:
            geom = UsdGeom.Capsule.Define(stage, path)
            geom.CreateAxisAttr(UsdGeom.Tokens.z)
            geom.CreateRadiusAttr(float(size[0]))
            geom.CreateHeightAttr(float(2.0 * size[1]))
            scale = None
        elif m.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX:
            geom = UsdGeom.Cube.Define(stage, path)
            geom.CreateSizeAttr(1.0)
            scale = Gf.Vec3d(*(2.0 * size).tolist())
        else:
            raise ModelError(f"g20 USD: collision geom {gname!r} has an unsupported type {int(m.geom_type[g])}")
        geom.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*m.geom_pos[g].tolist()))
        geom.AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(_quat(m.geom_quat[g]))
        if scale is not None:
            geom.AddScaleOp(UsdGeom.XformOp.PrecisionDouble).Set(scale)
        prim = geom.GetPrim()
        col = UsdPhysics.CollisionAPI.Apply(prim)
        col.CreateCollisionEnabledAttr(gname in SELECTIVE_COLLIDERS)
        prim.AddAppliedSchema("PhysxCollisionAPI")
        prim.CreateAttribute("physxCollision:contactOffset", Sdf.ValueTypeNames.Float).Set(CONTACT_OFFSET)
        prim.CreateAttribute("physxCollision:restOffset", Sdf.ValueTypeNames.Float).Set(REST_OFFSET)

    # fixed base: world -> g20_root, marked as the articulation root
    fixed = UsdPhysics.FixedJoint.Define(stage, f"{JOINTS_PATH}/root_fixed")
    fixed.CreateBody1Rel().SetTargets([Sdf.Path(body_path[root_id])])
    fixed.CreateLocalPos0Attr(Gf.Vec3f(*opts.mount_pos))
    fixed.CreateLocalRot0Attr(Gf.Quatf(1.0))
    fixed.CreateLocalPos1Attr(Gf.Vec3f(0.0))
    fixed.CreateLocalRot1Attr(Gf.Quatf(1.0))
    fp = fixed.GetPrim()
    UsdPhysics.ArticulationRootAPI.Apply(fp)
    fp.AddAppliedSchema("PhysxArticulationAPI")
    fp.CreateAttribute("physxArticulation:solverPositionIterationCount", Sdf.ValueTypeNames.Int).Set(
        SOLVER_POSITION_ITERATIONS)
    fp.CreateAttribute("physxArticulation:solverVelocityIterationCount", Sdf.ValueTypeNames.Int).Set(
        SOLVER_VELOCITY_ITERATIONS)
    fp.CreateAttribute("physxArticulation:sleepThreshold", Sdf.ValueTypeNames.Float).Set(SLEEP_THRESHOLD)
    fp.CreateAttribute("physxArticulation:enabledSelfCollisions", Sdf.ValueTypeNames.Bool).Set(opts.self_collision)

    n = len(spec.joints)
    kp = opts.drive_stiffness or (0.0,) * n
    kd = opts.drive_damping or (0.0,) * n
    fmax = opts.drive_max_force or (MIN_DRIVE_MAX_FORCE,) * n
    for j in spec.joints:
        jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j.name)
        if jid < 0:
            raise ModelError(f"g20 USD: spec joint {j.name!r} is not in the MuJoCo model")
        if np.any(m.jnt_pos[jid] != 0.0):
            raise ModelError(f"g20 USD: joint {j.name!r} has jnt_pos {m.jnt_pos[jid].tolist()} (expected 0)")
        child = int(m.jnt_bodyid[jid])
        parent = int(m.body_parentid[child])
        token, r_a = axis_frame(m.jnt_axis[jid])
        q_child = _quat(m.body_quat[child])
        rev = UsdPhysics.RevoluteJoint.Define(stage, f"{JOINTS_PATH}/{j.name}")
        rev.CreateAxisAttr(token)
        rev.CreateBody0Rel().SetTargets([Sdf.Path(body_path[parent])])
        rev.CreateBody1Rel().SetTargets([Sdf.Path(body_path[child])])
        rev.CreateLocalPos0Attr(Gf.Vec3f(*m.body_pos[child].tolist()))
        rev.CreateLocalRot0Attr(_quatf(q_child * r_a))
        rev.CreateLocalPos1Attr(Gf.Vec3f(0.0))
        rev.CreateLocalRot1Attr(_quatf(r_a))
        lo, hi = m.jnt_range[jid]
        rev.CreateLowerLimitAttr(math.degrees(lo))
        rev.CreateUpperLimitAttr(math.degrees(hi))
        prim = rev.GetPrim()
        drive = UsdPhysics.DriveAPI.Apply(prim, "angular")
        drive.CreateTypeAttr("force")
        # UsdPhysics angular drive gains are per degree
        drive.CreateStiffnessAttr(float(kp[j.index]) * math.pi / 180.0)
        drive.CreateDampingAttr(float(kd[j.index]) * math.pi / 180.0)
        drive.CreateMaxForceAttr(max(float(fmax[j.index]), MIN_DRIVE_MAX_FORCE))
        drive.CreateTargetPositionAttr(0.0)
        prim.AddAppliedSchema("PhysxJointAxisAPI:angular")
        prim.CreateAttribute("physxJointAxis:angular:armature", Sdf.ValueTypeNames.Float).Set(JOINT_ARMATURE)
        prim.CreateAttribute("physxJointAxis:angular:maxJointVelocity", Sdf.ValueTypeNames.Float).Set(
            MAX_JOINT_VELOCITY_DEG_S)
        if j.mimic_of is not None:
            # PhysX mimic: q_this + gearing·q_ref + offset = 0  ->  gearing = -ratio
            prim.AddAppliedSchema("PhysxMimicJointAPI:rotX")
            prim.CreateRelationship("physxMimicJoint:rotX:referenceJoint").SetTargets(
                [Sdf.Path(f"{JOINTS_PATH}/{j.mimic_of}")])
            prim.CreateAttribute("physxMimicJoint:rotX:referenceJointAxis", Sdf.ValueTypeNames.Token).Set("rotX")
            prim.CreateAttribute("physxMimicJoint:rotX:gearing", Sdf.ValueTypeNames.Float).Set(-j.ratio)
            prim.CreateAttribute("physxMimicJoint:rotX:offset", Sdf.ValueTypeNames.Float).Set(0.0)
    return stage


def write_usda(path: str | Path, options: UsdHandOptions | None = None, spec: HandSpec | None = None) -> Path:
    """Author the stage and write it as a ``.usda`` text file; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    stage = build_stage(options, spec)  # keep the stage alive: its root layer is a weak pointer
    stage.GetRootLayer().Export(str(path))
    return path


# ---------------------------------------------------------------------- reading the stage back
@dataclasses.dataclass(frozen=True)
class UsdJoint:
    """One revolute joint as read back from a stage (double where the stage is double).

    Attributes:
        name: joint name. parent, child: body names. axis_child: unit axis in the child frame.
        lower, upper: limits [rad]. mimic_of / gearing: PhysxMimicJointAPI target joint and gearing.
    """

    name: str
    parent: str
    child: str
    axis_child: np.ndarray
    lower: float
    upper: float
    mimic_of: str | None
    gearing: float


def quat_matrix(q) -> np.ndarray:
    """3×3 rotation of a unit Gf quaternion, ``I + 2w[v]× + 2[v]×²`` (exact for the 0/±1 quaternions)."""
    w, v = float(q.GetReal()), np.array(q.GetImaginary(), dtype=float)
    k = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
    return np.eye(3) + 2.0 * w * k + 2.0 * (k @ k)


def _matrix(prim, cache: UsdGeom.XformCache) -> np.ndarray:
    """4×4 world transform of ``prim`` in column-vector convention (USD's row-vector matrix transposed)."""
    return np.array(cache.GetLocalToWorldTransform(prim), dtype=float).T


def read_joints(stage: Usd.Stage) -> list[UsdJoint]:
    """The revolute joints of the hand in authoring (spec table) order."""
    out = []
    for prim in stage.GetPrimAtPath(JOINTS_PATH).GetChildren():
        if not prim.IsA(UsdPhysics.RevoluteJoint):
            continue
        rev = UsdPhysics.RevoluteJoint(prim)
        token = rev.GetAxisAttr().Get()
        rot1 = rev.GetLocalRot1Attr().Get()
        r1 = quat_matrix(rot1)  # child <- joint frame
        axis = r1 @ np.eye(3)["XYZ".index(token)]
        mimic, gearing = None, 0.0
        rel = prim.GetRelationship("physxMimicJoint:rotX:referenceJoint")
        if rel and rel.GetTargets():
            mimic = rel.GetTargets()[0].name
            gearing = float(prim.GetAttribute("physxMimicJoint:rotX:gearing").Get())
        out.append(UsdJoint(
            name=prim.GetName(),
            parent=rev.GetBody0Rel().GetTargets()[0].name,
            child=rev.GetBody1Rel().GetTargets()[0].name,
            axis_child=axis,
            lower=math.radians(rev.GetLowerLimitAttr().Get()),
            upper=math.radians(rev.GetUpperLimitAttr().Get()),
            mimic_of=mimic,
            gearing=gearing,
        ))
    return out


def rest_transforms(stage: Usd.Stage) -> dict[str, np.ndarray]:
    """World 4×4 rest transform (all joints 0) of every rigid body, from the double xformOps."""
    cache = UsdGeom.XformCache()
    out = {}
    for prim in stage.GetPrimAtPath(HAND_PATH).GetChildren():
        if prim.HasAPI(UsdPhysics.RigidBodyAPI):
            out[prim.GetName()] = _matrix(prim, cache)
    return out


def _rot(axis: np.ndarray, angle: float) -> np.ndarray:
    a = axis / np.linalg.norm(axis)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1.0 - math.cos(angle)) * (k @ k)


def forward_kinematics(stage: Usd.Stage, q: dict[str, float]) -> dict[str, np.ndarray]:
    """World 4×4 pose of every body at joint angles ``q`` [rad] (missing joints 0), from the stage.

    The kinematics a USD articulation states: a child's rest pose relative to its parent (the double
    xformOps) followed by the rotation about the joint axis in the child frame,
    ``T_child(q) = T_parent(q) · T_parent_rest⁻¹ · T_child_rest · Rot(axis_child, q_j)``.
    """
    rest = rest_transforms(stage)
    joints = {j.child: j for j in read_joints(stage)}
    out: dict[str, np.ndarray] = {}

    def pose(body: str) -> np.ndarray:
        if body in out:
            return out[body]
        j = joints.get(body)
        if j is None:  # the root: fixed to the world
            out[body] = rest[body]
            return out[body]
        t_rel = np.linalg.solve(rest[j.parent], rest[body])
        r = np.eye(4)
        r[:3, :3] = _rot(j.axis_child, q.get(j.name, 0.0))
        out[body] = pose(j.parent) @ t_rel @ r
        return out[body]

    for b in rest:
        pose(b)
    return out
