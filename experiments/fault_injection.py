"""Fault injection against the CLI: signals at random times, and a full disk.

    python experiments/fault_injection.py signals --trials 40 --seed 1
    python experiments/fault_injection.py signals --trials 20 --seed 5 --signals SIGHUP  # terminal closed
    python experiments/fault_injection.py diskfull --trials 20 --seed 1      # needs root (mounts a tmpfs)
    python experiments/fault_injection.py campaign --seed 1                  # the campaign tool (issue 36)

``campaign``: the campaign tool's faults — 20 worker SIGKILLs, 10 driver SIGKILLs, 3 pairs of concurrent
drivers, every kind of damaged trial record, 300 mutated campaign files (``--trials`` sets the kill
counts); experiments/campaign_faults.py runs each on its own and documents the checks.

``signals``: each trial starts ``experiments/run_docking.py`` on a scenario and sends SIGINT, SIGTERM or
SIGHUP (in turn; ``--signals`` picks them) after a random delay, uniform over [0, 1.2 × the wall time of
an undisturbed run], so the signals land in the imports, the build, the control loop, the scoring and
the folder writing. A trial passes when the CLI leaves no traceback, exits 128 + the signal (130/143/129;
or 0/2 when the run finished before the signal), and either no folder (a signal before the first step) or
exactly one run folder that
:meth:`telemetry.run.Run.load` reads, complete (not partial), whose ``t`` channel is the unbroken
sequence 0, T_c, 2 T_c, … of as many steps as meta.json and summary.json record — every step recorded
before the signal. A run folder of an interrupted run must not claim ``complete``. A signal that lands
while the interpreter is still starting (site and .pth imports, ≈ 50–80 ms, before the script's first
line can install a handler) gets Python's own default handling and is counted apart.

``diskfull``: each trial mounts a tmpfs of a random size (64 KiB … 24 MiB) as ``--out``, optionally
with a filler file, runs a scenario through the library with a small telemetry block (so the
telemetry spills to part files) and checks: no traceback; a clear error or a complete run; a folder
left behind is either complete (manifest valid, renamed into place) or ``.partial`` and loads as
partial — never ``complete=True`` for a partial folder.

Prints one line per trial and a summary; exits 1 if any trial failed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dockbench.cli import ArgumentParser, child_env

REPO = Path(__file__).resolve().parent.parent
CLI = REPO / "experiments" / "run_docking.py"
ENV = child_env({**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})


def _cli(scenario: str, out: Path, duration: float) -> list[str]:
    return [sys.executable, str(CLI), "--scenario", scenario, "--out", str(out), "--duration", str(duration),
            "--no-progress"]


def _terminal_session() -> None:
    """In the child: SIGHUP at its default, as in a terminal session (this harness may itself run under
    ``nohup``, whose ignored SIGHUP the CLI would inherit and rightly keep)."""
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def check_folder(folder: Path, *, expect_interrupted: bool) -> list[str]:
    """Problems with one run folder left by an interrupted (or finished) CLI run."""
    import numpy as np
    from dockbench.telemetry.run import Run

    out = []
    try:
        run = Run.load(folder)
    except Exception as exc:  # noqa: BLE001 - a harness reports, it does not raise
        return [f"Run.load failed: {type(exc).__name__}: {exc}"]
    if run.partial:
        out.append(f"partial folder: {run.problems}")
    n = len(run.t)
    T_c = float(run.meta.get("control_period") or run.meta["scenario"]["sim"]["control_period"])
    if n == 0:
        out.append("no steps recorded")
    elif not np.array_equal(run.t, np.arange(n) * T_c):
        out.append("t is not the unbroken sequence of control steps")
    steps_meta = run.meta.get("timing", {}).get("steps")
    steps_summary = run.summary.get("timing", {}).get("steps")
    if steps_meta != n or steps_summary != n:
        out.append(f"{n} rows but meta/summary record {steps_meta}/{steps_summary} steps")
    for name, ch in run.channels.items():
        if len(ch) != n:
            out.append(f"channel {name} has {len(ch)} rows, t has {n}")
    if run.status == "interrupted" and run.complete:
        out.append("an interrupted run claims complete")
    if expect_interrupted and run.status not in ("interrupted", "completed"):
        out.append(f"status {run.status}")
    return out


def signals(trials: int, seed: int, scenario: str, duration: float,
            sigs: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)) -> int:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="dockbench_signals_") as tmp:
        t0 = time.perf_counter()
        ref = subprocess.run(_cli(scenario, Path(tmp) / "ref", duration), env=ENV, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if ref.returncode not in (0, 2):
            print(ref.stderr)
            return 1
        print(f"undisturbed run: {wall:.2f} s wall, rc {ref.returncode}; signals uniform over [0, {1.2 * wall:.2f}] s")
        failed = starts = 0
        phases: dict[str, int] = {}
        for k in range(trials):
            sig = sigs[k % len(sigs)]
            delay = rng.uniform(0.0, 1.2 * wall)
            out = Path(tmp) / f"t{k}"
            proc = subprocess.Popen(_cli(scenario, out, duration), env=ENV, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, preexec_fn=_terminal_session)
            time.sleep(delay)
            sent = proc.poll() is None
            if sent:
                proc.send_signal(sig)
            try:
                stdout, stderr = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
                print(f"trial {k:3d}: HANG after {sig.name} at {delay:.2f} s")
                failed += 1
                continue
            rc = proc.returncode
            problems = []
            allowed = {0, 2, 128 + sig} if sent else {0, 2}
            folders = sorted(p for p in out.glob("*/*") if p.is_dir()) if out.exists() else []
            startup = (not folders and rc in (1, -sig) and str(REPO) not in stderr
                       and (not stderr.strip() or stderr.strip().endswith("KeyboardInterrupt")))
            if startup:
                # the signal came while the interpreter was still starting (site and .pth imports), before
                # the script's first line: Python's own default handling (a KeyboardInterrupt traceback
                # from its start-up code, or death by the signal); nothing had been recorded
                starts += 1
                print(f"trial {k:3d}: {sig.name:7s} at {delay:5.2f} s  rc {rc:3d}  interpreter start-up, "
                      "before dockbench code: nothing recorded")
                continue
            if "Traceback" in stderr:
                problems.append("traceback: " + stderr.strip().splitlines()[-1])
            if rc not in allowed:
                problems.append(f"exit code {rc} (allowed {sorted(allowed)})")
            if len(folders) > 1:
                problems.append(f"{len(folders)} folders")
            phase = "no folder"
            if folders:
                problems += check_folder(folders[0], expect_interrupted=sent)
                try:
                    summary = json.loads((folders[0] / "summary.json").read_text())
                    msg = summary.get("message", "")
                    interrupted = summary.get("status") == "interrupted"
                    phase = ("after the loop" if "after the loop" in msg else "loop" if interrupted
                             else "writing the folder (deferred)" if rc == 128 + sig else "finished before")
                except (OSError, ValueError):
                    phase = "?"
            elif rc == 128 + sig and "nothing was recorded" not in stderr:
                problems.append("no folder and no 'nothing was recorded' message")
            phases[phase] = phases.get(phase, 0) + 1
            failed += bool(problems)
            print(f"trial {k:3d}: {sig.name:7s} at {delay:5.2f} s  rc {rc:3d}  {phase:26s} "
                  f"{'OK' if not problems else 'FAIL ' + '; '.join(problems)}")
        print(f"{trials - failed - starts}/{trials - starts} trials passed; {starts} more landed in the "
              "interpreter's start-up, before any dockbench code (nothing recorded)")
        print(f"where the signal landed: {phases}")
        return 1 if failed else 0


def _mount_tmpfs(path: Path, size: int) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)


def _umount(path: Path) -> None:
    subprocess.run(["umount", str(path)], check=False)


DISK_CHILD = r"""
import json, sys
from pathlib import Path
from dockbench.sim.errors import DockbenchError
from dockbench.sim.loop import run
from dockbench.sim.scenario import load_scenario
from dockbench.telemetry.run import Run
out, scenario, duration, chunk = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
fill_after = float(sys.argv[5])
if fill_after >= 0:  # another process fills the disk while the run is going
    import threading, time
    def fill():
        time.sleep(fill_after)
        try:
            with open(Path(out).parent / "filler_late", "wb") as fh:
                while True:
                    fh.write(b"\0" * 4096)
                    fh.flush()
        except OSError:
            pass
    threading.Thread(target=fill, daemon=True).start()
