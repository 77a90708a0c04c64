"""The G20 hand bridge on PhysX (NVIDIA ``ovphysx``, CPU): the engine of the design's Isaac bridge.

:class:`PhysXHandBridge` is a :class:`hand.bridge.HandBridge` whose physics is a PhysX articulation
authored by :mod:`hand.usd` from the same MuJoCo model. Everything on the command side is inherited
unchanged: the SDK mapping (:mod:`hand.mapping`), command validation, goal / nominal / applied /
last-safe states, slew, readouts, reset and the track test. What differs (docs/hand.md, "PhysX
engine"):

* **hard write** (``DriveMode.KINEMATIC``, default): each step writes the slewed pose to every DOF
  (the five mimic joints included) with zero velocity and zero drive gains, runs one PhysX step of
  ``dt`` and writes the pose again (pinned); ``applied`` is the DOF position read back (float32). No
  collision projection: PhysX contacts cannot push a written DOF back, so interpenetration is
  reduced only by the selective colliders (palm + distal links).
* **PD drive** (``DriveMode.PD``): position targets on the 16 active joints (the nominal), drive gains
  thumb 10 N·m/rad / 3 N·m·s/rad / 6 N·m (max force raised to 8), other fingers 15 / 2.5 / 8, mimic
  joints gain 0 and coupled by PhysX mimic joints (``q_mimic = ratio·q_driver``); one PhysX step per
  bridge step; ``applied`` / velocity read back.
* dt = 1/120 s (one PhysX step per bridge step); the slew limit is given per physics step
  (``--slew-rad``; :func:`config_for` converts it to the bridge's rad/s).
* a non-finite PhysX state (NaN/Inf DOF position or velocity) resets the hand to the open pose.

The MuJoCo model the bridge was built from stays attached as a *mirror*: the applied pose is written
to its ``qpos`` after every step so the penetration readout (``StepResult.min_distance``, over the
model's full collision geometry) and rendering use the same geometry in both engines.

Requires the ``physx`` extra (``pip install 'dockbench[physx]'``: ovphysx, usd-core,
physx-usd-schemas); :func:`physx_available` says whether it is installed.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import tempfile
import warnings
from pathlib import Path

import mujoco
import numpy as np
from dockbench.hand.bridge import BridgeConfig, DriveMode, HandBridge, StepResult
from dockbench.hand.spec import HandSpec, load_model, load_spec
from dockbench.sim.errors import DockbenchError, ModelError

log = logging.getLogger(__name__)

PHYSX_DT = 1.0 / 120.0
"""Physics step of the design's Isaac bridge [s]."""


THUMB_GAINS = (10.0, 3.0, 6.0)
"""PD drive of the active thumb joints: stiffness [N·m/rad], damping [N·m·s/rad], effort [N·m]."""
FINGER_GAINS = (15.0, 2.5, 8.0)
"""PD drive of the other active joints: stiffness [N·m/rad], damping [N·m·s/rad], effort [N·m]."""

LIMIT_MARGIN = 0.05
"""The design's joint-limit margin [rad]: goals and slewed poses stay within [lo + m, hi − m] of every joint."""

PHYSX_THREADS = 0
"""PhysX CPU worker threads (ovphysx ``GlobalConfigKey.NUM_THREADS``): 0 = the simulation runs on the calling
thread. For one 22-link hand that is ~8× faster than the default worker pool on the shared 2-core machine
(0.09 s vs 0.70 s per 120 hard-write steps, load average 14; docs/hand.md)."""

INSTALL_HINT = "pip install 'dockbench[physx]'  (ovphysx, usd-core, physx-usd-schemas)"


def physx_available() -> str | None:
    """``None`` when the physx extra is importable, else the reason (for skips and error messages)."""
    try:
        import ovphysx  # noqa: F401
        import ovstage  # noqa: F401
        import pxr  # noqa: F401
        from ovphysx.samples.python_samples.schema_support import physx_schema_paths

        physx_schema_paths()
    except (ImportError, FileNotFoundError) as exc:
        return f"the physx extra is not installed ({exc}); {INSTALL_HINT}"
    return None


