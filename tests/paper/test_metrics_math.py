"""docs/metrics.md: the metric equations, each against an independent evaluation on random telemetry.

tests/test_metrics.py checks every metric on hand-built telemetry with known answers; here the telemetry
is random (seeded) and each metric is recomputed from its definition in a different form (SciPy's
rotation vector for the orientation angle, a × f for the lateral force, world-axes moments, the inverse
target transform, an explicit window scan). Tolerances are stated bounds (docs/testing.md §2); ``EPS``
is the float64 machine epsilon."""

from __future__ import annotations

import math

import numpy as np
from dockbench.sim.lie import matrix_to_quat
from dockbench.telemetry.gates import window_share
from dockbench.telemetry.metrics import compute_metrics, orientation_error_deg
from scipy.spatial.transform import Rotation

from tests.helpers import EPS, assert_within

N, DT, NV = 3000, 0.001, 7
RNG_SEED = 71


def _random_rotations(rng, n: int, scale: float) -> np.ndarray:
    return Rotation.from_rotvec(rng.normal(scale=scale, size=(n, 3))).as_matrix()


def _telemetry(rng):
    """Random but plausible channels and meta: a target frame D rotated by ≈ 0.5 rad and moved, the tip
    inside it, random tool orientations, random wrenches, joints and saturation flags."""
    t = np.arange(N) * DT
    R_D = Rotation.from_rotvec(rng.normal(scale=0.5, size=3)).as_matrix()
    o_D = rng.uniform(-0.5, 0.5, 3)
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R_D, o_D
    p_D = np.column_stack([rng.normal(scale=1e-3, size=N), rng.normal(scale=1e-3, size=N), -rng.uniform(0.0, 0.09, N)])
    R_ee = np.einsum("ij,njk->nik", R_D @ np.diag([1.0, -1.0, -1.0]), _random_rotations(rng, N, 0.05))
    R_des = np.einsum("nij,njk->nik", R_ee, _random_rotations(rng, N, 0.02))
    ch = {
        "t": t,
        "ee_pos": o_D + p_D @ R_D.T,
        "ee_quat": np.array([matrix_to_quat(R) for R in R_ee]),
        "ee_quat_des": np.array([matrix_to_quat(R) for R in R_des]),
        "q": rng.uniform(-2.0, 2.0, (N, NV)),
        "v": rng.uniform(-1.0, 1.0, (N, NV)),
        "manipulability": rng.uniform(0.01, 0.2, N),
        "saturated": rng.random(N) < 0.2,
        "contact_count": rng.integers(0, 4, N).astype("i4"),
    }
    ch["ee_pos_des"] = ch["ee_pos"] + rng.normal(scale=2e-3, size=(N, 3))
    for src in ("truth", "ext"):
        f = rng.normal(scale=5.0, size=(N, 3))
        n_world = rng.normal(scale=0.5, size=(N, 3))
        ch[f"wrench_{src}_world"] = np.hstack([f, n_world])
        ch[f"wrench_{src}_body"] = np.hstack([np.einsum("nji,nj->ni", R_ee, f), np.einsum("nji,nj->ni", R_ee, n_world)])
    meta = {
        "T_world_target": T.tolist(),
        "target_type": "drogue",
        "target_depth_total": 0.08,
        "segments": [{"name": "a", "t0": 0.0, "t1": 1.0}, {"name": "b", "t0": 1.0, "t1": 2.0}],
        "planner_duration": 2.0,
        "q_min": [-2.5] * NV,
        "q_max": [2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 3.0],
        "v_max": [1.5] * NV,
    }
    return ch, meta, R_D, o_D, p_D, R_ee


