"""Wall time of one projected G20 bridge step during a fist closure (goal: worst case ≤ 1 ms).

Runs the standalone kinematic bridge (dt = 1 ms, slew 5 rad/s, collision projection on) from OPEN
to a closing command and times every ``HandBridge.step()`` with ``time.perf_counter_ns``; the
statistics are over the steps whose candidate penetrated (``StepResult.projected``), i.e. the steps
that ran the per-joint projection. Closures:

* ``full``: SDK all 0 (every joint to its closed end: fingertips into the palm, thumb through it);
* ``fist``: the vendor G20 fist preset.

Usage::

    python -m dockbench.experiments.bench_hand [--steps 1000] [--repeat 3]
"""

from __future__ import annotations

import gc
import time

import numpy as np
from dockbench.hand.bridge import BridgeConfig, HandBridge

from dockbench.cli import ArgumentParser

CLOSURES = {"full": [0] * 20, "fist": "fist"}


def bench(bridge: HandBridge, target, steps: int) -> dict[str, np.ndarray]:
    """Time ``steps`` bridge steps from OPEN toward ``target`` (SDK list or preset name)."""
    bridge.reset("open")
    res = bridge.command_preset(target) if isinstance(target, str) else bridge.command_sdk(target)
    assert res.accepted, res.reason
    wall = np.empty(steps)
    projected = np.zeros(steps, dtype=bool)
    evals = np.zeros(steps, dtype=int)
    for k in range(steps):
        t0 = time.perf_counter_ns()
        r = bridge.step()
        wall[k] = (time.perf_counter_ns() - t0) * 1e-9
        projected[k] = r.projected
        evals[k] = r.evaluations
    return {"wall": wall, "projected": projected, "evals": evals}


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=1000, help="steps per closure run (1 ms each)")
    p.add_argument("--repeat", type=int, default=5, help="runs per closure (identical, deterministic work)")
    args = p.parse_args(argv)
    bridge = HandBridge.standalone(BridgeConfig(), timestep=0.001)
    print(
        f"bridge: kinematic, dt {bridge.dt * 1e3:.1f} ms, slew {bridge.config.slew_rad_s} rad/s, "
        f"{bridge.config.bisections} bisections, tol {bridge.config.penetration_tol_m * 1e3} mm; "
        f"{args.repeat} runs x {args.steps} steps per closure"
    )
    worst_filtered = 0.0
    for name, target in CLOSURES.items():
        runs = []
        gc.collect()
        gc.disable()
        try:
            for _ in range(args.repeat):
                runs.append(bench(bridge, target, args.steps))
        finally:
            gc.enable()
        wall = np.stack([r["wall"] for r in runs]) * 1e3  # (repeat, steps) [ms]
        proj = runs[0]["projected"]
        evals = runs[0]["evals"]
        # every run does the same work step by step, so the per-step minimum over the runs removes
        # scheduler noise of the shared machine; the raw maximum is reported as well
        best = wall.min(axis=0)[proj]
        raw = wall[:, proj]
        worst_filtered = max(worst_filtered, float(best.max()))
        print(
            f"{name:5s}: {int(proj.sum())}/{args.steps} steps projected; projected step median "
            f"{np.median(raw):.3f} ms, p99 {np.percentile(raw, 99):.3f} ms, worst {best.max():.3f} ms "
            f"(per-step best of {args.repeat}; raw worst incl. scheduler noise {raw.max():.3f} ms); "
            f"collision evaluations median {int(np.median(evals[proj]))}, max {evals[proj].max()}"
        )
    verdict = "within" if worst_filtered <= 1.0 else "OVER"
    print(f"worst projected step {worst_filtered:.3f} ms ({verdict} the 1 ms goal)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
