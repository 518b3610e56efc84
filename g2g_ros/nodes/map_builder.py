"""map_builder: record keyframes (images + poses) into a G2G map; ``~/save_map`` writes it.

Poses come from TF: ``<map_frame> -> <base_frame>`` at each image stamp (a SLAM/ground-truth
source), composed with the camera extrinsics from ``/tf_static`` or a YAML calibration. A frame
becomes a keyframe of its camera when the camera moved ``min_translation_m`` or turned
``min_rotation_deg`` since that camera's last keyframe. Images are rectified to their
calibration's pinhole (:mod:`g2g_ros.camera_calibrations`; the map records the rectified K)
and stored resized to the model's input size (PNG). ``~/save_map`` encodes every keyframe once
with the model's backbone (the features relocalization compares) and writes the map atomically.

A managed (lifecycle) node, see :mod:`g2g_ros.managed_node`: configure loads the model and creates
the services; activate subscribes the cameras (recording); deactivate pauses the recording and
keeps the keyframes (``~/save_map`` still works); cleanup forgets them; ``autostart`` (default
true) does configure + activate at start-up.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import List, Optional

from rclpy.callback_groups import ReentrantCallbackGroup

from g2g_model.data.rig import load_rig
from g2g_model.cameras.reduction import ImageNeeds
from g2g_model.maps.building import KEYFRAME_MAX_PX, MapBuilder
from g2g_model.maps.format import G2GMap, map_save_path, save_map
from g2g_ros.camera_calibrations import node_calibrations
from g2g_ros.camera_inputs import CameraInputs
from g2g_ros.diagnostics import diagnostic_status, tf_values
from g2g_ros.managed_node import ManagedNode
from g2g_ros.model_loading import BACKBONE_WEIGHTS_DESCRIPTION, describe_model, load_pipeline
from g2g_ros.nodes.camera_params import CameraParams
from g2g_ros.parameters import param, status_period_param
from g2g_ros.qos import sensor_qos
from g2g_ros.spinning import spin_node
from g2g_ros.tf_buffer import TFBuffer, TFError
from g2g_ros.tf_listener import TransformListener
from g2g_ros.timers import steady_timer


@dataclass
class MapBuilderParams(CameraParams):
    """Every parameter of the map_builder node (read at configure, settable while
    unconfigured, see ManagedNode; ranges enforced by rclpy)."""

    cameras: List[str] = param(["cam0"], "cameras to record")
    map_frame: str = param("map", "frame the keyframe poses are expressed in")
    min_translation_m: float = param(0.2, "keyframe spacing (translation)",
                                     value_range=(0.0, 1000.0))
    min_rotation_deg: float = param(10.0, "keyframe spacing (rotation)",
                                    value_range=(0.0, 180.0))
    max_keyframes: int = param(20000, "stop recording beyond this", value_range=(1, 10_000_000))
    keyframe_max_px: int = param(
        KEYFRAME_MAX_PX, "long side keyframes are stored at (an image wider than 16:9 at the "
        "short side of a 16:9 image of it; aspect kept, never below the model's input; 0: as "
        "received): relocalize's verifier triangulates the map from them, so keep "
        "it at relocalize's verify_max_image_px", value_range=(0, 100_000))
    checkpoint: str = param("", "G2G checkpoint whose backbone encodes the map")
    backbone_weights: str = param("", BACKBONE_WEIGHTS_DESCRIPTION)
    device: str = param("cpu", "torch device")
    status_period_s: float = status_period_param()


class MapBuilderNode(ManagedNode):
    """See the module docstring."""

    def __init__(self, **kwargs):
        super().__init__("map_builder", **kwargs)
        self.builder: Optional[MapBuilder] = None  # made by configure (it needs the model)
        self.frames_seen = 0
        self.pipeline = self.rig = self.tf_buffer = self.tf_listener = self.inputs = None
        self.calibrations = None
        self.srvs: list = []
        self.declare_params(MapBuilderParams)
        from diagnostic_msgs.msg import DiagnosticArray

        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        steady_timer(self, self.p["status_period_s"], self._publish_status, "publish_status")
        self.start_lifecycle()

    def configure(self) -> None:
        from std_srvs.srv import Trigger

        from g2g_msgs.srv import SaveMap

        sensor_qos(self.p["sensor_qos_reliability"])  # raises naming a bad value
        self.tf_buffer = TFBuffer(cache_duration_ns=30 * 10**9)
        self.tf_listener = self.owned(TransformListener(self.tf_buffer, self))
        self.rig = None
        if self.p["extrinsics_source"] == "yaml":
            self.rig = load_rig(self.p["calibration_file"], calibration=True)
        elif self.p["extrinsics_source"] != "tf_static":
            raise ValueError(f"extrinsics_source must be 'tf_static' or 'yaml', "
                             f"got {self.p['extrinsics_source']!r}")
        self.pipeline = load_pipeline(self.p["checkpoint"], self.p["device"], "relocalization",
                                      backbone_weights=self.p["backbone_weights"])
        # Images are reduced once as they arrive to what the keyframes are stored at.
        needs = ImageNeeds(tuple(self.pipeline.image_size), self.p["keyframe_max_px"])
        self.calibrations = node_calibrations(self, self.rig, needs)
        self.builder = MapBuilder(self.pipeline, self.p["min_translation_m"],
                                  self.p["min_rotation_deg"], self.p["max_keyframes"],
                                  keyframe_max_px=self.p["keyframe_max_px"])
        group = ReentrantCallbackGroup()
        self.srvs = [self.owned(self.create_service(SaveMap, "~/save_map", self._srv_save,
                                                    callback_group=group)),
                     self.owned(self.create_service(Trigger, "~/clear", self._srv_clear,
                                                    callback_group=group))]
        self.start_worker("g2g_map_builder", maxlen=32, on_error=self._on_error)

    def activate(self) -> None:
        # Owned: the base unsubscribes them at deactivate (the object stays, a job in
        # progress may read its intrinsics).
        self.inputs = self.owned(CameraInputs(
            self, list(self.p["cameras"]), self._on_image, self.p["image_topic"],
            self.p["camera_info_topic"], self.p["use_compressed"],
            self.p["sensor_qos_reliability"], max_ahead_s=self.p["max_stamp_ahead_s"],
            on_reject=lambda cam, why: self.report_input(f"camera {cam}", why),
            calibrations=self.calibrations))
        encoder = describe_model(self.pipeline, self.p["checkpoint"], "relocalization",
                                 encoder_only=True)
        self.get_logger().info(
            f"recording keyframes of {list(self.p['cameras'])} in frame {self.p['map_frame']}; "
            f"encoder of {encoder}")

    def deactivate(self) -> None:
        # Recording pauses (the base unsubscribed the inputs); the keyframes are kept and
        # ~/save_map still works.
        if self.worker is not None:
            self.worker.discard(("frame",))
            self.worker.wait_idle(timeout=30.0)

    def cleanup(self) -> None:
        # The worker, services and TF listener were destroyed by the base.
        self.srvs, self.inputs, self.tf_listener = [], None, None
        self.pipeline = self.rig = self.tf_buffer = self.builder = self.calibrations = None

    def reset_time_buffers(self) -> None:
        """After a jump back of time: forget the dynamic TF (its newer samples would make the
        replayed poses "old data") and the stamp history; the keyframes are kept."""
        if self.tf_buffer is not None:
            self.tf_buffer.clear_dynamic()
        if self.inputs is not None:
            self.inputs.reset_stamps()

    def _on_image(self, cam: str, stamp: int, msg) -> None:
        self.worker.submit("frame", lambda: self._add(cam, stamp, msg))

    def _add(self, cam: str, stamp: int, msg) -> None:
        self.frames_seen += 1
        if len(self.builder) >= self.p["max_keyframes"]:
            self.report_input("map", f"max_keyframes={self.p['max_keyframes']} reached")
            return
        if self.rig is not None:
            base_T_cam = self.rig[cam].T_body_cam  # raises naming a camera not in the file
        elif self.calibrations.get(cam) is None:
            self.report_input(f"camera {cam}", "no valid camera_info yet")
            return
        else:
            base_T_cam = self.tf_buffer.lookup_transform(
                self.p["base_frame"], cam + self.p["camera_frame_suffix"], 0)
        world_T_base = self.tf_buffer.lookup_transform(self.p["map_frame"],
                                                       self.p["base_frame"], stamp)
        world_T_cam = world_T_base @ base_T_cam
        if not self.builder.wants(cam, world_T_cam):
            return
        try:
            rgb, K = self.calibrations.image(cam, msg)
        except ValueError as exc:
            self.report_input(f"camera {cam}", f"image rejected: {exc}")
            return
        self.builder.add(cam, stamp, world_T_cam, rgb, K)
        self.problems.clear(f"camera {cam}")

    def build_map(self) -> G2GMap:
        return self.builder.finish(
            source=f"map_builder node {self.get_fully_qualified_name()}")

    def _srv_save(self, request, response):
        if not self.configured:
            response.success, response.message = False, "node is not configured"
            return response
        try:  # refused at once, before the keyframes are encoded
            if not request.path:
                raise ValueError("path is empty")
            map_save_path(request.path)
        except (ValueError, OSError) as exc:
            response.success, response.message = False, f"map not saved: {exc}"
            self.get_logger().error(response.message)
            return response
        done, result = threading.Event(), {}

        def job():
            try:
                gmap = self.build_map()
                result["path"] = str(save_map(gmap, request.path))
                result["n"] = len(gmap)
            except (ValueError, OSError) as exc:
                result["error"] = str(exc)
            finally:
                done.set()

        self.worker.submit("save", job)
        if not done.wait(timeout=600.0):
            response.success, response.message = False, "timed out"
        elif "error" in result:
            response.success, response.message = False, f"map not saved: {result['error']}"
        else:
            response.success, response.num_keyframes = True, result["n"]
            response.message = f"saved {result['n']} keyframes to {result['path']}"
        # One call site per severity: rclpy refuses a call site that changes its severity
        # (ValueError, which would end the node).
        if response.success:
            self.get_logger().info(response.message)
        else:
            self.get_logger().error(response.message)
        return response

    def _srv_clear(self, request, response):
        n = self.builder.clear() if self.builder is not None else 0
        response.success, response.message = True, f"cleared {n} keyframes"
        return response

    def _on_error(self, exc: BaseException) -> None:
        key = "tf" if isinstance(exc, TFError) else "frame"
        self.report_input(key, str(exc))

    def _publish_status(self) -> None:
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

        problems = self.problems.recent()
        keyframes = len(self.builder) if self.builder is not None else 0
        values = {"keyframes": keyframes, "frames_seen": self.frames_seen,
                  "lifecycle_state": self.lifecycle_state}
        values.update({f"problem {k}": m for k, m in problems})
        values.update(tf_values(self))
        level = self.lifecycle_level(DiagnosticStatus.WARN if problems else DiagnosticStatus.OK)
        text = "; ".join(f"{k}: {m}" for k, m in problems) or f"{keyframes} keyframes"
        if not self.active:
            text = f"{self.lifecycle_text()}: {text}"
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [diagnostic_status(f"{self.get_name()}: map builder", "g2g_map", level,
                                        text, values)]
        self.diag_pub.publish(arr)


def main(args=None) -> None:
    spin_node(MapBuilderNode, args, threads=2)


if __name__ == "__main__":
    main()
