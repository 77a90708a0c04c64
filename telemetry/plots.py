"""Publication-style figures of one run folder (matplotlib, Agg backend, no display needed).

:func:`plot_run` writes one file per figure and format into the run folder (atomically) and returns
their paths; :func:`make_figures` returns the matplotlib figures for tests and notebooks. Figures
(:data:`FIGURES`), all against time t [s] with the planner's segments shaded and named:

========================  ==================================================================
name                      content
========================  ==================================================================
tracking                  EE position x, y, z [mm]: desired (dashed) vs actual, world axes
tracking_error            ‖p − p_d‖ and per-axis |e| [mm], log scale
orientation_error         angle of R_d Rᵀ [deg]
contact_force             ‖f‖ and axial force [N], F/T vs contact truth on the same axes; contacts
joint_torques             applied (and commanded) torque per joint [N·m] with the ±τ_max limits
path                      planned vs actual path in 3D [mm] and the speed profile [mm/s]
docking                   (mating targets) depth, lateral offset [mm] and tilt [deg] of the tip in the
                          true target frame over time, with the scenario's gate bounds, the final
                          window the gates average over, and the window means with their verdicts
controller                (runs with ``ctrl_*`` channels) the controller's diagnostic channels, one
                          panel per group of channels with a common prefix, in their recorded units
orbit                     (free-floating base or moving target, sim/orbit.py) base attitude
                          disturbance [deg] and drift [mm]; target speed [mm/s] and rate [deg/s];
                          relative change of the total momentum and the centre of mass's distance
                          from its straight line, log scale, with the gates; tool-contact spans
hand                      G20 hand (only runs with ``hand_goal``): active-joint angles goal vs applied
                          [rad]; max_j |applied − goal| [rad], log scale, with the preset
                          tolerance; self-penetration [mm] with its tolerance and the projected /
                          fell-back steps; hand commands as vertical lines
========================  ==================================================================

A figure whose channels the run does not have is left out (:func:`figures_for`): ``hand`` needs the
G20 hand's ``hand_*`` channels (``hand.effector.HandRuntime``), ``docking`` a mating target,
``controller`` at least one ``ctrl_*`` channel, ``orbit`` the ``momentum`` channel of sim/orbit.py.

Several runs on shared axes (:data:`COMPARE_FIGURES`, :func:`plot_compare`,
``plot_telemetry.py RUN_A RUN_B …``): ``compare_contact_force`` (‖f‖ and axial force of the contact
truth), ``compare_docking`` (depth, lateral, tilt with the first run's gate bounds) and
``compare_tracking`` (position error), one colour per run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless; must precede pyplot

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from dockbench.sim.errors import DockbenchError  # noqa: E402
from dockbench.telemetry.log import atomic_path  # noqa: E402
from dockbench.telemetry.metrics import (  # noqa: E402
    MATING_TARGETS,
    axial_force,
    is_mating_target,
    orientation_error_deg,
    position_error,
    quat_to_matrix,
    target_frames,
)
from dockbench.telemetry.progress import Progress  # noqa: E402
from dockbench.telemetry.run import Run  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

#: Figure names, in the order :func:`plot_run` writes them (those the run has channels for:
#: :func:`figures_for`).
FIGURES: tuple[str, ...] = (
    "tracking", "tracking_error", "orientation_error", "contact_force", "joint_torques", "path", "docking",
    "controller", "orbit", "hand",
)

#: Figures drawn only when the run has this channel (all others: every run; ``docking`` and
#: ``controller`` have their own tests in :func:`figures_for`).
REQUIRES: dict[str, str] = {"hand": "hand_goal", "orbit": "momentum"}

#: Overlay figures of several runs (:func:`plot_compare`).
COMPARE_FIGURES: tuple[str, ...] = ("compare_contact_force", "compare_docking", "compare_tracking")

#: Output formats matplotlib writes here.
FORMATS: tuple[str, ...] = ("png", "pdf", "svg")

#: One publication style for every figure (applied with ``plt.rc_context``, never globally).
STYLE: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "legend.framealpha": 0.85,
    "figure.titlesize": 11,
    "lines.linewidth": 1.2,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 100,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "pdf.fonttype": 42,  # embed TrueType: editable text in the PDF
    "ps.fonttype": 42,
}

#: Width of a double-column figure [in].
WIDTH = 7.0
_ACTUAL = dict(color="C0", lw=1.3)
_DESIRED = dict(color="k", lw=1.0, ls="--")
_TRUTH = dict(color="C3", lw=1.0, ls="--")
_SEG_COLORS = ("#4c72b0", "#dd8452")
_COMMAND = dict(color="0.15", lw=0.9, ls="-.", zorder=3)
_LIMIT = dict(color="C3", lw=0.9, ls=":")
_PLANNER_END = dict(color="0.4", lw=0.8, ls=":", zorder=1)
_OUTSIDE = dict(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, handlelength=1.8)


# ------------------------------------------------------------------------------------------- helpers
def _title(run: Run) -> str:
    sc = run.meta.get("scenario") or {}
    planner = (sc.get("planner") or {}).get("type", "?")
    controller = (sc.get("controller") or {}).get("type", "?")
    return f"{run.name} — {run.meta.get('robot', '?')}, planner {planner}, controller {controller}"


def shade_segments(ax: Any, run: Run, label: bool = False) -> int:
    """Shade the planner segments of ``run`` on a time axis (alternating colours) and mark the end of
    the planner with a dotted line when the run goes on after it (the hold/settle time follows); with
    ``label`` the segments' names and "planner end" are written above the axes. Returns the number of
    spans drawn."""
    n = 0
    for k, seg in enumerate(run.segments):
        t1 = min(seg.t1, float(run.t[-1])) if len(run.t) else seg.t1
        if t1 <= seg.t0:
            continue
        ax.axvspan(seg.t0, t1, color=_SEG_COLORS[k % 2], alpha=0.08, lw=0, zorder=0)
        n += 1
        if label:
            ax.text((seg.t0 + t1) / 2, 1.0, seg.name, transform=ax.get_xaxis_transform(), ha="center",
                    va="bottom", fontsize=7, color="0.3", clip_on=False)
    if len(run.t) and run.planner_duration < float(run.t[-1]):
        ax.axvline(run.planner_duration, **_PLANNER_END)
        if label:
            ax.text(run.planner_duration, 1.0, " planner end", transform=ax.get_xaxis_transform(), ha="left",
                    va="bottom", fontsize=7, color="0.3", clip_on=False)
    return n


def _finish_time_axes(axes: Sequence[Any], run: Run) -> None:
    for i, ax in enumerate(axes):
        shade_segments(ax, run, label=(i == 0))
        ax.set_xlim(float(run.t[0]), float(run.t[-1]))
    axes[-1].set_xlabel("t [s]")


def _positive_or_nan(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.nan)


def _axis_name(run: Run) -> str:
    if run.meta.get("T_world_target") is None:
        return "world +z"
    return "target +z" if is_mating_target(run.meta.get("target_type")) else "target normal"


# ------------------------------------------------------------------------------------------- figures
def fig_tracking(run: Run) -> Figure:
    """EE position per world axis: desired vs actual [mm]."""
    ch, t = run.channels, run.t
    fig, axes = plt.subplots(3, 1, figsize=(WIDTH, 5.2), sharex=True, layout="constrained")
    for i, (ax, c) in enumerate(zip(axes, "xyz", strict=True)):
        ax.plot(t, 1e3 * ch["ee_pos_des"][:, i], label="desired", **_DESIRED)
        ax.plot(t, 1e3 * ch["ee_pos"][:, i], label="actual", **_ACTUAL)
        ax.set_ylabel(f"{c} [mm]")
        ax.ticklabel_format(axis="y", useOffset=False)
    axes[0].legend(loc="best", ncols=2)
    _finish_time_axes(axes, run)
    fig.suptitle(f"EE position, world axes\n{_title(run)}")
    return fig


def fig_tracking_error(run: Run) -> Figure:
    """Position error ‖p − p_d‖ and |e_x|, |e_y|, |e_z| [mm], log scale."""
    ch, t = run.channels, run.t
    e = 1e3 * (ch["ee_pos"] - ch["ee_pos_des"])
    fig, ax = plt.subplots(1, 1, figsize=(WIDTH, 3.0), layout="constrained")
    for i, c in enumerate("xyz"):
        ax.plot(t, _positive_or_nan(np.abs(e[:, i])), lw=0.7, alpha=0.7, color=f"C{i + 1}", label=f"|e_{c}|")
    e_norm = 1e3 * position_error(ch)
    ax.plot(t, _positive_or_nan(e_norm), color="k", lw=1.3, label="‖e‖")
    ax.set_yscale("log")
    peak = float(np.max(e_norm)) if e_norm.size else 0.0
    if peak > 0:  # show five decades below the peak; numerical-noise floors would swamp the plot
        ax.set_ylim(peak * 1e-5, peak * 3.0)
    ax.set_ylabel("position error [mm]")
    ax.legend(loc="lower right", ncols=4)
    _finish_time_axes([ax], run)
    fig.suptitle(f"EE position tracking error\n{_title(run)}")
    return fig


def fig_orientation_error(run: Run) -> Figure:
    """Orientation error angle [deg]."""
    ch, t = run.channels, run.t
    fig, ax = plt.subplots(1, 1, figsize=(WIDTH, 2.8), layout="constrained")
    ax.plot(t, orientation_error_deg(ch), **_ACTUAL)
    ax.set_ylabel("orientation error ∠(R_d Rᵀ) [deg]")
    ax.set_ylim(bottom=0.0)
    _finish_time_axes([ax], run)
    fig.suptitle(f"EE orientation error\n{_title(run)}")
    return fig


def fig_contact_force(run: Run) -> Figure:
    """‖f‖ and axial force [N], F/T vs truth; tool contact count."""
    ch, t = run.channels, run.t
    fig, axes = plt.subplots(3, 1, figsize=(WIDTH, 5.4), sharex=True, layout="constrained",
                             gridspec_kw=dict(height_ratios=(3, 3, 1.2)))
    ft, tr = ch["wrench_ext_world"], ch["wrench_truth_world"]
    axes[0].plot(t, np.linalg.norm(ft[:, :3], axis=1), label="F/T sensor", **_ACTUAL)
    axes[0].plot(t, np.linalg.norm(tr[:, :3], axis=1), label="contact truth", **_TRUTH)
    axes[0].set_ylabel("‖f_ext‖ [N]")
    axes[0].legend(loc="upper left", ncols=2)
    axes[1].plot(t, axial_force(ft, run.meta), label="F/T sensor", **_ACTUAL)
    axes[1].plot(t, axial_force(tr, run.meta), label="contact truth", **_TRUTH)
    axes[1].axhline(0.0, color="0.5", lw=0.6)
    axes[1].set_ylabel(f"axial f_ext ({_axis_name(run)}) [N]")
    axes[2].step(t, ch["contact_count"], where="post", color="0.3", lw=0.9)
    axes[2].set_ylabel("contacts [–]")
    axes[2].set_ylim(bottom=0)
    axes[2].yaxis.set_major_locator(MaxNLocator(nbins=3, integer=True))
    _finish_time_axes(axes, run)
    fig.suptitle(f"Environment-on-tool contact force, world axes\n{_title(run)}")
    return fig


def fig_joint_torques(run: Run) -> Figure:
    """Applied torque (solid) and commanded torque (dashed) per joint with ±τ_max [N·m]."""
    ch, t = run.channels, run.t
    tau, cmd = ch["tau_applied"], ch["tau_cmd"]
    nv = tau.shape[1]
    names = run.joint_names or [f"joint {i + 1}" for i in range(nv)]
    tau_max = np.asarray(run.meta.get("tau_max", [np.inf] * nv), dtype=float)
    ncols = 2
    nrows = (nv + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(WIDTH, 1.45 * nrows + 0.9), sharex=True,
                             layout="constrained", squeeze=False)
    flat = axes.ravel()
    for i in range(nv):
        ax = flat[i]
        ax.plot(t, cmd[:, i], color="C1", lw=0.8, ls="--", label="commanded")
        ax.plot(t, tau[:, i], label="applied", **_ACTUAL)
        peak = float(np.max(np.abs(cmd[:, i]))) if len(t) else 0.0
        lim = float(tau_max[i])
        if np.isfinite(lim):
            for s in (-1, 1):
                ax.axhline(s * lim, color="C3", lw=0.9, ls=":")
            top = max(1.15 * peak, 1e-3) if peak < 0.5 * lim else 1.1 * max(lim, peak)
            ax.set_ylim(-top, top)
            ax.set_title(f"{names[i]}: peak {peak:.3g} N·m = {100 * peak / lim:.1f} % of ±{lim:g}",
                         fontsize=8, loc="left")
        else:
            ax.set_title(f"{names[i]}: peak {peak:.3g} N·m", fontsize=8, loc="left")
        ax.set_ylabel("τ [N·m]")
        shade_segments(ax, run)
        ax.set_xlim(float(t[0]), float(t[-1]))
    for ax in flat[nv:]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("t [s]")
    if nv % ncols:  # the last visible plot in the second column carries the x label
        axes[-2, -1].set_xlabel("t [s]")
        axes[-2, -1].xaxis.set_tick_params(labelbottom=True)
    flat[0].legend(loc="upper right", ncols=2, fontsize=7)
    fig.suptitle(f"Joint torques (dotted: actuator limits ±τ_max)\n{_title(run)}")
    return fig


def fig_path(run: Run) -> Figure:
    """Planned vs actual EE path in 3D [mm] and the speed profile [mm/s]."""
    ch, t = run.channels, run.t
    p, pd = 1e3 * ch["ee_pos"], 1e3 * ch["ee_pos_des"]
    fig = plt.figure(figsize=(WIDTH, 3.6), layout="constrained")
    gs = fig.add_gridspec(1, 3, width_ratios=(1.0, 0.1, 1.25))  # spacer column for the z label
    ax3 = fig.add_subplot(gs[0], projection="3d")
    ax3.plot(pd[:, 0], pd[:, 1], pd[:, 2], label="planned", **_DESIRED)
    ax3.plot(p[:, 0], p[:, 1], p[:, 2], label="actual", **_ACTUAL)
    ax3.scatter(*pd[0], color="C2", s=18, label="start", depthshade=False)
    ax3.scatter(*pd[-1], color="C3", s=18, marker="s", label="end", depthshade=False)
    T = run.meta.get("T_world_target")
    if T is not None:
        o = 1e3 * np.asarray(T, dtype=float)[:3, 3]
        ax3.scatter(*o, color="0.3", s=30, marker="x", label="target", depthshade=False)
    pts = np.vstack([p, pd])
    lo, hi = np.nanmin(pts, axis=0), np.nanmax(pts, axis=0)
    center, half = (lo + hi) / 2.0, max(float(np.max(hi - lo)) / 2.0, 1.0) * 1.05
    for setter, c in zip((ax3.set_xlim, ax3.set_ylim, ax3.set_zlim), center, strict=True):
        setter(c - half, c + half)  # a cube: equal scale on the three axes
    ax3.set_box_aspect((1, 1, 1))
    for axis in (ax3.xaxis, ax3.yaxis, ax3.zaxis):
        axis.set_major_locator(MaxNLocator(4))
    ax3.set_xlabel("x [mm]", labelpad=-2)
    ax3.set_ylabel("y [mm]", labelpad=-2)
    ax3.set_zlabel("z [mm]", labelpad=-2)
    ax3.tick_params(labelsize=6, pad=0)
    ax3.legend(loc="upper left", fontsize=7)
    ax3.set_title("path, world axes")
    ax = fig.add_subplot(gs[2])
    ax.plot(t, 1e3 * np.linalg.norm(ch["ee_vel_des"], axis=1), label="planned ‖ẋ_d‖", **_DESIRED)
    ax.plot(t, 1e3 * np.linalg.norm(ch["ee_vel"][:, :3], axis=1), label="actual ‖ẋ‖", **_ACTUAL)
    ax.set_ylabel("EE speed [mm/s]")
    ax.set_ylim(bottom=0.0)
    ax.legend(loc="upper right")
    _finish_time_axes([ax], run)
    ax.set_title("speed profile", pad=12)
    fig.suptitle(_title(run))
    return fig


# ---------------------------------------------------------------------------------------- docking
def has_docking(run: Run) -> bool:
    """True when the run has a mating target (the docking layer of :mod:`telemetry.metrics`)."""
    return run.meta.get("T_world_target") is not None and is_mating_target(run.meta.get("target_type"))


def docking_series(ch: dict[str, np.ndarray], meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """Per-step depth and lateral offset [m] of the tip and tilt [deg] of the tool axis in the TRUE
    target frame D, the quantities whose final-window means are ``docking.depth``, ``.lateral`` and
    ``.tilt_deg`` (same formulas as :func:`telemetry.metrics.compute_metrics`):

    depth = −z of R_Dᵀ (p − o_D), lateral = ‖(x, y)‖ of it, tilt = ∠(z_tool, −z_D) via atan2.
    """
    R_D, o_D = target_frames(ch, meta)  # the recorded pose of a moving target, else the configured one
    p_in_D = np.einsum("nji,nj->ni", R_D, ch["ee_pos"] - o_D)
    z_tool = quat_to_matrix(ch["ee_quat"])[:, :, 2]
    minus_z = -R_D[:, :, 2]
    tilt = np.arctan2(np.linalg.norm(np.cross(z_tool, minus_z), axis=1), np.einsum("ni,ni->n", z_tool, minus_z))
    return {"depth": -p_in_D[:, 2], "lateral": np.linalg.norm(p_in_D[:, :2], axis=1), "tilt_deg": np.degrees(tilt)}


def _gates(run: Run) -> list[dict[str, Any]]:
    return list((run.meta.get("scenario") or {}).get("gates") or [])


def _gate_verdicts(run: Run) -> dict[str, dict[str, Any]]:
    return {g["metric"]: g for g in (run.summary.get("gates") or []) if isinstance(g, dict) and "metric" in g}


_DOCKING_PANELS = (
    ("depth", "docking.depth", 1e3, "insertion depth [mm]"),
    ("lateral", "docking.lateral", 1e3, "lateral offset [mm]"),
    ("tilt_deg", "docking.tilt_deg", 1.0, "tilt [deg]"),
)
_GATE = dict(color="C3", lw=1.0, ls="--", zorder=4)
_WINDOW = dict(color="0.5", alpha=0.12, lw=0, zorder=0)


def _gate_zoom(ax: Any, t: np.ndarray, y: np.ndarray, bounds: dict[str, float], mask: np.ndarray,
               mean: float, unit: str) -> Any:
    """An inset of ``ax`` (upper left, where the approach leaves room) zoomed on a gate band too narrow for
    the panel's scale (the depth gate's ±1 mm about the seat on a 200 mm approach): the band shaded between
    its dashed bounds, the trace and the window mean, over the last three window lengths (at least the last
    20 % of the run). A box on the main panel marks the zoomed region."""
    lo, hi = bounds["min"], bounds["max"]
    width = hi - lo
    t_win = float(t[mask][0])
    t0 = max(float(t[0]), min(float(t[-1]) - 3.0 * (float(t[-1]) - t_win), float(t[-1]) - 0.2 * (t[-1] - t[0])))
    inset = ax.inset_axes((0.05, 0.47, 0.33, 0.40))
    inset.axhspan(lo, hi, color="C2", alpha=0.12, lw=0)
    for v in (lo, hi):
        inset.axhline(v, **_GATE)
    inset.plot(t, y, **_ACTUAL)
    inset.axvspan(t_win, float(t[-1]), **_WINDOW)
    inset.plot([t_win, t[-1]], [mean, mean], color="k", lw=1.6, zorder=5)
    inset.set_xlim(t0, float(t[-1]))
    y0, y1 = lo - 0.75 * width, hi + 0.75 * width
    inset.set_ylim(y0, y1)
    inset.tick_params(labelsize=6)
    inset.set_title(f"gate band {lo:.4g} to {hi:.4g} {unit}", fontsize=7, pad=2)
    inset.set_facecolor("white")
    ax.add_patch(Rectangle((t0, y0), float(t[-1]) - t0, y1 - y0, fill=False, ec="0.35", lw=0.8, zorder=6))
    return inset


def fig_docking(run: Run) -> Figure:
    """Depth, lateral offset [mm] and tilt [deg] over time with the gate bounds (dashed; the scenario's, or
    the ones the gate derived, e.g. the depth band about the seat), the final window the gate averages over
    (grey) and the window mean with its verdict. A band too narrow for its panel (the depth gate's ±1 mm on
    the approach's ±100 mm) gets a zoomed inset."""
    from dockbench.telemetry.metrics import DEFAULT_WINDOW, final_window_mask

    ch, t = run.channels, run.t
    if not has_docking(run):
        raise DockbenchError(f"{run.path}: the docking figure needs a mating target (target type "
                             f"{run.meta.get('target_type')!r}; mating: {', '.join(MATING_TARGETS)})")
    series = docking_series(ch, run.meta)
    gates = _gates(run)
    verdicts = _gate_verdicts(run)
    fig, axes = plt.subplots(3, 1, figsize=(WIDTH, 5.6), sharex=True, layout="constrained")
    for ax, (key, metric, scale, label) in zip(axes, _DOCKING_PANELS, strict=True):
        y = scale * series[key]
        ax.plot(t, y, label=label.split(" [")[0], **_ACTUAL)
        mine = [g for g in gates if g.get("metric") == metric]
        window = next((float(g["window"]) for g in mine if g.get("window")), DEFAULT_WINDOW)
        mask = final_window_mask(t, window)
        ax.axvspan(float(t[mask][0]), float(t[-1]), **_WINDOW)
        mean = float(np.mean(y[mask]))
        ax.plot([t[mask][0], t[-1]], [mean, mean], color="k", lw=1.6, zorder=5)
        resolved = verdicts.get(metric, {})  # the bounds the gate used (the depth band is derived from the seat)
        bounds: dict[str, float] = {}
        for g in mine or [{}]:
            for bound in ("min", "max"):
                v = g.get(bound) if g.get(bound) is not None else resolved.get(bound)
                if v is not None and bound not in bounds:
                    bounds[bound] = scale * float(v)
        lo_hi = list(bounds.values())
        lo = min([float(np.nanmin(y))] + lo_hi)
        hi = max([float(np.nanmax(y))] + lo_hi)
        span = max(hi - lo, 1e-6)
        zoom = len(bounds) == 2 and bounds["max"] - bounds["min"] < 0.05 * span
        for bound, v in bounds.items():
            ax.axhline(v, **_GATE)
            if not zoom:  # a zoomed band is labelled by its inset
                ax.text(float(t[0]), v, f" gate {bound} {v:.4g}", va="bottom", ha="left", fontsize=7, color="C3")
        verdict = resolved.get("verdict", "")
        unit = label.split("[")[1].rstrip("]")
        ax.text(0.99, 0.96, f"window mean {mean:.4g} {unit}" + (f"  {verdict}" if verdict else ""),
                transform=ax.transAxes, ha="right", va="top", fontsize=8,
                color={"PASS": "C2", "FAIL": "C3"}.get(verdict, "0.2"),
                bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="0.8", alpha=0.9))
        ax.set_ylim(lo - 0.08 * span, hi + 0.25 * span)
        ax.set_ylabel(label)
        if zoom:
            _gate_zoom(ax, t, y, bounds, mask, mean, label.split("[")[1].rstrip("]"))
    axes[0].legend(handles=[Line2D([], [], **_ACTUAL), Line2D([], [], **_GATE), Line2D([], [], color="k", lw=1.6),
                            Patch(facecolor="0.5", alpha=0.25)],
                   labels=["tip in target frame", "gate bound", "window mean", "gate window"],
                   loc="lower right", ncols=2, fontsize=7)
    _finish_time_axes(axes, run)
    fig.suptitle(f"Docking: tip in the true target frame, with the gates\n{_title(run)}")
    return fig


