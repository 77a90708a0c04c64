"""G20 hand bridge: commands -> goal -> slew -> collision projection -> MuJoCo (docs/theory/g20_hand.md).

State (all (21,) joint vectors in the spec's joint-table order, [rad]):

* ``goal``      the latest accepted command, clipped to the joint ranges;
* ``nominal``   the *tracked nominal*: ``goal`` through the slew limit and range clip only, i.e. where
                the hand would be without contacts;
* ``applied``   the pose the hand is at (kinematic mode: the projected pose written to qpos; PD mode:
                qpos read back after ``mj_step``);
* ``last_safe`` the last ``applied`` pose without penetration.

One step in kinematic mode (default)::

    cand    = clip(applied + clip(goal - applied, ±L), lo, hi)    L = slew_rad_s·dt (·ratio for mimic)
    write qpos(cand); mj_kinematics + mj_collision; penetration ⇔ min contact dist < -tol (5e-4 m)
    if penetrating:  start = applied (or last_safe if applied itself penetrates)
                     move the active joints one at a time (mimic joints ride with their driver),
                     in order of |Δ| descending: fully if safe, else by `bisections` (12) halvings
                     of the move fraction; if the result still penetrates -> last_safe
    hard write qpos = applied, qvel = 0, ctrl = applied (active joints); mj_forward

PD-drive mode: ``ctrl = nominal`` for the position actuators ``<joint>_pos``, ``mj_step`` integrates
(contacts and the mimic <equality> constraints act physically) and ``applied`` follows qpos.

Threading: ``command_*`` may be called from any thread; they only validate and replace ``goal`` under
one lock. ``step``/``reset`` and everything touching ``model``/``data`` belong to the one stepping
thread. Readouts (:meth:`HandBridge.latest_state`, :meth:`HandBridge.snapshot`) return copies taken
under the lock.

Model independence: joints, actuators and the hand's bodies are resolved by name with an optional
prefix (``"hand/"`` after ``MjSpec.attach``), never by fixed index, and the penetration test only looks at
contacts with at least one hand geom (optionally: both), so the same bridge runs on the standalone
hand model and on an arm + hand model. The per-step path works on preallocated arrays.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping
from typing import Any

import mujoco
import numpy as np
from dockbench.hand.mapping import sdk_to_joint_positions, validate_joint_command, validate_sdk_values
from dockbench.hand.records import (
    BridgeConfig,
    BridgeSnapshot,
    CommandResult,
    DriveMode,
    HandState,
    StepResult,
    _frozen,
)
from dockbench.hand.spec import HandSpec, load_model, load_spec
from dockbench.sim.errors import HandCommandError, ModelError

log = logging.getLogger(__name__)

ROOT_BODY = "g20_root"
"""Name (without prefix) of the hand's root body: the hand base frame."""

ACTUATOR_SUFFIX = "_pos"
"""Position actuator of active joint ``j`` is named ``j + ACTUATOR_SUFFIX``."""


