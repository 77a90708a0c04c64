"""Watching a run: the loop's observer seam, pacing, the mailbox streams, the viewer (a scripted
handle with MuJoCo scenes, and the offscreen renderer), live ROS 2 topics over the in-process bus."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import mujoco
import numpy as np
import pytest
from dockbench.bridges import msgs
from dockbench.bridges.ros2 import InProcessBus, InProcessTransport
from dockbench.sim.errors import DockbenchError
from dockbench.sim.loop import build, run, simulate
from dockbench.sim.scenario import load_scenario, scenario_from_dict
from dockbench.telemetry.live import MailboxStream, Observers, Pacer, Ros2Sink, RowLayout, every_steps
from dockbench.telemetry.run import Run, first_difference
from dockbench.telemetry.viewer import (
    CONTACT_FORCE_RGBA,
    FORCE_ARROW_M_PER_N,
    REFERENCE_SPHERE_RADIUS,
    RunViewer,
    offscreen_launcher,
)

from tests.helpers import SCENARIOS, press_scenario

EPS = np.finfo(float).eps
DURATION = 0.6  # [s] short runs: 601 control steps


@pytest.fixture(scope="module")
def scenario():
    return load_scenario(SCENARIOS / "iiwa14_docking.yaml")


class Recorder:
    """A step observer that records its calls and can end the run at a given step."""

    stop_reason = "recorder asked to stop"

    def __init__(self, every: int, stop_at: int | None = None) -> None:
        self.every, self.stop_at = every, stop_at
        self.steps: list[tuple[int, float]] = []
        self.started = self.finished = 0
        self.status = None

    def start(self, setup, tel):
        self.started += 1

    def step(self, i, t):
        self.steps.append((i, t))
        return self.stop_at is not None and i >= self.stop_at

    def finish(self, status):
        self.finished += 1
        self.status = status


# ----------------------------------------------------------------------------------------- the seam
def test_an_observer_changes_nothing_in_the_telemetry(scenario):
    """The seam only reads: the same run with and without an observer is bit-identical."""
    tel_a, *_ = simulate(build(scenario), DURATION)
    rec = Recorder(every=7)
    tel_b, status, _, _ = simulate(build(scenario), DURATION, step_observer=rec)
    assert status == "completed"
    assert first_difference(tel_a.channels(), tel_b.channels()) is None
    n = tel_b.n
    assert [i for i, _ in rec.steps] == list(range(0, n, 7))
    assert [t for _, t in rec.steps] == [i * scenario.sim.control_period for i in range(0, n, 7)]
    assert (rec.started, rec.finished, rec.status) == (1, 1, "completed")


def test_an_observer_ends_the_run_and_the_folder_is_written(scenario, tmp_path):
    rec = Recorder(every=5, stop_at=100)
    res = run(scenario, out_root=tmp_path, duration=DURATION, step_observer=rec)
    assert res.status == "interrupted" and res.verdict == "INCOMPLETE"
    assert "recorder asked to stop at t = 0.1000 s (step 100)" in res.message
    loaded = Run.load(res.run_dir)
    assert len(loaded.t) == 101  # steps 0..100 were recorded, the plant never stepped after 100
    assert loaded.status == "interrupted"
    assert rec.status == "interrupted"


def test_a_bad_every_is_refused_and_finish_still_runs(scenario):
    rec = Recorder(every=0)
    with pytest.raises(ValueError, match="every must be an integer >= 1"):
        simulate(build(scenario), DURATION, step_observer=rec)
    assert rec.finished == 1


def test_observers_combine_rates_and_stop_on_the_first_request(scenario):
    a, b = Recorder(every=4), Recorder(every=6, stop_at=60)
    both = Observers([a, b])
    tel, status, message, _ = simulate(build(scenario), DURATION, step_observer=both)
    assert both.every == 2 and status == "interrupted" and "recorder asked to stop" in message
    assert [i for i, _ in a.steps] == list(range(0, 61, 4))
    assert [i for i, _ in b.steps] == list(range(0, 61, 6))
    assert a.finished == b.finished == 1


def test_every_steps():
    assert every_steps(50.0, 1e-3) == 20
    assert every_steps(2000.0, 1e-3) == 1
    with pytest.raises(DockbenchError, match="rate must be"):
        every_steps(0.0, 1e-3)


# ----------------------------------------------------------------------------------------- pacing
class FakeClock:
    """Wall time that advances only when the pacer sleeps (plus ``tick`` per reading)."""

    def __init__(self, tick: float = 0.0) -> None:
        self.now, self.tick, self.sleeps = 0.0, tick, []

    def clock(self):
        self.now += self.tick
        return self.now

    def sleep(self, dt):
        self.sleeps.append(dt)
        self.now += dt


@pytest.mark.parametrize("speed", [0.5, 1.0, 4.0])
def test_pacer_holds_the_requested_speed(scenario, speed):
    """With a loop that costs nothing, the pacer's sleeps add up to (t_last − t_0) / speed. Each sleep
    lands exactly on its target up to one rounding of the sum, so after k checks the error is below
    k·ε·(t_last/speed); 1e-9 s is far above that (k ≈ 60, t ≤ 1.2 s)."""
    fc = FakeClock()
    pacer = Pacer(speed, every=10, clock=fc.clock, sleep=fc.sleep)
    tel, *_ = simulate(build(scenario), DURATION, step_observer=pacer)
    t_last = max(i for i in range(0, tel.n, 10)) * scenario.sim.control_period
    assert fc.now == pytest.approx(t_last / speed, abs=1e-9)
    assert pacer.behind == 0.0


def test_pacer_never_slows_a_slow_loop_further(scenario):
    """A loop slower than the requested speed (each clock reading costs 50 ms of wall time, every 10 ms
    of simulated time) is never put to sleep; the lag is reported."""
    fc = FakeClock(tick=0.05)
    pacer = Pacer(1.0, every=10, clock=fc.clock, sleep=fc.sleep)
    simulate(build(scenario), DURATION, step_observer=pacer)
    assert fc.sleeps == [] and pacer.behind > 1.0


# ----------------------------------------------------------------------------------------- mailbox
class ListSink:
    def __init__(self) -> None:
        self.rows: list[tuple[int, float, np.ndarray]] = []
        self.opened = self.closed = 0

    def open(self, setup, layout):
        self.opened += 1
        self.layout = layout

    def publish(self, i, t, row):
        self.rows.append((i, t, row.copy()))

    def close(self):
        self.closed += 1


def test_mailbox_all_delivers_every_kth_row_exactly(scenario):
    sink = ListSink()
    stream = MailboxStream(sink, every=9, policy="all", capacity=4)
    tel, *_ = simulate(build(scenario), DURATION, step_observer=stream)
    steps = list(range(0, tel.n, 9))
    assert [i for i, _, _ in sink.rows] == steps and (sink.opened, sink.closed) == (1, 1)
    rows = np.array([r for _, _, r in sink.rows])
    np.testing.assert_array_equal(rows, tel.block[steps])
    # the rows turn back into the run's channels (pose channels derived the way the loop does)
    ch = RowLayout(tel).channels(rows)
    full = tel.channels()
    for name in ("t", "q", "tau_applied", "wrench_truth_world", "contact_count", "saturated", "ee_pos",
                 "ee_quat", "ee_quat_des", "ctrl_f_i_x"):
        np.testing.assert_array_equal(ch[name], full[name][steps], err_msg=name)
    assert stream.stats.published == stream.stats.offered == len(steps)


def test_mailbox_latest_never_blocks_the_loop_and_keeps_the_newest(scenario):
    """A sink stuck on the first row it takes (released only at the last step): the loop runs to the
    end anyway; the row waiting when the sink frees up is the last one offered; every other offered
    row was replaced. (Which row the worker takes first depends on thread scheduling.)"""
    release = threading.Event()

    class StuckSink(ListSink):
        def publish(self, i, t, row):
            super().publish(i, t, row)
            release.wait(30.0)

    class ReleaseAtEnd(Recorder):
        def step(self, i, t):
            if i >= n_steps - 1:
                release.set()
            return False

    n_steps = int(round(DURATION / scenario.sim.control_period)) + 1
    sink = StuckSink()
    stream = MailboxStream(sink, every=10, policy="latest")
    obs = Observers([stream, ReleaseAtEnd(every=1)])
    tel, status, *_ = simulate(build(scenario), DURATION, step_observer=obs)
    assert status == "completed" and tel.n == n_steps
    offered = list(range(0, n_steps, 10))
    got = [i for i, _, _ in sink.rows]
    assert got == sorted(got) and set(got) <= set(offered) and got[-1] == offered[-1]
    assert stream.stats.offered == len(offered)
    assert stream.stats.published + stream.stats.replaced == len(offered)


def test_a_failing_sink_stops_its_stream_not_the_run(scenario):
    class Broken(ListSink):
        def publish(self, i, t, row):
            raise RuntimeError("socket gone")

    stream = MailboxStream(Broken(), every=10, policy="all")
    tel, status, *_ = simulate(build(scenario), DURATION, step_observer=stream)
    assert status == "completed" and tel.n == int(round(DURATION / 1e-3)) + 1
    assert stream.stats.errors == ["RuntimeError: socket gone"]


def test_mailbox_arguments_are_checked():
    with pytest.raises(DockbenchError, match="exactly one of every"):
        MailboxStream(ListSink())
    with pytest.raises(DockbenchError, match="policy 'newest'; allowed: latest, all"):
        MailboxStream(ListSink(), every=1, policy="newest")


# ----------------------------------------------------------------------------------------- viewer
class ScriptedHandle:
    """The passive viewer's interface with real MuJoCo scene objects and no window: it is 'closed by
    the user' after ``close_after`` syncs and keeps what each sync showed."""

    def __init__(self, model, data, close_after=None):
        self.user_scn = mujoco.MjvScene(model, maxgeom=100)
        self.opt = mujoco.MjvOption()
        self.cam = mujoco.MjvCamera()
        self.d = data
        self.close_after = close_after
        self.synced: list[dict] = []
        self.texts = None
        self.closed = False

    def is_running(self):
        return not self.closed and (self.close_after is None or len(self.synced) < self.close_after)

    @contextlib.contextmanager
    def lock(self):
        yield

    def set_texts(self, texts):
        self.texts = texts

    def sync(self):
        g = [self.user_scn.geoms[k] for k in range(self.user_scn.ngeom)]
        self.synced.append({
            "time": float(self.d.time),
            "types": [int(x.type) for x in g],
            "pos": np.array([x.pos for x in g]),
            "mat": np.array([x.mat for x in g]),
        })

    def close(self):
        self.closed = True


