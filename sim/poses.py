"""Poses in scenario files: fixed-axis roll/pitch/yaw angles and the pose record every mount and target uses."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from dockbench.sim.config import param


def rpy_to_matrix(rpy: np.ndarray) -> np.ndarray:
    """R = Rz(yaw) Ry(pitch) Rx(roll) for rpy = (roll, pitch, yaw) [rad]."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


@dataclass(frozen=True)
class PoseConfig:
    position: tuple[float, float, float] = param(
        (0.55, 0.0, 0.20), unit="m", length=3, ge=-10.0, le=10.0, doc="origin in world"
    )
    rpy_deg: tuple[float, float, float] = param(
        (0.0, 0.0, 0.0), unit="deg", length=3, ge=-360.0, le=360.0, doc="fixed-axis roll/pitch/yaw (R = Rz Ry Rx)"
    )

    def matrix(self) -> np.ndarray:
        """T (4, 4) of this pose."""
        T = np.eye(4)
        T[:3, :3] = rpy_to_matrix(np.radians(self.rpy_deg))
        T[:3, 3] = self.position
        return T
