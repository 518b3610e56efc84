"""Stamps as integer nanoseconds: the one conversion for rclpy messages and rosbags-deserialized
messages alike (anything with ``sec`` and ``nanosec``). No ROS import at module level, so the
bag tools use it without rclpy."""

from __future__ import annotations

from typing import Any


def stamp_ns(stamp: Any) -> int:
    """``builtin_interfaces/Time``-like (``sec``, ``nanosec``) -> integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def header_ns(header: Any) -> int:
    """The stamp of a ``std_msgs/Header``-like message in nanoseconds."""
    return stamp_ns(header.stamp)


def to_stamp(ns: int):
    """Integer nanoseconds -> ``builtin_interfaces/msg/Time`` (rclpy)."""
    from builtin_interfaces.msg import Time

    return Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))
