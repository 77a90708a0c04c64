"""Offscreen video of a run folder: frame count at a fixed rate, encoders, clear errors."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest
from dockbench.sim.errors import DockbenchError
from dockbench.telemetry.video import OffscreenRenderer, frame_indices, frame_times, render_run_video

DURATION = 0.5  # s of simulation
FPS = 20
NO_EXTRA = "the video extra is not installed: pip install -e '.[video]'"


def _gl_problem() -> str | None:
    try:
        m = mujoco.MjModel.from_xml_string("<mujoco><worldbody><geom size='0.1'/></worldbody></mujoco>")
        with OffscreenRenderer(m, 32, 32) as r:
            r.render(mujoco.MjData(m))
    except DockbenchError as exc:
        return str(exc)
    return None


GL_PROBLEM = _gl_problem()
needs_gl = pytest.mark.skipif(GL_PROBLEM is not None, reason=f"no OpenGL backend here: {GL_PROBLEM}")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from dockbench.sim.loop import run
    from dockbench.sim.scenario import scenario_from_dict

    from tests.helpers import scenario_dict

    d = scenario_dict("iiwa14_docking")
    d["sim"]["duration"] = DURATION
    r = run(scenario_from_dict(d), out_root=tmp_path_factory.mktemp("video"))
    assert r.run_dir is not None and (r.run_dir / "scene.xml").is_file()
    return r.run_dir


def expected_frames(duration: float, fps: float) -> int:
    return math.floor(duration * fps + 1e-9) + 1


def test_frame_schedule_is_decoupled_from_the_control_rate() -> None:
    t = np.arange(1001) * 1e-3  # 1 s at 1 ms
    tf = frame_times(t, 30)
    assert len(tf) == expected_frames(1.0, 30) == 31
    np.testing.assert_allclose(np.diff(tf), 1 / 30, rtol=1e-12)
    idx = frame_indices(t, 30)
    np.testing.assert_array_equal(idx, np.round(tf / 1e-3).astype(int))  # nearest sample
    assert frame_indices(t[:1], 30).tolist() == [0]


@needs_gl
def test_gif_has_the_right_frames_and_size(run_dir: Path, tmp_path: Path) -> None:
    from PIL import Image

    out = render_run_video(run_dir, tmp_path / "clip.gif", fps=FPS, width=160, height=120)
    assert out == tmp_path / "clip.gif" and out.stat().st_size > 1000
    n = expected_frames(DURATION, FPS)
    with Image.open(out) as im:
        assert im.size == (160, 120)
        total_ms, frames = 0, []
        for k in range(im.n_frames):  # Pillow merges identical consecutive frames, adding durations
            im.seek(k)
            total_ms += im.info["duration"]
            frames.append(np.asarray(im.convert("RGB"), dtype=float))
    assert total_ms == n * round(1000 / FPS)
    assert frames[0].std() > 5.0  # something was drawn, not a blank frame


@needs_gl
def test_mp4_frame_count(run_dir: Path, tmp_path: Path) -> None:
    iio = pytest.importorskip("imageio.v2", reason=NO_EXTRA)
    pytest.importorskip("imageio_ffmpeg", reason=NO_EXTRA)
    out = render_run_video(run_dir, tmp_path / "clip.mp4", fps=FPS, width=160, height=120)
    reader = iio.get_reader(out)
    try:
        assert reader.count_frames() == expected_frames(DURATION, FPS)
        frame = reader.get_data(0)
        assert frame.shape == (120, 160, 3)
        assert frame.astype(float).std() > 5.0
    finally:
        reader.close()
    assert not list(tmp_path.glob("*.tmp*"))


def test_missing_encoder_names_the_extra(run_dir: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "imageio", None)  # import imageio → ImportError
    monkeypatch.setitem(sys.modules, "imageio.v2", None)
    with pytest.raises(DockbenchError, match=r"pip install -e '\.\[video\]'"):
        render_run_video(run_dir, tmp_path / "clip.mp4")


def test_unknown_format(run_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(DockbenchError, match=r"unknown video format '\.avi'; known: \.mp4 .*\.gif"):
        render_run_video(run_dir, tmp_path / "clip.avi")


def test_no_gl_backend_names_the_fix(run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUJOCO_GL", "nonexistent")
    with pytest.raises(DockbenchError, match="no OpenGL backend.*MUJOCO_GL=egl"):
        render_run_video(run_dir, tmp_path / "clip.gif")
    assert not (tmp_path / "clip.gif").exists()


def test_bad_arguments(run_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(DockbenchError, match="even numbers"):
        render_run_video(run_dir, tmp_path / "clip.gif", width=161)
    with pytest.raises(DockbenchError, match="fps must be > 0"):
        render_run_video(run_dir, tmp_path / "clip.gif", fps=0)
    (tmp_path / "notarun").mkdir()
    with pytest.raises(DockbenchError, match="not a run folder"):
        render_run_video(tmp_path / "notarun", tmp_path / "clip.gif")


def test_prefixed_hand_joints_resolve() -> None:
    from dockbench.telemetry.video import _resolve_joint

    xml = """<mujoco><worldbody><body><joint name="arm1"/><geom size=".1"/>
      <body><joint name="hand/thumb_mcp"/><geom size=".1"/></body>
      <body><joint name="a/dup"/><geom size=".1"/></body><body><joint name="b/dup"/><geom size=".1"/></body>
      </body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    assert _resolve_joint(m, "arm1") == 0
    assert m.joint(_resolve_joint(m, "thumb_mcp")).name == "hand/thumb_mcp"
    assert _resolve_joint(m, "dup") == -1  # ambiguous
    assert _resolve_joint(m, "missing") == -1
