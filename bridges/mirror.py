"""Kinematic mirror: joint-state streams → a MuJoCo model → a viewer or offscreen frames.

The robot model (by default our ``assets/robots/dual_rm75/dual_rm75.urdf``) is loaded directly into
MuJoCo and stays the only model source: no MJCF is generated or kept. Each *group* (an arm) is one
``sensor_msgs/msg/JointState`` topic whose names map to model joints; every joint's qpos address is
found by name (never a fixed index). Accepted frames are written into ``qpos`` followed by
``mj_forward`` only — nothing is integrated (no ``mj_step``), so ``data.time`` stays 0.

Rules (:meth:`KinematicMirror.submit`):

* A frame is rejected whole — and its group keeps its last valid pose — when ``position`` and ``name``
  differ in length (``wrong_count``), a value is NaN/Inf (``not_finite``), a name repeats
  (``duplicate``), a name is no mirror joint (``unknown``), a name belongs to another group (``extra``:
  this is what stops a cross-arm mix-up), a group joint is absent (``missing``), or a position lies
  outside the model's joint range by more than ``range_margin`` (``out_of_range``: a corrupt or
  mis-scaled stream; joints the model leaves unlimited are not range-checked). Names may come in any
  order. ``velocity``/``effort`` are ignored. Rejections are counted per group and reason, with one
  warning per reason.
* Until every group has sent a valid frame nothing is displayed; :meth:`KinematicMirror.waiting_for`
  names the missing groups (no zero pose is ever shown as if it were valid).
* A group whose stream stops holds its last valid pose; after ``stale_after_s`` it is reported as stale.
* More than one publisher on a group's topic triggers a warning (re-armed when it drops back to one).

:class:`MirrorApp` wires a :class:`~bridges.ros2.Transport` to a :class:`KinematicMirror` and renders at
``render_rate_hz`` in a passive viewer (closing it ends the display and the run, nothing else) or
offscreen.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import mujoco
import numpy as np
from dockbench.bridges.ros2 import QOS_DEFAULT, QOS_SENSOR_DATA, JointState, Subscription, Transport, validate_topic
from dockbench.sim.config import param, parse_config
from dockbench.sim.errors import DockbenchError, ModelError, ScenarioError

log = logging.getLogger(__name__)

DEFAULT_CONFIG_RESOURCE = ("robots", "dual_rm75", "mirror.yaml")
"""Package resource (inside ``assets``) of the default mirror config (the dual RM75)."""

_SCALAR_JOINTS = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))

REJECT_KINDS = ("wrong_count", "not_finite", "duplicate", "unknown", "extra", "missing", "out_of_range")
"""Reasons a frame is rejected, in the order they are checked."""


# ------------------------------------------------------------------------------------------- config
@dataclasses.dataclass(frozen=True)
class GroupConfig:
    """One JointState topic driving a set of model joints."""

    name: str = param(doc="group name used in messages (left, right)")
    topic: str = param(doc="absolute ROS 2 topic of sensor_msgs/msg/JointState")
    joints: tuple[str, ...] = param(min_length=1, doc="model joint names (hinge or slide), one qpos each")
    message_names: tuple[str, ...] | None = param(
        None, doc="names on the wire, entry k drives joints[k]; default: the model joint names")
    best_effort: bool = param(False, doc="subscribe BEST_EFFORT (sensor-data QoS) instead of RELIABLE")

    @property
    def wire_names(self) -> tuple[str, ...]:
        """The names expected in a frame (``message_names`` or ``joints``)."""
        return self.message_names if self.message_names is not None else self.joints

    def validate(self) -> None:
        try:
            validate_topic(self.topic)
        except DockbenchError as exc:
            raise ScenarioError(str(exc), key="topic") from None
        if len(set(self.joints)) != len(self.joints):
            raise ScenarioError(f"repeated joint in {list(self.joints)}", key="joints")
        if self.message_names is not None:
            if len(self.message_names) != len(self.joints):
                raise ScenarioError(f"expected {len(self.joints)} names (one per joint), got "
                                    f"{len(self.message_names)}", key="message_names")
            if len(set(self.message_names)) != len(self.message_names):
                raise ScenarioError(f"repeated name in {list(self.message_names)}", key="message_names")


@dataclasses.dataclass(frozen=True)
class CameraConfig:
    """Free camera of the display (world frame)."""

    lookat: tuple[float, float, float] = param(
        (0.0, -0.15, 0.85), unit="m", ge=-100.0, le=100.0, doc="look-at point"
    )
    distance: float = param(2.4, unit="m", gt=0, le=100.0, doc="distance from the look-at point")
    azimuth_deg: float = param(90.0, unit="deg", ge=-360.0, le=360.0, doc="azimuth")
    elevation_deg: float = param(-15.0, unit="deg", ge=-90, le=90, doc="elevation")


@dataclasses.dataclass(frozen=True)
class MirrorConfig:
    """The mirror's settings (``assets/robots/dual_rm75/mirror.yaml`` is the default)."""

    groups: tuple[GroupConfig, ...] = param(min_length=1, doc="one entry per JointState topic")
    model: str = param("robots/dual_rm75/dual_rm75.urdf",
                       doc="URDF or MJCF: a file path, else a package resource under assets/")
    render_rate_hz: float = param(60.0, unit="Hz", gt=0, le=1000, doc="render rate")
    stale_after_s: float = param(0.5, unit="s", gt=0, le=3600.0, doc="a group silent this long is reported stale")
    range_margin: float = param(
        0.01, unit="rad | m", ge=0.0, le=1.0,
        doc="a position may lie this far outside the model's joint range (encoder noise at a limit); "
        "farther, the frame is rejected (out_of_range)",
    )
    width: int = param(640, ge=16, le=4096, doc="offscreen image width [px]")
    height: int = param(480, ge=16, le=4096, doc="offscreen image height [px]")
    offscreen_samples: int = param(0, ge=0, le=16, doc="offscreen multisampling (0: off; software GL "
                                                       "renders 4 samples about 4x slower)")
    camera: CameraConfig = param(CameraConfig(), doc="display camera")

    def validate(self) -> None:
        names = [g.name for g in self.groups]
        if len(set(names)) != len(names):
            raise ScenarioError(f"repeated group name in {names}", key="groups")
        topics = [g.topic for g in self.groups]
        if len(set(topics)) != len(topics):
            raise ScenarioError(f"two groups on one topic: {topics}", key="groups")
        seen: dict[str, str] = {}
        for g in self.groups:
            for j in g.joints:
                if j in seen:
                    raise ScenarioError(f"joint {j!r} in groups {seen[j]!r} and {g.name!r}", key="groups")
                seen[j] = g.name


