"""Exports read back with the formats' own libraries and compared with telemetry.npz: MCAP through
mcap's reader and mcap-ros2-support's decoder (an independent CDR parser, driven by the schema text
we write), Rerun through its RRD reader. Also the message schemas (type hash, codec, batches) and the
install hints of the optional extras."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib
from dockbench.bridges import msgs, ros2, ros2_cyclonedds
from dockbench.bridges.cdr import CdrError
from dockbench.sim.errors import DockbenchError
from dockbench.sim.extras import EXTRAS, MissingExtra, install_hint, require
from dockbench.sim.loop import run
from dockbench.sim.scenario import load_scenario
from dockbench.telemetry import export
from dockbench.telemetry.metrics import quat_to_matrix
from dockbench.telemetry.run import Run

from tests.helpers import REPO, SCENARIOS

DURATION = 5.5  # [s] into the contact phase of the default docking scenario (first contact at 4.7 s)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    res = run(load_scenario(SCENARIOS / "iiwa14_docking.yaml"), out_root=tmp_path_factory.mktemp("export"),
              duration=DURATION)
    return res.run_dir


@pytest.fixture(scope="module")
def loaded(run_dir) -> Run:
    r = Run.load(run_dir)
    assert r.channels["contact_count"].max() > 0  # the export covers contact, not only free motion
    return r


# ----------------------------------------------------------------------------------------- schemas
def test_type_hash_reproduces_the_published_joint_state_hash():
    assert msgs.JOINT_STATE.type_hash() == ros2.JOINT_STATE_TYPE_HASH
    assert msgs.POSE_STAMPED.type_hash().startswith("RIHS01_") and len(msgs.POSE_STAMPED.type_hash()) == 71


def test_generic_codec_equals_the_hand_written_joint_state_codec():
    m = ros2.JointState(("j1", "joint_two"), (1.0, -2.5), (), (0.5,), 7, 500, "base")
    d = {"header": {"stamp": {"sec": 7, "nanosec": 500}, "frame_id": "base"}, "name": ["j1", "joint_two"],
         "position": [1.0, -2.5], "velocity": [], "effort": [0.5]}
    assert msgs.encode(msgs.JOINT_STATE, d) == m.to_cdr()
    assert msgs.decode(msgs.JOINT_STATE, m.to_cdr()) == d


def _pose(i: int) -> dict:
    return {"header": {"stamp": {"sec": i, "nanosec": 10 * i}, "frame_id": "world"},
            "pose": {"position": {"x": 0.1 * i, "y": -2.0, "z": 1e-300}, "orientation": {"x": 0.0, "y": 0.5, "z": -0.5,
                                                                                        "w": 0.5 ** 0.5}}}


def test_batch_encoder_rows_equal_single_messages():
    enc = msgs.BatchEncoder(msgs.POSE_STAMPED, {"header": {"frame_id": "world"}})
    ms = [_pose(i) for i in range(5)]
    cols = {"header.stamp.sec": [m["header"]["stamp"]["sec"] for m in ms],
            "header.stamp.nanosec": [m["header"]["stamp"]["nanosec"] for m in ms]}
    for part in ("position", "orientation"):
        for k in ms[0]["pose"][part]:
            cols[f"pose.{part}.{k}"] = [m["pose"][part][k] for m in ms]
    rows = enc.encode({k: np.asarray(v) for k, v in cols.items()}, 5)
    for row, m in zip(rows, ms, strict=True):
        assert row.tobytes() == msgs.encode(msgs.POSE_STAMPED, m)
        assert msgs.decode(msgs.POSE_STAMPED, row.tobytes()) == m
    with pytest.raises(CdrError, match="missing"):
        enc.encode({}, 5)


def test_codec_errors_name_the_field():
    with pytest.raises(CdrError, match="pose: unknown field"):
        msgs.encode(msgs.POSE_STAMPED, {"pose": {"position": {}, "orientation": {}, "velocity": {}}})
    with pytest.raises(CdrError, match="header.stamp.sec: .* does not fit int32"):
        msgs.encode(msgs.POSE_STAMPED, {"header": {"stamp": {"sec": 2**40}}})
    with pytest.raises(CdrError, match="truncated"):
        msgs.decode(msgs.POSE_STAMPED, msgs.encode(msgs.POSE_STAMPED, _pose(1))[:-9])


def test_cyclonedds_serializes_our_types_byte_for_byte():
    pytest.importorskip("cyclonedds", reason="cyclonedds not installed (extra: ros2)")
    c = ros2_cyclonedds._cyclone()
    wrench = {"header": {"stamp": {"sec": 3, "nanosec": 4}, "frame_id": "ee"},
              "wrench": {"force": {"x": 1.0, "y": -2.0, "z": 3.5}, "torque": {"x": 0.1, "y": 0.2, "z": -0.3}}}
    for s, m in ((msgs.POSE_STAMPED, _pose(2)), (msgs.WRENCH_STAMPED, wrench)):
        codec = ros2.codec_for(s)
        sample = codec.to_cyclone(c, m)
        assert sample.serialize() == msgs.encode(s, m)
        assert codec.from_cyclone(type(sample).deserialize(msgs.encode(s, m))) == m


def test_typed_topics_round_trip_in_process():
    got = []
    with ros2.InProcessTransport(bus=ros2.InProcessBus()) as t:
        t.create_subscription("/x/pose", got.append, msg_type=msgs.POSE_STAMPED)
        t.create_subscription("/x/pose", lambda m: got.append("wrong type"))  # a JointState reader: no match
        pub = t.create_publisher("/x/pose", msg_type=msgs.POSE_STAMPED)
        assert pub.subscription_count() == 1
        pub.publish(_pose(3))
        with pytest.raises(ros2.TransportError, match="takes a dict"):
            pub.publish(ros2.JointState())
    assert got == [_pose(3)]
    with pytest.raises(ros2.TransportError, match="msg_type must be a bridges.msgs.Struct"):
        ros2.codec_for("geometry_msgs/msg/PoseStamped")


# ----------------------------------------------------------------------------------------- MCAP
def _decoded(path: Path) -> tuple[dict, dict, dict]:
    mcap_reader = pytest.importorskip("mcap.reader", reason="mcap not installed (extra: mcap)")
    ros2_decoder = pytest.importorskip("mcap_ros2.decoder", reason="mcap-ros2-support not installed (test extra)")
    by_topic: dict[str, list] = {}
    schemas: dict[str, str] = {}
    with open(path, "rb") as fh:
        reader = mcap_reader.make_reader(fh, decoder_factories=[ros2_decoder.DecoderFactory()])
        for schema, channel, message, dec in reader.iter_decoded_messages(log_time_order=True):
            by_topic.setdefault(channel.topic, []).append((message.log_time, dec))
            schemas[channel.topic] = f"{schema.name} {schema.encoding} {channel.message_encoding}"
        meta = {m.name: m.metadata for m in reader.iter_metadata()}
    return by_topic, schemas, meta


def test_mcap_holds_the_run_in_ros2_messages(loaded, run_dir, tmp_path):
    """Every topic of the table, one message per step, decoded by mcap-ros2-support from the schema
    text alone, equals telemetry.npz: the numbers are the same doubles (CDR stores IEEE-754 as is).
    The world-aligned wrenches are R·w_body, computed here the same way (quat_to_matrix, einsum), and
    their force equals the world F/T channel to 8·ε·max‖f‖ (the loop rotated f_world into EE axes
    with the same rotation)."""
    out = tmp_path / "run.mcap"
    st = export.write_mcap(run_dir, out)
    by_topic, schemas, meta = _decoded(out)
    ch, n = loaded.channels, len(loaded.t)
    expected_topics = {f"/dockbench/{x}" for x in (
        "joint_states", "joint_torque_cmd", "ee_pose", "ee_pose_des", "ee_twist", "wrench/ft", "wrench/truth",
        "wrench/ft_world", "wrench/truth_world", "contacts", "diagnostics")} | {"/tf", "/tf_static"}
    assert set(by_topic) == expected_topics == set(st.topics)
    assert schemas["/dockbench/ee_pose"] == "geometry_msgs/msg/PoseStamped ros2msg cdr"
    for topic, items in by_topic.items():
        assert len(items) == (1 if topic == "/tf_static" else n), topic
    t_ns = np.rint(loaded.t * 1e9).astype(np.int64)
    js = [d for _, d in by_topic["/dockbench/joint_states"]]
    assert [lt for lt, _ in by_topic["/dockbench/joint_states"]] == t_ns.tolist()
    assert all(d.header.stamp.sec * 10**9 + d.header.stamp.nanosec == int(tn) for d, tn in zip(js, t_ns, strict=True))
    assert js[0].name == loaded.joint_names
    np.testing.assert_array_equal([d.position for d in js], ch["q"])
    np.testing.assert_array_equal([d.velocity for d in js], ch["v"])
    np.testing.assert_array_equal([d.effort for d in js], ch["tau_applied"])
    np.testing.assert_array_equal([d.effort for _, d in by_topic["/dockbench/joint_torque_cmd"]], ch["tau_cmd"])

    def pose(topic):
        ds = [d for _, d in by_topic[topic]]
        assert {d.header.frame_id for d in ds} == {"world"}
        p = [[d.pose.position.x, d.pose.position.y, d.pose.position.z] for d in ds]
        q = [[d.pose.orientation.w, d.pose.orientation.x, d.pose.orientation.y, d.pose.orientation.z] for d in ds]
        return np.array(p), np.array(q)

    for topic, pk, qk in (("/dockbench/ee_pose", "ee_pos", "ee_quat"),
                          ("/dockbench/ee_pose_des", "ee_pos_des", "ee_quat_des")):
        p, q = pose(topic)
        np.testing.assert_array_equal(p, ch[pk])
        np.testing.assert_array_equal(q, ch[qk])

    def wrench(topic):
        ds = [d for _, d in by_topic[topic]]
        w = np.array([[d.wrench.force.x, d.wrench.force.y, d.wrench.force.z,
                       d.wrench.torque.x, d.wrench.torque.y, d.wrench.torque.z] for d in ds])
        return w, {d.header.frame_id for d in ds}

    for src, key in (("ft", "wrench_ext"), ("truth", "wrench_truth")):
        w, frames = wrench(f"/dockbench/wrench/{src}")
        assert frames == {"ee"}
        np.testing.assert_array_equal(w, ch[f"{key}_body"])
        ww, frames = wrench(f"/dockbench/wrench/{src}_world")
        assert frames == {"ee_world_aligned"}
        np.testing.assert_array_equal(ww, export.world_aligned(ch[f"{key}_body"], ch["ee_quat"]))
        fmax = float(np.max(np.linalg.norm(ch[f"{key}_world"][:, :3], axis=1)))
        assert fmax > 0
        np.testing.assert_allclose(ww[:, :3], ch[f"{key}_world"][:, :3], rtol=0, atol=8 * np.finfo(float).eps * fmax)
    tw = [d.twist for _, d in by_topic["/dockbench/ee_twist"]]
    np.testing.assert_array_equal([[x.linear.x, x.linear.y, x.linear.z, x.angular.x, x.angular.y, x.angular.z]
                                   for x in tw], ch["ee_vel"])
    cs = [d for _, d in by_topic["/dockbench/contacts"]]
    np.testing.assert_array_equal([d.tool_contacts for d in cs], ch["contact_count"])
    np.testing.assert_array_equal([d.all_contacts for d in cs], ch["contact_count_all"])
    diag = [d for _, d in by_topic["/dockbench/diagnostics"]]
    for name in export.scalar_channels(ch):
        np.testing.assert_array_equal([getattr(d, name) for d in diag], ch[name].astype(float), err_msg=name)
    # TF: ee, ee_des, ee_world_aligned each step; the targets once
    tf = [d for _, d in by_topic["/tf"]]
    assert [x.child_frame_id for x in tf[0].transforms] == ["ee", "ee_des", "ee_world_aligned"]
    np.testing.assert_array_equal([[x.transforms[0].transform.translation.x, x.transforms[0].transform.translation.y,
                                    x.transforms[0].transform.translation.z] for x in tf], ch["ee_pos"])
    static = by_topic["/tf_static"][0][1].transforms
    assert [x.child_frame_id for x in static] == ["target", "target_believed"]
    T = np.asarray(loaded.meta["T_world_target"])
    assert [static[0].transform.translation.x, static[0].transform.translation.y,
            static[0].transform.translation.z] == T[:3, 3].tolist()
    assert json.loads(meta["dockbench.meta"]["json"])["joint_names"] == loaded.joint_names
    assert json.loads(meta["dockbench.summary"]["json"])["verdict"] == loaded.summary["verdict"]


def test_world_aligned_wrench_is_a_rotation():
    """A pure force along EE +z with the EE rotated 90° about world x shows up along world −y. The
    rotation matrix from the quaternion (products and sums of entries ≤ 1) is off by ≤ 4ε per entry,
    so a component of R·w is off by ≤ 3·4ε·‖w‖∞ = 24ε: atol 1e-13 (> 10× that)."""
    q = np.array([[np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0]])  # (w, x, y, z)
    w = export.world_aligned(np.array([[0.0, 0.0, 2.0, 0.0, 0.0, 1.0]]), q)
    np.testing.assert_allclose(w, [[0.0, -2.0, 0.0, 0.0, -1.0, 0.0]], rtol=0, atol=1e-13)
    np.testing.assert_allclose(quat_to_matrix(q)[0] @ [0, 0, 1], [0, -1, 0], rtol=0, atol=1e-13)


def test_mcap_every_and_cli(run_dir, tmp_path, capsys):
    pytest.importorskip("mcap.reader", reason="mcap not installed (extra: mcap)")
    from dockbench.experiments.export import main

    out = tmp_path / "every10.mcap"
    assert main([str(run_dir), "--mcap", str(out), "--every", "10", "--compression", "lz4"]) == 0
    text = capsys.readouterr().out
    n = len(Run.load(run_dir).t[::10])
    assert f"{13 * n - 12 + 0} messages" in text or f"{12 * n + 1} messages" in text
    by_topic, _, _ = _decoded(out)
    assert len(by_topic["/dockbench/ee_pose"]) == n
    assert main([str(run_dir)]) == 1 and "nothing to do" in capsys.readouterr().err
    assert main([str(tmp_path / "nope"), "--mcap", str(out)]) == 1
    assert "not a run folder" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------- Rerun
def _rrd_columns(path: Path) -> dict[str, dict[str, np.ndarray]]:
    """entity path → {"t": (N,) ns, component: (N, …)} (rows sorted by sim_time), static entities
    under "static"."""
    rr_chunk = pytest.importorskip("rerun.chunk", reason="rerun-sdk not installed (extra: rerun)")
    out: dict[str, dict[str, list]] = {}
    for ch in rr_chunk.RrdReader(str(path)).stream():
        rb = ch.to_record_batch()
        ent = out.setdefault(ch.entity_path, {})
        for name in rb.schema.names:
            if name == "rerun.controls.RowId":
                continue
            col = rb.column(name).to_pylist()
            key = "t" if name == export.TIMELINE else name
            if ch.is_static:
                key = f"static:{key}"
            ent.setdefault(key, []).extend(col)
    result = {}
    for ent, cols in out.items():
        res = {}
        def plain(x):
            return x.value if hasattr(x, "value") else x

        order = np.argsort(np.asarray([plain(x) for x in cols["t"]])) if "t" in cols else None
        for k, v in cols.items():
            arr = np.array([plain(x) for x in v], dtype=object if k.startswith("static") else None)
            res[k] = arr[order] if order is not None and not k.startswith("static") else arr
        result[ent] = res
    return result


def _ns(x) -> int:
    """A pyarrow duration scalar as nanoseconds (timedelta or int)."""
    if hasattr(x, "total_seconds"):
        return int(round(x.total_seconds() * 1e9))
    return int(x)


def test_rerun_recording_holds_every_channel(loaded, run_dir, tmp_path):
    """Every telemetry channel as telemetry/<name> scalars on the sim_time timeline (the same doubles),
    the EE pose as a Transform3D with the quaternion in Rerun's (x, y, z, w) order, the F/T force as an
    arrow of FORCE_ARROW_SCALE m/N at the EE (Rerun stores Vec3D as float32: relative rounding
    ε32/2 ≈ 6e-8, so rtol 1e-6)."""
    out = tmp_path / "run.rrd"
    export.write_rrd(run_dir, out)
    cols = _rrd_columns(out)
    ch, n = loaded.channels, len(loaded.t)
    t_ns = np.rint(loaded.t * 1e9).astype(np.int64)
    for name, width in export.telemetry_channels(ch):
        ent = cols[f"/telemetry/{name}"]
        assert [_ns(x) for x in ent["t"]] == t_ns.tolist(), name
        values = np.array([np.asarray(v, dtype=float) for v in ent["Scalars:scalars"]])
        np.testing.assert_array_equal(values.reshape(n, width), np.asarray(ch[name], dtype=float).reshape(n, width),
                                      err_msg=name)
        assert len(ent["static:SeriesLines:names"][0]) == width
    assert list(cols["/telemetry/q"]["static:SeriesLines:names"][0]) == [f"{j} [rad]" for j in loaded.joint_names]
    assert list(cols["/telemetry/wrench_ext_world"]["static:SeriesLines:names"][0])[:4] == [
        "fx [N]", "fy [N]", "fz [N]", "nx [N·m]"]
    ee = cols["/world/ee"]
    trans = np.array([np.asarray(v[0] if np.ndim(v) == 2 else v, dtype=float) for v in ee["Transform3D:translation"]])
    np.testing.assert_allclose(trans, ch["ee_pos"], rtol=1e-6, atol=0)
    quat = np.array([np.asarray(v[0] if np.ndim(v) == 2 else v, dtype=float) for v in ee["Transform3D:quaternion"]])
    np.testing.assert_allclose(quat, ch["ee_quat"][:, [1, 2, 3, 0]], rtol=1e-6, atol=1e-7)
    arrows = cols["/world/force/ft"]
    vec = np.array([np.asarray(v, dtype=float).reshape(-1, 3)[0] for v in arrows["Arrows3D:vectors"]])
    np.testing.assert_allclose(vec, export.FORCE_ARROW_SCALE * ch["wrench_ext_world"][:, :3], rtol=1e-6, atol=1e-12)
    assert "/world/target" in cols and "/world/path/actual" in cols


def test_rerun_cli(run_dir, tmp_path, capsys):
    pytest.importorskip("rerun", reason="rerun-sdk not installed (extra: rerun)")
    from dockbench.experiments.export import main

    assert main([str(run_dir), "--rerun", str(tmp_path / "r.rrd"), "--every", "50"]) == 0
    assert "rerun  " in capsys.readouterr().out
    cols = _rrd_columns(tmp_path / "r.rrd")
    assert len(cols["/telemetry/q"]["t"]) == len(Run.load(run_dir).t[::50])


# ----------------------------------------------------------------------------------------- extras
def test_missing_extra_names_the_install_command(monkeypatch, run_dir, tmp_path):
    monkeypatch.setitem(sys.modules, "mcap.writer", None)  # `import mcap.writer` now raises ImportError
    with pytest.raises(MissingExtra, match=r"MCAP export needs the optional package\(s\) mcap .*install them with: "
                                           r"pip install (-e )?'.*\[mcap\]'"):
        export.write_mcap(run_dir, tmp_path / "x.mcap")
    monkeypatch.setitem(sys.modules, "rerun", None)
    with pytest.raises(MissingExtra, match=r"rerun-sdk .*\[rerun\]"):
        export.write_rrd(run_dir, tmp_path / "x.rrd")


def test_install_hint_follows_the_installation(monkeypatch, tmp_path):
    """From a checkout (this test suite's case, where the distribution found is the checkout's own
    dockbench.egg-info without a direct_url.json) the hint is the editable install of that checkout; from
    an installed distribution it follows PEP 610's direct_url.json."""
    import importlib.metadata as md

    from dockbench.sim import extras

    assert extras._source_checkout() == Path(extras.__file__).resolve().parent.parent
    monkeypatch.chdir(extras._source_checkout())
    assert install_hint("video") == "pip install -e '.[video]'"
    monkeypatch.chdir(tmp_path)
    assert install_hint("video") == f"pip install -e '{extras._source_checkout()}[video]'"

    class Dist:
        def __init__(self, text):
            self.text = text

        def read_text(self, name):
            return self.text

    monkeypatch.setattr(extras, "_source_checkout", lambda: None)  # as from a wheel in site-packages
    cases = {
        '{"dir_info": {"editable": true}, "url": "file:///opt/dockbench"}': "pip install -e '/opt/dockbench[mcap]'",
        '{"archive_info": {}, "url": "https://example.invalid/dockbench.whl"}': "pip install 'dockbench[mcap]'",
        None: "pip install 'dockbench[mcap]'",  # from an index: no direct_url.json
    }
    for text, hint in cases.items():
        monkeypatch.setattr(md, "distribution", lambda name, t=text: Dist(t))
        assert install_hint("mcap") == hint
    monkeypatch.setattr(md, "distribution", lambda name: Dist(json.dumps({"dir_info": {"editable": True},
                                                                          "url": tmp_path.as_uri()})))
    assert install_hint("rerun") == "pip install -e '.[rerun]'"

    def missing(name):
        raise md.PackageNotFoundError(name)

    monkeypatch.setattr(md, "distribution", missing)
    assert install_hint("rerun") == "pip install 'dockbench[rerun]'"
    with pytest.raises(MissingExtra, match="no_such_module_xyz"):
        require("no_such_module_xyz", "mcap", "a test")


def test_extras_table_matches_pyproject():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for name, pkgs in EXTRAS.items():
        declared = {d.split(">")[0].split("=")[0].split(";")[0].split("[")[0].strip() for d in extras[name]}
        assert set(pkgs) == declared, name


def test_export_refuses_an_empty_run(tmp_path):
    from dockbench.telemetry.run import write_json

    folder = tmp_path / "empty"
    folder.mkdir()
    np.savez(folder / "telemetry.npz", t=np.zeros(0))
    write_json(folder / "meta.json", {})
    with pytest.raises(DockbenchError, match="no recorded steps"):
        export.write_mcap(folder, tmp_path / "e.mcap")
