"""Robot catalogue: which MJCF, which joints and actuators, limits and home pose per robot type.

Read from the package resource ``assets/robots/limits.yaml`` (the models themselves are our own MJCF
in ``assets/robots/``). Torque limits used by the loop are read from the compiled model's actuator
``ctrlrange``; the YAML copy is checked against it by the model tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import yaml

from sim.errors import ScenarioError


@dataclass(frozen=True)
class RobotSpec:
    """Static description of one robot type (SI units, rad)."""

    name: str
    model_resource: str  # path inside the ``assets`` package
    attachment_site: str
    joint_names: tuple[str, ...]
    actuator_names: tuple[str, ...]
    torque_limit: np.ndarray
    velocity_limit: np.ndarray
    home: np.ndarray

    def model_path(self) -> str:
        return str(resources.files("assets").joinpath(self.model_resource))


@lru_cache(maxsize=1)
def _catalogue() -> dict[str, RobotSpec]:
    text = resources.files("assets").joinpath("robots/limits.yaml").read_text()
    raw = yaml.safe_load(text)
    out = {}
    for name, r in raw.items():
        out[name] = RobotSpec(
            name=name,
            model_resource=r["model"],
            attachment_site=r["site"],
            joint_names=tuple(r["joint_names"]),
            actuator_names=tuple(r["actuator_names"]),
            torque_limit=np.array(r["torque_limit_Nm"], dtype=float),
            velocity_limit=np.array(r["velocity_limit_rad_s"], dtype=float),
            home=np.array(r["home"], dtype=float),
        )
    return out


def robot_names() -> list[str]:
    return sorted(_catalogue())


def get_robot(name: str, *, file: str | None = None, key: str = "robot.type") -> RobotSpec:
    """The :class:`RobotSpec` of ``name``; a ScenarioError listing the known robots otherwise."""
    cat = _catalogue()
    if name not in cat:
        raise ScenarioError(f"unknown robot {name!r}; known: {', '.join(sorted(cat))}", file=file, key=key)
    return cat[name]
