"""experiments/bench.py: the numbers it reports are complete and consistent (never timed here)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from dockbench.experiments.bench import HAND_TRACK_TEST, format_table, measure_hand_track_test, measure_once

from tests.helpers import SCENARIOS, scenario_dict


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


def _tiny(tmp_path: Path, duration: float = 0.05) -> Path:
    d = scenario_dict("iiwa14_docking")
    d["sim"]["duration"] = duration
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def test_the_floor_replay_reproduces_the_run_it_replays(tmp_path: Path) -> None:
    """The floor is meaningful only if the open-loop replay of the run's torques walks the run's states:
    the same MuJoCo and Pinocchio calls on the same inputs, so the same bits (first contact is at 4.70 s;
    5.2 s includes half a second of it)."""
    import numpy as np
    from dockbench.experiments.bench import _rows, replay_floor
    from dockbench.sim.loop import build, simulate
    from dockbench.sim.scenario import load_scenario

    sc = load_scenario(_tiny(tmp_path, 5.2))
    first, second = build(sc), build(sc)
    tel, status, _, timing = simulate(first, kernel_check=0, chunk_rows=_rows(first))
    steps = timing["steps"]
    assert status == "completed" and tel.tau_applied.shape[0] >= steps == _rows(first) - 1
    assert float(np.max(np.abs(tel.wrench_truth_world[:steps]))) > 0.0, "no contact in the window"
    replay_floor(sc, tel.tau_applied[:steps].copy(), setup=second)
    assert np.array_equal(first.data.qpos, second.data.qpos) and np.array_equal(first.data.qvel, second.data.qvel)


def test_the_floor_replay_culls_the_boxes_the_run_culled() -> None:
    """A peg-in-hole target culls its bore's boxes out of collision detection each period (sim/culling.py): the
    floor's replay must cull the same ones, or MuJoCo tests every box and the floor is the unculled physics'
    (slower than the run's). The run's box sets are logged as they change (record_culling) and the replay sets
    the same collision flags at the same steps without running the culling's update: the same states (the tip
    in contact: 0.8 s from 4 mm above the hole) and, at the end, the same boxes in and out."""
    import numpy as np
    from dockbench.experiments.bench import _rows, record_culling, replay_floor
    from dockbench.sim.loop import build, simulate
    from dockbench.sim.scenario import load_scenario

    sets = ["start.standoff=0.004", "planner.standoff=0.003", "sim.settle_time=0.1", "sim.duration=0.8", "gates=[]"]
    sc = load_scenario(SCENARIOS / "peg" / "iiwa14_peg_khatib.yaml", sets)
    first, second = build(sc), build(sc)
    log = record_culling(first)
    tel, status, _, timing = simulate(first, kernel_check=0, chunk_rows=_rows(first))
    steps = timing["steps"]
    assert status == "completed" and float(np.max(np.abs(tel.wrench_truth_world[:steps]))) > 1.0, "no contact"
    stats = first.culling.stats()
    assert stats["mean_active"] < stats["boxes"] and len(log) > 2  # boxes left out, the set changed
    boxes = first.culling.boxes
    assert not np.array_equal(first.asm.model.geom_contype[boxes], second.asm.model.geom_contype[boxes])
    replay_floor(sc, tel.tau_applied[:steps].copy(), setup=second, culling_log=log)
    assert second.culling.periods == 0  # the replay ran no culling update
    for flags in ("geom_contype", "geom_conaffinity"):
        assert np.array_equal(getattr(first.asm.model, flags), getattr(second.asm.model, flags))
    assert np.array_equal(first.data.qpos, second.data.qpos) and np.array_equal(first.data.qvel, second.data.qvel)
    assert record_culling(build(load_scenario(SCENARIOS / "iiwa14_docking.yaml"))) is None


def test_instruction_counts_per_step_from_the_three_children() -> None:
    from dockbench.experiments.bench import callgrind_total, format_instructions_table, instructions_per_step

    text = "version: 1\ncreator: callgrind-3.22\nevents: Ir\n\nsummary: 123456789\ntotals: 123456789\n"
    assert callgrind_total(text) == 123456789
    with pytest.raises(ValueError, match="not a callgrind output"):
        callgrind_total("events: Ir\n")
    per = instructions_per_step({"base": 1_000_000, "run": 3_300_000, "replay": 5_300_000}, steps=10)
    assert per == {"loop_instr_per_step": 230_000.0, "floor_instr_per_step": 200_000.0, "loop_over_floor": 1.15}
    with pytest.raises(ValueError, match="0 steps"):
        instructions_per_step({"base": 1, "run": 2, "replay": 3}, steps=0)
    row = {"scenario": "x", "steps": 10, "kernel_check": 0, "kernels": {"dynamics": "compiled",
           "controller": "compiled", "wrench": "compiled"}, **per}
    assert format_instructions_table([row]).splitlines()[2] == "| x | 10 | 230.0 | 200.0 | 1.150 | 0 | compiled |"


def test_instructions_children_run_build_and_replay(tmp_path: Path) -> None:
    """What each callgrind child does, in process (valgrind itself is not run here: minutes per count)."""
    from dockbench.experiments.bench import instructions_child

    path = str(_tiny(tmp_path))
    assert instructions_child(path, "base", 0) == {"scenario": "iiwa14_docking", "steps": 0}
    run = instructions_child(path, "run", 0)
    assert run["steps"] == 51 and run["status"] == "completed" and set(run["kernels"]) == {
        "dynamics", "controller", "wrench"}
    assert instructions_child(path, "replay", 0) == run


def test_instructions_without_valgrind_names_the_install(tmp_path: Path, monkeypatch) -> None:
    import shutil

    from dockbench.experiments.bench import measure_instructions

    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SystemExit, match="needs valgrind on PATH"):
        measure_instructions(str(_tiny(tmp_path)), env={})


def test_set_reaches_the_workers_and_a_bad_one_is_a_usage_error(tmp_path: Path, capsys, monkeypatch) -> None:
    from dockbench.experiments.bench import main

    monkeypatch.delenv("DOCKBENCH_BENCH_SETS", raising=False)
    path = _tiny(tmp_path, 0.3)
    assert main([str(path), "--runs", "1", "--set", "sim.duration=0.05", "--json", str(tmp_path / "b.json")]) == 0
    import json

    (r,) = json.loads((tmp_path / "b.json").read_text())["results"]
    assert abs(r["sim_s"][0] - 0.051) < 1e-9
    assert "--set sim.duration=0.05" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([str(path), "--runs", "1", "--set", "sim.duration"])
