"""The campaign folder as a transaction (issue 36): one driver per folder, damaged records run again and
named, trial folders injective, workers that die with the driver and a driver that survives its workers,
estimates before the first trial, a full disk, and campaign inputs that are clear errors — fuzzed with a
seed like tests/test_fuzz.py. Trials here are fake (experiments/campaign_faults.py: no simulation), so
each test takes seconds; the measurements with real trials and real kills are
``python experiments/fault_injection.py campaign``."""

from __future__ import annotations

import errno
import io
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from dockbench.experiments.campaign_faults import (
    CORRUPTIONS,
    FakeInline,
    alive,
    campaign_file,
    campaign_file_cases,
    corrupt_case,
    fake_pool,
    file_case,
    workers_of,
)
from dockbench.sim.campaign import load_campaign, run_campaign
from dockbench.sim.campaign import runner as runner_mod
from dockbench.sim.errors import DockbenchError, ScenarioError

from tests.helpers import REPO, SCENARIOS

BASE = SCENARIOS / "iiwa14_docking.yaml"


# ------------------------------------------------------------------------------ damaged records
@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_a_damaged_trial_record_is_run_again_and_named(tmp_path, kind) -> None:
    """Each kind of damage to a finished trial: the rerun raises nothing, names the trial (and what is wrong)
    among the damaged ones, runs it — and only it — again; the rerun after that finds everything done."""
    assert corrupt_case(kind, tmp_path) == []


def test_the_damage_check_can_fail(tmp_path, monkeypatch) -> None:
    """An undamaged folder is not named (the check above is not vacuous): corrupt_case reports the 'damage'
    as silently accepted."""
    monkeypatch.setitem(CORRUPTIONS, "nothing", lambda folder: None)
    problems = corrupt_case("nothing", tmp_path)
    assert any("silently accepted" in p for p in problems), problems


def test_the_damaged_trials_are_in_the_summary_and_the_report(tmp_path) -> None:
    from dockbench.experiments.campaign import format_report

    camp = load_campaign(campaign_file(tmp_path, k=[200, 300], telemetry="all"))
    first = run_campaign(camp, tmp_path / "out", FakeInline(), progress=None, figures=False)
    CORRUPTIONS["row without verdict"](first.out_dir / "trials" / "k=200/s000r01")
    err = io.StringIO()
    again = run_campaign(camp, tmp_path / "out", FakeInline(), progress=err, figures=False)
    assert again.summary["damaged"] == {"k=200/s000r01": "trial.json: no verdict"}
    assert "1 trial record(s) damaged, run again: k=200/s000r01: trial.json: no verdict" in err.getvalue()
    assert "damaged    1 trial record(s)" in format_report(again)


# ------------------------------------------------------------------------------ one driver per folder
def test_a_second_driver_is_refused_naming_the_first(tmp_path) -> None:
    camp = load_campaign(campaign_file(tmp_path, k=[200]))
    (tmp_path / "out" / camp.name).mkdir(parents=True)
    holder = runner_mod.CampaignLock(tmp_path / "out" / camp.name)
    holder.acquire()  # flock: a second open file description conflicts, in this process as in another
    try:
        with pytest.raises(DockbenchError, match=rf"another campaign driver is running in this folder \(pid "
                                                 rf"{os.getpid()} on .*, started 20"):
            run_campaign(camp, tmp_path / "out", FakeInline(), progress=None, figures=False)
        assert not list((tmp_path / "out" / camp.name / "trials").iterdir())  # nothing ran
    finally:
        holder.release()
    rep = run_campaign(camp, tmp_path / "out", FakeInline(), progress=None, figures=False)  # released: runs
    assert rep.ran == 2


# ------------------------------------------------------------------------------ trial folders
@pytest.mark.parametrize("labels,both", [
    (["k?", "k*", "k_"], "'k?' and 'k*'"),
    (["A", "a"], "'A' and 'a'"),  # macOS and Windows: one folder
])
def test_labels_that_give_one_folder_are_refused_naming_both(tmp_path, labels, both) -> None:
    path = campaign_file(tmp_path, repeats=1)
    data = yaml.safe_load(path.read_text())
    data["axes"][0].update(values=list(range(200, 200 + len(labels))), labels=labels)
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError) as exc:
        load_campaign(path)
    assert exc.value.key == "axes[0].labels" and both in str(exc.value) and "same trial folder" in str(exc.value)


