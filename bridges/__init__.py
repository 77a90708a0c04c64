"""The outside world: ROS 2 transport (:mod:`bridges.ros2`, :mod:`bridges.cdr`), the G20 hand on ROS 2
topics (:mod:`bridges.g20_ros2`) and the kinematic mirror (:mod:`bridges.mirror`). See docs/ros2.md."""
