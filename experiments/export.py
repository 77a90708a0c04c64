"""Export a run folder for Foxglove / PlotJuggler (MCAP of ROS 2 messages) or Rerun (.rrd).

    python experiments/export.py RUN_DIR --mcap run.mcap
    python experiments/export.py RUN_DIR --rerun run.rrd [--every 10]

Topics, frames and entities are listed in :mod:`telemetry.export` (docs/live.md). MCAP needs the
``mcap`` extra, Rerun the ``rerun`` extra; a missing one is named with its install command. Exit
codes: 0 = written, 1 = error (message printed, no traceback).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from dockbench.sim.errors import reports_errors

from dockbench.cli import ArgumentParser


@reports_errors
def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", help="a run folder (runs/<scenario>/<timestamp>)")
    ap.add_argument("--mcap", type=Path, default=None, help="write an MCAP file (ROS 2 messages, CDR)")
    ap.add_argument("--rerun", type=Path, default=None, help="write a Rerun recording (.rrd)")
    ap.add_argument("--every", type=int, default=1, help="keep every k-th control step (default 1 = all)")
    ap.add_argument("--prefix", default="/dockbench", help="MCAP topic prefix (default /dockbench)")
    ap.add_argument("--compression", default="zstd", help="MCAP chunk compression: zstd, lz4, none")
    args = ap.parse_args(argv)
    if args.mcap is None and args.rerun is None:
        print("error: nothing to do: give --mcap OUT and/or --rerun OUT.rrd", file=sys.stderr)
        return 1
    from dockbench.telemetry.export import write_mcap, write_rrd
    from dockbench.telemetry.run import Run

    run = Run.load(args.run_dir)
    if args.mcap is not None:
        t0 = time.perf_counter()
        st = write_mcap(run, args.mcap, every=args.every, prefix=args.prefix, compression=args.compression)
        print(f"mcap   {st.path}: {st.messages} messages on {len(st.topics)} topics, "
              f"{st.bytes / 2**20:.1f} MiB, {time.perf_counter() - t0:.2f} s")
    if args.rerun is not None:
        t0 = time.perf_counter()
        st = write_rrd(run, args.rerun, every=args.every)
        print(f"rerun  {st.path}: {len(st.topics)} channels × {len(run.t[::args.every])} steps, "
              f"{st.bytes / 2**20:.1f} MiB, {time.perf_counter() - t0:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
