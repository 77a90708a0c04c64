"""The control loop: ``run(scenario) → RunResult`` (docs/architecture.md "One control cycle").

Per control step (period T_c = k · timestep)::

    snap  = dynamics.update(q, v)          # one Pinocchio pass
    w     = wrench.update(data, snap)      # F/T + truth (sensors of the last MuJoCo step)
    planner.evaluate(t, ref)               # world-frame reference
    controller.compute(snap, ref, w, cmd)  # τ (+ diagnostics)
    τ_applied = clip(τ, ±τ_max)            # per-joint actuator limits (or scenario max_torque)
    k × mj_step                            # the plant
    record                                 # preallocated telemetry

The run folder is one transaction (:func:`run`, telemetry.run.RunFolder): reserved as
``<stamp>.partial`` before the first step, renamed into place with its manifest when complete. It is
written also when the state goes NaN/Inf (status ``diverged``), on Ctrl-C or SIGTERM (``interrupted``,
sim.interrupts), on an exception in the loop or the metrics (``error``) and on a full disk
(``aborted``; the folder stays partial): whatever was recorded is kept.
"""

from __future__ import annotations

import functools
import math
import platform
import shutil
import signal
import subprocess
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import mujoco
import numpy as np
from dockbench.controllers.base import CONTROLLERS, Controller, PlantInfo
from dockbench.controllers.insertion import CHANNELS as INSERTION_CHANNELS
from dockbench.controllers.insertion import InsertionSupervisor
from dockbench.planners.base import PLANNERS, Planner, PlannerContext, Reference
from dockbench.sim import interrupts, kernels
from dockbench.sim.assembly import FORCE_SENSOR, TORQUE_SENSOR, Assembly, assemble
from dockbench.sim.config import check_value
from dockbench.sim.dynamics import Dynamics
from dockbench.sim.errors import InternalError, ModelError, RunFolderError, ScenarioError, SimulationDiverged
from dockbench.sim.ik import solve_ik
from dockbench.sim.interfaces import ToolRuntime, rpy_to_matrix
from dockbench.sim.lie import mat2quat_batch
from dockbench.sim.mounts import initial_target_state
from dockbench.sim.orbit import OrbitTelemetry, TargetTracking
from dockbench.sim.scenario import MAX_DURATION, Scenario, SimConfig, folder_name
from dockbench.sim.uncertainty import UncertaintyRuntime, belief_transform, make_runtime
from dockbench.sim.wrench import PEAK_CHANNELS, SubstepContact, WrenchPipeline
from dockbench.telemetry.gates import detect_instability, evaluate_gates
from dockbench.telemetry.log import CHUNK_ROWS, Telemetry, TelemetryWriteError, atomic_write_text
from dockbench.telemetry.metrics import compute_metrics
from dockbench.telemetry.run import RunFolder, write_json, write_scene