def test_orientation_error_is_the_rotation_angle() -> None:
    """θ = angle of R_des Rᵀ, computed by the metrics as 2 atan2(‖vec(q_a* q_b)‖, |q_a · q_b|), against the
    norm of SciPy's rotation vector of R_des Rᵀ, from 1e-9 rad to π − 1e-6.

    Bound: the quaternion form keeps full precision at small angles (no acos): |Δθ| ≤ 16 ε (both sides'
    products and norms) + 16 ε θ; asserted with 16× that. acos(|q_a · q_b|) instead would err by ≈ √ε ≈ 1e-8
    rad at the smallest angles."""
    rng = np.random.default_rng(RNG_SEED)
    angles = np.concatenate([np.geomspace(1e-9, 1.0, 40), np.linspace(1.0, math.pi - 1e-6, 40)])
    axes = rng.normal(size=(len(angles), 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    R = _random_rotations(rng, len(angles), 1.0)
    R_des = np.einsum("nij,njk->nik", Rotation.from_rotvec(axes * angles[:, None]).as_matrix(), R)
    ch = {
        "ee_quat": np.array([matrix_to_quat(x) for x in R]),
        "ee_quat_des": np.array([matrix_to_quat(x) for x in R_des]),
    }
    got = np.radians(orientation_error_deg(ch))
    want = np.linalg.norm(Rotation.from_matrix(np.einsum("nij,nkj->nik", R_des, R)).as_rotvec(), axis=1)
    assert_within(got, want, 16 * (16 * EPS + 16 * EPS * want))
    assert_within(got, angles, 16 * (16 * EPS + 16 * EPS * angles))


def test_tracking_layer_over_half_open_segments() -> None:
    """pos RMS √(mean ‖e‖²) and peak max ‖e‖ over the motion (t ≤ planner end) and per segment (t0 ≤ t < t1,
    the last segment including its end), by explicit scans of the samples. Bound: a mean of N squares and a
    square root, ≤ 2 N ε relative; asserted with 16×."""
    rng = np.random.default_rng(RNG_SEED + 1)
    ch, meta, *_ = _telemetry(rng)
    m = compute_metrics(ch, meta)
    e = [float(np.sqrt(sum(x * x for x in row))) for row in (ch["ee_pos"] - ch["ee_pos_des"]).tolist()]
    t = ch["t"].tolist()
    motion = [x for x, ti in zip(e, t, strict=True) if ti <= 2.0 + 1e-9]
    rel = 16 * 2 * N * EPS
    want = math.sqrt(sum(x * x for x in motion) / len(motion))
    assert_within(m["tracking.pos_rms"], want, rel * want)
    assert m["tracking.pos_peak"] == max(motion)  # exact: the same norms' maximum
    for name, t0, t1, last in (("a", 0.0, 1.0, False), ("b", 1.0, 2.0, True)):
        inside = [ti >= t0 - 1e-9 and (ti <= t1 + 1e-9 if last else ti < t1 - 1e-9) for ti in t]
        seg = [x for x, keep in zip(e, inside, strict=True) if keep]
        assert len(seg) == (1001 if last else 1000)  # the boundary sample t = 1 s belongs to "b" only
        want = math.sqrt(sum(x * x for x in seg) / len(seg))
        assert_within(m["segments"][name]["pos_rms"], want, rel * want)


def test_contact_layer_in_a_tilted_target_frame() -> None:
    """With the mating axis a = +z of a tilted target frame: peak axial force max |fᵀa|, steady axial force
    mean fᵀa and steady lateral force mean ‖a × f‖ over the final 1 s (the code uses ‖f − (fᵀa) a‖), peak
    axial moment max |n_Wᵀ a| with the moment in WORLD axes (the code uses the body moment and Rᵀa), peak
    wrench norm max ‖[f_E; n_E]‖ and the F/T–truth RMS difference.

    Bound: a few products of vectors of size |f| ≈ 20 N: |Δ| ≤ 16 ε · 3 max(|f|, |n|) per sample, and a mean
    over 1000 samples adds ≤ 1000 ε relative; asserted with 16× the sum. A moment taken about the
    wrong axis or a force in the wrong frame is O(|f|)."""
    rng = np.random.default_rng(RNG_SEED + 2)
    ch, meta, R_D, *_ = _telemetry(rng)
    m = compute_metrics(ch, meta)
    a = R_D[:, 2]
    w = ch["t"] > ch["t"][-1] - 1.0 + 1e-9
    for src, key in (("truth", "wrench_truth"), ("ft", "wrench_ext")):
        f, n_w = ch[f"{key}_world"][:, :3], ch[f"{key}_world"][:, 3:]
        scale = 3 * max(np.abs(f).max(), np.abs(n_w).max())
        tol = 16 * (16 * EPS * scale + 1000 * EPS * scale)
        assert_within(m[f"contact.peak_axial_force_{src}"], np.abs(f @ a).max(), tol)
        assert_within(m[f"contact.steady_axial_force_{src}"], (f @ a)[w].mean(), tol)
        assert_within(m[f"contact.steady_lateral_force_{src}"], np.linalg.norm(np.cross(a, f), axis=1)[w].mean(), tol)
        assert_within(m[f"contact.peak_axial_moment_{src}"], np.abs(n_w @ a).max(), tol)
        assert_within(m[f"contact.peak_wrench_norm_{src}"], np.linalg.norm(ch[f"{key}_body"], axis=1).max(), tol)
    diff = ch["wrench_ext_world"][:, :3] - ch["wrench_truth_world"][:, :3]
    want = math.sqrt(np.mean(np.sum(diff**2, axis=1)))
    assert_within(m["contact.ft_truth_rms_diff"], want, 16 * 4 * N * EPS * want)


def test_docking_layer_in_a_moved_target_frame() -> None:
    """The tip in the true target frame p_D = R_Dᵀ(p − o_D): depth = mean(−z), lateral = mean √(x² + y²)
    over the final 1 s, seat error = seat depth − depth, tilt = mean ∠(z_tool, −z_D), against the p_D the
    telemetry was built from and the tilt angles of the tool rotations (SciPy's rotation vectors, which
    tilt the tool about axes with a z component too, so the tilt is the angle between the axes, not the
    rotation angle: it is recomputed here as arccos of the axes' dot product, accurate away from 0).

    Bound: p = o + R p_D and its inverse lose ≤ 8 ε (|o| + |p_D|) per coordinate, so depth and lateral agree
    to 16 · 8 ε · 1 m; the tilt to 16 · 64 ε rad (the code's atan2 form is accurate at small tilts, the
    arccos here is not: tilts below 1e-4 rad are excluded from the comparison by construction, their
    arccos error ≤ ε / θ ≤ 2e-12)."""
    rng = np.random.default_rng(RNG_SEED + 3)
    ch, meta, R_D, o_D, p_D, R_ee = _telemetry(rng)
    m = compute_metrics(ch, meta)
    w = ch["t"] > ch["t"][-1] - 1.0 + 1e-9
    tol = 16 * 8 * EPS * 1.0
    depth = float(np.mean(-p_D[w, 2]))
    assert_within(m["docking.depth"], depth, tol)
    assert_within(m["docking.lateral"], float(np.mean(np.linalg.norm(p_D[w, :2], axis=1))), tol)
    assert_within(m["docking.seat_error"], 0.08 - depth, 2 * tol)
    cos = np.clip(np.einsum("ni,i->n", R_ee[w][:, :, 2], -R_D[:, 2]), -1.0, 1.0)
    tilt = np.arccos(cos)
    assert tilt.min() > 1e-4
    assert_within(m["docking.tilt_deg"], float(np.degrees(np.mean(tilt))), np.degrees(16 * 64 * EPS + 2e-12))


def test_safety_layer() -> None:
    """joint use 100 max |q − q_mid| / (½(q_max − q_min)), velocity use 100 max |q̇| / q̇_max, min manipulability,
    saturation ratio = 100 · share of clipped steps, and the largest share over any 0.25 s window, by an
    explicit scan of every window (integer counts: the window share is exact, the same count / k)."""
    rng = np.random.default_rng(RNG_SEED + 4)
    ch, meta, *_ = _telemetry(rng)
    m = compute_metrics(ch, meta)
    q_min, q_max = np.array(meta["q_min"]), np.array(meta["q_max"])
    mid, half = (q_max + q_min) / 2, (q_max - q_min) / 2
    assert_within(m["safety.joint_pos_use"], 100 * (np.abs(ch["q"] - mid) / half).max(), 16 * 4 * EPS * 100)
    assert_within(m["safety.joint_vel_use"], 100 * (np.abs(ch["v"]) / 1.5).max(), 16 * 4 * EPS * 100)
    assert m["safety.min_manipulability"] == ch["manipulability"].min()  # exact: the same minimum
    sat = ch["saturated"].tolist()
    assert_within(m["safety.saturation_ratio"], 100.0 * sum(sat) / N, 16 * N * EPS * 100)
    k = 250
    counts = [sum(sat[i : i + k]) for i in range(N - k + 1)]
    best = max(range(len(counts)), key=lambda i: (counts[i], -i))
    share, t_end = window_share(ch["saturated"], ch["t"])
    assert share == 100.0 * (counts[best] / k)  # exact: integer counts, then the same division and product
    assert t_end == ch["t"][best + k - 1]
    assert m["safety.max_saturation_window"] == share
