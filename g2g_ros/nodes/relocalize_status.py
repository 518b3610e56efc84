"""Status and diagnostics of the relocalize node (``~/status``, ``/diagnostics``)."""

from __future__ import annotations

import time

from g2g_model.localization.relocalizer import pose_source
from g2g_ros.diagnostics import publish_estimator_status


def relocalize_state(node):
    """``(state, text)`` of a :class:`~g2g_ros.nodes.relocalize.RelocalizeNode`."""
    from g2g_msgs.msg import EstimatorStatus as S

    if not node.active:
        return S.STATE_LOST, node.lifecycle_text()
    if node.gmap is None:
        return S.STATE_NOT_LOCALIZED, "no map loaded"
    quiet = image_age_s(node)
    quiet = (f"no images from {node.camera} for {quiet:.1f} s"
             if quiet is not None and quiet > node.p["stale_after_s"] else "")
    if node.engine.current is None:  # no correction, none sent: whether images come or not
        text = "not localized since ~/reset" if node.cleared_by_reset else "not localized yet"
        return S.STATE_NOT_LOCALIZED, f"{text}; {quiet}" if quiet else text
    if quiet:
        # No new images: the correction is still sent, but nothing confirms it any more.
        return S.STATE_DEGRADED, quiet
    if node.paused:
        return S.STATE_DEGRADED, "paused"
    if node.problems.recent():
        return S.STATE_DEGRADED, "localized, with problems"
    return S.STATE_OK, "localized"


def image_age_s(node):
    """Seconds since the relocalization camera's newest image (None: none yet / inactive)."""
    inputs = node.inputs if node.active else None
    last = None if inputs is None else inputs.last_wall.get(node.camera)
    return None if last is None else time.monotonic() - last


def publish_relocalize_status(node) -> None:
    from g2g_msgs.msg import EstimatorStatus

    node.report_quiet_cameras(node.p["stale_after_s"])
    state, text = relocalize_state(node)
    engine, last = node.engine, node.last
    gate = engine.gate if engine is not None else None
    age = None if node.last_fix_wall is None else time.monotonic() - node.last_fix_wall
    newest = image_age_s(node)
    values = {
        "state": state, "lifecycle_state": node.lifecycle_state,
        "map": (engine.map_path if engine is not None else "") or "(none)",
        "map_frames": len(node.gmap) if node.gmap is not None else 0,
        "accepted_corrections": gate.accepted if gate else 0,
        "rejected_corrections": gate.rejected if gate else 0,
        "age_of_last_fix_s": "never" if age is None else f"{age:.1f}",
        "age_of_newest_image_s": "never" if newest is None else f"{newest:.1f}",
        "last_decision": last.message if last is not None else "",
        "last_path": last.path if last is not None else "",
        "last_inliers": last.inliers if last is not None else 0,
        "last_verified_frames": last.verified_frames if last is not None else 0,
        "last_pose_source": pose_source(getattr(last.prediction, "rotation_match", None))
        if last is not None and last.prediction is not None else "",
        "paused": node.paused, "frames_dropped": node.frames_dropped,
        "query_frames": len(engine.buffer.frames) if engine is not None else 0,
        "untrained_model": bool(node.pipeline is not None and node.pipeline.untrained),
    }
    if last is not None and last.verification_reason:
        values["last_verification"] = last.verification_reason
    if node.active and node.inputs is not None:
        for cam, hz in node.inputs.rates_hz().items():
            values[f"{cam} rate_hz"] = f"{hz:.2f}"
    publish_estimator_status(
        node, state, text, values, cameras=[getattr(node, "camera", "")],
        processed=gate.accepted if gate else 0,
        dropped=(gate.rejected if gate else 0) + node.frames_dropped,
        diag_name="relocalization", hardware_id="g2g_reloc",
        warn_states=(EstimatorStatus.STATE_NOT_LOCALIZED,))
