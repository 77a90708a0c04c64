"""Build, simulate, score and write a run: ``run(scenario) → RunResult`` (docs/architecture.md "One control
cycle"). :func:`build` makes the :class:`Setup` (plant, initial state, planner, law, F/T pipeline) without
changing what it is given; :func:`simulate` runs the control cycle of :mod:`sim.cycle` (its stages composed
once per run) and returns an :class:`~sim.cycle.Outcome`.

The run folder is one transaction (:func:`run`, telemetry.run.RunFolder): reserved as
``<stamp>.partial`` before the first step, renamed into place with its manifest when complete. It is
written also when the state goes NaN/Inf (status ``diverged``), on Ctrl-C or SIGTERM (``interrupted``,
sim.interrupts), on an exception in the loop or the metrics (``error``) and on a full disk
(``aborted``; the folder stays partial): whatever was recorded is kept.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import math
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import mujoco
import numpy as np
from dockbench.controllers.base import CONTROLLERS, Controller, PlantInfo
from dockbench.controllers.insertion import InsertionSupervisor
from dockbench.planners.base import PLANNERS, Planner, PlannerContext
from dockbench.sim import interrupts, kernels
from dockbench.sim.assembly import FORCE_SENSOR, TORQUE_SENSOR, Assembly, assemble
from dockbench.sim.config import check_value
from dockbench.sim.cycle import (  # noqa: F401 - the cycle's helpers, importable from here as before
    Cycle,
    Outcome,
    Status,
    _coalesce,
    _derive_pose_channels,
    contiguous_slice,
    kernel_paths,
)
from dockbench.sim.dynamics import Dynamics
from dockbench.sim.errors import InternalError, ModelError, RunFolderError, ScenarioError, SimulationDiverged
from dockbench.sim.ik import solve_ik
from dockbench.sim.interfaces import ToolRuntime, rpy_to_matrix
from dockbench.sim.mounts import initial_target_state
from dockbench.sim.orbit import OrbitTelemetry, TargetTracking
from dockbench.sim.scenario import MAX_DURATION, Scenario, SimConfig, folder_name
from dockbench.sim.uncertainty import UncertaintyRuntime, belief_transform, make_runtime
from dockbench.sim.wrench import WrenchPipeline
from dockbench.telemetry.gates import ENDED_STATUSES, detect_instability, evaluate_gates, run_is_complete
from dockbench.telemetry.log import CHUNK_ROWS, Telemetry, TelemetryWriteError, atomic_write_text
from dockbench.telemetry.metrics import MATING_TARGETS, compute_metrics, is_mating_target
from dockbench.telemetry.run import RunFolder, write_json, write_scene


@dataclass
class RunResult:
    """Outcome of one run.

    Attributes:
        status: ``completed`` | ``seated`` (ended early by ``sim.end_after_seated``; complete) | ``unstable``
            (ran to its end but flagged by :func:`telemetry.gates.detect_instability`; verdict FAIL) |
            ``diverged`` | ``interrupted`` | ``aborted`` (telemetry could not be written) | ``error`` (an
            exception in the loop or the metrics).
        verdict: PASS / FAIL / INCOMPLETE.
        metrics: computed metrics.
        gates: per-gate results (dicts).
        telemetry: the recorded channels (views).
        meta: run metadata (also in meta.json).
        run_dir: the run folder, if one was written.
        message: diagnostic for a diverged run.
    """

    status: str
    verdict: str
    metrics: dict[str, Any]
    gates: list[dict[str, Any]]
    telemetry: dict[str, np.ndarray]
    meta: dict[str, Any]
    run_dir: Path | None = None
    message: str = ""
    timing: dict[str, Any] = field(default_factory=dict)
    #: a SIGINT/SIGTERM that arrived while the run folder was being written (it was finished first)
    signal: int | None = None
    #: what kept the run folder from being finished (then it is ``<stamp>.partial``)
    problems: list[str] = field(default_factory=list)
    #: the traceback of an unexpected exception in the loop or the metrics (status ``error``), else ""
    error: str = ""


@dataclass
class Setup:
    """Everything built from a scenario before the first step (exposed for tests and tools)."""

    scenario: Scenario
    asm: Assembly
    data: mujoco.MjData
    q0: np.ndarray
    planner: Planner
    controller: Controller
    plant: PlantInfo
    dynamics: Dynamics
    wrench: WrenchPipeline
    T_world_goal: np.ndarray
    T_world_start: np.ndarray
    approach_axis: np.ndarray
    duration: float
    runtime: ToolRuntime | None = None
    #: floating-body telemetry (a free-floating base or a moving target; sim/orbit.py), else None
    orbit: OrbitTelemetry | None = None
    #: F/T noise and bias, delays, belief error (sim/uncertainty.py); None when the scenario has none
    uncertainty: UncertaintyRuntime | None = None
    #: the target's contact culling (sim/culling.py: ``update()`` before each control period), else None
    culling: Any = None


def _start_and_goal(
    scenario: Scenario, asm: Assembly, q_home: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(T_world_start, T_world_goal, approach axis) from the believed target pose, or from the
    robot's initial configuration when there is no target."""
    if asm.target is None:
        import pinocchio as pin

        q = np.array(scenario.robot.q_init if scenario.robot.q_init is not None else q_home)
        data = asm.pin_model.createData()
        pin.framesForwardKinematics(asm.pin_model, data, q)
        oMf = data.oMf[asm.frame_ids[asm.tool.ee_site]]
        T = np.eye(4)
        T[:3, :3] = oMf.rotation
        T[:3, 3] = oMf.translation + np.array(scenario.start.offset)
        return T, T.copy(), np.array([0.0, 0.0, 1.0])
    Tb = asm.target.T_world_believed
    T_goal = Tb @ asm.target.goal_in_target()
    if scenario.start.free_yaw:
        # R_goal Rz(ψ) closest to the home EE orientation R_home: ψ = atan2(A10 − A01, A00 + A11), A = R_goalᵀ R_home
        # (for an N-fold keyed target ψ is rounded to a multiple of 2π/N: Target.yaw_period)
        import pinocchio as pin

        data = asm.pin_model.createData()
        pin.framesForwardKinematics(asm.pin_model, data, q_home)
        A = T_goal[:3, :3].T @ data.oMf[asm.frame_ids[asm.tool.ee_site]].rotation
        psi = math.atan2(A[1, 0] - A[0, 1], A[0, 0] + A[1, 1])
        period = asm.target.yaw_period
        if period > 0.0:  # a keyed interface mates every 2π/N only: the nearest of those rotations
            psi = period * round(psi / period)
        T_goal[:3, :3] = T_goal[:3, :3] @ rpy_to_matrix(np.array([0.0, 0.0, psi]))
    axis = Tb[:3, 2].copy()
    T_start = T_goal.copy()
    T_start[:3, 3] = Tb[:3, 3] + scenario.start.standoff * axis + np.array(scenario.start.offset)
    T_start[:3, :3] = T_goal[:3, :3] @ rpy_to_matrix(np.radians(scenario.start.rpy_offset_deg))
    return T_start, T_goal, axis