@dataclasses.dataclass(frozen=True)
class PhysXOptions:
    """PhysX-only settings of the bridge.

    Attributes:
        self_collision: articulation self-collision (``--no-self-collision`` turns it off).
        hand_gravity: gravity on the hand's links (only matters in PD mode).
        limit_margin: the bridge keeps every joint within [lo + m, hi − m] of its model range [rad]
            (goal clip and slew clip); 0 = the model range, as the MuJoCo bridge. The PhysX joint limits
            themselves stay the model's.
    """

    self_collision: bool = True
    hand_gravity: bool = False
    limit_margin: float = LIMIT_MARGIN

    def __post_init__(self) -> None:
        m = self.limit_margin
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not (math.isfinite(m) and 0.0 <= m < 0.1):
            raise DockbenchError(f"limit margin must be in [0, 0.1) rad, got {m!r}")


def config_for(
    mode: DriveMode | str = DriveMode.KINEMATIC, slew_rad: float = 0.0, state_rate_hz: float = 120.0
) -> BridgeConfig:
    """A :class:`BridgeConfig` for the PhysX bridge: dt = 1/120 s, slew ``slew_rad`` [rad per physics
    step] (0 = instant), no collision projection."""
    if not (math.isfinite(slew_rad) and slew_rad >= 0):
        raise DockbenchError(f"--slew-rad must be >= 0 rad per physics step, got {slew_rad}")
    return BridgeConfig(mode=mode, slew_rad_s=slew_rad / PHYSX_DT, collision_project=False,
                        state_rate_hz=state_rate_hz, dt=PHYSX_DT)


_schemas_registered = False
_instance_counter = itertools.count()


def _register_schemas() -> None:
    global _schemas_registered
    if _schemas_registered:
        return
    import ovphysx
    import ovstage
    from ovphysx.samples.python_samples.schema_support import physx_schema_paths

    paths = [str(p) for p in physx_schema_paths()]
    newton = ovphysx.schemas.find_newton_schema_root()  # optional: newton:* fallbacks, unused here
    if newton is not None:
        paths.append(str(newton))
    ovstage.population.register_usd_schemas(paths)
    ovphysx.PhysX.set_cpu_mode(True)
    from ovphysx.types import GlobalConfigKey

    ovphysx.set_global_config(GlobalConfigKey.NUM_THREADS, PHYSX_THREADS)  # before the first PhysX()
    _schemas_registered = True


