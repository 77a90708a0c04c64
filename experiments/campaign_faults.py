"""Fault injection and fuzzing of the campaign tool (issue 36): worker and driver kills, two drivers at once,
damaged trial records on resume, a full disk, and seeded mutations of campaign files.

    python experiments/fault_injection.py campaign --trials 20 --seed 1       # every measurement below
    python experiments/campaign_faults.py worker-kill --trials 20 --seed 1
    python experiments/campaign_faults.py driver-kill --trials 10 --seed 1
    python experiments/campaign_faults.py two-drivers --trials 3
    python experiments/campaign_faults.py corrupt                              # every damage kind, in-process
    python experiments/campaign_faults.py files --trials 300 --seed 36         # seeded campaign-file mutations
    python experiments/campaign_faults.py diskfull --trials 6 --seed 1         # needs root (mounts a tmpfs)

``worker-kill``: a campaign of 12 short trials on 2 workers (the CLI, a subprocess); after a random delay one
worker gets SIGKILL. Passes when the driver exits within the time limit (else: a hang), with exit code 0,
no traceback, and results.csv holding every trial once.

``driver-kill``: the same campaign; once its workers are up and after a random delay the driver gets
SIGKILL. Passes when, 5 s later, none of its workers (nor the resource tracker) is alive; then the same
command is rerun and must finish every trial (ran + skipped = all, no trial twice in results.csv).

``two-drivers``: a second driver started on the folder while the first runs must exit 1 with a message
naming the first's pid; the first must finish with exit code 0.

``corrupt``: each kind of :data:`CORRUPTIONS` damages one finished trial (fake trials in this process, so
it takes seconds); the rerun must raise nothing, name that trial among the damaged ones and run it again —
and only it (0 tracebacks, 0 silent acceptances).

``files``: :func:`campaign_file_cases` mutated campaign files; each must load (and, up to 50 trials, run
with fake trials), or give a ScenarioError whose message starts with the file's path (the campaign's or the
base scenario's) — never another exception.

Prints one line per trial and a summary line per mode; exits 1 if anything failed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dockbench.cli import ArgumentParser

REPO = Path(__file__).resolve().parent.parent
CLI = REPO / "experiments" / "campaign.py"
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
#: the seconds a driver gets before it counts as hung
HANG_S = 240.0


# ------------------------------------------------------------------------------ fake trials (fast)
def fake_trial(task: Any) -> Any:
    """A trial without the simulation (for tests of the driver: milliseconds each). Environment:
    ``DOCKBENCH_FAULT_KILL`` = trial ids whose worker kills itself every time; ``DOCKBENCH_FAULT_KILL_ONCE``
    = trial ids whose worker kills itself the first time (a marker file in ``DOCKBENCH_FAULT_DIR``);
    ``DOCKBENCH_FAULT_SLEEP`` = seconds each trial sleeps. The message is the ``sim`` package this worker
    imported (tests check that a worker runs the driver's code)."""
    import numpy as np
    from dockbench.sim.campaign.trial import TrialResult, encode_npz

    from dockbench import sim

    tid = task.trial_id
    if tid in os.environ.get("DOCKBENCH_FAULT_KILL", "").split(","):
        os.kill(os.getpid(), signal.SIGKILL)
    if tid in os.environ.get("DOCKBENCH_FAULT_KILL_ONCE", "").split(","):
        marker = Path(os.environ["DOCKBENCH_FAULT_DIR"]) / (tid.replace("/", "__") + ".killed")
        if not marker.exists():
            marker.write_text("")
            os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(float(os.environ.get("DOCKBENCH_FAULT_SLEEP", "0") or 0))
    k = float(task.scenario.get("controller", {}).get("k", 0.0))
    tel = encode_npz({"t": np.arange(50) * 1e-3, "q": np.full((50, 7), k)}) if task.keep == "all" else None
    return TrialResult(tid, "completed", "PASS", str(Path(sim.__file__).resolve().parent),
                       metrics={"contact.peak_force_truth": k / 100.0}, summary={"status": "completed", "k": k},
                       meta={"seed": task.scenario.get("sim", {}).get("seed")}, telemetry=tel,
                       timing={"loop_s": 0.001, "trial_s": 0.002, "sim_s": 0.05, "encode_s": 0.0},
                       worker=f"fake:{os.getpid()}")


class FakeInline:
    """The in-process executor running :func:`fake_trial`."""

    name = "inline"
    workers = 1
    restarts = 0

    def run(self, tasks, fn=None):
        for task in tasks:
            yield fake_trial(task)

    def close(self) -> None:
        pass


def fake_pool(jobs: int = 2):
    """A local process pool running :func:`fake_trial`."""
    from dockbench.sim.campaign.executors import ProcessExecutor

    class FakePool(ProcessExecutor):
        def run(self, tasks, fn=None):
            return super().run(tasks, fake_trial)

    return FakePool(jobs)


def campaign_file(folder: Path, name: str = "faults", *, k: list[Any] | None = None, repeats: int = 2,
                  duration: float = 0.2, telemetry: str = "none", **extra: Any) -> Path:
    """A small campaign file: ``k`` values × ``repeats`` trials of ``duration`` s."""
    import yaml

    data = {"name": name, "base": str(REPO / "scenarios" / "iiwa14_docking.yaml"),
            "set": {"sim.duration": duration, "gates": []},
            "axes": [{"key": "controller.k", "values": k or [200, 300, 400, 500, 600, 700], "name": "k"}],
            "repeats": repeats, "telemetry": telemetry, **extra}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# ------------------------------------------------------------------------------ damaged records
def _rewrite(name: str, fn: Callable[[Any], Any]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        p = folder / name
        p.write_text(json.dumps(fn(json.loads(p.read_text()))))
    return damage


def _truncate(name: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        p = folder / name
        p.write_bytes(p.read_bytes()[: max(1, p.stat().st_size // 2)])
    return damage


def _row(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(rec: dict) -> dict:
        change(rec["row"])
        return rec
    return _rewrite("trial.json", edit)


def _file_for_folder(folder: Path) -> None:
    shutil.rmtree(folder)
    folder.write_text("not a folder")


def _file_for_cell(folder: Path) -> None:
    shutil.rmtree(folder.parent)
    folder.parent.write_text("not a folder")


def _dir_for_file(folder: Path) -> None:
    (folder / "trial.json").unlink()
    (folder / "trial.json").mkdir()


#: kinds of damage to a finished trial's folder (name → function of the trial folder); each must be run
#: again on resume and named
CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "trial.json null": lambda f: (f / "trial.json").write_text("null"),
    "trial.json []": lambda f: (f / "trial.json").write_text("[]"),
    "trial.json empty": lambda f: (f / "trial.json").write_text(""),
    "trial.json truncated": _truncate("trial.json"),
    "trial.json not UTF-8": lambda f: (f / "trial.json").write_bytes(b'{"digest": "\xff\xfe"}'),
    "trial.json a folder": _dir_for_file,
    "row without verdict": _row(lambda r: r.pop("verdict")),
    "row metrics not a mapping": _row(lambda r: r.__setitem__("metrics", [1, 2])),
    "row verdict unknown": _row(lambda r: r.__setitem__("verdict", "MAYBE")),
    "row loop_s a string": _row(lambda r: r.__setitem__("loop_s", "fast")),
    "row of another trial": _row(lambda r: r.__setitem__("trial", "k=999/s000r00")),
    "row null": _rewrite("trial.json", lambda rec: {**rec, "row": None}),
    "digest missing": _rewrite("trial.json", lambda rec: {k: v for k, v in rec.items() if k != "digest"}),
    "summary.json deleted": lambda f: (f / "summary.json").unlink(),
    "summary.json truncated": _truncate("summary.json"),
    "meta.json deleted": lambda f: (f / "meta.json").unlink(),
    "telemetry.npz truncated": _truncate("telemetry.npz"),
    "telemetry.npz deleted": lambda f: (f / "telemetry.npz").unlink(),
    "a file where the trial folder belongs": _file_for_folder,
    "a file where the cell folder belongs": _file_for_cell,
}


def corrupt_case(kind: str, tmp: Path) -> list[str]:
    """Run a 4-trial fake campaign, damage trial k=300/s000r00 by ``kind``, rerun: the problems found."""
    from dockbench.sim.campaign import load_campaign, run_campaign

    camp = load_campaign(campaign_file(tmp, k=[200, 300], telemetry="all"))
    out = tmp / "out"
    first = run_campaign(camp, out, FakeInline(), progress=None, figures=False)
    victim = "k=300/s000r00"
    CORRUPTIONS[kind](first.out_dir / "trials" / victim)
    try:
        again = run_campaign(camp, out, FakeInline(), progress=None, figures=False)
    except Exception as exc:  # noqa: BLE001 - a harness reports
        return [f"traceback: {type(exc).__name__}: {exc}"]
    problems = []
    hit = {victim, "k=300/s000r01"} if "cell" in kind else {victim}
    if set(again.damaged) != hit:
        problems.append(f"damaged {sorted(again.damaged)}, expected {sorted(hit)} (silently accepted)")
    if again.ran != len(hit) or again.skipped != 4 - len(hit):
        problems.append(f"ran {again.ran}, skipped {again.skipped}")
    third = run_campaign(camp, out, FakeInline(), progress=None, figures=False)
    if (third.ran, third.skipped, len(third.rows)) != (0, 4, 4) or third.damaged:
        problems.append(f"after the rerun: ran {third.ran}, skipped {third.skipped}, damaged {third.damaged}")
    return problems


def corrupt(tmp: Path) -> int:
    bad = 0
    for i, kind in enumerate(CORRUPTIONS):
        problems = corrupt_case(kind, tmp / f"c{i}")
        bad += bool(problems)
        print(f"corrupt {i:2d} {kind:40s} {'OK (run again, named)' if not problems else 'FAIL ' + '; '.join(problems)}")
    print(f"corrupt: {len(CORRUPTIONS) - bad}/{len(CORRUPTIONS)} damage kinds run again and named "
          f"(0 tracebacks, 0 silent acceptances when all pass)")
    return bad


# ------------------------------------------------------------------------------ campaign-file fuzz
def _deep(n: int) -> Any:
    v: Any = 1
    for _ in range(n):
        v = [v]
    return v


#: raw campaign texts (bytes) that are not YAML mappings a dump could produce
RAW_CASES: dict[str, bytes] = {
    "not UTF-8": b"name: caf\xe9\nbase: x.yaml\n",
    "NUL in the text": b"name: a\x00b\nbase: x.yaml\n",
    "deep nesting (5000 levels)": b"name: d\nbase: x.yaml\nset: {a: " + b"[" * 5000 + b"]" * 5000 + b"}\n",
    "recursive axis values": b"name: r\nbase: BASE\naxes:\n  - {key: controller.k, values: &v [1, *v]}\n",
    "recursive set": b"name: r\nbase: BASE\nset: &s {controller: *s}\n",
    "a billion laughs": b"name: l\nbase: BASE\nset: {a: &a [1,1,1,1,1,1,1,1,1], b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a],"
                       b" c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b], d: [*c,*c,*c,*c,*c,*c,*c,*c,*c]}\n",
    "empty": b"",
    "a list": b"- 1\n- 2\n",
    "tabs": b"name:\tx\n\tbase: y\n",
}

_WEIRD: list[Any] = [None, True, -1, 0, 1e308, float("nan"), "", "x" * 300, "\x00", "a/b", "k?", [], {}, [1, [2, [3]]],
                     {"a": {"b": 1}}, "../../etc", -(2**70), 2**70, "é", _deep(40)]
_KEYS = ["name", "description", "base", "set", "variants", "axes", "samples", "repeats", "seed", "paired",
         "telemetry", "telemetry_budget_mb", "metrics", "figures"]


def campaign_file_cases(n: int, seed: int, base: Path) -> list[tuple[str, bytes]]:
    """``n`` seeded campaign files (label, bytes): a valid campaign with one to three keys, axes or labels
    replaced by odd values, plus :data:`RAW_CASES` (case k of seed s is always the same)."""
    import yaml

    valid = {"name": "fz", "base": str(base), "set": {"sim.duration": 0.05, "gates": []},
             "axes": [{"key": "controller.k", "values": [200, 300], "name": "k"},
                      {"key": "target.belief_offset.position.0", "uniform": {"low": -0.001, "high": 0.001}}],
             "samples": 2, "repeats": 1, "telemetry": "none"}
    out = [(f"raw: {k}", v.replace(b"BASE", str(base).encode())) for k, v in RAW_CASES.items()]
    for k in range(n):
        rng = random.Random(f"{seed}:{k}")
        d = json.loads(json.dumps(valid))
        notes = []
        for _ in range(rng.randint(1, 2)):
            what = rng.random()
            value = rng.choice(_WEIRD)
            if what < 0.3:
                key = rng.choice(_KEYS)
                d[key] = value
                notes.append(f"{key}={value!r}"[:60])
            elif what < 0.5:
                ax = rng.choice(d.get("axes") or [{}]) if isinstance(d.get("axes"), list) else {}
                if isinstance(ax, dict):
                    field = rng.choice(["key", "values", "name", "labels", "range", "uniform", "seed"])
                    ax[field] = value
                    notes.append(f"axes.{field}={value!r}"[:60])
            elif what < 0.7 and isinstance(d.get("axes"), list) and d["axes"]:
                labels = rng.choice([["k?", "k*"], ["A", "a"], ["x" * 200, "y" * 200], ["a__k=1", "b"], ["1/2", "3"],
                                     ["soft", "stiff"], ["é", "ü"]])
                d["axes"][0] = {"key": "controller.k", "values": [200, 300], "name": "k", "labels": labels}
                notes.append(f"labels={labels}"[:60])
            else:  # a valid change: the ok path is exercised too
                key = rng.choice(["values", "repeats", "samples", "name", "telemetry", "description", "variants"])
                if key == "values" and isinstance(d.get("axes"), list) and d["axes"]:
                    d["axes"][0] = {"key": "controller.k", "name": "k",
                                    "values": rng.sample([100, 150, 200, 250, 300, 400], rng.randint(1, 4))}
                elif key in ("repeats", "samples"):
                    d[key] = rng.randint(1, 3)
                elif key == "name":
                    d[key] = rng.choice(["a", "b-c", "x.y", "ünï", "k=1", "a b"])
                elif key == "telemetry":
                    d[key] = rng.choice(["all", "failures", "none"])
                elif key == "variants":
                    d[key] = {"v1": {}, "v2": {"set": {"controller.d": rng.choice([50, 80])}}}
                else:
                    d[key] = rng.choice(["", "ünïcødé", "x" * 500])
                notes.append(f"valid {key}")
        try:
            text = yaml.safe_dump(d, sort_keys=False, allow_unicode=True).encode()
        except (yaml.YAMLError, ValueError, RecursionError):
            text = json.dumps(d, default=str).encode()
        out.append((f"{seed}:{k} " + "; ".join(notes), text))
    return out


def file_case(label: str, text: bytes, tmp: Path) -> tuple[str, str]:
    """Load one campaign file: ('ok' | 'clean error' | 'traceback' | …, detail). A loaded one of up to 50
    trials is run too (fake trials, in this process)."""
    from dockbench.sim.campaign import load_campaign, run_campaign
    from dockbench.sim.errors import ScenarioError

    path = tmp / "fz.yaml"
    path.write_bytes(text)
    try:
        camp = load_campaign(path)
        if camp.n_trials <= 50:  # and run (fake trials: the driver's folders, validation and records)
            rep = run_campaign(camp, tmp / "out", FakeInline(), progress=None, figures=False, fresh=True)
            if len(rep.rows) != camp.n_trials:
                return "lost trials", f"{len(rep.rows)} rows of {camp.n_trials}"
    except ScenarioError as exc:
        msg = str(exc)
        if not exc.file or not msg.startswith(str(exc.file)) or "\n" in msg.strip() and "YAML syntax error" not in msg:
            return "unclear error", msg[:200]
        return "clean error", msg[:200]
    except Exception as exc:  # noqa: BLE001
        return "traceback", f"{type(exc).__name__}: {exc}"[:300] + "\n" + traceback.format_exc()[-600:]
    return "ok", camp.name


def files(trials: int, seed: int, tmp: Path) -> int:
    counts: dict[str, int] = {}
    bad = 0
    for label, text in campaign_file_cases(trials, seed, REPO / "scenarios" / "iiwa14_docking.yaml"):
        kind, detail = file_case(label, text, tmp)
        counts[kind] = counts.get(kind, 0) + 1
        if kind not in ("ok", "clean error"):
            bad += 1
            print(f"FAIL [{kind}] {label}: {detail}")
    print(f"files: {counts} ({bad} failures)")
    return bad


# ------------------------------------------------------------------------------ processes
def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(d.name))
    return out


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def workers_of(pid: int) -> tuple[list[int], list[int]]:
    """(pool workers, other children: the resource tracker) of process ``pid``."""
    kids = [k for k in _children(pid) if alive(k)]
    trackers = [k for k in kids if "resource_tracker" in _cmdline(k)]
    return [k for k in kids if k not in trackers], trackers


def _driver(camp: Path, out: Path, jobs: int = 2, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(CLI), str(camp), "--out", str(out), "--jobs", str(jobs),
                             "--no-figures", "--no-progress", *extra], env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)


def _wait_workers(proc: subprocess.Popen, n: int, limit: float = 120.0) -> list[int]:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit and proc.poll() is None:
        w, _ = workers_of(proc.pid)
        if len(w) >= n:
            return w
        time.sleep(0.05)
    return workers_of(proc.pid)[0]


def _rows(out: Path, name: str) -> list[str]:
    import csv

    path = out / name / "results.csv"
    if not path.is_file():
        return []
    return [r["trial"] for r in csv.DictReader(path.read_text().splitlines())]


def _tracebacks(stderr: str) -> tuple[list[str], list[str]]:
    """The tracebacks in ``stderr``: (ours, foreign). Foreign ones have only ``<string>`` frames, no file of
    dockbench, the standard library or a package: seen on the measuring machine about once in ten worker
    kills (``EOFError`` from ``input()`` at line 28 and ``BrokenPipeError`` at line 36 of a ``-c`` program
    that is neither in this repository nor multiprocessing's; it shares the driver's stderr). The kills'
    outcome is counted either way; foreign tracebacks are reported apart."""
    ours, foreign = [], []
    for block in stderr.split("Traceback (most recent call last):")[1:]:
        frames = [ln for ln in block.splitlines() if ln.strip().startswith("File ")]
        (foreign if frames and all('File "<string>"' in f for f in frames) else ours).append(block.strip())
    return ours, foreign


def worker_kill(trials: int, seed: int, tmp: Path, duration: float) -> int:
    rng = random.Random(seed)
    camp = campaign_file(tmp, "wk", duration=duration)
    n = 12
    hangs = bad = foreigners = 0
    for k in range(trials):
        out = tmp / f"wk{k}"
        proc = _driver(camp, out)
        workers = _wait_workers(proc, 2)
        delay = rng.uniform(0.0, 4.0)
        time.sleep(delay)
        victim = rng.choice(workers) if workers else None
        killed = False
        if victim and alive(victim):
            os.kill(victim, signal.SIGKILL)
            killed = True
        try:
            stdout, stderr = proc.communicate(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            hangs += 1
            print(f"worker-kill {k:2d}: HANG (killed {victim} at {delay:.2f} s)")
            continue
        rows = _rows(out, "wk")
        problems = []
        if proc.returncode != 0:
            problems.append(f"exit {proc.returncode}: {stderr.strip().splitlines()[-1:] if stderr.strip() else ''}")
        ours, foreign = _tracebacks(stderr)
        if ours:
            problems.append("traceback: " + ours[0][:1500])
        if sorted(rows) != sorted(set(rows)) or len(rows) != n:
            problems.append(f"{len(rows)} rows ({len(set(rows))} distinct), expected {n}")
        restarts = json.loads((out / "wk" / "summary.json").read_text())["timing"].get("worker_restarts") \
            if (out / "wk" / "summary.json").is_file() else None
        bad += bool(problems)
        foreigners += bool(foreign)
        print(f"worker-kill {k:2d}: SIGKILL {'sent' if killed else 'not sent (finished)'} at {delay:4.2f} s, exit "
              f"{proc.returncode}, {len(rows)}/{n} trials, pool restarts {restarts}"
              + (f", {len(foreign)} foreign traceback(s) ({foreign[0].splitlines()[-1]})" if foreign else "") + ": "
              f"{'OK' if not problems else 'FAIL ' + '; '.join(problems)}")
    print(f"worker-kill: {hangs} hangs, {bad} other failures in {trials} kills ({foreigners} with a foreign "
          "traceback: the sandbox's helper processes, not dockbench)")
    return hangs + bad


def driver_kill(trials: int, seed: int, tmp: Path, duration: float) -> int:
    rng = random.Random(seed)
    camp = campaign_file(tmp, "dk", duration=duration)
    n = 12
    survivors = bad = 0
    for k in range(trials):
        out = tmp / f"dk{k}"
        proc = _driver(camp, out)
        workers = _wait_workers(proc, 2)
        delay = rng.uniform(0.0, 3.0)
        time.sleep(delay)
        workers, trackers = workers_of(proc.pid)
        if proc.poll() is not None:
            print(f"driver-kill {k:2d}: the campaign finished before the kill (exit {proc.returncode}); not counted")
            continue
        proc.kill()
        proc.communicate()
        time.sleep(5.0)
        left = [p for p in workers + trackers if alive(p)]
        survivors += len(left)
        for p in left:  # clean up after a failure
            os.kill(p, signal.SIGKILL)
        again = subprocess.run([sys.executable, str(CLI), str(camp), "--out", str(out), "--jobs", "2", "--no-figures",
                                "--no-progress"], env=ENV, capture_output=True, text=True, cwd=REPO, timeout=HANG_S)
        rows = _rows(out, "dk")
        problems = [f"{len(left)} of {len(workers)} workers + {len(trackers)} tracker alive 5 s after"] if left else []
        if again.returncode != 0 or len(rows) != n or len(set(rows)) != n:
            problems.append(f"resume: exit {again.returncode}, {len(rows)} rows ({len(set(rows))} distinct)")
        bad += bool(problems)
        print(f"driver-kill {k:2d}: SIGKILL at {delay:4.2f} s with {len(workers)} workers + {len(trackers)} tracker: "
              f"{len(left)} alive 5 s later; resume {len(rows)}/{n}: "
              f"{'OK' if not problems else 'FAIL ' + '; '.join(problems)}")
    print(f"driver-kill: {survivors} processes alive 5 s after the driver's SIGKILL, {bad} failing kills of {trials}")
    return bad


def two_drivers(trials: int, tmp: Path, duration: float) -> int:
    camp = campaign_file(tmp, "td", duration=duration)
    bad = 0
    for k in range(trials):
        out = tmp / f"td{k}"
        first = _driver(camp, out)
        _wait_workers(first, 2)
        second = subprocess.run([sys.executable, str(CLI), str(camp), "--out", str(out), "--jobs", "1", "--no-figures",
                                 "--no-progress"], env=ENV, capture_output=True, text=True, cwd=REPO, timeout=HANG_S)
        stdout, stderr = first.communicate(timeout=HANG_S)
        rows = _rows(out, "td")
        problems = []
        if second.returncode != 1 or f"pid {first.pid}" not in second.stderr:
            problems.append(f"second: exit {second.returncode}, {second.stderr.strip()[-200:]!r}")
        if first.returncode != 0 or len(rows) != 12:
            problems.append(f"first: exit {first.returncode}, {len(rows)} rows")
        bad += bool(problems)
        print(f"two-drivers {k}: second {'refused: ' + second.stderr.strip()[:140] if not problems else ''} "
              f"{'OK' if not problems else 'FAIL ' + '; '.join(problems)}")
    print(f"two-drivers: {trials - bad}/{trials} second drivers refused, first finished")
    return bad


DISK_CHILD = r"""
import sys
from dockbench.experiments.campaign_faults import FakeInline, campaign_file
from dockbench.sim.campaign import load_campaign, run_campaign
from dockbench.sim.errors import DockbenchError
from pathlib import Path
tmp, out = Path(sys.argv[1]), Path(sys.argv[2])
camp = load_campaign(campaign_file(tmp, "df", k=list(range(100, 100 + int(sys.argv[3]))), telemetry="all"))
try:
    rep = run_campaign(camp, out, FakeInline(), progress=None, figures=False, check_disk=False)
    print("completed", len(rep.rows))
except DockbenchError as exc:
    print("error", str(exc))
"""


def diskfull(trials: int, seed: int, tmp: Path) -> int:
    rng = random.Random(seed)
    bad = 0
    mnt = tmp / "mnt"
    mnt.mkdir()
    for k in range(trials):
        size = rng.choice([256 << 10, 512 << 10, 1 << 20])
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], check=True)
        try:
            cells = rng.choice([20, 60, 120])
            proc = subprocess.run([sys.executable, "-c", DISK_CHILD, str(tmp), str(mnt / "out"), str(cells)], env=ENV,
                                  capture_output=True, text=True, cwd=REPO, timeout=HANG_S)
            problems = []
            if proc.returncode != 0 or "Traceback" in proc.stderr:
                problems.append("traceback: " + (proc.stderr.strip().splitlines() or ["?"])[-1])
            line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
            recorded = len(list((mnt / "out" / "df" / "trials").glob("*/*/trial.json")))
            if line.startswith("error") and "rerun the same command to resume" not in line:
                problems.append(f"unclear: {line[:200]}")
            bad += bool(problems)
            print(f"diskfull {k}: tmpfs {size >> 10} KiB, {cells * 2} trials: {line[:150]} [{recorded} recorded] "
                  f"{'OK' if not problems else 'FAIL ' + '; '.join(problems)}")
        finally:
            subprocess.run(["umount", str(mnt)], check=False)
    print(f"diskfull: {trials - bad}/{trials} passed")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("all", "worker-kill", "driver-kill", "two-drivers", "corrupt", "files",
                                     "diskfull"))
    ap.add_argument("--trials", type=int, default=None, help="kills (worker 20, driver 10), drivers 3, files 300")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=0.3, help="each trial's simulated seconds")
    args = ap.parse_args(argv)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="dockbench_campaign_faults_") as tmp_:
        tmp = Path(tmp_)
        if args.mode in ("all", "corrupt"):
            failed += corrupt(tmp / "corrupt")
        if args.mode in ("all", "files"):
            (tmp / "files").mkdir()
            failed += files(args.trials or 300, args.seed, tmp / "files")
        if args.mode in ("all", "two-drivers"):
            failed += two_drivers(args.trials or 3, tmp, args.duration)
        if args.mode in ("all", "worker-kill"):
            failed += worker_kill(args.trials or 20, args.seed, tmp, args.duration)
        if args.mode in ("all", "driver-kill"):
            failed += driver_kill(args.trials or 10, args.seed, tmp, args.duration)
        if args.mode == "diskfull":
            failed += diskfull(args.trials or 6, args.seed, tmp)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
