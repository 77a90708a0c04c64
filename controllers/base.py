"""Controller protocol, the command record and the controller registry.

A controller turns (snapshot, reference, wrench) into joint torques. It never calls Pinocchio or
MuJoCo itself: everything it needs is in :class:`sim.dynamics.Snapshot` (computed once per step),
:class:`planners.base.Reference` (world-frame desired motion) and :class:`sim.wrench.WrenchState`
(F_ext = environment on tool). Clipping to actuator limits and logging happen in the loop, once.

Diagnostics: a controller declares ``diag_names`` (a tuple of scalar names, e.g.
``("qp_status", "qp_solve_time")``); it writes their values into ``Command.diag`` each step and the
loop logs them as telemetry channels ``ctrl_<name>`` — except the names it also lists in
``guard_skip_diag`` (wall-clock measurements such as ``qp_solve_time``), which differ from run to run
and are logged beside the telemetry (``timing.npz`` of the run folder), so that the telemetry of two
runs of one scenario is bit-identical.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from dockbench.planners.base import Planner, Reference
from dockbench.sim import kernels
from dockbench.sim.dynamics import Snapshot
from dockbench.sim.registry import Registry
from dockbench.sim.wrench import WrenchState


class Command:
    """Controller output: ``tau`` (nv,) [N·m] before clipping, ``diag`` (len(diag_names),)."""

    __slots__ = ("tau", "diag")

    def __init__(self, nv: int, ndiag: int):
        self.tau = np.zeros(nv)
        self.diag = np.zeros(ndiag)


@dataclass(frozen=True)
class PlantInfo:
    """Constant facts about the controlled arm, read from the assembled MjModel.

    Attributes:
        nv: number of arm joints.
        joint_names: arm joint names, base to tip.
        tau_max: (nv,) per-joint torque limits [N·m] (the tighter of the actuator limit and the
            scenario's uniform ``max_torque``).
        q_min, q_max: (nv,) joint position limits [rad].
        v_max: (nv,) joint velocity limits [rad/s].
        dof_damping: (nv,) viscous joint damping of the MjModel [N·m·s/rad].
        dof_frictionloss: (nv,) dry friction of the MjModel [N·m].
        control_period: [s].
        q_home: (nv,) nominal posture [rad] (posture tasks).
        floating_base: the arm sits on a free-floating base (docs/theory/floating_base.md): its joint
            motion exchanges momentum with the base.
    """

    nv: int
    joint_names: tuple[str, ...]
    tau_max: np.ndarray
    q_min: np.ndarray
    q_max: np.ndarray
    v_max: np.ndarray
    dof_damping: np.ndarray
    dof_frictionloss: np.ndarray
    control_period: float
    q_home: np.ndarray
    floating_base: bool = False


class Controller(ABC):
    """Base class. Subclasses declare ``Config`` and implement :meth:`compute`.

    Args:
        config: the parsed ``controller:`` block (frozen dataclass ``Config``).
        plant: constant facts about the arm.
        planner: the scenario's planner (controllers needing body-frame motion wrap it in
            :class:`planners.motion_reference.MotionReference`).
    """

    Config: ClassVar[type]
    type_name: ClassVar[str]
    diag_names: tuple[str, ...] = ()
    #: unit of each diagnostic (name → unit string as in telemetry.log; missing = dimensionless); recorded
    #: in meta.json ``channel_units`` and shown on the controller figure
    diag_units: ClassVar[dict[str, str]] = {}
    #: whether compute() reads the LOCAL (body) Jacobian quantities of the snapshot; when False the
    #: loop's dynamics pass skips them
    needs_body_frame: ClassVar[bool] = False
    #: whether compute() reads ``Snapshot.T_world_sensor``; when False (and no momentum observer is
    #: the force source) the dynamics pass skips it
    needs_sensor_pose: ClassVar[bool] = False
    #: whether compute() reads ``Snapshot.dJdq_ee_lwa`` (the world-axes classical acceleration drift);
    #: body-frame controllers that do not set it save that Pinocchio call
    needs_world_drift: ClassVar[bool] = True

    def __init__(self, config: Any, plant: PlantInfo, planner: Planner | None = None):
        self.config = config
        self.plant = plant
        self.planner = planner
        attach = getattr(planner, "attach_law", None)  # the insertion supervisor reads the law's stiffness
        # (Controller.axial_stiffness, controllers/insertion.py: law_axial_stiffness)
        if attach is not None:
            attach(self)

    def make_command(self) -> Command:
        return Command(self.plant.nv, len(self.diag_names))

    def reset(self, snap: Snapshot, ref: Reference) -> None:  # noqa: B027 - optional hook
        """Called once before the first step with the initial state."""

    @abstractmethod
    def compute(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        """Write joint torques [N·m] into ``cmd.tau`` (and diagnostics into ``cmd.diag``)."""

    def summary(self) -> dict[str, Any]:
        """Run-level counters for summary.json (e.g. QP fallbacks). Default: none."""
        return {}

    # ------------------------------------------------------------------ gain scales (dockbench/gym.py)
    #: how many stiffness (and damping) scales :meth:`set_gain_scales` takes; 0: the law takes none (the gym's
    #: impedance action then has no gain scales)
    n_gain_scales: int = 0

    def axial_stiffness(self, axis: np.ndarray, R_world_ee: np.ndarray) -> float | None:
        """The translational stiffness along the world unit vector ``axis`` [N/m], aᵀ K a, as of the last step
        (the insertion supervisor's push bound, controllers/insertion.py); None: the law reports none (also with
        a force set-point, which fades the axial stiffness). Default: None."""
        return None

    def stiffness_diagonal(self) -> np.ndarray | None:
        """The law's current stiffness diagonal, a new (6,) array: translational [N/m] ×3, then rotational
        [N·m/rad] ×3 (the gym's ``stiffness`` observation); None: the law reports none. Default: None."""
        return None

    def _gain_scales(self, k_scale: Any, d_scale: Any, axes: str = "") -> tuple[np.ndarray, np.ndarray]:
        """``k_scale``, ``d_scale`` of :meth:`set_gain_scales` as float arrays of :attr:`n_gain_scales` each, or
        a ValueError naming the law (``axes``: what the scales are, appended to the message)."""
        k_scale, d_scale = np.asarray(k_scale, dtype=float), np.asarray(d_scale, dtype=float)
        n = self.n_gain_scales
        if k_scale.shape != (n,) or d_scale.shape != (n,):
            raise ValueError(f"{self.type_name}: set_gain_scales takes {n} stiffness and {n} damping scales{axes}, "
                             f"got {k_scale.shape} and {d_scale.shape}")
        return k_scale, d_scale

    #: the compiled kernel module (sim/kernels.py) of controllers that have one; None: the Python path
    _kmod: Any = None
    #: (snap, ref, wrench, cmd, config) a compiled kernel is bound to (controllers with a kernel)
    _bound: tuple = ()
    #: steps a compiled kernel handed back to the Python path
    kernel_fallbacks: int = 0

    @property
    def kernel(self) -> str:
        """Which implementation runs :meth:`compute`: ``compiled`` (a C kernel) or ``python``."""
        return "compiled" if self._kmod is not None else "python"

    def kernel_summary(self) -> dict[str, Any]:
        """The ``kernel`` and ``kernel_fallbacks`` entries of :meth:`summary`."""
        return {"kernel": self.kernel, "kernel_fallbacks": self.kernel_fallbacks}

    # ---------------------------------------------------------------------------- the kernel guard
    #: kernel module name (sim/_kernel_manifest.py) of controllers that have one, for reports
    kernel_module: ClassVar[str] = ""
    #: attributes the Python path rebinds or sets (scalars, counters, result views): saved around the
    #: guard's reference evaluation and restored with the kernel's outputs
    _guard_attrs: ClassVar[tuple[str, ...]] = ()
    #: diagnostics that are not functions of the step's inputs (wall-clock times): never compared by the
    #: guard, and recorded per step into the run folder's timing.npz instead of the (bit-reproducible)
    #: telemetry
    guard_skip_diag: ClassVar[tuple[str, ...]] = ()

    #: every array the bound kernel reads or writes (its inputs, outputs and the law's state), derived from
    #: :attr:`_kernel_arrays_of` when the kernel guard first needs it after a bind (:meth:`_written_arrays`)
    _kernel_arrays: tuple[np.ndarray, ...] = ()
    #: (the kernel's keyword arguments, the step's inputs) of the last _bind, until _kernel_arrays is derived:
    #: a bind on a new config (the gym's gain scales, every policy step) does not pay for the derivation
    _kernel_arrays_of: tuple[dict, tuple] | None = None

    def _bind(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        """Bind the compiled kernel to this run's arrays (controllers with a kernel; they never move during
        a run) and record them in :attr:`_kernel_arrays_of`."""
        raise NotImplementedError

    @staticmethod
    def _arrays_of(args: dict, *inputs: Any) -> tuple[np.ndarray, ...]:
        """The distinct numpy arrays among a kernel's keyword arguments that the step may write: those that
        share no memory with the step's ``inputs`` (the snapshot, reference and wrench state, which a
        control law only reads). The guard saves and restores these around the reference evaluation."""
        read_only = []
        for obj in inputs:
            names = getattr(obj, "__slots__", None) or vars(obj)
            read_only += [v for v in (getattr(obj, n, None) for n in names) if isinstance(v, np.ndarray)]
        seen: dict[int, np.ndarray] = {}
        for v in args.values():
            if isinstance(v, np.ndarray) and not any(np.may_share_memory(v, r) for r in read_only):
                seen.setdefault(id(v), v)
        return tuple(seen.values())

    def _written_arrays(self) -> tuple[np.ndarray, ...]:
        """:attr:`_kernel_arrays` of the current binding (derived on the first call after a bind)."""
        pending = self._kernel_arrays_of
        if pending is not None:
            self._kernel_arrays = self._arrays_of(pending[0], *pending[1])
            self._kernel_arrays_of = None
        return self._kernel_arrays

    def _compute_python(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        """The Python reference of :meth:`compute` (controllers with a kernel): the law as docs/theory states
        it, and the source of truth the kernel must agree with."""
        raise NotImplementedError

    def _compute_kernel(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> bool:
        """One step by the compiled kernel (bound on first use); False when it hands the step back
        (nothing written: the Python path then takes it). Controllers with a kernel."""
        raise NotImplementedError

    def compute_with_kernel(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> None:
        """:meth:`compute` of a controller with a compiled kernel: the kernel when it is loaded and takes
        the step, else the Python reference. Such a controller sets ``compute = Controller.compute_with_kernel``."""
        if self._kmod is None or not self._compute_kernel(snap, ref, wrench, cmd):
            self._compute_python(snap, ref, wrench, cmd)

    def _guarded(self) -> bool:
        """Whether the guard applies: a kernel is loaded and :meth:`compute` is still
        :meth:`compute_with_kernel` (a subclass or an instance that replaces compute runs its own law)."""
        return (
            self._kmod is not None
            and type(self).compute is Controller.compute_with_kernel
            and "compute" not in vars(self)
        )

    def _guard_values(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> kernels.Values:
        """The outputs of the last step the guard compares (copies; sim/kernels.py). Default: τ and the
        diagnostics but :attr:`guard_skip_diag`."""
        return [("tau", cmd.tau.copy()), ("diag", cmd.diag[self._guard_diag_index()])]

    def _guard_bounds(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> kernels.Bounds:
        """S and κ of each of :meth:`_guard_values`, evaluated right after the Python path took the step
        (its intermediates are current then). Default: S = the largest |value|, κ = 1."""
        return [(kernels.magnitude(v), 1.0) for _, v in self._guard_values(snap, ref, wrench, cmd)]

    def _guard_diag_index(self) -> list[int]:
        """Indices of the compared diagnostics (every channel but :attr:`guard_skip_diag`)."""
        return [i for i, n in enumerate(self.diag_names) if n not in self.guard_skip_diag]

    def compute_checked(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> tuple[
        float, kernels.KernelMismatch | None
    ]:
        """:meth:`compute` under the kernel guard (sim/kernels.py): the kernel takes the step, then the Python
        reference takes it again from the same state on the same inputs and the outputs are compared. On
        agreement the kernel's outputs and state are kept (the run is the unguarded one, bit for bit); on a
        mismatch the Python reference's are kept and the controller runs Python for the rest of the run.
        Returns (largest |Δ|/bound, mismatch or None); (0, None) when the Python path took the step anyway."""
        if not self._guarded():
            self.compute(snap, ref, wrench, cmd)
            return 0.0, None
        if not self._kernel_bound_to(snap, ref, wrench, cmd):
            self._bind(snap, ref, wrench, cmd)
        # the arrays the kernel may write hold its outputs and the law's state (it only reads the snapshot,
        # reference and wrench state), the attributes the Python path rebinds the rest
        return kernels.guarded_step(
            "controller", self.kernel_module, self.plant.nv,
            written=kernels.Written(self._written_arrays(), [(self, n) for n in self._guard_attrs]),
            kernel_step=lambda: self._compute_kernel(snap, ref, wrench, cmd),
            reference=lambda: self._compute_python(snap, ref, wrench, cmd),
            values=lambda: self._guard_values(snap, ref, wrench, cmd),
            bounds=lambda: self._guard_bounds(snap, ref, wrench, cmd),
            drop=self.use_python,
        )

    def use_python(self) -> None:
        """Run the Python reference from now on (the guard calls this on a mismatch)."""
        self._kmod = None
        self._bound = ()

    def _kernel_bound_to(self, snap: Snapshot, ref: Reference, wrench: WrenchState, cmd: Command) -> bool:
        """True when the compiled kernel is bound to these objects and to the current config (a run's
        arrays never move, so one identity check per step decides whether to bind again)."""
        b = self._bound
        return bool(b) and b[0] is snap and b[1] is ref and b[2] is wrench and b[3] is cmd and b[4] is self.config


CONTROLLERS: Registry[Controller] = Registry("controller")
