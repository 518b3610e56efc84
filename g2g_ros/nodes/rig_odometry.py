"""rig_odometry: multi-camera rig odometry with G2G (publishes odom->base_link).

Synchronized rig at t_prev and t -> G2G -> body motion through the rig extrinsics -> composed
odometry, published as ``nav_msgs/Odometry`` on ``odometry`` and TF ``odom -> base_link``, stamped
with the image group's stamp. Status on ``~/status`` and ``/diagnostics``; one
``std_msgs/Header`` per finished group on ``~/processed`` (its stamp, the outcome in
``frame_id``).

Services: ``~/reset`` (std_srvs/Trigger), ``~/reset_to_pose`` (g2g_msgs/SetPose).

A managed (lifecycle) node, see :mod:`g2g_ros.managed_node`: configure loads the model and the
calibration; activate subscribes the cameras; deactivate stops the output and keeps the pose (the
next group after re-activation continues from it); ``autostart`` (default true) does configure +
activate at start-up.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Dict, List, Optional, Tuple

import numpy as np
from g2g_model.data.rig import load_rig
from g2g_model.localization.rig_motion import RigMotionVerifier
from g2g_ros.calibration import format_rig_log_lines, rig_from_tf
from g2g_ros.camera_calibrations import image_needs, node_calibrations
from g2g_ros.camera_inputs import CameraInputs
from g2g_ros.conversions import pose_to_matrix, publish_processed
from g2g_ros.held_group import CalibrationWait
from g2g_ros.managed_node import ManagedNode
from g2g_ros.model_loading import describe_model, load_pipeline
from g2g_ros.nodes.rig_odometry_params import RigOdometryParams
from g2g_ros.nodes.verify_params import verifier_config
from g2g_ros.odometry_core import RigFrames, RigOdometry
from g2g_ros.pose_msgs import odometry_msg
from g2g_ros.qos import sensor_qos
from g2g_ros.rig_frames import usable_images
from g2g_ros.rig_status import publish_rig_status
from g2g_ros.rig_sync import RigSynchronizer
from g2g_ros.rig_tally import RigTally
from g2g_ros.spinning import spin_node
from g2g_ros.tf_broadcaster import TransformBroadcaster
from g2g_ros.tf_buffer import TFBuffer, TFError
from g2g_ros.tf_listener import TransformListener
from g2g_ros.timers import steady_timer
from g2g_ros.worker import StageTimes

STAGES = ("convert", "encode", "g2g", "publish", "total")


class RigOdometryNode(ManagedNode):
    """See the module docstring."""

    def __init__(self, **kwargs):
        super().__init__("rig_odometry", **kwargs)
        self.stages = StageTimes(STAGES)
        self.state_lock = threading.Lock()
        # Created by configure(); what is owned (ManagedNode.owned) is destroyed by the base at
        # cleanup, and cleanup() forgets the rest.
        self.pipeline = self.verifier = None
        self.odometry: Optional[RigOdometry] = None
        self.rig = self.calibrations = None
        self.sync: Optional[RigSynchronizer] = None
        self.tf_buffer: Optional[TFBuffer] = None
        self.tf_listener: Optional[TransformListener] = None
        self.odom_pub = self.processed_pub = None
        self.tf_broadcaster: Optional[TransformBroadcaster] = None
        self.srvs: List = []
        # Created by activate(); its subscriptions are destroyed by the base at deactivate.
        self.inputs: Optional[CameraInputs] = None
        # Every synchronized group ends once: counted in the tally, or dropped (counted by
        # reason here, or by the worker's queue as "group" jobs).
        self.tally = RigTally()
        self.drops: Dict[str, int] = collections.Counter()
        self.last_update_wall: Optional[float] = None
        self.last_cameras: List[str] = []
        self._feature_cache: Dict[int, object] = {}
        # Groups wait for the rig's calibration; the newest early one is held (g2g_ros.held_group).
        self.calibration_wait = CalibrationWait(
            self._try_resolve_rig, self._process_calibrated, self._on_worker_error,
            lambda reason: self.drops.update([reason]))
        self.held = self.calibration_wait.held
        self._held_timer = None
        self.declare_params(RigOdometryParams)  # ranges enforced by rclpy (g2g_ros.parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)
        from diagnostic_msgs.msg import DiagnosticArray

        from g2g_msgs.msg import EstimatorStatus

        # Health is reported in every lifecycle state: ordinary publishers and a timer.
        self.status_pub = self.create_publisher(EstimatorStatus, "~/status", 10)
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        steady_timer(self, self.p["status_period_s"], lambda: publish_rig_status(self),
                     "publish_status")
        self.start_lifecycle()

    # ------------------------------------------------------------------ parameters
    def _apply_parameters(self, params) -> None:
        # Called after a successful set: the two parameters that apply at once.
        for p in params:
            if self.odometry is not None and p.name in ("keyframe_stride", "max_spread_m"):
                setattr(self.odometry, p.name, p.value)

    # ------------------------------------------------------------------ lifecycle
    def configure(self) -> None:
        p = self.p
        cams = list(p["cameras"])
        if not cams or len(set(cams)) != len(cams) or any(not c for c in cams):
            raise ValueError(f"parameter cameras must be non-empty unique names, got {cams}")
        if p["extrinsics_source"] not in ("tf_static", "yaml"):
            raise ValueError(f"extrinsics_source must be 'tf_static' or 'yaml', "
                             f"got {p['extrinsics_source']!r}")
        min_cams = p["min_cameras"] or len(cams)
        if not 1 <= min_cams <= len(cams):
            raise ValueError(f"min_cameras must be in [0, {len(cams)}], got {p['min_cameras']}")
        sensor_qos(p["sensor_qos_reliability"])  # raises naming a bad value
        self.cameras, self.min_cameras = cams, min_cams
        self.tf_buffer = TFBuffer()
        self.tf_listener = self.owned(TransformListener(self.tf_buffer, self))
        if p["extrinsics_source"] == "yaml":
            self.rig = load_rig(p["calibration_file"], calibration=True)
            missing = [c for c in cams if c not in self.rig.names]
            if missing:
                raise ValueError(f"calibration {p['calibration_file']} lacks cameras {missing}")
            self._log_rig()
        self.pipeline = load_pipeline(p["checkpoint"], p["device"], "rig_odometry",
                                      p["precision"], p["backbone_weights"])
        if len(cams) > self.pipeline.max_frames:  # else every group would fail at predict
            model = describe_model(self.pipeline, p["checkpoint"], "rig_odometry")
            w = self.pipeline.max_frames
            raise ValueError(f"{len(cams)} cameras, but {model} takes groups of at most {w} "
                             f"frames (its max_frames W): list at most {w} in cameras, or use a "
                             "checkpoint trained for more")
        verify = verifier_config(p)
        self.calibrations = node_calibrations(self, self.rig, image_needs(self.pipeline, verify))
        self.verifier = RigMotionVerifier(verify) if verify.enabled else None
        if p["window_keyframes"] and not 3 <= p["window_keyframes"]:
            raise ValueError(f"window_keyframes must be 0 (off) or >= 3, got "
                             f"{p['window_keyframes']}")
        if self.pipeline.untrained:
            self.get_logger().warning(
                "no trained rig-odometry checkpoint: running with RANDOM weights, the odometry "
                "is meaningless (wiring only)")
        self.sync = RigSynchronizer(
            cams, self._on_group, "exact", slop_ns=int(p["sync_slop_ms"] * 1e6),
            min_interval_ns=int(p["sync_min_interval_ms"] * 1e6),
            max_wait_ns=int(p["sync_max_wait_ms"] * 1e6), min_cameras=min_cams,
            queue_size=p["queue_size"])
        from nav_msgs.msg import Odometry
        from std_srvs.srv import Trigger

        from g2g_msgs.srv import SetPose

        # Outputs: lifecycle publishers, silent unless the node is active; all are owned (the
        # base destroys them at cleanup).
        from std_msgs.msg import Header

        self.odom_pub = self.owned(self.create_lifecycle_publisher(Odometry, "odometry", 10))
        # One Header per group the worker finished with (stamp: the group's; frame_id: the
        # outcome), also those that publish no odometry (skipped by keyframe_stride, rejected,
        # dropped): what an evaluation replay waits for (conversions.publish_processed).
        self.processed_pub = self.owned(self.create_lifecycle_publisher(Header, "~/processed",
                                                                        50))
        self.tf_broadcaster = self.owned(TransformBroadcaster(self, lifecycle=True))
        self.srvs = [self.owned(self.create_service(Trigger, "~/reset", self._srv_reset)),
                     self.owned(self.create_service(SetPose, "~/reset_to_pose",
                                                    self._srv_reset_to_pose))]
        # Room for the groups that arrive while a step is verified (deferral, see _behind).
        self.start_worker("g2g_rig_odometry", maxlen=4, on_error=self._on_worker_error)

    def activate(self) -> None:
        # Owned: the base unsubscribes them at deactivate (the object stays, a job in
        # progress may read its intrinsics).
        self.inputs = self.owned(CameraInputs(
            self, self.cameras, self.sync.add, self.p["image_topic"],
            self.p["camera_info_topic"], self.p["use_compressed"],
            self.p["sensor_qos_reliability"], max_ahead_s=self.p["max_stamp_ahead_s"],
            on_reject=lambda cam, why: self.report_input(f"camera {cam}", why),
            calibrations=self.calibrations))
        self.get_logger().info(
            f"rig odometry active: cameras {self.cameras} (min {self.min_cameras}), "
            f"keyframe stride {self.p['keyframe_stride']}, model "
            f"{describe_model(self.pipeline, self.p['checkpoint'], 'rig_odometry')} on "
            f"{self.p['device']}")
        if self._held_timer is None:  # kept while inactive, destroyed at cleanup
            self._held_timer = self.owned(steady_timer(self, CalibrationWait.RETRY_S,
                                                       lambda: self.calibration_wait.retry(
                                                           self.worker), "retry_held_group"),
                                          until="cleanup")

    def deactivate(self) -> None:
        # No new input (the base unsubscribed it), queued groups dropped, the group in progress
        # finishes (and is still published: the publishers are disabled after this hook).
        if self.sync is not None:
            self.sync.reset()
        if self.worker is not None:
            self.worker.discard()
            self.worker.wait_idle(timeout=30.0)
        self.held.drop()
        # Keep the pose; the first group after re-activation starts a new chain from it.
        with self.state_lock:
            if self.odometry is not None:
                self.odometry.restart_chain()
            self._feature_cache = {}

    def cleanup(self) -> None:
        # The worker, the retry timer, services and publishers were destroyed by the base.
        self._held_timer = None
        self.held.drop()
        self.srvs, self.inputs, self.tf_listener, self.tf_broadcaster = [], None, None, None
        self.odom_pub = self.pipeline = self.verifier = self.odometry = self.rig = self.sync = None
        self.processed_pub = None
        self.calibrations = None
        self.tf_buffer = None
        self._feature_cache = {}
        self.last_update_wall, self.last_cameras = None, []

    def _log_rig(self) -> None:
        for line in format_rig_log_lines(self.rig):
            self.get_logger().info(line)

    # ------------------------------------------------------------------ data path
    def _on_group(self, group) -> None:
        # Called by the synchronizer outside its lock: only enqueue.
        self.worker.submit("group", lambda: self.calibration_wait.group(group))

    def _try_resolve_rig(self) -> bool:
        """Whether the rig is known; else it is built from camera_info + /tf_static once every
        camera has both (what is missing is reported)."""
        if self.rig is not None:
            return True
        intr = {c: self.calibrations.intrinsics(c) for c in self.cameras}
        missing = [c for c, v in intr.items() if v is None]
        if missing:
            self.problems.report("calibration", f"waiting for camera_info of {missing}")
            return False
        try:
            self.rig = rig_from_tf(self.tf_buffer, intr, base_frame=self.p["base_frame"],
                                   frame_ids={c: c + self.p["camera_frame_suffix"]
                                              for c in self.cameras})
        except (TFError, ValueError) as exc:
            self.problems.report("calibration", f"extrinsics from /tf_static: {exc}")
            return False
        self.problems.clear("calibration")
        self._log_rig()
        return True

    def _process_calibrated(self, group) -> None:
        """:meth:`_step` on one group, then its outcome on ``~/processed`` (also when it
        raised: the worker reports the error)."""
        outcome = "failed"
        try:
            outcome = self._step(group)
        except Exception as exc:
            outcome = f"failed: {exc}"
            raise
        finally:
            publish_processed(self.processed_pub, group.stamp_ns, outcome)

    def _window(self):
        """The refined window (``window_keyframes``; only with a verifier), or None."""
        if not self.p["window_keyframes"] or self.verifier is None:
            return None
        from g2g_model.localization.rig_window import KeyframeWindow

        return KeyframeWindow(self.p["window_keyframes"],
                              sigma_px=self.verifier.config.reprojection_px / 4)

    def _step(self, group) -> str:
        """One synchronized group through the odometry; returns what became of it."""
        t0 = time.perf_counter()
        if self.odometry is None:
            self.odometry = RigOdometry(
                self._estimate, {c.name: c.T_body_cam for c in self.rig.cameras},
                keyframe_stride=self.p["keyframe_stride"], max_spread_m=self.p["max_spread_m"],
                verifier=self.verifier, defer=self._behind,
                max_deferred=self.p["verify_max_deferred"], window=self._window())
        cams, images, ks = usable_images(group, self.cameras, self.calibrations, self.report_input,
                                         self.problems.clear)
        if len(cams) < self.min_cameras:
            self.drops["too_few_cameras"] += 1
            self.report_input("group", f"only {len(cams)} usable cameras "
                              f"(min_cameras {self.min_cameras}); group dropped")
            return f"dropped: only {len(cams)} usable cameras"
        self.stages.set("convert", 1e3 * (time.perf_counter() - t0))
        with self.state_lock:
            update = self.odometry.process(RigFrames(group.stamp_ns, cams, images, np.stack(ks)))
        if update is None:
            return self.tally.skipped()
        t1 = time.perf_counter()
        self._publish(update)
        self.stages.set("publish", 1e3 * (time.perf_counter() - t1))
        self.stages.set("total", 1e3 * (time.perf_counter() - t0))
        outcome = self.tally.processed(update)
        self.last_update_wall = time.monotonic()
        self.last_cameras = cams
        self.problems.clear("group")
        self.problems.clear("odometry")
        return outcome

    def _behind(self) -> Optional[str]:
        """Why the current step's verification is deferred (a newer group waits), or None."""
        n = self.worker.queued(("group",)) if self.worker is not None else 0
        return f"{n} newer group{'s' if n > 1 else ''} queued" if n else None

    def _estimate(self, group_a, group_b) -> Tuple[np.ndarray, np.ndarray]:
        key_a, key_b = group_a.stamps[0], group_b.stamps[0]
        pred = self.pipeline.predict(group_a, group_b, features_a=self._feature_cache.get(key_a))
        # The keyframe's features stay: after a deferred step it is group_a again.
        self._feature_cache = {key_a: pred.features_a, key_b: pred.features_b}
        self.stages.set("encode", pred.timing_ms["encode"])
        self.stages.set("g2g", pred.timing_ms["g2g"])
        return pred.a0_T_b0, pred.b0_estimates

    def _publish(self, update) -> None:
        msg = odometry_msg(update, self.p["odom_frame"], self.p["base_frame"])
        self.odom_pub.publish(msg)
        if self.p["publish_tf"]:
            self.tf_broadcaster.send_matrix(update.odom_T_base, self.p["odom_frame"],
                                            self.p["base_frame"], update.stamp_ns)

    def _on_worker_error(self, exc: BaseException) -> None:
        self.drops["error"] += 1
        self.report_input("odometry", f"group dropped: {exc}")

    # ------------------------------------------------------------------ services
    def reset_time_buffers(self) -> None:
        """After a jump back of time or on ``~/reset``: the synchronizer's per-camera stamps
        and queues, the dynamic TF, the stamp history, queued and held groups are forgotten
        (dropped groups counted); the pose is kept and the next group starts a new chain."""
        if self.sync is not None:
            self.sync.reset()
        if self.tf_buffer is not None:
            self.tf_buffer.clear_dynamic()
        if self.inputs is not None:
            self.inputs.reset_stamps()
        if self.worker is not None:
            self.worker.discard(("group", "held"))
        self.held.drop()
        with self.state_lock:
            if self.odometry is not None:
                self.odometry.restart_chain()
            self._feature_cache = {}

    def _srv_reset(self, request, response):
        if not self.configured:
            response.success, response.message = False, "not configured"
            return response
        self.reset_time_buffers()
        with self.state_lock:
            if self.odometry is not None:
                self.odometry.reset()
            self._feature_cache = {}
        response.success = True
        response.message = ("odometry reset to the identity; synchronizer, TF and stamp "
                            "checks cleared")
        return response

    def _srv_reset_to_pose(self, request, response):
        try:
            pose = pose_to_matrix(request.pose.pose)
        except ValueError as exc:
            response.success, response.message = False, str(exc)
            return response
        if self.odometry is None:
            response.success, response.message = False, "not configured or no group received yet"
            return response
        with self.state_lock:
            self.odometry.reset(pose)
            self._feature_cache = {}
        response.success, response.message = True, "odometry reset to the given pose"
        return response


def main(args=None) -> None:
    spin_node(RigOdometryNode, args, threads=2)


if __name__ == "__main__":
    main()