# ---------------------------------------------------------------------------------------- controller
def controller_channels(run: Run) -> list[str]:
    """The run's ``ctrl_*`` channels in recorded order."""
    return [n for n in run.channels if n.startswith("ctrl_")]


def _groups(names: Sequence[str]) -> list[list[str]]:
    """Channels grouped by their name without the last ``_part`` when that part is a single axis or
    component letter (``f_i_x, f_i_y, f_i_z`` → one group; ``qp_status`` alone)."""
    groups: dict[str, list[str]] = {}
    for n in names:
        stem, _, last = n[len("ctrl_"):].rpartition("_")
        key = stem if stem and last in ("x", "y", "z", "vx", "vy", "vz", "wx", "wy", "wz") else n
        groups.setdefault(key, []).append(n)
    return list(groups.values())


#: why a controller diagnostic stays constant, by channel stem (formatted with the scenario's controller block)
_CONSTANT_WHY = {
    "f_i": "\n(the friction integral was off or never engaged: friction_integral {friction_integral};\n"
           "auto turns it on only for a model with joint friction)",
}


def _constant(x: np.ndarray) -> bool:
    """True when every sample equals the first (NaN-free): a flat line."""
    x = np.asarray(x, dtype=float)
    return bool(len(x)) and bool(np.all(x == x[0]))


