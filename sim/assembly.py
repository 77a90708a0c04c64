"""Assembly: robot MJCF + tool (or hand) + target → one MjModel (via MjSpec), and the arm's
Pinocchio model built from that same compiled model.

The tool is added as a child body of the robot's flange body at the ``attachment_site`` pose; an
F/T ``force``/``torque`` sensor pair sits on the tool's ``ft_sensor`` site. The target is a body in the
world, static or on the mount its ``mount:`` block names; the robot's base is bolted to the world or
free-floating on a spacecraft bus (``robot.base``; sim/mounts.py). Physics options come from the
scenario's ``sim:`` block.

With a free-floating base the assembly carries two Pinocchio models built from the same compiled
MjModel: ``pin_model``, the arm with its base held at the initial base pose (IK, planning), and
``pin_floating``, the same arm on a free-flyer root (the control loop's dynamics, sim/dynamics.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import mujoco
import numpy as np
import pinocchio as pin
from dockbench.sim.dynamics import pinocchio_model_from_mujoco
from dockbench.sim.errors import ModelError, ScenarioError
from dockbench.sim.interfaces import TARGETS, TOOLS, Target, Tool, make_target
from dockbench.sim.mounts import BASE_JOINT, add_momentum_sensors, mount_free_floating_base, target_joint_addresses
from dockbench.sim.robots import RobotSpec, robot_for, robot_model_spec

if TYPE_CHECKING:  # the scenario (runner layer) is only named in annotations here
    from dockbench.sim.scenario import Scenario

_INTEGRATORS = {
    "euler": mujoco.mjtIntegrator.mjINT_EULER,
    "implicit": mujoco.mjtIntegrator.mjINT_IMPLICIT,
    "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
    "rk4": mujoco.mjtIntegrator.mjINT_RK4,
}
_SOLVERS = {"newton": mujoco.mjtSolver.mjSOL_NEWTON, "cg": mujoco.mjtSolver.mjSOL_CG, "pgs": mujoco.mjtSolver.mjSOL_PGS}
_CONES = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}

FORCE_SENSOR = "ft_force"
TORQUE_SENSOR = "ft_torque"


@dataclass
class Assembly:
    """The assembled plant.

    Attributes:
        spec: the MjSpec (kept for saving the assembled XML into a run folder).
        model: compiled MjModel.
        pin_model: the arm's Pinocchio model (tool inertia lumped onto the last link).
        frame_ids: Pinocchio frame ids of the ``ee`` and ``ft_sensor`` sites.
        robot: the robot: a catalogue entry or the user's own model (``robot.model``; sim/robots.py).
        tool, target: the built end effector and target (target may be None).
        qpos_adr, dof_adr: (nv,) MuJoCo qpos / dof addresses of the arm joints.
        act_ids: (nv,) MuJoCo actuator ids of the arm motors.
        ee_site, sensor_site: MuJoCo site ids.
        pin_floating: with a free-floating base, the arm on a free-flyer root (Pinocchio q = [p, quat (x, y,
            z, w), arm], v = [base twist in base axes (v; ω), arm]); None for a fixed base.
        floating_frame_ids: the ``ee`` and ``ft_sensor`` frame ids in ``pin_floating``.
        base_qpos, base_qvel: MuJoCo qpos (7) / qvel (6) slices of the base's free joint (empty when fixed).
        target_body: MuJoCo body id of the target (-1 without one); target_qpos / target_qvel its joints'
            slices (empty for a fixed mount).
    """

    spec: mujoco.MjSpec
    model: mujoco.MjModel
    pin_model: pin.Model
    frame_ids: dict[str, int]
    robot: RobotSpec
    tool: Tool
    target: Target | None
    qpos_adr: np.ndarray
    dof_adr: np.ndarray
    act_ids: np.ndarray
    ee_site: int
    sensor_site: int
    pin_floating: pin.Model | None = None
    floating_frame_ids: dict[str, int] | None = None
    base_qpos: slice = field(default_factory=lambda: slice(0, 0))
    base_qvel: slice = field(default_factory=lambda: slice(0, 0))
    target_body: int = -1
    target_qpos: slice = field(default_factory=lambda: slice(0, 0))
    target_qvel: slice = field(default_factory=lambda: slice(0, 0))

    @property
    def floating_base(self) -> bool:
        """True when the arm's base is free-floating."""
        return self.pin_floating is not None


