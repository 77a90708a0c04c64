"""Mounts: how the arm's base and the docking target are held — bolted to the world, free-floating (in
orbit), or on a spring-damper (a docking test bed). docs/theory/floating_base.md has the physics.

Robot base (``robot.base``, :class:`BaseConfig`)
    ``fixed`` (default): the robot's root body is welded to the world, as in its MJCF.
    ``free_floating``: the arm sits on a spacecraft bus. The robot's root body (its link 0) gets a MuJoCo
    free joint and carries a child body ``spacecraft`` with the bus's mass, centre of mass and inertia,
    so link 0 + bus form one floating rigid body whose frame B is the arm's base frame. ``pose`` is the
    initial pose of B in the world (default: the world origin, where the fixed base sits, so the same
    target poses work for both mounts); ``com`` and ``inertia`` are given in B. The bus box drawn at
    ``com`` is visual only (no contacts).

Target (``target.mount``, :class:`MountConfig`)
    ``fixed`` (default): a static body, as before.
    ``floating``: a MuJoCo free joint; ``mass``, ``com`` and ``inertia`` (target frame) replace the
    drogue's massless geometry; ``twist`` is the initial velocity [v; ω] (world axes, v of the centre of
    mass), e.g. a slow tumble.
    ``compliant``: three slide joints along the target-frame axes and a ball joint about the centre of
    mass, each with a spring and a damper to the world (``stiffness`` = [k_lin N/m, k_rot N·m/rad],
    ``damping`` = [d_lin N·s/m, d_rot N·m·s/rad]); rest pose = the configured pose.
    A moving target (floating or compliant) is tracked by the reference (``track``, default true: the
    planner's plan, made in the target's initial frame, rides on the target's current pose — perfect
    relative navigation, see :class:`TargetTracking`).

Inertia keys take either the three principal moments [Ixx, Iyy, Izz] (axes of the mount's frame) or
the six components [Ixx, Iyy, Izz, Ixy, Ixz, Iyz] (MuJoCo's ``fullinertia`` order) about the centre of
mass, in kg·m²; they must form a physical inertia (positive definite, each principal moment at most the
sum of the other two).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import mujoco
import numpy as np
from dockbench.sim.config import param
from dockbench.sim.errors import ScenarioError
from dockbench.sim.poses import PoseConfig

#: name of the free joint a free-floating base gets, and of the bus body it carries
BASE_JOINT = "base_free"
BUS_BODY = "spacecraft"
#: name of the target's free joint (floating) / joint prefix (compliant)
TARGET_JOINT = "target_free"


def inertia_matrix(values: tuple[float, ...], key: str = "inertia") -> np.ndarray:
    """(3, 3) inertia tensor [kg·m²] from [Ixx, Iyy, Izz] or [Ixx, Iyy, Izz, Ixy, Ixz, Iyz].

    Raises:
        ScenarioError: wrong length, not positive definite, or a principal moment larger than the sum of
            the other two (no rigid body has that inertia).
    """
    v = [float(x) for x in values]
    if len(v) == 3:
        I = np.diag(v)
    elif len(v) == 6:
        ixx, iyy, izz, ixy, ixz, iyz = v
        I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    else:
        raise ScenarioError(
            "expected 3 principal moments [Ixx, Iyy, Izz] or 6 components [Ixx, Iyy, Izz, Ixy, Ixz, Iyz], "
            f"got {len(v)}",
            key=key,
        )
    mu = np.linalg.eigvalsh(I)
    if mu[0] <= 0.0:
        raise ScenarioError(f"must be positive definite (principal moments {mu.tolist()} kg·m²)", key=key)
    if mu[2] > mu[0] + mu[1] + 1e-12 * mu[2]:
        raise ScenarioError(
            f"principal moments {mu.tolist()} kg·m² violate the triangle inequality (I3 ≤ I1 + I2): no rigid body "
            "has this inertia",
            key=key,
        )
    return I


def _box_inertia_doc() -> str:
    return "uniform box of edges a, b, c: m/12·[b²+c², a²+c², a²+b²]"


@dataclass(frozen=True)
class BasePoseConfig(PoseConfig):
    position: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0), unit="m", length=3, ge=-100.0, le=100.0, doc="base origin in world"
    )
    rpy_deg: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0), unit="deg", length=3, ge=-360.0, le=360.0,
        doc="fixed-axis roll/pitch/yaw of the base (R = Rz Ry Rx)",
    )


@dataclass(frozen=True)
class BaseConfig:
    type: Literal["fixed", "free_floating"] = param(
        "fixed",
        doc="fixed: bolted to the world; free_floating: the arm on a spacecraft bus with a free joint (in orbit)",
    )
    mass: float | None = param(
        None, unit="kg", gt=0.0, le=1e7, doc="bus mass (free_floating; the arm's links come on top)"
    )
    inertia: tuple[float, ...] | None = param(
        None, unit="kg·m²", ge=-1e9, le=1e9,
        doc="bus inertia about its centre of mass, base axes: [Ixx, Iyy, Izz] or [Ixx, Iyy, Izz, Ixy, Ixz, Iyz] "
        f"(free_floating; e.g. a {_box_inertia_doc()})",
    )
    com: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0), unit="m", length=3, ge=-10.0, le=10.0,
        doc="bus centre of mass in the arm's base frame (free_floating)",
    )
    size: tuple[float, float, float] = param(
        (1.0, 1.0, 1.0), unit="m", length=3, gt=0.0, le=100.0, doc="edges of the bus box drawn at com (visual only)"
    )
    pose: BasePoseConfig = field(default_factory=BasePoseConfig)

    def validate(self) -> None:
        if self.type == "fixed":
            given = [k for k in ("mass", "inertia") if getattr(self, k) is not None]
            if self.com != (0.0, 0.0, 0.0):
                given.append("com")
            if self.pose != BasePoseConfig():
                given.append("pose")
            if given:
                raise ScenarioError(
                    f"keys {', '.join(given)} apply only to type free_floating (a fixed base is the robot's MJCF, "
                    "bolted to the world); allowed types: fixed, free_floating",
                )
            return
        for k in ("mass", "inertia"):
            if getattr(self, k) is None:
                raise ScenarioError("required for type free_floating", key=k)
        inertia_matrix(self.inertia)

    @property
    def floating(self) -> bool:
        return self.type == "free_floating"


@dataclass(frozen=True)
class MountConfig:
    type: Literal["fixed", "floating", "compliant"] = param(
        "fixed",
        doc="fixed: static; floating: a free joint (in orbit); compliant: spring-damper to the world (a test bed)",
    )
    mass: float | None = param(None, unit="kg", gt=0.0, le=1e7, doc="target mass (floating, compliant)")
    inertia: tuple[float, ...] | None = param(
        None, unit="kg·m²", ge=-1e9, le=1e9,
        doc="inertia about the centre of mass, target axes: [Ixx, Iyy, Izz] or [Ixx, Iyy, Izz, Ixy, Ixz, Iyz] "
        "(floating, compliant)",
    )
    com: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0), unit="m", length=3, ge=-10.0, le=10.0,
        doc="centre of mass in the target frame (floating, compliant)",
    )
    size: tuple[float, float, float] | None = param(
        None, unit="m", length=3, gt=0.0, le=100.0, doc="edges of a body box drawn at com (visual only); null = none"
    )
    twist: tuple[float, float, float, float, float, float] = param(
        (0.0, 0.0, 0.0, 0.0, 0.0, 0.0), unit="m/s | rad/s", length=6, ge=-100.0, le=100.0,
        doc="initial [v; ω] of the target, world axes, v of its centre of mass (floating, compliant)",
    )
    stiffness: tuple[float, float] | None = param(
        None, unit="N/m | N·m/rad", length=2, ge=0.0, le=1e9,
        doc="[k_lin, k_rot] of the springs to the world (compliant)",
    )
    damping: tuple[float, float] = param(
        (0.0, 0.0), unit="N·s/m | N·m·s/rad", length=2, ge=0.0, le=1e9, doc="[d_lin, d_rot] of the dampers (compliant)"
    )
    track: bool = param(
        True,
        doc="moving targets: the reference rides on the target's current pose (the plan is made in its initial "
        "frame; perfect relative navigation); false = the plan stays fixed in the world",
    )

    def validate(self) -> None:
        if self.type == "fixed":
            given = [k for k in ("mass", "inertia", "size", "stiffness") if getattr(self, k) is not None]
            given += [k for k, zero in (("com", (0.0,) * 3), ("twist", (0.0,) * 6), ("damping", (0.0,) * 2))
                      if getattr(self, k) != zero]
            if given:
                raise ScenarioError(
                    f"keys {', '.join(given)} apply only to a moving target; allowed types: fixed, floating, compliant"
                )
            return
        for k in ("mass", "inertia"):
            if getattr(self, k) is None:
                raise ScenarioError(f"required for type {self.type}", key=k)
        inertia_matrix(self.inertia)
        if self.type == "compliant":
            if self.stiffness is None or min(self.stiffness) <= 0.0:
                raise ScenarioError("type compliant needs stiffness [k_lin, k_rot], both > 0", key="stiffness")
        elif self.stiffness is not None or self.damping != (0.0, 0.0):
            raise ScenarioError("stiffness and damping apply only to type compliant (a floating target has no spring)")

    @property
    def moving(self) -> bool:
        return self.type != "fixed"


# ------------------------------------------------------------------------------------------ building
def _set_inertial(body: Any, mass: float, com: tuple[float, float, float], inertia: tuple[float, ...]) -> None:
    I = inertia_matrix(inertia)
    body.explicitinertial = True
    body.mass = float(mass)
    body.ipos = [float(c) for c in com]
    body.fullinertia = [I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]]


def _visual_box(body: Any, name: str, center: tuple[float, float, float], size: tuple[float, float, float],
                rgba: list[float]) -> None:
    body.add_geom(
        name=name, type=mujoco.mjtGeom.mjGEOM_BOX, size=[s / 2.0 for s in size], pos=list(center),
        contype=0, conaffinity=0, group=2, mass=0.0, density=0.0, rgba=rgba,
    )


def mount_free_floating_base(spec: mujoco.MjSpec, base: BaseConfig) -> str:
    """Turn the robot's root body into a free-floating base carrying the bus (module docstring).
    Returns the root body's name.

    Raises:
        ScenarioError: the robot MJCF has not exactly one root body, or it already has a joint.
    """
    roots = list(spec.worldbody.bodies)
    if len(roots) != 1:
        raise ScenarioError(
            f"a free-floating base needs one robot root body in the world, the model has {len(roots)}", key="robot.base"
        )
    root = roots[0]
    if list(root.joints):
        raise ScenarioError(f"the robot's root body {root.name!r} already has a joint", key="robot.base")
    T = base.pose.matrix()
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(T[:3, :3]).ravel())
    root.pos = list(T[:3, 3])
    root.quat = list(quat)
    root.add_freejoint(name=BASE_JOINT)
    bus = root.add_body(name=BUS_BODY, pos=[0.0, 0.0, 0.0])
    _set_inertial(bus, base.mass, base.com, base.inertia)
    _visual_box(bus, "spacecraft_bus", base.com, base.size, [0.55, 0.6, 0.7, 0.35])
    return root.name


def com_velocity_to_qvel(
    mount: MountConfig, R_world_target: np.ndarray
) -> np.ndarray:
    """MuJoCo free-joint qvel (6,) = [ṗ of the body origin (world); ω (body axes)] of the mount's initial
    twist [v_com; ω] (world axes): ṗ = v_com − ω × (R c), c the centre of mass in the target frame."""
    v = np.array(mount.twist[:3], dtype=float)
    w = np.array(mount.twist[3:], dtype=float)
    r = R_world_target @ np.array(mount.com, dtype=float)
    out = np.zeros(6)
    out[:3] = v - np.cross(w, r)
    out[3:] = R_world_target.T @ w
    return out


def mount_target(body: Any, mount: MountConfig) -> None:
    """Give the target body (already placed at its pose) the joints and inertia of ``mount``; a fixed
    mount leaves it static. The initial twist is applied by :func:`initial_target_state` (qvel is state,
    not model)."""
    if not mount.moving:
        return
    _set_inertial(body, mount.mass, mount.com, mount.inertia)
    if mount.size is not None:
        _visual_box(body, "target_bus", mount.com, mount.size, [0.7, 0.62, 0.45, 0.35])
    if mount.type == "floating":
        body.add_freejoint(name=TARGET_JOINT)
        return
    k_lin, k_rot = mount.stiffness
    d_lin, d_rot = mount.damping
    for i, axis in enumerate(("x", "y", "z")):
        ax = [0.0, 0.0, 0.0]
        ax[i] = 1.0
        body.add_joint(
            name=f"target_slide_{axis}", type=mujoco.mjtJoint.mjJNT_SLIDE, axis=ax, stiffness=[k_lin, 0.0, 0.0],
            damping=d_lin, springref=0.0,
        )
    body.add_joint(
        name="target_ball", type=mujoco.mjtJoint.mjJNT_BALL, pos=list(mount.com), stiffness=[k_rot, 0.0, 0.0],
        damping=d_rot,
    )


def target_joint_addresses(m: mujoco.MjModel, body_id: int) -> tuple[slice, slice]:
    """(qpos slice, qvel slice) of the target body's own joints (empty slices for a static target)."""
    n = int(m.body_jntnum[body_id])
    if n == 0:
        return slice(0, 0), slice(0, 0)
    j0 = int(m.body_jntadr[body_id])
    q0 = int(m.jnt_qposadr[j0])
    v0 = int(m.jnt_dofadr[j0])
    nq = sum(int({0: 7, 1: 4, 2: 1, 3: 1}[int(m.jnt_type[j])]) for j in range(j0, j0 + n))
    return slice(q0, q0 + nq), slice(v0, v0 + int(m.body_dofnum[body_id]))


