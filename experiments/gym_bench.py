"""Throughput of the Gymnasium environment (dockbench/gym.py; docs/gym.md, "Throughput").

    python experiments/gym_bench.py [--scenario iiwa14_docking] [--seconds 2.0] [--vector 2]

Prints, for the policy at 50 Hz (``--policy-rate``) with a zero impedance action (the law alone): env steps per
second and simulated seconds per wall second in this process; the wall time of a plain ``simulate`` of the
same rollout (the same drawn scenario and number of control steps) and the env layer's overhead over it;
and the throughput of gymnasium's AsyncVectorEnv with ``--vector`` worker processes. Builds (``reset``) are
timed apart. Pin to one core with ``taskset -c 0`` for the one-core numbers.
"""

from __future__ import annotations

import time

import numpy as np

from dockbench.cli import ArgumentParser


def _env(scenario: str, seconds: float, rate: float = 50.0):
    from dockbench.gym import DockingEnv

    return DockingEnv(scenario, max_time=seconds, policy_rate=rate,
                      reward={"seat_hold": None, "jam": False, "force_limit": 1e9})


def main(argv: list[str] | None = None) -> None:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="iiwa14_docking")
    ap.add_argument("--seconds", type=float, default=2.0, help="simulated seconds per episode")
    ap.add_argument("--vector", type=int, default=2, help="worker processes of the vector env (0: skip)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--policy-rate", type=float, default=50.0, help="policy steps per second [Hz]")
    args = ap.parse_args(argv)
    from dockbench.sim.loop import build, simulate

    env = _env(args.scenario, args.seconds, args.policy_rate)
    zero = np.zeros(env.action_space.shape)
    best_env = best_sim = np.inf
    for r in range(args.repeats):
        env.reset(seed=r)
        steps = 0
        t0 = time.perf_counter()
        while not env.done:
            env.step(zero)
            steps += 1
        wall = time.perf_counter() - t0
        best_env = min(best_env, wall)
        setup = build(env.scenario)
        n = env.i
        t0 = time.perf_counter()
        simulate(setup, (n - 1) * env.scenario.sim.control_period)
        best_sim = min(best_sim, time.perf_counter() - t0)
    sim_s = env.i * env.scenario.sim.control_period
    print(f"scenario {args.scenario}: {steps} env steps of {env.policy_period * 1e3:.0f} ms ({env.i} control steps, "
          f"{sim_s:.2f} s simulated), best of {args.repeats}")
    print(f"  env:      {best_env:.3f} s wall  {steps / best_env:8.1f} env steps/s  "
          f"{sim_s / best_env:.3f} sim s per wall s")
    print(f"  simulate: {best_sim:.3f} s wall  {sim_s / best_sim:.3f} sim s per wall s")
    print(f"  env layer overhead over simulate: {100.0 * (best_env / best_sim - 1.0):+.1f} %")
    t0 = time.perf_counter()
    env.reset(seed=0)
    print(f"  reset (draw + build): {time.perf_counter() - t0:.3f} s")
    if args.vector > 0:
        from gymnasium.vector import AsyncVectorEnv

        k = args.vector
        venv = AsyncVectorEnv([lambda: _env(args.scenario, args.seconds, args.policy_rate)] * k)
        try:
            venv.reset(seed=list(range(k)))
            za = np.zeros((k, *env.action_space.shape))
            total = 0
            t0 = time.perf_counter()
            for _ in range(steps):  # one episode per worker (autoreset after it is not counted)
                venv.step(za)
                total += k
            wall = time.perf_counter() - t0
        finally:
            venv.close()
        print(f"  AsyncVectorEnv x{k}: {wall:.3f} s wall  {total / wall:8.1f} env steps/s  "
              f"{total * env.policy_period / wall:.3f} sim s per wall s (all workers)")


if __name__ == "__main__":
    main()