def _gravity_compensation(scenario: Scenario) -> bool:
    """``wrench.gravity_compensation``: on, off, or (auto) on whenever ``sim.gravity`` is non-zero."""
    mode = scenario.wrench.gravity_compensation
    return mode == "on" or (mode == "auto" and any(g != 0.0 for g in scenario.sim.gravity))


def _in_file(exc: ScenarioError, file: str, key: str | None = None) -> ScenarioError:
    """``exc`` with the scenario file (and ``key`` when it names none) filled in."""
    return ScenarioError(exc.detail, file=exc.file or file, key=exc.key or key)


def _check_joint_values(q: tuple[float, ...], lo: np.ndarray, hi: np.ndarray, names: tuple[str, ...],
                        file: str, key: str) -> None:
    """Every q[i] within the model's range [lo_i, hi_i] of joint ``names[i]`` [rad]."""
    for i, (x, a, b) in enumerate(zip(q, lo, hi, strict=True)):
        if not a <= x <= b:
            raise ScenarioError(
                f"{x} rad is outside the range [{a:.4f}, {b:.4f}] rad of joint {names[i]!r}",
                file=file,
                key=f"{key}[{i}]",
            )


def build(scenario: Scenario, assembly: Assembly | None = None) -> Setup:
    """Assemble the plant, solve the initial configuration and build planner and controller. The scenario and
    a given ``assembly`` are not changed (the drawn target-pose estimate goes into a copy of the target).

    Args:
        scenario: the scenario.
        assembly: a prebuilt :func:`sim.assembly.assemble` result for this scenario (e.g. from
            :class:`sim.model_cache.AssemblyCache`, which reuses compiled models across the trials of a
            campaign).

    Raises:
        ScenarioError: naming the scenario file and the key, for everything the scenario asks that the
            models cannot do: geometry that does not compile (the ``tool``/``target``/``robot`` block),
            ``robot.q_init`` / ``robot.q_guess`` outside the joint ranges, an unreachable start pose
            (IK, ``start``), a planner whose trajectory cannot be built or lasts longer than
            :data:`sim.scenario.MAX_DURATION`, a controller the plant cannot serve.
    """
    file = scenario.source_file or "<scenario>"
    unc = make_runtime(scenario.uncertainty, scenario.sim.seed, np.array(scenario.wrench.ft_bias))
    asm = _believed(assemble(scenario) if assembly is None else assembly, unc)
    culls = asm.target is not None and asm.target.culls_contacts
    if culls:  # the culling rewrites contact flags: a model of its own
        asm = dataclasses.replace(asm, model=copy.copy(asm.model))
    q0, T_start, T_goal, axis, plant = _initial_configuration(scenario, asm, file)
    data = _initial_state(scenario, asm, q0)
    planner = _planner(scenario, asm, data, T_start, T_goal, axis, file)
    try:
        controller = CONTROLLERS.get(scenario.controller.type)(scenario.controller.config, plant, planner)
    except ScenarioError as exc:
        raise _in_file(exc, file, "controller") from None
    dyn = _dynamics(scenario, asm, data, controller)
    wp = _wrench_pipeline(scenario, asm, unc)
    duration = (
        scenario.sim.duration
        if scenario.sim.duration is not None
        else planner.duration + scenario.sim.settle_time + getattr(planner, "reserve_time", 0.0)
    )
    try:
        runtime = asm.tool.make_runtime(asm.model, data, scenario)
    except ScenarioError as exc:
        raise _in_file(exc, file, "tool") from None
    if runtime is not None:
        runtime.bind_dynamics(dyn)  # e.g. the hand keeps the lumped inertia at its current pose
    culling = asm.target.contact_culling(asm.model, data, scenario.sim.control_period) if culls else None
    _check_end_after_seated(scenario, asm, file)
    return Setup(
        scenario, asm, data, q0, planner, controller, plant, dyn, wp, T_goal, T_start, axis, duration, runtime,
        orbit=_orbit_telemetry(scenario, asm, data), uncertainty=unc, culling=culling,
    )