def _viewer(close_after=None, speed=None, clock=None):
    handles = []

    def launch(m, d):
        handles.append(ScriptedHandle(m, d, close_after))
        return handles[-1]

    kw = {} if clock is None else {"clock": clock.clock, "sleep": clock.sleep}
    return RunViewer(speed=speed, fps=60.0, launch=launch, **kw), handles


def test_viewer_draws_the_reference_pose_of_each_frame(scenario):
    """At every sync the decoration is the recorded reference of that step: a sphere at ee_pos_des and
    three arrows from it along the columns of R_des. MjvGeom stores float32: the position is the
    float32 rounding of the double (the same conversion, compared exactly); a direction component
    (|x| ≤ 1, normalised in double) is off by at most ε32/2 ≈ 6e-8, so 1e-6 has > 10× headroom."""
    v, handles = _viewer()
    tel, status, *_ = simulate(build(scenario), DURATION, step_observer=v)
    h = handles[0]
    assert status == "completed" and v.every == 17  # round(1 / (60 Hz · 1 ms))
    assert len(h.synced) == len(range(0, tel.n, 17))
    assert h.opt.flags[mujoco.mjtVisFlag.mjVIS_CONTACTFORCE] and h.opt.flags[mujoco.mjtVisFlag.mjVIS_CONTACTPOINT]
    R_des = tel.raw["R_world_ee_des"]
    for k, frame in enumerate(h.synced):
        i = 17 * k
        p = tel.arrays["ee_pos_des"][i]
        arrows = frame["types"][:3]
        assert arrows == [int(mujoco.mjtGeom.mjGEOM_ARROW)] * 3
        assert frame["types"][3] == int(mujoco.mjtGeom.mjGEOM_SPHERE)
        np.testing.assert_array_equal(frame["pos"][:4], np.tile(p.astype(np.float32), (4, 1)))
        R = R_des[i].reshape(3, 3)
        for a in range(3):  # the arrow's z axis is its direction
            np.testing.assert_allclose(frame["mat"][a].reshape(3, 3)[:, 2], R[:, a], rtol=0, atol=1e-6)
    assert "contact truth |f|" in h.texts[3]


