"""Ctrl-C, SIGTERM and SIGHUP (issue 23, issue 36): one path for all, the telemetry recorded so far kept whenever a
signal arrives after the first step — in the loop, in a telemetry spill, while scoring, while the
folder is written — and nothing left behind (and no traceback) before it.

The signals are real (``os.kill`` of this process from inside the code path under test, so the
moment is exact); the CLI test sends one from outside.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from dockbench.sim import interrupts, loop
from dockbench.sim.loop import run
from dockbench.sim.scenario import scenario_from_dict
from dockbench.telemetry import log as tlog
from dockbench.telemetry import run as trun
from dockbench.telemetry.run import Run

from tests.helpers import REPO, SCENARIOS, scenario_dict

SIGNALS = list(interrupts.SIGNALS)  # SIGINT, SIGTERM and SIGHUP (closing the terminal)


@pytest.fixture(autouse=True)
def _hangup_not_ignored():
    """Under ``nohup`` SIGHUP is ignored and the guard leaves it so (tested below); the other tests model
    a terminal session."""
    before = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGHUP, before)


def _short(duration: float = 0.5) -> dict:
    d = scenario_dict("iiwa14_docking")
    d["sim"]["duration"] = duration
    return d


def _folders(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*/*") if p.is_dir())


def _check_interrupted_folder(folder: Path, steps: int) -> Run:
    loaded = Run.load(folder)
    assert not loaded.partial and not folder.name.endswith(".partial"), loaded.problems
    assert loaded.status == "interrupted" and not loaded.complete
    assert len(loaded.t) == steps
    np.testing.assert_array_equal(loaded.t, np.arange(steps) * 1e-3)
    assert loaded.meta["timing"]["steps"] == steps == loaded.summary["timing"]["steps"]
    return loaded


@pytest.mark.parametrize("sig", SIGNALS)
def test_a_signal_in_the_loop_keeps_every_step_recorded(tmp_path: Path, sig) -> None:
    def progress(t, duration):
        if t >= 0.2:
            os.kill(os.getpid(), sig)

    r = run(scenario_from_dict(_short()), out_root=tmp_path, progress=progress)
    assert r.status == "interrupted" and r.signal == sig and r.verdict == "INCOMPLETE"
    # progress is reported every 10 steps; the signal raised right after the call at t = 0.2 s
    loaded = _check_interrupted_folder(r.run_dir, 201)
    assert {signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}.get(sig, "Ctrl-C") in loaded.summary["message"]


@pytest.mark.parametrize("sig", SIGNALS)
def test_a_signal_during_a_telemetry_spill_waits_for_the_part(tmp_path: Path, monkeypatch, sig) -> None:
    write_part = tlog.Telemetry._write_part
    sent = []

    def part_with_signal(self, rows):
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), sig)  # arrives in the middle of the spill: deferred until it is written
        write_part(self, rows)

    monkeypatch.setattr(tlog.Telemetry, "_write_part", part_with_signal)
    r = run(scenario_from_dict(_short()), out_root=tmp_path, chunk_rows=100)
    assert r.status == "interrupted" and r.signal == sig
    _check_interrupted_folder(r.run_dir, 100)  # the first block, spilled whole; the signal then stopped the loop


@pytest.mark.parametrize("sig", SIGNALS)
def test_a_signal_while_scoring_keeps_all_steps(tmp_path: Path, monkeypatch, sig) -> None:
    """A Ctrl-C after the loop used to leave no folder or an empty one (60 s of telemetry lost)."""
    metrics = loop.compute_metrics

    def interrupted_metrics(*a, **k):
        os.kill(os.getpid(), sig)
        return metrics(*a, **k)

    monkeypatch.setattr(loop, "compute_metrics", interrupted_metrics)
    r = run(scenario_from_dict(_short()), out_root=tmp_path)
    assert r.status == "interrupted" and r.signal == sig and r.metrics == {}
    loaded = _check_interrupted_folder(r.run_dir, 501)
    assert "before the metrics were computed" in loaded.summary["message"]


@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.parametrize("during, status", [("telemetry.npz", "interrupted"), ("summary.json", "completed")])
def test_a_signal_while_the_folder_is_written_waits_for_it(tmp_path: Path, monkeypatch, sig, during, status) -> None:
    """A signal that arrives while a file of the folder is written is held until the write is done:
    during telemetry.npz the run then stops before the metrics (status interrupted, all steps kept);
    during summary.json (after the metrics) the folder is finished with its status, and
    RunResult.signal tells the caller (the CLI exits 128 + signum). The folder is complete either way."""
    real_npz, real_json = tlog.atomic_save_npz, trun.write_json
    sent = []

    def maybe_kill(path):
        if Path(path).name == during and not sent:
            sent.append(1)
            os.kill(os.getpid(), sig)

    def npz(path, arrays):
        maybe_kill(path)
        real_npz(path, arrays)

    def wj(path, data):
        maybe_kill(path)
        real_json(path, data)

    monkeypatch.setattr(tlog, "atomic_save_npz", npz)
    monkeypatch.setattr(trun, "write_json", wj)
    monkeypatch.setattr(loop, "write_json", wj)
    r = run(scenario_from_dict(_short(duration=9.0)), out_root=tmp_path)
    assert sent, "the signal was sent"
    assert r.status == status and r.signal == sig
    loaded = Run.load(r.run_dir)
    assert not loaded.partial and len(loaded.t) == 9001 and loaded.status == status
    assert loaded.complete == (status == "completed")


@pytest.mark.parametrize("sig", SIGNALS)
def test_a_signal_before_the_first_step_leaves_nothing(tmp_path: Path, monkeypatch, sig) -> None:
    build = loop.build

    def interrupted_build(sc):
        os.kill(os.getpid(), sig)
        return build(sc)

    monkeypatch.setattr(loop, "build", interrupted_build)
    with pytest.raises(interrupts.Interrupted) as exc:
        run(scenario_from_dict(_short()), out_root=tmp_path)
    assert exc.value.signum == sig and exc.value.exit_code == 128 + sig
    assert _folders(tmp_path) == [] and not any(tmp_path.rglob("*.partial"))


def test_the_guard_restores_the_previous_handlers() -> None:
    before = {s: signal.getsignal(s) for s in SIGNALS}
    with interrupts.guard():
        assert all(signal.getsignal(s) is interrupts._handler for s in SIGNALS)
        with interrupts.guard():  # nested: nothing changes
            pass
        assert interrupts.installed()
    assert {s: signal.getsignal(s) for s in SIGNALS} == before
    assert not interrupts.installed()


def test_under_nohup_sighup_stays_ignored() -> None:
    """``nohup`` (SIGHUP ignored on entry): the user asked the run to survive the hang-up; the guard does not
    take SIGHUP over, and one sent meanwhile is ignored."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with interrupts.guard():
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is interrupts._handler
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.01)
        assert interrupts.pending() is None
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN


def test_deferred_holds_a_signal_until_the_section_ends() -> None:
    with interrupts.guard():
        with pytest.raises(interrupts.Interrupted):
            with interrupts.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.01)
                assert interrupts.pending() == signal.SIGTERM  # held, not raised
            pytest.fail("the held signal must raise when the section ends")  # pragma: no cover


@pytest.mark.parametrize("sig", SIGNALS)
def test_cli_signal_during_the_loop_exits_128_plus_signum_with_a_complete_folder(tmp_path: Path, sig) -> None:
    """From outside, like a user or a scheduler: the CLI prints no traceback, exits 130/143 and leaves
    one complete run folder of status interrupted holding every step it recorded."""
    cmd = [sys.executable, str(REPO / "experiments" / "run_docking.py"), "--scenario",
           str(SCENARIOS / "iiwa14_tracking.yaml"), "--out", str(tmp_path), "--duration", "600", "--no-progress"]
    # PYTHONPATH: the script imports this checkout's dockbench, as an editable install of it does
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not any(tmp_path.glob("*/*.partial/telemetry.part*.npz")):  # the loop is running
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err and "interrupted" in err
    folders = _folders(tmp_path)
    assert len(folders) == 1
    loaded = Run.load(folders[0])
    assert not loaded.partial and loaded.status == "interrupted"
    n = len(loaded.t)
    assert n > tlog.CHUNK_ROWS and loaded.meta["timing"]["steps"] == n
    np.testing.assert_array_equal(loaded.t, np.arange(n) * 1e-3)


def test_a_program_ignores_signals_after_the_guard() -> None:
    """guard(restore=False) (the CLI as a program): afterwards the signals are ignored (SIG_IGN, which
    Python's finalisation keeps), so one arriving during the interpreter's shutdown cannot kill a
    process whose run folder is complete."""
    before = {s: signal.getsignal(s) for s in SIGNALS}
    try:
        with interrupts.guard(restore=False):
            pass
        assert all(signal.getsignal(s) is signal.SIG_IGN for s in SIGNALS)
        os.kill(os.getpid(), signal.SIGTERM)  # ignored: this process lives on
        time.sleep(0.01)
    finally:
        for s, h in before.items():
            signal.signal(s, h)