def _check_end_after_seated(scenario: Scenario, asm: Assembly, file: str) -> None:
    """``sim.end_after_seated`` needs what its seat test reads (sim.cycle.Cycle._ended_when_seated): a mating
    target with a seat depth, whose frame the metrics take as fixed (not a moving target)."""
    if scenario.sim.end_after_seated is None:
        return
    key = "sim.end_after_seated"
    target = asm.target
    if target is None or not is_mating_target(scenario.target.type):  # asm.target exists iff scenario.target does
        raise ScenarioError(
            f"ends the run when the tip is seated in a mating target; this scenario has "
            f"{'no target' if target is None else f'target.type {scenario.target.type!r}, which has no seat'} "
            f"(remove the key, or use one of the mating targets: {', '.join(MATING_TARGETS)})", file=file, key=key)
    if target.depth_total is None:
        raise ScenarioError(f"target.type {scenario.target.type!r} has no seat depth to test", file=file, key=key)
    hold = scenario.sim.end_after_seated
    for k, gate in enumerate(scenario.gates):
        if gate.window is not None and gate.window > hold:
            raise ScenarioError(
                f"{hold:g} s is shorter than gates[{k}]'s window ({gate.window:g} s, {gate.metric}): that gate "
                f"would average samples from before the seat; use at least {gate.window:g} s", file=file, key=key)
    mount = _mount(scenario)
    if mount is not None and mount.moving:
        raise ScenarioError(
            "the seat test takes the target frame as fixed; this target moves (target.mount with a moving "
            "body): remove the key or the mount", file=file, key=key)


def _mount(scenario: Scenario) -> Any:
    """The target's mount block (None without a target)."""
    return getattr(scenario.target.config, "mount", None) if scenario.target is not None else None


def _believed(asm: Assembly, unc: UncertaintyRuntime | None) -> Assembly:
    """``asm`` with this run's target-pose estimate: the configured belief composed with the error drawn by
    the uncertainty model (``T_believed = T_target · T_offset · T_δ``), in a copy of the target, so the
    assembly given (e.g. a cached one) is not changed and building twice from it draws the same belief."""
    if unc is None or asm.target is None or "belief_offset_drawn" not in unc.record:
        return asm
    drawn = unc.record["belief_offset_drawn"]  # the estimate error, after the configured belief offset
    target = copy.copy(asm.target)
    target.T_world_believed = asm.target.T_world_believed @ belief_transform(drawn["position"], drawn["rpy_deg"])
    return dataclasses.replace(asm, target=target)


def _initial_configuration(
    scenario: Scenario, asm: Assembly, file: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, PlantInfo]:
    """(q0, T_world_start, T_world_goal, approach axis, the plant's limits): the start configuration from
    ``robot.q_init``, or IK onto the start pose (from home / ``robot.q_guess``), both checked against the
    joint ranges."""
    m, robot = asm.model, asm.robot
    jids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, n) for n in robot.joint_names]
    q_min = np.array([m.jnt_range[j, 0] for j in jids])
    q_max = np.array([m.jnt_range[j, 1] for j in jids])
    for key in ("q_init", "q_guess"):
        q = getattr(scenario.robot, key)
        if q is not None:
            _check_joint_values(q, q_min, q_max, robot.joint_names, file, f"robot.{key}")
    q_home = robot.home if scenario.robot.q_guess is None else np.array(scenario.robot.q_guess)
    T_start, T_goal, axis = _start_and_goal(scenario, asm, q_home)
    if scenario.robot.q_init is not None:
        q0 = np.array(scenario.robot.q_init, dtype=float)
    elif asm.target is None:  # free space: start where the robot is (home / q_guess)
        q0 = np.array(q_home, dtype=float)
    else:
        try:
            q0 = solve_ik(asm.pin_model, asm.frame_ids[asm.tool.ee_site], T_start, q_home)
        except ModelError as exc:
            raise ScenarioError(
                f"the start pose (target.pose, target.belief_offset and the start block) is not reachable: {exc}",
                file=file,
                key="start",
            ) from None
    tau_max = np.array([m.actuator_ctrlrange[a, 1] for a in asm.act_ids])
    if scenario.robot.max_torque is not None:
        tau_max = np.minimum(tau_max, scenario.robot.max_torque)
    plant = PlantInfo(
        nv=len(robot.joint_names),
        joint_names=robot.joint_names,
        tau_max=tau_max,
        q_min=q_min,
        q_max=q_max,
        v_max=robot.velocity_limit.copy(),
        dof_damping=np.array(m.dof_damping[asm.dof_adr]),
        dof_frictionloss=np.array(m.dof_frictionloss[asm.dof_adr]),
        control_period=scenario.sim.control_period,
        q_home=q0.copy(),
        floating_base=bool(asm.floating_base),
    )
    return q0, T_start, T_goal, axis, plant


