"""ROS 2 transport: XCDR1 bytes, the in-process bus, cyclonedds across two processes, rclpy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from dockbench.bridges import cdr, ros2, ros2_cyclonedds
from dockbench.bridges.ros2 import (
    QOS_DEFAULT,
    QOS_SENSOR_DATA,
    InProcessBus,
    InProcessTransport,
    JointState,
    TransportError,
)

from tests.helpers import REPO

CYCLONE_MISSING = ""
try:
    import cyclonedds  # noqa: F401
except ImportError as exc:
    CYCLONE_MISSING = f"cyclonedds not importable ({exc}); install the extra: pip install -e '.[ros2]'"

RCLPY_OK, RCLPY_WHY = ros2.rclpy_available()

N_MESSAGES = 200  # two-process round trip (the issue asks for >= 100)

# sensor_msgs/JointState{stamp 7 s + 500 ns, frame_id "base", name [j1, joint_two], position [1.0, -2.5],
# velocity [], effort [0.5]} in XCDR1 little endian, computed by hand (offsets from the body start):
REFERENCE_MSG = JointState(("j1", "joint_two"), (1.0, -2.5), (), (0.5,), 7, 500, "base")
REFERENCE_CDR = bytes.fromhex(
    "00010000"                  # encapsulation: CDR_LE, options 0
    "07000000"                  # 0  header.stamp.sec = 7 (int32)
    "f4010000"                  # 4  header.stamp.nanosec = 500 (uint32)
    "05000000" "6261736500"     # 8  frame_id: length 5 incl. NUL, "base\0"
    "000000"                    # 17 pad to 4
    "02000000"                  # 20 name: 2 strings
    "03000000" "6a3100"         # 24 "j1\0"
    "00"                        # 31 pad to 4
    "0a000000" "6a6f696e745f74776f00"  # 32 "joint_two\0" (10 bytes)
    "0000"                      # 46 pad to 4
    "02000000"                  # 48 position: 2 doubles
    "00000000"                  # 52 pad to 8 (XCDR1 aligns doubles to 8)
    "000000000000f03f"          # 56 1.0
    "00000000000004c0"          # 64 -2.5
    "00000000"                  # 72 velocity: 0 doubles (no padding after an empty sequence)
    "01000000"                  # 76 effort: 1 double (80 is already 8-aligned)
    "000000000000e03f"          # 80 0.5
)


# ----------------------------------------------------------------------------------------- CDR
def test_cdr_bytes_match_hand_computed_reference():
    assert REFERENCE_MSG.to_cdr() == REFERENCE_CDR
    assert JointState.from_cdr(REFERENCE_CDR) == REFERENCE_MSG


@pytest.mark.parametrize("msg", [
    JointState(),
    JointState(("ä",), (float("nan"),), (float("inf"),), (-0.0,), -1, 999_999_999, "wörld"),
    JointState([f"j{i}" for i in range(20)], range(20), [0.1] * 20, [], 1_700_000_000, 1, ""),
])
def test_cdr_round_trip_keeps_every_field(msg):
    back = JointState.from_cdr(msg.to_cdr())
    assert back.name == msg.name and back.frame_id == msg.frame_id
    assert (back.stamp_sec, back.stamp_nanosec) == (msg.stamp_sec, msg.stamp_nanosec)
    for f in ("position", "velocity", "effort"):  # NaN-aware bitwise comparison
        assert [repr(v) for v in getattr(back, f)] == [repr(v) for v in getattr(msg, f)]
    assert len(msg.to_cdr()) % 4 == 0


def test_cdr_decodes_big_endian():
    # the same message as REFERENCE_CDR, big endian: swap every field's bytes, same offsets
    be = bytes.fromhex(
        "00000000" "00000007" "000001f4" "00000005" "6261736500" "000000" "00000002" "00000003" "6a3100"
        "00" "0000000a" "6a6f696e745f74776f00" "0000" "00000002" "00000000" "3ff0000000000000"
        "c004000000000000" "00000000" "00000001" "3fe0000000000000"
    )
    assert JointState.from_cdr(be) == REFERENCE_MSG


@pytest.mark.parametrize("payload, match", [
    (REFERENCE_CDR[:-3], "truncated"),
    (b"\x00\x07\x00\x00" + REFERENCE_CDR[4:], "unsupported encapsulation"),
    (REFERENCE_CDR[:24] + b"\xff\xff\xff\x7f" + REFERENCE_CDR[28:], "exceeds the limit"),
    (REFERENCE_CDR[:20] + b"\x01" + REFERENCE_CDR[21:], "not NUL-terminated"),  # the NUL of "base"
    (b"\x00\x01", "no encapsulation header"),
])
def test_cdr_rejects_malformed_payloads(payload, match):
    with pytest.raises(cdr.CdrError, match=match):
        JointState.from_cdr(payload)


def test_cdr_matches_cyclonedds_serializer():
    if CYCLONE_MISSING:
        pytest.skip(CYCLONE_MISSING)
    c = ros2_cyclonedds._cyclone()
    m = REFERENCE_MSG
    sample = c["JointState_"](c["Header_"](c["Time_"](m.stamp_sec, m.stamp_nanosec), m.frame_id),
                              list(m.name), list(m.position), list(m.velocity), list(m.effort))
    assert sample.serialize() == REFERENCE_CDR
    assert c["JointState_"].deserialize(REFERENCE_CDR) == sample


# ----------------------------------------------------------------------------------------- names, env
def test_topic_mapping_and_validation():
    assert ros2.dds_topic_name("/g20/cb_left_hand_control_cmd") == "rt/g20/cb_left_hand_control_cmd"
    for bad in ("g20/cmd", "/g20/", "//a", "/a b", "/1a", ""):
        with pytest.raises(TransportError, match="not an absolute ROS 2 name"):
            ros2.validate_topic(bad)


def test_domain_and_discovery_from_environment(monkeypatch):
    for var in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_LOCALHOST_ONLY"):
        monkeypatch.delenv(var, raising=False)
    assert ros2.domain_id_from_env() == 0
    assert ros2.discovery_from_env() is ros2.Discovery.LOCALHOST
    monkeypatch.setenv("ROS_DOMAIN_ID", "42")
    assert ros2.domain_id_from_env() == 42
    monkeypatch.setenv("ROS_DOMAIN_ID", "300")
    with pytest.raises(TransportError, match="0..232"):
        ros2.domain_id_from_env()
    monkeypatch.setenv("ROS_LOCALHOST_ONLY", "0")
    assert ros2.discovery_from_env() is ros2.Discovery.SUBNET
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    assert ros2.discovery_from_env() is ros2.Discovery.LOCALHOST
    xml = ros2.cyclone_config(ros2.Discovery.LOCALHOST)
    for part in ('<NetworkInterface address="127.0.0.1"/>', "<AllowMulticast>false</AllowMulticast>",
                 '<Peer address="127.0.0.1"/>', "<SPDPInterval>1s</SPDPInterval>",
                 "<MaxAutoParticipantIndex>32</MaxAutoParticipantIndex>"):
        assert part in xml


def test_unknown_backend_lists_the_known_ones():
    with pytest.raises(TransportError, match="known: auto, cyclonedds, inprocess, rclpy"):
        ros2.open_transport("zenoh")


def test_missing_cyclonedds_names_the_install_command(monkeypatch):
    monkeypatch.setattr(ros2_cyclonedds, "_CYCLONE", {})  # forget a previous import
    for mod in ("cyclonedds", "cyclonedds.core", "cyclonedds.domain"):
        monkeypatch.setitem(sys.modules, mod, None)  # makes `import cyclonedds...` raise ImportError
    with pytest.raises(TransportError, match=r"pip install -e '\.\[ros2\]'"):
        ros2.CycloneTransport()


# ----------------------------------------------------------------------------------------- in-process
def test_inprocess_round_trip_keeps_content_and_order():
    sent = [JointState(("a", "b"), (i, 0.5 * i), (-i,), (), i, 1000 * i, f"f{i}") for i in range(N_MESSAGES)]
    got: list[JointState] = []
    with InProcessTransport(bus=InProcessBus()) as t:
        sub = t.create_subscription("/rt_test/js", got.append)
        pub = t.create_publisher("/rt_test/js")
        assert (sub.publisher_count(), pub.subscription_count()) == (1, 1)
        for m in sent:
            pub.publish(m)
        sub.close()
        pub.publish(sent[0])  # nothing arrives after close
    assert got == sent


def test_inprocess_follows_dds_reliability_matching():
    got: list[JointState] = []
    with InProcessTransport(bus=InProcessBus()) as t:
        sub = t.create_subscription("/rt_test/qos", got.append, QOS_DEFAULT)      # RELIABLE reader
        pub = t.create_publisher("/rt_test/qos", QOS_SENSOR_DATA)                  # BEST_EFFORT writer
        pub.publish(JointState(("a",), (1.0,)))
        assert got == [] and sub.publisher_count() == 0
        t.create_subscription("/rt_test/qos", got.append, QOS_SENSOR_DATA)        # best effort matches
        pub.publish(JointState(("a",), (1.0,)))
        assert len(got) == 1


def test_callback_exception_is_contained(caplog):
    with InProcessTransport(bus=InProcessBus()) as t:
        t.create_subscription("/rt_test/boom", lambda m: 1 / 0)
        pub = t.create_publisher("/rt_test/boom")
        pub.publish(JointState())
        pub.publish(JointState())
    assert sum("ZeroDivisionError" in r.getMessage() for r in caplog.records) == 1


# ----------------------------------------------------------------------------------------- cyclonedds
_PUB = textwrap.dedent("""
    import sys, time
    from dockbench.bridges.ros2 import JointState, open_transport, wait_until
    topic, n = sys.argv[1], int(sys.argv[2])
    with open_transport("cyclonedds") as t:
        pub = t.create_publisher(topic)
        assert wait_until(lambda: pub.subscription_count() > 0, 20), "no subscriber matched"
        time.sleep(0.5)  # discovery is asymmetric: let the reader match this writer too (volatile QoS)
        for i in range(n):
            pub.publish(JointState(("a", "b"), (i, 0.5 * i), (-i,), (), i, 1000 * i, f"f{i}"))
            time.sleep(0.002)
        wait_until(lambda: pub.subscription_count() == 0, 20)  # until the subscriber has everything
