"""Throughput of the Gymnasium environment (dockbench/gym.py; docs/gym.md, "Throughput").

    python experiments/gym_bench.py [--scenario iiwa14_docking] [--seconds 2.0] [--vector 2]
    python experiments/gym_bench.py --vector-rounds 5 [--vector 2] [--rates 50 5]

Prints, for the policy at 50 Hz (``--policy-rate``) with a zero impedance action (the law alone): env steps per
second and simulated seconds per wall second in this process; the wall time of a plain ``simulate`` of the
same rollout (the same drawn scenario and number of control steps) and the env layer's overhead over it;
and the throughput of gymnasium's AsyncVectorEnv with ``--vector`` worker processes. Builds (``reset``) are
timed apart. Pin to one core with ``taskset -c 0`` for the one-core numbers.

``--vector-rounds R``: one process against gymnasium's AsyncVectorEnv of ``--vector`` processes, interleaved:
for each policy rate of ``--rates``, R rounds that each time one episode in this process and one episode per
worker of the vector env (the order alternating from round to round; the workers started and every episode
reset outside the timed part), and the medians over the rounds of the env steps per second and simulated
seconds per wall second (the vector env's summed over its workers). Not pinned: the vector env is meant to
use every core.
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
    ap.add_argument("--vector-rounds", type=int, default=0,
                    help="interleaved rounds of one process against the vector env (0: the default report)")
    ap.add_argument("--rates", type=float, nargs="+", default=[50.0, 5.0],
                    help="policy rates of --vector-rounds [Hz]")
    args = ap.parse_args(argv)
    if args.vector_rounds > 0:
        _vector_rounds(args)
        return
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


def _vector_rounds(args) -> None:
    import os
    import statistics

    from gymnasium.vector import AsyncVectorEnv

    k = max(1, args.vector)
    load0 = os.getloadavg()
    print(f"scenario {args.scenario}, {args.seconds:g} simulated s per episode, AsyncVectorEnv of {k} processes "
          f"against one process, {args.vector_rounds} interleaved rounds per rate, on {os.cpu_count()} cores")
    for rate in args.rates:
        env = _env(args.scenario, args.seconds, rate)
        zero = np.zeros(env.action_space.shape)
        venv = AsyncVectorEnv([lambda rate=rate: _env(args.scenario, args.seconds, rate)] * k)
        za = np.zeros((k, *env.action_space.shape))
        env.reset(seed=0)
        n_pol = env.n_steps // env.steps_per_action  # policy steps of an episode
        one: list[tuple[float, float]] = []
        vec: list[tuple[float, float]] = []
        try:
            for r in range(args.vector_rounds):
                for which in ((0, 1) if r % 2 == 0 else (1, 0)):
                    if which == 0:
                        env.reset(seed=r)
                        t0 = time.perf_counter()
                        for _ in range(n_pol):
                            env.step(zero)
                        wall = time.perf_counter() - t0
                        one.append((n_pol / wall, n_pol * env.policy_period / wall))
                    else:
                        venv.reset(seed=[r * k + j for j in range(k)])
                        t0 = time.perf_counter()
                        for _ in range(n_pol):
                            venv.step(za)  # one episode per worker (its autoreset would be the step after)
                        wall = time.perf_counter() - t0
                        n = n_pol * k
                        vec.append((n / wall, n * env.policy_period / wall))
        finally:
            venv.close()
        for name, acc in (("one process", one), (f"AsyncVectorEnv x{k}", vec)):
            st, ss = [a for a, _ in acc], [b for _, b in acc]
            print(f"  {rate:g} Hz  {name:18s} median {statistics.median(st):8.1f} env steps/s  "
                  f"{statistics.median(ss):7.3f} sim s per wall s  (range {min(ss):.3f}–{max(ss):.3f})")
        ratio = [v[1] / o[1] for o, v in zip(one, vec, strict=True)]
        print(f"  {rate:g} Hz  vector / one process: median {statistics.median(ratio):.2f}× "
              f"(range {min(ratio):.2f}–{max(ratio):.2f}×)")
    load1 = os.getloadavg()
    print(f"load average {load0[0]:.2f} before, {load1[0]:.2f} after")


if __name__ == "__main__":
    main()