def test_closing_the_viewer_ends_the_run_and_keeps_the_folder(scenario, tmp_path):
    v, handles = _viewer(close_after=5)
    res = run(scenario, out_root=tmp_path, duration=DURATION, step_observer=v)
    assert res.status == "interrupted" and "viewer closed" in res.message
    assert len(Run.load(res.run_dir).t) == 5 * 17 + 1  # the 6th frame found the window closed


def test_viewer_paces_to_the_requested_speed(scenario):
    fc = FakeClock()
    v, _ = _viewer(speed=0.5, clock=fc)
    tel, *_ = simulate(build(scenario), DURATION, step_observer=v)
    assert v.every == 8  # round(0.5 / (60 · 1 ms))
    t_last = max(range(0, tel.n, 8)) * 1e-3
    assert fc.now == pytest.approx(t_last / 0.5, abs=1e-9)  # bound as in test_pacer_holds_the_requested_speed


def _gl_problem() -> str | None:
    try:
        m = mujoco.MjModel.from_xml_string("<mujoco/>")
        mujoco.Renderer(m, 16, 16).close()
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    return None


GL_PROBLEM = _gl_problem()


@pytest.mark.skipif(GL_PROBLEM is not None, reason=f"no OpenGL backend for offscreen rendering: {GL_PROBLEM}")
def test_offscreen_viewer_renders_contact_forces_and_the_reference():
    """The press scenario ends in one quasi-static contact: the rendered scene holds MuJoCo's
    contact-force arrow in our colour, FORCE_ARROW_M_PER_N per newton of the recorded contact truth
    of that step (MjvGeom sizes are float32: relative rounding ε32/2 ≈ 6e-8, so rtol 1e-6), the
    reference sphere, and the image is not blank."""
    frames, scenes = [], []
    launch = offscreen_launcher(width=160, height=120, on_frame=frames.append)

    def spy(m, d):
        h = launch(m, d)
        orig = h.sync

        def sync():
            orig()
            sc = h._renderer.scene
            scenes.append([(sc.geoms[k].rgba.copy(), int(sc.geoms[k].type), sc.geoms[k].size.copy())
                           for k in range(sc.ngeom)])

        h.sync = sync
        return h

    v = RunViewer(speed=None, launch=spy)
    res = run(scenario_from_dict(press_scenario()), out_root=None, step_observer=v)
    i_last = (res.telemetry["t"].size - 1) // v.every * v.every
    assert res.telemetry["contact_count"][i_last] == 1
    last = scenes[-1]
    force = [g for g in last if np.allclose(g[0], CONTACT_FORCE_RGBA)]
    assert len(force) == 1, "no contact-force arrow in the rendered scene"
    f = float(np.linalg.norm(res.telemetry["wrench_truth_world"][i_last, :3]))
    assert float(force[0][2][2]) == pytest.approx(FORCE_ARROW_M_PER_N * f, rel=1e-6)
    spheres = [g for g in last if g[1] == int(mujoco.mjtGeom.mjGEOM_SPHERE)
               and g[2][0] == np.float32(REFERENCE_SPHERE_RADIUS)]
    assert len(spheres) == 1
    img = frames[-1]
    assert img.shape == (120, 160, 3) and img.std() > 5.0
    v.close()


