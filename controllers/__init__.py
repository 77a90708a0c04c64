"""Control laws → joint torque. Importing this package registers every controller type.

Types: ``khatib`` (docs/theory/khatib.md), ``hqp`` (docs/theory/hqp.md, with the momentum observer of
:mod:`controllers.observer` for sensorless mode), ``se3_lie`` (docs/theory/se3_lie.md).
"""

from controllers import base, feedforward, hqp, khatib, observer, se3_lie  # noqa: F401
