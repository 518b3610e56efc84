"""relocalize: G2G relocalization against a stored map (publishes map->odom).

A thin ROS shell over :class:`g2g_model.localization.relocalizer.Relocalizer` (query window,
map-window selection, G2G, geometric verification with the rig's other cameras, correction
gate): parameters (:mod:`~g2g_ros.nodes.relocalize_params`), images + odometry -> query frames
(:mod:`~g2g_ros.nodes.relocalize_inputs`), map loads
(:mod:`~g2g_ros.nodes.relocalize_map_loading`), services, status and publishing:

* TF ``map -> odom`` (re-sent at ``tf_rate_hz``, future-dated by ``tf_future_dating_s``);
* ``~/pose`` (PoseWithCovarianceStamped: base_link in the map, with the localization's
  covariance, at the instant the fix holds: the query window's newest for a geometric fix, its
  first, G2G's anchor B0, for G2G alone); ``~/alignment`` (g2g_msgs/GroupAlignment, stamped
  B0);
* ``~/status`` and ``/diagnostics`` (with the last localization's path and inliers);
* ``~/map_path`` (nav_msgs/Path, transient local: the loaded map's keyframes in the map frame,
  republished at each map load; :mod:`g2g_ros.map_path`);
* ``~/processed`` (std_msgs/Header per image of the relocalization camera, frame_id = what
  became of it, e.g. ``buffered; localization accepted``; bag evaluation waits for it).

``localize_pacing``: ``wall`` (default) localizes every ``localize_period_s`` of wall time;
``stamps`` right after the first image stamped ``localize_period_s`` after the image that
triggered the previous one (evaluation: the same bag gives the same localizations anywhere).
``/initialpose`` is a hint (held until the odometry at its stamp arrives). Services:
``~/load_map`` (loads off the executor's threads, one at a time:
:mod:`~g2g_ros.nodes.relocalize_map_loading`),
``~/localize``, ``~/reset``, ``~/pause``, ``~/resume``. A managed node
(:mod:`g2g_ros.managed_node`): configure loads the model and the map named by ``map_path``;
activate subscribes the cameras and ``/initialpose`` and starts the timers; deactivate stops
them and keeps map, correction and query window; ``autostart`` does both at start-up.
"""

from __future__ import annotations

import threading
import time
from typing import Optional

import numpy as np
from rclpy.callback_groups import ReentrantCallbackGroup

from g2g_model.data.rig import load_rig
from g2g_model.localization.relocalizer import LocalizationResult, Relocalizer
from g2g_model.localization.rig_views import RigViews
from g2g_model.localization.window_relative import RelocalizationVerifier
from g2g_model.localization.window_selector import WindowSelector
from g2g_ros.calibration import format_rig_log_lines
from g2g_ros.camera_calibrations import image_needs, node_calibrations
from g2g_ros.camera_inputs import CameraInputs
from g2g_ros.conversions import pose_to_matrix, to_stamp
from g2g_ros.managed_node import ManagedNode
from g2g_ros.map_path import TOPIC as MAP_PATH_TOPIC
from g2g_ros.map_path import publish_map_path
from g2g_ros.model_loading import describe_model, load_pipeline
from g2g_ros.nodes.relocalize_inputs import QueryInputs
from g2g_ros.nodes.relocalize_map_loading import MapLoading
from g2g_ros.nodes.relocalize_params import (RelocalizeParams, check_parameters, gate_config,
                                             selector_config, verify_cameras, window_problem)
from g2g_ros.nodes.relocalize_status import publish_relocalize_status
from g2g_ros.nodes.verify_params import verifier_config
from g2g_ros.pose_msgs import alignment_msg, relocalized_pose_msg
from g2g_ros.qos import latched_qos
from g2g_ros.single_job import SingleJob
from g2g_ros.spinning import spin_node
from g2g_ros.tf_broadcaster import TransformBroadcaster
from g2g_ros.tf_buffer import TFBuffer
from g2g_ros.tf_listener import TransformListener
from g2g_ros.timers import steady_timer
from g2g_ros.worker import StageTimes

STAGES = ("convert", "select", "g2g", "verify", "total")


