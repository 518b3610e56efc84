"""The loaded map's keyframe trajectory as ``nav_msgs/Path`` (``relocalize``'s ``~/map_path``).

One pose per keyframe of one camera, in time order: the relocalization camera's when the map
has frames of it, else the map camera with the most frames. One camera, not all of them: the
frames of a rig's cameras at one instant lie centimetres apart, and a path through all of them
would zigzag between the cameras. The poses are the camera's (``world_T_cam``: the optical
frame's axes, z along the viewing direction) in the map frame, each stamped with its
keyframe's acquisition time. Published latched (:func:`g2g_ros.qos.latched_qos`) at every map
load, so a viewer started later sees where the current map is.
"""

from __future__ import annotations

from typing import Tuple

from g2g_model.maps.format import G2GMap
from g2g_ros.conversions import matrix_to_pose, to_stamp

TOPIC = "~/map_path"


def path_camera(gmap: G2GMap, camera: str) -> str:
    """The camera whose keyframes make the path (see the module docstring); "" for an empty
    map."""
    counts = {c: len(gmap.camera_indices(c)) for c in gmap.cameras()}
    if counts.get(camera):
        return camera
    return max(sorted(counts), key=counts.get) if counts else ""


def map_path_msg(gmap: G2GMap, camera: str, frame_id: str, stamp_ns: int) -> Tuple[object, str]:
    """``(nav_msgs/Path, the camera used)`` of ``gmap``'s keyframes (see the module
    docstring); the path's header has ``frame_id`` and ``stamp_ns``."""
    from geometry_msgs.msg import PoseStamped
    from nav_msgs.msg import Path

    used = path_camera(gmap, camera)
    msg = Path()
    msg.header.frame_id = frame_id
    msg.header.stamp = to_stamp(stamp_ns)
    for i in (gmap.camera_indices(used) if used else []):
        frame = gmap.frames[int(i)]
        pose = PoseStamped()
        pose.header.frame_id = frame_id
        pose.header.stamp = to_stamp(frame.stamp_ns)
        msg.poses.append(matrix_to_pose(frame.world_T_cam, pose))
    return msg, used


def publish_map_path(node) -> None:
    """Publish the loaded map's path on ``node.map_path_pub`` (a
    :class:`~g2g_ros.nodes.relocalize.RelocalizeNode`); nothing without a map."""
    if node.gmap is None or node.map_path_pub is None:
        return
    msg, used = map_path_msg(node.gmap, node.camera, node.p["map_frame"],
                             node.get_clock().now().nanoseconds)
    node.map_path_pub.publish(msg)
    node.get_logger().info(f"{TOPIC}: {len(msg.poses)} keyframes of camera {used or '(none)'}")