def test_cells_that_join_to_one_folder_are_refused(tmp_path) -> None:
    """'/' and '__' both join cell parts: k=a__j=b + j=c and k=a + j=b__j=c would be one folder."""
    path = campaign_file(tmp_path, repeats=1)
    data = yaml.safe_load(path.read_text())
    data["axes"] = [{"key": "controller.k", "values": [200, 300], "labels": ["a__j=b", "a"], "name": "k"},
                    {"key": "controller.d", "values": [50, 60], "labels": ["c", "b__j=c"], "name": "j"}]
    path.write_text(yaml.safe_dump(data))
    same = r"cells 'a__j=b/c' and 'a/b__j=c' give the same trial folder 'k=a__j=b__j=c'"
    with pytest.raises(ScenarioError, match=same):
        load_campaign(path)


# ------------------------------------------------------------------------------ inputs
def _bad(tmp_path: Path, text: bytes) -> ScenarioError:
    path = tmp_path / "c.yaml"
    path.write_bytes(text.replace(b"BASE", str(BASE).encode()))
    with pytest.raises(ScenarioError) as exc:
        load_campaign(path)
    assert str(exc.value).startswith(str(path)) and "\n" not in str(exc.value)
    return exc.value


def test_campaign_input_errors_are_one_line_naming_file_and_key(tmp_path) -> None:
    assert "not UTF-8 text (byte 9" in str(_bad(tmp_path, b"name: caf\xe9\nbase: BASE\n"))
    e = _bad(tmp_path, b"name: a\x00b\nbase: BASE\n")
    assert "NUL" in str(e) or "control characters" in str(e)
    assert _bad(tmp_path, b"name: " + b"x" * 300 + b"\nbase: BASE\n").key == "name"
    deep = b"name: d\nbase: BASE\nset: {a: " + b"[" * 3000 + b"]" * 3000 + b"}"
    assert "nested more than 50 levels deep" in str(_bad(tmp_path, deep))  # the strict reader (sim/yamlio.py)
    e = _bad(tmp_path, b"name: d\nbase: BASE\nset: {a: " + b"[" * 40 + b"]" * 40 + b"}")
    assert "nested deeper than 32 levels" in str(e) and e.key.startswith("set.a[0][0]")
    e = _bad(tmp_path, b"name: r\nbase: BASE\naxes:\n  - {key: controller.k, values: &v [1, *v]}\n")
    assert "alias *v not accepted" in str(e)  # the strict reader refuses the alias before it can recurse
    e = _bad(tmp_path, b'name: r\nbase: "a\\0b.yaml"\n')
    assert e.key == "base" and "NUL" in str(e)
    e = _bad(tmp_path, b"name: r\nbase: " + b"b" * 300 + b".yaml\n")
    assert e.key == "base"
    # a base scenario that is not UTF-8: the scenario's file is named, before any trial
    bad_base = tmp_path / "base.yaml"
    bad_base.write_bytes(BASE.read_bytes() + b"\n# \xff\n")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"name": "nb", "base": str(bad_base)}))
    with pytest.raises(ScenarioError, match=rf"^{bad_base}: the scenario is not UTF-8 text \(byte "):
        run_campaign(load_campaign(path), tmp_path / "out", FakeInline(), progress=None, figures=False)


def test_the_cli_refuses_bad_set_values_and_out_folders(tmp_path, capsys) -> None:
    from dockbench.experiments import campaign as cli

    path = campaign_file(tmp_path, k=[200], repeats=1)
    for value, text in (("&a [*a]", "alias *a not accepted"), ("[" * 40 + "]" * 40, "nested deeper than 32"),
                        ("[" * 3000 + "]" * 3000, "nested")):
        assert cli.main([str(path), "--set", f"x={value}", "--out", str(tmp_path / "o"), "--jobs", "1"]) == 1
        err = capsys.readouterr().err
        assert text in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    afile = tmp_path / "afile"
    afile.write_text("")
    assert cli.main([str(path), "--out", str(afile), "--jobs", "1"]) == 1
    assert f"error: --out {afile}: {afile} is a file, not a folder" in capsys.readouterr().err
    if os.geteuid() != 0:  # root writes anywhere: read-only folders refuse only other users
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        assert cli.main([str(path), "--out", str(ro), "--jobs", "1"]) == 1
        assert f"--out {ro}: cannot create the campaign folder" in capsys.readouterr().err


SEED = 36
N_FILES = 150


