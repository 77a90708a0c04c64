"""Determinism: the same scenario run twice gives bit-identical telemetry (docs/testing.md §4), for every
controller (Khatib, HQP — closed form and QPs every step —, HQP sensorless with its momentum
observer, SE(3)) and the G20 hand effector; a difference is reported by the first differing channel
(``telemetry.run.first_difference``). Wall-clock diagnostics (the HQP's ``qp_solve_time``) are not
telemetry: they go to the run folder's timing.npz. ``experiments/check_determinism.py`` reruns every
shipped scenario in fresh processes."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from dockbench.sim.loop import run
from dockbench.sim.scenario import load_scenario, scenario_from_dict
from dockbench.telemetry.run import Run, first_difference

from tests import conftest
from tests.helpers import SCENARIOS, scenario_dict

# A docking run: free flight, funnel contact and seating all in one run.
SCENARIO = SCENARIOS / "iiwa14_docking.yaml"

#: one shipped scenario per controller / force source / end effector (the full-length runs)
PER_CONTROLLER = (
    "iiwa14_docking_hqp",  # HQP, closed form, compiled kernel
    "fr3_docking_hqp_sensorless",  # HQP with the momentum observer (Python path)
    "fr3_docking_se3",  # SE(3) impedance on the Lie group
    "fr3_g20_press",  # the G20 hand effector (its channels and the bridge's projection)
    "gravity/fr3_g20_press_gravity",  # gravity on: tool-weight compensation, the hand re-lumped as it moves
)


@pytest.mark.parametrize("name", PER_CONTROLLER)
def test_every_controller_and_the_hand_rerun_bit_identical(name: str) -> None:
    sc = load_scenario(SCENARIOS / f"{name}.yaml")
    a = run(sc, out_root=None)
    b = run(sc, out_root=None)
    assert a.status == "completed" and len(a.telemetry["t"]) > 1000
    diff = first_difference(a.telemetry, b.telemetry)
    assert diff is None, f"{name} is not deterministic: {diff}"
    assert not any(k.endswith("qp_solve_time") for k in a.telemetry), "a wall-clock channel in the telemetry"


def test_hqp_solving_its_qps_every_step_reruns_bit_identical(tmp_path: Path) -> None:
    """qp_mode: always (the QP solver, warm-started, on every step): bit-identical telemetry; the
    solver's wall-clock time is in timing.npz, beside it, and differs."""
    d = scenario_dict("iiwa14_docking_hqp")
    d["controller"]["qp_mode"] = "always"
    d["sim"]["duration"] = 1.0
    sc = scenario_from_dict(d)
    a, b = run(sc, out_root=tmp_path / "a"), run(sc, out_root=tmp_path / "b")
    assert first_difference(Run.load(a.run_dir), Run.load(b.run_dir)) is None
    with np.load(a.run_dir / "timing.npz") as ta:
        solve = ta["ctrl_qp_solve_time"]
    assert solve.shape == (1001,) and np.all(solve > 0.0)
    assert "ctrl_qp_solve_time" in a.timing["wallclock"]


def _openblas_threads() -> list[int]:
    """Thread counts of every OpenBLAS loaded in this process (numpy's, scipy's)."""
    out = []
    with open("/proc/self/maps") as fh:
        libs = {line.split()[-1] for line in fh if "openblas" in line.lower() and line.split()[-1].startswith("/")}
    for path in sorted(libs):
        lib = ctypes.CDLL(path)
        for fn in ("openblas_get_num_threads", "scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                   "scipy_openblas_get_num_threads"):
            if hasattr(lib, fn):
                out.append(int(getattr(lib, fn)()))
                break
    return out


def test_blas_is_single_threaded() -> None:
    """tests/conftest.py sets the BLAS thread counts to 1 before numpy is imported; OpenBLAS took it."""
    import scipy.linalg  # noqa: F401 - loads scipy's own OpenBLAS too

    np.linalg.eigh(np.eye(50))  # make sure BLAS is initialised
    try:
        threads = _openblas_threads()
    except OSError as exc:
        pytest.skip(f"cannot read /proc/self/maps: {exc}")
    if not threads:
        pytest.skip("no OpenBLAS in this process (another BLAS: its thread count is not checked here)")
    assert not conftest.NUMPY_IMPORTED_EARLY, "numpy was imported before tests/conftest.py set the BLAS threads"
    assert threads == [1] * len(threads), threads


def test_same_scenario_twice_is_bit_identical(tmp_path: Path) -> None:
    sc = load_scenario(SCENARIO)
    a = run(sc, out_root=tmp_path / "a")
    b = run(sc, out_root=tmp_path / "b")
    assert a.metrics["contact.peak_force_truth"] > 1.0, "the run must include contact"
    diff = first_difference(a.telemetry, b.telemetry)
    assert diff is None, f"{SCENARIO.name} is not deterministic: {diff}"
    # and the saved folders round-trip bit for bit
    diff = first_difference(Run.load(a.run_dir), Run.load(b.run_dir))
    assert diff is None, diff
    assert first_difference(Run.load(a.run_dir), a.telemetry) is None


def _channels() -> dict[str, np.ndarray]:
    t = np.arange(5) * 1e-3
    return {"t": t, "q": np.zeros((5, 3)), "v": np.ones((5, 3)), "saturated": np.zeros(5, dtype=bool),
            "ctrl_x": np.full(5, np.nan)}


def test_first_difference_identical_including_nan() -> None:
    assert first_difference(_channels(), _channels()) is None


def test_first_difference_names_the_earliest_diverging_channel() -> None:
    a, b = _channels(), _channels()
    b["q"][3, 1] += 1e-15  # q diverges at step 3 …
    b["v"][2, 0] = 2.0  # … but v already at step 2: v is where the runs part
    msg = first_difference(a, b)
    assert msg is not None
    assert msg.startswith("channel 'v' first differs at step 2 (t = 0.002 s), index (2, 0)")
    assert "also differ: q" in msg
    b["v"][2, 0] = 1.0
    assert first_difference(a, b).startswith("channel 'q' first differs at step 3")


def test_first_difference_ties_follow_channel_order() -> None:
    a, b = _channels(), _channels()
    b["v"][1, 0] = 0.0
    b["q"][1, 2] = 1.0
    assert first_difference(a, b).startswith("channel 'q'")  # q precedes v in CHANNELS


def test_first_difference_bitwise() -> None:
    a, b = _channels(), _channels()
    b["q"][0, 0] = -0.0  # equal as numbers, different bits
    assert first_difference(a, b).startswith("channel 'q' first differs at step 0")
    b = _channels()
    b["saturated"][4] = True
    assert first_difference(a, b).startswith("channel 'saturated' first differs at step 4")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda b: b.pop("v"), "channel 'v' is not in both runs (only in a: ['v']; only in b: none)"),
        (lambda b: b.__setitem__("q", np.zeros((4, 3))), "channel 'q' differs in shape: (5, 3) vs (4, 3)"),
        (lambda b: b.__setitem__("q", np.zeros((5, 3), dtype="f4")), "channel 'q' differs in dtype"),
    ],
)
def test_first_difference_structure(change, expected: str) -> None:
    a, b = _channels(), _channels()
    change(b)
    assert first_difference(a, b).startswith(expected)
