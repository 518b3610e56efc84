"""``~/load_map`` of the relocalize node: a map loaded off the executor's threads, one at a time.

:class:`MapLoading` is a part of :class:`g2g_ros.nodes.relocalize.RelocalizeNode` (a mix-in, like
:class:`~g2g_ros.nodes.relocalize_inputs.QueryInputs`: it uses the node's
:class:`~g2g_model.localization.relocalizer.Relocalizer` ``engine``, its ``map_loads``
:class:`~g2g_ros.single_job.SingleJob`, problems, logger and its ``_refused`` state check).
"""

from __future__ import annotations

import concurrent.futures

from g2g_model.localization.relocalizer import Relocalizer
from g2g_ros.map_path import publish_map_path

#: How long ~/load_map waits for its load before it answers "still loading".
LOAD_REPLY_TIMEOUT_S = 300.0


class MapLoading:
    """The ``~/load_map`` service of the relocalize node (module docstring)."""

    def _srv_load_map(self, request, response):
        """Load a map off the executor's threads (:class:`~g2g_ros.single_job.SingleJob`) and
        answer with the outcome: the node keeps publishing and answering its other services
        meanwhile. One load at a time: a request that comes while a load runs is answered
        ``busy`` at once (nothing queued). A refused map leaves the previous one in use. A load
        that takes longer than :data:`LOAD_REPLY_TIMEOUT_S` is answered ``still loading``; it
        goes on, and replaces the map if it succeeds (``~/status`` names the map in use)."""
        if self._refused(response):
            return response
        response.success, response.num_keyframes = False, 0
        engine, path = self.engine, request.path
        future = self.map_loads.start(path, lambda: self._load_map(engine, path))
        if future is None:
            what, age = self.map_loads.running() or (path, 0.0)
            response.message = (f"busy: still loading {what} ({age:.1f} s); map "
                                f"{engine.map_path or '(none)'} stays in use, try again later")
            self.get_logger().warning(response.message, throttle_duration_sec=2.0)
            return response
        try:
            response.success, response.message, response.num_keyframes = future.result(
                timeout=LOAD_REPLY_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            response.message = (f"still loading {path} after {LOAD_REPLY_TIMEOUT_S:.0f} s; map "
                                f"{engine.map_path or '(none)'} stays in use until it is done")
        return response

    def _load_map(self, engine: Relocalizer, path: str):
        """Load ``path`` into ``engine`` (on the load thread): ``(success, message,
        num_keyframes)``, the outcome logged and reported in the diagnostics. Never raises."""
        try:
            message = engine.load_map(path)
        except Exception as exc:  # MapError (a ValueError) for a bad file; anything else too
            reason = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
            message = f"map not loaded, keeping the previous one: {reason}"
            self.problems.report("map", reason)
            # Each outcome logs from its own call site: rclpy refuses to change the severity
            # of one call site (ValueError), which killed the node on a failure then a success.
            self.get_logger().error(message)
            return False, message, 0
        self.problems.clear("map")
        self.get_logger().info(message)
        if engine is self.engine:  # not replaced by a cleanup + configure meanwhile
            publish_map_path(self)
        return True, message, len(engine.gmap)