def load_mirror_config(path: str | Path | None = None) -> MirrorConfig:
    """Parse a mirror YAML into :class:`MirrorConfig` (``None``: the packaged dual-RM75 config).

    Raises:
        ScenarioError: unreadable file, invalid YAML, unknown key, bad value (file and key path named).
    """
    if path is None:
        source = "assets/" + "/".join(DEFAULT_CONFIG_RESOURCE)
        text = resources.files("dockbench.assets").joinpath(*DEFAULT_CONFIG_RESOURCE).read_text(encoding="utf-8")
    else:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ScenarioError(f"cannot read mirror config: {exc}", file=source) from None
    from dockbench.sim.yamlio import load_yaml

    data = load_yaml(text, file=source, what="a mirror config")  # strict: no aliases, no duplicate keys
    return parse_config(MirrorConfig, data, file=source)


def load_model(ref: str) -> mujoco.MjModel:
    """Compile a URDF/MJCF with MuJoCo directly: ``ref`` is a file path, else a resource under ``assets/``.

    Raises:
        ModelError: file not found, or MuJoCo cannot load it (a missing or unsupported mesh included;
            MuJoCo does not resolve ``package://`` URIs).
    """
    path = Path(ref)
    with ExitStack() as stack:
        if not path.is_file():
            res = resources.files("dockbench.assets").joinpath(*Path(ref).parts)
            if not res.is_file():
                raise ModelError(f"model {ref!r} not found (neither a file nor a resource under assets/)")
            path = stack.enter_context(resources.as_file(res))
        try:
            return mujoco.MjModel.from_xml_path(str(path))
        except Exception as exc:  # noqa: BLE001 - mujoco raises ValueError and friends
            hint = ""
            text = str(exc)
            if "mesh" in text.lower() or "resource" in text.lower() or "file" in text.lower():
                hint = (" (a mesh or included file could not be read; paths are relative to the model "
                        "file and 'package://' URIs are not resolved by MuJoCo)")
            raise ModelError(f"{ref}: MuJoCo cannot load the model: {text.strip()}{hint}") from None


