"""relocalize: G2G relocalization against a stored map (publishes map->odom).

Buffers the last W frames of one camera with their odometry poses (TF odom->base_link at each
image stamp, or a nav_msgs/Odometry topic) as group B, chooses the best map window (around a pose
hint when one is given; otherwise by ``window_scorer``: by default the mean of the token and the
image covisibility embeddings, either one alone, map-whitened token similarity, the covisibility
decoder or the mean-pooled descriptor; the embeddings' best windows are then re-ranked by the
pair verifier, which compares the images of the query and of each candidate), runs G2G,
gates the correction and publishes:

* TF ``map -> odom`` (re-sent at ``tf_rate_hz``, future-dated by ``tf_future_dating_s``);
* ``~/pose`` (PoseWithCovarianceStamped: base_link in the map at the query anchor's stamp);
* ``~/alignment`` (g2g_msgs/GroupAlignment with every predicted pose);
* ``~/status`` and ``/diagnostics``;
* ``~/processed`` (std_msgs/Header, one per image of the relocalization camera: stamp = the
  image's stamp, frame_id = what became of it, e.g. ``buffered; localization accepted``),
  published once the node is done with that image -- including, with
  ``localize_pacing: stamps``, the localization it triggered. Bag evaluation waits for it.

Pacing of the periodic localization (``localize_pacing``): ``wall`` (default) runs it every
``localize_period_s`` of wall time, whatever has arrived; ``stamps`` runs it right after the
first image whose stamp is at least ``localize_period_s`` after the image that triggered the
previous one (evaluation: the same bag gives the same localizations on any machine).

Accepts ``/initialpose`` as a hint (one stamped ahead of the odometry is held until the
odometry at its stamp arrives). Services: ``~/load_map``, ``~/localize``, ``~/reset``,
``~/pause``, ``~/resume``.

A managed (lifecycle) node, see :mod:`g2g_ros.managed_node`: configure loads the model and the
map named by ``map_path`` (a missing or bad map makes configure fail, with the reason in the
diagnostics); activate subscribes the camera and ``/initialpose`` and starts the map->odom
re-sending and the periodic relocalization; deactivate stops them and keeps the map, the
correction and the query window (``~/load_map`` also works while inactive); ``autostart``
(default true) does configure + activate at start-up.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Optional

import numpy as np
import torch
from rclpy.callback_groups import ReentrantCallbackGroup

from g2g_model.geometry import invert_pose
from g2g_model.groups import Group
from g2g_model.maps import MapError, load_map, map_windows, nearest_window
from g2g_model.window_selection import (MapWhitening, best_window, descriptor_similarity,
                                        token_statistics)
from g2g_ros.calibration import format_rig_log_lines, load_rig_calibration
from g2g_ros.camera_inputs import CameraInputs
from g2g_ros.image_conversion import to_rgb
from g2g_ros.managed_node import ManagedNode
from g2g_ros.node_common import (
    BACKBONE_WEIGHTS_DESCRIPTION, StageTimes, load_pipeline, sensor_qos, spin_node, stamp_ns,
    steady_timer, to_stamp,
)
from g2g_ros.pose_msgs import matrix_to_pose_msg, pose_msg_to_matrix
from g2g_ros.reloc_core import (
    Candidate, CorrectionGate, GateConfig, QueryBuffer, QueryFrame, correction_from_prediction,
)
from g2g_ros.tf_broadcaster import TransformBroadcaster
from g2g_ros.tf_buffer import ExtrapolationError, TFBuffer, TFError
from g2g_ros.tf_listener import TransformListener

STAGES = ("convert", "select", "g2g", "total")
WINDOW_SCORERS = ("combined", "embedding", "image", "whitened", "covisibility", "descriptor")
# Scorers whose window score is an estimated overlap (min_overlap_score applies to them).
OVERLAP_SCORERS = ("combined", "embedding", "image")


class RelocalizeNode(ManagedNode):
    """See the module docstring."""

    def __init__(self, **kwargs):
        super().__init__("relocalize", **kwargs)
        self.stages = StageTimes(STAGES)
        self.lock = threading.Lock()
        self.paused = False
        self.localize_attempts = 0
        self.frames_dropped = 0
        self._forget_state()
        # Created by configure(), released by cleanup().
        self.pipeline = self.covis = self.embedding = self.image_embedding = self.rig = None
        self.gate: Optional[CorrectionGate] = None
        self.buffer: Optional[QueryBuffer] = None
        self.tf_buffer: Optional[TFBuffer] = None
        self.tf_listener: Optional[TransformListener] = None
        self.pose_pub = self.align_pub = self.processed_pub = None
        self.tf_broadcaster: Optional[TransformBroadcaster] = None
        self.srvs: list = []
        self.odom_sub = None
        # Created by activate(), removed by deactivate().
        self.inputs: Optional[CameraInputs] = None
        self.initialpose_sub = None
        self.timers_active: list = []
        self._declare_parameters()
        from diagnostic_msgs.msg import DiagnosticArray

        from g2g_msgs.msg import EstimatorStatus

        # Health is reported in every lifecycle state: ordinary publishers and a timer.
        self.status_pub = self.create_publisher(EstimatorStatus, "~/status", 10)
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.services_group = ReentrantCallbackGroup()
        steady_timer(self, self.p["status_period_s"], self._publish_status, "publish_status")
        self.start_lifecycle()

    def _forget_state(self) -> None:
        self.gmap = self.windows = self.map_tokens = self.map_scoring = None
        self.map_verify_images = None  # the map's frames shrunk for the pair verifier
        self.map_path = ""
        self.hint: Optional[np.ndarray] = None  # provisional map->odom from /initialpose
        self.pending_initialpose = None         # (stamp, map_T_base) awaiting its odometry
        self._last_trigger_stamp: Optional[int] = None
        self.last_fix_wall: Optional[float] = None
        self.last_reason = ""

    # ------------------------------------------------------------------ parameters
    def _declare_parameters(self) -> None:
        # A 4th argument True: read at configure (settable while unconfigured, see ManagedNode).
        self.declare_camera_params()
        d = self.declare
        d("cameras", ["cam0"], "rig cameras; relocalization uses reloc_camera", True)
        d("reloc_camera", "", "camera used for relocalization "
          "(empty = the first of cameras)", True)
        d("map_frame", "map", "map frame (REP-105)", True)
        d("odom_frame", "odom", "odometry frame (REP-105)", True)
        d("odom_source", "tf", "odometry from 'tf' (odom->base_link) or "
          "'topic' (nav_msgs/Odometry on odom_topic)", True)
        d("odom_topic", "odometry", "odometry topic (odom_source=topic)", True)
        d("tf_wait_s", 0.5, "how long to wait for odometry at an image stamp "
          "(and for a first camera_info)", True)
        d("window_size", 5, "frames per group (W)", True)
        d("min_translation_m", 0.1, "buffer a frame only after this much motion ...", True)
        d("min_rotation_deg", 5.0, "... or this much rotation", True)
        d("map_path", "", "map (.g2gmap) loaded at start-up", True)
        d("localize_period_s", 2.0, "relocalize this often (0 = only via ~/localize)", True)
        d("localize_pacing", "wall", "'wall': localize_period_s of wall time; 'stamps': of "
          "image stamps, run right after the triggering image (evaluation)", True)
        d("hint_radius_m", 5.0, "search radius around a pose hint", True)
        d("max_jump_translation_m", 1.0, "larger correction changes need consistency", True)
        d("max_jump_rotation_deg", 10.0, "larger correction changes need consistency", True)
        d("consistency_count", 2, "consistent candidates needed for a first fix / a jump", True)
        d("max_fusion_spread_m", 1.0,
          "reject when the per-frame corrections disagree by more",
          True)
        d("min_overlap_score", 0.0, "reject windows whose covisibility score (window_scorer "
          "combined, embedding, image or covisibility: an estimated overlap in [0, 1]) is "
          "lower", True)
        d("tf_rate_hz", 20.0, "re-send rate of map->odom", True)
        d("tf_future_dating_s", 0.1, "map->odom is stamped now + this", True)
        d("checkpoint", "", "G2G checkpoint; empty = embedded default", True)
        d("backbone_weights", "", BACKBONE_WEIGHTS_DESCRIPTION, True)
        d("window_scorer", "combined",
          "how map windows are scored without a pose hint: 'combined' (mean of the token "
          "embedding of covis_embedding and the image embedding of covis_image_embedding, best "
          "on held-out sim scenes), 'embedding' or 'image' (one of them), 'whitened' "
          "(map-whitened token similarity, no model), 'covisibility' (the decoder of "
          "covis_checkpoint) or 'descriptor' (mean-pooled token cosine)", True)
        d("covis_embedding", "",
          "token covisibility embedding for window_scorer=combined/embedding; empty = embedded "
          "default", True)
        d("covis_image_embedding", "",
          "image covisibility embedding for window_scorer=combined/image; empty = embedded "
          "default", True)
        d("covis_pair_verifier", "",
          "pair verifier that re-ranks the best map windows of window_scorer=combined/"
          "embedding/image (its file holds how many and with what weight); empty = embedded "
          "default, 'none' = no re-ranking", True)
        d("covis_checkpoint", "",
          "covisibility decoder for window_scorer=covisibility; empty = embedded default", True)
        d("covis_coarse_stride", 1, "score every k-th map frame first (large maps)", True)
        d("device", "cpu", "torch device", True)
        d("precision", "auto", "model arithmetic: auto (bf16 where fast), fp32 (as g2g-eval) "
          "or bf16", True)
        d("status_period_s", 1.0, "status/diagnostics period", fixed=True)

    # ------------------------------------------------------------------ lifecycle
    def configure(self) -> None:
        p = self.p
        cams = list(p["cameras"])
        self.camera = p["reloc_camera"] or (cams[0] if cams else "")
        if not self.camera:
            raise ValueError("no camera configured (parameters cameras / reloc_camera)")
        if p["odom_source"] not in ("tf", "topic"):
            raise ValueError(f"odom_source must be 'tf' or 'topic', got {p['odom_source']!r}")
        if p["extrinsics_source"] not in ("tf_static", "yaml"):
            raise ValueError(f"extrinsics_source must be 'tf_static' or 'yaml', "
                             f"got {p['extrinsics_source']!r}")
        if p["tf_rate_hz"] <= 0:
            raise ValueError(f"tf_rate_hz must be > 0, got {p['tf_rate_hz']}")
        sensor_qos(p["sensor_qos_reliability"])  # raises naming a bad value
        if p["localize_pacing"] not in ("wall", "stamps"):
            raise ValueError(f"localize_pacing must be 'wall' or 'stamps', "
                             f"got {p['localize_pacing']!r}")
        if p["window_scorer"] not in WINDOW_SCORERS:
            raise ValueError(f"window_scorer must be one of {WINDOW_SCORERS}, "
                             f"got {p['window_scorer']!r}")
        self.gate = CorrectionGate(GateConfig(
            max_jump_translation_m=p["max_jump_translation_m"],
            max_jump_rotation_deg=p["max_jump_rotation_deg"],
            consistency_count=p["consistency_count"],
            min_overlap_score=p["min_overlap_score"],
            max_fusion_spread_m=p["max_fusion_spread_m"]))
        self.buffer = QueryBuffer(p["window_size"], p["min_translation_m"], p["min_rotation_deg"])
        self.tf_buffer = TFBuffer(cache_duration_ns=30 * 10**9)
        self.tf_listener = TransformListener(self.tf_buffer, self)
        if p["odom_source"] == "topic":
            from nav_msgs.msg import Odometry

            self.odom_sub = self.create_subscription(Odometry, p["odom_topic"],
                                                     self._on_odometry, 50)
        if p["extrinsics_source"] == "yaml":
            self.rig = load_rig_calibration(p["calibration_file"])
            self.rig.camera(self.camera)  # raises naming the camera if absent
            for line in format_rig_log_lines(self.rig):
                self.get_logger().info(line)
        self.pipeline = load_pipeline(p["checkpoint"], p["device"], "relocalization",
                                      p["precision"], p["backbone_weights"])
        if p["window_size"] > self.pipeline.max_frames:
            raise ValueError(f"window_size {p['window_size']} exceeds the model's max_frames "
                             f"{self.pipeline.max_frames}")
        if self.pipeline.untrained:
            self.get_logger().warning("no trained relocalization checkpoint: RANDOM weights, "
                                      "corrections are meaningless (wiring only)")
        self.covis = self.embedding = self.image_embedding = self.verifier = None
        if p["window_scorer"] == "covisibility":
            self.covis = self._load_covisibility(p["covis_checkpoint"])
        if p["window_scorer"] in ("combined", "embedding"):
            self.embedding = self._load_embedding(p["covis_embedding"])
        if p["window_scorer"] in ("combined", "image"):
            self.image_embedding = self._load_image_embedding(p["covis_image_embedding"])
        if p["window_scorer"] in OVERLAP_SCORERS and p["covis_pair_verifier"] != "none":
            self.verifier = self._load_pair_verifier(p["covis_pair_verifier"])
        if p["map_path"]:
            # The map named at configure is part of the configuration: without it, no configure.
            message = self._install_map(p["map_path"], *self._read_map(p["map_path"]))
            self.get_logger().info(message)
        from geometry_msgs.msg import PoseWithCovarianceStamped
        from std_srvs.srv import Trigger

        from std_msgs.msg import Header

        from g2g_msgs.msg import GroupAlignment
        from g2g_msgs.srv import LoadMap, Localize

        # Outputs: lifecycle publishers, silent unless the node is active.
        self.pose_pub = self.create_lifecycle_publisher(PoseWithCovarianceStamped, "~/pose", 10)
        self.align_pub = self.create_lifecycle_publisher(GroupAlignment, "~/alignment", 10)
        self.processed_pub = self.create_lifecycle_publisher(Header, "~/processed", 50)
        self.tf_broadcaster = TransformBroadcaster(self, lifecycle=True)
        g = self.services_group
        self.srvs = [
            self.create_service(LoadMap, "~/load_map", self._srv_load_map, callback_group=g),
            self.create_service(Localize, "~/localize", self._srv_localize, callback_group=g),
            self.create_service(Trigger, "~/reset", self._srv_reset, callback_group=g),
            self.create_service(Trigger, "~/pause", self._srv_pause, callback_group=g),
            self.create_service(Trigger, "~/resume", self._srv_resume, callback_group=g),
        ]
        self.start_worker("g2g_relocalize", maxlen=16, on_error=self._on_worker_error)

    def activate(self) -> None:
        from geometry_msgs.msg import PoseWithCovarianceStamped

        self.inputs = CameraInputs(self, [self.camera], self._on_image, self.p["image_topic"],
                                   self.p["camera_info_topic"], self.p["use_compressed"],
                                   self.p["sensor_qos_reliability"])
        self.initialpose_sub = self.create_subscription(
            PoseWithCovarianceStamped, "/initialpose", self._on_initialpose, 10)
        self.timers_active = [steady_timer(self, 1.0 / self.p["tf_rate_hz"], self._publish_tf,
                                           "publish_tf")]
        if self.p["localize_period_s"] > 0 and self.p["localize_pacing"] == "wall":
            self.timers_active.append(steady_timer(self, self.p["localize_period_s"],
                                                   self._periodic_localize, "periodic_localize"))
        self.get_logger().info(f"relocalization active on camera {self.camera}, window "
                               f"{self.p['window_size']}, map {self.map_path or '(none)'}")

    def deactivate(self) -> None:
        # Inputs and timers stop; the map, the correction and the query window are kept. A
        # ~/localize request already queued still gets its answer.
        if self.inputs is not None:
            self.inputs.destroy()  # the object stays: a job in progress may read intrinsics
        if self.initialpose_sub is not None:
            self.destroy_subscription(self.initialpose_sub)
            self.initialpose_sub = None
        for timer in self.timers_active:
            self.destroy_timer(timer)
        self.timers_active = []
        if self.worker is not None:
            self.worker.discard(("frame", "localize"))
            self.worker.wait_idle(timeout=30.0)

    def cleanup(self) -> None:
        self.stop_worker()
        self.deactivate()
        for srv in self.srvs:
            self.destroy_service(srv)
        if self.odom_sub is not None:
            self.destroy_subscription(self.odom_sub)
        if self.tf_listener is not None:
            self.tf_listener.destroy()
        if self.tf_broadcaster is not None:
            self.tf_broadcaster.destroy()
        for pub in (self.pose_pub, self.align_pub, self.processed_pub):
            if pub is not None:
                self.destroy_lifecycle_publisher(pub)
        self.srvs, self.odom_sub, self.tf_listener, self.tf_broadcaster = [], None, None, None
        self.pose_pub = self.align_pub = self.processed_pub = self.inputs = None
        self.pipeline = self.covis = self.embedding = self.image_embedding = self.rig = None
        self.gate = self.buffer = self.tf_buffer = None
        self.paused = False
        self._forget_state()

    # ------------------------------------------------------------------ inputs
    def _on_image(self, cam: str, stamp: int, msg) -> None:
        self.worker.submit("frame", lambda: self._handle_image(stamp, msg))

    def _handle_image(self, stamp: int, msg) -> None:
        """Worker job of one image: buffer it, localize when paced by stamps and due, then
        say on ``~/processed`` that this image is done (always, also when it was dropped)."""
        outcome = "dropped"
        try:
            outcome = self._add_frame(stamp, msg)
            self._resolve_initialpose()
            if not outcome.startswith("dropped") and self._localization_due(stamp):
                self._last_trigger_stamp = stamp
                accepted = self._localize(self._tracking_hint())[0]
                outcome += f"; localization {'accepted' if accepted else 'rejected'}"
        except Exception as exc:  # the node keeps running; the outcome says what failed
            self._on_worker_error(exc)
            outcome += f"; failed: {exc}"
        finally:
            from std_msgs.msg import Header

            pub = self.processed_pub
            if pub is not None:
                pub.publish(Header(stamp=to_stamp(stamp), frame_id=outcome))

    def _localization_due(self, stamp: int) -> bool:
        """``localize_pacing: stamps``: whether the image at ``stamp`` triggers a localization."""
        period_ns = int(round(self.p["localize_period_s"] * 1e9))
        if (self.p["localize_pacing"] != "stamps" or period_ns <= 0 or self.paused
                or self.gmap is None or not self.buffer.full()):
            return False
        last = self._last_trigger_stamp
        return last is None or stamp - last >= period_ns

    def _on_odometry(self, msg) -> None:
        # An Odometry topic is stored as the odom->base_link edge of the TF buffer, which gives
        # interpolation at the image stamps for free.
        try:
            pose = pose_msg_to_matrix(msg.pose.pose)
        except ValueError as exc:
            self.problems.report("odometry", f"odometry message rejected: {exc}")
            return
        self.tf_buffer.set_transform_matrix(self.p["odom_frame"], self.p["base_frame"],
                                            stamp_ns(msg.header.stamp), pose)

    def _on_initialpose(self, msg) -> None:
        # Like AMCL: an initial pose of base_link in the map becomes a provisional map->odom
        # (through the odometry at the message's stamp), which guides the search until a fix.
        try:
            map_T_base = pose_msg_to_matrix(msg.pose.pose)
        except ValueError as exc:
            self.problems.report("initialpose", f"rejected: {exc}")
            return
        with self.lock:
            self.pending_initialpose = (stamp_ns(msg.header.stamp), map_T_base)
        self._resolve_initialpose()

    def _resolve_initialpose(self) -> None:
        """Turn a received /initialpose into the hint once the odometry at its stamp is known.

        A pose stamped after the latest odometry (e.g. sent just before a replay starts) waits
        for it: every processed image tries again, so the hint takes effect at the same image
        on every run. A pose older than the buffered odometry is rejected.
        """
        with self.lock:
            pending = self.pending_initialpose
        if pending is None or self.tf_buffer is None:
            return
        stamp, map_T_base = pending
        try:
            odom_T_base = self.tf_buffer.lookup_transform(
                self.p["odom_frame"], self.p["base_frame"], stamp)
        except ExtrapolationError as exc:
            if exc.stamp_ns > exc.latest_ns:
                self.problems.report("initialpose", "waiting for the odometry at its stamp")
                return
            self._drop_initialpose(pending, f"rejected: {exc}")
            return
        except TFError as exc:  # no odometry at all yet
            self.problems.report("initialpose", f"waiting for the odometry at its stamp: {exc}")
            return
        with self.lock:
            if self.pending_initialpose is not pending:
                return  # a newer pose arrived meanwhile: it is resolved on its own
            self.pending_initialpose = None
            self.hint = map_T_base @ invert_pose(odom_T_base)
        self.problems.clear("initialpose")
        self.get_logger().info(f"initial pose received at {map_T_base[:3, 3].round(2).tolist()}")

    def _drop_initialpose(self, pending, why: str) -> None:
        with self.lock:
            if self.pending_initialpose is pending:
                self.pending_initialpose = None
        self.problems.report("initialpose", why)

    def _camera_extrinsics(self) -> Optional[np.ndarray]:
        if self.rig is not None:
            return self.rig.camera(self.camera).T_base_cam
        try:
            return self.tf_buffer.lookup_transform(
                self.p["base_frame"], self.camera + self.p["camera_frame_suffix"], 0)
        except TFError as exc:
            self.problems.report("calibration", f"camera extrinsics from TF: {exc}")
            return None

    def _odometry_at(self, stamp: int) -> np.ndarray:
        """odom_T_base at ``stamp``, waiting up to ``tf_wait_s`` for odometry that is late.

        Images and odometry arrive on different topics, so the odometry for an image stamp may
        still be in flight (what tf2's message filter waits for). Runs on the worker thread.
        """
        deadline = time.monotonic() + self.p["tf_wait_s"]
        while True:
            try:
                return self.tf_buffer.lookup_transform(self.p["odom_frame"],
                                                       self.p["base_frame"], stamp)
            except ExtrapolationError as exc:
                if exc.stamp_ns < exc.latest_ns or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
            except TFError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _add_frame(self, stamp: int, msg) -> str:
        """Buffer one image: ``"buffered"``, ``"skipped"`` (too little motion) or
        ``"dropped: <reason>"`` (the reason is also in the diagnostics)."""
        t0 = time.perf_counter()
        intr = self._intrinsics()
        if intr is None:
            self.problems.report(f"camera {self.camera}", "no valid camera_info received yet")
            self.frames_dropped += 1
            return "dropped: no camera_info"
        try:
            rgb = to_rgb(msg)
        except ValueError as exc:
            self.problems.report(f"camera {self.camera}", f"image rejected: {exc}")
            self.frames_dropped += 1
            return f"dropped: image rejected: {exc}"
        base_T_cam = self._camera_extrinsics()
        if base_T_cam is None:
            self.frames_dropped += 1
            return "dropped: no camera extrinsics"
        try:
            odom_T_base = self._odometry_at(stamp)
        except TFError as exc:
            self.problems.report("odometry", f"no odometry at the image stamp: {exc}")
            self.frames_dropped += 1
            return f"dropped: no odometry at the image stamp: {exc}"
        with self.lock:
            try:
                added = self.buffer.add(QueryFrame(stamp, rgb, intr[0],
                                                   odom_T_base @ base_T_cam))
            except ValueError as exc:
                self.problems.report(f"camera {self.camera}", str(exc))
                self.frames_dropped += 1
                return f"dropped: {exc}"
        self.problems.clear(f"camera {self.camera}")
        self.problems.clear("odometry")
        self.stages.set("convert", 1e3 * (time.perf_counter() - t0))
        return "buffered" if added else "skipped"

    def _intrinsics(self):
        """``(K, size)`` of the camera, waiting up to ``tf_wait_s`` for a camera_info that is
        still in flight (it travels on its own topic, next to the first image)."""
        if self.rig is not None:
            return self.rig.camera(self.camera).K, self.rig.camera(self.camera).size
        deadline = time.monotonic() + self.p["tf_wait_s"]
        intr = self.inputs.intrinsics(self.camera)
        while intr is None and time.monotonic() < deadline:
            time.sleep(0.01)
            intr = self.inputs.intrinsics(self.camera)
        return intr

    # ------------------------------------------------------------------ localization
    def _tracking_hint(self) -> Optional[np.ndarray]:
        """Where to search: around the current estimate once localized (tracking), around the
        operator's /initialpose before that, nowhere in particular otherwise (global)."""
        with self.lock:
            map_T_odom = self.gate.current if self.gate.current is not None else self.hint
            last = self.buffer.frames[-1] if self.buffer.frames else None
        if map_T_odom is None or last is None:
            return None
        base_T_cam = self._camera_extrinsics()
        if base_T_cam is None:
            return None
        return map_T_odom @ last.odom_T_cam @ invert_pose(base_T_cam)

    def _periodic_localize(self) -> None:
        if self.paused or self.gmap is None or self.buffer is None or not self.buffer.full():
            return
        self.worker.submit("localize", lambda: self._localize(self._tracking_hint()),
                           replace_same_kind=True)

    def _load_covisibility(self, path: str):
        """The covisibility decoder (``ValueError`` when none is available)."""
        from g2g_model.covisibility.checkpoint import load_checkpoint
        from g2g_model.inference import default_checkpoint

        path = path or default_checkpoint("covisibility")
        if not path or path == "none":
            raise ValueError("window_scorer=covisibility needs a covisibility checkpoint "
                             "(covis_checkpoint), and none is shipped or given")
        model, _ = load_checkpoint(path, expect_encoder=self.pipeline.backbone_id())
        self.get_logger().info(f"covisibility front-end: {path}")
        return model.eval()

    def _load_embedding(self, path: str):
        """The covisibility embedding (``ValueError`` when none is available)."""
        from g2g_model.covisibility.embedding import load_embedding
        from g2g_model.inference import default_checkpoint

        path = path or default_checkpoint("covisibility_embedding")
        if not path:
            raise ValueError("window_scorer=embedding needs a covisibility embedding "
                             "(covis_embedding), and none is shipped or given")
        model, _ = load_embedding(path, expect_encoder=self.pipeline.backbone_id())
        self.get_logger().info(f"window scorer: covisibility embedding {path}")
        return model

    def _load_image_embedding(self, path: str):
        """The image covisibility embedding (``ValueError`` when none is available)."""
        from g2g_model.covisibility.image_embedding import load_image_embedding
        from g2g_model.inference import default_checkpoint

        path = path or default_checkpoint("covisibility_image_embedding")
        if not path:
            raise ValueError(f"window_scorer={self.p['window_scorer']} needs an image "
                             "covisibility embedding (covis_image_embedding), and none is "
                             "shipped or given")
        model, _ = load_image_embedding(path)
        self.get_logger().info(f"window scorer: image covisibility embedding {path}")
        return model

    def _load_pair_verifier(self, path: str):
        """``(pair verifier, its header)``, or None when none is shipped and none is given."""
        from g2g_model.covisibility.pair_verifier import load_pair_verifier
        from g2g_model.inference import default_checkpoint

        path = path or default_checkpoint("covisibility_pair_verifier")
        if not path:
            self.get_logger().warning("no pair verifier shipped or given: map windows are not "
                                      "re-ranked")
            return None
        model, header = load_pair_verifier(path)
        self.get_logger().info(f"window re-ranking: pair verifier {path} (top {header['top_k']}"
                               f", weight {header['weight']})")
        return model, header

    def _select_window(self, loaded, query: Group, hint: Optional[np.ndarray]):
        """(window index, overlap score or NaN, how). ``loaded``: the map, its windows, tokens,
        scoring and verifier images, taken together under the lock (a map swapped meanwhile
        does not mix with them)."""
        gmap, windows, map_tokens, map_scoring, map_verify_images = loaded
        if hint is not None:
            # hint = map_T_base: compare with the camera positions of the map windows.
            base_T_cam = self._camera_extrinsics()
            cam = hint @ (base_T_cam if base_T_cam is not None else np.eye(4))
            position = cam[:3, 3]
            idx = nearest_window(gmap, windows, position, self.p["hint_radius_m"],
                                 direction=cam[:3, 2])
            if idx is not None:
                return idx, float("nan"), "pose hint"
            self.get_logger().warning(
                f"no map window within hint_radius_m={self.p['hint_radius_m']} of the hint "
                f"{position.round(2).tolist()}: searching the whole map")
        if map_tokens is None:
            raise ValueError("the map has no cached features; rebuild it with g2g-map build")
        query_tokens = self.pipeline.encode_frames(query.images, query.intrinsics)
        if self.p["window_scorer"] == "covisibility":
            from g2g_model.covisibility.front_end import select_map_windows

            best = None
            for cam in gmap.cameras():  # windows are consecutive frames of one camera
                rows = gmap.camera_indices(cam)
                if len(rows) < self.p["window_size"]:
                    continue
                picks, _ = select_map_windows(
                    self.covis, map_tokens[torch.from_numpy(rows)], query_tokens,
                    (self.p["window_size"], len(query.images)), top_k=1,
                    threshold=self.p["min_overlap_score"],
                    coarse_stride=self.p["covis_coarse_stride"])
                if picks and (best is None or picks[0].score > best[1]):
                    best = (int(rows[picks[0].map_start]), float(picks[0].score))
            if best is None:
                raise ValueError(f"no map window scores above min_overlap_score="
                                 f"{self.p['min_overlap_score']}")
            idx = next(i for i, w in enumerate(windows) if int(w[0]) == best[0])
            return idx, best[1], "covisibility"
        if map_scoring is not None:  # map side described at load
            scores = map_scoring(query_tokens, query.images)
            how = {"combined": "token + image covisibility embeddings",
                   "embedding": "covisibility embedding",
                   "image": "image covisibility embedding",
                   "whitened": "map-whitened similarity"}[self.p["window_scorer"]]
        else:
            scores = descriptor_similarity(map_tokens, query_tokens)
            how = "descriptor similarity"
        if self.verifier is not None and map_verify_images is not None:
            from g2g_model.covisibility.pair_verifier import verify_windows

            model, header = self.verifier
            ranked = verify_windows(model, scores, windows, map_verify_images,
                                    model.shrink_all(query.images), header["top_k"],
                                    header["weight"])
            idx, score, verification = ranked[0]
            how += f" + pair verifier {verification:.2f}"
        else:
            idx, score = best_window(scores, windows)
        # The embedding's scores are trained to approximate overlaps, so min_overlap_score
        # applies to them; the other two are similarities of no fixed scale.
        overlap = self.p["window_scorer"] in OVERLAP_SCORERS
        return idx, (score if overlap else float("nan")), how

    def _localize(self, hint: Optional[np.ndarray]):
        """Run one relocalization; returns (accepted, message, map_T_odom or None, score)."""
        t0 = time.perf_counter()
        self.localize_attempts += 1
        with self.lock:
            if self.gmap is None:
                return False, "no map loaded (call ~/load_map)", None, float("nan")
            if not self.buffer.full():
                return (False, f"query window not full ({len(self.buffer.frames)}/"
                        f"{self.buffer.window} frames)", None, float("nan"))
            query = self.buffer.group()
            loaded = (self.gmap, self.windows, self.map_tokens, self.map_scoring,
                      self.map_verify_images)
        gmap, windows = loaded[:2]
        idx, score, how = self._select_window(loaded, query, hint)
        window = windows[idx]
        t1 = time.perf_counter()
        self.stages.set("select", 1e3 * (t1 - t0))
        frames = [gmap.frames[i] for i in window]
        group_a = Group(images=[f.decode() for f in frames],
                        intrinsics=np.stack([f.intrinsics for f in frames]),
                        cam_to_world=np.stack([f.world_T_cam for f in frames]),
                        stamps=[f.stamp_ns for f in frames])
        pred = self.pipeline.predict(group_a, query)
        self.stages.set("g2g", 1e3 * (time.perf_counter() - t1))
        odom_T_b = np.asarray(query.cam_to_world)
        map_T_odom, spread = correction_from_prediction(group_a.cam_to_world[0], pred.poses_b,
                                                        odom_T_b)
        cand = Candidate(map_T_odom, int(query.stamps[0]), score if np.isfinite(score) else 1.0,
                         spread, pred.poses_b)
        with self.lock:
            decision = self.gate.offer(cand)
        self.last_reason = f"{'accepted' if decision.accepted else 'rejected'}: " \
                           f"{decision.reason} (window {idx} by {how}" + \
                           (f", score {score:.2f})" if np.isfinite(score) else ")")
        if decision.accepted:
            self.last_fix_wall = time.monotonic()
            self.problems.clear("localization")
            self._publish_fix(query, group_a, pred, score, gmap.map_id, frames[0].camera)
        else:
            self.problems.report("localization", self.last_reason)
        self.stages.set("total", 1e3 * (time.perf_counter() - t0))
        self.get_logger().info(self.last_reason)
        return decision.accepted, self.last_reason, self.gate.current, score

    def _publish_fix(self, query: Group, group_a: Group, pred, score: float, map_id: str,
                     camera: str):
        """Publish an accepted fix: the robot pose in the map and the group alignment.
        ``map_id`` and ``camera`` are those of the map window the localization used (a map
        loaded since does not rename it)."""
        from geometry_msgs.msg import Pose, PoseWithCovarianceStamped

        from g2g_msgs.msg import GroupAlignment

        stamp = to_stamp(int(query.stamps[0]))
        current = self.gate.current
        base_T_cam = self._camera_extrinsics()
        odom_T_base0 = np.asarray(query.cam_to_world)[0] @ invert_pose(
            base_T_cam if base_T_cam is not None else np.eye(4))
        pose = PoseWithCovarianceStamped()
        pose.header.stamp = stamp
        pose.header.frame_id = self.p["map_frame"]
        matrix_to_pose_msg(current @ odom_T_base0, pose.pose.pose)
        pose.pose.covariance = [float(v) for v in np.diag([0.05] * 3 + [0.01] * 3).reshape(-1)]
        self.pose_pub.publish(pose)
        msg = GroupAlignment()
        msg.header.stamp = stamp
        msg.header.frame_id = f"{camera}{self.p['camera_frame_suffix']}@map"
        msg.group_a_id = f"map:{map_id}:{camera}:{group_a.stamps[0]}"
        msg.group_b_id = f"query:{query.stamps[0]}"
        msg.stamps_a = [to_stamp(int(s)) for s in group_a.stamps]
        msg.stamps_b = [to_stamp(int(s)) for s in query.stamps]
        for T in pred.poses_a:
            p = Pose()
            matrix_to_pose_msg(T, p)
            msg.poses_a.append(p)
        for T in pred.poses_b:
            p = Pose()
            matrix_to_pose_msg(T, p)
            msg.poses_b.append(p)
        msg.overlap_score = float(score)
        msg.inference_time_ms = float(pred.timing_ms["total"])
        self.align_pub.publish(msg)
        self._publish_tf()

    def _publish_tf(self) -> None:
        current = self.gate.current if self.gate is not None else None
        if current is None:
            return
        now = self.get_clock().now().nanoseconds
        self.tf_broadcaster.send_matrix(current, self.p["map_frame"], self.p["odom_frame"],
                                        now + int(self.p["tf_future_dating_s"] * 1e9))

    def _on_worker_error(self, exc: BaseException) -> None:
        self.problems.report("localization", str(exc))
        self.get_logger().warning(f"relocalization step failed: {exc}",
                                  throttle_duration_sec=2.0)

    # ------------------------------------------------------------------ maps
    def _read_map(self, path: str):
        """(map, its windows, what the window scorer needs of the whole map or None); raises
        ``MapError`` / ``ValueError`` saying what is wrong."""
        gmap = load_map(path, expect_backbone=self.pipeline.backbone_id())
        # The query camera is matched against windows of EVERY map camera: a place revisited
        # in the other direction is seen by another camera of the mapping run.
        windows = map_windows(gmap, None, self.p["window_size"])
        if not windows:
            raise ValueError(f"map {path} has no camera with {self.p['window_size']} frames "
                             f"(cameras: {gmap.cameras()})")
        scoring = (None, None)
        if gmap.features is not None and self.p["window_scorer"] in (*OVERLAP_SCORERS,
                                                                     "whitened"):
            scoring = self._map_scoring(path, gmap)
        return gmap, windows, scoring

    def _map_scoring(self, path: str, gmap):
        """Once per map: describe its frames, and return ``(score(query_tokens, query_images)
        -> [T_map, T_query], the map's frames shrunk for the pair verifier or None)``; a
        localization then only describes the query frames."""
        scorer = self.p["window_scorer"]
        parts = []  # (describe a query, the map's descriptors)
        try:
            if scorer == "whitened":
                whiten = MapWhitening.fit(gmap.features).transform
                parts.append((lambda tokens, images: whiten(tokens), whiten(gmap.features)))
            if scorer in ("combined", "embedding"):
                describe_tokens = functools.partial(self.embedding.describe,
                                                    stats=token_statistics(gmap.features))
                parts.append((lambda tokens, images: describe_tokens(tokens),
                              describe_tokens(gmap.features)))
        except ValueError as exc:
            raise ValueError(f"map {path}: its cached features are unusable: {exc}") from exc
        images = ([f.decode() for f in gmap.frames]
                  if scorer in ("combined", "image") or self.verifier is not None else None)
        if scorer in ("combined", "image"):
            map_images = self.image_embedding.describe(images)
            parts.append((lambda tokens, images: self.image_embedding.describe(images),
                          map_images))
        verify_images = None if self.verifier is None else self.verifier[0].shrink_all(images)

        def score(query_tokens, query_images) -> np.ndarray:
            # The embeddings' cosines estimate overlaps: their mean is one too.
            return sum((map_desc @ describe(query_tokens, query_images).T).numpy()
                       for describe, map_desc in parts) / len(parts)
        return score, verify_images

    def _install_map(self, path: str, gmap, windows, scoring) -> str:
        with self.lock:
            self.gmap, self.windows, self.map_path = gmap, windows, path
            self.map_scoring, self.map_verify_images = scoring
            self.map_tokens = None if gmap.features is None else gmap.features.float()
            self.gate.reset()
        self.problems.clear("map")
        return f"loaded map {path}: {len(gmap)} frames, {len(windows)} windows"

    def _load_map(self, path: str):
        try:
            loaded = self._read_map(path)
        except (MapError, ValueError) as exc:
            self.problems.report("map", str(exc))
            return False, f"map not loaded, keeping the previous one: {exc}"
        return True, self._install_map(path, *loaded)

    # ------------------------------------------------------------------ services
    def _srv_load_map(self, request, response):
        if not self.configured:
            response.success, response.message = False, "node is not configured"
            return response
        ok, message = self._load_map(request.path)
        response.success, response.message = ok, message
        response.num_keyframes = len(self.gmap) if ok else 0
        (self.get_logger().info if ok else self.get_logger().error)(message)
        return response

    def _srv_localize(self, request, response):
        if not self.configured:
            response.success, response.message = False, "node is not configured"
            return response
        if not self.active:
            response.success, response.message = False, \
                f"node is {self.lifecycle_state} (lifecycle): activate it first"
            return response
        if self.paused:
            response.success, response.message = False, "paused (call ~/resume first)"
            return response
        hint = None
        if request.use_hint:
            try:
                hint = pose_msg_to_matrix(request.hint.pose.pose)
            except ValueError as exc:
                response.success, response.message = False, f"bad hint: {exc}"
                return response
        done = threading.Event()
        result = {}

        def job():
            try:
                result["value"] = self._localize(hint)
            except Exception as exc:
                result["value"] = (False, f"localization failed: {exc}", None, float("nan"))
            finally:
                done.set()

        self.worker.submit("localize_request", job)
        if not done.wait(timeout=60.0):
            response.success, response.message = False, "timed out after 60 s"
            return response
        ok, message, current, score = result["value"]
        response.success, response.message = bool(ok), message
        response.overlap_score = float(score)
        if ok and current is not None:
            from g2g_ros.tf_buffer import matrix_to_transform_stamped

            response.map_to_odom = matrix_to_transform_stamped(
                current, self.p["map_frame"], self.p["odom_frame"],
                self.get_clock().now().nanoseconds)
        return response

    def _srv_reset(self, request, response):
        if not self.configured:
            response.success, response.message = False, "node is not configured"
            return response
        with self.lock:
            self.gate.reset()
            self.buffer.clear()
            self.hint = None
            self.pending_initialpose = None
            self._last_trigger_stamp = None
        self.last_fix_wall = None
        response.success, response.message = True, "correction, query window and hint cleared"
        return response

    def _srv_pause(self, request, response):
        if self.paused:
            response.success, response.message = False, "already paused"
        else:
            self.paused = True
            response.success, response.message = True, "paused; map->odom keeps being sent"
        return response

    def _srv_resume(self, request, response):
        if not self.paused:
            response.success, response.message = False, "not paused"
        else:
            self.paused = False
            response.success, response.message = True, "resumed"
        return response

    # ------------------------------------------------------------------ status
    def _state(self):
        from g2g_msgs.msg import EstimatorStatus as S

        if not self.active:
            return S.STATE_LOST, self.lifecycle_text()
        if self.gmap is None:
            return S.STATE_NOT_LOCALIZED, "no map loaded"
        if self.gate.current is None:
            return S.STATE_NOT_LOCALIZED, "not localized yet"
        if self.paused:
            return S.STATE_DEGRADED, "paused"
        if self.problems.recent():
            return S.STATE_DEGRADED, "localized, with problems"
        return S.STATE_OK, "localized"

    def _publish_status(self) -> None:
        from g2g_msgs.msg import EstimatorStatus

        state, text = self._state()
        gate = self.gate
        age = None if self.last_fix_wall is None else time.monotonic() - self.last_fix_wall
        values = {
            "state": state, "lifecycle_state": self.lifecycle_state,
            "map": self.map_path or "(none)",
            "map_frames": len(self.gmap) if self.gmap is not None else 0,
            "accepted_corrections": gate.accepted if gate else 0,
            "rejected_corrections": gate.rejected if gate else 0,
            "age_of_last_fix_s": "never" if age is None else f"{age:.1f}",
            "last_decision": self.last_reason, "paused": self.paused,
            "frames_dropped": self.frames_dropped,
            "query_frames": len(self.buffer.frames) if self.buffer is not None else 0,
            "untrained_model": bool(self.pipeline is not None and self.pipeline.untrained),
        }
        if self.active and self.inputs is not None:
            for cam, hz in self.inputs.rates_hz().items():
                values[f"{cam} rate_hz"] = f"{hz:.2f}"
        self.publish_estimator_status(
            state, text, values, cameras=[getattr(self, "camera", "")],
            processed=gate.accepted if gate else 0,
            dropped=(gate.rejected if gate else 0) + self.frames_dropped,
            diag_name="relocalization", hardware_id="g2g_reloc",
            warn_states=(EstimatorStatus.STATE_NOT_LOCALIZED,))


def main(args=None) -> None:
    spin_node(RelocalizeNode, args, threads=3)


if __name__ == "__main__":
    main()