_ELEMENT_LISTS = ("bodies", "geoms", "sites", "meshes", "joints", "actuators")


def _element_names(spec: mujoco.MjSpec) -> set[str]:
    """Names of the spec's bodies, geoms, sites, meshes, joints and actuators."""
    return {e.name for kind in _ELEMENT_LISTS for e in getattr(spec, kind) if e.name}


def _compile_error(exc: Exception, owners: dict[str, str], file: str) -> ScenarioError:
    """MuJoCo's compiler message (``Error: size 1 must be positive in geom / Element name 'plate'``)
    translated to the scenario block whose keys built that element (``target``, ``tool``; else
    ``robot``)."""
    text = str(exc).strip()
    first = text.splitlines()[0].removeprefix("Error: ") if text else type(exc).__name__
    m = re.search(r"Element name '([^']*)'", text)
    element = m.group(1) if m else ""
    key = owners.get(element, "robot" if element else None)
    where = f" (element {element!r})" if element else ""
    hint = f"; check the sizes, masses and poses under {key}" if key else ""
    return ScenarioError(f"the assembled model does not compile: {first}{where}{hint}", file=file, key=key)


def scenario_target(scenario: Scenario) -> Target:
    """The scenario's target object (not yet built into a model): its type's class with the target block's
    config, the tool's radius and, for a target that needs it, the tool's config (:func:`make_target`)."""
    tool_radius = getattr(scenario.tool.config, "radius", 0.0)
    return make_target(TARGETS.get(scenario.target.type), scenario.target.config, tool_radius, scenario.tool.config)


