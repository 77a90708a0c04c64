"""Figures of a run folder: every figure in every format is written, readable, labelled with units;
the G20 hand figure only for runs with the hand's channels."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from dockbench.experiments.plot_telemetry import main as plot_cli
from dockbench.experiments.plot_telemetry import plot_run
from dockbench.sim.errors import DockbenchError
from dockbench.telemetry.plots import (
    FIGURES,
    HAND_ERROR_FLOOR,
    figures_for,
    hand_command_times,
    make_figures,
    parse_formats,
    shade_segments,
)
from dockbench.telemetry.run import Run, write_json, write_manifest

from tests.test_metrics import DT, SEGMENTS, N, write_synthetic_run

#: the figures of the synthetic run (a drogue target, no controller diagnostics, no hand channels)
BASE_FIGURES = tuple(n for n in FIGURES if n not in ("hand", "controller", "orbit"))

MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF", "svg": b"<?xml"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_run(tmp_path_factory.mktemp("plots") / "run")


def test_plot_run_writes_every_figure_in_every_format(run_dir: Path) -> None:
    files = plot_run(run_dir, formats=("png", "pdf"))
    assert len(files) == 2 * len(BASE_FIGURES) == 14
    assert [f.name for f in files] == [f"{n}.{ext}" for n in BASE_FIGURES for ext in ("png", "pdf")]
    for f in files:
        assert f.parent == run_dir and f.is_file()
        data = f.read_bytes()
        assert len(data) > 5_000, f"{f.name}: only {len(data)} bytes"
        assert data.startswith(MAGIC[f.suffix[1:]]), f.name
    assert not list(run_dir.glob("*.tmp"))  # atomic writes leave no temp files


def _assert_units(name: str, fig: plt.Figure) -> None:
    labelled = 0
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        labels = [ax.get_xlabel(), ax.get_ylabel()]
        labels += [ax.get_zlabel()] if hasattr(ax, "get_zlabel") else []
        for lab in labels:
            if lab:
                labelled += 1
                assert "[" in lab and lab.rstrip().endswith("]"), f"{name}: label {lab!r} has no unit"
    assert labelled >= 2, name


def test_every_axis_label_carries_a_unit(run_dir: Path) -> None:
    figs = make_figures(Run.load(run_dir))
    try:
        assert list(figs) == list(BASE_FIGURES)
        for name, fig in figs.items():
            _assert_units(name, fig)
    finally:
        for fig in figs.values():
            plt.close(fig)


def test_segments_are_shaded_and_named(run_dir: Path) -> None:
    run = Run.load(run_dir)
    fig, ax = plt.subplots()
    try:
        assert shade_segments(ax, run, label=True) == len(SEGMENTS)
        # the segments' names, then the label of the planner-end marker (the run goes on after the planner)
        assert [t.get_text() for t in ax.texts] == [s["name"] for s in SEGMENTS] + [" planner end"]
        assert len(ax.patches) == len(SEGMENTS)
        assert len(ax.lines) == 1  # the planner-end marker
    finally:
        plt.close(fig)
    figs = make_figures(run, ["tracking"])
    try:
        top = figs["tracking"].axes[0]
        assert len(top.patches) == len(SEGMENTS)
    finally:
        plt.close(figs["tracking"])


def test_cli(run_dir: Path, capsys: pytest.CaptureFixture) -> None:
    assert plot_cli([str(run_dir), "--format", "svg"]) == 0
    out = capsys.readouterr().out
    assert f"{len(BASE_FIGURES)} figures" in out
    assert all((run_dir / f"{n}.svg").is_file() for n in BASE_FIGURES)
    assert not (run_dir / "hand.svg").exists()
    assert plot_cli([str(run_dir), "--format", "bmp"]) == 1
    assert "unknown figure format 'bmp'" in capsys.readouterr().err
    assert plot_cli([str(run_dir.parent / "nope")]) == 1


def test_parse_formats() -> None:
    assert parse_formats("png, PDF,.svg,png") == ("png", "pdf", "svg")
    with pytest.raises(DockbenchError, match="known: png, pdf, svg"):
        parse_formats("jpg")


def test_empty_run_raises(tmp_path: Path) -> None:
    from dockbench.telemetry.log import atomic_save_npz

    from tests.test_metrics import synthetic

    ch, _ = synthetic()
    folder = write_synthetic_run(tmp_path / "empty")
    atomic_save_npz(folder / "telemetry.npz", {k: v[:0] for k, v in ch.items()})
    with pytest.raises(DockbenchError, match="no recorded steps"):
        plot_run(folder)


# ------------------------------------------------------------------------------- G20 hand figure
HAND_JOINTS = (
    "thumb_cmc_pitch", "thumb_cmc_roll", "thumb_cmc_yaw", "thumb_mcp", "thumb_ip",
    "index_mcp_pitch", "index_mcp_roll", "index_pip", "index_dip",
    "middle_mcp_pitch", "middle_mcp_roll", "middle_pip", "middle_dip",
    "ring_mcp_pitch", "ring_mcp_roll", "ring_pip", "ring_dip",
    "pinky_mcp_pitch", "pinky_mcp_roll", "pinky_pip", "pinky_dip",
)  # spec table order: 16 active + 5 mimic (thumb_ip, *_dip)
HAND_COMMANDS = (1.0, 2.5)  # [s] close, then open
PROJECTED = ((1100, 1150), (1400, 1400))  # step ranges (inclusive): two spans, one a single step
FELL_BACK = (1130, 1130)


def _write_hand_channels(folder: Path) -> Path:
    """Add synthetic G20 hand channels (two commands, slewed at 5 rad/s, a penetration bump with
    projected and fell-back steps) and the tool summary to a synthetic run folder."""
    from dockbench.telemetry.log import atomic_save_npz

    run = Run.load(folder)
    t = run.t
    goal = np.zeros((N, len(HAND_JOINTS)))
    goal[int(round(HAND_COMMANDS[0] / DT)) + 1:int(round(HAND_COMMANDS[1] / DT)) + 1] = 1.0
    applied = np.zeros_like(goal)
    for i in range(1, N):  # the pose follows the goal of its row at 5 rad/s
        applied[i] = applied[i - 1] + np.clip(goal[i] - applied[i - 1], -5.0 * DT, 5.0 * DT)
    pen = np.zeros(N)
    pen[1100:1151] = 3e-4 * np.sin(np.linspace(0.0, np.pi, 51))
    projected, fell_back = np.zeros(N), np.zeros(N)
    for a, b in PROJECTED:
        projected[a:b + 1] = 1.0
    fell_back[FELL_BACK[0]:FELL_BACK[1] + 1] = 1.0
    ch = dict(run.channels, hand_goal=goal, hand_applied=applied, hand_penetration=pen,
              hand_projected=projected, hand_fell_back=fell_back)
    atomic_save_npz(folder / "telemetry.npz", ch)
    meta = dict(run.meta, tool_summary={
        "tool": "g20_left", "joint_names": list(HAND_JOINTS),
        "commands": [{"t": HAND_COMMANDS[0], "command": "half_fist"}, {"t": HAND_COMMANDS[1], "command": "open"}],
    })
    write_json(folder / "meta.json", meta)
    write_manifest(folder)  # the files changed: a new completeness marker
    assert t[-1] > HAND_COMMANDS[-1]
    return folder


@pytest.fixture(scope="module")
def hand_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_hand_channels(write_synthetic_run(tmp_path_factory.mktemp("plots_hand") / "run"))


def test_hand_figure_content(hand_dir: Path) -> None:
    run = Run.load(hand_dir)
    # a synthetic hand run: drogue target, no controller channels
    assert figures_for(run) == (*BASE_FIGURES, "hand") and FIGURES[-1] == "hand"
    np.testing.assert_allclose(hand_command_times(run), HAND_COMMANDS, atol=1e-9)  # schedule times
    fig = make_figures(run, ["hand"])["hand"]
    try:
        _assert_units("hand", fig)
        angles, error, penetration = (ax for ax in fig.axes if ax.get_visible())
        # (1) goal dashed + applied solid for each of the 16 active joints, labelled by joint name
        data_lines = [ln for ln in angles.lines if len(ln.get_xdata()) == N]
        assert len(data_lines) == 2 * 16
        legend = [txt.get_text() for txt in angles.get_legend().get_texts()]
        assert "thumb_cmc_pitch" in legend and "pinky_pip" in legend and "index_dip" not in legend
        names = [txt.get_text().strip() for txt in angles.texts]
        assert [n for n in names if n not in {s["name"] for s in SEGMENTS} | {"planner end"}] == ["half_fist", "open"]
        # command lines (dash-dot, at the command times) on every row; segments shaded on every row
        for ax in (angles, error, penetration):
            cmd = [ln for ln in ax.lines if ln.get_linestyle() == "-." and len(ln.get_xdata()) == 2]
            assert sorted(float(ln.get_xdata()[0]) for ln in cmd) == pytest.approx(HAND_COMMANDS)
        # (2) log axis, the error floored (never 0) and the 0.02 rad line
        assert error.get_yscale() == "log"
        err_line = next(ln for ln in error.lines if len(ln.get_xdata()) == N)
        assert np.min(err_line.get_ydata()) == HAND_ERROR_FLOOR  # exact: the floor is a max() with it
        assert np.max(err_line.get_ydata()) == pytest.approx(1.0 - 5.0 * DT)  # one slew step in
        assert any(list(ln.get_ydata()) == [0.02, 0.02] for ln in error.lines)  # exact: literals
        # (3) penetration in mm with the 0.5 mm line; 2 projected + 1 fell-back spans + 2 segments
        pen_line = next(ln for ln in penetration.lines if len(ln.get_xdata()) == N)
        assert np.max(pen_line.get_ydata()) == pytest.approx(0.3)
        assert any(list(ln.get_ydata()) == [0.5, 0.5] for ln in penetration.lines)  # exact: literals
        assert len(penetration.patches) == len(PROJECTED) + 1 + len(SEGMENTS)
        legend = [txt.get_text() for txt in penetration.get_legend().get_texts()]
        assert "projected (52 steps)" in legend and "fell back (1 step)" in legend
    finally:
        plt.close(fig)


def test_hand_figure_only_for_hand_runs(tmp_path: Path, run_dir: Path) -> None:
    """Short real runs: the G20 run writes the extra hand figure, the probe run does not."""
    from dockbench.sim.loop import run as run_scenario
    from dockbench.sim.scenario import scenario_from_dict

    from tests.helpers import scenario_dict

    hand = scenario_dict("fr3_g20_tracking")
    hand["tool"]["schedule"] = [{"t": 0.1, "preset": "half_fist"}]
    hand_run = run_scenario(scenario_from_dict(hand), out_root=tmp_path, duration=0.5).run_dir
    probe_run = run_scenario(scenario_from_dict(scenario_dict("fr3_tracking")), out_root=tmp_path,
                             duration=0.3).run_dir
    assert hand_run is not None and probe_run is not None

    files = plot_run(hand_run)  # a tracking run (no target: no docking figure), with controller channels
    assert [f.name for f in files] == [f"{n}.png" for n in FIGURES if n not in ("docking", "orbit")]
    assert (hand_run / "hand.png").stat().st_size > 5_000
    np.testing.assert_allclose(hand_command_times(Run.load(hand_run)), [0.1], atol=1e-9)

    files = plot_run(probe_run)
    assert [f.name for f in files] == [f"{n}.png" for n in FIGURES if n not in ("docking", "hand", "orbit")]
    assert not (probe_run / "hand.png").exists()
    with pytest.raises(DockbenchError, match="needs the channel 'hand_goal'"):
        make_figures(Run.load(run_dir), ["hand"])


# ----------------------------------------------------------------- tables (experiments/compare.py)
def test_compare_tables(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import csv
    import shutil

    from dockbench.experiments.compare import find_run_dirs, main, markdown_table, row_from_run
    from dockbench.telemetry.metrics import compute_metrics

    from tests.test_metrics import synthetic

    root = tmp_path / "runs"
    older = write_synthetic_run(root / "synthetic" / "20260101T000000_000000Z")
    newer = root / "synthetic" / "20260102T000000_000000Z"
    shutil.copytree(older, newer)
    assert find_run_dirs([root]) == [older, newer]
    assert find_run_dirs([root], latest=True) == [newer]
    with pytest.raises(DockbenchError, match="no run folder"):
        (tmp_path / "empty_dir").mkdir()
        find_run_dirs([tmp_path / "empty_dir"])

    row = row_from_run(newer)
    assert (row.scenario, row.robot, row.planner, row.controller, row.verdict) == (
        "synthetic", "synthetic", "p", "c", "PASS")
    ch, meta = synthetic()
    expected = compute_metrics(ch, meta)
    md = markdown_table([row], ["docking.depth", "contact.peak_force_truth", "contact.peak_wrench_norm_ft"])
    header = "| docking.depth [mm] | contact.peak_force_truth [N] | contact.peak_wrench_norm_ft [N\\|N·m] |"
    assert header in md
    assert f"| {1e3 * expected['docking.depth']:.4g} | {expected['contact.peak_force_truth']:.4g} |" in md

    md_path, csv_path = tmp_path / "t.md", tmp_path / "t.csv"
    assert main([str(root), "--latest", "--md", str(md_path), "--csv", str(csv_path)]) == 0
    page = md_path.read_text()
    assert "dockbench compare runs" not in page  # the real invocation is recorded
    assert f"--latest --md {md_path}" in page and "| synthetic | synthetic | p | c | PASS |" in page
    with csv_path.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 1
    # exact: full precision, SI (repr → float round-trips every float64)
    assert float(rows[0]["docking.depth [m]"]) == expected["docking.depth"]
    assert main([str(root), "--metrics", "docking.dept"]) == 1
    assert "unknown metric(s) docking.dept" in capsys.readouterr().err


# ------------------------------------------------------------------------------- docking, controller
def _docking_run(tmp_path: Path, depth_min: float, verdict: str = "PASS", ctrl: bool = True) -> Path:
    """The synthetic run with docking gates in its scenario (and controller channels with units)."""
    import json

    from dockbench.telemetry.log import atomic_save_npz

    folder = write_synthetic_run(tmp_path / f"dock_{depth_min}")
    meta = json.loads((folder / "meta.json").read_text())
    meta["scenario"]["gates"] = [{"metric": "docking.depth", "min": depth_min},
                                 {"metric": "docking.lateral", "max": 0.002, "window": 0.5},
                                 {"metric": "docking.tilt_deg", "max": 1.0}]
    if ctrl:
        with np.load(folder / "telemetry.npz") as z:
            ch = {k: z[k] for k in z.files}
        n = len(ch["t"])
        ch.update(ctrl_f_i_x=np.linspace(0, 1, n), ctrl_f_i_y=np.zeros(n), ctrl_f_i_z=-np.ones(n),
                  ctrl_frozen=(np.arange(n) > n // 2).astype(float))
        atomic_save_npz(folder / "telemetry.npz", ch)
        meta["channel_units"] = {"ctrl_f_i_x": "N", "ctrl_f_i_y": "N", "ctrl_f_i_z": "N", "ctrl_frozen": ""}
    write_json(folder / "meta.json", meta)
    summary = json.loads((folder / "summary.json").read_text())
    summary["gates"] = [{"metric": "docking.depth", "verdict": verdict, "value": 0.0, "min": depth_min, "max": None}]
    write_json(folder / "summary.json", summary)
    return folder


def test_docking_series_window_means_are_the_docking_metrics(run_dir: Path) -> None:
    """The figure's per-step depth / lateral / tilt use the metrics' formulas on every row; their
    final-window means are the gated metrics (the same values averaged: equal to ≤ n·ε relative,
    n = 1000 window samples, so rtol 1e-12)."""
    from dockbench.telemetry.metrics import compute_metrics, final_window_mask
    from dockbench.telemetry.plots import docking_series

    run = Run.load(run_dir)
    m = compute_metrics(run.channels, run.meta)
    series = docking_series(run.channels, run.meta)
    mask = final_window_mask(run.t, 1.0)
    for key in ("depth", "lateral", "tilt_deg"):
        np.testing.assert_allclose(np.mean(series[key][mask]), m[f"docking.{key}"], rtol=1e-12, atol=1e-15)


def test_docking_figure_draws_the_gates_and_the_verdict(tmp_path: Path) -> None:
    run = Run.load(_docking_run(tmp_path, depth_min=0.07, verdict="FAIL"))
    assert "docking" in figures_for(run) and "controller" in figures_for(run)
    fig = make_figures(run, ["docking"])["docking"]
    try:
        depth_ax, lat_ax, tilt_ax = fig.axes[:3]
        _assert_units("docking", fig)

        def hlines(ax):
            return sorted({round(float(ln.get_ydata()[0]), 9) for ln in ax.lines
                           if len(set(np.asarray(ln.get_ydata(), dtype=float))) == 1 and ln.get_linestyle() == "--"})

        assert hlines(depth_ax) == [70.0]  # mm
        assert hlines(lat_ax) == [2.0]
        assert hlines(tilt_ax) == [1.0]
        texts = [t.get_text() for t in depth_ax.texts]
        assert any("window mean" in t and "FAIL" in t for t in texts), texts
        # the lateral gate's own 0.5 s window is the shaded span
        span = [p for p in lat_ax.patches if p.get_facecolor()[0] == pytest.approx(0.5)]
        assert span, "no window span"
        x0 = span[-1].get_x()
        assert float(run.t[-1]) - x0 == pytest.approx(0.5, abs=2 * DT)
    finally:
        plt.close(fig)


def test_controller_figure_groups_channels_with_units(tmp_path: Path) -> None:
    run = Run.load(_docking_run(tmp_path, depth_min=0.05))
    fig = make_figures(run, ["controller"])["controller"]
    try:
        visible = [ax for ax in fig.axes if ax.get_visible()]
        assert [ax.get_ylabel() for ax in visible] == ["f_i [N]", "frozen [–]"]
        data = [[ln for ln in ax.lines if not ln.get_label().startswith("_")] for ax in visible]  # not the markers
        assert [len(x) for x in data] == [3, 1]
        assert [ln.get_label() for ln in data[0]] == ["f_i_x", "f_i_y", "f_i_z"]
        _assert_units("controller", fig)
    finally:
        plt.close(fig)


def test_figures_that_do_not_apply_say_why(run_dir: Path, tmp_path: Path) -> None:
    run = Run.load(run_dir)
    with pytest.raises(DockbenchError, match="ctrl_\\* channels; the run has none"):
        make_figures(run, ["controller"])
    plate = Run.load(write_synthetic_run(tmp_path / "plate", target_type="plate"))
    assert "docking" not in figures_for(plate)
    with pytest.raises(DockbenchError, match="needs a mating target"):
        make_figures(plate, ["docking"])


def test_overlay_of_several_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from dockbench.telemetry.plots import COMPARE_FIGURES, make_compare_figures, plot_compare

    a = _docking_run(tmp_path / "a", depth_min=0.07)
    b = _docking_run(tmp_path / "b", depth_min=0.07)
    runs = [Run.load(a), Run.load(b)]
    figs = make_compare_figures(runs)
    try:
        assert list(figs) == list(COMPARE_FIGURES)
        force_ax = figs["compare_contact_force"].axes[0]
        labels = [ln.get_label() for ln in force_ax.lines]
        assert len(labels) == 2 and len(set(labels)) == 2  # the same scenario twice: told apart
        dock = figs["compare_docking"].axes[0]
        assert len([ln for ln in dock.lines if ln.get_linestyle() == "-"]) == 2
        for name, fig in figs.items():
            _assert_units(name, fig)
    finally:
        for fig in figs.values():
            plt.close(fig)
    out = tmp_path / "overlay"
    assert plot_cli([str(a), str(b), "--out", str(out), "--format", "png,svg"]) == 0
    assert sorted(f.name for f in out.iterdir()) == sorted(f"{n}.{e}" for n in COMPARE_FIGURES for e in ("png", "svg"))
    assert "6 figures" in capsys.readouterr().out
    with pytest.raises(DockbenchError, match="at least two run folders"):
        plot_compare([a], out)


# ------------------------------------------------------------------ issue 30: readable docking / controller
def test_a_narrow_depth_band_from_the_summary_gets_a_zoomed_inset(tmp_path: Path) -> None:
    """The shipped scenarios' depth gate has no min/max of its own (the band is derived from the seat, ±1 mm):
    the figure takes the bounds the gate used from summary.json, draws them, and zooms on them in an inset
    (y limits = the band ± 75 % of its width), since 2 mm vanish on the approach's scale."""
    import json

    folder = _docking_run(tmp_path, depth_min=0.07)
    run0 = Run.load(folder)
    from dockbench.telemetry.plots import docking_series

    seat = float(np.mean(docking_series(run0.channels, run0.meta)["depth"][-100:]))
    meta = json.loads((folder / "meta.json").read_text())
    meta["scenario"]["gates"][0] = {"metric": "docking.depth", "min": None, "max": None}
    write_json(folder / "meta.json", meta)
    summary = json.loads((folder / "summary.json").read_text())
    summary["gates"] = [{"metric": "docking.depth", "verdict": "PASS", "value": seat, "min": seat - 0.001,
                         "max": seat + 0.001}]
    write_json(folder / "summary.json", summary)
    run = Run.load(folder)
    depth = docking_series(run.channels, run.meta)["depth"] * 1e3
    fig = make_figures(run, ["docking"])["docking"]
    try:
        depth_ax = fig.axes[0]
        assert np.ptp(depth) > 40.0  # mm: the 2 mm band is < 5 % of the panel's span, so it is zoomed
        insets = depth_ax.child_axes
        assert len(insets) == 1, "no zoomed inset"
        lo, hi = 1e3 * (seat - 0.001), 1e3 * (seat + 0.001)
        assert insets[0].get_ylim() == pytest.approx((lo - 1.5, hi + 1.5))
        assert "gate band" in insets[0].get_title() and "mm" in insets[0].get_title()
        assert not any(t.get_text().startswith(" gate") for t in depth_ax.texts)  # labelled by the inset
    finally:
        plt.close(fig)


