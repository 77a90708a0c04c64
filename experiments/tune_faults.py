"""Kill a tuning study's driver (SIGKILL) at random times and resume it: candidates lost, duplicated, and
whether the resumed study equals an uninterrupted one (docs/tuning.md, "Resuming").

    python experiments/tune_faults.py                                   # a built-in 10-candidate study, 2 kills
    python experiments/tune_faults.py STUDY.yaml --kills 2 --candidates 6 --jobs 2

The driver (``python -m dockbench.experiments.tune``) runs in a subprocess; each kill comes at a random time
once the study's database holds at least one more finished candidate than at the previous kill (so each kill
lands part way through a later candidate). After the kills the same command runs to the end. Then a second
study folder runs the same study without interruption, and the two are compared: every candidate's number,
parameters, state and values; each candidate's campaign must hold each of its trials once.

Exit code 0 when nothing was lost or duplicated and both studies are equal, 2 otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dockbench.cli import ArgumentParser, child_env

#: a 0.6 s docking per trial (≈ 0.3 s of wall time), two belief errors, k and d searched, 10 candidates
BUILTIN = """name: kill_study
campaign:
  base: {base}
  set: {{start.standoff: 0.02, planner.v_max: 0.2, planner.a_max: 1.0, sim.settle_time: 0.1, sim.duration: 0.6,
        gates: [{{metric: contact.peak_force_truth, max: 24.4}}]}}
  axes: [{{key: target.belief_offset.position.0, values: [-0.002, 0.002], name: dx}}]
  telemetry: none
search:
  - {{key: controller.k, type: float, low: 100, high: 1500, log: true}}
  - {{key: controller.d, type: float, low: 20, high: 200}}
objectives:
  - {{stat: success_wilson_low}}
  - {{stat: p95, metric: contact.peak_force_truth, scale: 25.0}}
constraints: [{{stat: success_rate, min: 0.5}}]
candidates: 10
sampler: {{seed: 3, startup: 3}}
"""


def _finished(db: Path, name: str) -> int:
    import sqlite3

    if not db.is_file():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM trials WHERE state IN ('COMPLETE', 'PRUNED')").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.is_file() and stat.read_text().split()[2] == "Z")


def _candidates(folder: Path, name: str) -> list[dict]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    st = optuna.load_study(study_name=name, storage=f"sqlite:///{folder / 'study.db'}")
    return [{"number": t.number, "params": t.params, "state": t.state.name, "values": t.values}
            for t in st.get_trials()]


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("study", nargs="?", default=None, help="study file (default: a built-in 10-candidate study)")
    ap.add_argument("--kills", type=int, default=2, help="SIGKILLs of the driver (default 2)")
    ap.add_argument("--candidates", type=int, default=None, help="the budget (default: the study's)")
    ap.add_argument("--jobs", type=int, default=2, help="workers of each candidate's campaign (default 2)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill times")
    ap.add_argument("--max-delay", type=float, default=1.5,
                    help="a kill comes up to this many seconds after its candidate count is reached")
    ap.add_argument("--keep", default=None, help="keep the study folders here (default: a temporary folder)")
    args = ap.parse_args(argv)
    from dockbench.sim.campaign.study import load_study

    rng = np.random.default_rng(args.seed)
    root = Path(args.keep or tempfile.mkdtemp(prefix="tune_faults_"))
    root.mkdir(parents=True, exist_ok=True)
    if args.study is None:
        from dockbench import scenarios

        path = root / "kill_study.yaml"
        path.write_text(BUILTIN.format(base=Path(scenarios.__path__[0]) / "iiwa14_docking.yaml"))
        args.study = str(path)
    study = load_study(args.study)
    budget = args.candidates or study.candidates
    cmd = [sys.executable, "-m", "dockbench.experiments.tune", args.study, "--candidates", str(budget), "--jobs",
           str(args.jobs), "--no-shipped", "--no-progress"]
    killed_out = root / "killed"
    env = child_env()
    log = []
    target = 1
    for k in range(args.kills):
        proc = subprocess.Popen([*cmd, "--out", str(killed_out)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        db = killed_out / study.name / "study.db"
        while _finished(db, study.name) < target and proc.poll() is None:
            time.sleep(0.2)
        if proc.poll() is not None:
            print(f"kill {k + 1}: the study finished before the kill (budget too small for {args.kills} kills)")
            break
        time.sleep(float(rng.uniform(0.0, args.max_delay)))
        before = _finished(db, study.name)
        kids = _children(proc.pid)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()
        time.sleep(5.0)
        alive = [p for p in kids if _alive(p)]
        running = sum(c["state"] == "RUNNING" for c in _candidates(killed_out / study.name, study.name))
        mid = before < budget
        log.append({"kill": k + 1, "finished_before": before, "running_left": running, "workers_alive_5s": len(alive),
                    "mid_study": mid})
        print(f"kill {k + 1}: SIGKILL with {before} of {budget} candidates finished, {running} left RUNNING; "
              f"{len(alive)} of {len(kids)} child processes alive 5 s later"
              + ("" if mid else " (after the last candidate: not a mid-study kill)"))
        target = before + 1
    t0 = time.perf_counter()
    done = subprocess.run([*cmd, "--out", str(killed_out)], env=env, capture_output=True, text=True)
    resume_s = time.perf_counter() - t0
    if done.returncode != 0:
        print(done.stderr[-2000:])
        return 2
    ref = subprocess.run([*cmd, "--out", str(root / "reference")], env=env, capture_output=True, text=True)
    if ref.returncode != 0:
        print(ref.stderr[-2000:])
        return 2
    a = _candidates(killed_out / study.name, study.name)
    b = _candidates(root / "reference" / study.name, study.name)
    params = [json.dumps(c["params"], sort_keys=True) for c in a]
    lost = max(0, budget - sum(c["state"] in ("COMPLETE", "PRUNED") for c in a))
    duplicated = len(params) - len(set(params))
    extra = max(0, len(a) - budget)
    n_trials = study.campaign.n_trials
    twice = 0
    short = 0
    for c in a:
        folder = killed_out / study.name / "candidates" / f"c{c['number']:04d}"
        records = list((folder / "trials").glob("*/*/trial.json"))
        ids = [json.loads(p.read_text())["row"]["trial"] for p in records]
        twice += len(ids) - len(set(ids))
        short += c["state"] == "COMPLETE" and len(ids) != n_trials
    equal = a == b
    print(f"after {len(log)} kills and a resume ({resume_s:.1f} s): {len(a)} candidates in the database, "
          f"lost {lost}, duplicated {duplicated} (extra {extra}), trials recorded twice {twice}, complete "
          f"candidates missing trials {short}; equal to the uninterrupted study: {equal}")
    print(f"folders: {root}")
    mids = sum(e["mid_study"] for e in log)
    alive = sum(e["workers_alive_5s"] for e in log)
    print(f"mid-study kills {mids} of {args.kills}; child processes alive 5 s after a kill: {alive}")
    return 0 if (lost == duplicated == extra == twice == short == alive == 0 and equal and mids == args.kills) else 2


if __name__ == "__main__":
    raise SystemExit(main())