""")
_SUB = textwrap.dedent("""
    import json, sys, time
    from dockbench.bridges.ros2 import open_transport, wait_until
    from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication
    from cyclonedds.qos import Policy
    topic, n = sys.argv[1], int(sys.argv[2])
    got = []
    with open_transport("cyclonedds") as t:
        sub = t.create_subscription(topic, got.append)
        wait_until(lambda: sub.publisher_count() > 0, 20)
        meta = {}
        reader = BuiltinDataReader(t._participant, BuiltinTopicDcpsPublication)
        def remote_writer():
            for s in reader.take(N=50):
                if getattr(s, "topic_name", "") == "rt" + topic:
                    meta.update(type=s.type_name, userdata=s.qos[Policy.Userdata].data.decode(),
                                reliable=str(s.qos[Policy.Reliability]).startswith("Policy.Reliability.Reliable"))
            return bool(meta)
        wait_until(remote_writer, 10)
        wait_until(lambda: len(got) >= n, 30)
    print(json.dumps({"meta": meta, "msgs": [[m.name, m.position, m.velocity, m.effort, m.stamp_sec,
                                               m.stamp_nanosec, m.frame_id] for m in got]}))
""")


def _peer_env() -> dict:
    env = dict(os.environ)
    env.pop("CYCLONEDDS_URI", None)
    env["ROS_DOMAIN_ID"] = str(100 + os.getpid() % 100)  # keep away from other runs on this host
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_cyclonedds_two_process_round_trip():
    if CYCLONE_MISSING:
        pytest.skip(CYCLONE_MISSING)
    topic = f"/dockbench_test/js_{os.getpid()}"
    env = _peer_env()
    sub = subprocess.Popen([sys.executable, "-c", _SUB, topic, str(N_MESSAGES)], cwd=REPO, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pub = subprocess.Popen([sys.executable, "-c", _PUB, topic, str(N_MESSAGES)], cwd=REPO, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = sub.communicate(timeout=45)
        _, perr = pub.communicate(timeout=30)
    finally:
        for p in (sub, pub):
            if p.poll() is None:
                p.kill()
    assert sub.returncode == 0, err
    assert pub.returncode == 0, perr
    res = json.loads(out.strip().splitlines()[-1])
    expected = [[["a", "b"], [i, 0.5 * i], [-i], [], i, 1000 * i, f"f{i}"] for i in range(N_MESSAGES)]
    assert res["msgs"] == expected  # all delivered, contents equal, order kept
    assert res["meta"] == {"type": "sensor_msgs::msg::dds_::JointState_", "userdata": ros2.USER_DATA.decode(),
                           "reliable": True}


# ----------------------------------------------------------------------------------------- rclpy
@pytest.mark.skipif(not RCLPY_OK, reason=f"rclpy not importable here (no sourced ROS 2 install): {RCLPY_WHY}")
def test_rclpy_round_trip():
    """20 messages through a real rclpy node, all delivered, in order. Two guards against the ways a
    real RMW loses messages: both ends are matched before the first send (discovery is asymmetric for
    a moment), and the sends are paced, one in flight at a time, with a history as deep as the burst
    (a burst of 20 into ROS's default KEEP_LAST 10 drops half on a real rclpy: the executor thread
    takes samples slower than the publisher writes them)."""
    sent = [JointState(("a",), (float(i),), (), (), i, 0, "") for i in range(20)]
    qos = ros2.QoS(depth=len(sent))
    topic = f"/dockbench_test/rclpy_{os.getpid()}"
    got: list[JointState] = []
    with ros2.open_transport("rclpy", node_name="dockbench_test") as t:
        sub = t.create_subscription(topic, got.append, qos)
        pub = t.create_publisher(topic, qos)
        assert ros2.wait_until(lambda: pub.subscription_count() > 0 and sub.publisher_count() > 0, 10)
        for k, m in enumerate(sent):
            pub.publish(m)
            assert ros2.wait_until(lambda k=k: len(got) > k, 10), f"message {k} not received ({len(got)} so far)"
    assert got == sent


@pytest.mark.skipif(not RCLPY_OK, reason=f"rclpy not importable here (no sourced ROS 2 install): {RCLPY_WHY}")
def test_rclpy_typed_messages_round_trip():
    """PoseStamped and WrenchStamped (the live run topics) through rclpy's own message classes."""
    from dockbench.bridges import msgs

    pose = {"header": {"stamp": {"sec": 1, "nanosec": 2}, "frame_id": "world"},
            "pose": {"position": {"x": 0.1, "y": 0.2, "z": 0.3},
                     "orientation": {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}}}
    wrench = {"header": {"stamp": {"sec": 3, "nanosec": 4}, "frame_id": "ee"},
              "wrench": {"force": {"x": 1.0, "y": -2.0, "z": 3.5}, "torque": {"x": 0.1, "y": 0.2, "z": -0.3}}}
    got: dict[str, list] = {"pose": [], "wrench": []}
    with ros2.open_transport("rclpy", node_name="dockbench_test_typed") as t:
        pairs = []
        for key, mt, msg in (("pose", msgs.POSE_STAMPED, pose), ("wrench", msgs.WRENCH_STAMPED, wrench)):
            topic = f"/dockbench_test/{key}_{os.getpid()}"
            sub = t.create_subscription(topic, got[key].append, msg_type=mt)
            pub = t.create_publisher(topic, msg_type=mt)
            pairs.append((key, pub, sub, msg))
        for key, pub, sub, msg in pairs:
            assert ros2.wait_until(lambda p=pub, s=sub: p.subscription_count() > 0 and s.publisher_count() > 0, 10)
            pub.publish(msg)
            assert ros2.wait_until(lambda k=key: len(got[k]) == 1, 10), key
    assert got == {"pose": [pose], "wrench": [wrench]}


