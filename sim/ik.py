"""Initial configuration by damped least squares (docs/theory/ik.md).

Δq = Jᵀ (J Jᵀ + λ² I)⁻¹ e,  e = [p_d − p; log(R_d Rᵀ)] (world axes, LOCAL_WORLD_ALIGNED Jacobian),
iterated from the seed and clipped to the joint limits after every step.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
from dockbench.sim.errors import ModelError
from dockbench.sim.lie import so3_log


def dls_step(J: np.ndarray, e: np.ndarray, damping: float) -> np.ndarray:
    """One damped least-squares step Δq = Jᵀ (J Jᵀ + λ² I)⁻¹ e [rad] for the (6, n) Jacobian ``J``, the
    pose error ``e`` (6,) [m; rad] and the damping λ = ``damping``: the minimiser of
    ‖J Δq − e‖² + λ² ‖Δq‖² (docs/theory/ik.md §2)."""
    return J.T @ np.linalg.solve(J @ J.T + damping**2 * np.eye(J.shape[0]), e)


def solve_ik(
    model: pin.Model,
    frame_id: int,
    T_world_target: np.ndarray,
    q_seed: np.ndarray,
    *,
    damping: float = 1e-3,
    tol_pos: float = 1e-9,
    tol_rot: float = 1e-9,
    max_iter: int = 500,
    step: float = 1.0,
) -> np.ndarray:
    """Joint configuration [rad] putting frame ``frame_id`` at ``T_world_target`` (4, 4).

    Raises:
        ModelError: no convergence (unreachable pose or a limit in the way); the message gives the
            remaining position [m] and rotation [rad] error.
    """
    data = model.createData()
    q = np.clip(np.array(q_seed, dtype=float), model.lowerPositionLimit, model.upperPositionLimit)
    R_d = T_world_target[:3, :3]
    p_d = T_world_target[:3, 3]
    e = np.zeros(6)
    for _ in range(max_iter):
        pin.framesForwardKinematics(model, data, q)
        oMf = data.oMf[frame_id]
        e[:3] = p_d - oMf.translation
        e[3:] = so3_log(R_d @ oMf.rotation.T)
        if np.linalg.norm(e[:3]) < tol_pos and np.linalg.norm(e[3:]) < tol_rot:
            return q
        J = pin.computeFrameJacobian(model, data, q, frame_id, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        dq = dls_step(J, e, damping)
        q = np.clip(q + step * dq, model.lowerPositionLimit, model.upperPositionLimit)
    raise ModelError(
        f"IK did not converge: position error {np.linalg.norm(e[:3]):.3e} m, rotation error "
        f"{np.linalg.norm(e[3:]):.3e} rad after {max_iter} iterations; the start pose may be unreachable "
        "(move the target or change robot.q_guess)"
    )