def initial_target_state(m: mujoco.MjModel, d: mujoco.MjData, body_id: int, mount: MountConfig,
                         R_world_target: np.ndarray) -> None:
    """Write the mount's initial twist into ``d.qvel`` (floating: free-joint qvel, :func:`com_velocity_to_qvel`;
    compliant: the slides' rates = the centre of mass velocity in target axes, the ball's ω in body axes)."""
    if not mount.moving or not any(mount.twist):
        return
    _, vs = target_joint_addresses(m, body_id)
    qv = com_velocity_to_qvel(mount, R_world_target)
    if mount.type == "floating":
        d.qvel[vs] = qv
    else:  # the ball turns about the centre of mass, so the slides carry its velocity (target axes)
        d.qvel[vs.start : vs.start + 3] = R_world_target.T @ np.array(mount.twist[:3], dtype=float)
        d.qvel[vs.start + 3 : vs.stop] = qv[3:]


def add_momentum_sensors(spec: mujoco.MjSpec, body_names: list[str], prefix: str = "orbit_") -> None:
    """Subtree sensors (linear velocity, angular momentum about the subtree's centre of mass, centre of mass)
    of each named body, in this order and contiguous in ``sensordata`` (9 values per body): the inputs of
    the momentum telemetry (sim/orbit.py). MuJoCo evaluates them once per forward pass."""
    kinds = (
        ("P_", mujoco.mjtSensor.mjSENS_SUBTREELINVEL),
        ("L_", mujoco.mjtSensor.mjSENS_SUBTREEANGMOM),
        ("C_", mujoco.mjtSensor.mjSENS_SUBTREECOM),
    )
    for name in body_names:
        for tag, kind in kinds:
            spec.add_sensor(name=f"{prefix}{tag}{name}", type=kind, objtype=mujoco.mjtObj.mjOBJ_BODY, objname=name)