# ------------------------------------------------------------------------------------------- core
@dataclasses.dataclass(frozen=True)
class FrameVerdict:
    """Outcome of one frame: ``accepted``; else ``kind`` (one of :data:`REJECT_KINDS`) and ``reason``."""

    accepted: bool
    kind: str = ""
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class GroupStatus:
    """A group's counters and state.

    Attributes:
        name, topic: the group. has_pose: a valid frame has arrived. age_s: seconds since the last
            valid frame (inf: none yet). accepted: valid frames. rejected: ``{kind: count}``.
        publishers: matched publishers at the last check (-1: not checked yet).
    """

    name: str
    topic: str
    has_pose: bool
    age_s: float
    accepted: int
    rejected: Mapping[str, int]
    publishers: int


class _Group:
    def __init__(self, cfg: GroupConfig, qadr: np.ndarray) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.wire = cfg.wire_names
        self.index = {n: k for k, n in enumerate(self.wire)}
        self.qadr = qadr
        self.pose = np.zeros(len(self.wire))      # last valid pose (lock)
        self.has_pose = False
        self.fresh = False                        # a new valid pose not yet written to qpos
        self.t_last = -math.inf
        self.accepted = 0
        self.rejected: dict[str, int] = {}
        self.publishers = -1
        self.warned_publishers = False
        self.stale = False
        n = len(self.wire)
        self.lo: tuple[float, ...] = (-math.inf,) * n  # accepted position range incl. the margin
        self.hi: tuple[float, ...] = (math.inf,) * n


