"""Control laws → joint torque. Importing this package registers every controller type.

Types: ``khatib`` (docs/theory/khatib.md), ``hqp`` (docs/theory/hqp.md, with the momentum observer of
:mod:`controllers.observer` for sensorless mode), ``se3_lie`` (docs/theory/se3_lie.md).
"""

from dockbench.controllers import base, feedforward, khatib, se3_lie  # noqa: F401
from dockbench.controllers.base import CONTROLLERS

# the HQP imports qpsolvers and scipy (≈ 0.3 s): imported when a scenario names it (sim/registry.py)
CONTROLLERS.register_lazy("hqp", "dockbench.controllers.hqp")
