"""The G20 hand on MuJoCo and on PhysX side by side: one command stream into both bridges.

Measures, at the design's dt = 1/120 s (docs/hand.md, "PhysX engine"):

* hard write: joint agreement PhysX vs MuJoCo over the stream (max |Δq| [rad]; both without collision
  projection, so they must agree to float32 round-off);
* PD drive: per finger and engine, tracking error (RMS of q − nominal over the stream), settle time (2 %
  band around the goal, or 0.01 rad, whichever is larger) and overshoot (% of the step) after the fist
  command, from the active joints of the finger (worst joint);
* fist interpenetration depth per engine and mode, on the same MuJoCo collision geometry
  (max over contacts of −distance [mm], all collision geoms and the PhysX colliders palm + distal only);
* real-time factors of each bridge (simulated s / wall s, median of ``--repeat`` runs).

Writes a figure (``--figure``, default docs/img/hand_engines.png), the numbers as JSON (``--json``) and,
with ``--clip``, a side-by-side MP4 of a fist/open cycle rendered through the MuJoCo renderer (the PhysX
pose is drawn on the same geometry) with the comparison camera.

Example::

    nice -n 5 python -m dockbench.experiments.hand_engines --json /tmp/hand_engines.json \\
        --figure docs/img/hand_engines.png --clip docs/img/hand_engines.mp4

Needs the physx extra (``pip install 'dockbench[physx]'``); MUJOCO_GL=egl for ``--clip`` without a display.
"""

from __future__ import annotations

import os

if "MUJOCO_GL" not in os.environ and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    os.environ["MUJOCO_GL"] = "egl"

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from dockbench.hand.bridge import BridgeConfig, HandBridge  # noqa: E402
from dockbench.hand.spec import load_spec  # noqa: E402
from dockbench.sim.errors import DockbenchError  # noqa: E402

from dockbench.cli import ArgumentParser  # noqa: E402

DT = 1.0 / 120.0
"""Bridge period of both engines [s] (the design's PhysX step)."""
MJ_PD_SUBSTEPS = 10
"""MuJoCo PD: mj_step substeps per bridge step (timestep 1/1200 s)."""
STREAM = ((0.0, "open"), (0.5, "half_fist"), (1.5, "fist"), (2.5, "open"), (3.5, "fist"))
"""The command stream: (time [s], SDK preset)."""
DURATION = 5.5
"""Stream length [s]."""
FIST_AT = 3.5
"""The PD step response and the fist interpenetration are taken after this command [s]."""
FINGERS = ("thumb", "index", "middle", "ring", "pinky")
SETTLE_FRAC, SETTLE_MIN = 0.02, 0.01
MIN_STEP = 0.05
"""Joints whose fist step is smaller than this [rad] (the finger rolls) do not enter settle/overshoot."""


def make_bridges(mode: str):
    """(MuJoCo bridge without projection, MuJoCo bridge with projection or None, PhysX bridge)."""
    from dockbench.hand import physx_backend as px

    spec = load_spec()
    if mode == "kinematic":
        mj = HandBridge.standalone(BridgeConfig(mode=mode, slew_rad_s=0.0, collision_project=False, dt=DT),
                                   spec, timestep=DT)
        mjp = HandBridge.standalone(BridgeConfig(mode=mode, slew_rad_s=0.0, collision_project=True, dt=DT),
                                    spec, timestep=DT)
    else:
        mj = HandBridge.standalone(BridgeConfig(mode=mode, slew_rad_s=0.0, dt=DT), spec,
                                   timestep=DT / MJ_PD_SUBSTEPS)
        mjp = None
    # limit margin 0: both bridges clip to the model ranges, so their poses are comparable joint by joint
    ph = px.PhysXHandBridge.create(px.config_for(mode, 0.0), spec, px.PhysXOptions(limit_margin=0.0))
    return mj, mjp, ph


def selective_depth(bridge: HandBridge) -> float:
    """Deepest penetration [m] (>= 0) among the PhysX colliders (palm + distal) in the bridge's MuJoCo data."""
    from dockbench.hand.usd import SELECTIVE_COLLIDERS

    m, d = bridge.model, bridge.data
    ids = {mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, n) for n in SELECTIVE_COLLIDERS}
    depth = 0.0
    for c in d.contact[: d.ncon]:
        if c.geom[0] in ids and c.geom[1] in ids:
            depth = max(depth, -float(c.dist))
    return depth


