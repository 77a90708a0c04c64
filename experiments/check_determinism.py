"""Rerun every shipped scenario in two fresh processes and compare the telemetry bit for bit.

    python experiments/check_determinism.py                  # every scenarios/**/*.yaml (but the campaign files)
    python experiments/check_determinism.py scenarios/fr3_docking_hqp.yaml

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
    args = ap.parse_args(argv)
    from dockbench.sim.scenario import NOT_SCENARIO_FOLDERS

    files = [Path(p) for p in args.scenarios] or sorted(
        p for p in (REPO / "scenarios").rglob("*.yaml")
        if p.relative_to(REPO / "scenarios").parts[0] not in NOT_SCENARIO_FOLDERS
    )
    env = child_env({**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    bad = 0
    with tempfile.TemporaryDirectory(prefix="dockbench_determinism_") as tmp:
        for f in files:
            dirs = []
            for k in range(2):
                out = Path(tmp) / f"{f.stem}_{k}"
                p = subprocess.run([sys.executable, str(REPO / "experiments" / "run_docking.py"), "--scenario", str(f),
                                    "--out", str(out), "--no-progress"], env=env, capture_output=True, text=True)
                if p.returncode not in (0, 2):
                    print(f"{f.name}: run {k} failed (rc {p.returncode}): {p.stderr.strip()[-300:]}")
                    bad += 1
                    break
                dirs.append(next(d for d in out.glob("*/*") if d.is_dir()))
            if len(dirs) < 2:
                continue
            a, b = Run.load(dirs[0]), Run.load(dirs[1])
            diff = first_difference(a, b)
            n = len(a.t)
            print(f"{f.name:42s} {n:6d} steps × {len(a.channels)} channels: "
                  f"{'bit-identical' if diff is None else 'DIFFERS: ' + diff}")
            bad += diff is not None
    print(f"{len(files) - bad}/{len(files)} scenarios bit-identical across two fresh processes")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
