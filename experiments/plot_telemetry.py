"""Turn a run folder into figures (written into the run folder), or overlay several runs.

    python experiments/plot_telemetry.py RUN_DIR [--format png,pdf]
    python experiments/plot_telemetry.py RUN_A RUN_B [RUN_C ...] [--out DIR]     # e.g. Khatib vs HQP

With one run folder every figure of :data:`telemetry.plots.FIGURES` that applies is written into it.
With several, the overlay figures (:data:`telemetry.plots.COMPARE_FIGURES`: contact force, docking
with gate bounds, tracking error; one colour per run) go to ``--out`` (default ``./compare``). The
figures and their content are listed in :mod:`telemetry.plots`. Exit codes: 0 = written, 1 = error
(message printed, no traceback).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from dockbench.sim.errors import reports_errors

from dockbench.cli import ArgumentParser


def plot_run(run_dir: str | Path, formats: str | Iterable[str] = ("png",)) -> list[Path]:
    """Write every figure of the run in each of ``formats`` into ``run_dir``; return the paths."""
    from dockbench.telemetry.plots import plot_run as _plot_run

    return _plot_run(run_dir, formats)


@reports_errors
def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", nargs="+", help="one or more run folders (runs/<scenario>/<timestamp>)")
    ap.add_argument("--format", default="png", help="comma-separated formats: png, pdf, svg (default png)")
    ap.add_argument("--out", default=None, help="several runs: folder for the overlay figures (default ./compare)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if len(args.run_dir) == 1:
        if args.out is not None:
            from dockbench.telemetry.plots import plot_run as _plot_run

            files = _plot_run(args.run_dir[0], args.format, out_dir=args.out)
        else:
            files = plot_run(args.run_dir[0], args.format)
    else:
        from dockbench.telemetry.plots import plot_compare

        files = plot_compare(args.run_dir, args.out or "compare", args.format)
    wall = time.perf_counter() - t0
    size = sum(f.stat().st_size for f in files)
    for f in files:
        print(f)
    print(f"{len(files)} figures, {size / 1024:.0f} KiB, {wall:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
