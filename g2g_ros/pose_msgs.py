"""The messages built from results: the pose messages of a localization, the
``nav_msgs/Odometry`` of a rig-odometry update (message types imported when built). Matrices
and stamps are converted by :mod:`g2g_ros.conversions`."""

from __future__ import annotations

import numpy as np

from g2g_ros.conversions import matrix_to_pose, to_stamp


def pose_with_covariance_msg(map_T_base: np.ndarray, covariance: np.ndarray, stamp,
                             frame_id: str):
    """A geometry_msgs/PoseWithCovarianceStamped of a pose and its ``[6, 6]`` covariance."""
    from geometry_msgs.msg import PoseWithCovarianceStamped

    msg = PoseWithCovarianceStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    matrix_to_pose(map_T_base, msg.pose.pose)
    msg.pose.covariance = [float(v) for v in np.asarray(covariance, float).reshape(36)]
    return msg


def relocalized_pose_msg(result, base_T_cam, stamp, frame_id: str):
    """The robot's pose in the map at the fix's instant (``result.fix_frame`` of the query
    window: its newest for a geometric fix, B0 for G2G alone) of an accepted
    :class:`~g2g_model.localization.relocalizer.LocalizationResult`, with the result's
    covariance (the query camera's) carried to base_link through the lever arm; ``stamp``:
    that instant's."""
    from g2g_model.geometry import invert_pose
    from g2g_model.localization.covariance import transfer_covariance

    map_T_cam0 = result.current @ np.asarray(result.query.cam_to_world)[result.fix_frame]
    map_T_base0 = map_T_cam0 @ invert_pose(base_T_cam if base_T_cam is not None else np.eye(4))
    covariance = transfer_covariance(result.covariance, map_T_base0[:3, 3] - map_T_cam0[:3, 3])
    return pose_with_covariance_msg(map_T_base0, covariance, stamp, frame_id)


def alignment_msg(result, stamp, camera_frame_suffix: str):
    """A g2g_msgs/GroupAlignment of a :class:`~g2g_model.localization.relocalizer.
    LocalizationResult`: every predicted pose, the map window's and the query's stamps, the
    verification's path and where G2G's answer took its pose."""
    from geometry_msgs.msg import Pose

    from g2g_model.localization.relocalizer import pose_source
    from g2g_msgs.msg import GroupAlignment
    query, group_a, pred = result.query, result.group_a, result.prediction
    msg = GroupAlignment()
    msg.header.stamp = stamp
    msg.header.frame_id = f"{result.camera}{camera_frame_suffix}@map"
    msg.group_a_id = f"map:{result.map_id}:{result.camera}:{group_a.stamps[0]}"
    msg.group_b_id = f"query:{query.stamps[0]}"
    msg.stamps_a = [to_stamp(int(s)) for s in group_a.stamps]
    msg.stamps_b = [to_stamp(int(s)) for s in query.stamps]
    for poses, out in ((pred.poses_a, msg.poses_a), (pred.poses_b, msg.poses_b)):
        for T in poses:
            out.append(Pose())
            matrix_to_pose(T, out[-1])
    msg.overlap_score = float(result.score)
    msg.inference_time_ms = float(pred.timing_ms["total"])
    msg.path, msg.inliers = str(result.path), int(result.inliers)
    msg.pose_source = pose_source(pred.rotation_match)
    return msg


def odometry_msg(update, odom_frame: str, base_frame: str):
    """``nav_msgs/Odometry`` of an :class:`~g2g_ros.odometry_core.OdometryUpdate`: pose and
    covariance in ``odom_frame``, velocities in ``base_frame``, stamped with the group."""
    from nav_msgs.msg import Odometry

    msg = Odometry()
    msg.header.stamp = to_stamp(update.stamp_ns)
    msg.header.frame_id = odom_frame
    msg.child_frame_id = base_frame
    matrix_to_pose(update.odom_T_base, msg.pose.pose)
    msg.pose.covariance = [float(v) for v in update.covariance.reshape(-1)]
    tw = msg.twist.twist
    tw.linear.x, tw.linear.y, tw.linear.z = map(float, update.linear_velocity)
    tw.angular.x, tw.angular.y, tw.angular.z = map(float, update.angular_velocity)
    msg.twist.covariance = [float(v) for v in np.diag([0.01] * 3 + [0.003] * 3).reshape(-1)]
    return msg
