"""docs/theory/g20_hand.md §2 and §4: the inverse SDK map, and the collision projection's result joint by
joint (the order by |Δ|, the full move or the bisection bracket, the followers riding along).

The projection is re-derived here from the bridge's public state only (the previous pose, the goal, the
slew bound, the joint ranges, the spec's coupling): each trial pose is rebuilt with the same floating-point
operations as the bridge (start + λ Δ), so poses and their contact distances are compared exactly."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
from dockbench.hand.bridge import BridgeConfig, HandBridge
from dockbench.hand.mapping import arc_to_range, joint_positions_to_sdk, range_to_arc, sdk_to_joint_positions
from dockbench.hand.spec import load_spec

from tests.helpers import EPS, assert_within

DT = 0.001  # [s]
TINY = 0.5**12  # the smallest bisection step of the default 12 bisections
# thumb opposed and fully flexed: its distal phalanx would end ≈ 20 mm inside the palm box; the fingers
# close to the half fist at the same time (they can all move)
THUMB_INTO_PALM = {"thumb_cmc_yaw": 0.65, "thumb_cmc_roll": 1.26, "thumb_cmc_pitch": 0.91, "thumb_mcp": 1.0}


@pytest.fixture(scope="module")
def spec():
    return load_spec()


def test_inverse_map_round_trips(spec) -> None:
    """arc_to_range inverts range_to_arc (v = 255 (arc − MIN)/(MAX − MIN), or 255 minus that for DIR −1), and
    joint angles → SDK → joint angles returns the angles (arc = q · r, q = arc / r), at random points.

    Bound: each direction is ≤ 4 roundings of values ≤ 255 or ≤ 2 rad: |Δv| ≤ 8 ε 255 + 8 ε 255 |MAX|/(MAX −
    MIN), |Δq| ≤ 16 ε · 2 rad per round trip (the scaling into 0..255 and back divides out); asserted with
    16× that."""
    rng = np.random.default_rng(81)
    for _ in range(50):
        raw = rng.uniform(0.0, 255.0, 20)
        back = arc_to_range(range_to_arc(raw, spec), spec)
        for c in spec.channels:
            if c.direction == 0:
                continue
            span = c.arc_max - c.arc_min
            bound = 16 * (8 * EPS * 255 + 8 * EPS * 255 * max(abs(c.arc_max), abs(c.arc_min)) / span)
            assert_within(back[c.channel], raw[c.channel], bound, f"channel {c.channel}")
        q = sdk_to_joint_positions(raw, spec)
        q2 = sdk_to_joint_positions(joint_positions_to_sdk(q, spec), spec)
        for name in spec.active_names:
            assert_within(q2[name], q[name], 16 * 16 * EPS * 2.0, name)


def _groups(spec):
    names = spec.joint_names
    out = []
    for j in spec.joints:
        if j.active:
            followers = [names.index(f.name) for f in spec.joints if f.mimic_of == j.name]
            out.append([names.index(j.name), *followers])
    return out


def test_projection_gives_each_joint_the_largest_safe_fraction(spec) -> None:
    """For every projected step of a thumb driven into the palm (while the fingers close), with start = the
    previous pose (safe here) and Δ = cand − start, cand = clip(applied + clip(goal − applied, ±L), lo, hi):

    * joints are processed in order of |Δ| descending (largest of a driver and its followers);
    * each group moved by one fraction λ ∈ [0, 1] of its move, the followers with the same λ
      (q_k = start_k + λ Δ_k, bit for bit);
    * with the groups before it at their final values and those after it at ``start``: the pose at λ is safe
      (min contact distance ≥ −5e-4 m), and for λ < 1 the bracket's other end is not: λ + (1 − 2⁻¹²)/2¹²
      (12 bisections of [2⁻¹², 1]) or 2⁻¹² for λ = 0 penetrates;
    * the result is the pose the bridge applied, and it is safe.

    Every comparison is exact: the same operations on the same numbers (module docstring)."""
    cfg = BridgeConfig()
    b = HandBridge.standalone(cfg, spec, timestep=DT)
    b.reset("open")
    goal_cmd = sdk_to_joint_positions(spec.preset("half_fist"), spec)
    goal_cmd.pop("thumb_ip")
    goal_cmd.update(THUMB_INTO_PALM)
    assert b.command_joints(goal_cmd).accepted
    m = b.model
    d = mujoco.MjData(m)
    qadr = b.qpos_addresses
    lo, hi = b.joint_ranges.T
    ratio = np.array([j.ratio for j in spec.joints])
    L = (cfg.slew_rad_s * b.dt) * np.abs(ratio)
    groups = _groups(spec)
    tol = -cfg.penetration_tol_m

    def dist(q):
        d.qpos[qadr] = q
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        return math.inf if d.ncon == 0 else float(d.contact.dist[: d.ncon].min())

    checked = partial = 0
    for _ in range(400):
        prev = b.snapshot()
        r = b.step()
        if not r.projected:
            continue
        assert not r.fell_back
        applied = b.snapshot().applied
        start = prev.applied
        assert dist(start) >= tol, "the previous pose is safe: the projection starts from it"
        cand = np.clip(start + np.clip(prev.goal - start, -L, L), lo, hi)
        assert dist(cand) < tol, "a projected step had a penetrating candidate"
        delta = cand - start
        gmag = np.array([max(abs(delta[i]) for i in g) for g in groups])
        order = [k for k in np.argsort(-gmag, kind="stable") if gmag[k] > 0.0]
        q = start.copy()
        for k in order:
            g = groups[k]
            i0 = max(g, key=lambda i: abs(delta[i]))
            lam = round((applied[i0] - start[i0]) / delta[i0] * 2**24) / 2**24  # λ is a multiple of 2⁻²⁴
            trial = q.copy()
            for i in g:
                trial[i] = start[i] + lam * delta[i]
            np.testing.assert_array_equal(trial[g], applied[g])  # exact: the same fraction for every member
            assert dist(trial) >= tol, f"group {spec.joint_names[g[0]]}: λ = {lam} is not safe"
            if lam < 1.0:
                partial += 1
                upper = lam + (1.0 - TINY) * TINY if lam > 0.0 else TINY
                beyond = q.copy()
                for i in g:
                    beyond[i] = start[i] + upper * delta[i]
                assert dist(beyond) < tol, f"group {spec.joint_names[g[0]]}: λ = {lam} is not the largest safe"
            q = trial
        np.testing.assert_array_equal(q, applied)  # exact: the reconstruction is the applied pose
        assert dist(applied) >= tol
        checked += 1
    assert checked >= 10 and partial >= 10, (checked, partial)