class RelocalizeNode(QueryInputs, MapLoading, ManagedNode):
    """See the module docstring."""

    def __init__(self, **kwargs):
        super().__init__("relocalize", **kwargs)
        self.stages = StageTimes(STAGES)
        self.paused = False
        self.frames_dropped = 0
        self.lock = threading.Lock()  # guards pending_initialpose
        self._forget_state()
        # Created by configure(); what is owned (ManagedNode.owned) is destroyed by the base at
        # cleanup, and cleanup() forgets the rest.
        self.pipeline = self.rig = self.calibrations = None
        self.engine: Optional[Relocalizer] = None
        self.tf_buffer, self.tf_listener = None, None  # TFBuffer, TransformListener
        self.pose_pub = self.align_pub = self.processed_pub = self.map_path_pub = None
        self.tf_broadcaster: Optional[TransformBroadcaster] = None
        self.srvs: list = []
        self.odom_sub = None
        # Created by activate(), its subscriptions destroyed by the base at deactivate.
        self.inputs: Optional[CameraInputs] = None
        self.declare_params(RelocalizeParams)
        self.add_on_set_parameters_callback(self._check_window_size)
        from diagnostic_msgs.msg import DiagnosticArray

        from g2g_msgs.msg import EstimatorStatus

        # Health is reported in every lifecycle state: ordinary publishers and a timer.
        self.status_pub = self.create_publisher(EstimatorStatus, "~/status", 10)
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.services_group = ReentrantCallbackGroup()
        self.map_loads = SingleJob("g2g_map_load")  # ~/load_map: one load at a time
        steady_timer(self, self.p["status_period_s"], self._publish_status, "publish_status")
        self.start_lifecycle()

    def _forget_state(self) -> None:
        self.pending_initialpose = None         # (stamp, map_T_base) awaiting its odometry
        self._last_trigger_stamp = self.last_fix_wall = None  # stamp ns, time.monotonic()
        self.last: Optional[LocalizationResult] = None       # the last localization that ran
        self.cleared_by_reset = False  # ~/reset cleared the correction; no fix since

    def _check_window_size(self, params):
        """Refuse a ``window_size`` (or ``checkpoint``) with which the window would not fit
        the model, with the reason (both are read at configure, so set while unconfigured)."""
        from rcl_interfaces.msg import SetParametersResult

        new = {p.name: p.value for p in params}
        problem = None
        if "window_size" in new or "checkpoint" in new:
            problem = window_problem({**self.p, **new})
        return SetParametersResult(successful=problem is None, reason=problem or "")

    @property
    def gmap(self):  # the loaded map or None
        return None if self.engine is None else self.engine.gmap

    # ------------------------------------------------------------------ lifecycle
    def configure(self) -> None:
        p = self.p
        cams = list(p["cameras"])
        self.camera = p["reloc_camera"] or (cams[0] if cams else "")
        if not self.camera:
            raise ValueError("no camera configured (parameters cameras / reloc_camera)")
        check_parameters(p)
        self.tf_buffer = TFBuffer(cache_duration_ns=30 * 10**9)
        self.tf_listener = self.owned(TransformListener(self.tf_buffer, self))
        if p["odom_source"] == "topic":
            from nav_msgs.msg import Odometry

            self.odom_sub = self.owned(self.create_subscription(Odometry, p["odom_topic"],
                                                                self._on_odometry, 50))
        if p["extrinsics_source"] == "yaml":
            self.rig = load_rig(p["calibration_file"], calibration=True)
            self.rig[self.camera]  # raises naming the camera if absent
            for line in format_rig_log_lines(self.rig):
                self.get_logger().info(line)
        self.pipeline = load_pipeline(p["checkpoint"], p["device"], "relocalization",
                                      p["precision"], p["backbone_weights"],
                                      p["rotation_matching"])
        verify = verifier_config(p)
        self.calibrations = node_calibrations(self, self.rig, image_needs(self.pipeline, verify))
        if self.pipeline.untrained:
            self.get_logger().warning("no trained relocalization checkpoint: RANDOM weights, "
                                      "corrections are meaningless (wiring only)")
        log = self.get_logger()
        selector = WindowSelector.from_config(selector_config(p), self.pipeline, log.info,
                                              log.warning)
        self.view_cameras = verify_cameras(p, self.camera)
        self.engine = Relocalizer(
            self.pipeline, selector, gate_config(p), p["min_translation_m"],
            p["min_rotation_deg"], RelocalizationVerifier(verify) if verify.enabled else None,
            RigViews() if self.view_cameras else None,
            second_window=bool(p["verify_second_window"]))
        if p["map_path"]:
            # The map named at configure is part of the configuration: without it, no configure.
            self.get_logger().info(self.engine.load_map(p["map_path"]))
        from nav_msgs.msg import Path

        # Latched state, sent in every lifecycle state from configure on (owned: destroyed at
        # cleanup).
        self.map_path_pub = self.owned(self.create_publisher(Path, MAP_PATH_TOPIC,
                                                             latched_qos()))
        publish_map_path(self)
        from geometry_msgs.msg import PoseWithCovarianceStamped
        from std_srvs.srv import Trigger

        from std_msgs.msg import Header

        from g2g_msgs.msg import GroupAlignment
        from g2g_msgs.srv import LoadMap, Localize

        # Outputs: lifecycle publishers, silent unless the node is active; all are owned (the
        # base destroys them at cleanup).
        pub = self.create_lifecycle_publisher
        self.pose_pub = self.owned(pub(PoseWithCovarianceStamped, "~/pose", 10))
        self.align_pub = self.owned(pub(GroupAlignment, "~/alignment", 10))
        self.processed_pub = self.owned(pub(Header, "~/processed", 50))
        self.tf_broadcaster = self.owned(TransformBroadcaster(self, lifecycle=True))
        g = self.services_group
        self.srvs = [self.owned(self.create_service(t, "~/" + n, cb, callback_group=g))
                     for t, n, cb in (
            (LoadMap, "load_map", self._srv_load_map), (Localize, "localize", self._srv_localize),
            (Trigger, "reset", self._srv_reset), (Trigger, "pause", self._srv_pause),
            (Trigger, "resume", self._srv_resume))]
        self.start_worker("g2g_relocalize", maxlen=16, on_error=self._on_worker_error)

    def activate(self) -> None:
        from geometry_msgs.msg import PoseWithCovarianceStamped

        # All owned: the base destroys them at deactivate (the CameraInputs object stays, a
        # job in progress may read its intrinsics).
        self.inputs = self.owned(CameraInputs(
            self, [self.camera] + self.view_cameras, self._on_image, self.p["image_topic"],
            self.p["camera_info_topic"], self.p["use_compressed"],
            self.p["sensor_qos_reliability"], max_ahead_s=self.p["max_stamp_ahead_s"],
            on_reject=lambda cam, why: self.report_input(f"camera {cam}", why),
            calibrations=self.calibrations))
        self.owned(self.create_subscription(
            PoseWithCovarianceStamped, "/initialpose", self._on_initialpose, 10))
        self.owned(steady_timer(self, 1.0 / self.p["tf_rate_hz"], self._publish_tf,
                                "publish_tf"))
        if self.p["localize_period_s"] > 0 and self.p["localize_pacing"] == "wall":
            self.owned(steady_timer(self, self.p["localize_period_s"], self._periodic_localize,
                                    "periodic_localize"))
        model = describe_model(self.pipeline, self.p["checkpoint"], "relocalization")
        self.get_logger().info(f"relocalization active on camera {self.camera} ({model}), window "
                               f"{self.p['window_size']}, map {self.engine.map_path or '(none)'}")

    def deactivate(self) -> None:
        # Inputs and timers stopped (by the base); the map, the correction and the query
        # window are kept. A ~/localize request already queued still gets its answer.
        if self.worker is not None:
            self.worker.discard(("frame", "localize"))
            self.worker.wait_idle(timeout=30.0)

    def cleanup(self) -> None:
        # The worker, services, subscriptions and publishers were destroyed by the base.
        self.srvs, self.odom_sub, self.tf_listener, self.tf_broadcaster = [], None, None, None
        self.pose_pub = self.align_pub = self.processed_pub = self.inputs = None
        self.map_path_pub = None
        self.pipeline = self.rig = self.engine = self.tf_buffer = self.calibrations = None
        self.paused = False
        self._forget_state()

    # ------------------------------------------------------------------ localization
    def _periodic_localize(self) -> None:
        # Only on new data: a query window that has not changed since the last localization
        # (cameras quiet, bag ended) is not localized again.
        if self.paused or self.engine is None or not self.engine.ready(new_frames=True):
            return
        self.worker.submit("localize", lambda: self._localize(self.engine.tracking_hint()),
                           replace_same_kind=True)

    def _localize(self, hint: Optional[np.ndarray]) -> LocalizationResult:
        """Run one relocalization and publish an accepted fix."""
        result = self.engine.localize(hint)
        if result.window_index is None:  # nothing ran (no map, query window not full)
            return result
        self.last = result
        for stage, ms in result.timing_ms.items():
            self.stages.set(stage, ms)
        if result.accepted:
            self.last_fix_wall = time.monotonic()
            self.cleared_by_reset = False
            self.problems.clear("localization")
            self._publish_fix(result)
        else:
            self.problems.report("localization", result.message)
        self.get_logger().info(result.message)
        # Each decision and its stage times reach ~/status and /diagnostics at once, not only
        # at the next period: a monitor (or g2g-eval-bag) sees every localization.
        self._publish_status()
        return result

    def _publish_fix(self, result: LocalizationResult) -> None:
        """Publish an accepted fix: the robot pose in the map and the group alignment (the
        map id and camera are those of the window the localization used)."""
        stamps = result.query.stamps
        self.pose_pub.publish(relocalized_pose_msg(
            result, self._camera_extrinsics(), to_stamp(int(stamps[result.fix_frame])),
            self.p["map_frame"]))
        self.align_pub.publish(alignment_msg(result, to_stamp(int(stamps[0])),
                                             self.p["camera_frame_suffix"]))
        self._publish_tf()

    def _publish_tf(self) -> None:
        current = self.engine.current if self.engine is not None else None
        if current is None:
            return
        now = self.get_clock().now().nanoseconds
        self.tf_broadcaster.send_matrix(current, self.p["map_frame"], self.p["odom_frame"],
                                        now + int(self.p["tf_future_dating_s"] * 1e9))

    def _on_worker_error(self, exc: BaseException) -> None:
        self.problems.report("localization", str(exc))
        self.get_logger().warning(f"relocalization step failed: {exc}",
                                  throttle_duration_sec=2.0)

    # ------------------------------------------------------------------ services
    def _refused(self, response, localize: bool = False) -> bool:
        """Whether a service cannot run in the node's state; ``response`` then says why."""
        why = ("node is not configured" if not self.configured else
               f"node is {self.lifecycle_state} (lifecycle): activate it first"
               if localize and not self.active else
               "paused (call ~/resume first)" if localize and self.paused else "")
        response.success, response.message = False, why
        return bool(why)

    def _srv_localize(self, request, response):
        if self._refused(response, localize=True):
            return response
        hint = None
        if request.use_hint:
            try:  # the hint is base_link in the map; the engine takes the camera's pose
                base_T_cam = self._camera_extrinsics()
                hint = pose_to_matrix(request.hint.pose.pose) @ (
                    base_T_cam if base_T_cam is not None else np.eye(4))
            except ValueError as exc:
                response.success, response.message = False, f"bad hint: {exc}"
                return response
        done = threading.Event()
        result = {}

        def job():
            try:
                result["value"] = self._localize(hint)
            except Exception as exc:
                result["value"] = LocalizationResult(False, f"localization failed: {exc}")
            finally:
                done.set()

        self.worker.submit("localize_request", job)
        if not done.wait(timeout=60.0):
            response.success, response.message = False, "timed out after 60 s"
            return response
        outcome: LocalizationResult = result["value"]
        response.success, response.message = bool(outcome.accepted), outcome.message
        response.overlap_score = float(outcome.score)
        if outcome.accepted and outcome.current is not None:
            from g2g_ros.conversions import matrix_to_transform_stamped

            response.map_to_odom = matrix_to_transform_stamped(
                outcome.current, self.p["map_frame"], self.p["odom_frame"],
                self.get_clock().now().nanoseconds)
        return response

    def _srv_reset(self, request, response):
        """Start localizing from scratch: clear the correction (map->odom), the hint, the query
        window and the time-keyed buffers; keep the map.

        The correction is cleared, not kept: a robot user calls ``~/reset`` when the robot was
        carried somewhere else or the pose in the map is wrong, and then a kept correction
        would go on being sent as map->odom (and steer the search as the tracking hint) until
        a new fix replaced it, which is what the reset is meant to stop. What a reset would
        otherwise be needed for is done without it: a jump back of the ROS time clears the
        time-keyed buffers and keeps the correction. Until the next accepted fix no map->odom
        is sent and the status is NOT_LOCALIZED; the reply says what became of the correction.
        """
        if self._refused(response):
            return response
        had = self.engine.current is not None
        self.reset_time_buffers()
        self.engine.reset()
        with self.lock:
            self.pending_initialpose = None
        self.last_fix_wall = None
        self.cleared_by_reset = True
        response.success = True
        response.message = (
            ("correction cleared: map->odom is no longer sent until the next accepted fix"
             if had else "no correction to clear (not localized)")
            + "; query window, hint and time-keyed buffers cleared; map kept")
        return response

    def _srv_pause(self, request, response):
        return self._set_paused(response, True, "paused; map->odom keeps being sent")

    def _srv_resume(self, request, response):
        return self._set_paused(response, False, "resumed")

    def _set_paused(self, response, paused: bool, done: str):
        response.success = self.paused != paused
        response.message = done if response.success else ("already paused" if paused
                                                          else "not paused")
        self.paused = paused
        return response

    # ------------------------------------------------------------------ status
    def _publish_status(self) -> None:
        publish_relocalize_status(self)


def main(args=None) -> None:
    spin_node(RelocalizeNode, args, threads=3)


if __name__ == "__main__":
    main()
