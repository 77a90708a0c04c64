"""Rerun every shipped scenario in two fresh processes and compare the telemetry bit for bit.

    python experiments/check_determinism.py                  # every scenarios/**/*.yaml (but the campaign files)
    python experiments/check_determinism.py scenarios/fr3_docking_hqp.yaml
    python experiments/check_determinism.py --record ref/    # one run per scenario, kept in ref/ (before a change)
    python experiments/check_determinism.py --against ref/   # one run per scenario, compared with ref/ (after it)

``--record`` and ``--against`` check a change that must not move any number (a refactor, a speed-up): record
the reference on the commit before the change, check against it after (in the same checkout or another one:
the reference folder holds the run folders, keyed by the scenario's path below scenarios/).

Each scenario runs twice through ``experiments/run_docking.py`` (new interpreter each time, so no
state carries over), and the two run folders are compared with :func:`telemetry.run.first_difference`
(every channel, every step, every bit; NaN equals NaN, 0.0 differs from -0.0). Wall-clock diagnostics
are not telemetry (they are in timing.npz) and are not compared. Exits 1 if any scenario differs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from dockbench.cli import ArgumentParser, child_env

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    from dockbench.telemetry.run import Run, first_difference

    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*",
                    help="scenario files (default: scenarios/**/*.yaml but scenarios/campaigns/ and studies/)")
    ap.add_argument("--record", metavar="DIR", default=None,
                    help="run each scenario once and keep its run folder in DIR (a reference for --against)")
    ap.add_argument("--against", metavar="DIR", default=None,
                    help="run each scenario once and compare it with the run folder --record kept in DIR")
    args = ap.parse_args(argv)
    if args.record and args.against:
        ap.error("--record and --against exclude each other")
    from dockbench.sim.scenario import NOT_SCENARIO_FOLDERS

    files = [Path(p) for p in args.scenarios] or sorted(
        p for p in (REPO / "scenarios").rglob("*.yaml")
        if p.relative_to(REPO / "scenarios").parts[0] not in NOT_SCENARIO_FOLDERS
    )
    env = child_env({**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    bad = 0
    runs = 1 if (args.record or args.against) else 2
    what = "the reference in " + args.against if args.against else "two fresh processes"
    with tempfile.TemporaryDirectory(prefix="dockbench_determinism_") as tmp:
        for f in files:
            key = _key(f)
            dirs = []
            if args.against:
                ref = Path(args.against) / key
                found = [d for d in ref.glob("*/*") if d.is_dir()]
                if not found:
                    print(f"{key}: no reference run in {ref} (record it with --record)")
                    bad += 1
                    continue
                dirs.append(found[0])
            for k in range(runs):
                out = Path(args.record) / key if args.record else Path(tmp) / f"{f.stem}_{k}"
                p = subprocess.run([sys.executable, str(REPO / "experiments" / "run_docking.py"), "--scenario", str(f),
                                    "--out", str(out), "--no-progress"], env=env, capture_output=True, text=True)
                if p.returncode not in (0, 2):
                    print(f"{f.name}: run {k} failed (rc {p.returncode}): {p.stderr.strip()[-300:]}")
                    bad += 1
                    break
                dirs.append(next(d for d in out.glob("*/*") if d.is_dir()))
            if args.record:
                print(f"{key:48s} recorded")
                continue
            if len(dirs) < 2:
                continue
            a, b = Run.load(dirs[0]), Run.load(dirs[1])
            diff = first_difference(a, b)
            n = len(a.t)
            print(f"{key:48s} {n:6d} steps × {len(a.channels)} channels: "
                  f"{'bit-identical' if diff is None else 'DIFFERS: ' + diff}")
            bad += diff is not None
    if args.record:
        print(f"{len(files) - bad}/{len(files)} scenarios recorded in {args.record}")
    else:
        print(f"{len(files) - bad}/{len(files)} scenarios bit-identical with {what}")
    return 1 if bad else 0


def _key(f: Path) -> str:
    """The reference folder's name for a scenario file: its path below scenarios/ (else its name)."""
    f = f.resolve()
    try:
        rel = f.relative_to(REPO / "scenarios")
    except ValueError:
        rel = Path(f.name)
    return rel.with_suffix("").as_posix().replace("/", "__")


if __name__ == "__main__":
    raise SystemExit(main())
