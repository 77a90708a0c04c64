"""Offscreen MuJoCo video of a run folder: replay the recorded joint positions through scene.xml.

:func:`render_run_video` loads ``scene.xml`` (the assembled MJCF the run used), and for each video
frame k at time t_k = t_0 + k / fps (a fixed frame rate, decoupled from the 1 ms control loop) takes
the telemetry sample nearest to t_k, writes the arm joint positions ``q`` into ``qpos`` by joint name
(``meta["joint_names"]``) — and the G20 hand's ``hand_applied`` pose, a free-floating base's and a moving
target's joint states (sim/orbit.py) when the run recorded them — calls
``mj_forward`` and renders. Everything else not in the telemetry (e.g. a floating target) stays at its
model default; a non-finite sample (a diverged run) holds the last finite pose. The frame count is
``floor((t_end − t_0) · fps) + 1``.

A fixed free camera frames the contact (:func:`frame_camera`): it looks at the centre of the EE path
and the target's mouth and seat, from a distance that keeps them all in view.

Encoders: ``.mp4`` via imageio + imageio-ffmpeg (the ``video`` extra), ``.gif`` via Pillow
(installed with matplotlib). OpenGL: the backend in ``MUJOCO_GL`` if set, else GLFW when a display is
available, then EGL, then OSMesa.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
from dockbench.sim.errors import DockbenchError
from dockbench.sim.extras import install_hint
from dockbench.telemetry.progress import Progress
from dockbench.telemetry.run import Run

#: Video containers this module writes → what it needs.
ENCODERS: dict[str, str] = {".mp4": "imageio + imageio-ffmpeg (the video extra)", ".gif": "Pillow"}

_GL_FIX = ("set MUJOCO_GL to a working backend before starting Python: MUJOCO_GL=egl (GPU driver or "
           "Mesa's libEGL: apt-get install libegl1 libgl1) or MUJOCO_GL=osmesa (software: apt-get install "
           "libosmesa6), e.g. `MUJOCO_GL=egl python experiments/run_docking.py ... --video out.mp4`")


def frame_times(t: np.ndarray, fps: float) -> np.ndarray:
    """Video frame times [s]: t_0 + k / fps for k = 0 .. floor((t_end − t_0) · fps)."""
    if len(t) == 0:
        return np.zeros(0)
    n = int(math.floor((float(t[-1]) - float(t[0])) * fps + 1e-9)) + 1
    return float(t[0]) + np.arange(n) / fps


def frame_indices(t: np.ndarray, fps: float) -> np.ndarray:
    """Index of the telemetry sample nearest to each video frame time."""
    tf = frame_times(t, fps)
    if len(t) < 2:
        return np.zeros(len(tf), dtype=int)
    i = np.clip(np.searchsorted(t, tf), 1, len(t) - 1)
    left_closer = (tf - t[i - 1]) <= (t[i] - tf)
    return np.where(left_closer, i - 1, i).clip(0, len(t) - 1)


def _gl_backends() -> list[str]:
    requested = os.environ.get("MUJOCO_GL", "").strip().lower()
    if requested:
        return [requested]
    order = ["glfw"] if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") else []
    return order + ["egl", "osmesa"]


def _make_gl_context(width: int, height: int) -> Any:
    """A current OpenGL context from the first backend that works (see :func:`_gl_backends`)."""
    errors = []
    for name in _gl_backends():
        try:
            if name == "egl":
                from mujoco.egl import GLContext
            elif name == "osmesa":
                from mujoco.osmesa import GLContext
            elif name in ("glfw", "glx", "1", "on", "true", "enable", "enabled"):
                from mujoco.glfw import GLContext
            else:
                errors.append(f"{name}: not a MUJOCO_GL value this module knows (egl, osmesa, glfw)")
                continue
            ctx = GLContext(width, height)
            ctx.make_current()
            return ctx
        except Exception as exc:  # noqa: BLE001 - any backend failure means "try the next one"
            errors.append(f"{name}: {type(exc).__name__}: {exc}".strip())
    raise DockbenchError("no OpenGL backend for offscreen rendering (" + "; ".join(errors) + "); " + _GL_FIX)


class OffscreenRenderer:
    """A minimal offscreen renderer: (GL context, MjrContext, MjvScene) → RGB frames (H, W, 3) uint8."""

    def __init__(self, model: mujoco.MjModel, width: int, height: int):
        self.model, self.width, self.height = model, width, height
        model.vis.global_.offwidth = max(int(model.vis.global_.offwidth), width)
        model.vis.global_.offheight = max(int(model.vis.global_.offheight), height)
        self._gl = _make_gl_context(width, height)
        try:
            self._ctx = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150.value)
            mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, self._ctx)
        except Exception as exc:  # noqa: BLE001
            self._gl.free()
            raise DockbenchError(f"could not create the MuJoCo render context: {exc}; {_GL_FIX}") from None
        self.scene = mujoco.MjvScene(model, maxgeom=10000)
        self.option = mujoco.MjvOption()
        self.option.flags[mujoco.mjtVisFlag.mjVIS_CONTACTPOINT] = True
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        self._rect = mujoco.MjrRect(0, 0, width, height)
        self._rgb = np.empty((height, width, 3), dtype=np.uint8)

    def render(self, data: mujoco.MjData) -> np.ndarray:
        """The current frame (a new array), top row first."""
        self._gl.make_current()
        mujoco.mjv_updateScene(self.model, data, self.option, None, self.camera,
                               mujoco.mjtCatBit.mjCAT_ALL.value, self.scene)
        mujoco.mjr_render(self._rect, self.scene, self._ctx)
        mujoco.mjr_readPixels(self._rgb, None, self._rect, self._ctx)
        return np.flipud(self._rgb).copy()

    def close(self) -> None:
        if getattr(self, "_ctx", None) is not None:
            self._ctx.free()
            self._ctx = None
        if getattr(self, "_gl", None) is not None:
            self._gl.free()
            self._gl = None

    def __enter__(self) -> OffscreenRenderer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def load_render_model(scene: Path) -> mujoco.MjModel:
    """The run's scene.xml with a light-grey gradient sky and a brighter headlight (render only;
    the physics is not stepped). Falls back to the plain model if the MjSpec edit fails.

    Raises:
        DockbenchError: scene.xml does not load, e.g. a mesh or texture file it names (the run folder's copy
            in meshes/ or textures/; docs/robots.md §6) has been deleted since the run.
    """
    try:
        spec = mujoco.MjSpec.from_file(str(scene))
        spec.add_texture(name="dockbench_video_sky", type=mujoco.mjtTexture.mjTEXTURE_SKYBOX,
                         builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT, rgb1=[0.93, 0.95, 0.98],
                         rgb2=[0.62, 0.67, 0.74], width=256, height=1536)
        model = spec.compile()
    except Exception:  # noqa: BLE001 - cosmetics only; the plain scene renders the same motion
        try:
            model = mujoco.MjModel.from_xml_path(str(scene))
        except ValueError as exc:  # MuJoCo's parser/compiler message
            first = (str(exc).strip().splitlines() or ["?"])[0].removeprefix("Error: ")
            hint = ""
            if "opening file" in first:
                hint = (" (scene.xml names the model's mesh and texture files in the run folder's meshes/ and "
                        "textures/, where the run copied them: that file was removed from the run folder since, "
                        "or a run folder written before those copies names it by an absolute path that no "
                        "longer holds it; re-run the scenario to write a self-contained run folder)")
            raise DockbenchError(f"{scene}: does not load in MuJoCo: {first}{hint}") from None
    model.vis.headlight.ambient[:] = 0.35
    model.vis.headlight.diffuse[:] = 0.65
    model.vis.headlight.specular[:] = 0.15
    # contact markers of a few millimetres, whatever the model's mean body size
    meansize = float(model.stat.meansize) if model.stat.meansize > 0 else 0.1
    model.vis.scale.contactwidth = 0.004 / meansize
    model.vis.scale.contactheight = 0.001 / meansize
    return model


def frame_camera(camera: mujoco.MjvCamera, run: Run, fovy_deg: float = 45.0) -> None:
    """Point a fixed free camera at the contact.

    The framed points are the EE path plus, with a target, its origin (the mouth) and its seat
    (``target_depth_total`` below the mouth along −z_D). lookat = the centre of their bounding box;
    distance = 1.15 · (half the largest box side + margin) / tan(fovy / 2) (≥ 0.25 m), margin 5 cm
    with a target (a close-up of the contact) and 25 cm without (free-space tracking: the wrist and
    tool in view); azimuth = the horizontal direction from the world origin (the robot base) to the
    lookat point + 90° (a side view, the robot to one side) − 30° without a target (three-quarter view,
    so motion towards the camera reads too); elevation −15° (−25° without a target).
    """
    pts = [np.asarray(run.channels["ee_pos"], dtype=float)]
    T = run.meta.get("T_world_target")
    if T is not None:
        T = np.asarray(T, dtype=float)
        depth = float(run.meta.get("target_depth_total") or 0.0)
        pts.append(np.vstack([T[:3, 3], T[:3, 3] - depth * T[:3, 2]]))
    allp = np.vstack(pts)
    lo, hi = allp.min(axis=0), allp.max(axis=0)
    lookat = 0.5 * (lo + hi)
    has_target = T is not None
    half = 0.5 * float(np.max(hi - lo)) + (0.05 if has_target else 0.25)
    camera.lookat[:] = lookat
    camera.distance = max(0.25, 1.15 * half / math.tan(math.radians(fovy_deg) / 2.0))
    camera.azimuth = math.degrees(math.atan2(lookat[1], lookat[0])) + (90.0 if has_target else 60.0)
    camera.elevation = -15.0 if has_target else -25.0


class _Writer:
    """Frame sink for .mp4 (imageio-ffmpeg) or .gif (Pillow)."""

    def __init__(self, path: Path, fps: float):
        self.path, self.fps = path, fps
        self.suffix = path.suffix.lower()
        self._frames: list[Any] = []
        self._mp4 = None
        if self.suffix == ".mp4":
            try:
                import imageio.v2 as imageio
                import imageio_ffmpeg  # noqa: F401  (the ffmpeg binary comes with it)
            except ImportError as exc:
                raise DockbenchError(
                    f"writing {path.name} needs the video extra ({exc.name} is missing): "
                    f"{install_hint('video')}  (or write a .gif, which needs only Pillow)"
                ) from None
            self._tmp = path.with_name(path.stem + ".tmp" + path.suffix)
            self._mp4 = imageio.get_writer(self._tmp, fps=fps, codec="libx264", quality=7,
                                           macro_block_size=1, pixelformat="yuv420p")
        elif self.suffix == ".gif":
            try:
                from PIL import Image  # noqa: F401
            except ImportError:
                raise DockbenchError("writing a .gif needs Pillow: pip install pillow") from None
        else:
            raise DockbenchError(f"{path}: unknown video format {path.suffix!r}; known: "
                                 + ", ".join(f"{k} ({v})" for k, v in ENCODERS.items()))

    def append(self, frame: np.ndarray) -> None:
        if self._mp4 is not None:
            self._mp4.append_data(frame)
        else:
            from PIL import Image

            self._frames.append(Image.fromarray(frame).quantize(colors=255, method=Image.Quantize.MEDIANCUT))

    def close(self) -> None:
        if self._mp4 is not None:
            self._mp4.close()
            os.replace(self._tmp, self.path)
            return
        if not self._frames:
            raise DockbenchError("no frames to write")
        tmp = self.path.with_name(self.path.stem + ".tmp.gif")
        self._frames[0].save(tmp, save_all=True, append_images=self._frames[1:],
                             duration=round(1000.0 / self.fps), loop=0, optimize=False, disposal=1)
        os.replace(tmp, self.path)

    def abort(self) -> None:
        if self._mp4 is not None:
            try:
                self._mp4.close()
            finally:
                if self._tmp.exists():
                    self._tmp.unlink()


def _resolve_joint(model: mujoco.MjModel, name: str) -> int:
    """Joint id of ``name``, or of the one joint whose name ends with ``/name`` (a prefixed
    attachment such as ``hand/thumb_mcp``); −1 if none or ambiguous."""
    jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
    if jid >= 0:
        return jid
    hits = [j for j in range(model.njnt) if (model.joint(j).name or "").endswith("/" + name)]
    return hits[0] if len(hits) == 1 else -1


def _hand_replay(model: mujoco.MjModel, run: Run) -> tuple[np.ndarray, np.ndarray] | None:
    """(qpos addresses, (N, n) poses) of the hand when the run recorded ``hand_applied`` and
    meta.json's ``tool_summary.joint_names`` resolve to joints of the scene; else None (the hand
    stays at its model pose)."""
    applied = run.channels.get("hand_applied")
    names = (run.meta.get("tool_summary") or {}).get("joint_names")
    if applied is None or not names or applied.ndim != 2 or applied.shape[1] != len(names):
        return None
    ids = [_resolve_joint(model, str(n)) for n in names]
    if min(ids) < 0:
        return None
    return np.array([int(model.jnt_qposadr[j]) for j in ids]), applied


def _floating_replay(model: mujoco.MjModel, run: Run) -> list[tuple[int, np.ndarray]]:
    """(first qpos address, (N, k) joint states) of a free-floating base (``base_pos``, ``base_quat``: its
    free joint's qpos) and of a moving target (``target_qpos``) when the run recorded them (sim/orbit.py)."""
    from dockbench.sim.mounts import BASE_JOINT

    out = []
    ch = run.channels
    j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, BASE_JOINT)
    if j >= 0 and "base_pos" in ch and "base_quat" in ch:
        out.append((int(model.jnt_qposadr[j]), np.hstack([ch["base_pos"], ch["base_quat"]])))
    b = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "target")
    if b >= 0 and "target_qpos" in ch and model.body_jntnum[b] > 0:
        out.append((int(model.jnt_qposadr[model.body_jntadr[b]]), ch["target_qpos"]))
    return out