def _initial_state(scenario: Scenario, asm: Assembly, q0: np.ndarray) -> mujoco.MjData:
    """MjData at q0 (and a moving target's initial twist), forward-computed so the first step reads its
    sensors; with gravity on, held by g(q0)."""
    m = asm.model
    data = mujoco.MjData(m)
    data.qpos[asm.qpos_adr] = q0
    mount = _mount(scenario)
    if mount is not None and mount.moving:  # the target's initial twist (e.g. a slow tumble)
        initial_target_state(m, data, asm.target_body, mount, asm.target.T_world_target[:3, :3])
    mujoco.mj_forward(m, data)
    if np.any(m.opt.gravity != 0.0):
        # The first control step reads the sensors of this state. With ctrl = 0 the arm would be in free
        # fall there and the F/T would read the tool's free-fall load (4.6 N on the iiwa14 probe) as a
        # contact force; hold it with its gravity torque g(q0) (what the controller applies) instead.
        lim = np.array([m.actuator_ctrlrange[a, 1] for a in asm.act_ids])
        data.ctrl[asm.act_ids] = np.clip(data.qfrc_bias[asm.dof_adr], -lim, lim)
        mujoco.mj_forward(m, data)
    return data


def _planner(
    scenario: Scenario, asm: Assembly, data: mujoco.MjData, T_start: np.ndarray, T_goal: np.ndarray,
    axis: np.ndarray, file: str,
) -> Planner:
    """The scenario's planner from start to goal, riding on a moving target when its mount tracks it, under
    the insertion supervisor when the scenario's ``insertion:`` block is on."""
    ctx = PlannerContext(T_world_start=T_start, T_world_goal=T_goal, approach_axis_world=axis)
    try:
        planner = PLANNERS.get(scenario.planner.type)(scenario.planner.config, ctx)
        planned = float(planner.duration)
    except ScenarioError as exc:
        raise _in_file(exc, file, "planner") from None
    except (ArithmeticError, ValueError) as exc:  # e.g. a trajectory too long for float arithmetic
        raise ScenarioError(
            f"the {scenario.planner.type} trajectory cannot be built from this start/goal: {exc}",
            file=file,
            key="planner",
        ) from None
    if not (math.isfinite(planned) and 0.0 <= planned <= MAX_DURATION):
        raise ScenarioError(
            f"the {scenario.planner.type} trajectory lasts {planned:.6g} s; at most {MAX_DURATION:g} s allowed "
            "(raise the speed/acceleration limits or move the start closer to the goal)",
            file=file,
            key="planner",
        )
    mount = _mount(scenario)
    if mount is not None and mount.moving and mount.track:  # the plan rides on the moving target
        planner = TargetTracking(
            planner, data, asm.model, asm.target_body, asm.target_qpos, asm.target_qvel,
            floating=mount.type == "floating",
        )
    if scenario.insertion.active:  # the outer compliance loop, jam detection, recovery (controllers/insertion.py)
        planner = InsertionSupervisor(planner, scenario.insertion, scenario.sim.control_period)
    return planner


def _dynamics(scenario: Scenario, asm: Assembly, data: mujoco.MjData, controller: Controller) -> Dynamics:
    """The snapshot's source: the fixed-base one Pinocchio pass, or the base-eliminated one of a
    free-floating base (sim/floating.py, base state read from MjData), computing only what the law needs."""
    flags = dict(
        body_frame=controller.needs_body_frame,
        sensor_pose=controller.needs_sensor_pose or scenario.wrench.force_source == "observer",
        world_drift=controller.needs_world_drift,
    )
    if not asm.floating_base:
        return Dynamics(asm.pin_model, asm.frame_ids[asm.tool.ee_site], asm.frame_ids[asm.tool.sensor_site], **flags)
    from dockbench.sim.floating import FloatingBaseDynamics  # scipy's LAPACK: imported when a scenario needs it

    fids = asm.floating_frame_ids
    dyn = FloatingBaseDynamics(asm.pin_floating, fids[asm.tool.ee_site], fids[asm.tool.sensor_site], **flags)
    dyn.bind_base(data.qpos[asm.base_qpos], data.qvel[asm.base_qvel])
    return dyn


def _wrench_pipeline(scenario: Scenario, asm: Assembly, unc: UncertaintyRuntime | None) -> WrenchPipeline:
    """The F/T pipeline of the tool's sensor (docs/theory/ft_pipeline.md), with the drawn bias when the
    uncertainty models are on."""
    return WrenchPipeline(
        asm.model,
        asm.tool.sensor_site,
        FORCE_SENSOR,
        TORQUE_SENSOR,
        asm.tool.root_body,
        inertial_compensation=scenario.wrench.inertial_compensation,
        gravity_compensation=_gravity_compensation(scenario),
        ft_bias=np.array(scenario.wrench.ft_bias) if unc is None else unc.bias,
        dynamic_offset=unc is not None and unc.noisy,
        tare_step=None if scenario.wrench.tare_time is None
        else int(round(scenario.wrench.tare_time / scenario.sim.control_period)),
    )


def _orbit_telemetry(scenario: Scenario, asm: Assembly, data: mujoco.MjData) -> OrbitTelemetry | None:
    """Floating-body telemetry for a free-floating base or a moving target (sim/orbit.py), else None."""
    mount = _mount(scenario)
    moving = mount is not None and mount.moving
    if not (asm.floating_base or moving):
        return None
    m = asm.model
    base_body = int(m.jnt_bodyid[m.dof_jntid[asm.base_qvel.start]]) if asm.floating_base else -1
    return OrbitTelemetry(
        m, data, base_body, asm.target_body if moving else -1, asm.base_qpos, asm.base_qvel,
        asm.target_qpos, asm.target_qvel, moving and mount.type == "floating", scenario.sim.timestep,
    )