def full_depth(bridge: HandBridge) -> float:
    """Deepest penetration [m] (>= 0) over every hand collision geom pair the model does not exclude."""
    mujoco.mj_kinematics(bridge.model, bridge.data)
    mujoco.mj_collision(bridge.model, bridge.data)
    d = bridge.data
    return max([0.0] + [-float(c.dist) for c in d.contact[: d.ncon]])


def run_stream(bridges, record=None):
    """Feed STREAM to every bridge, step them together; returns per bridge (t, applied, nominal) arrays."""
    n = int(round(DURATION / DT))
    plan = {int(round(t / DT)): p for t, p in STREAM}
    out = [{"q": np.empty((n, 21)), "nom": np.empty((n, 21)), "wall": 0.0} for _ in bridges]
    for b in bridges:
        b.reset("open")
    for k in range(n):
        for i, b in enumerate(bridges):
            if k in plan and not b.command_preset(plan[k]).accepted:
                raise DockbenchError(f"preset {plan[k]} refused")
            t0 = time.perf_counter()
            b.step()
            out[i]["wall"] += time.perf_counter() - t0
            out[i]["q"][k] = b.applied_now
            out[i]["nom"][k] = b.snapshot().nominal
        if record is not None:
            record(k, bridges)
    return out


def step_metrics(trace, spec, t_cmd: float) -> dict[str, dict[str, float]]:
    """Per finger: RMS tracking error over the stream [rad], settle time [s] and overshoot [%] after t_cmd."""
    k0 = int(round(t_cmd / DT))
    q, nom = trace["q"], trace["nom"]
    res = {}
    for f in FINGERS:
        idx = [j.index for j in spec.joints if j.active and j.name.startswith(f)]
        rms = float(np.sqrt(np.mean((q[:, idx] - nom[:, idx]) ** 2)))
        settle, over, final = 0.0, 0.0, 0.0
        for i in idx:
            start, goal = q[k0 - 1, i], nom[-1, i]
            step = goal - start
            final = max(final, abs(float(q[-1, i] - goal)))
            if abs(step) < MIN_STEP:
                continue
            band = max(SETTLE_FRAC * abs(step), SETTLE_MIN)
            err = np.abs(q[k0:, i] - goal)
            outside = np.nonzero(err > band)[0]
            if outside.size and outside[-1] == len(err) - 1:
                t_settle = float("inf")  # still outside the band when the stream ends
            else:
                t_settle = (outside[-1] + 1) * DT if outside.size else 0.0
            settle = max(settle, t_settle)
            over = max(over, float(np.max((q[k0:, i] - goal) * np.sign(step))) / abs(step) * 100.0)
        res[f] = {"tracking_rms_rad": rms, "settle_s": settle, "overshoot_pct": max(over, 0.0),
                  "final_error_rad": final}
    return res