res = {"outcome": None}
try:
    r = run(load_scenario(scenario), out_root=out, duration=duration, chunk_rows=chunk)
    res["outcome"] = "completed run"
except DockbenchError as exc:
    res["outcome"] = "error: " + str(exc)[:300]
folders = [p for p in Path(out).glob("*/*") if p.is_dir()]
res["folders"] = []
for f in folders:
    try:
        run_ = Run.load(f)
        res["folders"].append({"name": f.name, "partial": run_.partial, "complete": run_.complete,
                               "steps": len(run_.t), "status": run_.status, "problems": run_.problems[:3]})
    except DockbenchError as exc:
        res["folders"].append({"name": f.name, "unloadable": str(exc)[:200]})
print(json.dumps(res))
"""


def diskfull(trials: int, seed: int, scenario: str, duration: float) -> int:
    rng = random.Random(seed)
    failed = 0
    outcomes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="dockbench_disk_") as tmp:
        mnt = Path(tmp) / "mnt"
        mnt.mkdir()
        for k in range(trials):
            size = int(rng.choice([256 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 24 << 20]))
            chunk = rng.choice([200, 1000, 4000, 16384])
            length = rng.choice([0.5, 2.0, duration])
            mode = rng.choice(["none", "before", "during", "during"])
            _mount_tmpfs(mnt, size)
            try:
                fill = rng.uniform(0.0, 0.9) * size if mode == "before" else 0.0
                if fill:
                    with open(mnt / "filler", "wb") as fh:
                        fh.write(b"\0" * int(fill))
                fill_after = rng.uniform(0.0, 1.5) if mode == "during" else -1.0
                proc = subprocess.run([sys.executable, "-c", DISK_CHILD, str(mnt / "runs"), scenario, str(length),
                                       str(chunk), str(fill_after)], env=ENV, capture_output=True, text=True,
                                      timeout=300, cwd=REPO)
                problems = []
                if "Traceback" in proc.stderr or proc.returncode != 0:
                    problems.append("traceback: " + (proc.stderr.strip().splitlines() or ["?"])[-1])
                    res = {"outcome": "crash", "folders": []}
                else:
                    res = json.loads(proc.stdout.strip().splitlines()[-1])
                for f in res["folders"]:
                    if "unloadable" in f:
                        continue  # nothing fitted: a clear error, no telemetry to keep
                    if f["partial"] and f["complete"]:
                        problems.append(f"partial folder {f['name']} claims complete")
                    if f["partial"] != f["name"].endswith(".partial"):
                        problems.append(f"folder {f['name']}: partial={f['partial']}")
                kind = res["outcome"].split(":")[0] if res["outcome"] else "?"
                if res["outcome"] and res["outcome"].startswith("error"):
                    msg = res["outcome"]
                    kind = ("refused before the run (budget)" if "free at" in msg else
                            "--out unusable" if "--out" in msg else "partial folder kept" if "partial" in msg
                            else "error")
                outcomes[kind] = outcomes.get(kind, 0) + 1
                failed += bool(problems)
                folders = ", ".join(f"{f['name'][-14:]} steps={f.get('steps')} partial={f.get('partial')} "
                                    f"complete={f.get('complete')}" for f in res["folders"])
                how = f"filler {int(fill) >> 10:5d} KiB" if mode == "before" else (
                    f"fills at {fill_after:4.2f} s " if mode == "during" else "no filler       ")
                print(f"trial {k:3d}: tmpfs {size >> 10:6d} KiB, {how}, {length:3.1f} s, chunk {chunk:5d}: "
                      f"{kind:34s} [{folders}] {'OK' if not problems else 'FAIL ' + '; '.join(problems)}")
            finally:
                _umount(mnt)
    print(f"{trials - failed}/{trials} trials passed; outcomes: {outcomes}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("signals", "diskfull", "campaign"))
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scenario", default=str(REPO / "scenarios" / "iiwa14_tracking.yaml"))
    ap.add_argument("--duration", type=float, default=None,
                    help="run length [s] (default: 40 for signals, 8 for diskfull)")
    ap.add_argument("--signals", default="SIGINT,SIGTERM,SIGHUP",
                    help="signals mode: the signals sent, in turn (comma-separated names)")
    args = ap.parse_args(argv)
    if args.mode == "campaign":
        from dockbench.experiments.campaign_faults import main as campaign_faults

        return campaign_faults(["all", "--seed", str(args.seed)]
                               + (["--trials", str(args.trials)] if "--trials" in (argv or sys.argv) else []))
    if args.mode == "signals":
        try:
            sigs = tuple(signal.Signals[n.strip().upper()] for n in args.signals.split(",") if n.strip())
        except KeyError as exc:
            ap.error(f"--signals: unknown signal {exc}")
        return signals(args.trials, args.seed, args.scenario, args.duration or 40.0, sigs)
    return diskfull(args.trials, args.seed, args.scenario, args.duration or 8.0)


if __name__ == "__main__":
    raise SystemExit(main())