# ------------------------------------------------------------------ trailing bytes (issue 23)

@pytest.mark.parametrize("extra", [b"\x00" * 4, b"\x00" * 8, b"junk", b"\x01\x02\x03\x04\x05"])
def test_cdr_rejects_trailing_bytes_beyond_the_alignment_padding(extra):
    """Garbage after the last field used to be ignored (511 of 3,000 fuzzed payloads); only the
    padding to a multiple of 4 may follow it."""
    with pytest.raises(cdr.CdrError, match="after the last field") as exc:
        JointState.from_cdr(REFERENCE_CDR + extra)
    assert exc.value.kind == "trailing"


def test_cdr_a_joint_state_ends_aligned_so_no_byte_may_follow():
    """A JointState body always ends on a multiple of 4 (its last field is a sequence count or
    doubles), so the alignment padding after it is empty and even one extra byte is rejected."""
    for msg in (REFERENCE_MSG, JointState((), (), (), (), 1, 2, "ab"), JointState(("x",), (1.0,), (2.0,), ())):
        payload = msg.to_cdr()
        assert JointState.from_cdr(payload) == msg
        for extra in (b"\x00", b"\x00\x00\x00"):
            with pytest.raises(cdr.CdrError, match="after the last field"):
                JointState.from_cdr(payload + extra)