class PhysXHandBridge(HandBridge):
    """The G20 hand bridge with PhysX (ovphysx, CPU) as the engine; see the module docstring.

    Build it with :meth:`create`. Call :meth:`close` (or use it as a context manager) to free the
    PhysX instance.

    Raises:
        DockbenchError: the physx extra is missing, or the scene does not load.
        ModelError: the articulation's DOFs are not the spec's joints.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        data: mujoco.MjData,
        spec: HandSpec,
        config: BridgeConfig,
        options: PhysXOptions | None = None,
    ) -> None:
        reason = physx_available()
        if reason is not None:
            raise DockbenchError(reason)
        if config.collision_project:
            config = dataclasses.replace(config, collision_project=False)  # not available under PhysX
        self.physx_options = options if options is not None else PhysXOptions()
        self.nonfinite_resets = 0
        """Times a NaN/Inf PhysX state was replaced by the open pose."""
        self._px = None
        self._open_physx(spec, config)
        try:
            super().__init__(model, data, spec, config)
        except Exception:
            self.close()
            raise
        self._apply_gains()

    @classmethod
    def create(
        cls,
        config: BridgeConfig | None = None,
        spec: HandSpec | None = None,
        options: PhysXOptions | None = None,
    ) -> PhysXHandBridge:
        """A PhysX bridge on a stage authored from the packaged (or ``spec``'s) G20 model."""
        spec = spec if spec is not None else load_spec()
        config = config if config is not None else config_for()
        model = load_model(spec)
        model.opt.timestep = config.dt if config.dt is not None else PHYSX_DT
        return cls(model, mujoco.MjData(model), spec, config, options)

    def _resolve(self) -> None:
        """The MuJoCo model's joints and ranges, the ranges shrunk by the limit margin."""
        super()._resolve()
        m = self.physx_options.limit_margin
        self._lo = self._lo + m
        self._hi = self._hi - m

    # ------------------------------------------------------------------ PhysX set-up
    def _open_physx(self, spec: HandSpec, config: BridgeConfig) -> None:
        import ovphysx
        import ovstage
        from dockbench.hand.usd import HAND_PATH, UsdHandOptions, build_stage
        from ovphysx.types import TensorType

        _register_schemas()
        opts = self.physx_options
        stage_usd = build_stage(UsdHandOptions(self_collision=opts.self_collision,
                                               hand_gravity=opts.hand_gravity), spec)
        with tempfile.TemporaryDirectory(prefix="g20_physx_") as tmp:
            path = Path(tmp) / "g20_left.usda"
            stage_usd.GetRootLayer().Export(str(path))

            with warnings.catch_warnings():  # config= is deprecated for carbonite-only settings in 0.7
                warnings.simplefilter("ignore", DeprecationWarning)
                # the stage authors no newton:* attribute: the Newton schema is not needed, don't warn
                cfg = ovphysx.PhysXConfig(carbonite_overrides={"/ovphysx/schemas/warnMissingNewtonSchema": False})
                self._px = px = ovphysx.PhysX(config=cfg)
            self._stage = ovstage.Stage(f"dockbench-g20-{next(_instance_counter)}")
            try:
                ovstage.population.open_usd(self._stage, str(path), ordinal=1,
                                            domains=ovstage.PopulationDomain.ALL)
                self._stage.advance_write_floor(ordinal=1).wait()
                px.wait_task(px.attach_ovstage(self._stage, read_ordinal=1))
                px.wait_all()
                px.warmup()
            except Exception as exc:
                self.close()
                raise DockbenchError(f"ovphysx could not load the G20 stage: {exc}") from None
        pattern = HAND_PATH + "/*"

        self._bind = {}
        with warnings.catch_warnings():  # the tensor-binding API is deprecated in ovphysx 0.7 (still there)
            warnings.simplefilter("ignore", DeprecationWarning)
            for key, tt in (("pos", TensorType.ARTICULATION_DOF_POSITION),
                            ("vel", TensorType.ARTICULATION_DOF_VELOCITY),
                            ("target", TensorType.ARTICULATION_DOF_POSITION_TARGET),
                            ("vtarget", TensorType.ARTICULATION_DOF_VELOCITY_TARGET),
                            ("kp", TensorType.ARTICULATION_DOF_STIFFNESS),
                            ("kd", TensorType.ARTICULATION_DOF_DAMPING),
                            ("fmax", TensorType.ARTICULATION_DOF_MAX_FORCE),
                            ("link", TensorType.ARTICULATION_LINK_POSE)):
                self._bind[key] = px.create_tensor_binding(pattern=pattern, tensor_type=tt)
        b = self._bind["pos"]
        if b.count != 1:
            raise ModelError(f"expected one G20 articulation under {pattern}, found {b.count}")
        dof_names = [n.rsplit("/", 1)[-1] for n in b.dof_names]
        if sorted(dof_names) != sorted(spec.joint_names):
            raise ModelError(f"PhysX DOFs {dof_names} are not the spec's joints {list(spec.joint_names)}")
        self.physx_dof_names = tuple(dof_names)
        index = {n: i for i, n in enumerate(spec.joint_names)}
        self._perm = np.array([index[n] for n in dof_names], dtype=np.intp)  # physx dof k <- table index
        self.physx_link_names = tuple(n.rsplit("/", 1)[-1] for n in self._bind["link"].body_names)
        n = len(dof_names)
        self._w = np.zeros((1, n), dtype=np.float32)
        self._zero = np.zeros((1, n), dtype=np.float32)
        self._r = np.zeros((1, n), dtype=np.float32)
        self._rv = np.zeros((1, n), dtype=np.float32)

    def _apply_gains(self) -> None:
        """Drive gains of the mode: zero in hard write; the design's PD gains on the active joints."""
        n = len(self.physx_dof_names)
        kp = np.zeros((1, n), np.float32)
        kd = np.zeros((1, n), np.float32)
        fmax = np.full((1, n), FINGER_GAINS[2], np.float32)
        if self.config.mode is DriveMode.PD:
            for k, name in enumerate(self.physx_dof_names):
                j = self.spec.joint(name)
                if not j.active:
                    continue
                gains = THUMB_GAINS if name.startswith("thumb") else FINGER_GAINS
                kp[0, k], kd[0, k] = gains[0], gains[1]
                fmax[0, k] = gains[2]
        from dockbench.hand.usd import MIN_DRIVE_MAX_FORCE

        np.maximum(fmax, MIN_DRIVE_MAX_FORCE, out=fmax)
        self._bind["kp"].write(kp)
        self._bind["kd"].write(kd)
        self._bind["fmax"].write(fmax)
        self.drive_gains = {name: (float(kp[0, k]), float(kd[0, k]), float(fmax[0, k]))
                            for k, name in enumerate(self.physx_dof_names)}
        """Per joint (stiffness [N·m/rad], damping [N·m·s/rad], max force [N·m]) as written."""

    def close(self) -> None:
        """Destroy the tensor bindings, detach the stage and free the PhysX instance (idempotent)."""
        px, self._px = self._px, None
        if px is None:
            return
        for b in getattr(self, "_bind", {}).values():
            b.destroy()
        self._bind = {}
        try:
            if px.is_stage_attached(self._stage):
                px.wait_task(px.detach_ovstage())
            self._stage.destroy()
        finally:
            px.destroy()

    def __enter__(self) -> PhysXHandBridge:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:  # best effort; prefer close()
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # ------------------------------------------------------------------ PhysX I/O (table order)
    def _physx_write_positions(self, q: np.ndarray) -> None:
        self._w[0] = q[self._perm]
        self._bind["pos"].write(self._w)
        self._bind["vel"].write(self._zero)

    def _physx_read(self) -> tuple[np.ndarray, np.ndarray]:
        """(positions, velocities) of the 21 joints in table order [rad, rad/s] (float64 copies)."""
        self._bind["pos"].read(self._r)
        self._bind["vel"].read(self._rv)
        q = np.empty(len(self._perm))
        v = np.empty(len(self._perm))
        q[self._perm] = self._r[0]
        v[self._perm] = self._rv[0]
        return q, v

    def link_poses(self) -> dict[str, np.ndarray]:
        """World pose (x, y, z, qx, qy, qz, qw) of every link as PhysX has it (float32 -> float64)."""
        buf = np.zeros(self._bind["link"].shape, dtype=np.float32)
        self._bind["link"].read(buf)
        return {n: buf[0, i].astype(float) for i, n in enumerate(self.physx_link_names)}

    def _physx_step(self) -> None:
        self._px.step(self.dt)
        self._px.wait_all()

    def _mirror(self, q: np.ndarray) -> None:
        """Write ``q`` to the MuJoCo mirror and evaluate its contacts (for min_distance / rendering)."""
        d = self.data
        d.qpos[self._qadr] = q
        d.qvel[self._dadr] = 0.0
        mujoco.mj_kinematics(self.model, d)
        mujoco.mj_collision(self.model, d)

    # ------------------------------------------------------------------ HandBridge hooks
    def _hard_write(self, q: np.ndarray) -> None:
        self._physx_write_positions(q)
        if self.config.mode is DriveMode.PD:
            self._w[0] = q[self._perm]
            self._bind["target"].write(self._w)
            self._bind["vtarget"].write(self._zero)
        self._mirror(q)

    def _step_kinematic(self) -> StepResult:
        cand = self._cand
        self._slew(self._applied, self._goal_work, cand)
        self._physx_write_positions(cand)
        self._physx_step()
        self._physx_write_positions(cand)  # pinned after the step
        q, _ = self._physx_read()
        if not np.all(np.isfinite(q)):
            return self._nonfinite_reset()
        np.copyto(self._applied, q)
        self._mirror(self._applied)
        dmin = self._min_distance()
        if dmin >= -self.config.penetration_tol_m:
            np.copyto(self._last_safe, self._applied)
        np.subtract(self._applied, self._prev_applied, out=self._velocity)
        self._velocity /= self.dt
        return self._finish(False, False, dmin, 1)

    def _step_pd(self) -> StepResult:
        self._w[0] = self._nominal[self._perm]
        self._bind["target"].write(self._w)
        self._physx_step()
        return self._finish_pd()

    def _finish_pd(self) -> StepResult:
        q, v = self._physx_read()
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
            return self._nonfinite_reset()
        np.copyto(self._applied, q)
        np.copyto(self._velocity, v)
        self._mirror(self._applied)
        dmin = self._min_distance()
        if dmin >= -self.config.penetration_tol_m:
            np.copyto(self._last_safe, self._applied)
        return self._finish(False, False, dmin, 0)

    def _nonfinite_reset(self) -> StepResult:
        """A NaN/Inf PhysX state: put the hand at the open pose (goal included) and report the step."""
        self.nonfinite_resets += 1
        log.warning("PhysX hand state is not finite; reset to the open pose (%d so far)", self.nonfinite_resets)
        step = self._step
        self.reset("open")
        self._step = step
        return self._finish(False, True, self._min_distance(), 0)

    def write_targets(self) -> None:  # the docking loop's host-stepped PD path is MuJoCo only
        raise DockbenchError("PhysXHandBridge steps its own PhysX scene; use step()")

    def read_back(self) -> StepResult:
        raise DockbenchError("PhysXHandBridge steps its own PhysX scene; use step()")