def _git_revision() -> str:
    """The checkout's short revision (once per process: a campaign's worker runs many trials)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _versions() -> dict[str, str]:
    import pinocchio

    return {
        "python": platform.python_version(),
        "mujoco": mujoco.__version__,
        "pinocchio": pinocchio.__version__,
        "numpy": np.__version__,
        "scipy": _dist_version("scipy"),  # from the metadata: a Khatib run need not import scipy
    }


def steps_for(duration: float, control_period: float) -> int:
    """Control steps of a run of ``duration`` [s]: t = 0, T_c, …, ⌊duration / T_c⌋ T_c."""
    return int(math.floor(duration / control_period + 1e-9)) + 1


#: the MuJoCo warnings of the run in progress (None outside :func:`run`), written to the run folder's
#: MUJOCO_LOG.TXT; see :func:`_mujoco_warnings`
_mj_log: list[str] | None = None
#: most MuJoCo warnings kept per run (MuJoCo reports each kind once per MjData, so a run has a handful)
MAX_MUJOCO_WARNINGS = 1000


@contextlib.contextmanager
def _mujoco_warnings() -> Iterator[list[str]]:
    """Collect MuJoCo's warnings while the block runs, echoed to stderr. MuJoCo's own handler appends them
    to ``MUJOCO_LOG.TXT`` in the *working directory*, wherever ``--out`` points; :func:`run` writes them
    into the run folder instead (nothing when there were none; stderr only without a folder)."""
    global _mj_log
    setter = getattr(mujoco, "set_mju_user_warning", None)
    if setter is None or _mj_log is not None:  # an old MuJoCo, or nested: the outer block collects
        yield _mj_log if _mj_log is not None else []
        return
    previous = mujoco.get_mju_user_warning()
    log: list[str] = []

    def handler(msg: str) -> None:
        if len(log) < MAX_MUJOCO_WARNINGS:
            log.append(f"{time.strftime('%a %b %d %H:%M:%S %Y')}\nWARNING: {msg}")
        sys.stderr.write(f"MuJoCo warning: {msg}\n")

    _mj_log = log
    setter(handler)
    try:
        yield log
    finally:
        setter(previous)
        _mj_log = None


@functools.cache
def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


class StepObserver(Protocol):
    """Something that watches the loop while it runs (the viewer, a live Rerun or ROS 2 stream):
    the one per-step seam of :func:`simulate`. Implementations live in :mod:`telemetry.live`.

    Attributes:
        every: call :meth:`step` every this many control steps (an integer ≥ 1; read after
            :meth:`start`).
        stop_reason: how a True from :meth:`step` is reported (e.g. ``"viewer closed"``).
    """

    every: int
    stop_reason: str

    def start(self, setup: Setup, tel: Telemetry) -> None:
        """Called once before the first step, with the run's setup and its (empty) telemetry."""

    def step(self, i: int, t: float) -> bool:
        """Step ``i`` (time ``t`` [s]) is recorded (``tel.block[i - tel.base]``: a long run spills its
        block, telemetry.log; ``setup.data`` holds the state at ``t``); return True to end the run."""

    def finish(self, status: str) -> None:
        """Called once when the loop ends, whatever the reason (``completed``, ``interrupted``, ...)."""