def test_cdr_fuzzed_payloads_decode_or_raise_cdr_error():
    """Seeded random truncations, bit flips and appended bytes of valid payloads: every outcome is a
    JointState or a CdrError with a kind (never another exception)."""
    import random

    rng = random.Random(23)
    msgs = [REFERENCE_MSG, JointState(("a",) * 3, (0.1, 0.2, 0.3), (), (), 5, 6, "x"), JointState()]
    kinds: dict[str, int] = {}
    for _ in range(3000):
        b = bytearray(rng.choice(msgs).to_cdr())
        op = rng.randrange(4)
        if op == 0:
            b = b[: rng.randrange(len(b) + 1)]
        elif op == 1:
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 2:
            b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 12)))
        else:
            i = rng.randrange(len(b))
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
        try:
            JointState.from_cdr(bytes(b))
        except cdr.CdrError as exc:
            kinds[exc.kind] = kinds.get(exc.kind, 0) + 1
    assert kinds.get("trailing", 0) > 100 and kinds.get("truncated", 0) > 100, kinds


def test_inprocess_subscription_drops_and_counts_malformed_payloads(caplog):
    bus = InProcessBus()
    got = []
    with InProcessTransport(bus=bus) as tr:
        sub = tr.create_subscription("/js", got.append)
        with caplog.at_level("WARNING", logger="dockbench.bridges.ros2"):
            for payload in (REFERENCE_CDR + b"junk", REFERENCE_CDR[:-3], REFERENCE_CDR + b"more", REFERENCE_CDR):
                bus.deliver("/js", QOS_DEFAULT, payload)
        assert got == [REFERENCE_MSG]
        assert sub.malformed_by_reason == {"trailing": 2, "truncated": 1}
    assert sum("malformed sensor_msgs/msg/JointState payload dropped" in r.message for r in caplog.records) == 2
