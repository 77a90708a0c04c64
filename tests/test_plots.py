"""Figures of a run folder: every figure in every format is written, readable, labelled with units."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from experiments.plot_telemetry import main as plot_cli
from experiments.plot_telemetry import plot_run
from sim.errors import DockbenchError
from telemetry.plots import FIGURES, make_figures, parse_formats, shade_segments
from telemetry.run import Run
from tests.test_metrics import SEGMENTS, write_synthetic_run

MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF", "svg": b"<?xml"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_run(tmp_path_factory.mktemp("plots") / "run")


def test_plot_run_writes_every_figure_in_every_format(run_dir: Path) -> None:
    files = plot_run(run_dir, formats=("png", "pdf"))
    assert len(files) == 2 * len(FIGURES) == 12
    assert [f.name for f in files] == [f"{n}.{ext}" for n in FIGURES for ext in ("png", "pdf")]
    for f in files:
        assert f.parent == run_dir and f.is_file()
        data = f.read_bytes()
        assert len(data) > 5_000, f"{f.name}: only {len(data)} bytes"
        assert data.startswith(MAGIC[f.suffix[1:]]), f.name
    assert not list(run_dir.glob("*.tmp"))  # atomic writes leave no temp files


def test_every_axis_label_carries_a_unit(run_dir: Path) -> None:
    figs = make_figures(Run.load(run_dir))
    try:
        assert list(figs) == list(FIGURES)
        for name, fig in figs.items():
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
    finally:
        for fig in figs.values():
            plt.close(fig)


def test_segments_are_shaded_and_named(run_dir: Path) -> None:
    run = Run.load(run_dir)
    fig, ax = plt.subplots()
    try:
        assert shade_segments(ax, run, label=True) == len(SEGMENTS)
        assert [t.get_text() for t in ax.texts] == [s["name"] for s in SEGMENTS]
        assert len(ax.patches) == len(SEGMENTS)
        assert len(ax.lines) == 1  # the planner-end marker: the run goes on after the planner
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
    assert f"{len(FIGURES)} figures" in out
    assert all((run_dir / f"{n}.svg").is_file() for n in FIGURES)
    assert plot_cli([str(run_dir), "--format", "bmp"]) == 1
    assert "unknown figure format 'bmp'" in capsys.readouterr().err
    assert plot_cli([str(run_dir.parent / "nope")]) == 1


def test_parse_formats() -> None:
    assert parse_formats("png, PDF,.svg,png") == ("png", "pdf", "svg")
    with pytest.raises(DockbenchError, match="known: png, pdf, svg"):
        parse_formats("jpg")


def test_empty_run_raises(tmp_path: Path) -> None:
    from telemetry.log import atomic_save_npz
    from tests.test_metrics import synthetic

    ch, _ = synthetic()
    folder = write_synthetic_run(tmp_path / "empty")
    atomic_save_npz(folder / "telemetry.npz", {k: v[:0] for k, v in ch.items()})
    with pytest.raises(DockbenchError, match="no recorded steps"):
        plot_run(folder)


# ----------------------------------------------------------------- tables (experiments/compare.py)
def test_compare_tables(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import csv
    import shutil

    from experiments.compare import find_run_dirs, main, markdown_table, row_from_run
    from telemetry.metrics import compute_metrics
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
    assert "python experiments/compare.py runs" not in page  # the real invocation is recorded
    assert f"--latest --md {md_path}" in page and "| synthetic | synthetic | p | c | PASS |" in page
    with csv_path.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 1
    assert float(rows[0]["docking.depth [m]"]) == expected["docking.depth"]  # full precision, SI
    assert main([str(root), "--metrics", "docking.dept"]) == 1
    assert "unknown metric(s) docking.dept" in capsys.readouterr().err
