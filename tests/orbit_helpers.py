"""Helpers of the in-orbit tests (issue 19): the orbit scenarios as dictionaries, gravity on a built setup."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import yaml

from tests.helpers import SCENARIOS

ORBIT = SCENARIOS / "orbit"


def orbit_dict(name: str) -> dict:
    """A deep copy of ``scenarios/orbit/<name>.yaml`` as a dict, to modify in tests."""
    return copy.deepcopy(yaml.safe_load((ORBIT / f"{name}.yaml").read_text()))


def with_gravity(setup: Any, gravity: tuple[float, float, float]) -> Any:
    """The same scenario built again with ``sim.gravity`` set, bypassing the loader's check (which refuses
    gravity with a free-floating base: the model-level tests want it on): ``dataclasses.replace``, not the
    validating ``Scenario.replace``."""
    from dockbench.sim.loop import build

    sc = setup.scenario
    return build(dataclasses.replace(sc, sim=dataclasses.replace(sc.sim, gravity=tuple(gravity))))


#: the known answers of :func:`add_orbit` (tests/test_orbit_metrics.py)
ORBIT_KNOWN = {
    "att_peak_deg": 2.0, "att_final_deg": 1.5, "drift_rate": 0.005,  # base: m/s along x
    "v_after": (0.003, 0.0, 0.004), "w_after": (0.0, 0.0, 0.01),  # target after step 3000
    "P_exchanged": (0.3, 0.4, 0.0), "L_exchanged": (0.0, 0.0, 0.2),
    "P0": (1.0, 2.0, 3.0, 4.0, 5.0, 6.0), "scale": (2.0, 3.0), "dP": 2e-7, "dL": 1.5e-7, "i_bump": 2000,
    "mass": 530.0, "com_bump": 3e-9,
}


def add_orbit(ch: dict, meta: dict) -> None:
    """Orbit channels (sim/orbit.py) with known metrics on top of a synthetic run (tests/test_metrics.py's
    ``synthetic()``: t = 0 … 4 s, first tool contact at step 2200): the base turns about z by 2° (ramp to
    t = 2 s), back to 1.5° (t = 3 s), and drifts at 5 mm/s along x; the target, at its configured pose,
    moves at v, ω after step 3000 and its momentum jumps from 0 to (P, L) after the contact; the total
    momentum is constant but for one sample (2e-7 N·s, 1.5e-7 N·m·s against parts' scales 2 and 3), and the
    centre of mass on its line but for 3e-9 m at that sample. The run is isolated (free-floating base,
    floating target)."""
    import mujoco
    import numpy as np

    k = ORBIT_KNOWN
    t = np.asarray(ch["t"], dtype=float)
    n = len(t)
    theta = np.where(t <= 2.0, k["att_peak_deg"] * np.minimum(t / 2.0, 1.0),
                     k["att_peak_deg"] - (k["att_peak_deg"] - k["att_final_deg"]) * np.clip(t - 2.0, 0.0, 1.0))
    quat = np.zeros((n, 4))
    quat[:, 0] = np.cos(np.radians(theta) / 2)
    quat[:, 3] = np.sin(np.radians(theta) / 2)
    ch["base_quat"] = quat
    ch["base_pos"] = np.column_stack([k["drift_rate"] * t, np.zeros(n), np.zeros(n)])
    ch["base_vel"] = np.zeros((n, 6))
    T = np.asarray(meta["T_world_target"], dtype=float)
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(T[:3, :3]).ravel())
    ch["target_pos"] = np.tile(T[:3, 3], (n, 1))
    ch["target_quat"] = np.tile(q, (n, 1))
    v = np.zeros((n, 6))
    v[3000:, :3], v[3000:, 3:] = k["v_after"], k["w_after"]
    ch["target_vel"] = v
    pt = np.zeros((n, 6))
    first = int(np.flatnonzero(np.asarray(ch["contact_count_peak"]) > 0)[0])
    pt[first + 100 :, :3], pt[first + 100 :, 3:] = k["P_exchanged"], k["L_exchanged"]
    ch["momentum_target"] = pt
    P = np.tile(np.array(k["P0"], dtype=float), (n, 1))
    P[k["i_bump"], 0] += k["dP"]
    P[k["i_bump"], 5] += k["dL"]
    ch["momentum"] = P
    ch["momentum_abs"] = np.tile(np.array(k["scale"], dtype=float), (n, 1))
    ch["momentum_t"] = t.copy()
    C = np.array([0.1, 0.2, 0.3]) + np.outer(t, np.array(k["P0"][:3]) / k["mass"])
    C[k["i_bump"], 1] += k["com_bump"]
    ch["system_com"] = C
    meta.update(base_type="free_floating", target_mount="floating", orbit_mass=k["mass"])
