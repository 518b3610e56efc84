"""Inputs of the relocalize node: camera images + odometry -> query frames, and the initial pose.

:class:`QueryInputs` is a part of :class:`g2g_ros.nodes.relocalize.RelocalizeNode` (a mix-in: it
uses the node's parameters, TF buffer, camera inputs, problems and its
:class:`~g2g_model.localization.relocalizer.Relocalizer` ``engine``). Images and odometry arrive
on different topics: a frame is buffered with ``odom_T_base`` at its stamp (waiting up to
``tf_wait_s`` for odometry still in flight) composed with the camera's extrinsics.
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np

from g2g_model.geometry import invert_pose
from g2g_model.localization.correction import QueryFrame
from g2g_model.localization.rig_views import RigView
from g2g_ros.conversions import pose_to_matrix, publish_processed, stamp_ns
from g2g_ros.image_conversion import is_compressed
from g2g_ros.tf_buffer import ExtrapolationError, TFError


class QueryInputs:
    """Odometry, initial pose and image handling of the relocalize node (module docstring)."""

    def reset_time_buffers(self) -> None:
        """After a jump back of the ROS time (a bag played again): forget the dynamic TF, the
        per-camera stamp checks, queued frames, the query window and the rig views, so the
        replayed images are taken; the map and the correction are kept (``~/reset`` does this
        too, then clears the correction)."""
        if self.tf_buffer is not None:
            self.tf_buffer.clear_dynamic()
        if self.inputs is not None:
            self.inputs.reset_stamps()
        if self.worker is not None:
            self.worker.discard(("frame",))
        if self.engine is not None:
            self.engine.forget_query()
        with self.lock:
            self._last_trigger_stamp = None

    def _on_image(self, cam: str, stamp: int, msg) -> None:
        if cam != self.camera:  # another rig camera: kept for verification, not queued
            self._add_view(cam, stamp, msg)
            return
        self.worker.submit("frame", lambda: self._handle_image(stamp, msg))

    def _add_view(self, cam: str, stamp: int, msg) -> None:
        """Keep another camera's image for the verification of the query window. A
        compressed message is kept as it came and converted (decode, reduce, rectify: about
        6 ms per 1936x1216 JPEG, RESULTS_fullsize.md) on the worker when a localization reads
        the view, so the many views no localization uses cost nothing; a raw one is reduced at
        once (kept whole, a 2 MP image would hold 7 MB per view). A bad one is reported when
        converted and left out."""
        views = self.engine.views if self.engine is not None else None
        if views is None:
            return
        base_T_cam, base_T_reloc = self._camera_extrinsics(cam), self._camera_extrinsics()
        if base_T_cam is None or base_T_reloc is None:
            self.report_input(f"camera {cam}", "verification view left out: no camera "
                              "extrinsics yet")
            return
        calibrations = self.calibrations

        def convert():
            try:
                rgb, K = calibrations.image(cam, msg)
            except ValueError as exc:
                self.report_input(f"camera {cam}", f"verification view left out: {exc}")
                raise
            self.problems.clear(f"camera {cam}")
            return rgb, K

        reloc_T_cam = invert_pose(base_T_reloc) @ base_T_cam
        if is_compressed(msg):
            views.add(stamp, RigView.deferred(cam, convert, reloc_T_cam))
            return
        try:
            rgb, K = convert()
        except ValueError:
            return
        views.add(stamp, RigView(cam, rgb, K, reloc_T_cam))

    def _handle_image(self, stamp: int, msg) -> None:
        """Worker job of one image: buffer it, localize when paced by stamps and due, then
        say on ``~/processed`` that this image is done (always, also when it was dropped)."""
        outcome = "dropped"
        try:
            outcome = self._add_frame(stamp, msg)
            self._resolve_initialpose()
            if not outcome.startswith("dropped") and self._localization_due(stamp):
                self._last_trigger_stamp = stamp
                accepted = self._localize(self.engine.tracking_hint()).accepted
                outcome += f"; localization {'accepted' if accepted else 'rejected'}"
        except Exception as exc:  # the node keeps running; the outcome says what failed
            self._on_worker_error(exc)
            outcome += f"; failed: {exc}"
        finally:
            publish_processed(self.processed_pub, stamp, outcome)

    def _localization_due(self, stamp: int) -> bool:
        """``localize_pacing: stamps``: whether the image at ``stamp`` triggers a localization."""
        period_ns = int(round(self.p["localize_period_s"] * 1e9))
        if (self.p["localize_pacing"] != "stamps" or period_ns <= 0 or self.paused
                or not self.engine.ready()):
            return False
        last = self._last_trigger_stamp
        return last is None or stamp - last >= period_ns

    def _on_odometry(self, msg) -> None:
        # An Odometry topic is stored as the odom->base_link edge of the TF buffer, which gives
        # interpolation at the image stamps for free.
        try:
            pose = pose_to_matrix(msg.pose.pose)
        except ValueError as exc:
            self.report_input("odometry", f"odometry message rejected: {exc}")
            return
        self.tf_buffer.set_transform_matrix(self.p["odom_frame"], self.p["base_frame"],
                                            stamp_ns(msg.header.stamp), pose)

    def _on_initialpose(self, msg) -> None:
        # Like AMCL: an initial pose of base_link in the map becomes a provisional map->odom
        # (through the odometry at the message's stamp), which guides the search until a fix.
        try:
            map_T_base = pose_to_matrix(msg.pose.pose)
        except ValueError as exc:
            self.report_input("initialpose", f"rejected: {exc}")
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
                self.report_input("initialpose", "waiting for the odometry at its stamp")
                return
            self._drop_initialpose(pending, f"rejected: {exc}")
            return
        except TFError as exc:  # no odometry at all yet
            self.report_input("initialpose", f"waiting for the odometry at its stamp: {exc}")
            return
        with self.lock:
            if self.pending_initialpose is not pending:
                return  # a newer pose arrived meanwhile: it is resolved on its own
            self.pending_initialpose = None
        self.engine.set_hint(map_T_base @ invert_pose(odom_T_base))
        self.problems.clear("initialpose")
        self.get_logger().info(f"initial pose received at {map_T_base[:3, 3].round(2).tolist()}")

    def _drop_initialpose(self, pending, why: str) -> None:
        with self.lock:
            if self.pending_initialpose is pending:
                self.pending_initialpose = None
        self.report_input("initialpose", why)

    def _camera_extrinsics(self, camera: Optional[str] = None) -> Optional[np.ndarray]:
        camera = camera or self.camera
        if self.rig is not None:
            return self.rig[camera].T_body_cam
        try:
            base_T_cam = self.tf_buffer.lookup_transform(
                self.p["base_frame"], camera + self.p["camera_frame_suffix"], 0)
        except TFError as exc:
            self.report_input("calibration", f"camera extrinsics from TF: {exc}")
            return None
        self.problems.clear("calibration")
        return base_T_cam

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
        self._wait_calibration()
        try:
            rgb, K = self.calibrations.image(self.camera, msg)
        except ValueError as exc:
            self.report_input(f"camera {self.camera}", f"image rejected: {exc}")
            self.frames_dropped += 1
            return f"dropped: image rejected: {exc}"
        base_T_cam = self._camera_extrinsics()
        if base_T_cam is None:
            self.frames_dropped += 1
            return "dropped: no camera extrinsics"
        try:
            odom_T_base = self._odometry_at(stamp)
        except TFError as exc:
            self.report_input("odometry", f"no odometry at the image stamp: {exc}")
            self.frames_dropped += 1
            return f"dropped: no odometry at the image stamp: {exc}"
        try:
            added = self.engine.add_frame(QueryFrame(stamp, rgb, K,
                                                     odom_T_base @ base_T_cam))
        except ValueError as exc:
            self.report_input(f"camera {self.camera}", str(exc))
            self.frames_dropped += 1
            return f"dropped: {exc}"
        self.problems.clear(f"camera {self.camera}")
        self.problems.clear("odometry")
        self.stages.set("convert", 1e3 * (time.perf_counter() - t0))
        return "buffered" if added else "skipped"

    def _wait_calibration(self) -> None:
        """Wait up to ``tf_wait_s`` for a first valid camera_info of the camera that is still
        in flight (it travels on its own topic, next to the first image)."""
        deadline = time.monotonic() + self.p["tf_wait_s"]
        while self.calibrations.get(self.camera) is None and time.monotonic() < deadline:
            time.sleep(0.01)
