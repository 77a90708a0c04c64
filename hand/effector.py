"""The G20 hand as an end effector inside the 1 ms torque loop (``tool: {type: g20_left}``).

Assembly (``sim.assembly`` calls :meth:`G20Effector.build` with the arm's flange body and the pose of
the robot's ``attachment_site``)::

    flange body
    └── tool            adapter body = the tool root: F/T site ``ft_sensor`` at its origin (the flange
        │               plane), declared mass/inertia of a solid cylinder, visual geom only
        └── site hand_mount   at ``mount.position`` / ``mount.rpy_deg`` in the flange frame
            └── hand/g20_root … the 21-joint G20 model (``MjSpec.attach``, prefix ``hand/``)
                └── site ``ee``   the task point the arm controller tracks (default: centre of the palm
                                  face, EE z = palm normal = hand +X)

Everything below ``tool`` is beyond the sensor: the F/T pair on ``ft_sensor`` measures what the
flange exerts on adapter + hand, and every hand geom is a tool geom for the contact truth
(``sim.wrench``). Hand–hand pairs never collide in the plant (:data:`HAND_CONTYPE`): for a hand held
rigid they are internal forces, so ``contact_count`` / ``contact.max_contacts`` count hand–environment
(and hand–arm) contacts only. Self-collision is the bridge's business (below).

Inside the loop the hand is KINEMATIC (docs/theory/g20_hand.md §6, :class:`hand.bridge.HandBridge`). Each control
step :meth:`HandRuntime.pre_step` issues the schedule's due commands and runs one bridge step (slew →
collision projection → pose), then hard-writes the pose into the plant (hand ``qpos``, ``qvel = 0``,
position-actuator ``ctrl = q``) before the arm's ``mj_step``:

* the bridge runs on a private copy of the hand model (hand–hand distances depend on the hand joint
  angles alone, so it finds the same poses as on the plant — tested to 1e-12 rad) as a
  :class:`hand.bridge.HandBridge` with ``host_steps=True``, which replaces the closing ``mj_forward`` by
  the collision pass it actually needs and drops that too when the pose was just checked;
* at a fixed point of the bridge (slew done, pose unchanged, e.g. a preset reached or fingertips
  resting on the palm) the step would repeat itself exactly, so only the pose is re-written
  (``skip_when_settled``; bit-identical telemetry, tested);
* joint lock: ``mj_step`` integrates the 21 hand dofs between two writes. Their armature is raised to
  ``joint_lock_armature`` (10 kg·m² vs. the fingers' ~1e-6 kg·m²), so q̈_hand ≈ 0 within the step and
  the arm rows M_aa q̈_a + M_ah q̈_h = τ − h_a become the rigid-tool dynamics M_aa q̈_a = τ − h_a
  (arm accelerations equal Pinocchio's to 1e-6 relative; with the hand's own 1e-4 kg·m² they differ by
  2 %). The armature sits on the hand dofs' diagonal only: ``mj_fullM``'s arm block is unchanged.

Rigid-tool inertia: the arm's Pinocchio model lumps adapter + hand onto the last arm link at
:meth:`G20Effector.lumping_qpos` (the hand at ``lumping_preset``, OPEN) when it is built; in the loop
:meth:`HandRuntime.bind_dynamics` keeps it lumped at the applied hand pose (re-lumped whenever the
written pose changes, :class:`sim.dynamics.LumpedInertia`), so M and h equal the plant's at any hand
pose (1e-9; lumped at OPEN alone they were off by 1.6e-3 at the half fist and 3.4e-3 at the fist on
the iiwa14).

Collision scope: with ``project_environment: true`` the bridge runs on the plant and also projects
against hand–environment contacts (hand–hand contacts then stay in the plant). Off by default: a
palm pressed into a plate by the ARM, which no finger move can undo, would make every finger step
"penetrating" and freeze the hand at a stale last-safe pose; hand–environment contact is physics.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np
from dockbench.hand.bridge import ACTUATOR_SUFFIX, BridgeConfig, HandBridge, StepResult
from dockbench.hand.mapping import sdk_to_joint_positions
from dockbench.hand.spec import HandSpec, default_model_xml, load_model, load_spec
from dockbench.sim.config import param
from dockbench.sim.errors import ModelError, ScenarioError
from dockbench.sim.interfaces import TOOLS, Tool, ToolRuntime, matrix_to_quat, rpy_to_matrix

HAND_PREFIX = "hand/"
"""Name prefix of every hand element in the assembled model."""

MOUNT_SITE = "hand_mount"
"""Site on the adapter body that the hand's root body is attached to."""

