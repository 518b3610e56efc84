"""g2g_ros.conversions on both message flavours: real rclpy messages and rosbags messages (the
latter deserialized from the rclpy ones' CDR bytes, as a bag reader gets them)."""

import numpy as np
import pytest

pytest.importorskip("rclpy")
pytest.importorskip("rosbags")
from builtin_interfaces.msg import Time  # noqa: E402
from geometry_msgs.msg import (  # noqa: E402
    Pose, PoseStamped, PoseWithCovarianceStamped, Transform, TransformStamped,
)
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.serialization import serialize_message  # noqa: E402

from g2g_model.geometry import axis_angle_to_matrix, make_pose  # noqa: E402
from g2g_ros.bags.typestore import bag_typestore  # noqa: E402
from g2g_ros.conversions import (  # noqa: E402
    header_ns, matrix_to_pose, matrix_to_transform, matrix_to_transform_stamped,
    pose_to_matrix, stamp_ns, to_stamp, transform_to_matrix,
)

STORE = bag_typestore()
M = make_pose(axis_angle_to_matrix([0.3, -1.1, 2.0]), [1.5, -2.25, 0.125])
NS = 1_700_000_123 * 10**9 + 456_789


def _rosbags(msg, msgtype):
    """The rosbags message a bag reader would return for the rclpy message ``msg``."""
    return STORE.deserialize_cdr(bytes(serialize_message(msg)), msgtype)


def test_stamps_on_both_flavours():
    rclpy_time = to_stamp(NS)
    assert isinstance(rclpy_time, Time) and (rclpy_time.sec, rclpy_time.nanosec) == (
        1_700_000_123, 456_789)
    bag_time = _rosbags(rclpy_time, "builtin_interfaces/msg/Time")
    assert stamp_ns(rclpy_time) == stamp_ns(bag_time) == NS
    built = to_stamp(NS, STORE.types["builtin_interfaces/msg/Time"])
    assert type(built) is type(bag_time) and stamp_ns(built) == NS
    msg = PoseStamped()
    msg.header.stamp = rclpy_time
    assert header_ns(msg.header) == header_ns(
        _rosbags(msg, "geometry_msgs/msg/PoseStamped").header) == NS


@pytest.mark.parametrize("rclpy_type, msgtype, to_matrix, from_matrix", [
    (Pose, "geometry_msgs/msg/Pose", pose_to_matrix, matrix_to_pose),
    (PoseStamped, "geometry_msgs/msg/PoseStamped", pose_to_matrix, matrix_to_pose),
    (PoseWithCovarianceStamped, "geometry_msgs/msg/PoseWithCovarianceStamped", pose_to_matrix,
     matrix_to_pose),
    (Odometry, "nav_msgs/msg/Odometry", pose_to_matrix, matrix_to_pose),
    (Transform, "geometry_msgs/msg/Transform", transform_to_matrix, matrix_to_transform),
    (TransformStamped, "geometry_msgs/msg/TransformStamped", transform_to_matrix,
     matrix_to_transform),
])
def test_poses_and_transforms_on_both_flavours(rclpy_type, msgtype, to_matrix, from_matrix):
    msg = from_matrix(M, rclpy_type())
    np.testing.assert_allclose(to_matrix(msg), M, atol=1e-12)
    bag_msg = _rosbags(msg, msgtype)
    np.testing.assert_allclose(to_matrix(bag_msg), M, atol=1e-12)
    # ... and back into the rosbags message.
    np.testing.assert_allclose(to_matrix(from_matrix(np.eye(4), bag_msg)), np.eye(4))


def test_transform_stamped_builder_and_bad_values():
    msg = matrix_to_transform_stamped(M, "odom", "base_link", NS)
    assert (msg.header.frame_id, msg.child_frame_id, header_ns(msg.header)) == (
        "odom", "base_link", NS)
    np.testing.assert_allclose(transform_to_matrix(msg), M, atol=1e-12)
    with pytest.raises(ValueError, match="finite 4x4"):
        matrix_to_transform_stamped(np.full((4, 4), np.nan), "a", "b", 0)
    bad = Pose()
    bad.orientation.w = 0.0
    with pytest.raises(ValueError, match="non-zero quaternion"):
        pose_to_matrix(bad)
    msg.transform.translation.x = float("nan")
    with pytest.raises(ValueError, match="finite"):
        transform_to_matrix(_rosbags(msg, "geometry_msgs/msg/TransformStamped"))