@dataclass
class RunResult:
    """Outcome of one run.

    Attributes:
        status: ``completed`` | ``unstable`` (ran to its end but flagged by
            :func:`telemetry.gates.detect_instability`; verdict FAIL) | ``diverged`` | ``interrupted`` |
            ``aborted`` (telemetry could not be written) | ``error`` (an exception in the loop or the
            metrics).
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
    #: what the kernel guard saw in the last :func:`simulate` of this setup (sim/kernels.py)
    guard: kernels.GuardReport | None = None
    #: floating-body telemetry (a free-floating base or a moving target; sim/orbit.py), else None
    orbit: OrbitTelemetry | None = None
    #: the telemetry of the last :func:`simulate` on this setup (set before its first step)
    telemetry: Telemetry | None = None
    #: the traceback of an unexpected exception in the last :func:`simulate` (status ``error``)
    error: str = ""
    #: the signal that interrupted the last run (status ``interrupted``), else None
    interrupted_by: int | None = None
    #: F/T noise and bias, delays, belief error (sim/uncertainty.py); None when the scenario has none
    uncertainty: UncertaintyRuntime | None = None


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
    """Assemble the plant, solve the initial configuration and build planner and controller.

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
    asm = assemble(scenario) if assembly is None else assembly
    unc = make_runtime(scenario.uncertainty, scenario.sim.seed, np.array(scenario.wrench.ft_bias))
    if unc is not None and asm.target is not None and "belief_offset_drawn" in unc.record:
        drawn = unc.record["belief_offset_drawn"]  # the estimate error, after the configured belief offset
        T_delta = belief_transform(drawn["position"], drawn["rpy_deg"])
        asm.target.T_world_believed = asm.target.T_world_believed @ T_delta
    m = asm.model
    robot = asm.robot
    nv = len(robot.joint_names)
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

    data = mujoco.MjData(m)
    data.qpos[asm.qpos_adr] = q0
    mount = getattr(scenario.target.config, "mount", None) if scenario.target is not None else None
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
    if mount is not None and mount.moving and mount.track:  # the plan rides on the moving target
        planner = TargetTracking(
            planner, data, m, asm.target_body, asm.target_qpos, asm.target_qvel, floating=mount.type == "floating"
        )
    if scenario.insertion.active:  # the outer compliance loop, jam detection, recovery (controllers/insertion.py)
        planner = InsertionSupervisor(planner, scenario.insertion, scenario.sim.control_period)

    tau_max = np.array([m.actuator_ctrlrange[a, 1] for a in asm.act_ids])
    if scenario.robot.max_torque is not None:
        tau_max = np.minimum(tau_max, scenario.robot.max_torque)
    plant = PlantInfo(
        nv=nv,
        joint_names=robot.joint_names,
        tau_max=tau_max,
        q_min=q_min,
        q_max=q_max,
        v_max=robot.velocity_limit.copy(),
        dof_damping=np.array(m.dof_damping[asm.dof_adr]),
        dof_frictionloss=np.array(m.dof_frictionloss[asm.dof_adr]),
        control_period=scenario.sim.control_period,
        q_home=q0.copy(),
    )
    try:
        controller = CONTROLLERS.get(scenario.controller.type)(scenario.controller.config, plant, planner)
    except ScenarioError as exc:
        raise _in_file(exc, file, "controller") from None
    dyn_flags = dict(
        body_frame=controller.needs_body_frame,
        sensor_pose=controller.needs_sensor_pose or scenario.wrench.force_source == "observer",
        world_drift=controller.needs_world_drift,
    )
    if asm.floating_base:  # the base-eliminated snapshot (sim/floating.py), base state read from MjData
        from dockbench.sim.floating import FloatingBaseDynamics  # scipy's LAPACK: imported when a scenario needs it

        fids = asm.floating_frame_ids
        dyn = FloatingBaseDynamics(asm.pin_floating, fids[asm.tool.ee_site], fids[asm.tool.sensor_site], **dyn_flags)
        dyn.bind_base(data.qpos[asm.base_qpos], data.qvel[asm.base_qvel])
    else:
        dyn = Dynamics(asm.pin_model, asm.frame_ids[asm.tool.ee_site], asm.frame_ids[asm.tool.sensor_site], **dyn_flags)

    wp = WrenchPipeline(
        m,
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
    duration = (
        scenario.sim.duration
        if scenario.sim.duration is not None
        else planner.duration + scenario.sim.settle_time + getattr(planner, "reserve_time", 0.0)
    )
    try:
        runtime = asm.tool.make_runtime(m, data, scenario)
    except ScenarioError as exc:
        raise _in_file(exc, file, "tool") from None
    if runtime is not None:
        runtime.bind_dynamics(dyn)  # e.g. the hand keeps the lumped inertia at its current pose
    orbit = None
    if asm.floating_base or (mount is not None and mount.moving):
        base_body = int(m.jnt_bodyid[m.dof_jntid[asm.base_qvel.start]]) if asm.floating_base else -1
        moving = mount is not None and mount.moving
        orbit = OrbitTelemetry(
            m, data, base_body, asm.target_body if moving else -1, asm.base_qpos, asm.base_qvel,
            asm.target_qpos, asm.target_qvel, moving and mount.type == "floating", scenario.sim.timestep,
        )
    return Setup(
        scenario, asm, data, q0, planner, controller, plant, dyn, wp, T_goal, T_start, axis, duration, runtime,
        orbit=orbit, uncertainty=unc,
    )


@functools.lru_cache(maxsize=1)
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


def _signum(exc: BaseException) -> int:
    """The signal behind a KeyboardInterrupt (SIGINT unless it is an :class:`interrupts.Interrupted`)."""
    return exc.signum if isinstance(exc, interrupts.Interrupted) else int(signal.SIGINT)


def _interrupt_message(exc: BaseException, steps: int) -> str:
    name = exc.name if isinstance(exc, interrupts.Interrupted) else "SIGINT"
    what = "terminated (SIGTERM)" if name == "SIGTERM" else "interrupted (Ctrl-C)"
    return f"{what} after {steps} recorded steps; the telemetry recorded so far is kept"


@functools.cache
def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def contiguous_slice(idx: np.ndarray) -> slice | np.ndarray:
    """``idx`` as a slice when its entries are consecutive (indexing MjData with it then gives a view
    that stays valid, MjData's buffers never move), else ``idx`` itself (fancy indexing: a copy)."""
    if len(idx) and np.all(np.diff(idx) == 1):
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


def _derive_pose_channels(tel: Telemetry, n: int) -> None:
    """ee_pos, ee_quat (w, x, y, z) and ee_quat_des of the block's first ``n`` rows from the raw
    T_world_ee (4×4, row-major) and R_world_ee_des (3×3) columns, once per block (before a spill, and
    after the loop): MuJoCo's ``mju_mat2Quat`` vectorised (:func:`sim.lie.mat2quat_batch`, equal to it
    to round-off)."""
    if n == 0:
        return
    T = tel.raw["T_world_ee"][:n].reshape(n, 4, 4)
    tel.arrays["ee_pos"][:n] = T[:, :3, 3]
    mat2quat_batch(T[:, :3, :3].reshape(n, 9), out=tel.arrays["ee_quat"][:n])
    mat2quat_batch(tel.raw["R_world_ee_des"][:n], out=tel.arrays["ee_quat_des"][:n])


def _coalesce(sources: list[np.ndarray]) -> list[np.ndarray]:
    """Merge runs of sources that are consecutive pieces of one contiguous float buffer (e.g. a
    Reference's pos/vel/acc, a WrenchState's four wrenches, the controller's diagnostics) into one
    view each, so that ``np.concatenate`` copies fewer, larger pieces. The values are the same."""
    out: list[np.ndarray] = []
    for a in sources:
        if out:
            b = out[-1]
            if (
                a.ndim == 1 and b.ndim == 1 and a.dtype == b.dtype and a.flags.c_contiguous and b.flags.c_contiguous
                and a.base is not None and a.base is b.base
                and a.ctypes.data == b.ctypes.data + b.nbytes
            ):
                base = a.base
                start = (b.ctypes.data - base.ctypes.data) // base.itemsize
                if base.ndim == 1 and base.flags.c_contiguous:
                    out[-1] = base[start : start + b.size + a.size]
                    continue
        out.append(a)
    return out


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
) -> tuple[Telemetry, str, str, dict[str, float]]:
    """Run the control loop. Returns (telemetry, status, message, timing).

    With ``profile=True`` the timing also holds the wall time [s] spent in each phase
    (``t_physics``, ``t_dynamics``, ``t_controller`` incl. planner, wrench and clipping,
    ``t_telemetry``); the results are identical either way.

    The kernel guard (sim/kernels.py) checks every compiled kernel against its Python reference on the
    first step and then every ``kernel_check`` steps (default :func:`sim.kernels.check_every`; 0 = off);
    what it saw is left in ``setup.guard``. A guarded run equals the unguarded one bit for bit unless a
    kernel disagrees, in which case that component runs its Python reference from that step on.

    ``step_observer`` (:class:`StepObserver`, e.g. the viewer or a live stream from
    :mod:`telemetry.live`) is called every ``step_observer.every`` control steps, after the step's
    telemetry row is recorded and before the plant steps; it returns True to end the run early
    (status ``interrupted``, e.g. the viewer window was closed). Without one the loop pays a single
    ``is not None`` test per step.

    A run of more than ``chunk_rows`` steps spills its telemetry to part files in ``spill_dir`` (None:
    a temporary folder) every ``chunk_rows`` steps, so memory stays flat (:class:`Telemetry`). Status
    ``aborted``: such a write failed (e.g. the disk is full); the parts written are kept. The
    telemetry object is also left in ``setup.telemetry``, for a caller that must save what was
    recorded when a signal interrupts this function after the loop.
    """
    sc = setup.scenario
    m, d = setup.asm.model, setup.data
    T_c = sc.sim.control_period
    nsub = int(round(T_c / sc.sim.timestep))
    duration = setup.duration if duration is None else duration
    n_steps = steps_for(duration, T_c)
    ctrl = setup.controller
    wallclock = {f"ctrl_{n}": ctrl.diag_units.get(n, "s") for n in ctrl.guard_skip_diag}
    extra = {f"ctrl_{n}": ctrl.diag_units.get(n, "") for n in ctrl.diag_names if f"ctrl_{n}" not in wallclock}
    supervisor = setup.planner if isinstance(setup.planner, InsertionSupervisor) else None
    if supervisor is not None:
        extra.update(INSERTION_CHANNELS)
    runtime = setup.runtime
    orbit = setup.orbit
    unc = setup.uncertainty
    shaped = {**(runtime.channels if runtime is not None else {}), **(orbit.channels if orbit is not None else {}),
              **(unc.channels if unc is not None else {})}
    # contact at every substep (per-period maxima; no extra work at one substep per period)
    axis = setup.asm.target.T_world_target[:3, 2] if setup.asm.target is not None else np.array([0.0, 0.0, 1.0])
    substeps = SubstepContact(setup.wrench, m, d, nsub, n_steps, axis)
    resolved = substeps.resolved

    def derive(t: Telemetry, rows: int) -> None:  # per block of rows: before a spill and after the loop
        _derive_pose_channels(t, rows)
        substeps.fill(t.arrays, rows, t.raw.get("substep_peaks"))
        if orbit is not None:
            orbit.derive(t, rows)

    # The EE pose and the desired rotation are copied raw each step (a contiguous 4×4 and 3×3, part of
    # the one row copy), and so are the substep contact maxima of the period before; ee_pos, ee_quat,
    # ee_quat_des and the peak channels are derived from them per block of rows (derive), which costs
    # less than two quaternion conversions per step.
    raw = {"T_world_ee": 16, "R_world_ee_des": 9}
    if resolved:
        raw["substep_peaks"] = 3
    tel = Telemetry(
        n_steps,
        setup.plant.nv,
        extra,
        shaped or None,
        raw={**raw, **(orbit.raw if orbit is not None else {})},
        derived=("ee_pos", "ee_quat", "ee_quat_des", *PEAK_CHANNELS),
        wallclock=wallclock,
        derive=derive,
        spill_dir=spill_dir,
        chunk_rows=chunk_rows,
        recording=sc.telemetry.enabled,
    )
    setup.telemetry = tel

    qadr, dadr, aids = setup.asm.qpos_adr, setup.asm.dof_adr, setup.asm.act_ids
    floating = setup.asm.floating_base

    qs, vs, as_ = contiguous_slice(qadr), contiguous_slice(dadr), contiguous_slice(aids)
    dyn, wp, planner = setup.dynamics, setup.wrench, setup.planner
    ref = Reference()
    cmd = ctrl.make_command()
    tau_max = setup.plant.tau_max
    # the applied (clipped) torque: clipped straight into MjData.ctrl when the arm's actuators are
    # contiguous (a view that stays valid), else into a buffer copied there
    ctrl_is_view = isinstance(as_, slice)
    tau_applied = d.ctrl[as_] if ctrl_is_view else np.zeros(setup.plant.nv)
    # uncertainty (sim/uncertainty.py): F/T noise, a sensing delay, a control delay (the applied torque is
    # then the clipped command of control_delay steps ago, kept apart from this step's clipped command)
    noisy = unc is not None and unc.noisy
    delay_w = unc is not None and unc.sensing_delay > 0
    delay_tau = unc is not None and unc.control_delay > 0
    tau = np.zeros(setup.plant.nv) if delay_tau else tau_applied
    if unc is not None:
        unc.start(n_steps, wp.comp[0:6], wp.state, d.ctrl[as_])
    use_truth = sc.wrench.force_source == "truth"
    observer = None
    if sc.wrench.force_source == "observer":  # sensorless: the momentum observer's estimate (docs/theory/hqp.md)
        from dockbench.controllers.observer import MomentumObserver
        from dockbench.sim.wrench import WrenchState

        observer = MomentumObserver(setup.plant, sc.wrench.observer_gain)
        w_obs = WrenchState()  # keeps wp.state (the F/T reading) intact for telemetry
    mj_step = mujoco.mj_step
    record = sc.telemetry.enabled
    w_qpos = d.warning[mujoco.mjtWarning.mjWARN_BADQPOS]
    w_qvel = d.warning[mujoco.mjtWarning.mjWARN_BADQVEL]
    w_qacc = d.warning[mujoco.mjtWarning.mjWARN_BADQACC]
    w_ctrl = d.warning[mujoco.mjtWarning.mjWARN_BADCTRL]  # MuJoCo zeroes a NaN/Inf ctrl and warns

    # the arm's qpos/qvel: views into MjData (its buffers never move) when the arm's joints are
    # contiguous, as they are for every robot here; otherwise gathered into buffers each step
    gather = not (isinstance(qs, slice) and isinstance(vs, slice))
    q_now = np.zeros(len(qadr)) if gather else d.qpos[qs]
    v_now = np.zeros(len(dadr)) if gather else d.qvel[vs]

    def gather_state() -> None:
        np.take(d.qpos, qadr, out=q_now)
        np.take(d.qvel, dadr, out=v_now)

    if gather:
        gather_state()
    snap = dyn.update(q_now, v_now, 0.0)
    # One telemetry row per step: every source below is updated in place each step (the snapshot,
    # the reference, the command, the wrench state), so the list is built once.
    scal = np.zeros(5)  # t, saturated, tool contacts, all contacts, manipulability
    neg_tau_max = -tau_max
    ws = wp.state
    used = unc.w_delayed.ext_world if delay_w else (w_obs if observer is not None else ws).ext_world
    src = {
        "t": scal[0:1], "q": snap.q, "v": snap.v, "tau_cmd": cmd.tau, "tau_applied": tau_applied,
        "saturated": scal[1:2], "ee_vel": snap.twist_ee_lwa,
        "ee_pos_des": ref.pos, "ee_vel_des": ref.vel, "ee_acc_des": ref.acc, "ee_omega_des": ref.omega,
        "wrench_ext_world": ws.truth_world if use_truth else ws.ext_world,
        "wrench_ext_body": ws.truth_body if use_truth else ws.ext_body,
        "wrench_truth_world": ws.truth_world, "wrench_truth_body": ws.truth_body, "wrench_used_world": used,
        "contact_count": scal[2:3], "contact_count_all": scal[3:4], "manipulability": scal[4:5],
        # raw: views (T and R are C-contiguous and updated in place; test_loop's pose-channel test
        # fails if either ever becomes a copy)
        "T_world_ee": snap.T_world_ee.reshape(16), "R_world_ee_des": ref.R.reshape(9),
        "substep_peaks": substeps.last,
    }
    for k, name in enumerate(ctrl.diag_names):
        src[f"ctrl_{name}"] = cmd.diag[k : k + 1]
    if supervisor is not None:  # reads the wrench the controller reads, and this step's EE pose
        supervisor.bind(w_obs if observer is not None else ws, snap)
        src.update(supervisor.sources)
    if orbit is not None:
        src.update(orbit.sources)  # base / target joint states and the momentum sensors (views of MjData)
    row_sources = _coalesce([src[name] for name in tel.row_channels])
    noise_ch = tel.arrays["ft_noise"] if noisy else None  # written by its owner at the row (extra_shaped)
    block = tel.block
    spill_at, base = tel.spill_at, 0  # the step at which the block is full, the first step it holds
    planner.evaluate(0.0, ref)
    ctrl.reset(snap, ref)

    every = kernels.check_every() if kernel_check is None else kernel_check
    guard = setup.guard = kernels.GuardReport(every)
    # the next guarded step (-1: none): the first step, then every `every` steps while a kernel is bound
    next_check = 0 if every > 0 and "compiled" in kernel_paths(setup).values() else -1

    status, message = "completed", ""
    watch, watch_every = step_observer, 0
    if watch is not None:
        watch.start(setup, tel)  # may set ``every`` from the setup (e.g. a frame rate → steps)
        watch_every = int(watch.every)
        if watch_every < 1:
            watch.finish("error")
            raise ValueError(f"step_observer.every must be an integer >= 1, got {watch.every!r}")
    clock = time.perf_counter
    t_phys = t_dyn = t_ctrl = t_tel = t_tool = 0.0
    t_wall0 = time.perf_counter()
    i = 0
    report_every = max(1, n_steps // 50)
    interrupts.arm()  # Ctrl-C / SIGTERM raise in the loop (a no-op without interrupts.guard())
    try:
        for i in range(n_steps):
            t = i * T_c
            if profile:
                c0 = clock()
            if gather:
                gather_state()
            snap = dyn.update(q_now, v_now, t)
            checking = i == next_check
            if checking:
                guard.checks += 1
                guard.note("dynamics", dyn.check_kernel(), i, t)
            if profile:
                c1 = clock()
                t_dyn += c1 - c0
            if noisy:
                unc.sense(i)
            w = wp.update(d, snap.T_world_ee)
            if checking:
                guard.note("wrench", wp.check_kernel(d, snap.T_world_ee), i, t)
            if use_truth:
                w.ext_world[:] = w.truth_world
                w.ext_body[:] = w.truth_body
            elif observer is not None:
                observer.update(snap, tau_applied)  # the torque applied during the last step (clipped)
                w = observer.fill_wrench_state(snap, w_obs)
            if delay_w:
                w = unc.delay_wrench(w)
            if floating:  # the base's response to the measured wrench joins the snapshot's drift (sim/floating.py)
                dyn.apply_wrench(w.ext_body)
            planner.evaluate(t, ref)
            if checking:
                guard.note("controller", ctrl.compute_checked(snap, ref, w, cmd), i, t)
                next_check = i + every if "compiled" in kernel_paths(setup).values() else -1
            else:
                ctrl.compute(snap, ref, w, cmd)
            np.minimum(cmd.tau, tau_max, out=tau)  # = np.clip(cmd.tau, -τ_max, τ_max), 3× cheaper
            np.maximum(tau, neg_tau_max, out=tau)
            if delay_tau:
                unc.delay_torque(tau, tau_applied)
            if not ctrl_is_view:
                d.ctrl[as_] = tau_applied
            if profile:
                c2 = clock()
                t_ctrl += c2 - c1
            if record:
                if i == spill_at:  # a long run: the block is full, write it to disk and start over
                    spill_at, base = tel.spill(i), i
                # saturated ⇔ clipping changed a joint torque (⇔ |τ_cmd| > τ_max for some joint)
                scal[:] = (t, cmd.tau.tolist() != tau.tolist(), wp.state.contact_count, d.ncon, snap.manipulability)
                np.concatenate(row_sources, out=block[i - base])  # the whole step in one copy
                if runtime is not None:
                    runtime.record(i - base, tel.arrays)
                if noisy:
                    noise_ch[i - base] = unc.now  # this step's F/T noise (sim/uncertainty.py)
            tel.n = i + 1
            if watch is not None and i % watch_every == 0 and watch.step(i, t):
                status, message = "interrupted", f"{watch.stop_reason} at t = {t:.4f} s (step {i})"
                break
            if profile:
                c3 = clock()
                t_tel += c3 - c2
            if runtime is not None:
                runtime.pre_step(t)
                if profile:
                    c4 = clock()
                    t_tool += c4 - c3
                    c3 = c4
            if resolved:  # the substeps one by one, reading the contact after each
                substeps.step(i)
            else:
                mj_step(m, d, nsub)  # the substeps of one control period, looped inside MuJoCo
            if profile:
                t_phys += clock() - c3
            # MuJoCo checks ctrl, qpos, qvel and qacc for NaN/Inf (and |x| > mjMAXVAL) in every mj_step,
            # zeroes the ctrl or resets the state, and counts a warning: the counters are the signal.
            if w_qpos.number + w_qvel.number + w_qacc.number + w_ctrl.number:
                status = "diverged"
                message = (
                    f"state or torque became NaN/Inf after t = {t:.4f} s (step {i}); last commanded torque "
                    f"{np.array2string(cmd.tau, precision=2)} N·m; telemetry up to this step is kept"
                )
                break
            if progress is not None and i % report_every == 0:
                progress(t, duration)
        interrupts.disarm()
    except KeyboardInterrupt as exc:
        interrupts.disarm()
        status, message = "interrupted", _interrupt_message(exc, tel.n)
        setup.interrupted_by = _signum(exc)
    except TelemetryWriteError as exc:
        status = "aborted"
        message = (
            f"telemetry could not be written at step {i} ({exc.strerror}); the simulation stopped; the "
            f"{tel.base} steps written before are kept, the {tel.n - tel.base} in memory only if they fit"
        )
    except (np.linalg.LinAlgError, FloatingPointError, ValueError) as exc:
        status = "diverged"
        message = (
            f"numerical failure at t = {i * T_c:.4f} s (step {i}): {exc}; the state was "
            f"q = {np.array2string(d.qpos[qs], precision=3)}; telemetry up to this step is kept"
        )
    except Exception as exc:  # noqa: BLE001 - a bug must not lose the telemetry recorded so far
        status = "error"
        message = (
            f"unexpected {type(exc).__name__} at t = {i * T_c:.4f} s (step {i}): {exc}; telemetry up to "
            "this step is kept"
        )
        setup.error = traceback.format_exc()
    finally:
        interrupts.disarm()
        if watch is not None:
            watch.finish(status)
    try:
        tel.finish()  # the derived channels of the rows in memory (and, spilled, the last part)
    except TelemetryWriteError as exc:
        status = "aborted"
        message = f"{message}; " if message else ""
        message += f"the last {tel.n - tel.base} steps could not be written to disk ({exc.strerror})"
    wall = time.perf_counter() - t_wall0
    sim_time = tel.n * T_c
    timing = {
        "wall_s": wall,
        "sim_s": sim_time,
        "real_time_factor": sim_time / wall if wall > 0 else float("inf"),
        "steps": tel.n,
        "us_per_step": 1e6 * wall / max(tel.n, 1),
    }
    if profile:
        timing.update(
            t_physics=t_phys, t_dynamics=t_dyn, t_controller=t_ctrl, t_telemetry=t_tel, t_tool=t_tool
        )
    return tel, status, message, timing


def kernel_paths(setup: Setup) -> dict[str, str]:
    """Which implementation ran each hot-path component: ``compiled`` (a C kernel, sim/kernels.py) or
    ``python`` (the reference; also every component without a kernel)."""
    return {
        "dynamics": setup.dynamics.kernel,
        "controller": setup.controller.kernel,
        "wrench": setup.wrench.kernel,
    }


def _mount_type(scenario: Scenario) -> str | None:
    """The target's mount type (sim/mounts.py), None without a target."""
    if scenario.target is None:
        return None
    mount = getattr(scenario.target.config, "mount", None)
    return mount.type if mount is not None else "fixed"


def _meta(setup: Setup, timing: dict[str, float], status: str, tel: Telemetry) -> dict[str, Any]:
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
        "kernel_guard": setup.guard.to_dict() if setup.guard is not None else None,
        "kernel_mismatch": [m.to_dict() for m in setup.guard.mismatches] if setup.guard is not None else [],
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
#: memory the metrics take per recorded step [bytes]: they work on whole (N,)/(N, 6) vectors (≈ 350 B
#: per step measured on iiwa14_docking_twophase × 10, tests/test_run_folder.py); the telemetry itself
#: is flat in the duration, the metrics are not
METRICS_BYTES_PER_STEP = 512


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
    that the memory the metrics need (:data:`METRICS_BYTES_PER_STEP`) is available. Returns the
    telemetry size [bytes].

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
        mem = n * METRICS_BYTES_PER_STEP
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
    with interrupts.guard():
        folder = RunFolder.create(out_root, folder_name(scenario.name)) if out_root is not None else None
        try:
            if setup is None:
                setup = build(scenario)
            setup.telemetry, setup.error, setup.interrupted_by = None, "", None
            length = setup.duration if duration is None else duration
            key, what = _duration_key(scenario, duration, setup)
            check_budget(setup, length, folder.path if folder else None, key, what)
            if folder is not None:
                with interrupts.deferred():
                    if not folder.attempt("meta.json", write_json, folder.file("meta.json"), _preliminary_meta(setup)):
                        raise RunFolderError(f"cannot write into the run folder {folder.path}: {folder.problems[-1]}")
            tel, status, message, timing = simulate(
                setup, duration, progress, kernel_check=kernel_check, step_observer=step_observer,
                spill_dir=folder.path if folder else None, chunk_rows=chunk_rows,
            )
        except KeyboardInterrupt as exc:
            tel = setup.telemetry if setup is not None else None
            if tel is None or tel.n == 0:
                if folder is not None:
                    folder.abandon()
                raise
            status, message = "interrupted", _interrupt_message(exc, tel.n)
            setup.interrupted_by = _signum(exc)
            try:
                with interrupts.deferred():
                    tel.finish()
            except TelemetryWriteError as werr:
                status, message = "aborted", f"{message}; the last steps could not be written ({werr.strerror})"
            steps = tel.n
            timing = {"wall_s": 0.0, "sim_s": steps * scenario.sim.control_period, "steps": steps}
        except BaseException:
            if folder is not None and (setup is None or setup.telemetry is None or setup.telemetry.n == 0):
                folder.abandon()
            raise
        return _finish_run(setup, folder, tel, status, message, timing)


def _finish_run(
    setup: Setup, folder: RunFolder | None, tel: Telemetry, status: str, message: str, timing: dict[str, Any]
) -> RunResult:
    """Everything after the loop (see :func:`run`): telemetry first, then meta, metrics, summary, the
    manifest and the rename, each write guarded, signals deferred while writing."""
    scenario = setup.scenario
    errors: list[str] = [setup.error] if setup.error else []
    timing = dict(timing)
    try:
        wall = _wallclock_summary(tel)
    except (OSError, ValueError):  # a part that cannot be read back (full disk): no timing summary
        wall = {}
    if wall:
        timing["wallclock"] = wall
    meta = _meta(setup, timing, status, tel)
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
            complete = status == "completed" and (tel.n - 1) * scenario.sim.control_period >= planned - 1e-9
            instability = detect_instability(channels, meta) if status == "completed" else None
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
            message = (f"{_interrupt_message(exc, tel.n)} (all {tel.n} steps were simulated; interrupted after "
                       "the loop, before the metrics were computed)")
            setup.interrupted_by = _signum(exc)
        except Exception as exc:  # noqa: BLE001 - a metrics bug must not lose the run folder
            interrupts.disarm()
            status, verdict, metrics, gates = "error", "INCOMPLETE", {}, []
            message = f"the metrics failed ({type(exc).__name__}: {exc}); the telemetry of all {tel.n} steps is kept"
            errors.append(traceback.format_exc())
        finally:
            interrupts.disarm()
    meta["status"] = status
    result = RunResult(status, verdict, metrics, gates, channels, meta, None, message, timing)
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
            if status == "aborted" and not folder.problems:
                folder.problems.append(message)
            result.run_dir = folder.finalize(tel.n)
            result.problems = list(folder.problems)
    pending = interrupts.take_pending()
    result.signal = setup.interrupted_by if status == "interrupted" else pending
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