def simulate(
    setup: Setup,
    duration: float | None = None,
    progress: Callable[[float, float], None] | None = None,
    profile: bool = False,
    kernel_check: int | None = None,
    step_observer: StepObserver | None = None,
    *,
    spill_dir: str | Path | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> Outcome:
    """Run the control loop of ``setup`` for ``duration`` [s] (default: the setup's) and return its
    :class:`~sim.cycle.Outcome` (telemetry, status, message, timing, the kernel guard's report; it unpacks
    as ``tel, status, message, timing``).

    The cycle's stages are composed once from the setup (:class:`sim.cycle.Cycle`): ``profile`` times each
    stage (the results are identical), ``kernel_check`` is the kernel guard's period (default
    :func:`sim.kernels.check_every`; 0 = off), ``step_observer`` watches the loop (the viewer, live
    streams; True from it ends the run), and a run of more than ``chunk_rows`` steps spills its telemetry
    to ``spill_dir`` (None: a temporary folder) so memory stays flat. The setup is not changed.
    """
    duration = setup.duration if duration is None else duration
    cycle = Cycle(
        setup, steps_for(duration, setup.scenario.sim.control_period), profile=profile, kernel_check=kernel_check,
        step_observer=step_observer, spill_dir=spill_dir, chunk_rows=chunk_rows,
    )
    return cycle.run(progress, duration)


def _mount_type(scenario: Scenario) -> str | None:
    """The target's mount type (sim/mounts.py), None without a target."""
    if scenario.target is None:
        return None
    mount = getattr(scenario.target.config, "mount", None)
    return mount.type if mount is not None else "fixed"


def _meta(setup: Setup, timing: dict[str, float], status: str, tel: Telemetry,
          guard: kernels.GuardReport | None = None) -> dict[str, Any]:
    asm = setup.asm
    return {
        "scenario": setup.scenario.to_dict(),
        "scenario_file": setup.scenario.source_file,
        "status": status,
        "versions": _versions(),
        "git_revision": _git_revision(),
        "seed": setup.scenario.sim.seed,
        "timing": timing,
        "kernels": kernel_paths(setup),
        "kernel_guard": guard.to_dict() if guard is not None else None,
        "kernel_mismatch": [m.to_dict() for m in guard.mismatches] if guard is not None else [],
        "robot": asm.robot.name,
        "joint_names": list(asm.robot.joint_names),
        "q0": setup.q0,
        "q_min": setup.plant.q_min,
        "q_max": setup.plant.q_max,
        "v_max": setup.plant.v_max,
        "tau_max": setup.plant.tau_max,
        "target_type": setup.scenario.target.type if setup.scenario.target else None,
        "base_type": setup.scenario.robot.base.type,
        "target_mount": _mount_type(setup.scenario),
        "orbit_mass": setup.orbit.system_mass if setup.orbit is not None else None,
        "T_world_target": asm.target.T_world_target if asm.target else None,
        "T_world_target_believed": asm.target.T_world_believed if asm.target else None,
        "target_depth_total": asm.target.depth_total if asm.target else None,
        "T_world_goal": setup.T_world_goal,
        "T_world_start": setup.T_world_start,
        "planner_duration": setup.planner.duration,
        "duration": setup.duration,
        "segments": [{"name": s.name, "t0": s.t0, "t1": s.t1} for s in setup.planner.segments],
        "channel_units": tel.units,
        "controller_summary": setup.controller.summary(),
        "tool_summary": setup.runtime.summary() if setup.runtime is not None else {},
        "wrench_summary": setup.wrench.summary(),
        "uncertainty": setup.uncertainty.summary() if setup.uncertainty is not None else None,
        "insertion": setup.planner.summary() if isinstance(setup.planner, InsertionSupervisor) else None,
        "insertion_events": setup.planner.events if isinstance(setup.planner, InsertionSupervisor) else [],
        "target_yaw_period": asm.target.yaw_period if asm.target else None,
        "target_key_phase": getattr(asm.target, "key_phase", None),
        "tool_lug_phase": getattr(asm.target, "lug_phase", None),
        "contact_culling": setup.culling.stats() if setup.culling is not None else None,
    }


def _duration_key(scenario: Scenario, override: float | None, setup: Setup) -> tuple[str, str]:
    """(key, description) of what set the run length, for messages."""
    if override is not None:
        return "--duration", f"--duration {override:g} s"
    if scenario.sim.duration is not None:
        return "sim.duration", f"sim.duration {scenario.sim.duration:g} s"
    return "planner", (
        f"the planner's {setup.planner.duration:.6g} s + sim.settle_time {scenario.sim.settle_time:g} s"
    )


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.3g} PiB"  # pragma: no cover


#: bytes the run folder needs beyond the telemetry (meta, summary, scene.xml, timing) [bytes]
FOLDER_SLACK_BYTES = 256 << 10
#: anonymous memory the metrics take per recorded step [bytes]: they work on whole (N,)/(N, 6) vectors.
#: Measured (issue 36; peak RssAnon sampled every 2 ms, iiwa14_docking at 5 s and 65 s simulated, the
#: slope between them): 629 B per step; 512 B, the earlier figure, was below it. The telemetry itself is
#: flat in the duration while the loop runs; after it the metrics read the memory-mapped telemetry.npz,
#: whose pages are resident too (peak RssFile 460 B per step, at most the row size), so
#: :func:`check_budget` adds the row size: 1024 + 773 B per step for iiwa14_docking against a measured
#: peak RSS of 1089 B per step (192 MB at 65 s)
METRICS_BYTES_PER_STEP = 1024