# ----------------------------------------------------------------------------------------- live ROS 2
def test_ros2_live_topics_carry_the_recorded_numbers(scenario):
    """Over the in-process bus (every message through the CDR codec): joint states, EE and reference
    poses and the F/T / truth wrenches of each published step equal the run's channels (stamps are
    simulated time, so each message names its step)."""
    bus = InProcessBus()
    got: dict[str, list] = {}
    with InProcessTransport(bus=bus) as t:
        for topic, mt in (("joint_states", None), ("ee_pose", msgs.POSE_STAMPED), ("ee_pose_des", msgs.POSE_STAMPED),
                          ("wrench/ft", msgs.WRENCH_STAMPED), ("wrench/truth", msgs.WRENCH_STAMPED)):
            got[topic] = []
            t.create_subscription(f"/dockbench/{topic}", got[topic].append,
                                  msg_type=msgs.JOINT_STATE if mt is None else mt)
        stream = MailboxStream(Ros2Sink(t, stamp="sim"), every=25, policy="all")
        tel, *_ = simulate(build(scenario), DURATION, step_observer=stream)
    ch = tel.channels()
    steps = list(range(0, tel.n, 25))
    assert {k: len(v) for k, v in got.items()} == {k: len(steps) for k in got}

    def step_of(m):
        st = m["header"]["stamp"]
        return int(round((st["sec"] + 1e-9 * st["nanosec"]) / 1e-3))

    for m in got["joint_states"]:
        i = step_of(m)
        assert m["position"] == ch["q"][i].tolist() and m["velocity"] == ch["v"][i].tolist()
        assert m["effort"] == ch["tau_applied"][i].tolist()
    assert [step_of(m) for m in got["ee_pose"]] == steps
    for m in got["ee_pose"]:
        i = step_of(m)
        p, q = m["pose"]["position"], m["pose"]["orientation"]
        assert [p["x"], p["y"], p["z"]] == ch["ee_pos"][i].tolist()
        assert [q["w"], q["x"], q["y"], q["z"]] == ch["ee_quat"][i].tolist()
        assert m["header"]["frame_id"] == "world"
    for m in got["ee_pose_des"]:
        i = step_of(m)
        p = m["pose"]["position"]
        assert [p["x"], p["y"], p["z"]] == ch["ee_pos_des"][i].tolist()
    for topic, key in (("wrench/ft", "wrench_ext_body"), ("wrench/truth", "wrench_truth_body")):
        for m in got[topic]:
            i, w = step_of(m), m["wrench"]
            assert m["header"]["frame_id"] == "ee"
            assert [w["force"][c] for c in "xyz"] + [w["torque"][c] for c in "xyz"] == ch[key][i].tolist()