def test_seeded_mutations_of_a_campaign_file_never_raise_a_traceback(tmp_path) -> None:
    """Mutated campaign files (odd values in keys, axes and labels, valid changes, raw non-YAML texts) load
    and run (fake trials), or give a ScenarioError starting with the file — never another exception."""
    counts: Counter[str] = Counter()
    bad = []
    for label, text in campaign_file_cases(N_FILES, SEED, BASE):
        kind, detail = file_case(label, text, tmp_path)
        counts[kind] += 1
        if kind not in ("ok", "clean error"):
            bad.append(f"[{kind}] {label}: {detail}")
    assert not bad, "\n".join(bad[:5])
    assert counts["ok"] >= 30 and counts["clean error"] >= 60, counts  # both paths exercised


def test_the_file_classifier_can_fail(tmp_path, monkeypatch) -> None:
    """A loader bug (an exception that is not a ScenarioError) is reported as a traceback."""
    import dockbench.sim.campaign as camp_pkg

    def broken(path):
        raise KeyError("a loader bug")

    monkeypatch.setattr(camp_pkg, "load_campaign", broken)
    kind, detail = file_case("x", b"name: x\n", tmp_path)
    assert kind == "traceback" and "a loader bug" in detail


# ------------------------------------------------------------------------------ estimates and budgets
def test_a_campaign_past_the_time_budget_is_refused_before_anything(tmp_path) -> None:
    """A 1000 × 1000 grid (10^6 trials) is refused from its estimate, before it is expanded or a folder made."""
    path = campaign_file(tmp_path, repeats=1)
    data = yaml.safe_load(path.read_text())
    data["axes"] = [{"key": "controller.k", "range": {"start": 100, "stop": 1099, "num": 1000}},
                    {"key": "controller.d", "range": {"start": 10, "stop": 1009, "num": 1000}}]
    data["set"] = {"sim.duration": 5.0}  # 10^6 × (13 ms + 45 ms/s × 5 s) / 2 workers = 33.1 h > 24 h
    path.write_text(yaml.safe_dump(data))
    camp = load_campaign(path)
    assert camp.n_trials == 10**6
    with pytest.raises(DockbenchError, match=r"1000000 trials would take ≈ 33.1 h on 2 worker\(s\).*5 s simulated\).*"
                                             r"more than the 24 h budget.*--max-hours"):
        run_campaign(camp, tmp_path / "out", fake_inline_with(2), progress=None)
    assert not (tmp_path / "out").exists()


def fake_inline_with(workers: int) -> FakeInline:
    ex = FakeInline()
    ex.workers = workers
    return ex


def test_a_campaign_past_the_free_disk_is_refused_unless_told(tmp_path, monkeypatch) -> None:
    camp = load_campaign(campaign_file(tmp_path, k=[200, 300], telemetry="all"))
    monkeypatch.setattr(runner_mod, "_free_mb", lambda path: 5.0)  # < the 900 MB telemetry budget
    with pytest.raises(DockbenchError, match=r"may need ≈ 900 MB \(4 trials × 20 kB of records \+ up to 900 MB of "
                                             r"telemetry\) and 5 MB are free.*--no-disk-check"):
        run_campaign(camp, tmp_path / "out", FakeInline(), progress=None, figures=False)
    rep = run_campaign(camp, tmp_path / "out", FakeInline(), progress=None, figures=False, check_disk=False)
    assert rep.ran == 4 and rep.estimate["trials"] == 4


def test_a_large_grid_validates_every_axis_value_not_every_cell(tmp_path) -> None:
    """3000 cells: max(60, 50) = 60 cells are validated before the first trial, covering every value of
    both axes — a bad last value of either axis stops the campaign before any trial runs."""
    path = campaign_file(tmp_path, repeats=1)
    for bad_axis in (0, 1):
        k = [100 + i for i in range(60)]
        d = [10 + i for i in range(50)]
        (k if bad_axis == 0 else d)[-1] = -5
        data = yaml.safe_load(path.read_text())
        data["axes"] = [{"key": "controller.k", "values": k, "name": "k"}, {"key": "controller.d", "values": d,
                                                                           "name": "d"}]
        path.write_text(yaml.safe_dump(data))
        err = io.StringIO()
        with pytest.raises(ScenarioError, match=r"controller\.[kd]: must be"):
            run_campaign(load_campaign(path), tmp_path / "out", FakeInline(), progress=err, figures=False)
        assert "3000 cells: validating every value of every axis (60 cells)" in err.getvalue()
        assert not list((tmp_path / "out" / "faults" / "trials").iterdir())