HAND_ROOT = "g20_root"
"""The hand's root body (without prefix)."""

HAND_CONTYPE, HAND_CONAFFINITY = 2, 1
"""Collision bits of the hand's collision geoms in the plant: a pair collides when
``contype_a & conaffinity_b or contype_b & conaffinity_a``, so two hand geoms never do (2 & 1 = 0),
while a hand geom meets every geom whose contype has bit 0 set (the robots' and targets' default 1)."""


@functools.lru_cache(maxsize=1)
def _packaged_spec() -> HandSpec:
    return load_spec()


@functools.lru_cache(maxsize=1)
def _packaged_ranges() -> dict[str, tuple[float, float]]:
    """Joint ranges [rad] of the packaged hand model, for load-time checks of ``joints`` commands."""
    m = load_model(_packaged_spec())
    return {n: (float(m.joint(n).range[0]), float(m.joint(n).range[1])) for n in _packaged_spec().joint_names}


# ------------------------------------------------------------------------------------------- config
def _validate_joint_targets(self: Any) -> None:
    given = {f.name: v for f in dataclasses.fields(self) if (v := getattr(self, f.name)) is not None}
    if not given:
        raise ScenarioError(
            f"name at least one joint; known: {', '.join(_packaged_spec().joint_names)}", key=None
        )
    for name, value in given.items():
        lo, hi = _packaged_ranges()[name]
        if not lo - 1e-12 <= value <= hi + 1e-12:
            raise ScenarioError(f"must be within the joint range [{lo}, {hi}] rad, got {value}", key=name)


HandJointTargets = dataclasses.make_dataclass(
    "HandJointTargets",
    [
        (name, float | None, param(None, unit="rad", ge=-1e3, le=1e3, doc=f"{name} angle (within its joint range)"))
        for name in _packaged_spec().joint_names
    ],
    frozen=True,
    namespace={
        "__module__": __name__,
        "validate": _validate_joint_targets,
        "__doc__": "A name-based hand command: {joint name: angle [rad]}; joints not named keep their goal, "
        "a named driver brings its mimic joint along (hand.mapping).",
    },
)


@dataclass(frozen=True)
class HandCommandConfig:
    """One scheduled hand command: at time ``t`` exactly one of ``preset``, ``sdk`` or ``joints``."""

    t: float = param(unit="s", ge=0.0, le=86400.0, doc="time the command is issued (run clock)")
    preset: str | None = param(None, doc="SDK preset of the hand spec (open, half_fist, fist)")
    sdk: tuple[float, ...] | None = param(
        None, length=20, ge=0.0, le=255.0, doc="the 20 SDK channel values 0..255"
    )
    joints: HandJointTargets | None = param(None, doc="{joint name: angle [rad]}, a partial update")

    def validate(self) -> None:
        given = [k for k in ("preset", "sdk", "joints") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ScenarioError(
                f"give exactly one of preset, sdk, joints; got {', '.join(given) or 'none'}",
                key=given[1] if len(given) > 1 else None,
            )
        if self.preset is not None and self.preset not in _packaged_spec().presets:
            raise ScenarioError(
                f"unknown preset {self.preset!r}; known: {', '.join(sorted(_packaged_spec().presets))}",
                key="preset",
            )

    def command(self) -> Any:
        """The command in the form :meth:`HandBridge.command` takes (preset name, SDK list or mapping)."""
        if self.preset is not None:
            return self.preset
        if self.sdk is not None:
            return list(self.sdk)
        return {k: v for k, v in dataclasses.asdict(self.joints).items() if v is not None}

    def label(self) -> str:
        if self.preset is not None:
            return self.preset
        return "sdk" if self.sdk is not None else "joints"


@dataclass(frozen=True)
class HandMountConfig:
    position: tuple[float, float, float] = param(
        (0.0, 0.0, 0.012), unit="m", length=3, ge=-1.0, le=1.0,
        doc="hand base frame (g20_root) origin in the flange frame",
    )
    rpy_deg: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0), unit="deg", length=3, ge=-360.0, le=360.0,
        doc="hand base orientation in the flange frame, fixed-axis roll/pitch/yaw (R = Rz Ry Rx)",
    )


