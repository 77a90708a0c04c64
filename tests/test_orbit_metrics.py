"""The orbit metrics (telemetry/metrics.py, docs/metrics.md) on synthetic telemetry with known answers, and
their gates failing what a researcher would call a failure. Exact constructions: 1e-12."""

from __future__ import annotations

import math

import numpy as np
from dockbench.telemetry.gates import evaluate_gates
from dockbench.telemetry.metrics import compute_metrics

from tests.orbit_helpers import ORBIT_KNOWN, add_orbit
from tests.test_metrics import synthetic

K = ORBIT_KNOWN


def _orbit():
    ch, meta = synthetic()
    add_orbit(ch, meta)
    return ch, meta


def test_orbit_metrics_have_their_known_values() -> None:
    ch, meta = _orbit()
    m = compute_metrics(ch, meta)
    t = ch["t"]
    w = t > t[-1] - 1.0 + 1e-9
    assert math.isclose(m["orbit.base_attitude_peak_deg"], K["att_peak_deg"], rel_tol=1e-12)
    assert math.isclose(m["orbit.base_attitude_final_deg"], K["att_final_deg"], rel_tol=1e-12)
    assert math.isclose(m["orbit.base_drift"], K["drift_rate"] * np.mean(t[w]), rel_tol=1e-12)
    assert math.isclose(m["orbit.base_drift_peak"], K["drift_rate"] * t[-1], rel_tol=1e-12)
    assert math.isclose(m["orbit.target_speed_after_seating"], float(np.linalg.norm(K["v_after"])), rel_tol=1e-12)
    rate = math.degrees(np.linalg.norm(K["w_after"]))
    assert math.isclose(m["orbit.target_rate_after_seating_deg_s"], rate, rel_tol=1e-12)
    assert math.isclose(m["orbit.momentum_exchanged"], float(np.linalg.norm(K["P_exchanged"])), rel_tol=1e-12)
    assert math.isclose(m["orbit.angular_momentum_exchanged"], float(np.linalg.norm(K["L_exchanged"])), rel_tol=1e-12)
    want = max(K["dP"] / K["scale"][0], K["dL"] / K["scale"][1])
    assert math.isclose(m["orbit.momentum_drift_rel"], want, rel_tol=1e-6)
    assert math.isclose(m["orbit.com_deviation"], K["com_bump"], rel_tol=1e-5)


def test_docking_metrics_in_the_recorded_target_frame_equal_the_static_ones() -> None:
    """A target that stays at its configured pose gives the same docking and contact metrics through the
    moving-frame path (per-sample target_pos / target_quat) as through the static pose."""
    ch, meta = synthetic()
    static = compute_metrics(ch, meta)
    add_orbit(ch, meta)
    moving = compute_metrics(ch, meta)
    for k, v in static.items():
        if k.startswith(("docking.", "contact.")):
            assert math.isclose(moving[k], v, rel_tol=1e-12, abs_tol=1e-12), (k, moving[k], v)


def test_momentum_metrics_only_for_an_isolated_system() -> None:
    ch, meta = _orbit()
    for mount in ("fixed", "compliant"):
        meta["target_mount"] = mount
        m = compute_metrics(ch, meta)
        assert "orbit.momentum_drift_rel" not in m and "orbit.com_deviation" not in m
        assert "orbit.base_attitude_peak_deg" in m
    meta.update(target_mount="floating", base_type="fixed")
    assert "orbit.momentum_drift_rel" not in compute_metrics(ch, meta)


def test_orbit_gates_fail_a_failure() -> None:
    """A bus turned by 2° fails a 1° attitude gate; a target leaving at 5 mm/s fails a 4 mm/s gate; a 2e-7
    momentum error fails a 1e-7 gate; each passes just above its value."""
    ch, meta = _orbit()
    m = compute_metrics(ch, meta)
    cases = [("orbit.base_attitude_peak_deg", 1.0, 2.5), ("orbit.target_speed_after_seating", 0.004, 0.006),
             ("orbit.momentum_drift_rel", 5e-8, 2e-7), ("orbit.com_deviation", 1e-9, 1e-8)]
    for metric, tight, loose in cases:
        verdict, (g,) = evaluate_gates([{"metric": metric, "max": tight}], m, True)
        assert verdict == "FAIL" and g.verdict == "FAIL", (metric, m[metric])
        verdict, _ = evaluate_gates([{"metric": metric, "max": loose}], m, True)
        assert verdict == "PASS", (metric, m[metric])
