"""A scripted baseline policy on the Gymnasium environment (docs/gym.md, "Worked example").

    python docs/examples/gym_spiral_baseline.py --episodes 10

The policy acts in ``impedance`` mode at 50 Hz on top of the scenario's own law and planner:

* free space: no offset, the law's gains (all scales 1);
* from the first contact (‖wrench‖ > 2 N as the F/T pipeline delivers it): an Archimedean spiral of the
  reference in the plane across the believed mating axis (pitch 1 mm per turn, one turn per second, at most
  4 mm), a 2 mm push along the axis, and a stiffness schedule: the translational stiffness halved and the
  translational damping scaled by 1/√2 (the damping ratio kept), the rotational gains unchanged;
* within 1 mm of the believed goal along the axis: the spiral is frozen where it is.

For each scenario it runs ``--episodes`` seeded episodes of the policy and of the zero action (the
hand-tuned law alone) on the same draws (``reset(seed=k)``) and prints the seat rate, the peak contact
force (truth) and the time to the end of the episode.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # allow `python docs/examples/gym_spiral_baseline.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dockbench.gym import DockingEnv  # noqa: E402


class SpiralPolicy:
    """The scripted policy (module docstring). Actions are normalised to [-1, 1] (docs/gym.md, "Actions")."""

    def __init__(self, env: DockingEnv, pitch: float = 0.001, turns_per_s: float = 1.0, r_max: float = 0.004,
                 push: float = 0.002, contact: float = 2.0, k_scale: float = 0.5):
        self.env, self.pitch, self.omega, self.r_max = env, pitch, 2 * math.pi * turns_per_s, r_max
        self.push, self.contact, self.k_scale = push, contact, k_scale
        self.t_contact: float | None = None
        self.frozen: np.ndarray | None = None

    def reset(self) -> None:
        self.t_contact, self.frozen = None, None

    def __call__(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        env = self.env
        a = np.zeros(env.action_space.shape)
        t = float(obs["time"][0])
        if self.t_contact is None and np.linalg.norm(obs["wrench"][:3]) > self.contact:
            self.t_contact = t
        if self.t_contact is None:
            return a
        lim = env.offset_limit[0]
        if self.frozen is None:
            s = t - self.t_contact
            theta = self.omega * s
            r = min(self.pitch * theta / (2 * math.pi), self.r_max)
            xy = np.array([r * math.cos(theta), r * math.sin(theta)])
            if abs(obs["goal_error"][2]) < 0.001:
                self.frozen = xy
        else:
            xy = self.frozen
        a[0:2] = xy / lim
        a[2] = -self.push / lim  # into the target (the believed target's −z)
        n = (len(a) - 6) // 2  # gain scales (Khatib: 2, SE(3) and HQP: 6)
        if n:
            log_r = math.log(env.gain_ratio)
            k = np.zeros(n)
            k[: max(1, n // 2)] = math.log(self.k_scale) / log_r  # translational stiffness
            a[6 : 6 + n] = k
            if type(env.setup.controller).__name__ != "HQPController":  # HQP derives its damping from K_r
                a[6 + n : 6 + 2 * n] = 0.5 * k  # damping ∝ √stiffness
        return a


def episode(env: DockingEnv, seed: int, policy: SpiralPolicy | None) -> dict[str, float]:
    obs, info = env.reset(seed=seed)
    if policy is not None:
        policy.reset()
    zero = np.zeros(env.action_space.shape)
    total = 0.0
    while not env.done:
        obs, r, term, trunc, info = env.step(policy(obs) if policy is not None else zero)
        total += r
    return {"seated": info["end"] == "seated", "peak": info["peak_force_episode"], "t": info["t"],
            "end": info["end"], "return": total}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=10)
    ap.add_argument("--scenario", action="append", help="scenario (repeatable; default: the two below)")
    ap.add_argument("--belief-error", type=float, default=0.004,
                    help="± uniform lateral belief error per axis [m] (default 4 mm)")
    args = ap.parse_args(argv)
    e = args.belief_error
    randomize = {
        "target.belief_offset.position[0]": {"uniform": {"low": -e, "high": e}},
        "target.belief_offset.position[1]": {"uniform": {"low": -e, "high": e}},
        "target.friction": {"uniform": {"low": 0.2, "high": 0.5}},
        "tool.friction": {"uniform": {"low": 0.2, "high": 0.5}},
    }
    noise = {"uncertainty": {"ft_noise_std": [0.2, 0.2, 0.2, 0.005, 0.005, 0.005],
                             "ft_bias_std": [0.3, 0.3, 0.3, 0.01, 0.01, 0.01], "sensing_delay": 1}}
    scenarios = args.scenario or ["iiwa14_docking", "keyed/iiwa14_keyed_khatib"]
    print("| scenario | policy | seated | peak force truth [N] mean / max | episode end [s] mean | wall [s] |")
    print("|---|---|---|---|---|---|")
    for name in scenarios:
        env = DockingEnv(name, randomize=randomize, overrides=noise)
        for label, policy in (("law alone (zero action)", None), ("spiral + stiffness schedule", SpiralPolicy(env))):
            c0 = time.perf_counter()
            rows = [episode(env, k, policy) for k in range(args.episodes)]
            wall = time.perf_counter() - c0
            seated = sum(r["seated"] for r in rows)
            peaks = np.array([r["peak"] for r in rows])
            ends = np.array([r["t"] for r in rows])
            print(f"| {name} | {label} | {seated}/{len(rows)} | {peaks.mean():.2f} / {peaks.max():.2f} | "
                  f"{ends.mean():.2f} | {wall:.0f} |", flush=True)
            others = sorted({r["end"] for r in rows} - {"seated"})
            if others:
                counts = ", ".join(f"{o} ×{sum(r['end'] == o for r in rows)}" for o in others)
                print(f"|  | (ended otherwise: {counts}) | | | | |", flush=True)


if __name__ == "__main__":
    main()