@dataclass(frozen=True)
class G20EffectorConfig:
    mount: HandMountConfig = field(default_factory=HandMountConfig)
    adapter_length: float = param(
        0.012, unit="m", ge=1e-4, le=1.0, doc="adapter (F/T body) cylinder length along flange z"
    )
    adapter_radius: float = param(0.035, unit="m", ge=1e-4, le=0.5, doc="adapter cylinder radius")
    adapter_mass: float = param(
        0.05, unit="kg", ge=1e-4, le=50.0, doc="adapter mass (solid cylinder), beyond the F/T sensor"
    )
    ee_position: tuple[float, float, float] = param(
        (0.022, 0.0, 0.072), unit="m", length=3, ge=-1.0, le=1.0,
        doc="EE site (task point) in the hand base frame; default: centre of the palm face",
    )
    ee_rpy_deg: tuple[float, float, float] = param(
        (0.0, 90.0, 0.0), unit="deg", length=3, ge=-360.0, le=360.0,
        doc="EE site orientation in the hand base frame; default: EE z = palm normal (hand +X)",
    )
    initial: str = param("open", doc="preset the hand holds from t = 0 until the first command")
    schedule: tuple[HandCommandConfig, ...] = param(
        (), max_length=10000, doc="hand commands: a list of {t, and one of preset, sdk, joints}, times non-decreasing "
        "(docs/hand_effector.md §4)"
    )
    slew_rad_s: float = param(5.0, unit="rad/s", ge=0.0, le=1e3, doc="slew limit of the active joints (0 = jump)")
    collision_project: bool = param(True, doc="project hand poses that penetrate (docs/theory/g20_hand.md §4)")
    penetration_tol: float = param(5e-4, unit="m", ge=0.0, le=0.1, doc="contact distance below −tol is a penetration")
    bisections: int = param(12, ge=0, le=60, doc="bisections per blocked joint in the projection")
    project_environment: bool = param(
        False, doc="also project against hand–environment contacts (default: hand–hand only)"
    )
    joint_lock_armature: float = param(
        10.0, unit="kg·m²", ge=1e-6, le=1e4, doc="armature of the hand dofs: holds them still during mj_step"
    )
    skip_when_settled: bool = param(
        True, doc="at a fixed point of the bridge (slew done, pose unchanged; hand–hand scope) re-write the "
        "pose instead of repeating an identical bridge step",
    )
    lumping_preset: str = param(
        "open", doc="hand pose at which its inertia is lumped when the arm model is built (the loop then re-lumps "
        "it at the applied pose whenever the fingers move)"
    )
    preset_tolerance: float = param(
        0.02, unit="rad", ge=1e-6, le=3.15, doc="a command counts as reached within this"
    )

    def validate(self) -> None:
        presets = _packaged_spec().presets
        for key in ("initial", "lumping_preset"):
            if getattr(self, key) not in presets:
                raise ScenarioError(
                    f"unknown preset {getattr(self, key)!r}; known: {', '.join(sorted(presets))}", key=key
                )
        for i in range(1, len(self.schedule)):
            if self.schedule[i].t < self.schedule[i - 1].t:
                raise ScenarioError(
                    f"times must be non-decreasing, got {self.schedule[i].t} after {self.schedule[i - 1].t}",
                    key=f"schedule[{i}].t",
                )


