"""One control cycle, composed from stages chosen when the run is built (docs/architecture.md, "One control
cycle").

Every control step of period T_c runs the same seven stages::

    snap = observe(t)          # the state and ONE Pinocchio pass (sim/dynamics.py, sim/floating.py)
    w    = sense(i, snap)      # the force source: F/T pipeline | truth | momentum observer (+ noise, delay,
                               #   and the floating base's response to the measured wrench)
    plan(t, ref)               # the world-frame reference (planners/, the insertion supervisor)
    act(snap, w)               # the law's τ, clipped to ±τ_max, (delayed) into MjData.ctrl
    stop = record(i, t)        # one preallocated telemetry row (+ the tool's channels, a step observer)
    stop = stop or plant(i, t) # k MuJoCo substeps (one by one when the contact is resolved per substep),
                               #   True when the state or torque became NaN/Inf

Which variant of a stage runs is decided once, in :class:`Cycle`'s constructor, from the scenario and the
setup — a fixed or floating base, the force source, noise and delays, a tool runtime, a step observer,
recording on or off — so the step itself has no per-feature branch. The kernel guard (sim/kernels.py) and
the profiler are wrappers around the whole step: the guard runs a *checked* composition of the same stages
(each compiled kernel compared with its Python reference) on its check steps, the profiler times each stage.

:func:`sim.loop.simulate` drives a :class:`Cycle` over the run and returns one :class:`Outcome`.
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np
from dockbench.controllers.insertion import CHANNELS as INSERTION_CHANNELS
from dockbench.controllers.insertion import InsertionSupervisor
from dockbench.planners.base import Reference
from dockbench.sim import interrupts, kernels
from dockbench.sim.lie import mat2quat_batch
from dockbench.sim.wrench import PEAK_CHANNELS, SubstepContact
from dockbench.telemetry.gates import SEAT_TOLERANCE
from dockbench.telemetry.log import CHUNK_ROWS, Telemetry, TelemetryWriteError
from dockbench.telemetry.rows import RowWriter

if TYPE_CHECKING:  # the loop module imports this one
    from dockbench.sim.loop import Setup, StepObserver


class Status(str, Enum):
    """How a run ended. A ``str`` enum: ``Status.COMPLETED == "completed"`` (meta.json and summary.json keep
    the plain strings)."""

    #: ran every step
    COMPLETED = "completed"
    #: ran to its end but flagged by telemetry.gates.detect_instability (set after the loop; verdict FAIL)
    UNSTABLE = "unstable"
    #: ended early by ``sim.end_after_seated``: the tool tip stayed seated that long (a complete run)
    SEATED = "seated"
    #: the state or the torque became NaN/Inf, or a numerical failure in the step
    DIVERGED = "diverged"
    #: Ctrl-C / SIGTERM, or a step observer ended the run (e.g. the viewer was closed)
    INTERRUPTED = "interrupted"
    #: the telemetry could not be written (e.g. the disk is full)
    ABORTED = "aborted"
    #: an unexpected exception in the step (a bug); its traceback is in :attr:`Outcome.error`
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


@dataclass
class Outcome:
    """What :func:`sim.loop.simulate` returns.

    Attributes:
        telemetry: the recorded channels (:class:`telemetry.log.Telemetry`; ``telemetry.n`` steps).
        status: how the loop ended (:class:`Status`).
        message: why it ended early (empty when it completed).
        timing: wall time [s], simulated time [s], real-time factor, steps, µs per step; with ``profile``
            the wall time per stage (``t_dynamics``, ``t_controller``, ``t_telemetry``, ``t_tool``,
            ``t_physics``).
        guard: what the kernel guard checked and found (sim/kernels.py).
        error: the traceback of an unexpected exception (status ``error``), else "".
        interrupted_by: the signal that interrupted the loop (status ``interrupted``), else None.

    It unpacks and indexes as the tuple ``(telemetry, status, message, timing)`` (``tel, status, msg, timing =
    simulate(setup)``, ``simulate(setup)[0]``), as scripts written against the earlier 4-tuple do.
    """

    telemetry: Telemetry
    status: Status
    message: str
    timing: dict[str, float]
    guard: kernels.GuardReport
    error: str = ""
    interrupted_by: int | None = None

    def _legacy(self) -> tuple[Telemetry, Status, str, dict[str, float]]:
        return self.telemetry, self.status, self.message, self.timing

    def __iter__(self):
        return iter(self._legacy())

    def __getitem__(self, k: int | slice) -> Any:
        return self._legacy()[k]

    def __len__(self) -> int:
        return 4


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


def kernel_paths(setup: Setup) -> dict[str, str]:
    """Which implementation runs each hot-path component: ``compiled`` (a C kernel, sim/kernels.py) or
    ``python`` (the reference; also every component without a kernel)."""
    return {
        "dynamics": setup.dynamics.kernel,
        "controller": setup.controller.kernel,
        "wrench": setup.wrench.kernel,
    }


class Cycle:
    """The control cycle of one run: the telemetry it records into and the step, composed from the stages
    the setup needs (module docstring).

    Args:
        setup: a :func:`sim.loop.build` result (not changed).
        n_steps: control steps to run.
        profile: time each stage (:attr:`Outcome.timing`); the results are identical either way.
        kernel_check: the kernel guard's period in control steps (None: :func:`sim.kernels.check_every`;
            0: off). A guarded run equals the unguarded one bit for bit unless a kernel disagrees, and then
            that component runs its Python reference from that step on.
        step_observer: called every ``step_observer.every`` steps after the row is recorded and before the
            plant steps; True from it ends the run (status ``interrupted``).
        spill_dir, chunk_rows: a run of more than ``chunk_rows`` steps spills its telemetry to part files
            in ``spill_dir`` (None: a temporary folder).
        shape_reference: ``shape_reference(t, ref)``, called in the plan stage after the planner has written
            ``ref`` (e.g. a learned policy's offset of the reference pose, dockbench/gym.py); None: the
            planner's reference as it is. With one, :attr:`step_unshaped` is the step without it (a caller
            whose shaping is the identity for a while steps that instead).
        torque_input: an (nv,) array whose value, read each step, replaces the law's τ in the act stage (it is
            still clipped to ±τ_max and delayed like the law's); None: the law computes τ.

    Attributes:
        telemetry: the run's :class:`Telemetry` (exists from construction on, so a caller can save what was
            recorded whatever interrupts the loop).
        step: ``step(i) -> bool``: control step ``i``; True when the run must stop (see :attr:`stopped`).
        step_unshaped: with ``shape_reference``, the same step with the planner's reference as it is (the
            same stages and the same kernel guard schedule; a run may use either for any step); else None.
        stopped: after a True from :attr:`step`: (:class:`Status`, message).
        guard: the kernel guard's report.
    """

    def __init__(
        self,
        setup: Setup,
        n_steps: int,
        *,
        profile: bool = False,
        kernel_check: int | None = None,
        step_observer: StepObserver | None = None,
        spill_dir: str | Path | None = None,
        chunk_rows: int = CHUNK_ROWS,
        shape_reference: Callable[[float, Reference], None] | None = None,
        torque_input: np.ndarray | None = None,
    ):
        self.setup, self.n_steps = setup, n_steps
        self.shape_reference, self.torque_input = shape_reference, torque_input
        sc = setup.scenario
        self.T_c = sc.sim.control_period
        self.stopped: tuple[Status, str] = (Status.COMPLETED, "")
        self.times = {"t_dynamics": 0.0, "t_controller": 0.0, "t_telemetry": 0.0, "t_tool": 0.0, "t_physics": 0.0}
        self.profile = profile
        m, d = setup.asm.model, setup.data
        self.nsub = int(round(self.T_c / sc.sim.timestep))
        self.substeps = SubstepContact(setup.wrench, m, d, self.nsub, n_steps, self._mating_axis(),
                                       sensor_mean=sc.wrench.sensor_sampling == "mean")
        self.telemetry = self._telemetry(spill_dir, chunk_rows)
        self.ref, self.cmd = Reference(), setup.controller.make_command()
        self._bind_buffers()
        every = kernels.check_every() if kernel_check is None else kernel_check
        self.guard = kernels.GuardReport(every)
        self.watch = step_observer
        self.step = self._compose()

    # ---------------------------------------------------------------- construction
    def _mating_axis(self) -> np.ndarray:
        target = self.setup.asm.target
        return target.T_world_target[:3, 2] if target is not None else np.array([0.0, 0.0, 1.0])

    def _telemetry(self, spill_dir: str | Path | None, chunk_rows: int) -> Telemetry:
        """The preallocated telemetry: every channel of the law, the supervisor, the tool, the floating
        bodies and the uncertainty models; pose and peak channels derived per block of rows."""
        setup = self.setup
        ctrl, runtime, orbit, unc = setup.controller, setup.runtime, setup.orbit, setup.uncertainty
        wallclock = {f"ctrl_{n}": ctrl.diag_units.get(n, "s") for n in ctrl.guard_skip_diag}
        extra = {f"ctrl_{n}": ctrl.diag_units.get(n, "") for n in ctrl.diag_names if f"ctrl_{n}" not in wallclock}
        if isinstance(setup.planner, InsertionSupervisor):
            extra.update(INSERTION_CHANNELS)
        shaped = {**(runtime.channels if runtime is not None else {}), **(orbit.channels if orbit is not None else {}),
                  **(unc.channels if unc is not None else {})}
        substeps = self.substeps

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
        if substeps.resolved:
            raw["substep_peaks"] = 3
        return Telemetry(
            self.n_steps, setup.plant.nv, extra, shaped or None,
            raw={**raw, **(orbit.raw if orbit is not None else {})},
            derived=("ee_pos", "ee_quat", "ee_quat_des", *PEAK_CHANNELS),
            wallclock=wallclock, derive=derive, spill_dir=spill_dir, chunk_rows=chunk_rows,
            recording=setup.scenario.telemetry.enabled,
        )

    def _bind_buffers(self) -> None:
        """The arrays the stages share, bound once: views into MjData where the arm's joints and actuators
        are contiguous (their buffers never move), buffers gathered each step otherwise."""
        setup, d = self.setup, self.setup.data
        asm, nv = setup.asm, setup.plant.nv
        qs, vs, as_ = contiguous_slice(asm.qpos_adr), contiguous_slice(asm.dof_adr), contiguous_slice(asm.act_ids)
        self.qs, self.as_ = qs, as_
        self.gather = not (isinstance(qs, slice) and isinstance(vs, slice))
        self.q_now = np.zeros(len(asm.qpos_adr)) if self.gather else d.qpos[qs]
        self.v_now = np.zeros(len(asm.dof_adr)) if self.gather else d.qvel[vs]
        # the applied (clipped) torque: clipped straight into MjData.ctrl when the arm's actuators are
        # contiguous (a view that stays valid), else into a buffer copied there
        self.ctrl_is_view = isinstance(as_, slice)
        self.tau_applied = d.ctrl[as_] if self.ctrl_is_view else np.zeros(nv)
        unc = setup.uncertainty
        self.delay_tau = unc is not None and unc.control_delay > 0
        # this step's clipped command; with a control delay kept apart from the torque applied now
        self.tau = np.zeros(nv) if self.delay_tau else self.tau_applied
        if unc is not None:
            unc.start(self.n_steps, setup.wrench.comp[0:6], setup.wrench.state, d.ctrl[as_])
        self.observer = None
        if setup.scenario.wrench.force_source == "observer":  # sensorless: docs/theory/hqp.md
            from dockbench.controllers.observer import MomentumObserver
            from dockbench.sim.wrench import WrenchState

            self.observer = MomentumObserver(setup.plant, setup.scenario.wrench.observer_gain)
            self.w_obs = WrenchState()  # keeps the F/T reading (wrench.state) intact for telemetry

    # ---------------------------------------------------------------- stages
    def _observe(self, checked: bool) -> Callable[[float], Any]:
        """The state and the snapshot: ``observe(t) -> snap``."""
        dyn, q_now, v_now, d = self.setup.dynamics, self.q_now, self.v_now, self.setup.data
        update = dyn.update
        if self.gather:
            qadr, dadr = self.setup.asm.qpos_adr, self.setup.asm.dof_adr

            def observe(t: float) -> Any:
                np.take(d.qpos, qadr, out=q_now)
                np.take(d.qvel, dadr, out=v_now)
                return update(q_now, v_now, t)
        else:
            def observe(t: float) -> Any:
                return update(q_now, v_now, t)
        if not checked:
            return observe
        guard, inner = self.guard, observe

        def observe_checked(t: float) -> Any:
            snap = inner(t)
            guard.checks += 1
            guard.note("dynamics", dyn.check_kernel(), self._i, t)
            return snap

        return observe_checked

    def _sense(self, checked: bool) -> Callable[[int, Any], Any]:
        """The force source: ``sense(i, snap) -> w`` (a WrenchState). The F/T pipeline reads the sensors of
        the last MuJoCo step; the scenario's ``wrench.force_source`` picks what the law is given (the
        pipeline's estimate, the contact truth, the momentum observer's estimate), the uncertainty models
        add noise before and a delay after, and a floating base takes the base's response to it."""
        setup = self.setup
        wp, d, unc, sc = setup.wrench, setup.data, setup.uncertainty, setup.scenario
        update, guard = wp.update, self.guard
        if unc is not None and unc.noisy:  # F/T noise enters the raw reading (sim/uncertainty.py)
            unc_sense = unc.sense

            def read(i: int, snap: Any) -> Any:
                unc_sense(i)
                return update(d, snap.T_world_ee)
        else:
            def read(i: int, snap: Any) -> Any:
                return update(d, snap.T_world_ee)
        if checked:
            plain_read = read

            def read(i: int, snap: Any) -> Any:  # noqa: F811 - the checked form of the same reading
                w = plain_read(i, snap)
                guard.note("wrench", wp.check_kernel(d, snap.T_world_ee), i, i * self.T_c)
                return w
        sense = read
        if sc.wrench.force_source == "truth":
            base = sense

            def sense(i: int, snap: Any) -> Any:
                w = base(i, snap)
                w.ext_world[:] = w.truth_world
                w.ext_body[:] = w.truth_body
                return w
        elif self.observer is not None:
            base, obs, w_obs, tau_applied = sense, self.observer, self.w_obs, self.tau_applied

            def sense(i: int, snap: Any) -> Any:
                base(i, snap)
                obs.update(snap, tau_applied)  # the torque applied during the last step (clipped)
                return obs.fill_wrench_state(snap, w_obs)
        if unc is not None and unc.sensing_delay > 0:
            undelayed, delay = sense, unc.delay_wrench

            def sense(i: int, snap: Any) -> Any:
                return delay(undelayed(i, snap))
        if setup.asm.floating_base:  # the base's response to the measured wrench joins the drift (sim/floating.py)
            unbased, apply_wrench = sense, setup.dynamics.apply_wrench

            def sense(i: int, snap: Any) -> Any:
                w = unbased(i, snap)
                apply_wrench(w.ext_body)
                return w
        return sense

    def _act(self, checked: bool) -> Callable[[Any, Any], None]:
        """The law and the actuators: ``act(snap, w)``: τ = law(snap, ref, w), clipped to ±τ_max (the
        robot's limits or the scenario's max_torque), delayed by the control delay, into MjData.ctrl."""
        setup = self.setup
        ctrl, ref, cmd, tau, tau_applied = setup.controller, self.ref, self.cmd, self.tau, self.tau_applied
        tau_max = setup.plant.tau_max
        neg_tau_max = -tau_max
        compute = ctrl.compute
        if checked:
            guard = self.guard

            def compute(snap: Any, ref: Any, w: Any, cmd: Any) -> None:  # noqa: F811
                guard.note("controller", ctrl.compute_checked(snap, ref, w, cmd), self._i, self._i * self.T_c)
        if self.torque_input is not None:  # τ from outside (a policy in torque mode); the law does not run
            given = self.torque_input

            def compute(snap: Any, ref: Any, w: Any, cmd: Any) -> None:  # noqa: F811
                cmd.tau[:] = given

        minimum, maximum = np.minimum, np.maximum

        def act(snap: Any, w: Any) -> None:
            compute(snap, ref, w, cmd)
            minimum(cmd.tau, tau_max, out=tau)  # = np.clip(cmd.tau, -τ_max, τ_max), 3× cheaper
            maximum(tau, neg_tau_max, out=tau)

        unc = setup.uncertainty
        if self.delay_tau:
            clip, delay_torque = act, unc.delay_torque

            def act(snap: Any, w: Any) -> None:
                clip(snap, w)
                delay_torque(tau, tau_applied)
        if not self.ctrl_is_view:
            unplaced, ctrl_buf, as_ = act, setup.data.ctrl, self.as_

            def act(snap: Any, w: Any) -> None:
                unplaced(snap, w)
                ctrl_buf[as_] = tau_applied
        return act

    def _record(self, snap: Any) -> Callable[[int, float], bool]:
        """One telemetry row: ``record(i, t) -> stop``. Every source is updated in place each step (the
        snapshot, the reference, the command, the wrench state), so the row's source list is built once and
        the row is one copy. True when a step observer ends the run."""
        setup, tel = self.setup, self.telemetry
        d, wp, ctrl, cmd, ref = setup.data, setup.wrench, setup.controller, self.cmd, self.ref
        unc, runtime, orbit = setup.uncertainty, setup.runtime, setup.orbit
        use_truth = setup.scenario.wrench.force_source == "truth"
        scal = np.zeros(5)  # t, saturated, tool contacts, all contacts, manipulability
        ws = wp.state
        delay_w = unc is not None and unc.sensing_delay > 0
        used = unc.w_delayed.ext_world if delay_w else (self.w_obs if self.observer is not None else ws).ext_world
        src = {
            "t": scal[0:1], "q": snap.q, "v": snap.v, "tau_cmd": cmd.tau, "tau_applied": self.tau_applied,
            "saturated": scal[1:2], "ee_vel": snap.twist_ee_lwa,
            "ee_pos_des": ref.pos, "ee_vel_des": ref.vel, "ee_acc_des": ref.acc, "ee_omega_des": ref.omega,
            "wrench_ext_world": ws.truth_world if use_truth else ws.ext_world,
            "wrench_ext_body": ws.truth_body if use_truth else ws.ext_body,
            "wrench_truth_world": ws.truth_world, "wrench_truth_body": ws.truth_body, "wrench_used_world": used,
            "contact_count": scal[2:3], "contact_count_all": scal[3:4], "manipulability": scal[4:5],
            # raw: views (T and R are C-contiguous and updated in place; test_loop's pose-channel test
            # fails if either ever becomes a copy)
            "T_world_ee": snap.T_world_ee.reshape(16), "R_world_ee_des": ref.R.reshape(9),
            "substep_peaks": self.substeps.last,
        }
        for k, name in enumerate(ctrl.diag_names):
            src[f"ctrl_{name}"] = cmd.diag[k : k + 1]
        supervisor = setup.planner if isinstance(setup.planner, InsertionSupervisor) else None
        if supervisor is not None:  # reads the wrench the controller reads, and this step's EE pose
            supervisor.bind(self.w_obs if self.observer is not None else ws, snap)
            src.update(supervisor.sources)
        if orbit is not None:
            src.update(orbit.sources)  # base / target joint states and the momentum sensors (views of MjData)
        row_sources = _coalesce([src[name] for name in tel.row_channels])
        spill = [tel.spill_at, 0]  # the step at which the block is full, the first step it holds

        if not setup.scenario.telemetry.enabled:
            def record(i: int, t: float) -> bool:
                tel.n = i + 1
                return False
        else:
            # the whole step in one copy (telemetry/rows.py); saturated ⇔ clipping changed a joint torque
            self.rows = RowWriter(row_sources, tel.block, scal, cmd.tau, self.tau)
            write = self.rows.write

            def record(i: int, t: float) -> bool:
                if i == spill[0]:  # a long run: the block is full, write it to disk and start over
                    spill[0], spill[1] = tel.spill(i), i
                write(i - spill[1], t, ws.contact_count, d.ncon, snap.manipulability)
                tel.n = i + 1
                return False

            extras = []
            if runtime is not None:
                extras.append(lambda row: runtime.record(row, tel.arrays))
            if unc is not None and unc.noisy:
                noise_ch = tel.arrays["ft_noise"]  # written by its owner at the row (extra_shaped)

                def write_noise(row: int) -> None:
                    noise_ch[row] = unc.now  # this step's F/T noise (sim/uncertainty.py)

                extras.append(write_noise)
            if extras:
                row_only = record

                def record(i: int, t: float) -> bool:
                    row_only(i, t)
                    row = i - spill[1]
                    for write in extras:
                        write(row)
                    return False
        return record

    def _watched(self, record: Callable[[int, float], bool]) -> Callable[[int, float], bool]:
        """``record`` followed, every ``watch.every`` steps, by the step observer (viewer, live stream): it sees
        the row just recorded and the state before the plant steps; True from it ends the run."""
        watch = self.watch
        watch.start(self.setup, self.telemetry)  # may set ``every`` from the setup (a frame rate → steps)
        every = int(watch.every)
        if every < 1:
            watch.finish("error")
            raise ValueError(f"step_observer.every must be an integer >= 1, got {watch.every!r}")

        def record_watched(i: int, t: float) -> bool:
            record(i, t)
            if i % every == 0 and watch.step(i, t):
                self.stopped = (Status.INTERRUPTED, f"{watch.stop_reason} at t = {t:.4f} s (step {i})")
                return True
            return False

        return record_watched

    def _ended_when_seated(self, record: Callable[[int, float], bool], snap: Any) -> Callable[[int, float], bool]:
        """``record`` followed by the seat rule of ``sim.end_after_seated`` (h [s]): the step's tip position p
        (the row's ``ee_pos``) is seated when |s − d| ≤ :data:`~telemetry.gates.SEAT_TOLERANCE`, with
        d = −z_Dᵀ(p − o_D) its depth below the target's mouth (z_D, o_D: the target frame's axis and origin,
        world) and s the seat depth — the test :func:`telemetry.metrics.time_to_seat` applies to every sample.
        Once N = ⌈h / T_c⌉ steps have followed the first step of an unbroken seated run, the run ends after
        this step's row (status ``seated``): its last sample is at t_seat + N T_c, with t_seat what
        ``docking.time_to_seat`` then reports. :func:`sim.loop.build` has checked that the target is a fixed
        mating target with a seat depth."""
        setup = self.setup
        target = setup.asm.target
        hold, T_c = float(setup.scenario.sim.end_after_seated), self.T_c
        seat, tol = float(target.depth_total), SEAT_TOLERANCE
        z_D = target.T_world_target[:3, 2].copy()
        o_D = target.T_world_target[:3, 3].copy()
        need = max(1, math.ceil(hold / T_c - 1e-9))
        p = snap.T_world_ee[:3, 3]  # a view: the snapshot is updated in place every step
        d = np.empty(3)  # p − o_D, written in place (no array per step)
        first = [-1]  # the first step of the current seated run, -1 while not seated

        def record_seated(i: int, t: float) -> bool:
            if record(i, t):
                return True
            np.subtract(p, o_D, out=d)
            if abs(seat + float(z_D @ d)) > tol:
                first[0] = -1
            elif first[0] < 0:
                first[0] = i
            elif i - first[0] >= need:
                self.stopped = (Status.SEATED, (
                    f"the tip stayed seated (within {1e3 * tol:g} mm of the seat depth) from "
                    f"t = {first[0] * T_c:.4f} s to t = {t:.4f} s: ended by sim.end_after_seated = {hold:g} s"))
                return True
            return False

        return record_seated

    def _plant(self) -> Callable[[int, float], bool]:
        """The plant: ``plant(i, t) -> diverged``: the k = T_c / timestep MuJoCo substeps of one control
        period (looped inside MuJoCo, or one at a time reading the contact after each when k > 1:
        sim/wrench.SubstepContact), after the tool runtime's pre-step (e.g. the hand's joint targets).
        MuJoCo checks ctrl, qpos, qvel and qacc for NaN/Inf (and |x| > mjMAXVAL) in every mj_step, zeroes
        the ctrl or resets the state and counts a warning: the counters are the signal."""
        setup = self.setup
        m, d, nsub, cmd = setup.asm.model, setup.data, self.nsub, self.cmd
        w_qpos = d.warning[mujoco.mjtWarning.mjWARN_BADQPOS]
        w_qvel = d.warning[mujoco.mjtWarning.mjWARN_BADQVEL]
        w_qacc = d.warning[mujoco.mjtWarning.mjWARN_BADQACC]
        w_ctrl = d.warning[mujoco.mjtWarning.mjWARN_BADCTRL]  # MuJoCo zeroes a NaN/Inf ctrl and warns

        def diverged(i: int, t: float) -> bool:
            self.stopped = (
                Status.DIVERGED,
                f"state or torque became NaN/Inf after t = {t:.4f} s (step {i}); last commanded torque "
                f"{np.array2string(cmd.tau, precision=2)} N·m; telemetry up to this step is kept",
            )
            return True

        if self.substeps.resolved:  # the substeps one by one, reading the contact after each
            substep = self.substeps.step

            def plant(i: int, t: float) -> bool:
                substep(i)
                return bool(w_qpos.number + w_qvel.number + w_qacc.number + w_ctrl.number) and diverged(i, t)
        else:
            mj_step = mujoco.mj_step

            def plant(i: int, t: float) -> bool:
                mj_step(m, d, nsub)  # the substeps of one control period, looped inside MuJoCo
                return bool(w_qpos.number + w_qvel.number + w_qacc.number + w_ctrl.number) and diverged(i, t)
        runtime = setup.runtime
        if runtime is not None:
            physics, pre_step = plant, runtime.pre_step

            def plant(i: int, t: float) -> bool:
                pre_step(t)
                return physics(i, t)
        if setup.culling is not None:  # the boxes out of the tool's reach leave collision detection for the period
            culled, cull = plant, setup.culling.update

            def plant(i: int, t: float) -> bool:
                cull()
                return culled(i, t)
        return plant

    # ---------------------------------------------------------------- composition
    def _timed(self, key: str, f: Callable) -> Callable:
        """The profiler's wrapper: ``f`` with its wall time added to ``times[key]``."""
        times, clock = self.times, time.perf_counter

        def timed(*args: Any) -> Any:
            c = clock()
            out = f(*args)
            times[key] += clock() - c
            return out

        return timed

    def _compose(self) -> Callable[[int], bool]:
        """The step: the plain composition of the stages, or, with the kernel guard on and a kernel bound,
        the checked composition on the guard's steps (the first, then every ``guard.every``). With
        ``shape_reference`` also :attr:`step_unshaped` (the guard's schedule shared between the two)."""
        setup = self.setup
        snap = self._observe(checked=False)(0.0)  # the initial state's snapshot, as the first step reads it
        self.record = self._record(snap)
        self.plant = self._plant()
        setup.planner.evaluate(0.0, self.ref)
        setup.controller.reset(snap, self.ref)
        if self.watch is not None:
            self.record = self._watched(self.record)
        if setup.scenario.sim.end_after_seated is not None:
            self.record = self._ended_when_seated(self.record, snap)
        shaped = self.shape_reference is not None
        every = self.guard.every
        if every <= 0 or "compiled" not in kernel_paths(setup).values():
            self.step_unshaped = self._step_of(checked=False, shaped=False) if shaped else None
            return self._step_of(checked=False, shaped=shaped)
        next_check = [0]  # the guard's next step, whichever composition runs it
        self.step_unshaped = self._guarded(next_check, shaped=False) if shaped else None
        return self._guarded(next_check, shaped=shaped)

    def _guarded(self, next_check: list[int], shaped: bool) -> Callable[[int], bool]:
        """The plain composition, and the checked one on the steps ``next_check[0]`` names."""
        setup, every = self.setup, self.guard.every
        plain = self._step_of(checked=False, shaped=shaped)
        checked = self._step_of(checked=True, shaped=shaped)

        def guarded(i: int) -> bool:
            if i != next_check[0]:
                return plain(i)
            self._i = i
            stop = checked(i)
            # the next check while a kernel is still bound (a mismatch sends that component to Python)
            next_check[0] = i + every if "compiled" in kernel_paths(setup).values() else -1
            return stop

        return guarded

    def _step_of(self, checked: bool, shaped: bool) -> Callable[[int], bool]:
        """One control step from the stages (module docstring); ``checked``: the kernel guard's form;
        ``shaped``: the plan stage's ``shape_reference`` variant."""
        observe, sense, act = self._observe(checked), self._sense(checked), self._act(checked)
        plan, record, plant = self.setup.planner.evaluate, self.record, self.plant
        if shaped:
            planned, shape = plan, self.shape_reference

            def plan(t: float, ref: Reference) -> None:
                planned(t, ref)
                shape(t, ref)
        if self.profile:
            observe, record, plant = (self._timed("t_dynamics", observe), self._timed("t_telemetry", record),
                                      self._timed("t_physics", plant))
            sense, plan, act = (self._timed("t_controller", sense), self._timed("t_controller", plan),
                                self._timed("t_controller", act))
        ref, T_c = self.ref, self.T_c

        def step(i: int) -> bool:
            t = i * T_c
            snap = observe(t)
            w = sense(i, snap)
            plan(t, ref)
            act(snap, w)
            return record(i, t) or plant(i, t)

        return step

    # ---------------------------------------------------------------- the run
    def run(self, progress: Callable[[float, float], None] | None = None, duration: float | None = None) -> Outcome:
        """Every step of the run (or until one stops it), then the derived channels. Ctrl-C / SIGTERM, a
        full disk, a numerical failure or a bug end the loop with the matching status and keep what was
        recorded; ``progress(t, duration)`` is called about 50 times."""
        tel, step, n, T_c = self.telemetry, self.step, self.n_steps, self.T_c
        status, message, error, signum = Status.COMPLETED, "", "", None
        report_every = max(1, n // 50)
        duration = n * T_c if duration is None else duration
        i = 0
        t_wall0 = time.perf_counter()
        interrupts.arm()  # Ctrl-C / SIGTERM raise in the loop (a no-op without interrupts.guard())
        try:
            for start in range(0, n, report_every):  # blocks of steps; progress after each block's first
                i = start
                if step(i):
                    raise _Stop
                if progress is not None:
                    progress(start * T_c, duration)
                for i in range(start + 1, min(n, start + report_every)):
                    if step(i):
                        raise _Stop
        except _Stop:
            status, message = self.stopped
        except KeyboardInterrupt as exc:
            status, message = Status.INTERRUPTED, interrupts.interrupt_message(exc, tel.n)
            signum = interrupts.signum_of(exc)
        except TelemetryWriteError as exc:
            status = Status.ABORTED
            message = (
                f"telemetry could not be written at step {i} ({exc.strerror}); the simulation stopped; the "
                f"{tel.base} steps written before are kept, the {tel.n - tel.base} in memory only if they fit"
            )
        except (np.linalg.LinAlgError, FloatingPointError, ValueError) as exc:
            status = Status.DIVERGED
            message = (
                f"numerical failure at t = {i * T_c:.4f} s (step {i}): {exc}; the state was "
                f"q = {np.array2string(self.setup.data.qpos[self.qs], precision=3)}; telemetry up to this step is kept"
            )
        except Exception as exc:  # noqa: BLE001 - a bug must not lose the telemetry recorded so far
            status = Status.ERROR
            message = (
                f"unexpected {type(exc).__name__} at t = {i * T_c:.4f} s (step {i}): {exc}; telemetry up to "
                "this step is kept"
            )
            error = traceback.format_exc()
        finally:
            interrupts.disarm()
            if self.watch is not None:
                self.watch.finish(str(status))
        try:
            tel.finish()  # the derived channels of the rows in memory (and, spilled, the last part)
        except TelemetryWriteError as exc:
            status = Status.ABORTED
            message = f"{message}; " if message else ""
            message += f"the last {tel.n - tel.base} steps could not be written to disk ({exc.strerror})"
        wall = time.perf_counter() - t_wall0
        sim_time = tel.n * T_c
        timing = {
            "wall_s": wall, "sim_s": sim_time, "real_time_factor": sim_time / wall if wall > 0 else float("inf"),
            "steps": tel.n, "us_per_step": 1e6 * wall / max(tel.n, 1),
        }
        if self.profile:
            timing.update(self.times)
        return Outcome(tel, status, message, timing, self.guard, error, signum)


class _Stop(Exception):
    """A stage asked the run to stop (:attr:`Cycle.stopped` says why)."""