def test_ros2_live_other_topics_use_the_export_table(scenario):
    """A non-default topic set goes through telemetry.export.ros_topics (the MCAP table): the twist
    and the contact counts of each step, and the world-aligned truth wrench, as exported."""
    from dockbench.telemetry.export import CONTACTS, world_aligned

    got: dict[str, list] = {"ee_twist": [], "contacts": [], "wrench/truth_world": []}
    with InProcessTransport(bus=InProcessBus()) as t:
        for topic, mt in (("ee_twist", msgs.TWIST_STAMPED), ("contacts", CONTACTS),
                          ("wrench/truth_world", msgs.WRENCH_STAMPED)):
            t.create_subscription(f"/dockbench/{topic}", got[topic].append, msg_type=mt)
        sink = Ros2Sink(t, stamp="sim", topics=tuple(got))
        tel, *_ = simulate(build(scenario), DURATION, step_observer=MailboxStream(sink, every=50, policy="all"))
    ch = tel.channels()
    steps = list(range(0, tel.n, 50))
    for m, i in zip(got["ee_twist"], steps, strict=True):
        tw = m["twist"]
        assert [tw["linear"][c] for c in "xyz"] + [tw["angular"][c] for c in "xyz"] == ch["ee_vel"][i].tolist()
        assert m["header"]["frame_id"] == "ee_world_aligned"
    assert [m["tool_contacts"] for m in got["contacts"]] == ch["contact_count"][steps].tolist()
    ww = world_aligned(ch["wrench_truth_body"][steps], ch["ee_quat"][steps])
    for m, w in zip(got["wrench/truth_world"], ww, strict=True):
        assert [m["wrench"]["force"][c] for c in "xyz"] == w[:3].tolist()


