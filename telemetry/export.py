"""A run as ROS 2 messages (MCAP for Foxglove / PlotJuggler, live ROS 2 topics) and as a Rerun recording.

One table maps the telemetry channels (:mod:`telemetry.log`) to messages, so the MCAP file, the live
ROS 2 topics (:mod:`telemetry.live`) and the Rerun recording show the same numbers in the same frames.

Frames (TF tree, all children of ``world``):

====================  =====================================================================
frame                 pose
====================  =====================================================================
``world``             the MuJoCo world
``ee``                the EE (tool tip) frame: ``ee_pos``, ``ee_quat``
``ee_des``            the reference pose: ``ee_pos_des``, ``ee_quat_des``
``ee_world_aligned``  origin at the EE, world axes (the frame of ``ee_vel`` and the world-axes wrenches)
``target``            the true target frame D (static; +z out of the mouth)
``target_believed``   the target frame the planner believed (static)
====================  =====================================================================

Topics (``prefix`` default ``/dockbench``; stamps = simulated time t from 0 unless a live stream
says otherwise):

============================  ============================  ==================  ===========================
topic                         type                          frame_id            from
============================  ============================  ==================  ===========================
``joint_states``              sensor_msgs/JointState        ""                  q [rad], v [rad/s],
                                                                                tau_applied [N·m] (effort)
``joint_torque_cmd``          sensor_msgs/JointState        ""                  tau_cmd [N·m] (effort)
``ee_pose``                   geometry_msgs/PoseStamped     world               ee_pos [m], ee_quat
``ee_pose_des``               geometry_msgs/PoseStamped     world               ee_pos_des, ee_quat_des
``ee_twist``                  geometry_msgs/TwistStamped    ee_world_aligned    ee_vel [m/s, rad/s]
``wrench/ft``                 geometry_msgs/WrenchStamped   ee                  wrench_ext_body [N, N·m]
``wrench/truth``              geometry_msgs/WrenchStamped   ee                  wrench_truth_body
``wrench/ft_world``           geometry_msgs/WrenchStamped   ee_world_aligned    R_world_ee · wrench_ext_body
``wrench/truth_world``        geometry_msgs/WrenchStamped   ee_world_aligned    R_world_ee · wrench_truth_body
``contacts``                  dockbench_msgs/Contacts       ""                  contact_count, contact_count_all
``diagnostics``               dockbench_msgs/RunScalars     ""                  manipulability, saturated, ctrl_*
``hand/joint_states``         sensor_msgs/JointState        ""                  hand_applied [rad] (G20 runs)
``/tf``                       tf2_msgs/TFMessage            world               ee, ee_des, ee_world_aligned
``/tf_static``                tf2_msgs/TFMessage            world               target, target_believed
============================  ============================  ==================  ===========================

Every wrench is ``F_ext``, the wrench the environment exerts on the tool, [f; n]. A ROS wrench's
moment is about its frame's origin, so the exported wrenches are the ``_body`` channels (EE axes,
about the EE origin) and their rotation into world axes (still about the EE origin). The telemetry's
``wrench_*_world`` channels take the moment about the F/T sensor origin instead; their force part
equals the ``_world`` topics' force, their moment differs by (p_sensor − p_ee) × f. The Rerun
recording carries every channel as it is stored.

:func:`write_mcap` (extra ``mcap``) and :func:`write_rrd` (extra ``rerun``) write files;
``experiments/export.py`` is the command line.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from dockbench.bridges import msgs
from dockbench.bridges.msgs import BatchEncoder, Field, Struct
from dockbench.sim.errors import DockbenchError
from dockbench.sim.extras import require
from dockbench.telemetry.log import atomic_path, channel_labels
from dockbench.telemetry.metrics import quat_to_matrix
from dockbench.telemetry.run import Run

PREFIX = "/dockbench"
"""Default topic prefix."""

CONTACTS = msgs.Struct("dockbench_msgs/msg/Contacts", (
    Field("header", msgs.HEADER), Field("tool_contacts", "int32"), Field("all_contacts", "int32"),
))
"""Contact counts: contacts that involve the tool, all active contacts."""

DIAGNOSTICS_NAME = "dockbench_msgs/msg/RunScalars"
"""The per-run scalar message: a header and one float64 per scalar channel (its schema is written into
the MCAP file, so readers need no package for it)."""

FORCE_ARROW_SCALE = 0.005
"""Length of a force arrow in the Rerun 3D view per newton [m/N] (MuJoCo's default ``vis.map.force``)."""

_FIELD_RE = re.compile(r"^[a-z][a-z0-9_]*$")


def diagnostics_struct(names: Sequence[str]) -> Struct:
    """The RunScalars type for these scalar channel names (each a valid ROS field name)."""
    bad = [n for n in names if not _FIELD_RE.match(n)]
    if bad:
        raise DockbenchError(f"channel name(s) {bad} are not valid ROS field names ([a-z][a-z0-9_]*)")
    return Struct(DIAGNOSTICS_NAME, (Field("header", msgs.HEADER),) + tuple(Field(n, "float64") for n in names))


@dataclass
class TopicBatch:
    """N messages of one topic, ready to encode.

    Attributes:
        topic: absolute topic name.
        type: the message type.
        template: one message with the fixed strings and sequence lengths.
        columns: number leaf path → (N,) or (N, k) values.
        t: (N,) stamps [s].
    """

    topic: str
    type: Struct
    template: dict[str, Any]
    columns: dict[str, np.ndarray]
    t: np.ndarray

    def encode(self) -> np.ndarray:
        """(N, L) uint8: row i is the XCDR1 payload of message i."""
        return BatchEncoder(self.type, self.template).encode(self.columns, len(self.t))

    def message(self, i: int) -> dict[str, Any]:
        """Message i as a nested dict (the form the live transports take)."""
        out = copy.deepcopy(self.template)
        for path, values in self.columns.items():
            v = np.asarray(values)[i]
            node, keys = out, path.split(".")
            for k in keys[:-1]:
                node = node.setdefault(k, {})
            node[keys[-1]] = v.tolist() if np.ndim(v) else v.item()
        return out


def _header(frame_id: str) -> dict[str, Any]:
    return {"stamp": {"sec": 0, "nanosec": 0}, "frame_id": frame_id}


def _stamp_cols(t: np.ndarray, offset: float = 0.0) -> dict[str, np.ndarray]:
    sec, ns = msgs.stamp_columns(np.asarray(t, dtype=float) + offset)
    return {"header.stamp.sec": sec, "header.stamp.nanosec": ns}


def _xyz(prefix: str, a: np.ndarray, keys: str = "xyz") -> dict[str, np.ndarray]:
    return {f"{prefix}.{k}": a[:, j] for j, k in enumerate(keys)}


def _quat_xyzw(prefix: str, q_wxyz: np.ndarray) -> dict[str, np.ndarray]:
    return {f"{prefix}.x": q_wxyz[:, 1], f"{prefix}.y": q_wxyz[:, 2], f"{prefix}.z": q_wxyz[:, 3],
            f"{prefix}.w": q_wxyz[:, 0]}


def scalar_channels(ch: Mapping[str, np.ndarray]) -> list[str]:
    """The scalar channels that go into ``diagnostics``: manipulability, saturated, then ctrl_*."""
    base = [n for n in ("manipulability", "saturated") if n in ch]
    return base + sorted(n for n in ch if n.startswith("ctrl_") and np.ndim(ch[n]) == 1)


def world_aligned(wrench_body: np.ndarray, q_world_ee: np.ndarray) -> np.ndarray:
    """(N, 6) EE-axes wrenches about the EE origin → world axes, same point: [R f; R n]."""
    R = quat_to_matrix(q_world_ee)  # (N, 3, 3)
    out = np.empty_like(wrench_body)
    out[:, :3] = np.einsum("nij,nj->ni", R, wrench_body[:, :3])
    out[:, 3:] = np.einsum("nij,nj->ni", R, wrench_body[:, 3:])
    return out


def ros_topics(
    ch: Mapping[str, np.ndarray],
    meta: Mapping[str, Any],
    *,
    prefix: str = PREFIX,
    stamp_offset: float = 0.0,
    only: Sequence[str] | None = None,
) -> list[TopicBatch]:
    """The messages of the topic table (module docstring) for the rows of ``ch``.

    Args:
        ch: channels with a common leading dimension N (``Run.channels`` or a slice of it).
        meta: the run's meta.json (``joint_names``, ``T_world_target``, ``tool_summary``).
        prefix: topic prefix (``/tf`` and ``/tf_static`` are absolute).
        stamp_offset: added to t for the stamps [s] (e.g. the wall time of the run's start).
        only: topic names relative to the prefix (``"ee_pose"``, ``"tf"``, ...) to build; default all.
    """
    t = np.asarray(ch["t"], dtype=float)
    n = len(t)
    names = list(meta.get("joint_names") or [f"joint{k + 1}" for k in range(np.shape(ch["q"])[1])])
    want = None if only is None else set(only)
    out: list[TopicBatch] = []
    st = _stamp_cols(t, stamp_offset)

    def add(rel: str, s: Struct, template: dict, cols: dict) -> None:
        if want is None or rel in want:
            topic = f"/{rel}" if rel in ("tf", "tf_static") else f"{prefix}/{rel}"
            out.append(TopicBatch(topic, s, template, cols, t))

    nv = len(names)
    js = {"header": _header(""), "name": names, "position": [0.0] * nv, "velocity": [0.0] * nv,
          "effort": [0.0] * nv}
    add("joint_states", msgs.JOINT_STATE, js,
        {**st, "position": ch["q"], "velocity": ch["v"], "effort": ch["tau_applied"]})
    add("joint_torque_cmd", msgs.JOINT_STATE, {**js, "position": [], "velocity": []},
        {**st, "effort": ch["tau_cmd"]})
    for rel, p, q in (("ee_pose", "ee_pos", "ee_quat"), ("ee_pose_des", "ee_pos_des", "ee_quat_des")):
        add(rel, msgs.POSE_STAMPED, {"header": _header("world")},
            {**st, **_xyz("pose.position", ch[p]), **_quat_xyzw("pose.orientation", ch[q])})
    add("ee_twist", msgs.TWIST_STAMPED, {"header": _header("ee_world_aligned")},
        {**st, **_xyz("twist.linear", ch["ee_vel"][:, :3]), **_xyz("twist.angular", ch["ee_vel"][:, 3:])})
    need_world = want is None or bool({"wrench/ft_world", "wrench/truth_world"} & want)
    for src, key in (("ft", "wrench_ext_body"), ("truth", "wrench_truth_body")):
        w = np.asarray(ch[key])
        add(f"wrench/{src}", msgs.WRENCH_STAMPED, {"header": _header("ee")},
            {**st, **_xyz("wrench.force", w[:, :3]), **_xyz("wrench.torque", w[:, 3:])})
        if need_world:
            ww = world_aligned(w, ch["ee_quat"])
            add(f"wrench/{src}_world", msgs.WRENCH_STAMPED, {"header": _header("ee_world_aligned")},
                {**st, **_xyz("wrench.force", ww[:, :3]), **_xyz("wrench.torque", ww[:, 3:])})
    add("contacts", CONTACTS, {"header": _header("")},
        {**st, "tool_contacts": np.asarray(ch["contact_count"]).astype(np.int32),
         "all_contacts": np.asarray(ch["contact_count_all"]).astype(np.int32)})
    scal = scalar_channels(ch)
    if scal:
        add("diagnostics", diagnostics_struct(scal), {"header": _header("")},
            {**st, **{s: np.asarray(ch[s], dtype=float) for s in scal}})
    if "hand_applied" in ch:
        qa = np.asarray(ch["hand_applied"], dtype=float).reshape(n, -1)
        hn = list((meta.get("tool_summary") or {}).get("joint_names") or [f"hand{k + 1}" for k in range(qa.shape[1])])
        add("hand/joint_states", msgs.JOINT_STATE,
            {"header": _header(""), "name": hn, "position": [0.0] * len(hn), "velocity": [], "effort": []},
            {**st, "position": qa})
    # TF: three dynamic frames per step
    tf_cols: dict[str, np.ndarray] = {}
    tfs = []
    ee_quat = np.asarray(ch["ee_quat"])
    ident = np.zeros((n, 4))
    ident[:, 0] = 1.0
    for k, (child, p, q) in enumerate((("ee", ch["ee_pos"], ee_quat), ("ee_des", ch["ee_pos_des"], ch["ee_quat_des"]),
                                       ("ee_world_aligned", ch["ee_pos"], ident))):
        tfs.append({"header": _header("world"), "child_frame_id": child})
        base = f"transforms[{k}]"
        tf_cols.update({f"{base}.{c}": v for c, v in st.items()})
        tf_cols.update(_xyz(f"{base}.transform.translation", np.asarray(p)))
        tf_cols.update(_quat_xyzw(f"{base}.transform.rotation", np.asarray(q)))
    add("tf", msgs.TF_MESSAGE, {"transforms": tfs}, tf_cols)
    return out


def tf_static(meta: Mapping[str, Any], t0: float = 0.0) -> TopicBatch | None:
    """``/tf_static`` with the true and the believed target frames (None without a target)."""
    from dockbench.sim.lie import mat2quat_batch

    frames = [(name, meta.get(key)) for name, key in (("target", "T_world_target"),
                                                        ("target_believed", "T_world_target_believed"))]
    frames = [(n, np.asarray(T, dtype=float)) for n, T in frames if T is not None]
    if not frames:
        return None
    tfs, cols = [], {}
    st = _stamp_cols(np.array([t0]))
    for k, (child, T) in enumerate(frames):
        tfs.append({"header": _header("world"), "child_frame_id": child})
        base = f"transforms[{k}]"
        cols.update({f"{base}.{c}": v for c, v in st.items()})
        cols.update(_xyz(f"{base}.transform.translation", T[None, :3, 3]))
        cols.update(_quat_xyzw(f"{base}.transform.rotation", mat2quat_batch(T[None, :3, :3].reshape(1, 9))))
    return TopicBatch("/tf_static", msgs.TF_MESSAGE, {"transforms": tfs}, cols, np.array([t0]))


def _decimate(ch: Mapping[str, np.ndarray], every: int) -> dict[str, np.ndarray]:
    if not isinstance(every, int) or every < 1:
        raise DockbenchError(f"every must be an integer >= 1, got {every!r}")
    return {k: np.asarray(v)[::every] for k, v in ch.items()}


def _load(run: Run | str | Path) -> Run:
    r = run if isinstance(run, Run) else Run.load(run)
    if len(r.t) == 0:
        raise DockbenchError(f"{r.path}: the run has no recorded steps; nothing to export")
    return r


# ------------------------------------------------------------------------------------------- MCAP
@dataclass(frozen=True)
class ExportStats:
    """What an export wrote: ``messages`` (count), ``topics`` (name → count), ``bytes`` (file size)."""

    path: Path
    messages: int
    topics: dict[str, int]
    bytes: int


def write_mcap(run: Run | str | Path, out: str | Path, *, every: int = 1, prefix: str = PREFIX,
               compression: str = "zstd") -> ExportStats:
    """Write the run as an MCAP file of ROS 2 messages (``ros2msg`` schemas, ``cdr`` encoding), which
    Foxglove and PlotJuggler open directly. Messages are in time order; log and publish time = the
    stamp = simulated time. The run's meta.json and summary.json are stored as MCAP metadata records
    ``dockbench.meta`` / ``dockbench.summary`` (key ``json``).

    Args:
        run: a :class:`Run` or a run folder.
        out: the .mcap file (written to a temp file, then renamed).
        every: keep every k-th control step (1 = all).
        prefix: topic prefix.
        compression: ``zstd``, ``lz4`` or ``none``.

    Raises:
        MissingExtra: the ``mcap`` package is not installed (the message gives the install command).
    """
    writer_mod = require("mcap.writer", "mcap", "MCAP export")
    r = _load(run)
    comp = {"zstd": "ZSTD", "lz4": "LZ4", "none": "NONE"}.get(compression)
    if comp is None:
        raise DockbenchError(f"unknown MCAP compression {compression!r}; known: zstd, lz4, none")
    ch = _decimate(r.channels, every)
    batches = ros_topics(ch, r.meta, prefix=prefix)
    static = tf_static(r.meta, float(ch["t"][0]))
    out = Path(out)
    counts: dict[str, int] = {}
    with atomic_path(out, ".mcap.tmp") as (fd, _), os.fdopen(fd, "wb") as fh:
        w = writer_mod.Writer(fh, compression=getattr(writer_mod.CompressionType, comp))
        w.start(profile="ros2", library="dockbench")
        schemas: dict[str, int] = {}

        def channel(b: TopicBatch) -> int:
            if b.type.name not in schemas or b.type.name == DIAGNOSTICS_NAME:
                schemas[b.type.name] = w.register_schema(name=b.type.name, encoding="ros2msg",
                                                         data=b.type.definition().encode())
            return w.register_channel(topic=b.topic, message_encoding="cdr", schema_id=schemas[b.type.name])

        if static is not None:
            cid = channel(static)
            ns = int(round(float(static.t[0]) * 1e9))
            w.add_message(channel_id=cid, log_time=ns, publish_time=ns, sequence=0,
                          data=static.encode()[0].tobytes())
            counts[static.topic] = 1
        encoded = [(channel(b), b.encode()) for b in batches]
        t_ns = np.rint(np.asarray(ch["t"], dtype=float) * 1e9).astype(np.int64).tolist()
        add = w.add_message
        for i, ns in enumerate(t_ns):
            for cid, rows in encoded:
                add(channel_id=cid, log_time=ns, publish_time=ns, sequence=i, data=rows[i].tobytes())
        for b in batches:
            counts[b.topic] = len(t_ns)
        w.add_metadata("dockbench.meta", {"json": json.dumps(_jsonable(r.meta))})
        w.add_metadata("dockbench.summary", {"json": json.dumps(_jsonable(r.summary))})
        w.finish()
    return ExportStats(out, sum(counts.values()), counts, out.stat().st_size)


def _jsonable(obj: Any) -> Any:
    from dockbench.telemetry.run import _jsonable as j

    return j(obj)


# ------------------------------------------------------------------------------------------- Rerun
TIMELINE = "sim_time"
"""The Rerun timeline: simulated time t [s] (a duration)."""


def rerun_static(rec: Any, meta: Mapping[str, Any], units: Mapping[str, str], channels: Sequence[tuple[str, int]],
                 ch: Mapping[str, np.ndarray] | None = None) -> None:
    """Log what does not change: target frames, series names (with units), the whole path when known."""
    rr = require("rerun", "rerun", "Rerun export")
    from dockbench.sim.lie import mat2quat_batch

    rec.log("world", rr.ViewCoordinates.RIGHT_HAND_Z_UP, static=True)
    for name, key in (("target", "T_world_target"), ("target_believed", "T_world_target_believed")):
        T = meta.get(key)
        if T is None:
            continue
        T = np.asarray(T, dtype=float)
        q = mat2quat_batch(T[None, :3, :3].reshape(1, 9))[0]
        rec.log(f"world/{name}", rr.Transform3D(translation=T[:3, 3], quaternion=[q[1], q[2], q[3], q[0]]),
                rr.TransformAxes3D(0.05), static=True)
    for ent in ("world/ee", "world/ee_des"):
        rec.log(ent, rr.TransformAxes3D(0.04), static=True)
    joints = list(meta.get("joint_names") or [])
    for name, width in channels:
        unit = units.get(name, "")
        labels = channel_labels(name, width, joints)
        if unit:
            parts = unit.split("|")
            labels = [f"{lab} [{parts[min(k // 3, len(parts) - 1)] if len(parts) > 1 else unit}]"
                      for k, lab in enumerate(labels)]
        rec.log(f"telemetry/{name}", rr.SeriesLines(names=labels), static=True)
    if ch is not None:
        rec.log("world/path/actual", rr.LineStrips3D([np.asarray(ch["ee_pos"])], colors=[[31, 119, 180]]),
                static=True)
        rec.log("world/path/planned", rr.LineStrips3D([np.asarray(ch["ee_pos_des"])], colors=[[90, 90, 90]]),
                static=True)


def rerun_columns(rec: Any, ch: Mapping[str, np.ndarray], names: Sequence[str]) -> None:
    """Send N rows of the channels ``names`` (telemetry/<name> scalars) and the 3D entities (EE and
    reference frames, F/T and truth force arrows at the EE) in one column batch each."""
    rr = require("rerun", "rerun", "Rerun export")
    t = np.asarray(ch["t"], dtype=float)
    # whole nanoseconds, rounded (Rerun would truncate float seconds: 1.025 s → 1.024999999 s)
    idx = [rr.TimeColumn(TIMELINE, duration=np.rint(t * 1e9).astype(np.int64).astype("timedelta64[ns]"))]
    n = len(t)
    for name in names:
        a = np.asarray(ch[name], dtype=float).reshape(n, -1)
        rec.send_columns(f"telemetry/{name}", indexes=idx, columns=rr.Scalars.columns(scalars=a))
    for ent, p, q in (("world/ee", "ee_pos", "ee_quat"), ("world/ee_des", "ee_pos_des", "ee_quat_des")):
        qw = np.asarray(ch[q])
        rec.send_columns(ent, indexes=idx, columns=rr.Transform3D.columns(
            translation=np.asarray(ch[p]), quaternion=np.column_stack([qw[:, 1], qw[:, 2], qw[:, 3], qw[:, 0]])))
    for ent, key, color in (("world/force/ft", "wrench_ext_world", (31, 119, 180)),
                            ("world/force/truth", "wrench_truth_world", (214, 39, 40))):
        f = np.asarray(ch[key])[:, :3]
        rec.send_columns(ent, indexes=idx, columns=rr.Arrows3D.columns(
            origins=np.asarray(ch["ee_pos"]), vectors=FORCE_ARROW_SCALE * f,
            colors=np.tile(np.array(color, dtype=np.uint8), (n, 1))))


def telemetry_channels(ch: Mapping[str, np.ndarray]) -> list[tuple[str, int]]:
    """(name, width) of every numeric channel, in :data:`telemetry.log.CHANNELS` order then the rest."""
    from dockbench.telemetry.run import _canonical_order

    out = []
    for name in _canonical_order(set(ch)):
        a = np.asarray(ch[name])
        if a.dtype.kind in "fiub" and a.ndim >= 1:
            out.append((name, int(np.prod(a.shape[1:])) if a.ndim > 1 else 1))
    return out


def write_rrd(run: Run | str | Path, out: str | Path, *, every: int = 1) -> ExportStats:
    """Write the run as a Rerun recording (.rrd): every channel as ``telemetry/<name>`` scalars on the
    ``sim_time`` timeline (series named by joint / axis, with units), the EE and reference frames,
    the F/T and truth force arrows at the EE (:data:`FORCE_ARROW_SCALE`), the target frames and
    the actual and planned paths in ``world``. Open it with ``rerun OUT.rrd``.

    Raises:
        MissingExtra: ``rerun-sdk`` is not installed (the message gives the install command).
    """
    rr = require("rerun", "rerun", "Rerun export")
    r = _load(run)
    ch = _decimate(r.channels, every)
    out = Path(out)
    chans = telemetry_channels(ch)
    rec = rr.RecordingStream(f"dockbench-{r.name}", recording_id=str(r.path))
    with atomic_path(out, ".rrd.tmp") as (fd, tmp):
        os.close(fd)
        rec.save(tmp)
        rerun_static(rec, r.meta, r.units, chans, ch)
        rerun_columns(rec, ch, [n for n, _ in chans])
        rec.flush(timeout_sec=60.0) if _accepts_timeout(rec.flush) else rec.flush()
        rec.disconnect()
    n = len(ch["t"])
    topics = {f"telemetry/{c}": n for c, _ in chans}
    return ExportStats(out, n * (len(chans) + 4), topics, out.stat().st_size)


def _accepts_timeout(fn: Any) -> bool:
    import inspect

    try:
        return "timeout_sec" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
