"""experiments/bench.py: the numbers it reports are complete and consistent (never timed here)."""

from __future__ import annotations

from pathlib import Path

import yaml
from dockbench.experiments.bench import HAND_TRACK_TEST, format_table, measure_hand_track_test, measure_once

from tests.helpers import scenario_dict


def test_measure_once_reports_split_and_floor(tmp_path: Path) -> None:
    d = scenario_dict("iiwa14_docking")
    d["sim"]["duration"] = 0.3
    path = tmp_path / "short.yaml"
    path.write_text(yaml.safe_dump(d))
    r = measure_once(str(path))
    assert r["status"] == "completed" and abs(r["sim_s"] - 0.301) < 1e-9
    assert set(r["split_us"]) == {"physics", "dynamics", "controller", "telemetry", "tool", "other"}
    assert all(v >= 0.0 for v in r["split_us"].values()) and r["split_us"]["physics"] > 0.0
    assert r["floor_us_per_step"] > 0.0
    assert abs(r["loop_over_floor"] - r["us_per_step"] / r["floor_us_per_step"]) < 1e-12
    assert set(r["kernels"]) == {"dynamics", "controller", "wrench"}
    assert all(v in ("compiled", "python") for v in r["kernels"].values())


def test_kernels_option_reaches_the_workers_and_the_table(tmp_path: Path) -> None:
    from dockbench.experiments.bench import run_bench

    d = scenario_dict("iiwa14_docking")
    d["sim"]["duration"] = 0.05
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(d))
    (r,) = run_bench([str(path)], runs=1, kernels="python")
    assert r["kernels"] == {"dynamics": "python", "controller": "python", "wrench": "python"}
    assert format_table([r]).splitlines()[2].endswith("| python |")


def test_hand_track_test_entry_and_table() -> None:
    h = measure_hand_track_test()
    assert h["scenario"] == HAND_TRACK_TEST and h["status"] == "PASS" and h["max_error_rad"] <= 0.02
    assert h["sim_s"] > 0.0 and h["us_per_step"] > 0.0
    agg = {"scenario": HAND_TRACK_TEST, "runs": 1, "hand": True, "status": "PASS"}
    for k in ("wall_s", "sim_s", "rtf", "us_per_step", "max_error_rad"):
        agg[k] = (h[k], h[k], h[k])
    table = format_table([agg])
    assert "| g20_track_test | 1 | PASS |" in table


def test_kernel_check_periods_are_measured_interleaved_and_compared(tmp_path: Path) -> None:
    from dockbench.experiments.bench import guard_ratios, run_bench

    d = scenario_dict("iiwa14_docking")
    d["sim"]["duration"] = 0.05
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(d))
    results = run_bench([str(path)], runs=2, checks=[0, 1])
    assert [r["kernel_check"] for r in results] == [0, 1] and all(r["runs"] == 2 for r in results)
    assert all(len(r["rtf_samples"]) == 2 for r in results)
    rows = format_table(results).splitlines()[2:4]
    assert rows[0].endswith("| 0 | compiled |") or rows[0].endswith("| 0 | python |")
    assert "| 1 | " in rows[1]
    (line,) = guard_ratios(results)
    assert line.startswith("iiwa14_docking: real-time factor with the guard every 1 steps / without: median ")
    assert line.endswith("2 pairs)")


def test_the_command_line_runs_without_a_kernel_check_option(tmp_path: Path, capsys) -> None:
    """``bench.py SCENARIO --runs 1`` (no --kernel-check: the guard period as set) prints its table; the
    progress line counts the runs (it crashed on the unset option once)."""
    from dockbench.experiments.bench import main

    d = scenario_dict("iiwa14_docking")
    d["sim"]["duration"] = 0.05
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(d))
    assert main([str(path), "--runs", "1"]) == 0
    assert "| iiwa14_docking |" in capsys.readouterr().out
