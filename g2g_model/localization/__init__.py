"""Localization without ROS: window selection, relocalization, geometric verification.

The ROS nodes in ``g2g_ros`` are thin shells over this package; evaluation tools and
benchmarks call the same code, so a published figure measures what the robot runs.
"""
