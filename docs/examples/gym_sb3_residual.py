"""A residual variable-impedance policy trained with stable-baselines3 (docs/gym.md, "Worked example: a learned
residual").

    pip install -e '.[rl]'   # stable-baselines3 and torch (a CPU-only torch wheel is enough: see docs/gym.md)
    python docs/examples/gym_sb3_residual.py --minutes 5 --episodes 20

The task: the round drogue (``iiwa14_docking``, Khatib law, its quintic planner) with a lateral belief error
of ±4 mm per axis, random friction, F/T noise, bias and a one-period sensing delay (the draws of
``gym_spiral_baseline.py``), under a contact-force limit of ``--force-limit`` N (8 N by default): an episode
whose contact force (truth) exceeds it ends with the force penalty. The policy acts in ``impedance`` mode at
50 Hz, so it is a *residual* on top of the scenario's law and planner: the zero action is the hand-tuned law
alone. It outputs a reference offset (±4 mm, ±0.05 rad here) and the Khatib law's stiffness and damping scales
(translational, rotational; [1/4, 4]).

PPO (stable-baselines3) with a small MLP, observations normalised (VecNormalize, the Dict flattened by
MultiInputPolicy), a small initial action spread (log σ = −1.5, so the untrained policy stays near the law),
one environment in this process and one torch thread, trained for ``--minutes`` of wall time. Then the
deterministic policy and the zero action are evaluated on the same held-out seeds (10000 + k), and the
script prints the seat rate, the force-limit ends and the peak contact force of each.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # allow `python docs/examples/gym_sb3_residual.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dockbench.sim.extras import require  # noqa: E402

from dockbench.gym import DockingEnv  # noqa: E402

BELIEF = 0.004
RANDOMIZE = {
    "target.belief_offset.position[0]": {"uniform": {"low": -BELIEF, "high": BELIEF}},
    "target.belief_offset.position[1]": {"uniform": {"low": -BELIEF, "high": BELIEF}},
    "target.friction": {"uniform": {"low": 0.2, "high": 0.5}},
    "tool.friction": {"uniform": {"low": 0.2, "high": 0.5}},
}
NOISE = {"uncertainty": {"ft_noise_std": [0.2, 0.2, 0.2, 0.005, 0.005, 0.005],
                         "ft_bias_std": [0.3, 0.3, 0.3, 0.01, 0.01, 0.01], "sensing_delay": 1}}


def make_env(scenario: str, force_limit: float) -> DockingEnv:
    return DockingEnv(scenario, randomize=RANDOMIZE, overrides=NOISE, record=False,
                      offset_limit=(0.004, 0.05), reward={"force_limit": force_limit})


def evaluate(env: DockingEnv, act, seeds: list[int]) -> dict[str, float]:
    """Episodes on ``seeds`` with ``act(obs) → action``: seat rate, force-limit ends, peak force (truth)."""
    rows = []
    for s in seeds:
        obs, info = env.reset(seed=s)
        while not env.done:
            obs, r, term, trunc, info = env.step(act(obs))
        rows.append((info["end"], info["peak_force_episode"], info["t"]))
    peaks = np.array([p for _, p, _ in rows])
    return {"n": len(rows), "seated": sum(e == "seated" for e, _, _ in rows),
            "force": sum(e == "force" for e, _, _ in rows), "peak_mean": float(peaks.mean()),
            "peak_max": float(peaks.max()), "t_mean": float(np.mean([t for _, _, t in rows])),
            "ends": sorted({e for e, _, _ in rows})}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="iiwa14_docking")
    ap.add_argument("--minutes", type=float, default=5.0, help="training wall time [min]")
    ap.add_argument("--episodes", type=int, default=20, help="evaluation episodes (held-out seeds)")
    ap.add_argument("--force-limit", type=float, default=8.0, help="contact-force limit of the task [N]")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    sb3 = require("stable_baselines3", "rl", "the stable-baselines3 example")
    torch = require("torch", "rl", "the stable-baselines3 example")
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    torch.set_num_threads(1)
    train = VecNormalize(DummyVecEnv([lambda: Monitor(make_env(args.scenario, args.force_limit))]),
                         norm_obs=True, norm_reward=True, clip_obs=10.0)
    train.seed(args.seed)
    model = sb3.PPO("MultiInputPolicy", train, n_steps=1024, batch_size=256, n_epochs=5, learning_rate=3e-4,
                    gamma=0.99, seed=args.seed, device="cpu", verbose=0,
                    policy_kwargs={"net_arch": [64, 64], "log_std_init": -1.5})

    class WallClock(BaseCallback):
        def __init__(self, seconds: float):
            super().__init__()
            self.seconds, self.t0, self.episodes = seconds, time.perf_counter(), []

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    self.episodes.append((info["end"], info["peak_force_episode"], info["episode"]["r"]))
            return time.perf_counter() - self.t0 < self.seconds

    clock = WallClock(60.0 * args.minutes)
    t0 = time.perf_counter()
    model.learn(total_timesteps=10**9, callback=clock)
    wall = time.perf_counter() - t0
    eps = clock.episodes
    print(f"trained {model.num_timesteps} env steps ({len(eps)} episodes) in {wall:.0f} s wall")
    for lo in range(0, len(eps), max(1, len(eps) // 5)):
        chunk = eps[lo : lo + max(1, len(eps) // 5)]
        print(f"  training episodes {lo + 1}–{lo + len(chunk)}: seated {sum(e == 'seated' for e, _, _ in chunk)}"
              f"/{len(chunk)}, force-limit ends {sum(e == 'force' for e, _, _ in chunk)}, "
              f"mean return {np.mean([r for _, _, r in chunk]):.1f}")
    train.training = False
    env = make_env(args.scenario, args.force_limit)

    def policy(obs):
        o = train.normalize_obs({k: v[None] for k, v in obs.items()})
        return model.predict(o, deterministic=True)[0][0]

    seeds = [10000 + k for k in range(args.episodes)]
    print(f"| {args.scenario}, limit {args.force_limit:g} N | seated | force-limit ends | peak force truth [N] "
          "mean / max | episode end [s] mean |")
    print("|---|---|---|---|---|")
    for label, act in (("law alone (zero action)", lambda o: np.zeros(env.action_space.shape)),
                       (f"PPO residual ({args.minutes:g} min)", policy)):
        r = evaluate(env, act, seeds)
        print(f"| {label} | {r['seated']}/{r['n']} | {r['force']} | {r['peak_mean']:.2f} / {r['peak_max']:.2f} | "
              f"{r['t_mean']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