# ------------------------------------------------------------------------------------------ tool
@TOOLS.register("g20_left")
class G20Effector(Tool):
    """The LinkerHand G20 (left) on an adapter at the flange (see module docstring)."""

    Config = G20EffectorConfig

    def __init__(self, config: G20EffectorConfig):
        super().__init__(config)
        self.spec = _packaged_spec()

    # ---- geometry
    @property
    def T_flange_hand(self) -> np.ndarray:
        """(4, 4) pose of the hand base frame in the flange frame."""
        T = np.eye(4)
        T[:3, :3] = rpy_to_matrix(np.radians(self.config.mount.rpy_deg))
        T[:3, 3] = self.config.mount.position
        return T

    @property
    def T_hand_ee(self) -> np.ndarray:
        """(4, 4) pose of the EE site in the hand base frame."""
        T = np.eye(4)
        T[:3, :3] = rpy_to_matrix(np.radians(self.config.ee_rpy_deg))
        T[:3, 3] = self.config.ee_position
        return T

    @property
    def length(self) -> float:
        """z of the EE origin in the flange frame [m]."""
        return float((self.T_flange_hand @ self.T_hand_ee)[2, 3])

    def build(self, spec: mujoco.MjSpec, parent: Any, pos: np.ndarray, quat: np.ndarray) -> None:
        c: G20EffectorConfig = self.config
        body = parent.add_body(name=self.root_body, pos=list(pos), quat=list(quat))
        body.explicitinertial = True
        body.mass = c.adapter_mass
        L, r = c.adapter_length, c.adapter_radius
        body.ipos = [0.0, 0.0, L / 2.0]
        ixx = c.adapter_mass * (3.0 * r**2 + L**2) / 12.0
        body.inertia = [ixx, ixx, c.adapter_mass * r**2 / 2.0]
        body.add_geom(
            name="hand_adapter", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[r, L / 2.0, 0.0],
            pos=[0.0, 0.0, L / 2.0], contype=0, conaffinity=0, group=2, mass=0.0, rgba=[0.3, 0.3, 0.35, 1.0],
        )
        body.add_site(name=self.sensor_site, pos=[0, 0, 0], size=[0.004, 0, 0])
        T = self.T_flange_hand
        mount = body.add_site(name=MOUNT_SITE, pos=list(T[:3, 3]), quat=list(matrix_to_quat(T[:3, :3])),
                              size=[0.003, 0, 0])
        spec.attach(mujoco.MjSpec.from_string(default_model_xml()), prefix=HAND_PREFIX, site=mount)
        root = spec.body(HAND_PREFIX + HAND_ROOT)
        if root is None:
            raise ModelError(f"hand root body {HAND_PREFIX + HAND_ROOT!r} missing after attach")
        Te = self.T_hand_ee
        root.add_site(name=self.ee_site, pos=list(Te[:3, 3]), quat=list(matrix_to_quat(Te[:3, :3])),
                      size=[0.003, 0, 0])
        for name in self.spec.joint_names:
            spec.joint(HAND_PREFIX + name).armature = c.joint_lock_armature
        if not c.project_environment:
            # hand–hand pairs never collide in the plant (contype 2 & conaffinity 1 = 0 both ways),
            # hand–anything-else still does (its contype has bit 0, which meets conaffinity 1)
            for g in root.find_all(mujoco.mjtObj.mjOBJ_GEOM):
                if g.contype or g.conaffinity:
                    g.contype, g.conaffinity = HAND_CONTYPE, HAND_CONAFFINITY

    # ---- hand poses
    def preset_vector(self, model: mujoco.MjModel, name: str) -> np.ndarray:
        """(21,) joint angles [rad] of SDK preset ``name`` (spec table order), clipped to the ranges."""
        pos = sdk_to_joint_positions(self.spec.preset(name), self.spec)
        out = np.empty(len(self.spec.joint_names))
        for k, n in enumerate(self.spec.joint_names):
            j = model.joint(HAND_PREFIX + n)
            out[k] = np.clip(pos[n], j.range[0], j.range[1]) if model.jnt_limited[j.id] else pos[n]
        return out

    def hand_qpos_addresses(self, model: mujoco.MjModel) -> np.ndarray:
        """(21,) qpos addresses of the hand joints (spec table order)."""
        return np.array([model.jnt_qposadr[model.joint(HAND_PREFIX + n).id] for n in self.spec.joint_names])

    def lumping_qpos(self, model: mujoco.MjModel) -> np.ndarray:
        """``qpos0`` with the hand at ``lumping_preset`` (OPEN): the pose at which the adapter and hand
        links are lumped onto the last arm link of the Pinocchio model."""
        q = np.array(model.qpos0, dtype=float)
        q[self.hand_qpos_addresses(model)] = self.preset_vector(model, self.config.lumping_preset)
        return q

    def make_runtime(self, model: mujoco.MjModel, data: mujoco.MjData, scenario: Any) -> HandRuntime:
        return HandRuntime(model, data, self.config, self.spec, scenario.sim.control_period)


