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
========================  ==================================================================
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless; must precede pyplot

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from sim.errors import DockbenchError  # noqa: E402
from telemetry.metrics import (  # noqa: E402
    axial_force,
    is_mating_target,
    orientation_error_deg,
    position_error,
)
from telemetry.run import Run  # noqa: E402

#: Figure names, in the order :func:`plot_run` writes them.
FIGURES: tuple[str, ...] = (
    "tracking", "tracking_error", "orientation_error", "contact_force", "joint_torques", "path",
)

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


# ------------------------------------------------------------------------------------------- helpers
def _title(run: Run) -> str:
    sc = run.meta.get("scenario") or {}
    planner = (sc.get("planner") or {}).get("type", "?")
    controller = (sc.get("controller") or {}).get("type", "?")
    return f"{run.name} — {run.meta.get('robot', '?')}, planner {planner}, controller {controller}"


def shade_segments(ax: Any, run: Run, label: bool = False) -> int:
    """Shade the planner segments of ``run`` on a time axis (alternating colours) and mark the end of
    the planner with a dotted line when the run goes on after it. Returns the number of spans drawn."""
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
        ax.axvline(run.planner_duration, color="0.4", lw=0.8, ls=":", zorder=1)
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


_BUILDERS = {
    "tracking": fig_tracking,
    "tracking_error": fig_tracking_error,
    "orientation_error": fig_orientation_error,
    "contact_force": fig_contact_force,
    "joint_torques": fig_joint_torques,
    "path": fig_path,
}


def make_figures(run: Run, names: Iterable[str] = FIGURES) -> dict[str, Figure]:
    """Build the figures ``names`` (default all of :data:`FIGURES`) for a loaded run (caller closes)."""
    if len(run.t) == 0:
        raise DockbenchError(f"{run.path}: the run has no recorded steps; nothing to plot")
    out = {}
    with plt.rc_context(STYLE):
        for name in names:
            if name not in _BUILDERS:
                raise DockbenchError(f"unknown figure {name!r}; known: {', '.join(FIGURES)}")
            out[name] = _BUILDERS[name](run)
    return out


def _atomic_savefig(fig: Figure, path: Path, fmt: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=f".{fmt}.tmp")
    os.close(fd)
    try:
        fig.savefig(tmp, format=fmt)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
    """Write every figure of :data:`FIGURES` in every format into the run folder.

    Args:
        run_dir: the run folder (read with :meth:`Run.load`).
        formats: e.g. ``("png", "pdf")`` or ``"png,pdf"``.
        out_dir: where to write; default the run folder itself.

    Returns:
        The written files, figure-major (``tracking.png, tracking.pdf, tracking_error.png, ...``).
    """
    fmts = parse_formats(formats)
    run = Run.load(run_dir)
    dest = Path(out_dir) if out_dir is not None else run.path
    dest.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    with plt.rc_context(STYLE):
        for name in FIGURES:
            fig = _BUILDERS[name](run) if len(run.t) else None
            if fig is None:
                raise DockbenchError(f"{run.path}: the run has no recorded steps; nothing to plot")
            try:
                for fmt in fmts:
                    path = dest / f"{name}.{fmt}"
                    _atomic_savefig(fig, path, fmt)
                    paths.append(path)
            finally:
                plt.close(fig)
    return paths
