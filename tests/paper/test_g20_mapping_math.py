"""docs/theory/g20_hand.md (G20 kinematic hand), equation by equation.

Each test restates the equation it checks and compares the code against an independent evaluation
of that equation written here from the text of docs/theory/g20_hand.md, at seeded random points.
"""

from __future__ import annotations

import numpy as np
import pytest
from dockbench.hand.bridge import BridgeConfig, HandBridge, run_track_test
from dockbench.hand.mapping import complete_mimic, range_to_arc, sdk_to_joint_positions
from dockbench.hand.spec import load_spec

EXACT = 1e-12  # [rad] closed-form identities: one or two scalar roundings on angles ≤ 2 rad (≤ 1e-15)
SEED = 20

# docs/theory/g20_hand.md §1, written out: DIR = [-1 x6, +1 x4, -1, 0 x4, -1 x5]; MAX[1] = 1.22; MAX[5] = 1.47
DIR_MATH = [-1] * 6 + [1] * 4 + [-1] + [0] * 4 + [-1] * 5
CHANNEL_JOINT_MATH = {
    0: "thumb_cmc_pitch",
    1: "index_mcp_pitch",
    2: "middle_mcp_pitch",
    3: "ring_mcp_pitch",
    4: "pinky_mcp_pitch",
    5: "thumb_cmc_roll",
    6: "index_mcp_roll",
    7: "middle_mcp_roll",
    8: "ring_mcp_roll",
    9: "pinky_mcp_roll",
    10: "thumb_cmc_yaw",
    15: "thumb_mcp",
    16: "index_pip",
    17: "middle_pip",
    18: "ring_pip",
    19: "pinky_pip",
}
TIP_DIVISOR_MATH = {15: 1.02, 16: 0.89, 17: 0.89, 18: 0.89, 19: 0.89}


@pytest.fixture(scope="module")
def spec():
    return load_spec()


def lerp(v, a0, a255):
    """lerp(v, 0 -> a0, 255 -> a255)."""
    return a0 + (a255 - a0) * v / 255.0


def test_tables_match_math(spec):
    assert [c.direction for c in spec.channels] == DIR_MATH
    assert {c.channel: c.joint for c in spec.channels if c.joint} == CHANNEL_JOINT_MATH
    assert {c.channel: c.divisor for c in spec.channels if c.angle_of} == TIP_DIVISOR_MATH
    assert spec.channels[1].arc_max == 1.22 and spec.channels[5].arc_max == 1.47  # exact: parsed decimals


def test_range_to_arc_is_the_clamped_lerp(spec):
    """v = clamp(val, 0, 255); DIR -1: arc = lerp(v, 0->MAX, 255->MIN); DIR +1: lerp(v, 0->MIN, 255->MAX)."""
    rng = np.random.default_rng(SEED)
    for _ in range(50):
        raw = rng.uniform(-60, 320, size=20)  # includes out-of-range values
        arc = range_to_arc(raw, spec)
        v = np.clip(raw, 0, 255)
        expected = np.zeros(20)
        for c in spec.channels:
            if DIR_MATH[c.channel] == -1:
                expected[c.channel] = lerp(v[c.channel], c.arc_max, c.arc_min)
            elif DIR_MATH[c.channel] == 1:
                expected[c.channel] = lerp(v[c.channel], c.arc_min, c.arc_max)
        np.testing.assert_allclose(arc, expected, atol=EXACT)


def test_tip_channels_divide_by_the_mimic_ratio(spec):
    """SDK15 -> thumb_mcp = arc/1.02; SDK16..19 -> *_pip = arc/0.89; the mimic joint then equals arc."""
    rng = np.random.default_rng(SEED + 1)
    for _ in range(50):
        raw = rng.integers(0, 256, size=20)
        arc = range_to_arc(raw, spec)
        q = sdk_to_joint_positions(raw, spec)
        for ch, joint in CHANNEL_JOINT_MATH.items():
            np.testing.assert_allclose(q[joint], arc[ch] / TIP_DIVISOR_MATH.get(ch, 1.0), atol=EXACT)
        np.testing.assert_allclose(q["thumb_ip"], arc[15], atol=EXACT)
        for ch, f in zip((16, 17, 18, 19), ("index", "middle", "ring", "pinky"), strict=True):
            np.testing.assert_allclose(q[f"{f}_dip"], arc[ch], atol=EXACT)


def test_mimic_identities_and_no_overwrite(spec):
    """thumb_ip = 1.02 thumb_mcp, *_dip = 0.89 *_pip; completion never overwrites a given value."""
    rng = np.random.default_rng(SEED + 2)
    drivers = {n: float(rng.uniform(0, 1.2)) for n in spec.active_names}
    q = complete_mimic(drivers, spec)
    np.testing.assert_allclose(q["thumb_ip"], 1.02 * q["thumb_mcp"], atol=EXACT)
    for f in ("index", "middle", "ring", "pinky"):
        np.testing.assert_allclose(q[f"{f}_dip"], 0.89 * q[f"{f}_pip"], atol=EXACT)
    given = dict(drivers, thumb_ip=-0.7)
    assert complete_mimic(given, spec)["thumb_ip"] == -0.7  # exact: the given value is kept, not recomputed


def test_missing_channels_default_to_255(spec):
    rng = np.random.default_rng(SEED + 3)
    for n in (1, 7, 19, 20):  # 0 values: an empty command is refused (it would open the hand fully)
        head = rng.integers(0, 256, size=n).tolist()
        np.testing.assert_allclose(
            range_to_arc(head, spec), range_to_arc(head + [255] * (20 - n), spec), atol=0
        )


def test_slew_step_equation(spec):
    """applied_{k+1} = clip(applied_k + clip(goal - applied_k, ±s·dt), lo, hi); mimic joints use
    ratio·s·dt, so a consistent pose stays consistent; s = 0 jumps in one step."""
    s, dt = 3.0, 0.001
    b = HandBridge.standalone(BridgeConfig(slew_rad_s=s, collision_project=False), spec, timestep=dt)
    b.reset("open")
    b.command_preset("half_fist")
    goal = b.snapshot().goal
    lo, hi = b.joint_ranges.T
    ratio = np.array([j.ratio for j in spec.joints])
    prev = b.snapshot().applied
    for _ in range(500):
        b.step()
        cur = b.snapshot().applied
        expected = np.clip(prev + np.clip(goal - prev, -s * dt * ratio, s * dt * ratio), lo, hi)
        np.testing.assert_allclose(cur, expected, atol=EXACT)
        prev = cur
    np.testing.assert_allclose(prev, goal, atol=EXACT)
    q = dict(zip(spec.joint_names, prev, strict=True))
    np.testing.assert_allclose(q["index_dip"], 0.89 * q["index_pip"], atol=1e-9)

    jump = HandBridge.standalone(BridgeConfig(slew_rad_s=0.0), spec, timestep=dt)
    jump.reset("open")
    jump.command_preset("half_fist")
    jump.step()
    np.testing.assert_allclose(jump.snapshot().applied, jump.snapshot().goal, atol=EXACT)


def test_penetration_definition_and_track_test(spec):
    """Penetration = min contact distance < -5e-4 m; track test: open 200 steps, half fist at step
    200, at step 600 max |q - q_nominal| over the active joints <= 0.02 rad."""
    cfg = BridgeConfig()
    assert cfg.penetration_tol_m == 5e-4 and cfg.bisections == 12 and cfg.slew_rad_s == 5.0
    res = run_track_test(HandBridge.standalone(cfg, spec, timestep=0.001))
    assert res.passed and res.check_step == 600 and res.tolerance == 0.02
