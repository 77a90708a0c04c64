"""Turn a run folder into figures (written into the run folder).

    python experiments/plot_telemetry.py RUN_DIR [--format png,pdf]

The figures and their content are listed in :mod:`telemetry.plots`. Exit codes: 0 = written,
1 = error (message printed, no traceback).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from pathlib import Path

if __package__ in (None, ""):  # allow `python experiments/plot_telemetry.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.errors import DockbenchError  # noqa: E402


def plot_run(run_dir: str | Path, formats: str | Iterable[str] = ("png",)) -> list[Path]:
    """Write every figure of the run in each of ``formats`` into ``run_dir``; return the paths."""
    from telemetry.plots import plot_run as _plot_run

    return _plot_run(run_dir, formats)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", help="a run folder (runs/<scenario>/<timestamp>)")
    ap.add_argument("--format", default="png", help="comma-separated formats: png, pdf, svg (default png)")
    args = ap.parse_args(argv)
    try:
        t0 = time.perf_counter()
        files = plot_run(args.run_dir, args.format)
        wall = time.perf_counter() - t0
    except DockbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    size = sum(f.stat().st_size for f in files)
    for f in files:
        print(f)
    print(f"{len(files)} figures, {size / 1024:.0f} KiB, {wall:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