# --------------------------------------------------------------------------------------- runtime
class HandRuntime(ToolRuntime):
    """Per-step behaviour of the hand in the loop: schedule → bridge step → write into the plant.

    Where the bridge runs: ``project_environment: false`` (default) on a private standalone hand
    model (the same ``g20_left.xml``; the plant has no hand–hand pairs), and the pose is copied into
    the plant; ``true`` on the plant itself, counting every contact with a hand geom.

    Telemetry channels (row i = the hand state in the physics at t_i, i.e. the pose written by the
    previous ``pre_step`` and the goal it was computed from):

    ====================  ========  =====  =========================================================
    channel               shape     unit   meaning
    ====================  ========  =====  =========================================================
    hand_goal             (N, 21)   rad    goal (latest command, clipped to ranges), spec table order
    hand_applied          (N, 21)   rad    pose written to MuJoCo (after slew and projection)
    hand_penetration      (N,)      m      max(0, −min distance) over the projection's contacts
                                           (hand–hand by default): the self-penetration depth
    hand_projected        (N,)      —      1 when the step ran the collision projection
    hand_fell_back        (N,)      —      1 when the projection failed and last_safe was written
    ====================  ========  =====  =========================================================

    Joint order: :attr:`joint_names` (the spec table), also in the run summary.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        data: mujoco.MjData,
        config: G20EffectorConfig,
        spec: HandSpec,
        control_period: float,
    ):
        self.config = config
        self.spec = spec
        self.model, self.data = model, data
        n = len(spec.joint_names)
        self.channels = {
            "hand_goal": ((n,), "rad"),
            "hand_applied": ((n,), "rad"),
            "hand_penetration": ((), "m"),
            "hand_projected": ((), ""),
            "hand_fell_back": ((), ""),
        }
        bcfg = BridgeConfig(
            slew_rad_s=config.slew_rad_s,
            collision_project=config.collision_project,
            penetration_tol_m=config.penetration_tol,
            bisections=config.bisections,
            hand_hand_only=False,
            dt=control_period,
            state_rate_hz=min(100.0, 1.0 / control_period),
        )
        self.private_model = not config.project_environment
        if self.private_model:
            self.bridge = HandBridge.standalone(bcfg, spec, host_steps=True)
        else:
            self.bridge = HandBridge(model, data, spec, bcfg, prefix=HAND_PREFIX, host_steps=True)
        # the hand's addresses in the PLANT (resolved by name, never by index)
        jid = [model.joint(HAND_PREFIX + j).id for j in spec.joint_names]
        self._qadr = model.jnt_qposadr[jid].astype(np.intp)
        self._dadr = model.jnt_dofadr[jid].astype(np.intp)
        act, src = [], []
        for k, j in enumerate(spec.joint_names):
            a = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, HAND_PREFIX + j + ACTUATOR_SUFFIX)
            if a >= 0:
                act.append(a)
                src.append(k)
        self._act = np.array(act, dtype=np.intp)
        self._act_src = np.array(src, dtype=np.intp)
        self.bridge.reset(config.initial)
        self._write_plant()
        mujoco.mj_forward(model, data)  # once at build: sensors / contacts of the initial hand pose
        self._times = [c.t for c in config.schedule]
        self._commands = [c.command() for c in config.schedule]
        self._next = 0
        self._min_distance = self.bridge.min_distance_now()
        self._projected = False
        self._fell_back = False
        self._settled = False
        self._can_idle = config.skip_when_settled and not config.project_environment
        # summary bookkeeping
        self.steps = 0
        self.bridge_steps = 0
        self.projected_steps = 0
        self.fallbacks = 0
        self.rejected: list[str] = []
        self.max_penetration = max(0.0, -self._min_distance)
        self._issued: list[dict[str, Any]] = []
        self.t_bridge = 0.0
        #: re-lumping of the arm model at the applied pose (bind_dynamics); none until bound
        self._lumped = None
        self._lumped_pose: np.ndarray | None = None
        self.relumps = 0

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.spec.joint_names

    def bind_dynamics(self, dynamics: Any) -> None:
        """Keep the arm's Pinocchio model lumped at the applied hand pose (sim.dynamics.LumpedInertia):
        re-lumped now (the initial pose) and after every step whose written pose differs from the last
        one lumped, so that the next snapshot's M and h are the plant's."""
        from dockbench.sim.dynamics import LumpedInertia

        names = [dynamics.model.names[j] for j in range(1, dynamics.model.njoints)]
        self._lumped = LumpedInertia(self.model, dynamics.model, names)
        self._lumped_pose = self.bridge.applied_now.copy()
        self._lumped.update(self.data.qpos)
        self.relumps = 1

    def _relump_if_moved(self) -> None:
        applied = self.bridge.applied_now
        if self._lumped is not None and not np.array_equal(applied, self._lumped_pose):
            self._lumped_pose[:] = applied
            self._lumped.update(self.data.qpos)
            self.relumps += 1

    def _write_plant(self) -> None:
        """Hard-write the applied pose into the plant: hand qpos, qvel = 0, position-actuator ctrl = q."""
        d, q = self.data, self.bridge.applied_now
        d.qpos[self._qadr] = q
        d.qvel[self._dadr] = 0.0
        d.ctrl[self._act] = q[self._act_src]

    def _close_window(self) -> None:
        """Final error of the command whose hold window ends now (max over all 21 joints)."""
        if self._issued:
            last = self._issued[-1]
            if last.get("final_error") is None:
                last["final_error"] = float(np.max(np.abs(self.bridge.applied_now - self.bridge.goal_in_use)))

    def pre_step(self, t: float) -> None:
        """Issue the commands due at ``t`` [s], then one bridge step (or a hold when at rest), and
        write the hand pose into the plant for the coming ``mj_step``."""
        while self._next < len(self._times) and self._times[self._next] <= t + 1e-9:
            k = self._next
            self._close_window()
            cmd = self._commands[k]
            res = self.bridge.command_preset(cmd) if isinstance(cmd, str) else self.bridge.command(cmd)
            entry = {"t": self._times[k], "command": self.config.schedule[k].label(),
                     "accepted": res.accepted, "final_error": None, "reached_at": None}
            if not res.accepted:
                self.rejected.append(f"t={self._times[k]}: {res.reason}")
            self._issued.append(entry)
            self._next += 1
            self._settled = False
        self.steps += 1
        if self._settled:  # nothing can change: undo what mj_step integrated into the hand dofs
            self._write_plant()
            return
        c0 = time.perf_counter()
        r: StepResult = self.bridge.step()
        if self.private_model:
            self._write_plant()
        self._relump_if_moved()
        self.t_bridge += time.perf_counter() - c0
        self.bridge_steps += 1
        self._min_distance = r.min_distance
        self._projected, self._fell_back = r.projected, r.fell_back
        self.projected_steps += r.projected
        self.fallbacks += r.fell_back
        pen = -r.min_distance
        if pen > self.max_penetration:
            self.max_penetration = pen
        if self._issued and self._issued[-1]["reached_at"] is None:
            err = float(np.max(np.abs(self.bridge.applied_now - self.bridge.goal_in_use)))
            if err <= self.config.preset_tolerance:
                self._issued[-1]["reached_at"] = t + self.bridge.dt
        self._settled = self._can_idle and self.bridge.at_fixed_point(r)

    def record(self, i: int, arrays: dict[str, np.ndarray]) -> None:
        arrays["hand_goal"][i] = self.bridge.goal_in_use
        arrays["hand_applied"][i] = self.bridge.applied_now
        arrays["hand_penetration"][i] = max(0.0, -self._min_distance)
        arrays["hand_projected"][i] = self._projected
        arrays["hand_fell_back"][i] = self._fell_back

    def summary(self) -> dict[str, Any]:
        """Run summary (meta.json ``tool_summary``): per-command final error and reach time, the
        worst self-penetration, projection statistics and the bridge's wall time per control step."""
        self._close_window()
        errors = [e["final_error"] for e in self._issued if e["final_error"] is not None]
        return {
            "tool": "g20_left",
            "joint_names": list(self.spec.joint_names),
            "bridge_model": "private hand model" if self.private_model else "plant",
            "commands": [dict(e) for e in self._issued],
            "rejected": list(self.rejected),
            "max_preset_error": max(errors) if errors else 0.0,
            "max_penetration": self.max_penetration,
            "steps": self.steps,
            "bridge_steps": self.bridge_steps,
            "projected_steps": self.projected_steps,
            "fallbacks": self.fallbacks,
            "bridge_us_per_step": 1e6 * self.t_bridge / max(self.steps, 1),
            "lumping_preset": self.config.lumping_preset,
            "relumps": self.relumps,
        }


