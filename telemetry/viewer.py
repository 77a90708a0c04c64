"""The MuJoCo viewer for a docking run: a step observer (:mod:`telemetry.live`) that shows the plant
while the loop runs, paced to real time or ``speed`` × real time.

The target and the tool are drawn see-through (:data:`TARGET_ALPHA`, :data:`TOOL_ALPHA`) and contact
markers get metric sizes (:data:`CONTACT_MARKER_RADIUS`); these settings change the rendering only.
Drawn on top of the model: MuJoCo's contact points and contact-force arrows (``mjVIS_CONTACTPOINT``,
``mjVIS_CONTACTFORCE``; :data:`FORCE_ARROW_M_PER_N` long per newton), the reference pose of the step
(a frame of three arrows, x red, y green, z blue, :data:`REFERENCE_AXIS_LENGTH` long, and a small
sphere at ``ee_pos_des``), the goal pose as a thinner frame, and a text line with t, the measured speed
(and the one asked for) and the contact force. Closing the window ends the run (status ``interrupted``,
reason ``viewer closed``); the loop still writes the run folder.

The window comes from a *launcher* ``launch(model, data) -> handle`` (default
``mujoco.viewer.launch_passive``); a handle needs ``is_running()``, ``sync()``, ``lock()``, ``close()``,
``user_scn``, ``opt``, ``cam`` and optionally ``set_texts``. :class:`OffscreenViewer` is a handle that
renders each synced frame with ``mujoco.Renderer`` instead (no display; ``MUJOCO_GL=egl``), for tests,
headless machines and snapshots.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
from dockbench.sim.errors import DockbenchError
from dockbench.telemetry.live import Pacer, RowLayout, every_steps

DEFAULT_FPS = 60.0
"""Frames per wall-clock second the viewer is synced at."""
RATE_WINDOW = 1.0
"""Wall-clock seconds over which the viewer's text line measures the real-time factor [s]."""
REFERENCE_AXIS_LENGTH = 0.05
"""Length of the reference frame's arrows [m]."""
REFERENCE_AXIS_WIDTH = 0.002
"""Shaft radius of the reference frame's arrows [m]."""
GOAL_AXIS_LENGTH = 0.035
"""Length of the goal frame's arrows [m]."""
REFERENCE_SPHERE_RADIUS = 0.004
"""Radius of the sphere at the reference position [m]."""
TARGET_ALPHA = 0.35
"""Opacity of the target's geoms in the viewer (the contacts inside the funnel stay visible)."""
TOOL_ALPHA = 0.6
"""Opacity of the tool's geoms (a force arrow pointing into the tool stays visible)."""
CONTACT_MARKER_RADIUS = 0.003
"""Radius of a contact point's disc [m]."""
CONTACT_MARKER_HEIGHT = 0.0005
"""Thickness of a contact point's disc [m]."""
CONTACT_FORCE_RGBA = (1.0, 0.2, 0.8, 1.0)
"""Colour of the contact force arrows (magenta: visible against the tool and the target)."""
FORCE_ARROW_RADIUS = 0.0015
"""Shaft radius of a contact force arrow [m]."""
FORCE_ARROW_M_PER_N = 0.005
"""Length of a contact force arrow per newton [m/N] (20 N → 10 cm)."""
_AXIS_RGBA = ((0.9, 0.15, 0.15, 1.0), (0.15, 0.8, 0.15, 1.0), (0.2, 0.35, 1.0, 1.0))

Launcher = Callable[[mujoco.MjModel, mujoco.MjData], Any]


def passive_launcher(model: mujoco.MjModel, data: mujoco.MjData) -> Any:
    """``mujoco.viewer.launch_passive`` (needs a display); a clear error where there is none."""
    try:
        import mujoco.viewer

        return mujoco.viewer.launch_passive(model, data, show_left_ui=False, show_right_ui=False)
    except Exception as exc:  # noqa: BLE001 - GLFW / display errors come in assorted types
        raise DockbenchError(
            f"cannot open the MuJoCo viewer ({type(exc).__name__}: {exc}); it needs a display (DISPLAY or "
            f"WAYLAND_DISPLAY) and OpenGL; on a headless machine use --video or the offscreen viewer"
        ) from None