def fig_controller(run: Run) -> Figure:
    """The controller's diagnostic channels (``ctrl_*``), grouped by common prefix, with their units. A group
    whose channels are constant over the run (the friction integral's f_i when it is off) is a sentence with
    the value instead of flat lines."""
    names = controller_channels(run)
    if not names:
        raise DockbenchError(f"{run.path}: the controller figure needs ctrl_* channels; the run has none")
    groups = _groups(names)
    ch, t = run.channels, run.t
    ncols = 2 if len(groups) > 3 else 1
    nrows = (len(groups) + ncols - 1) // ncols
    flat_groups = [all(_constant(ch[n]) for n in g) for g in groups]
    row_height = 0.8 if all(flat_groups) else 1.5  # rows of sentences need no plot height
    fig, axes = plt.subplots(nrows, ncols, figsize=(WIDTH, row_height * nrows + 1.0), sharex=True,
                             layout="constrained", squeeze=False)
    flat = axes.ravel()
    controller = ((run.meta.get("scenario") or {}).get("controller") or {}).get("type", "?")
    scenario_ctrl = (run.meta.get("scenario") or {}).get("controller") or {}
    for i, (ax, group) in enumerate(zip(flat, groups, strict=False)):
        unit = run.units.get(group[0], "") or "–"
        stem = group[0][len("ctrl_"):] if len(group) == 1 else group[0][len("ctrl_"):].rpartition("_")[0]
        ax.set_ylabel(f"{stem} [{unit}]", fontsize=7)
        if flat_groups[i]:  # flat lines say nothing: the value, in words
            values = ", ".join(sorted({f"{float(ch[n][0]):g}" for n in group}))
            why = _CONSTANT_WHY.get(stem, "")
            why = why.format(**scenario_ctrl) if why and "friction_integral" in scenario_ctrl else ""
            ax.text(0.5, 0.5, f"{', '.join(n[len('ctrl_'):] for n in group)}: {values}"
                    f"{' ' + unit if unit != '–' else ''} for the whole run{why}", transform=ax.transAxes,
                    ha="center", va="center", fontsize=8, color="0.2",
                    bbox=dict(boxstyle="round,pad=0.3", fc="white", ec="0.8"))
            ax.set_yticks([])
            shade_segments(ax, run, label=i == 0)
            ax.set_xlim(float(t[0]), float(t[-1]))
            continue
        for k, n in enumerate(group):
            ax.plot(t, ch[n], lw=1.0, color=f"C{k}", label=n[len("ctrl_"):])
        if len(group) > 1:
            ax.legend(loc="upper left", ncols=len(group), fontsize=7)
        shade_segments(ax, run, label=i == 0)
        ax.set_xlim(float(t[0]), float(t[-1]))
    for ax in flat[len(groups):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("t [s]")
    if len(groups) % ncols:
        axes[-2, -1].set_xlabel("t [s]")
        axes[-2, -1].xaxis.set_tick_params(labelbottom=True)
    note = ", all constant" if all(flat_groups) else ""
    fig.suptitle(f"Controller diagnostics ({controller}: {len(names)} ctrl_* channels{note})\n{_title(run)}")
    return fig


# ---------------------------------------------------------------------------------------- hand (G20)
HAND_CHANNELS: tuple[str, ...] = (
    "hand_goal", "hand_applied", "hand_penetration", "hand_projected", "hand_fell_back",
)
"""The G20 hand's telemetry channels (``hand.effector.HandRuntime``), all needed by :func:`fig_hand`."""

HAND_ERROR_FLOOR = 1e-6
"""Floor of max_j |applied − goal| on the log axis [rad]: an exactly reached goal plots here."""

_FINGER_COLORS = {"thumb": "C0", "index": "C1", "middle": "C2", "ring": "C3", "pinky": "C4"}


def _hand_joint_names(run: Run, n: int) -> list[str]:
    """Names of the ``n`` hand_goal columns: meta tool_summary.joint_names, else ``joint k``."""
    names = (run.meta.get("tool_summary") or {}).get("joint_names") or []
    return [str(x) for x in names] if len(names) == n else [f"joint {k + 1}" for k in range(n)]


def _hand_active_columns(names: Sequence[str]) -> list[int]:
    """Columns of the directly commanded (active) joints; the mimic joints follow their drivers.
    Taken from the packaged hand spec (the one ``hand.effector`` uses); all columns when the recorded
    names are not the spec's."""
    try:
        from dockbench.hand.spec import load_spec

        active = set(load_spec().active_names)
    except (ImportError, OSError, DockbenchError):  # the spec only selects a subset: never fatal
        return list(range(len(names)))
    cols = [k for k, n in enumerate(names) if n in active]
    return cols or list(range(len(names)))


def _shade(color: str, f: float) -> tuple[float, float, float]:
    """``color`` darkened (f < 0) or lightened (f > 0) by mixing with black / white, |f| ≤ 1."""
    c = np.asarray(to_rgb(color))
    mixed = c * (1.0 + f) if f < 0 else c + (1.0 - c) * f
    return tuple(float(x) for x in mixed)  # type: ignore[return-value]


def _joint_colors(names: Sequence[str]) -> list[tuple[float, float, float]]:
    """One hue per finger (name prefix), the joints of a finger from dark (proximal) to light."""
    fingers = [n.split("_", 1)[0] for n in names]
    order = list(dict.fromkeys(fingers))
    out = []
    for n, f in zip(names, fingers, strict=True):
        base = _FINGER_COLORS.get(f, f"C{order.index(f) % 10}")
        members = [m for m, g in zip(names, fingers, strict=True) if g == f]
        k, m = members.index(n), len(members)
        out.append(_shade(base, float(np.linspace(-0.35, 0.45, m)[k]) if m > 1 else 0.0))
    return out


def hand_command_times(run: Run) -> np.ndarray:
    """Times of the hand commands [s], from the changes of ``hand_goal``.

    Row i holds the goal the bridge step at t_{i−1} used (``HandRuntime.record``), so a goal that
    first appears in row i was commanded at t_{i−1} (the schedule time)."""
    goal = run.channels["hand_goal"]
    idx = np.flatnonzero(np.any(goal[1:] != goal[:-1], axis=tuple(range(1, goal.ndim))))
    return np.asarray(run.t[idx], dtype=float)


def _command_labels(run: Run, times: np.ndarray) -> list[str]:
    """Command names from meta tool_summary.commands matched by time ("" when none matches)."""
    cmds = (run.meta.get("tool_summary") or {}).get("commands") or []
    dt = float(np.median(np.diff(run.t))) if len(run.t) > 1 else 1e-3
    out = []
    for tc in times:
        hit = [c for c in cmds if c.get("t") is not None and abs(float(c["t"]) - tc) <= 0.5 * dt + 1e-9]
        out.append(str(hit[-1].get("command", "")) if hit else "")
    return out


def _flag_spans(t: np.ndarray, flag: np.ndarray) -> list[tuple[float, float]]:
    """[t_start, t_end + dt) of each run of consecutive flagged steps."""
    on = np.asarray(flag) > 0
    if not on.any():
        return []
    dt = float(np.median(np.diff(t))) if len(t) > 1 else 0.0
    edges = np.diff(np.concatenate([[0], on.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    return [(float(t[a]), float(t[b]) + dt) for a, b in zip(starts, ends, strict=True)]


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def _tool_param(run: Run, key: str, default: float) -> float:
    v = ((run.meta.get("scenario") or {}).get("tool") or {}).get(key)
    return float(v) if v is not None else default


def fig_hand(run: Run) -> Figure:
    """G20 hand: active-joint angles (goal dashed, applied solid) [rad], max_j |applied − goal| [rad]
    on a log axis with the preset tolerance, self-penetration [mm] with its tolerance and the
    projected / fell-back steps; hand commands (changes of ``hand_goal``) as vertical lines."""
    ch, t = run.channels, run.t
    missing = [c for c in HAND_CHANNELS if c not in ch]
    if missing:
        raise DockbenchError(f"{run.path}: the hand figure needs the channel(s) {', '.join(missing)}")
    goal = np.asarray(ch["hand_goal"], dtype=float).reshape(len(t), -1)
    applied = np.asarray(ch["hand_applied"], dtype=float).reshape(len(t), -1)
    names = _hand_joint_names(run, goal.shape[1])
    cols = _hand_active_columns(names)
    tol_rad = _tool_param(run, "preset_tolerance", 0.02)
    tol_mm = 1e3 * _tool_param(run, "penetration_tol", 5e-4)
    cmd_t = hand_command_times(run)

    fig, axes = plt.subplots(3, 1, figsize=(WIDTH, 6.6), sharex=True, layout="constrained",
                             gridspec_kw=dict(height_ratios=(3.2, 1.6, 1.6)))
    # (1) active-joint angles
    ax = axes[0]
    colors = _joint_colors([names[k] for k in cols])
    for k, c in zip(cols, colors, strict=True):
        ax.plot(t, goal[:, k], color=c, lw=0.9, ls="--")
        ax.plot(t, applied[:, k], color=c, lw=1.2, label=names[k])
    ax.set_ylabel("joint angle q [rad]")
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="0.3", lw=1.2), Line2D([], [], color="0.3", lw=0.9, ls="--"),
                Line2D([], [], **_COMMAND)]
    labels += ["applied", "goal", "hand command"]
    ax.legend(handles, labels, title=f"{len(cols)} active joints", title_fontsize=7, fontsize=6.5,
              labelspacing=0.25, **_OUTSIDE)
    q = np.concatenate([goal[:, cols], applied[:, cols]], axis=1)
    lo, hi = float(np.min(q)), float(np.max(q))
    span = max(hi - lo, 1e-3)
    ax.set_ylim(lo - 0.05 * span, hi + 0.16 * span)  # a free band on top for the command names
    for tc, lab in zip(cmd_t, _command_labels(run, cmd_t), strict=True):
        if lab:
            ax.text(tc, 0.985, f" {lab}", transform=ax.get_xaxis_transform(), ha="left", va="top",
                    fontsize=7, color="0.15", zorder=5)

    # (2) worst joint error, log scale
    ax = axes[1]
    err = np.max(np.abs(applied - goal), axis=1)
    floor = f"{HAND_ERROR_FLOOR:.0e}".replace("e-0", "e-")
    ax.plot(t, np.maximum(err, HAND_ERROR_FLOOR), color="k", lw=1.1,
            label=f"max over {goal.shape[1]} joints\n(floored at {floor} rad)")
    ax.axhline(tol_rad, label=f"preset tolerance\n{tol_rad:g} rad", **_LIMIT)
    ax.set_yscale("log")
    peak = float(np.max(err)) if err.size else 0.0
    ax.set_ylim(0.3 * HAND_ERROR_FLOOR, 3.0 * max(peak, tol_rad))
    ax.set_ylabel("max |q − q_goal| [rad]")
    ax.legend(**_OUTSIDE)

    # (3) self-penetration and the projection's steps
    ax = axes[2]
    pen = 1e3 * np.asarray(ch["hand_penetration"], dtype=float)
    n_proj = int(np.count_nonzero(np.asarray(ch["hand_projected"]) > 0))
    n_fb = int(np.count_nonzero(np.asarray(ch["hand_fell_back"]) > 0))
    for flag, color, alpha in (("hand_projected", "C4", 0.22), ("hand_fell_back", "C3", 0.45)):
        for a, b in _flag_spans(t, ch[flag]):  # an edge line keeps a one-step span visible
            ax.axvspan(a, b, facecolor=color, edgecolor=color, alpha=alpha, lw=0.6, zorder=1)
    ax.plot(t, pen, color="k", lw=1.1, zorder=4)
    ax.axhline(tol_mm, **_LIMIT)
    top = max(1.6 * tol_mm, 1.15 * float(np.max(pen)) if pen.size else 0.0)
    ax.set_ylim(-0.03 * top, top)  # a zero depth stays visible above the axis line
    ax.set_ylabel("self-penetration [mm]")
    ax.legend([Line2D([], [], color="k", lw=1.1), Line2D([], [], **_LIMIT),
               Patch(facecolor="C4", alpha=0.22), Patch(facecolor="C3", alpha=0.45)],
              ["penetration depth", f"tolerance {tol_mm:g} mm", f"projected ({_steps(n_proj)})",
               f"fell back ({_steps(n_fb)})"], **_OUTSIDE)

    for ax in axes:
        for tc in cmd_t:
            ax.axvline(tc, **_COMMAND)
    _finish_time_axes(axes, run)
    fig.suptitle(f"G20 hand: joint tracking and self-collision\n{_title(run)}")
    return fig


def fig_orbit(run: Run) -> Figure:
    """The floating bodies (sim/orbit.py, docs/metrics.md "Orbit"): the base's attitude disturbance and
    drift, the target's speed and rate, the relative change of the total momentum and the centre of mass's
    distance from its straight line (log scale; isolated systems only), each with its gate bound."""
    from dockbench.telemetry.metrics import _angle_from_first, is_isolated

    ch, t, meta = run.channels, run.t, run.meta
    gates = {g.get("metric"): g for g in _gates(run)}
    panels = [p for p, key in (("base", "base_quat"), ("target", "target_vel")) if key in ch]
    if is_isolated(meta):
        panels.append("momentum")
    if not panels:
        raise DockbenchError(f"{run.path}: the orbit figure needs a free-floating base or a moving target")
    fig, axes = plt.subplots(len(panels), 1, figsize=(WIDTH, 1.9 * len(panels) + 0.8), sharex=True,
                             layout="constrained", squeeze=False)
    axes = axes[:, 0]
    contact = np.asarray(ch.get("contact_count_peak", ch["contact_count"])) > 0

    def gate_line(ax: Any, metric: str, scale: float = 1.0) -> None:
        g = gates.get(metric)
        if g is not None and g.get("max") is not None:
            ax.axhline(scale * float(g["max"]), **_GATE)

    for ax, panel in zip(axes, panels, strict=True):
        for t0, t1 in _flag_spans(t, contact):
            ax.axvspan(t0, t1, color="C1", alpha=0.10, lw=0, zorder=0)
        if panel == "base":
            ax.plot(t, np.degrees(_angle_from_first(ch["base_quat"])), **_ACTUAL)
            gate_line(ax, "orbit.base_attitude_peak_deg")
            ax.set_ylabel("base attitude change [deg]")
            ax2 = ax.twinx()
            ax2.plot(t, 1e3 * np.linalg.norm(ch["base_pos"] - ch["base_pos"][0], axis=1), color="C2", lw=1.0, ls="--")
            ax2.set_ylabel("base drift [mm]", color="C2")
            ax2.grid(False)
        elif panel == "target":
            v = ch["target_vel"]
            ax.plot(t, 1e3 * np.linalg.norm(v[:, :3], axis=1), **_ACTUAL)
            gate_line(ax, "orbit.target_speed_after_seating", 1e3)
            ax.set_ylabel("target speed [mm/s]")
            ax2 = ax.twinx()
            ax2.plot(t, np.degrees(np.linalg.norm(v[:, 3:], axis=1)), color="C2", lw=1.0, ls="--")
            ax2.set_ylabel("target rate [deg/s]", color="C2")
            ax2.grid(False)
        else:
            P, S = ch["momentum"], np.max(ch["momentum_abs"], axis=0)
            tm = np.asarray(ch["momentum_t"], dtype=float)
            ax.semilogy(tm, _positive_or_nan(np.linalg.norm(P[:, :3] - P[0, :3], axis=1) / max(S[0], 1e-300)),
                        label="‖P − P(0)‖ / S_P", color="C0", lw=1.0)
            ax.semilogy(tm, _positive_or_nan(np.linalg.norm(P[:, 3:] - P[0, 3:], axis=1) / max(S[1], 1e-300)),
                        label="‖L − L(0)‖ / S_L", color="C4", lw=1.0)
            gate_line(ax, "orbit.momentum_drift_rel")
            mass = meta.get("orbit_mass")
            if mass:
                C = ch["system_com"]
                dev = np.linalg.norm(C - (C[0] + np.outer(tm - tm[0], P[0, :3] / float(mass))), axis=1)
                ax.semilogy(tm, _positive_or_nan(dev), label="COM off its line [m]", color="C2", lw=1.0)
            ax.set_ylabel("momentum change")
            ax.legend(loc="upper left", fontsize=7, ncols=3)
    _finish_time_axes(axes, run)
    fig.suptitle(f"In orbit: base, target and momentum (tool contact shaded)\n{_title(run)}")
    return fig


_BUILDERS = {
    "tracking": fig_tracking,
    "tracking_error": fig_tracking_error,
    "orientation_error": fig_orientation_error,
    "contact_force": fig_contact_force,
    "joint_torques": fig_joint_torques,
    "path": fig_path,
    "docking": fig_docking,
    "controller": fig_controller,
    "hand": fig_hand,
    "orbit": fig_orbit,
}


def _applies(run: Run, name: str) -> bool:
    if name == "docking":
        return has_docking(run)
    if name == "controller":
        return bool(controller_channels(run))
    return REQUIRES.get(name) is None or REQUIRES[name] in run.channels


def figures_for(run: Run) -> tuple[str, ...]:
    """The figures of :data:`FIGURES` that ``run`` has the data for (:data:`REQUIRES`, a mating target
    for ``docking``, ``ctrl_*`` channels for ``controller``)."""
    return tuple(n for n in FIGURES if _applies(run, n))


def _require_steps(runs: Iterable[Run]) -> None:
    for r in runs:
        if len(r.t) == 0:
            raise DockbenchError(f"{r.path}: the run has no recorded steps; nothing to plot")


def _build(names: Iterable[str], builders: dict[str, Callable[[Any], Figure]], known: Sequence[str],
           kind: str, arg: Any, check: Callable[[str], None] | None = None) -> dict[str, Figure]:
    """``{name: builders[name](arg)}`` in the figure style; closes what it built if one build raises."""
    out: dict[str, Figure] = {}
    try:
        with plt.rc_context(STYLE):
            for name in names:
                if name not in builders:
                    raise DockbenchError(f"unknown {kind} {name!r}; known: {', '.join(known)}")
                if check is not None:
                    check(name)
                out[name] = builders[name](arg)
    except BaseException:
        for fig in out.values():
            plt.close(fig)
        raise
    return out


def make_figures(run: Run, names: Iterable[str] | None = None) -> dict[str, Figure]:
    """Build the figures ``names`` (default: :func:`figures_for` the run) for a loaded run (caller
    closes them).

    Raises:
        DockbenchError: no recorded steps, an unknown figure, or one whose channel the run lacks.
    """
    _require_steps((run,))

    def has_channel(name: str) -> None:  # docking / controller raise their own message
        need = REQUIRES.get(name)
        if need is not None and need not in run.channels:
            raise DockbenchError(f"{run.path}: figure {name!r} needs the channel {need!r}")

    names = figures_for(run) if names is None else tuple(names)
    return _build(names, _BUILDERS, FIGURES, "figure", run, has_channel)


def _atomic_savefig(fig: Figure, path: Path, fmt: str) -> None:
    with atomic_path(path, f".{fmt}.tmp") as (fd, tmp):
        os.close(fd)
        fig.savefig(tmp, format=fmt)


def _save(fig: Figure, name: str, dest: Path, fmts: Sequence[str], paths: list[Path]) -> None:
    """Write ``fig`` as ``dest/name.fmt`` for every format, appending the paths."""
    for fmt in fmts:
        path = dest / f"{name}.{fmt}"
        _atomic_savefig(fig, path, fmt)
        paths.append(path)


def parse_formats(formats: str | Iterable[str]) -> tuple[str, ...]:
    """``"png,pdf"`` or ``("png", "pdf")`` → validated tuple (lower case, no dots, duplicates dropped)."""
    items = formats.split(",") if isinstance(formats, str) else list(formats)
    out: list[str] = []
    for f in items:
        f = f.strip().lower().lstrip(".")
        if not f:
            continue
        if f not in FORMATS:
            raise DockbenchError(f"unknown figure format {f!r}; known: {', '.join(FORMATS)}")
        if f not in out:
            out.append(f)
    if not out:
        raise DockbenchError(f"no figure format given; known: {', '.join(FORMATS)}")
    return tuple(out)


def plot_run(
    run_dir: str | Path, formats: str | Iterable[str] = ("png",), out_dir: str | Path | None = None
) -> list[Path]:
    """Write every figure of :data:`FIGURES` the run has channels for (:func:`figures_for`) in every
    format into the run folder.

    Args:
        run_dir: the run folder (read with :meth:`Run.load`).
        formats: e.g. ``("png", "pdf")`` or ``"png,pdf"``.
        out_dir: where to write; default the run folder itself.

    Returns:
        The written files, figure-major (``tracking.png, tracking.pdf, tracking_error.png, ...``).
    """
    fmts = parse_formats(formats)
    run = Run.load(run_dir)
    _require_steps((run,))
    dest = Path(out_dir) if out_dir is not None else run.path
    dest.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    names = figures_for(run)
    with plt.rc_context(STYLE), Progress("figures", len(names)) as bar:
        for name in names:
            bar.step(name)
            fig = _BUILDERS[name](run)  # one at a time: a long run's figures stay out of memory together
            try:
                _save(fig, name, dest, fmts, paths)
            finally:
                plt.close(fig)
    return paths


# ---------------------------------------------------------------------------------------- several runs
def run_label(run: Run) -> str:
    """``scenario (controller)`` — the legend entry of a run in the overlay figures."""
    controller = ((run.meta.get("scenario") or {}).get("controller") or {}).get("type", "?")
    return f"{run.name} ({controller})"


def _labels(runs: Sequence[Run]) -> list[str]:
    labels = [run_label(r) for r in runs]
    if len(set(labels)) < len(labels):  # the same scenario twice: add the folder name
        labels = [f"{lab} {r.path.name}" for lab, r in zip(labels, runs, strict=True)]
    if len(set(labels)) < len(labels):  # still equal: number them in the given order
        labels = [f"{lab} #{k + 1}" for k, lab in enumerate(labels)]
    return labels


def _compare_title(runs: Sequence[Run]) -> str:
    return f"{len(runs)} runs: " + ", ".join(_labels(runs))


def fig_compare_contact_force(runs: Sequence[Run]) -> Figure:
    """‖f‖ and axial force of the contact truth [N] of every run on shared axes."""
    fig, axes = plt.subplots(2, 1, figsize=(WIDTH, 4.4), sharex=True, layout="constrained")
    for k, (r, lab) in enumerate(zip(runs, _labels(runs), strict=True)):
        tr = r.channels["wrench_truth_world"]
        axes[0].plot(r.t, np.linalg.norm(tr[:, :3], axis=1), color=f"C{k}", lw=1.1, label=lab)
        axes[1].plot(r.t, axial_force(tr, r.meta), color=f"C{k}", lw=1.1)
    axes[0].set_ylabel("‖f_ext‖ truth [N]")
    axes[1].set_ylabel(f"axial f_ext truth ({_axis_name(runs[0])}) [N]")
    axes[1].axhline(0.0, color="0.5", lw=0.6)
    axes[0].legend(loc="upper left", fontsize=7)
    axes[-1].set_xlabel("t [s]")
    axes[0].set_xlim(0.0, max(float(r.t[-1]) for r in runs))
    fig.suptitle(f"Contact force (contact truth), world axes\n{_compare_title(runs)}")
    return fig


def fig_compare_docking(runs: Sequence[Run]) -> Figure:
    """Depth, lateral [mm], tilt [deg] of every docking run, with the first run's gate bounds."""
    docking = [r for r in runs if has_docking(r)]
    if not docking:
        raise DockbenchError("compare_docking needs at least one run with a mating target")
    fig, axes = plt.subplots(3, 1, figsize=(WIDTH, 5.4), sharex=True, layout="constrained")
    labels = dict(zip([id(r) for r in runs], _labels(runs), strict=True))
    for k, r in enumerate(runs):
        if not has_docking(r):
            continue
        series = docking_series(r.channels, r.meta)
        for ax, (key, _, scale, _) in zip(axes, _DOCKING_PANELS, strict=True):
            ax.plot(r.t, scale * series[key], color=f"C{k}", lw=1.1, label=labels[id(r)])
    for ax, (_, metric, scale, label) in zip(axes, _DOCKING_PANELS, strict=True):
        for g in _gates(docking[0]):
            if g.get("metric") == metric:
                for bound in ("min", "max"):
                    if g.get(bound) is not None:
                        ax.axhline(scale * float(g[bound]), **_GATE)
        ax.set_ylabel(label)
    axes[0].legend(loc="upper left", fontsize=7)
    axes[-1].set_xlabel("t [s]")
    axes[0].set_xlim(0.0, max(float(r.t[-1]) for r in runs))
    fig.suptitle(f"Docking (dashed: gate bounds of {run_label(docking[0])})\n{_compare_title(runs)}")
    return fig


def fig_compare_tracking(runs: Sequence[Run]) -> Figure:
    """‖p − p_d‖ [mm] of every run, log scale."""
    fig, ax = plt.subplots(1, 1, figsize=(WIDTH, 3.0), layout="constrained")
    for k, (r, lab) in enumerate(zip(runs, _labels(runs), strict=True)):
        ax.plot(r.t, _positive_or_nan(1e3 * position_error(r.channels)), color=f"C{k}", lw=1.1, label=lab)
    ax.set_yscale("log")
    ax.set_ylabel("position error ‖p − p_d‖ [mm]")
    ax.set_xlabel("t [s]")
    ax.legend(loc="lower right", fontsize=7)
    ax.set_xlim(0.0, max(float(r.t[-1]) for r in runs))
    fig.suptitle(f"EE position tracking error\n{_compare_title(runs)}")
    return fig


_COMPARE_BUILDERS = {
    "compare_contact_force": fig_compare_contact_force,
    "compare_docking": fig_compare_docking,
    "compare_tracking": fig_compare_tracking,
}


def compare_figures_for(runs: Sequence[Run]) -> tuple[str, ...]:
    """The overlay figures that apply (``compare_docking`` needs one docking run)."""
    return tuple(n for n in COMPARE_FIGURES if n != "compare_docking" or any(has_docking(r) for r in runs))


def make_compare_figures(runs: Sequence[Run], names: Iterable[str] | None = None) -> dict[str, Figure]:
    """Build the overlay figures of several loaded runs (caller closes them)."""
    _require_steps(runs)
    names = compare_figures_for(runs) if names is None else tuple(names)
    return _build(names, _COMPARE_BUILDERS, COMPARE_FIGURES, "overlay figure", runs)


def plot_compare(run_dirs: Sequence[str | Path], out_dir: str | Path,
                 formats: str | Iterable[str] = ("png",)) -> list[Path]:
    """Overlay figures of several run folders, written into ``out_dir``; returns the paths."""
    if len(run_dirs) < 2:
        raise DockbenchError(f"overlaying runs needs at least two run folders, got {len(run_dirs)}")
    fmts = parse_formats(formats)
    runs = [Run.load(d) for d in run_dirs]
    dest = Path(out_dir)
    dest.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    figs = make_compare_figures(runs)
    try:
        with Progress("overlay figures", len(figs)) as bar:
            for name, fig in figs.items():
                bar.step(name)
                _save(fig, name, dest, fmts, paths)
    finally:
        for fig in figs.values():
            plt.close(fig)
    return paths