def hand_metrics(ch: dict[str, np.ndarray], active: np.ndarray | None = None) -> dict[str, float]:
    """The hand metrics proposed for ``telemetry.metrics`` (computed from telemetry alone).

    * ``hand.max_preset_error`` [rad]: the telemetry splits into hold windows of constant
      ``hand_goal``; for each window, max over joints of |hand_applied − hand_goal| at its LAST
      sample; the metric is the largest of these (a command not reached before the next one, or the
      end of the run, shows up here);
    * ``hand.max_penetration`` [m]: max of ``hand_penetration``;
    * ``hand.projected_ratio`` [%]: share of steps with ``hand_projected``;
    * ``hand.fallback_count``: number of steps with ``hand_fell_back``.

    Args:
        ch: telemetry channels (must contain the hand channels).
        active: optional column subset of the 21 joints (default: all).
    """
    goal = np.asarray(ch["hand_goal"], dtype=float)
    applied = np.asarray(ch["hand_applied"], dtype=float)
    if active is not None:
        goal, applied = goal[:, active], applied[:, active]
    n = len(goal)
    if n == 0:
        return {}
    change = np.flatnonzero(np.any(goal[1:] != goal[:-1], axis=1))  # last sample of each window
    last = np.concatenate([change, [n - 1]])
    err = np.max(np.abs(applied[last] - goal[last]), axis=1)
    return {
        "hand.max_preset_error": float(np.max(err)),
        "hand.max_penetration": float(np.max(ch["hand_penetration"])),
        "hand.projected_ratio": float(100.0 * np.mean(np.asarray(ch["hand_projected"]) > 0)),
        "hand.fallback_count": int(np.count_nonzero(np.asarray(ch["hand_fell_back"]) > 0)),
    }


__all__ = [
    "G20Effector",
    "G20EffectorConfig",
    "HandCommandConfig",
    "HandJointTargets",
    "HandMountConfig",
    "HandRuntime",
    "hand_metrics",
    "HAND_PREFIX",
]