def test_run_docking_cli_with_live_options(tmp_path, capsys):
    """--ros2 over the in-process bus, --rerun into a file and --speed through the real CLI: the run
    completes, its folder is written and every stream reports what it did."""
    pytest.importorskip("rerun", reason="rerun-sdk not installed (extra: rerun)")
    from dockbench.experiments.run_docking import main

    rrd = tmp_path / "live.rrd"
    rc = main(["--scenario", str(SCENARIOS / "iiwa14_docking.yaml"), "--out", str(tmp_path), "--no-progress",
               "--duration", "0.3", "--ros2", "--ros2-backend", "inprocess", "--rerun", str(rrd),
               "--speed", "50"])
    out = capsys.readouterr().out
    assert rc == 2  # a 0.3 s run is shorter than the planner: INCOMPLETE
    assert "rerun      16 samples published of 16 offered" in out  # steps 0, 20, …, 300
    assert "ros2       over inprocess" in out and "/dockbench/wrench/truth" in out
    assert "paced      50× real time" in out
    assert rrd.stat().st_size > 0
    assert list(Path(tmp_path).glob("iiwa14_docking/*/telemetry.npz"))


def test_live_options_are_validated(capsys):
    from dockbench.experiments.run_docking import main

    rc = main(["--scenario", str(SCENARIOS / "iiwa14_docking.yaml"), "--speed", "0", "--no-progress"])
    assert rc == 1 and "--speed must be > 0, got 0.0" in capsys.readouterr().err


def test_mailbox_rows_of_a_spilled_hqp_run_equal_its_telemetry(tmp_path):
    """A run longer than its telemetry block (spilled every 97 steps) with the HQP's wall-clock column
    (not a channel): the stream reads row i at ``block[i - base]``, and its rows turn back into the
    saved channels exactly (issue 23)."""
    sc = load_scenario(SCENARIOS / "iiwa14_docking_hqp.yaml")
    sink = ListSink()
    stream = MailboxStream(sink, every=7, policy="all", capacity=8)
    tel, status, _, _ = simulate(build(sc), DURATION, step_observer=stream, spill_dir=tmp_path, chunk_rows=97)
    assert status == "completed" and tel.spilled
    steps = list(range(0, tel.n, 7))
    assert [i for i, _, _ in sink.rows] == steps
    ch = sink.layout.channels(np.array([r for _, _, r in sink.rows]))
    assert "ctrl_qp_solve_time" not in ch and "substep_peaks" not in ch
    full = tel.channels()
    for name in ("t", "q", "tau_applied", "ee_pos", "ee_quat_des", "ctrl_alpha"):
        np.testing.assert_array_equal(ch[name], full[name][steps], err_msg=name)


def test_the_viewer_text_shows_the_measured_speed_not_the_asked_one(scenario):
    """A run that cannot keep up with --speed 1 (the fake wall clock advances 2.2 ms per reading while a
    control step is 1 ms of simulated time, and a frame every 17 steps): the text says the measured
    ~0.45x, beside "paced to 1x" (it used to say "1x real time" whatever the run did)."""
    fc = FakeClock(tick=0.0)
    v, handles = _viewer(speed=1.0, clock=fc)
    orig_step = v.step

    def slow_step(i, t):  # 17 steps of 1 ms take 17 × 2.2 ms of wall time: 1 / 2.2 ≈ 0.45x
        fc.now += 17 * 2.2e-3 if i else 0.0
        return orig_step(i, t)

    v.step = slow_step
    simulate(build(scenario), 3.0, step_observer=v)
    text = handles[0].texts[3]
    assert v.rate == pytest.approx(1 / 2.2, rel=0.02), v.rate
    assert "0.45x real time, paced to 1x" in text, text