def measure(repeat: int) -> dict:
    spec = load_spec()
    results: dict = {"dt": DT, "stream": [list(s) for s in STREAM], "duration_s": DURATION}
    # ---- hard write
    walls = {"mujoco": [], "mujoco_projected": [], "physx": []}
    for r in range(repeat):
        mj, mjp, ph = make_bridges("kinematic")
        try:
            tr = run_stream([mj, mjp, ph])
            if r == 0:
                dq = np.abs(tr[2]["q"] - tr[0]["q"])
                results["hard_write"] = {
                    "max_abs_dq_rad": float(dq.max()),
                    "max_abs_q_rad": float(np.abs(tr[0]["q"]).max()),
                    "dq_per_step": dq.max(axis=1).tolist(),
                    "fist_depth_mm": {
                        "mujoco (projection)": full_depth(mjp) * 1e3,
                        "mujoco (no projection)": full_depth(mj) * 1e3,
                        "physx (selective colliders)": full_depth(ph) * 1e3,
                    },
                    "fist_depth_palm_distal_mm": {
                        "mujoco (projection)": selective_depth(mjp) * 1e3,
                        "physx (selective colliders)": selective_depth(ph) * 1e3,
                    },
                }
            for key, t in zip(walls, tr, strict=True):
                walls[key].append(t["wall"])
        finally:
            ph.close()
    results["rtf_hard_write"] = {k: DURATION / statistics.median(v) for k, v in walls.items()}
    # ---- PD
    walls = {"mujoco": [], "physx": []}
    for r in range(repeat):
        mj, _, ph = make_bridges("pd")
        try:
            tr = run_stream([mj, ph])
            if r == 0:
                results["pd"] = {
                    "mujoco": step_metrics(tr[0], spec, FIST_AT),
                    "physx": step_metrics(tr[1], spec, FIST_AT),
                    "fist_depth_mm": {"mujoco": full_depth(mj) * 1e3, "physx": full_depth(ph) * 1e3},
                    "index_pip": {"t": (np.arange(len(tr[0]["q"])) * DT).tolist(),
                                  "nominal": tr[0]["nom"][:, spec.joint("index_pip").index].tolist(),
                                  "mujoco": tr[0]["q"][:, spec.joint("index_pip").index].tolist(),
                                  "physx": tr[1]["q"][:, spec.joint("index_pip").index].tolist()},
                }
            walls["mujoco"].append(tr[0]["wall"])
            walls["physx"].append(tr[1]["wall"])
        finally:
            ph.close()
    results["rtf_pd"] = {k: DURATION / statistics.median(v) for k, v in walls.items()}
    return results


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(11, 7.5))
    hw = results["hard_write"]
    t = np.arange(len(hw["dq_per_step"])) * DT
    ax[0, 0].semilogy(t, np.maximum(hw["dq_per_step"], 1e-12), lw=1)
    ax[0, 0].axhline(2.0**-24 * hw["max_abs_q_rad"], color="k", ls="--", lw=0.8, label="float32 half-ulp of max |q|")
    ax[0, 0].set(title="hard write: max |q_PhysX − q_MuJoCo| over 21 joints", xlabel="t [s]", ylabel="[rad]")
    ax[0, 0].legend(loc="lower right", fontsize=8)
    pd = results["pd"]["index_pip"]
    ax[0, 1].plot(pd["t"], pd["nominal"], "k--", lw=1, label="nominal")
    ax[0, 1].plot(pd["t"], pd["mujoco"], lw=1.2, label="MuJoCo PD")
    ax[0, 1].plot(pd["t"], pd["physx"], lw=1.2, label="PhysX PD")
    ax[0, 1].set(title="PD drive: index_pip", xlabel="t [s]", ylabel="[rad]")
    ax[0, 1].legend(fontsize=8)
    x = np.arange(len(FINGERS))
    for k, eng in enumerate(("mujoco", "physx")):
        window = DURATION - FIST_AT
        ax[1, 0].bar(x + (k - 0.5) * 0.38, [min(results["pd"][eng][f]["settle_s"], window) for f in FINGERS], 0.38,
                     label={"mujoco": "MuJoCo", "physx": "PhysX"}[eng])
    ax[1, 0].set(xticks=x, xticklabels=FINGERS, ylabel="settle time [s]",
                 title=f"PD: settle after the fist (band {SETTLE_FRAC:.0%} / {SETTLE_MIN} rad)")
    ax[1, 0].legend(fontsize=8)
    depth = dict(hw["fist_depth_mm"])
    depth.update({f"{k} PD": v for k, v in results["pd"]["fist_depth_mm"].items()})
    ax[1, 1].barh(list(depth), list(depth.values()), color="tab:red")
    ax[1, 1].set(xlabel="deepest penetration in the fist [mm]", title="fist interpenetration (MuJoCo geometry)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def clip(path: Path, fps: int = 30, width: int = 480, height: int = 360) -> int:
    """Render the stream through both bridges side by side (left MuJoCo, right PhysX) to an MP4; frames."""
    import imageio.v2 as imageio
    from dockbench.experiments.g20_bridge import comparison_camera
    from dockbench.hand import physx_backend as px

    slew = 3.0  # [rad/s] so the motion is visible; PhysX: the same per physics step
    mj = HandBridge.standalone(BridgeConfig(mode="kinematic", slew_rad_s=slew, collision_project=True, dt=DT),
                               load_spec(), timestep=DT)
    ph = px.PhysXHandBridge.create(px.config_for("kinematic", slew * DT), load_spec(),
                                   px.PhysXOptions(limit_margin=0.0))
    frames = []
    renderers = []
    try:
        for b in (mj, ph):
            b.model.vis.headlight.ambient[:] = 0.35
            b.model.vis.headlight.diffuse[:] = 0.75
            renderers.append(mujoco.Renderer(b.model, height=height, width=width))
        every = max(1, int(round(1.0 / (fps * DT))))

        def record(k, bridges):
            if k % every:
                return
            row = []
            for r, b in zip(renderers, bridges, strict=True):
                mujoco.mj_forward(b.model, b.data)
                cam = mujoco.MjvCamera()
                comparison_camera(b.model, b.data, cam)
                r.update_scene(b.data, cam)
                row.append(r.render())
            frames.append(np.concatenate(row, axis=1))

        run_stream([mj, ph], record)
    finally:
        for r in renderers:
            r.close()
        ph.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    imageio.mimwrite(str(path), frames, fps=fps, quality=6, macro_block_size=8)
    return len(frames)


def table(results: dict) -> str:
    lines = ["| finger | RMS q−nominal [rad] MuJoCo / PhysX | settle [s] MuJoCo / PhysX | "
             "overshoot [%] MuJoCo / PhysX | final error [rad] MuJoCo / PhysX |", "|---|---|---|---|---|"]
    pd = results["pd"]
    window = DURATION - FIST_AT

    def settle(v: float) -> str:
        return f"> {window:.1f} (not settled)" if not np.isfinite(v) else f"{v:.3f}"

    for f in FINGERS:
        a, b = pd["mujoco"][f], pd["physx"][f]
        lines.append(f"| {f} | {a['tracking_rms_rad']:.3f} / {b['tracking_rms_rad']:.3f} | "
                     f"{settle(a['settle_s'])} / {settle(b['settle_s'])} | "
                     f"{a['overshoot_pct']:.1f} / {b['overshoot_pct']:.1f} | "
                     f"{a['final_error_rad']:.4f} / {b['final_error_rad']:.4f} |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3, help="runs per mode for the real-time factors (median)")
    p.add_argument("--json", type=Path, default=None, help="write the numbers here")
    p.add_argument("--figure", type=Path, default=Path("docs/img/hand_engines.png"), help="figure path")
    p.add_argument("--clip", type=Path, default=None, help="also render a side-by-side MP4 here")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from dockbench.hand.physx_backend import physx_available

    reason = physx_available()
    if reason is not None:
        print(f"error: {reason}", file=sys.stderr)
        return 1
    if args.repeat < 1:
        print("error: --repeat must be >= 1", file=sys.stderr)
        return 1
    try:
        res = measure(args.repeat)
        plot(res, args.figure)
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(res, indent=1))
        hw = res["hard_write"]
        print(f"hard write: max |q_PhysX - q_MuJoCo| = {hw['max_abs_dq_rad']:.3e} rad "
              f"(max |q| {hw['max_abs_q_rad']:.3f} rad; float32 half-ulp {2.0**-24 * hw['max_abs_q_rad']:.2e})")
        print("fist depth [mm]: " + ", ".join(f"{k} {v:.2f}" for k, v in hw["fist_depth_mm"].items())
              + "; PD: " + ", ".join(f"{k} {v:.2f}" for k, v in res["pd"]["fist_depth_mm"].items()))
        print("fist depth among palm + distal only [mm]: "
              + ", ".join(f"{k} {v:.2f}" for k, v in hw["fist_depth_palm_distal_mm"].items()))
        print("real-time factor, hard write: " + ", ".join(f"{k} {v:.1f}" for k, v in res["rtf_hard_write"].items())
              + "; PD: " + ", ".join(f"{k} {v:.1f}" for k, v in res["rtf_pd"].items()))
        print(table(res))
        print(f"figure: {args.figure}")
        if args.clip is not None:
            n = clip(args.clip)
            print(f"clip: {args.clip} ({n} frames)")
    except DockbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
