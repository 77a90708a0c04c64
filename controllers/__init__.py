"""Control laws → joint torque. Importing this package registers every controller type.

Types: ``khatib`` (MATH.md §2), ``hqp`` (§3, with the momentum observer of
:mod:`controllers.observer` for sensorless mode), ``se3_lie`` (§4).
"""

from controllers import base, feedforward, hqp, khatib, observer, se3_lie  # noqa: F401