def test_constant_controller_channels_are_a_sentence_and_the_planner_end_is_labelled(tmp_path: Path) -> None:
    """f_i identically 0 (the friction integral off) is written as a sentence with its value and unit, not as
    flat lines; a varying group is still plotted; the dotted planner-end line is labelled on the top row."""
    import json

    from dockbench.telemetry.log import atomic_save_npz

    folder = _docking_run(tmp_path, depth_min=0.05)
    with np.load(folder / "telemetry.npz") as z:
        ch = {k: z[k] for k in z.files}
    for axis in "xyz":
        ch[f"ctrl_f_i_{axis}"] = np.zeros(len(ch["t"]))
    atomic_save_npz(folder / "telemetry.npz", ch)
    meta = json.loads((folder / "meta.json").read_text())
    meta["scenario"].setdefault("controller", {})["friction_integral"] = "off"
    write_json(folder / "meta.json", meta)
    run = Run.load(folder)
    fig = make_figures(run, ["controller"])["controller"]
    try:
        f_i_ax, frozen_ax = (ax for ax in fig.axes if ax.get_visible())
        assert not [ln for ln in f_i_ax.lines if not ln.get_label().startswith("_")]  # no flat data lines
        texts = " ".join(t.get_text() for t in f_i_ax.texts)
        assert "f_i_x, f_i_y, f_i_z: 0 N for the whole run" in texts and "friction_integral off" in texts, texts
        assert len([ln for ln in frozen_ax.lines if not ln.get_label().startswith("_")]) == 1  # it varies
        if run.planner_duration < float(run.t[-1]):
            assert "planner end" in texts
        _assert_units("controller", fig)
    finally:
        plt.close(fig)
