"""The camera-input and extrinsics parameters every node of this package has (all read at
configure): the base of each node's parameter dataclass (:mod:`g2g_ros.parameters`)."""

from __future__ import annotations

from dataclasses import dataclass

from g2g_model.cameras.lens import DEFAULT_FISHEYE_HFOV_DEG, FISHEYE_HFOV_RANGE_DEG
from g2g_ros.parameters import param


@dataclass
class CameraParams:
    image_topic: str = param("image_raw", "image topic under each camera")
    camera_info_topic: str = param("camera_info", "camera_info topic under each camera")
    use_compressed: bool = param(
        False, "subscribe sensor_msgs/CompressedImage (<image_topic>/compressed)")
    sensor_qos_reliability: str = param("best_effort",
                                        "QoS of the camera streams: best_effort or reliable")
    base_frame: str = param("base_link", "robot body frame (REP-105)")
    camera_frame_suffix: str = param("_optical_frame",
                                     "optical frame of camera c is <c><suffix> in TF")
    extrinsics_source: str = param("tf_static", "camera extrinsics from 'tf_static' or 'yaml'")
    calibration_file: str = param("", "YAML rig calibration (extrinsics_source=yaml)")
    max_stamp_ahead_s: float = param(10.0, "drop (and count) images stamped further ahead of "
                                     "the ROS time (0 = off)", value_range=(0.0, 1e6))
    fisheye_hfov_deg: float = param(
        DEFAULT_FISHEYE_HFOV_DEG, "horizontal field of view (deg) of the pinhole images an "
        "'equidistant' (fisheye) camera is rectified to", value_range=FISHEYE_HFOV_RANGE_DEG)