def render_run_video(
    run_dir: str | Path, out_path: str | Path, fps: float = 30, width: int = 640, height: int = 480
) -> Path:
    """Render the run in ``run_dir`` to ``out_path`` (.mp4 or .gif) and return the path.

    Args:
        run_dir: a run folder with telemetry.npz, meta.json and scene.xml.
        out_path: the video file; its suffix picks the encoder (:data:`ENCODERS`). A relative path is
            relative to the current directory.
        fps: video frame rate [1/s], independent of the control rate.
        width, height: frame size [px] (even numbers, as H.264 needs).

    Raises:
        DockbenchError: missing scene.xml or telemetry, unknown suffix, missing encoder (the message
            names the extra to install), no OpenGL backend (the message names MUJOCO_GL).
    """
    if fps <= 0:
        raise DockbenchError(f"fps must be > 0, got {fps}")
    if width <= 0 or height <= 0 or width % 2 or height % 2:
        raise DockbenchError(f"width and height must be positive even numbers, got {width}x{height}")
    run = Run.load(run_dir)
    scene = run.path / "scene.xml"
    if not scene.is_file():
        raise DockbenchError(f"{run.path}: no scene.xml in the run folder (re-run the scenario to write it)")
    t = run.t
    if len(t) == 0:
        raise DockbenchError(f"{run.path}: the run has no recorded steps; nothing to render")
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    writer = _Writer(out, fps)  # checks the suffix and the encoder before the expensive part
    try:
        model = load_render_model(scene)
        data = mujoco.MjData(model)
        names = run.joint_names or []
        q = run.channels["q"]
        if len(names) != q.shape[1]:
            raise DockbenchError(
                f"{run.path}: meta.json joint_names has {len(names)} names, q has {q.shape[1]} columns")
        adr = []
        for n in names:
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n)
            if jid < 0:
                raise DockbenchError(f"{scene}: no joint named {n!r} (from meta.json joint_names)")
            adr.append(int(model.jnt_qposadr[jid]))
        adr_arr = np.array(adr)
        hand = _hand_replay(model, run)
        floating = _floating_replay(model, run)
        frames = frame_indices(t, fps)
        with OffscreenRenderer(model, width, height) as renderer, Progress("video frames", len(frames)) as bar:
            frame_camera(renderer.camera, run, float(model.vis.global_.fovy))
            for i in frames:
                bar.step(out.name)
                if np.all(np.isfinite(q[i])):  # a diverged run's last samples: hold the last pose
                    data.qpos[adr_arr] = q[i]
                if hand is not None and np.all(np.isfinite(hand[1][i])):
                    data.qpos[hand[0]] = hand[1][i]
                for qadr, poses in floating:  # a free-floating base, a moving target (sim/orbit.py)
                    if np.all(np.isfinite(poses[i])):
                        data.qpos[qadr : qadr + poses.shape[1]] = poses[i]
                mujoco.mj_forward(model, data)
                writer.append(renderer.render(data))
        writer.close()
    except BaseException:
        writer.abort()
        raise
    return out