# ------------------------------------------------------------------------------ a full disk
def test_a_full_disk_stops_with_what_fitted_recorded(tmp_path, monkeypatch) -> None:
    camp = load_campaign(campaign_file(tmp_path, k=[200, 300, 400], telemetry="all"))
    real = runner_mod._write_trial
    calls = {"n": 0}

    def filling(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(runner_mod, "_write_trial", filling)
    with pytest.raises(DockbenchError, match=r"No space left on device \(writing k=400/s000r00|No space left on device "
                                             r"\(writing k=\d+/s00\dr0\d\): the campaign stopped; 2 of 6 trials are "
                                             r"recorded.*rerun the same command to resume"):
        run_campaign(camp, tmp_path / "out", FakeInline(), progress=None, figures=False)
    out = tmp_path / "out" / "faults"
    assert len(list(out.glob("trials/*/*/trial.json"))) == 2
    assert len((out / "results.csv").read_text().splitlines()) == 1 + 2
    monkeypatch.setattr(runner_mod, "_write_trial", real)
    rep = run_campaign(camp, tmp_path / "out", FakeInline(), progress=None, figures=False)
    assert (rep.ran, rep.skipped, len(rep.rows)) == (4, 2, 6)


# ------------------------------------------------------------------------------ processes
def test_a_worker_death_reruns_its_trials_and_a_killer_trial_is_an_error(tmp_path, monkeypatch) -> None:
    """k=300/s000r00 kills its worker once (rerun: it passes); k=500/s000r00 kills it every time (recorded as
    an error after MAX_ATTEMPTS deaths). The campaign finishes every trial, each once; the workers run this
    checkout's code (the fake trial's message is its ``sim`` package)."""
    from dockbench.sim.campaign.executors import MAX_ATTEMPTS, package_root

    monkeypatch.setenv("DOCKBENCH_FAULT_KILL_ONCE", "k=300/s000r00")
    monkeypatch.setenv("DOCKBENCH_FAULT_KILL", "k=500/s000r00")
    monkeypatch.setenv("DOCKBENCH_FAULT_DIR", str(tmp_path))
    camp = load_campaign(campaign_file(tmp_path))
    pool = fake_pool(2)
    try:
        rep = run_campaign(camp, tmp_path / "out", pool, progress=None, figures=False)
    finally:
        pool.close()
    rows = {r["trial"]: r for r in rep.rows}
    assert len(rep.rows) == len(rows) == 12 and not rep.interrupted
    assert rows["k=300/s000r00"]["verdict"] == "PASS"
    killer = rows["k=500/s000r00"]
    assert killer["status"] == "error" and f"died {MAX_ATTEMPTS} times" in killer["message"]
    assert pool.restarts >= MAX_ATTEMPTS and pool.lost == 1
    assert {r["message"] for t, r in rows.items() if t != "k=500/s000r00"} == {str(package_root() / "sim")}
    assert rep.summary["timing"]["worker_restarts"] == pool.restarts
    # the killer's rerun: recorded (an error is a result), not run again
    again = run_campaign(camp, tmp_path / "out", FakeInline(), progress=None, figures=False)
    assert (again.ran, again.skipped) == (0, 12)


DRIVER = r"""
import sys
from pathlib import Path
from dockbench.experiments.campaign_faults import campaign_file, fake_pool
from dockbench.sim.campaign import load_campaign, run_campaign
tmp = Path(sys.argv[1])
run_campaign(load_campaign(campaign_file(tmp)), tmp / "out", fake_pool(2), progress=None, figures=False)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_workers_die_with_their_driver(tmp_path) -> None:
    """SIGKILL of a driver whose 2 workers are in trials (30 s each): the kernel kills the workers
    (PR_SET_PDEATHSIG) and the resource tracker exits (its pipe closes). Polled for up to 60 s (a loaded
    machine; it takes milliseconds), so nothing is timed."""
    env = {**os.environ, "DOCKBENCH_FAULT_SLEEP": "30", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path)], env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 120
        workers: list[int] = []
        while time.monotonic() < deadline and len(workers) < 2 and proc.poll() is None:
            workers, trackers = workers_of(proc.pid)
            time.sleep(0.1)
        assert len(workers) == 2, "the workers did not start"
        time.sleep(1.0)
        workers, trackers = workers_of(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    everyone = workers + trackers
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(alive(p) for p in everyone):
        time.sleep(0.1)
    left = [p for p in everyone if alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"alive after the driver's SIGKILL: {left} of workers {workers}, tracker {trackers}"
