"""experiments/peg_figures.py's tables from a synthetic campaign folder: the force-quality rows, the failed
trials' belief errors (from the true and believed target frames) and the issue's numbers per robot."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from dockbench.experiments.peg_figures import failed_trials_table, force_quality_rows, issue_numbers


def _trial(root: Path, variant: str, name: str, verdict: str, frac: float, peak: float,
           offset=(0.0, 0.0, 0.0)) -> None:
    d = root / "trials" / variant / name
    d.mkdir(parents=True)
    T = np.eye(4)
    T[:3, 3] = [0.5, 0.0, 0.2]
    B = T.copy()
    B[:3, 3] += offset  # the believed hole: offset from the true one (world frame; the true axis is +z)
    metrics = {"docking.seat_height_fraction": frac, "contact.peak_force_truth": peak, "insertion.attempts": 1,
               "docking.tilt_deg": 0.5, "contact.mean_force_truth": 1.0, "contact.impulse_truth": 10.0,
               "insertion.jammed": 0.0}
    if verdict == "PASS":
        metrics["docking.time_to_seat"] = 8.0
    (d / "summary.json").write_text(json.dumps({"verdict": verdict, "metrics": metrics,
                                                "trial": {"cell": variant, "params": {"variant": variant}}}))
    (d / "meta.json").write_text(json.dumps({"T_world_target": T.tolist(), "T_world_target_believed": B.tolist(),
                                             "target_depth_total": 0.025}))


def test_tables_of_a_small_campaign(tmp_path: Path) -> None:
    for i in range(19):
        _trial(tmp_path, "iiwa14_khatib", f"s{i:03d}r00", "PASS", 0.0, 5.0 + i)
    # failed at the mouth: believed 3 mm off across the axis (x) and 4 mm above the true mouth
    _trial(tmp_path, "iiwa14_khatib", "s019r00", "FAIL", 0.99, 30.0, offset=(0.003, 0.0, 0.004))
    for i in range(20):
        _trial(tmp_path, "fr3_khatib", f"s{i:03d}r00", "PASS", 0.0, 10.0)
    rows = {r["variant"]: r for r in force_quality_rows(str(tmp_path))}
    r = rows["iiwa14_khatib"]
    assert (r["n"], r["k"], r["mouth"], r["short"], r["other"]) == (20, 19, 1, 0, 0)
    assert r["peak"][2] == 30.0 and math.isclose(r["peak"][0], 14.5)
    table = failed_trials_table(str(tmp_path))
    assert "| `iiwa14_khatib/s019r00` | 3.00 | -4.00 | 0.990 | 30.0 | 1 | 0.50 |" in table
    assert "fr3_khatib" not in table  # only failed trials
    numbers = issue_numbers(list(rows.values()))
    # iiwa14: 19/20 = 95 % meets the point estimate, not the Wilson lower end (≈ 76 %); its p95 peak is
    # 23 + 0.05·(30 − 23) = 23.35 N (numpy's linear quantile of 20 values), within the 25 N limit
    assert math.isclose(r["peak"][1], 23.35)
    assert "iiwa14: 1 of 1 laws at ≥ 95 % success as point estimates (khatib 95 %), 0 with" in numbers
    assert "within 25 N for every law" in numbers.split("iiwa14:")[1]
    assert "fr3: 1 of 1 laws" in numbers and "(10.0 N)" in numbers