def assemble(scenario: Scenario) -> Assembly:
    """Build the MjModel and the Pinocchio model for ``scenario``.

    Raises:
        ScenarioError: the geometry a block describes cannot be built or compiled (the message names
            the scenario file and the block: ``tool``, ``target``, ``robot.base`` or ``robot``).
        ModelError: a named element of the robot model is missing.
    """
    file = scenario.source_file or "<scenario>"
    robot = robot_for(scenario.robot, file)
    spec = robot_model_spec(robot)
    s = scenario.sim
    spec.option.timestep = s.timestep
    spec.option.gravity = list(s.gravity)
    spec.option.integrator = _INTEGRATORS[s.integrator]
    spec.option.cone = _CONES[s.cone]
    spec.option.impratio = s.impratio
    spec.option.noslip_iterations = s.noslip_iterations
    spec.option.iterations = s.iterations
    spec.option.ls_iterations = s.ls_iterations
    spec.option.tolerance = s.tolerance
    spec.option.solver = _SOLVERS[s.solver]
    base_cfg = scenario.robot.base
    owners: dict[str, str] = {}  # element name → the scenario block that built it
    if base_cfg.floating:
        before = _element_names(spec)
        mount_free_floating_base(spec, base_cfg)
        owners.update(dict.fromkeys(_element_names(spec) - before, "robot.base"))

    site = spec.site(robot.attachment_site)
    if site is None:
        raise ModelError(f"{robot.name}: attachment site {robot.attachment_site!r} missing")
    flange_body = site.parent
    before = _element_names(spec)
    tool_cls = TOOLS.get(scenario.tool.type)
    tool = tool_cls(scenario.tool.config)
    try:
        tool.build(spec, flange_body, np.array(site.pos), np.array(site.quat))
    except (ValueError, TypeError, OverflowError, ZeroDivisionError) as exc:
        raise ScenarioError(f"the tool cannot be built: {exc}", file=file, key="tool") from exc
    owners.update(dict.fromkeys(_element_names(spec) - before, "tool"))
    spec.add_sensor(
        name=FORCE_SENSOR,
        type=mujoco.mjtSensor.mjSENS_FORCE,
        objtype=mujoco.mjtObj.mjOBJ_SITE,
        objname=tool.sensor_site,
    )
    spec.add_sensor(
        name=TORQUE_SENSOR,
        type=mujoco.mjtSensor.mjSENS_TORQUE,
        objtype=mujoco.mjtObj.mjOBJ_SITE,
        objname=tool.sensor_site,
    )

    target = None
    if scenario.target is not None:
        before = _element_names(spec)
        try:
            target = scenario_target(scenario)
            target.build(spec)
        except ScenarioError as exc:
            raise ScenarioError(exc.detail, file=file, key=exc.key or "target") from exc
        except (ValueError, TypeError, OverflowError, ZeroDivisionError) as exc:
            raise ScenarioError(f"the target cannot be built: {exc}", file=file, key="target") from exc
        owners.update(dict.fromkeys(_element_names(spec) - before, "target"))
    mount = getattr(scenario.target.config, "mount", None) if scenario.target is not None else None
    if base_cfg.floating or (mount is not None and mount.moving):
        # momentum telemetry (sim/orbit.py): every body under the world, and the arm's first body
        names = [b.name for b in spec.worldbody.bodies]
        if base_cfg.floating:
            names.append(spec.joint(robot.joint_names[0]).parent.name)
        add_momentum_sensors(spec, names)
    try:
        model = spec.compile()
    except Exception as exc:  # noqa: BLE001 - mujoco raises ValueError with the compiler's message
        raise _compile_error(exc, owners, file) from exc

    sites = (tool.ee_site, tool.sensor_site)
    qpos_ref = tool.lumping_qpos(model)
    pin_floating, floating_frame_ids = None, None
    try:
        pin_model, frame_ids = pinocchio_model_from_mujoco(model, robot.joint_names, sites, qpos_ref=qpos_ref)
        if base_cfg.floating:
            pin_floating, floating_frame_ids = pinocchio_model_from_mujoco(
                model, robot.joint_names, sites, qpos_ref=qpos_ref, floating_base=True
            )
    except (ValueError, RuntimeError) as exc:  # Pinocchio rejects e.g. a non-physical lumped inertia
        raise ScenarioError(
            f"the arm's dynamics model cannot be built with this tool: {exc}", file=file, key="tool"
        ) from exc
    base_qpos = base_qvel = slice(0, 0)
    if base_cfg.floating:
        j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, BASE_JOINT)
        base_qpos = slice(int(model.jnt_qposadr[j]), int(model.jnt_qposadr[j]) + 7)
        base_qvel = slice(int(model.jnt_dofadr[j]), int(model.jnt_dofadr[j]) + 6)
    target_body = -1
    target_qpos = target_qvel = slice(0, 0)
    if target is not None:
        target_body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, target.body_name)
        target_qpos, target_qvel = target_joint_addresses(model, target_body)
    jids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in robot.joint_names]
    act_ids = np.array(
        [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in robot.actuator_names]
    )
    if np.any(act_ids < 0):
        raise ModelError(f"{robot.name}: actuators {robot.actuator_names} not all found")
    return Assembly(
        spec=spec, model=model, pin_model=pin_model, frame_ids=frame_ids, robot=robot, tool=tool, target=target,
        qpos_adr=np.array([model.jnt_qposadr[j] for j in jids]),
        dof_adr=np.array([model.jnt_dofadr[j] for j in jids]),
        act_ids=act_ids,
        ee_site=mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, tool.ee_site),
        sensor_site=mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, tool.sensor_site),
        pin_floating=pin_floating, floating_frame_ids=floating_frame_ids, base_qpos=base_qpos, base_qvel=base_qvel,
        target_body=target_body, target_qpos=target_qpos, target_qvel=target_qvel,
    )