def add_geom(scn: mujoco.MjvScene, gtype: int, size: Any, pos: Any, mat: Any, rgba: Any) -> mujoco.MjvGeom | None:
    """Append one decoration geom to ``scn`` (None when the scene is full)."""
    if scn.ngeom >= scn.maxgeom:
        return None
    g = scn.geoms[scn.ngeom]
    mujoco.mjv_initGeom(g, gtype, np.asarray(size, dtype=float), np.asarray(pos, dtype=float),
                        np.asarray(mat, dtype=float).reshape(9), np.asarray(rgba, dtype=np.float32))
    g.category = mujoco.mjtCatBit.mjCAT_DECOR
    scn.ngeom += 1
    return g


def add_frame(scn: mujoco.MjvScene, pos: np.ndarray, R: np.ndarray, length: float, width: float,
              alpha: float = 1.0) -> int:
    """Three arrows along the columns of ``R`` (x red, y green, z blue) from ``pos``; returns how many
    geoms were added."""
    n = 0
    for k in range(3):
        rgba = np.array(_AXIS_RGBA[k])
        rgba[3] = alpha
        g = add_geom(scn, mujoco.mjtGeom.mjGEOM_ARROW, np.zeros(3), np.zeros(3), np.eye(3), rgba)
        if g is None:
            break
        mujoco.mjv_connector(g, mujoco.mjtGeom.mjGEOM_ARROW, width, np.asarray(pos, dtype=float),
                             np.asarray(pos, dtype=float) + length * np.asarray(R)[:, k])
        n += 1
    return n


def copy_decor(src: mujoco.MjvScene, dst: mujoco.MjvScene) -> int:
    """Append the geoms of ``src`` to ``dst`` (as the passive viewer does with its ``user_scn``)."""
    n = 0
    for k in range(src.ngeom):
        g = src.geoms[k]
        if add_geom(dst, g.type, g.size, g.pos, g.mat, g.rgba) is None:
            break
        n += 1
    return n


class OffscreenViewer:
    """A viewer handle without a window: every :meth:`sync` renders the scene offscreen
    (``mujoco.Renderer``, the model's free camera as set on :attr:`cam`, the options :attr:`opt`,
    plus the :attr:`user_scn` decorations) into :attr:`frame` (H, W, 3) uint8.

    Args:
        model, data: the plant.
        width, height: image size [px].
        close_after: report ``is_running() == False`` after this many syncs (a user closing the
            window), None = never.
        on_frame: called with each rendered frame (e.g. to write PNGs).
    """

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, *, width: int = 640, height: int = 480,
                 close_after: int | None = None, on_frame: Callable[[np.ndarray], None] | None = None) -> None:
        self.m, self.d = model, data
        g = model.vis.global_  # the offscreen framebuffer must hold the image (rendering-only settings)
        g.offwidth, g.offheight = max(g.offwidth, width), max(g.offheight, height)
        try:
            self._renderer = mujoco.Renderer(model, height=height, width=width)
        except Exception as exc:  # noqa: BLE001 - GL back-ends raise assorted types
            raise DockbenchError(f"offscreen rendering unavailable ({type(exc).__name__}: {exc}); set "
                                 f"MUJOCO_GL=egl or MUJOCO_GL=osmesa") from None
        self.user_scn = mujoco.MjvScene(model, maxgeom=200)
        self.opt = mujoco.MjvOption()
        self.cam = mujoco.MjvCamera()
        mujoco.mjv_defaultFreeCamera(model, self.cam)
        self.close_after, self.on_frame = close_after, on_frame
        self.syncs = 0
        self.texts: list[Any] = []
        self.frame: np.ndarray | None = None
        self._open = True

    def is_running(self) -> bool:
        return self._open and (self.close_after is None or self.syncs < self.close_after)

    @contextlib.contextmanager
    def lock(self):  # noqa: ANN201 - the passive viewer's lock is a context manager too
        yield

    def set_texts(self, texts: Any) -> None:
        self.texts = list(texts) if isinstance(texts, list) else [texts]

    def sync(self) -> None:
        r = self._renderer
        r.update_scene(self.d, camera=self.cam, scene_option=self.opt)
        copy_decor(self.user_scn, r.scene)
        self.frame = r.render().copy()
        self.syncs += 1
        if self.on_frame is not None:
            self.on_frame(self.frame)

    def close(self) -> None:
        if self._open:
            self._open = False
            self._renderer.close()