def _memory_available() -> int | None:
    """MemAvailable of /proc/meminfo [bytes], None where unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def check_budget(setup: Setup, duration: float, where: Path | None, key: str, what: str) -> int:
    """Check, before the first step, that the telemetry of a run of ``duration`` [s] fits: a run of at
    most :data:`telemetry.log.CHUNK_ROWS` steps in memory (a few tens of MB at most), a longer one on
    the disk holding ``where`` (its part files plus the assembled telemetry.npz: twice its size); and
    that the memory the metrics need (:data:`METRICS_BYTES_PER_STEP` per step, plus the telemetry they read
    memory-mapped) is available. Returns the telemetry size [bytes].

    Raises:
        ScenarioError: naming ``key`` (``--duration``, ``sim.duration`` or ``planner``), the step count,
            the size needed and the space free.
    """
    sc = setup.scenario
    n = steps_for(duration, sc.sim.control_period)
    ctrl = setup.controller
    extra = {f"ctrl_{d}": "" for d in ctrl.diag_names}
    shaped = setup.runtime.channels if setup.runtime is not None else None
    size = n * Telemetry.bytes_per_step(setup.plant.nv, extra, shaped) if sc.telemetry.enabled else 0
    spills = sc.telemetry.enabled and n > CHUNK_ROWS
    if sc.telemetry.enabled:
        mem = n * METRICS_BYTES_PER_STEP + size  # + the memory-mapped telemetry the metrics read (resident)
        avail = _memory_available()
        if avail is not None and mem > avail:
            raise ScenarioError(
                f"{what} is {n:,} control steps of {sc.sim.control_period:g} s: scoring them needs about "
                f"{_fmt_bytes(mem)} of memory, but {_fmt_bytes(avail)} are available; shorten the run or "
                "lengthen sim.control_period",
                file=sc.source_file or None,
                key=key,
            )
    if where is None and not spills:
        return size
    need = (2 * size if spills else size) + FOLDER_SLACK_BYTES
    folder = where if where is not None else Path(tempfile.gettempdir())
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return size
    if need > free:
        raise ScenarioError(
            f"{what} is {n:,} control steps of {sc.sim.control_period:g} s: {_fmt_bytes(size)} of telemetry, "
            f"{_fmt_bytes(need)} of disk while it is written, but {_fmt_bytes(free)} are free at {folder}; "
            "shorten the run, lengthen sim.control_period, free disk space or set telemetry.enabled: false",
            file=sc.source_file or None,
            key=key,
        )
    return size


def _wallclock_summary(tel: Telemetry) -> dict[str, dict[str, float]]:
    """Per wall-clock column: mean, median, 99th percentile and max [s] over the recorded steps."""
    out = {}
    for name, x in tel.timing_channels().items():
        if len(x):
            out[name] = {
                "mean_s": float(np.mean(x)),
                "median_s": float(np.median(x)),
                "p99_s": float(np.percentile(x, 99)),
                "max_s": float(np.max(x)),
            }
    return out


def _preliminary_meta(setup: Setup) -> dict[str, Any]:
    """meta.json as written before the first step (status ``running``): what a partial folder keeps."""
    return {
        "scenario": setup.scenario.to_dict(),
        "scenario_file": setup.scenario.source_file,
        "status": "running",
        "versions": _versions(),
        "git_revision": _git_revision(),
        "seed": setup.scenario.sim.seed,
        "robot": setup.asm.robot.name,
        "joint_names": list(setup.asm.robot.joint_names),
        "planner_duration": setup.planner.duration,
        "duration": setup.duration,
        "control_period": setup.scenario.sim.control_period,
    }


def run(
    scenario: Scenario,
    *,
    out_root: str | Path | None = "runs",
    duration: float | None = None,
    progress: Callable[[float, float], None] | None = None,
    setup: Setup | None = None,
    kernel_check: int | None = None,
    step_observer: StepObserver | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> RunResult:
    """Build, simulate, score and (if ``out_root``) write the run folder, as one transaction.

    Before anything is built, ``out_root`` is checked (the run's ``.partial`` folder is created in it,
    exclusively) and ``duration`` is validated like ``sim.duration``; before the first step the
    telemetry's size is checked against the disk (:func:`check_budget`). The telemetry is kept — and
    the folder written, with the status saying why — when the run diverges (then
    :class:`SimulationDiverged` is raised), is interrupted by Ctrl-C or SIGTERM at any point after the
    first step (status ``interrupted``; the signal that arrives while the folder is being written waits
    until it is finished: ``RunResult.signal``; a step observer that ends the run, e.g. the viewer
    closed, is ``interrupted`` too), raises inside the loop or the metrics (status
    ``error``, the traceback in ``error.txt``, :class:`InternalError` raised) or cannot write its
    telemetry (status ``aborted``, :class:`RunFolderError`). A folder that could not be finished (e.g.
    the disk is full) stays ``<stamp>.partial`` and loads as partial (telemetry.run).

    Args:
        scenario: a loaded scenario.
        out_root: parent of ``<scenario>/<UTC timestamp>/``; None = write nothing (a long run then
            spills its telemetry to a temporary folder).
        duration: override of the run length [s] (a run shorter than the planner is INCOMPLETE).
        progress: callback(t, duration) for progress bars.
        setup: a prebuilt :func:`build` result (default: built from ``scenario``).
        kernel_check: the kernel guard's period in control steps (0 = off; default
            :func:`sim.kernels.check_every`, i.e. ``$DOCKBENCH_KERNEL_CHECK`` or 5000).
        step_observer: watches the loop while it runs (:class:`StepObserver`: viewer, live streams).
        chunk_rows: telemetry rows held in memory before a spill (tests use small values).

    Raises:
        ScenarioError: bad ``duration``; the telemetry does not fit; anything :func:`build` raises.
        DockbenchError: ``out_root`` cannot hold run folders.
        Interrupted: a signal before the first step (nothing recorded, no folder left).
    """
    if duration is not None:
        duration = check_value(SimConfig, "duration", duration, file=scenario.source_file or None, key="--duration")
    with interrupts.guard(), _mujoco_warnings():
        folder = RunFolder.create(out_root, folder_name(scenario.name)) if out_root is not None else None
        cycle: Cycle | None = None
        try:
            if setup is None:
                setup = build(scenario)
            length = setup.duration if duration is None else duration
            key, what = _duration_key(scenario, duration, setup)
            check_budget(setup, length, folder.path if folder else None, key, what)
            if folder is not None:
                with interrupts.deferred():
                    if not folder.attempt("meta.json", write_json, folder.file("meta.json"), _preliminary_meta(setup)):
                        raise RunFolderError(f"cannot write into the run folder {folder.path}: {folder.problems[-1]}")
            cycle = Cycle(
                setup, steps_for(length, scenario.sim.control_period), kernel_check=kernel_check,
                step_observer=step_observer, spill_dir=folder.path if folder else None, chunk_rows=chunk_rows,
            )
            outcome = cycle.run(progress, length)
        except KeyboardInterrupt as exc:  # a signal outside the loop (between steps it ends the loop itself)
            tel = cycle.telemetry if cycle is not None else None
            if tel is None or tel.n == 0:
                if folder is not None:
                    folder.abandon()
                raise
            status, message = Status.INTERRUPTED, interrupts.interrupt_message(exc, tel.n)
            try:
                with interrupts.deferred():
                    tel.finish()
            except TelemetryWriteError as werr:
                status, message = Status.ABORTED, f"{message}; the last steps could not be written ({werr.strerror})"
            steps = tel.n
            timing = {"wall_s": 0.0, "sim_s": steps * scenario.sim.control_period, "steps": steps}
            outcome = Outcome(tel, status, message, timing, cycle.guard, interrupted_by=interrupts.signum_of(exc))
        except BaseException:
            if folder is not None and (cycle is None or cycle.telemetry.n == 0):
                folder.abandon()
            raise
        return _finish_run(setup, folder, outcome)


def _finish_run(setup: Setup, folder: RunFolder | None, outcome: Outcome) -> RunResult:
    """Everything after the loop (see :func:`run`): telemetry first, then meta, metrics, summary, the
    manifest and the rename, each write guarded, signals deferred while writing."""
    scenario = setup.scenario
    tel, status, message, timing = outcome
    status = str(status)
    interrupted_by = outcome.interrupted_by
    errors: list[str] = [outcome.error] if outcome.error else []
    timing = dict(timing)
    try:
        wall = _wallclock_summary(tel)
    except (OSError, ValueError):  # a part that cannot be read back (full disk): no timing summary
        wall = {}
    if wall:
        timing["wallclock"] = wall
    meta = _meta(setup, timing, status, tel, outcome.guard)
    have_tel = True
    with interrupts.deferred():
        if folder is not None:
            have_tel = folder.attempt("telemetry.npz", tel.save, folder.file("telemetry.npz"))
            if tel.timing_channels():
                folder.attempt("timing.npz", tel.save_timing, folder.file("timing.npz"))
            folder.attempt("meta.json", write_json, folder.file("meta.json"), meta)
    metrics: dict[str, Any] = {}
    channels: dict[str, np.ndarray] = {}
    verdict, gates = "INCOMPLETE", []
    if have_tel:
        try:
            interrupts.arm()
            channels = tel.channels()
            metrics = compute_metrics(channels, meta) if len(channels.get("t", ())) > 0 else {}
            planned = setup.planner.duration
            complete = run_is_complete(status, (tel.n - 1) * scenario.sim.control_period, planned)
            instability = detect_instability(channels, meta) if status in ENDED_STATUSES else None
            if instability is not None:  # ran to its end, but not under control: status unstable, verdict FAIL
                status, message = "unstable", instability.message
                meta["status"] = status
            verdict, gate_results = evaluate_gates(
                scenario.gates, metrics, complete, channels=channels, meta=meta, unstable=instability is not None
            )
            gates = [g.to_dict() for g in gate_results]
            interrupts.disarm()
        except KeyboardInterrupt as exc:
            interrupts.disarm()
            status, verdict, metrics, gates = "interrupted", "INCOMPLETE", {}, []
            message = (f"{interrupts.interrupt_message(exc, tel.n)} (all {tel.n} steps were simulated; interrupted "
                       "after the loop, before the metrics were computed)")
            interrupted_by = interrupts.signum_of(exc)
        except Exception as exc:  # noqa: BLE001 - a metrics bug must not lose the run folder
            interrupts.disarm()
            status, verdict, metrics, gates = "error", "INCOMPLETE", {}, []
            message = f"the metrics failed ({type(exc).__name__}: {exc}); the telemetry of all {tel.n} steps is kept"
            errors.append(traceback.format_exc())
        finally:
            interrupts.disarm()
    meta["status"] = status
    result = RunResult(status, verdict, metrics, gates, channels, meta, None, message, timing,
                       error="\n".join(errors))
    with interrupts.deferred():
        if folder is not None:
            summary = {
                "scenario": scenario.name,
                "status": status,
                "message": message,
                "verdict": verdict,
                "gates": gates,
                "metrics": metrics,
                "timing": timing,
                "controller": setup.controller.summary(),
                **({"insertion": meta["insertion"], "insertion_events": meta["insertion_events"]}
                   if meta["insertion"] is not None else {}),
            }
            folder.attempt("meta.json", write_json, folder.file("meta.json"), meta)
            folder.attempt("summary.json", write_json, folder.file("summary.json"), summary)
            try:
                xml = setup.asm.spec.to_xml()
            except Exception as exc:  # noqa: BLE001 - MuJoCo's XML writer; its failure is recorded, not fatal
                folder.problems.append(f"scene.xml could not be generated: {exc}")
            else:
                folder.attempt("scene.xml", write_scene, folder.path, xml)  # with copies of its mesh files
            if errors:
                folder.attempt("error.txt", atomic_write_text, folder.file("error.txt"), "\n".join(errors))
            if _mj_log:  # MuJoCo's warnings, here rather than in the working directory (_mujoco_warnings)
                folder.attempt("MUJOCO_LOG.TXT", atomic_write_text, folder.file("MUJOCO_LOG.TXT"),
                               "\n\n".join(_mj_log) + "\n")
            if status == "aborted" and not folder.problems:
                folder.problems.append(message)
            result.run_dir = folder.finalize(tel.n)
            result.problems = list(folder.problems)
    pending = interrupts.take_pending()
    result.signal = interrupted_by if status == "interrupted" else pending
    where = f" (run folder: {result.run_dir})" if result.run_dir else ""
    if result.problems:
        raise RunFolderError(
            f"the run folder could not be finished: {'; '.join(result.problems)}; what was written is in "
            f"{result.run_dir}",
            result=result,
        )
    if status == "diverged":
        raise SimulationDiverged(message + where, result=result)
    if status == "error":
        tb = " (traceback in error.txt)" if result.run_dir else ""
        raise InternalError(message + where + tb, result=result)
    return result
