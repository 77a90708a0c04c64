"""docs/theory/ft_pipeline.md §3: transporting the sensor wrench to the EE body frame preserves virtual power,
V_Eᵀ F_E = V_Sᵀ F_S for any rigid twist, at random poses (fixed seed)."""

import numpy as np
from dockbench.sim.lie import so3_exp
from dockbench.sim.wrench import transport_world_to_body


def test_virtual_power_invariance() -> None:
    rng = np.random.default_rng(5)
    for _ in range(50):
        T_world_ee = np.eye(4)
        T_world_ee[:3, :3] = so3_exp(rng.normal(size=3))
        T_world_ee[:3, 3] = rng.normal(size=3)
        p_S = rng.normal(size=3)
        w_world_S = rng.normal(size=6)  # [f; n] world axes, about S
        F_E = transport_world_to_body(w_world_S, p_S, T_world_ee, np.zeros(6))
        # a rigid-body twist: angular velocity ω, linear velocity of the EE origin v_E (world)
        omega = rng.normal(size=3)
        v_E = rng.normal(size=3)
        v_S = v_E + np.cross(omega, p_S - T_world_ee[:3, 3])
        R = T_world_ee[:3, :3]
        V_E_body = np.concatenate([R.T @ v_E, R.T @ omega])
        P_E = V_E_body @ F_E
        P_S = v_S @ w_world_S[:3] + omega @ w_world_S[3:]
        # round-off: ≤ ~20 roundings (3×3 products, cross products, two 6-term dot products) on terms of
        # size ≤ ~30 (unit-normal wrenches and twists, |p| ≤ ~3): ≲ 20·ε·30 ≈ 1e-13; a wrong lever arm or
        # transpose changes P by O(1)
        np.testing.assert_allclose(P_E, P_S, rtol=0, atol=1e-10)