def offscreen_launcher(**kwargs: Any) -> Launcher:
    """A launcher that opens an :class:`OffscreenViewer` with ``kwargs``."""

    def launch(model: mujoco.MjModel, data: mujoco.MjData) -> OffscreenViewer:
        return OffscreenViewer(model, data, **kwargs)

    return launch


class RunViewer:
    """Step observer: a MuJoCo viewer on the running loop (module docstring).

    Args:
        speed: real-time factor to pace to (1 = real time); None = as fast as the loop runs.
        fps: frames per wall-clock second (the sync interval in control steps follows from it).
        launch: the launcher (default :func:`passive_launcher`).
        clock, sleep: for the pacing (injectable for tests).
        contacts: draw contact points and forces.
    """

    stop_reason = "viewer closed"

    def __init__(self, *, speed: float | None = 1.0, fps: float = DEFAULT_FPS, launch: Launcher | None = None,
                 clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep,
                 contacts: bool = True) -> None:
        if not (math.isfinite(fps) and fps > 0):
            raise DockbenchError(f"viewer fps must be > 0, got {fps}")
        if speed is not None and not (math.isfinite(speed) and speed > 0):
            raise DockbenchError(f"--speed must be a finite number > 0, got {speed}")
        self.speed, self.fps, self.launch = speed, float(fps), launch or passive_launcher
        self.clock, self.sleep, self.contacts = clock, sleep, contacts
        self.every = 1
        self.handle: Any = None
        self.frames = 0
        self.pacer: Pacer | None = None
        #: the measured real-time factor (simulated s per wall s over the last RATE_WINDOW); None until measured
        self.rate: float | None = None
        self._rate_anchor: tuple[float, float] | None = None

    def start(self, setup: Any, tel: Any) -> None:
        m, d = setup.asm.model, setup.data
        T_c = setup.scenario.sim.control_period
        self.every = every_steps(self.fps / (self.speed or 1.0), T_c)
        self.pacer = Pacer(self.speed, self.every, clock=self.clock, sleep=self.sleep) if self.speed else None
        self.layout = RowLayout(tel)
        self._block = tel.block
        self._tel = tel  # a long run's block holds rows base .. base + capacity − 1 (telemetry.log)
        self._goal = np.asarray(setup.T_world_goal, dtype=float)
        self._truth = tel.arrays["wrench_truth_world"]
        self._contacts = tel.arrays["contact_count"]
        # rendering-only model settings: a brighter headlight, and a see-through target so the contacts
        # inside the funnel stay visible
        m.vis.headlight.ambient[:] = np.maximum(m.vis.headlight.ambient, 0.3)
        m.vis.headlight.diffuse[:] = np.maximum(m.vis.headlight.diffuse, 0.6)
        target = setup.asm.target
        for body, alpha in ((target.body_name if target is not None else None, TARGET_ALPHA),
                            (setup.asm.tool.root_body, TOOL_ALPHA)):
            bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, body) if body else -1
            if bid >= 0:
                sel = m.geom_bodyid == bid
                m.geom_rgba[sel, 3] = np.minimum(m.geom_rgba[sel, 3], alpha)
        # contact markers sized in metres (MuJoCo scales them by the model's mean body size, which the
        # arm makes centimetres wide): CONTACT_MARKER_* [m]
        size = max(float(m.stat.meansize), 1e-9)
        m.vis.scale.contactwidth = CONTACT_MARKER_RADIUS / size
        m.vis.scale.contactheight = CONTACT_MARKER_HEIGHT / size
        m.vis.scale.forcewidth = FORCE_ARROW_RADIUS / size
        m.vis.rgba.contactforce[:] = CONTACT_FORCE_RGBA
        m.vis.map.force = FORCE_ARROW_M_PER_N * float(m.stat.meanmass)  # MuJoCo divides by meanmass
        self.handle = self.launch(m, d)
        h = self.handle
        with h.lock():
            if self.contacts:
                h.opt.flags[mujoco.mjtVisFlag.mjVIS_CONTACTPOINT] = 1
                h.opt.flags[mujoco.mjtVisFlag.mjVIS_CONTACTFORCE] = 1
            look = (target.T_world_target[:3, 3] if target is not None else self._goal[:3, 3])
            h.cam.type = mujoco.mjtCamera.mjCAMERA_FREE
            h.cam.lookat[:] = look
            h.cam.distance = 0.45
            h.cam.azimuth = 135.0
            h.cam.elevation = -25.0

    def reference_pose(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(p_des (3,) [m], R_des (3, 3)) of step ``i``, world, from the recorded row."""
        row = self._block[i - self._tel.base]
        return row[self.layout.slices["ee_pos_des"]].copy(), row[self.layout.slices["R_world_ee_des"]].reshape(3, 3)

    def draw(self, scn: mujoco.MjvScene, i: int) -> None:
        """The decorations of step ``i`` (reference frame and sphere, goal frame) into ``scn``."""
        scn.ngeom = 0
        p, R = self.reference_pose(i)
        add_frame(scn, p, R, REFERENCE_AXIS_LENGTH, REFERENCE_AXIS_WIDTH)
        add_geom(scn, mujoco.mjtGeom.mjGEOM_SPHERE, [REFERENCE_SPHERE_RADIUS, 0, 0], p, np.eye(3),
                 [1.0, 0.85, 0.1, 0.9])
        add_frame(scn, self._goal[:3, 3], self._goal[:3, :3], GOAL_AXIS_LENGTH, 0.6 * REFERENCE_AXIS_WIDTH,
                  alpha=0.5)

    def step(self, i: int, t: float) -> bool:
        h = self.handle
        if not h.is_running():
            return True
        if self.pacer is not None:
            self.pacer.step(i, t)
        self._measure_rate(t)
        f = float(np.linalg.norm(self._truth[i - self._tel.base, :3]))
        with h.lock():
            self.draw(h.user_scn, i)
        if hasattr(h, "set_texts"):  # outside the lock: the passive viewer's set_texts takes it itself
            h.set_texts((None, None, "dockbench",
                         f"t = {t:.3f} s ({self.rate_text()}); contact truth |f| = {f:.2f} N, "
                         f"{int(self._contacts[i - self._tel.base])} tool contacts"))
        h.sync()
        self.frames += 1
        return False

    def _measure_rate(self, t: float) -> None:
        """Update :attr:`rate` = simulated time / wall time over the last :data:`RATE_WINDOW` of wall time."""
        now = self.clock()
        if self._rate_anchor is None:
            self._rate_anchor = (t, now)
            return
        t0, w0 = self._rate_anchor
        if now - w0 >= RATE_WINDOW:
            self.rate = (t - t0) / (now - w0)
            self._rate_anchor = (t, now)

    def rate_text(self) -> str:
        """The speed the run is *measured* at, beside the one asked for: ``0.45x real time, paced to 1x``
        (a run slower than ``--speed`` is not sped up; the text used to show the requested 1x only)."""
        asked = f"paced to {self.speed:g}x" if self.speed else "unpaced"
        if self.rate is None:
            return f"{asked}, measuring"
        return f"{self.rate:.2g}x real time, {asked}"

    def finish(self, status: str) -> None:
        pass

    def hold(self, poll: float = 1.0 / 30.0) -> None:
        """Keep the window open on the final state until the user closes it (after the run folder is
        written; Ctrl-C also returns)."""
        h = self.handle
        if h is None:
            return
        try:
            while h.is_running():
                h.sync()
                self.sleep(poll)
        except KeyboardInterrupt:
            pass

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


def save_png(frame: np.ndarray, path: str | Path) -> Path:
    """Write an (H, W, 3) uint8 frame to a PNG (matplotlib's writer)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mpimg.imsave(str(path), frame)
    return path