class KinematicMirror:
    """Validates joint-state frames per group and writes accepted poses into a MuJoCo model.

    Args:
        model: the compiled model; contacts are disabled on it (the mirror only shows poses).
        config: the :class:`MirrorConfig` (its ``groups`` are used here).
        clock: monotonic time source [s] (tests inject one).

    Raises:
        ModelError: a group joint is not in the model (the message lists the model's joints) or has
            more than one qpos (free/ball joints cannot be mirrored from JointState).

    Threads: :meth:`submit` from any thread (transport callbacks); :meth:`apply` and everything touching
    ``model``/``data`` from the one display thread.
    """

    def __init__(
        self, model: mujoco.MjModel, config: MirrorConfig, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.model = model
        self.data = mujoco.MjData(model)
        self.config = config
        self._clock = clock
        model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
        all_joints = [model.joint(i).name for i in range(model.njnt)]
        groups = []
        for g in config.groups:
            adr: list[int] = []
            lo: list[float] = []
            hi: list[float] = []
            for j in g.joints:
                jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j)
                if jid < 0:
                    raise ModelError(f"group {g.name!r}: joint {j!r} is not in the model; model joints: "
                                     f"{', '.join(all_joints)}")
                if int(model.jnt_type[jid]) not in _SCALAR_JOINTS:
                    raise ModelError(f"group {g.name!r}: joint {j!r} is not a hinge or slide joint")
                adr.append(int(model.jnt_qposadr[jid]))
                if model.jnt_limited[jid]:
                    lo.append(float(model.jnt_range[jid, 0]) - config.range_margin)
                    hi.append(float(model.jnt_range[jid, 1]) + config.range_margin)
                else:
                    lo.append(-math.inf)
                    hi.append(math.inf)
            group = _Group(g, np.array(adr, dtype=np.intp))
            group.lo, group.hi = tuple(lo), tuple(hi)
            groups.append(group)
        self._groups = tuple(groups)
        self._by_name = {g.name: g for g in groups}
        self._owner = {n: g.name for g in groups for n in g.wire}
        self._lock = threading.Lock()
        mujoco.mj_forward(model, self.data)

    # ---- lookups
    @property
    def group_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self._groups)

    def qpos_addresses(self, group: str) -> np.ndarray:
        """qpos address of each joint of ``group`` in config order (copy)."""
        return self._group(group).qadr.copy()

    def _group(self, name: str) -> _Group:
        try:
            return self._by_name[name]
        except KeyError:
            raise DockbenchError(
                f"unknown mirror group {name!r}; known: {', '.join(self._by_name)}"
            ) from None

    # ---- frames (any thread)
    def check_frame(self, group: str, msg: JointState) -> tuple[FrameVerdict, np.ndarray | None]:
        """Validate ``msg`` for ``group`` without storing it: the verdict and the pose in config order."""
        g = self._group(group)
        names, pos = msg.name, msg.position
        if len(pos) != len(names):
            return FrameVerdict(False, "wrong_count", f"{len(names)} names but {len(pos)} positions"), None
        bad = [k for k, v in enumerate(pos) if not math.isfinite(v)]
        if bad:
            return FrameVerdict(False, "not_finite", f"{names[bad[0]]} = {pos[bad[0]]}"), None
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            return FrameVerdict(False, "duplicate", f"name {dup!r} repeated"), None
        for n in names:
            if n not in g.index:
                owner = self._owner.get(n)
                if owner is None:
                    return FrameVerdict(False, "unknown", f"{n!r} is not a mirror joint; expected "
                                                          f"{', '.join(g.wire)}"), None
                return FrameVerdict(False, "extra", f"{n!r} belongs to group {owner!r}"), None
        if len(names) != len(g.wire):
            missing = [n for n in g.wire if n not in names]
            return FrameVerdict(False, "missing", f"missing {', '.join(missing)}"), None
        pose = np.empty(len(g.wire))
        for n, v in zip(names, pos, strict=True):
            k = g.index[n]
            if not g.lo[k] <= v <= g.hi[k]:
                m = self.config.range_margin
                return FrameVerdict(False, "out_of_range", f"{n} = {v:.6g} outside the model's range "
                                    f"[{g.lo[k] + m:.4f}, {g.hi[k] - m:.4f}] (margin {m})"), None
            pose[k] = v
        return FrameVerdict(True), pose

    def submit(self, group: str, msg: JointState) -> FrameVerdict:
        """Offer a frame to ``group``. Accepted: it becomes the group's pose at the next :meth:`apply`.
        Rejected: counted (logged once per group and kind), the previous pose stays."""
        verdict, pose = self.check_frame(group, msg)
        g = self._by_name[group]
        now = self._clock()
        with self._lock:
            if verdict.accepted:
                g.pose[:] = pose
                g.has_pose = g.fresh = True
                g.t_last = now
                g.accepted += 1
                return verdict
            first = verdict.kind not in g.rejected
            g.rejected[verdict.kind] = g.rejected.get(verdict.kind, 0) + 1
        if first:
            log.warning("%s (%s): frame rejected (%s): %s; keeping the last valid pose [further '%s' "
                        "rejections are only counted]", g.name, g.cfg.topic, verdict.kind, verdict.reason,
                        verdict.kind)
        return verdict

    # ---- display thread
    def waiting_for(self) -> tuple[str, ...]:
        """Groups without a valid frame yet (empty: ready to display)."""
        with self._lock:
            return tuple(g.name for g in self._groups if not g.has_pose)

    @property
    def ready(self) -> bool:
        """Every group has sent a valid frame."""
        return not self.waiting_for()

    def apply(self) -> bool:
        """Write the groups' new valid poses into ``qpos`` and run ``mj_forward`` (only if any changed).

        Returns:
            True if ``data`` was updated.
        """
        changed = False
        with self._lock:  # held only to copy the poses
            for g in self._groups:
                if g.fresh:
                    self.data.qpos[g.qadr] = g.pose
                    g.fresh = False
                    changed = True
        if changed:
            mujoco.mj_forward(self.model, self.data)
        return changed

    def pose(self, group: str) -> np.ndarray | None:
        """The group's last valid pose in config order (copy), ``None`` before the first one."""
        g = self._group(group)
        with self._lock:
            return g.pose.copy() if g.has_pose else None

    def update_staleness(self) -> tuple[str, ...]:
        """Mark and log groups silent for ``stale_after_s`` (and their recovery); returns the stale ones."""
        now = self._clock()
        out = []
        with self._lock:
            for g in self._groups:
                if not g.has_pose:
                    continue
                stale = now - g.t_last > self.config.stale_after_s
                if stale and not g.stale:
                    log.warning("%s (%s): no valid frame for %.2f s; holding its last valid pose",
                                g.name, g.cfg.topic, now - g.t_last)
                elif g.stale and not stale:
                    log.info("%s (%s): frames resumed", g.name, g.cfg.topic)
                g.stale = stale
                if stale:
                    out.append(g.name)
        return tuple(out)

    def note_publishers(self, group: str, count: int) -> bool:
        """Record the matched-publisher count of ``group``'s topic; warn (once, re-armed when it drops
        to ≤ 1) if more than one publisher feeds it. Returns True if a warning was issued now."""
        g = self._group(group)
        with self._lock:
            g.publishers = count
            warn = count > 1 and not g.warned_publishers
            if count > 1:
                g.warned_publishers = True
            elif count <= 1:
                g.warned_publishers = False
        if warn:
            log.warning("%s: %d publishers on %s; frames from different sources will interleave - stop "
                        "all but one", g.name, count, g.cfg.topic)
        return warn

    def status(self) -> tuple[GroupStatus, ...]:
        """Counters and state of every group."""
        now = self._clock()
        with self._lock:
            return tuple(
                GroupStatus(g.name, g.cfg.topic, g.has_pose, now - g.t_last if g.has_pose else math.inf,
                            g.accepted, MappingProxyType(dict(g.rejected)), g.publishers)
                for g in self._groups
            )