class HandBridge:
    """Drive the G20 hand inside a MuJoCo model (standalone or attached to an arm with a prefix).

    Args:
        model, data: the MuJoCo model/data containing the hand. Only the stepping thread may touch them.
        spec: hand spec (default: the packaged G20 LEFT spec).
        config: :class:`BridgeConfig`.
        prefix: name prefix of the hand's elements in ``model`` (``""`` standalone, e.g. ``"hand/"``).
        root_body: the hand's root body name without prefix.
        host_steps: a host loop calls ``mj_step`` right after every bridge step (the G20 effector of the
            docking loop). The kinematic step then ends with ``mj_kinematics + mj_collision`` instead of
            ``mj_forward`` (the contacts of the written pose are all the bridge reads afterwards; the host's
            ``mj_step`` recomputes the rest from ``qpos``/``qvel``), and skips even that when the pose it
            writes is the one its last collision evaluation of this step was made at (the usual,
            non-projected step). The same poses, contacts and step records as ``host_steps=False``
            (bit-identical; tests/test_hand_effector.py).

    Raises:
        ModelError: a joint of the spec is missing or not a hinge, the root body is missing, a mimic
            equality disagrees with the spec's ratio, or PD mode lacks actuators / mimic equalities.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        data: mujoco.MjData,
        spec: HandSpec | None = None,
        config: BridgeConfig | None = None,
        *,
        prefix: str = "",
        root_body: str = ROOT_BODY,
        host_steps: bool = False,
    ) -> None:
        self.host_steps = host_steps
        self._fresh = False  # host_steps: the contacts in data are those of the hand pose now in qpos
        self.model = model
        self.data = data
        self.spec = spec if spec is not None else load_spec()
        self.config = config if config is not None else BridgeConfig()
        self.prefix = prefix
        self._root_body = root_body
        self.dt = float(self.config.dt if self.config.dt is not None else model.opt.timestep)
        self._substeps = max(1, int(round(self.dt / model.opt.timestep)))
        self._resolve()
        self._allocate()
        self._lock = threading.Lock()
        self._goal_seq = 0
        self._rejected = 0
        self._rejected_by_reason: dict[str, int] = {}
        self.on_state: Callable[[HandState], None] | None = None
        """Optional callback, called from the stepping thread with each published :class:`HandState`."""
        # start from the pose currently in data (clipped), nothing moves until a command arrives
        q = np.clip(self.data.qpos[self._qadr], self._lo, self._hi)
        self._set_all_states(q, keep_safe=False)
        self._publish_state(force=True)

    # ------------------------------------------------------------------ construction
    @classmethod
    def standalone(
        cls,
        config: BridgeConfig | None = None,
        spec: HandSpec | None = None,
        *,
        timestep: float | None = None,
        host_steps: bool = False,
    ) -> HandBridge:
        """A bridge on its own freshly loaded hand model (``assets/hands/<spec.model>``).

        Args:
            timestep: if given, sets ``model.opt.timestep`` [s] of this private model (e.g. 0.001).
            host_steps: see :class:`HandBridge`.
        """
        spec = spec if spec is not None else load_spec()
        model = load_model(spec)
        if timestep is not None:
            model.opt.timestep = timestep
        return cls(model, mujoco.MjData(model), spec, config, host_steps=host_steps)

    def _name(self, name: str) -> str:
        return self.prefix + name

    def _resolve(self) -> None:
        m, spec = self.model, self.spec
        names = spec.joint_names
        jid = np.array([mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, self._name(j)) for j in names])
        missing = [self._name(j) for j, i in zip(names, jid, strict=True) if i < 0]
        if missing:
            raise ModelError(
                f"hand joints missing from the model (prefix {self.prefix!r}): {', '.join(missing)}"
            )
        bad = [
            self._name(j)
            for j, i in zip(names, jid, strict=True)
            if m.jnt_type[i] != mujoco.mjtJoint.mjJNT_HINGE
        ]
        if bad:
            raise ModelError(f"hand joints must be hinges: {', '.join(bad)}")
        self._jid = jid
        self._qadr = m.jnt_qposadr[jid].astype(np.intp)
        self._dadr = m.jnt_dofadr[jid].astype(np.intp)
        limited = m.jnt_limited[jid].astype(bool)
        self._lo = np.where(limited, m.jnt_range[jid, 0], -np.inf)
        self._hi = np.where(limited, m.jnt_range[jid, 1], np.inf)

        # active joints, their mimic followers (groups) and actuators
        index = {j: k for k, j in enumerate(names)}
        self._index = index
        self._active = np.array([j.index for j in spec.joints if j.active], dtype=np.intp)
        self._ratio = np.array([j.ratio for j in spec.joints])
        groups: list[tuple[int, ...]] = []
        for a in self._active:
            followers = tuple(index[j.name] for j in spec.joints if j.mimic_of == names[a])
            groups.append((int(a),) + followers)
        self._groups = tuple(groups)
        self._group_members = tuple(tuple((i, int(self._qadr[i])) for i in g) for g in groups)
        act = np.array(
            [
                mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_ACTUATOR, self._name(names[a] + ACTUATOR_SUFFIX))
                for a in self._active
            ]
        )
        self._has_act = act >= 0
        self._act = act[self._has_act].astype(np.intp)
        self._act_src = self._active[self._has_act]  # table index each actuator takes its target from
        if self.config.mode is DriveMode.PD and not self._has_act.all():
            miss = [self._name(names[a] + ACTUATOR_SUFFIX) for a in self._active[~self._has_act]]
            raise ModelError(f"PD mode needs position actuators: missing {', '.join(miss)}")

        # mimic equalities: must agree with the spec where present; required in PD mode
        for j in spec.joints:
            if j.mimic_of is None:
                continue
            j1, j2 = jid[index[j.name]], jid[index[j.mimic_of]]
            eqs = [
                e
                for e in range(m.neq)
                if m.eq_type[e] == mujoco.mjtEq.mjEQ_JOINT and m.eq_obj1id[e] == j1 and m.eq_obj2id[e] == j2
            ]
            for e in eqs:
                poly = m.eq_data[e, :5]
                if not np.allclose(poly, [0.0, j.ratio, 0.0, 0.0, 0.0], atol=1e-9):
                    raise ModelError(
                        f"mimic equality {self._name(j.name)} = f({self._name(j.mimic_of)}) has polycoef "
                        f"{poly.tolist()}, but the spec ({spec.source}) says ratio {j.ratio}"
                    )
            if not eqs and self.config.mode is DriveMode.PD:
                raise ModelError(
                    f"PD mode needs a joint equality {self._name(j.name)} = "
                    f"{j.ratio}·{self._name(j.mimic_of)}"
                )

        # the hand's bodies: the subtree of the root body; geoms of those bodies
        root = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, self._name(self._root_body))
        if root < 0:
            raise ModelError(f"hand root body {self._name(self._root_body)!r} not in the model")
        in_hand = np.zeros(m.nbody, dtype=bool)
        for b in range(m.nbody):
            p = b
            while p > 0 and p != root:
                p = m.body_parentid[p]
            in_hand[b] = p == root
        self._hand_body = in_hand
        self._hand_geom = in_hand[m.geom_bodyid]
        collidable = (m.geom_contype != 0) | (m.geom_conaffinity != 0)
        # fast path: every collidable geom is a hand geom -> every contact counts
        self._all_hand = bool(np.all(self._hand_geom[collidable])) if collidable.any() else True

    def _allocate(self) -> None:
        n = len(self.spec.joints)
        z = lambda: np.zeros(n)  # noqa: E731
        self._goal = z()  # shared (lock)
        self._goal_work = z()  # stepping-thread copy of goal
        self._nominal = z()
        self._applied = z()
        self._prev_applied = z()
        self._last_safe = z()
        self._velocity = z()
        self._cand = z()
        self._q = z()
        self._start = z()
        self._delta = z()
        self._tmp = z()
        self._gmag = np.zeros(len(self._groups))
        slew = self.config.slew_rad_s
        step = slew * self.dt if slew > 0 else np.inf
        self._limit = step * np.abs(self._ratio)  # (21,) per-step slew bound [rad]
        self._neg_limit = -self._limit
        # published copies (lock)
        self._pub = {k: z() for k in ("nominal", "applied", "last_safe")}
        self._step = 0
        self._tracking_error = 0.0
        self._state_every = max(1, int(round(1.0 / (self.config.state_rate_hz * self.dt))))
        self._state: HandState | None = None

    # ------------------------------------------------------------------ properties
    @property
    def joint_names(self) -> tuple[str, ...]:
        """The 21 joint names (no prefix), spec table order."""
        return self.spec.joint_names

    @property
    def active_names(self) -> tuple[str, ...]:
        """The 16 active joint names (no prefix)."""
        return self.spec.active_names

    @property
    def active_indices(self) -> np.ndarray:
        """Table indices (into the (21,) state vectors) of the 16 active joints (copy)."""
        return self._active.copy()

    @property
    def qpos_addresses(self) -> np.ndarray:
        """qpos address of each of the 21 joints in ``model`` (copy)."""
        return self._qadr.copy()

    @property
    def dof_addresses(self) -> np.ndarray:
        """qvel/dof address of each of the 21 joints in ``model`` (copy)."""
        return self._dadr.copy()

    @property
    def joint_ranges(self) -> np.ndarray:
        """(21, 2) joint ranges [rad] read from the model (±inf when unlimited)."""
        return np.stack([self._lo, self._hi], axis=1)

    @property
    def hand_geom_mask(self) -> np.ndarray:
        """(ngeom,) True for geoms on the hand's bodies (copy)."""
        return self._hand_geom.copy()

    @property
    def rejected_count(self) -> int:
        """Number of commands refused so far."""
        with self._lock:
            return self._rejected

    @property
    def rejected_by_reason(self) -> dict[str, int]:
        """Commands refused so far, per reason kind (``empty``, ``not_finite``, …; a copy)."""
        with self._lock:
            return dict(self._rejected_by_reason)

    @property
    def step_count(self) -> int:
        """Bridge steps taken since construction or the last reset."""
        return self._step

    @property
    def time(self) -> float:
        """Bridge time [s] = step_count·dt."""
        return self._step * self.dt

    @property
    def tracking_error(self) -> float:
        """max |applied - nominal| over the active joints after the last step [rad]."""
        with self._lock:
            return self._tracking_error

    # ------------------------------------------------------------------ commands (any thread)
    def command(self, cmd: Any) -> CommandResult:
        """Dispatch: a mapping is a name-based command, anything else an SDK (index-based) command.
        Never raises: any input that is not a valid command is refused (counted per reason)."""
        try:
            if isinstance(cmd, Mapping):
                return self.command_joints(cmd)
            return self.command_sdk(cmd)
        except Exception as exc:  # noqa: BLE001 - "never raises" holds for any object given
            return self._reject(f"malformed command ({type(exc).__name__}: {exc})", "malformed")

    def command_sdk(self, values: Any) -> CommandResult:
        """Set the goal from an SDK command (channel order, 1..20 values, 0..255; short = padded with
        255; empty = refused). Refused whole (goal unchanged, reason counted and logged once per reason)
        on a bad command; never raises."""
        try:
            sdk = validate_sdk_values(values, self.spec)
            q = sdk_to_joint_positions(sdk.values, self.spec)
        except HandCommandError as exc:
            return self._reject(str(exc), exc.kind)
        except Exception as exc:  # noqa: BLE001 - e.g. a sequence whose len() or items raise
            return self._reject(f"malformed SDK command ({type(exc).__name__}: {exc})", "malformed")
        return self._update_goal(q, partial=False, clamped=sdk.clamped)

    def command_joints(self, positions: Any) -> CommandResult:
        """Update the goal from ``{joint name: angle [rad]}``. Joints not named keep their goal; a
        missing mimic joint follows its named driver (``ratio·q``). Out-of-range angles are clipped to
        the model range (reported). Refused whole on unknown names / non-numbers / NaN / Inf; never
        raises."""
        try:
            q = validate_joint_command(positions, self.spec)
        except HandCommandError as exc:
            return self._reject(str(exc), exc.kind)
        except Exception as exc:  # noqa: BLE001 - e.g. a mapping whose iteration raises
            return self._reject(f"malformed joint command ({type(exc).__name__}: {exc})", "malformed")
        return self._update_goal(q, partial=True, clamped=())

    def command_preset(self, name: str) -> CommandResult:
        """Set the goal to the SDK preset ``name`` of the spec (``open``, ``half_fist``, ...)."""
        if not isinstance(name, str) or name not in self.spec.presets:
            from dockbench.sim.config import short_repr

            return self._reject(
                f"unknown preset {short_repr(name)}; known: {', '.join(sorted(self.spec.presets))}", "unknown_preset"
            )
        return self.command_sdk(self.spec.presets[name])

    def _reject(self, reason: str, kind: str = "invalid") -> CommandResult:
        """Refuse a command: counted per ``kind``; a warning the first time a kind occurs (the rest are
        only counted, like the ROS node's rejections: a flood of bad frames cannot flood the log)."""
        with self._lock:
            self._rejected += 1
            first = kind not in self._rejected_by_reason
            self._rejected_by_reason[kind] = self._rejected_by_reason.get(kind, 0) + 1
            seq = self._goal_seq
        if first:
            log.warning("hand command rejected (%s): %s [further '%s' rejections are only counted]", kind, reason, kind)
        return CommandResult(accepted=False, reason=reason, seq=seq)

    def _update_goal(
        self, q: Mapping[str, float], *, partial: bool, clamped: tuple[int, ...]
    ) -> CommandResult:
        """Write validated joint values into the goal (atomically, under the lock), clipped to the
        model's joint ranges. ``partial``: joints absent from ``q`` keep their goal."""
        index = self._index
        with self._lock:
            goal = self._goal.copy() if partial else np.zeros_like(self._goal)
            for name, value in q.items():
                goal[index[name]] = value
            clipped_goal = np.clip(goal, self._lo, self._hi)
            np.copyto(self._goal, clipped_goal)
            self._goal_seq += 1
            seq = self._goal_seq
        clipped = tuple(
            n for n, a, b in zip(self.spec.joint_names, goal, clipped_goal, strict=True) if a != b
        )
        if clipped:
            log.info("hand command clipped to joint range: %s", ", ".join(clipped))
        return CommandResult(accepted=True, clipped_joints=clipped, clamped_channels=clamped, seq=seq)

    # ------------------------------------------------------------------ readout (any thread)
    def latest_state(self) -> HandState:
        """The last published joint-state readout (published every ``1/state_rate_hz`` s)."""
        with self._lock:
            assert self._state is not None
            return self._state

    def snapshot(self) -> BridgeSnapshot:
        """Copies of goal / nominal / applied / last_safe after the last step."""
        with self._lock:
            return BridgeSnapshot(
                goal=_frozen(self._goal),
                nominal=_frozen(self._pub["nominal"]),
                applied=_frozen(self._pub["applied"]),
                last_safe=_frozen(self._pub["last_safe"]),
                goal_seq=self._goal_seq,
                step=self._step,
            )

    def positions(self) -> dict[str, float]:
        """``{joint name: applied angle [rad]}`` after the last step."""
        snap = self.snapshot()
        return dict(zip(self.spec.joint_names, snap.applied.tolist(), strict=True))

    # ------------------------------------------------------------------ stepping thread
    def min_distance_now(self) -> float:
        """Smallest considered contact distance of the contacts now in ``data`` [m] (inf: none)."""
        return self._min_distance()

    @property
    def goal_in_use(self) -> np.ndarray:
        """(21,) goal used by the last step [rad] (view; do not modify)."""
        return self._goal_work

    @property
    def applied_now(self) -> np.ndarray:
        """(21,) applied pose [rad] (view; do not modify)."""
        return self._applied

    def at_fixed_point(self, last: StepResult) -> bool:
        """True when the next step would reproduce this one exactly: the nominal has reached the goal
        (the slew is done), the last step did not move the applied pose and did not fall back (so
        ``last_safe`` is the applied pose, or unchanged). A step is a pure function of (goal,
        nominal, applied, last_safe) and of the hand joint angles, so nothing can change until a new
        command arrives — provided the collision scope is hand–hand only (the arm moves in between)."""
        return bool(
            not last.fell_back
            and np.array_equal(self._applied, self._prev_applied)
            and np.array_equal(self._nominal, self._goal_work)
        )

    def reset(self, pose: str | Mapping[str, float] | None = None) -> None:
        """Put the hand at ``pose`` now (goal = nominal = applied = last_safe), stepping thread only.

        If ``pose`` penetrates, ``last_safe`` keeps its previous value (and the next projected step
        starts from it).

        Args:
            pose: an SDK preset name, a ``{joint: rad}`` mapping (missing joints 0, mimic completed), or
                ``None`` for the ``open`` preset.

        Raises:
            HandCommandError: invalid pose.
        """
        self._fresh = False
        if pose is None:
            pose = "open"
        if isinstance(pose, str):
            q = sdk_to_joint_positions(self.spec.preset(pose), self.spec)
        else:
            q = validate_joint_command(pose, self.spec)
        vec = np.clip(np.array([q.get(n, 0.0) for n in self.spec.joint_names]), self._lo, self._hi)
        self._step = 0
        self._set_all_states(vec, keep_safe=True)
        if self.config.mode is DriveMode.PD:
            self.data.qvel[self._dadr] = 0.0
        with self._lock:
            np.copyto(self._goal_work, self._goal)
        self._publish_state(force=True)

    def _set_all_states(self, q: np.ndarray, *, keep_safe: bool) -> None:
        """goal = nominal = applied = q, written to data. last_safe = q too, unless q penetrates and
        ``keep_safe`` (then the previous last_safe stays, so the next step can escape from it)."""
        previous_safe = self._last_safe.copy()
        for a in (self._nominal, self._applied, self._prev_applied, self._last_safe):
            np.copyto(a, q)
        self._velocity[:] = 0.0
        with self._lock:
            np.copyto(self._goal, q)
        self._hard_write(q)
        dmin = self._min_distance()
        if dmin < -self.config.penetration_tol_m:
            log.warning(
                "hand pose penetrates (min contact distance %.4g m)%s",
                dmin,
                "; last safe pose kept" if keep_safe else "",
            )
            if keep_safe:
                np.copyto(self._last_safe, previous_safe)
        self._publish()

    def step(self) -> StepResult:
        """Advance the bridge by one control period ``dt`` (stepping thread only)."""
        self._fresh = False  # (a host mj_step may have moved the rest of the scene)
        with self._lock:
            np.copyto(self._goal_work, self._goal)
        self._slew(self._nominal, self._goal_work, self._nominal)
        np.copyto(self._prev_applied, self._applied)
        if self.config.mode is DriveMode.PD:
            result = self._step_pd()
        else:
            result = self._step_kinematic()
        self._publish_state()
        return result

    def write_targets(self) -> None:
        """PD mode with a host-owned physics loop: advance the nominal by one period and write it to
        the actuators' ctrl. Call :meth:`read_back` after the host's ``mj_step``."""
        with self._lock:
            np.copyto(self._goal_work, self._goal)
        self._slew(self._nominal, self._goal_work, self._nominal)
        self.data.ctrl[self._act] = self._nominal[self._act_src]

    def read_back(self) -> StepResult:
        """PD mode with a host-owned physics loop: read qpos/qvel into ``applied`` after ``mj_step``."""
        np.copyto(self._prev_applied, self._applied)
        result = self._finish_pd()
        self._publish_state()
        return result

    def _slew(self, cur: np.ndarray, goal: np.ndarray, out: np.ndarray) -> None:
        """out = clip(cur + clip(goal − cur, ±L), lo, hi), in place (no allocation; np.maximum/np.minimum are
        np.clip's elementwise operations for lo ≤ hi, without its Python-level dispatch)."""
        tmp = self._tmp
        np.subtract(goal, cur, out=tmp)
        np.maximum(tmp, self._neg_limit, out=tmp)
        np.minimum(tmp, self._limit, out=tmp)
        np.add(cur, tmp, out=out)
        np.maximum(out, self._lo, out=out)
        np.minimum(out, self._hi, out=out)

    def _hard_write(self, q: np.ndarray) -> None:
        """Write the pose ``q`` (qpos, qvel = 0, position-actuator ctrl = q) and bring ``data`` up to date:
        ``mj_forward``, or with ``host_steps`` the collision pass only (none when it is fresh)."""
        d = self.data
        d.qpos[self._qadr] = q
        d.qvel[self._dadr] = 0.0
        d.ctrl[self._act] = q[self._act_src]
        if not self.host_steps:
            mujoco.mj_forward(self.model, d)
        elif not self._fresh:
            mujoco.mj_kinematics(self.model, d)
            mujoco.mj_collision(self.model, d)
        self._fresh = False  # consumed: a second hard write in the same step (fallback) re-evaluates

    def _min_distance(self) -> float:
        """Smallest distance among the considered contacts in ``data`` [m] (inf: none)."""
        d = self.data
        if d.ncon == 0:
            return math.inf
        con = d.contact
        if self._all_hand and not self.config.hand_hand_only:
            return float(con.dist.min())
        g = con.geom
        h0 = self._hand_geom[g[:, 0]]
        h1 = self._hand_geom[g[:, 1]]
        mask = (h0 & h1) if self.config.hand_hand_only else (h0 | h1)
        if not mask.any():
            return math.inf
        return float(con.dist[mask].min())

    def _evaluate(self) -> float:
        """Collision check of the qpos currently in ``data``: kinematics + collision only."""
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_collision(self.model, self.data)
        self._fresh = True
        return self._min_distance()

    def _write_qpos(self, q: np.ndarray) -> None:
        self.data.qpos[self._qadr] = q

    def _step_kinematic(self) -> StepResult:
        tol = -self.config.penetration_tol_m
        cand = self._cand
        self._slew(self._applied, self._goal_work, cand)
        self._write_qpos(cand)
        dmin = self._evaluate()
        evals = 1
        projected = fell_back = False
        result = cand
        if dmin < tol and self.config.collision_project:
            projected = True
            result, evals_p = self._project(cand, tol)
            evals += evals_p
        np.copyto(self._applied, result)
        self._hard_write(self._applied)
        dmin = self._min_distance()
        if projected and dmin < tol:  # the projection found nothing safe: keep the last safe pose
            fell_back = True
            np.copyto(self._applied, self._last_safe)
            self._hard_write(self._applied)
            dmin = self._min_distance()
        if dmin >= tol:
            np.copyto(self._last_safe, self._applied)
        np.subtract(self._applied, self._prev_applied, out=self._velocity)
        self._velocity /= self.dt
        return self._finish(projected, fell_back, dmin, evals)

    def _project(self, cand: np.ndarray, tol: float) -> tuple[np.ndarray, int]:
        """Per-joint projection of docs/theory/g20_hand.md §4; returns (pose, collision evaluations).

        From ``start`` (the previous pose, or ``last_safe`` if the previous pose penetrates) each
        active joint, with its mimic followers, moves toward ``cand`` in order of |Δ| descending:
        fully if the result is safe, else to the largest safe fraction found by bisection. The caller
        checks the returned pose and falls back to ``last_safe`` if it still penetrates.
        """
        start, delta, q = self._start, self._delta, self._q
        np.copyto(start, self._applied)
        self._write_qpos(start)
        evals = 1
        if self._evaluate() < tol:
            np.copyto(start, self._last_safe)
            self._write_qpos(start)
        np.subtract(cand, start, out=delta)
        gmag = self._gmag
        for k, g in enumerate(self._groups):
            gmag[k] = max(abs(delta[i]) for i in g)
        np.copyto(q, start)
        qpos = self.data.qpos
        nb = self.config.bisections
        for k in np.argsort(-gmag, kind="stable"):
            if gmag[k] == 0.0:
                break
            members = self._group_members[k]  # ((table index, qpos address), ...)
            for i, a in members:  # full move
                qpos[a] = start[i] + delta[i]
            evals += 1
            if self._evaluate() >= tol:
                for i, a in members:
                    q[i] = qpos[a]
                continue
            lo, hi = 0.0, 1.0
            n_bisect = 0
            if nb > 0:
                # Probe the smallest bisection step first: if even that penetrates, the bisection
                # returns 0 whenever penetration is monotone along the move. This keeps joints
                # resting against a contact at 2 evaluations instead of 13.
                tiny = 0.5**nb
                for i, a in members:
                    qpos[a] = start[i] + tiny * delta[i]
                evals += 1
                if self._evaluate() >= tol:
                    lo, n_bisect = tiny, nb
            for _ in range(n_bisect):
                mid = 0.5 * (lo + hi)
                for i, a in members:
                    qpos[a] = start[i] + mid * delta[i]
                evals += 1
                if self._evaluate() >= tol:
                    lo = mid
                else:
                    hi = mid
            for i, a in members:
                q[i] = start[i] + lo * delta[i]
                qpos[a] = q[i]
        self._fresh = False  # it ends by writing a pose that may not be the last one evaluated
        return q, evals

    def _step_pd(self) -> StepResult:
        d, m = self.data, self.model
        d.ctrl[self._act] = self._nominal[self._act_src]
        for _ in range(self._substeps):
            mujoco.mj_step(m, d)
        return self._finish_pd()

    def _finish_pd(self) -> StepResult:
        d = self.data
        np.copyto(self._applied, d.qpos[self._qadr])
        np.copyto(self._velocity, d.qvel[self._dadr])
        dmin = self._min_distance()
        if dmin >= -self.config.penetration_tol_m:
            np.copyto(self._last_safe, self._applied)
        return self._finish(False, False, dmin, 0)

    def _finish(self, projected: bool, fell_back: bool, dmin: float, evals: int) -> StepResult:
        self._step += 1
        a = self._active
        err = float(np.max(np.abs(self._applied[a] - self._nominal[a])))
        with self._lock:
            self._tracking_error = err
        self._publish()
        return StepResult(self._step, self._step * self.dt, projected, fell_back, dmin, err, evals)

    def _publish(self) -> None:
        with self._lock:
            np.copyto(self._pub["nominal"], self._nominal)
            np.copyto(self._pub["applied"], self._applied)
            np.copyto(self._pub["last_safe"], self._last_safe)

    def _publish_state(self, force: bool = False) -> None:
        if not force and self._step % self._state_every:
            return
        state = HandState(
            time=self._step * self.dt,
            step=self._step,
            names=self.spec.joint_names,
            positions=_frozen(self._applied),
            velocities=_frozen(self._velocity),
        )
        with self._lock:
            self._state = state
        if self.on_state is not None:
            self.on_state(state)


# The self-test and the command/state streams (hand/track.py) are re-exported here, where they lived before the
# split; hand/track.py only names HandBridge for its type annotations.
from dockbench.hand.track import (  # noqa: E402
    TimedCommand,
    TrackTestResult,
    parse_command_stream,
    run_track_test,
    state_to_json,
)

__all__ = [
    "ACTUATOR_SUFFIX", "ROOT_BODY", "BridgeConfig", "BridgeSnapshot", "CommandResult", "DriveMode", "HandBridge",
    "HandState", "StepResult", "TimedCommand", "TrackTestResult", "parse_command_stream", "run_track_test",
    "state_to_json",
]