# ------------------------------------------------------------------------------------------- app
@dataclasses.dataclass(frozen=True)
class MirrorReport:
    """Summary of one :meth:`MirrorApp.run`.

    Attributes:
        ready: every group delivered a valid frame (else ``waiting_for`` names the missing ones).
        waiting_for: groups still without a valid frame at the end.
        wait_s: time spent waiting for the first valid frames [s].
        frames: frames rendered (viewer syncs or offscreen renders). display_s: display phase length [s].
        fps: frames / display_s [1/s]. ended_by: ``"viewer_closed"``, ``"duration"``, ``"stop"``,
            ``"wait_timeout"`` or ``"interrupted"``. groups: :class:`GroupStatus` per group.
    """

    ready: bool
    waiting_for: tuple[str, ...]
    wait_s: float
    frames: int
    display_s: float
    fps: float
    ended_by: str
    groups: tuple[GroupStatus, ...]


class MirrorApp:
    """Subscribes each group's topic and displays the mirrored model.

    Args:
        config: the :class:`MirrorConfig`.
        transport: an open transport (not closed here).
        model: a compiled model; default: :func:`load_model` of ``config.model``.
    """

    STATUS_PERIOD_S = 1.0
    """Period of waiting messages, publisher-count checks and staleness checks [s]."""

    def __init__(self, config: MirrorConfig, transport: Transport, *, model: mujoco.MjModel | None = None):
        self.config = config
        self.transport = transport
        self.mirror = KinematicMirror(model if model is not None else load_model(config.model), config)
        vis = self.mirror.model.vis
        vis.quality.offsamples = config.offscreen_samples
        if self.mirror.model.nlight == 0:  # a URDF carries no lights: brighten the headlight
            vis.headlight.ambient[:] = 0.4
            vis.headlight.diffuse[:] = 0.7
        self._subs: dict[str, Subscription] = {}
        self.last_frame: np.ndarray | None = None
        """The last offscreen image (H, W, 3) uint8, if rendering offscreen."""

    def start(self) -> None:
        """Subscribe every group's topic."""
        for g in self.config.groups:
            qos = QOS_SENSOR_DATA if g.best_effort else QOS_DEFAULT
            self._subs[g.name] = self.transport.create_subscription(
                g.topic, lambda msg, name=g.name: self.mirror.submit(name, msg), qos)

    def stop(self) -> None:
        """Unsubscribe (idempotent)."""
        for s in self._subs.values():
            s.close()
        self._subs.clear()

    def check_publishers(self) -> None:
        """Query the matched publishers of each group's topic (duplicate-publisher warning)."""
        for name, sub in self._subs.items():
            self.mirror.note_publishers(name, sub.publisher_count())

    def _camera(self) -> mujoco.MjvCamera:
        c = self.config.camera
        cam = mujoco.MjvCamera()
        cam.type = mujoco.mjtCamera.mjCAMERA_FREE
        cam.lookat[:] = c.lookat
        cam.distance = c.distance
        cam.azimuth = c.azimuth_deg
        cam.elevation = c.elevation_deg
        return cam

    def run(
        self,
        *,
        display: str = "viewer",
        duration: float | None = None,
        wait_timeout: float | None = None,
        stop_event: threading.Event | None = None,
    ) -> MirrorReport:
        """Wait for every group's first valid frame, then render at ``render_rate_hz`` until the viewer
        closes, ``duration`` [s] of display passes, or ``stop_event`` is set.

        Args:
            display: ``"viewer"`` (passive viewer; needs a display), ``"offscreen"`` (``mujoco.Renderer``,
                e.g. with ``MUJOCO_GL=egl``) or ``"none"`` (update the model only).
            duration: display-phase length [s] (``None``: until closed/stopped).
            wait_timeout: give up waiting for the first frames after this long [s] (``None``: wait).

        Raises:
            DockbenchError: unknown display, or the renderer/viewer cannot start (message says why).
        """
        if display not in ("viewer", "offscreen", "none"):
            raise DockbenchError(f"display {display!r}; allowed: viewer, offscreen, none")
        stop = stop_event if stop_event is not None else threading.Event()
        if not self._subs:
            self.start()
        m = self.mirror
        # ---- wait phase: nothing is shown
        t0 = time.monotonic()
        next_status = t0 + self.STATUS_PERIOD_S
        ended_by = ""
        try:
            while not m.ready:
                now = time.monotonic()
                if stop.is_set():
                    ended_by = "stop"
                    break
                if wait_timeout is not None and now - t0 >= wait_timeout:
                    ended_by = "wait_timeout"
                    break
                if now >= next_status:
                    self.check_publishers()
                    missing = m.waiting_for()
                    log.warning("waiting for the first valid frame of: %s", ", ".join(
                        f"{g.name} ({g.topic})" for g in self.config.groups if g.name in missing))
                    next_status = now + self.STATUS_PERIOD_S
                stop.wait(0.01)
        except KeyboardInterrupt:
            ended_by = "interrupted"
        wait_s = time.monotonic() - t0
        if ended_by:
            return MirrorReport(False, m.waiting_for(), wait_s, 0, 0.0, 0.0, ended_by, m.status())
        log.info("all groups have valid frames after %.2f s; displaying at %.0f Hz (%s)", wait_s,
                 self.config.render_rate_hz, display)
        frames, display_s, ended_by = self._display(display, duration, stop)
        fps = frames / display_s if display_s > 0 else 0.0
        return MirrorReport(True, (), wait_s, frames, display_s, fps, ended_by, m.status())

    def _display(self, display: str, duration: float | None, stop: threading.Event) -> tuple[int, float, str]:
        m = self.mirror
        period = 1.0 / self.config.render_rate_hz
        viewer = renderer = None
        cam = self._camera()
        if display == "viewer":
            try:
                import mujoco.viewer as mj_viewer

                viewer = mj_viewer.launch_passive(m.model, m.data, show_left_ui=False, show_right_ui=False)
            except Exception as exc:  # noqa: BLE001 - no display, GL errors
                raise DockbenchError(f"cannot open the MuJoCo viewer ({type(exc).__name__}: {exc}); run "
                                     f"with --offscreen (MUJOCO_GL=egl) on a headless machine") from None
            with viewer.lock():
                viewer.cam.type = cam.type
                viewer.cam.lookat[:] = cam.lookat
                viewer.cam.distance = cam.distance
                viewer.cam.azimuth = cam.azimuth
                viewer.cam.elevation = cam.elevation
        elif display == "offscreen":
            try:
                renderer = mujoco.Renderer(m.model, height=self.config.height, width=self.config.width)
            except Exception as exc:  # noqa: BLE001
                raise DockbenchError(f"offscreen rendering unavailable ({type(exc).__name__}: {exc}); set "
                                     f"MUJOCO_GL=egl or MUJOCO_GL=osmesa") from None
        frames = 0
        ended_by = "stop"
        t_start = time.perf_counter()
        nxt = t_start
        next_status = time.monotonic() + self.STATUS_PERIOD_S
        try:
            while True:
                if stop.is_set():
                    ended_by = "stop"
                    break
                if duration is not None and time.perf_counter() - t_start >= duration:
                    ended_by = "duration"
                    break
                if viewer is not None:
                    if not viewer.is_running():
                        ended_by = "viewer_closed"
                        break
                    with viewer.lock():
                        m.apply()
                    viewer.sync()
                elif renderer is not None:
                    m.apply()
                    renderer.update_scene(m.data, camera=cam)
                    self.last_frame = renderer.render()
                else:
                    m.apply()
                frames += 1
                if time.monotonic() >= next_status:
                    self.check_publishers()
                    stale = m.update_staleness()
                    if viewer is not None:
                        self._overlay(viewer, stale)
                    next_status = time.monotonic() + self.STATUS_PERIOD_S
                nxt += period
                delay = nxt - time.perf_counter()
                if delay < -period:  # more than a frame behind: resynchronise instead of bursting
                    nxt = time.perf_counter()
                elif delay > 0:
                    stop.wait(delay)
        except KeyboardInterrupt:
            ended_by = "interrupted"
        finally:
            display_s = time.perf_counter() - t_start
            if viewer is not None:
                viewer.close()
            if renderer is not None:
                renderer.close()
        return frames, display_s, ended_by

    def _overlay(self, viewer: Any, stale: tuple[str, ...]) -> None:
        text = "; ".join(f"{n}: holding last pose" for n in stale) or "live"
        try:
            viewer.set_texts((None, None, "mirror", text))
        except Exception:  # noqa: BLE001 - overlay is a nicety; older viewers lack it
            pass
