"""Status of the rig_odometry node: its state, and the ``~/status`` / ``/diagnostics`` values,
among them the accounting of every group and image: a synchronized group ends once,
processed, skipped by ``keyframe_stride`` or dropped with a reason; per camera, ``received`` =
``dropped`` (by the synchronizer, or stamped too far ahead) + ``in_groups`` (in emitted
groups) + ``queued``.
Processed groups whose verification was deferred (the node fell behind, see
:mod:`g2g_ros.odometry_core`) are counted in ``groups_deferred_verification`` and said in the
status text.
"""

from __future__ import annotations

import time

from g2g_ros.diagnostics import publish_estimator_status


def rig_state(node):
    """``(EstimatorStatus state, text)`` of a :class:`RigOdometryNode`."""
    from g2g_msgs.msg import EstimatorStatus as S

    if not node.active:
        return S.STATE_LOST, node.lifecycle_text()
    if node.last_update_wall is None:
        return S.STATE_LOST, "waiting for synchronized images"
    age = time.monotonic() - node.last_update_wall
    if age > node.p["lost_after_s"]:
        return S.STATE_LOST, f"no odometry update for {age:.1f} s"
    if len(node.last_cameras) < len(node.cameras) or node.problems.recent():
        return S.STATE_DEGRADED, "degraded"
    return S.STATE_OK, "ok"


def publish_rig_status(node) -> None:
    """Report silent cameras, then publish ``~/status`` and ``/diagnostics``."""
    if node.last_update_wall is not None:
        node.report_quiet_cameras(node.p["lost_after_s"])
    state, text = rig_state(node)
    if node.tally.groups_deferred:
        text += (f" ({node.tally.groups_deferred} groups published with G2G's motion before their "
                 "verification: node behind)")
    newest = node.inputs.newest_age_s() if node.active and node.inputs is not None else None
    # Cameras quiet (bag ended, driver stopped) after images came: STALE, not an error.
    stale = newest is not None and newest > node.p["lost_after_s"]
    drops = dict(node.drops, worker_queue=node.jobs_dropped(("group",)))
    if node.sync is not None:
        drops["sync_incomplete"] = node.sync.stats().groups_dropped
    dropped = sum(drops.values())
    values = {"state": state, "lifecycle_state": node.lifecycle_state,
              "groups_processed": node.tally.groups_processed,
              "last_step": node.tally.last_step,
              **{f"steps {k}": v for k, v in sorted(node.tally.steps_by_path.items())},
              **{f"geometry {k}": v for k, v in sorted(node.tally.steps_by_geometry.items())},
              "steps g2g with the geometry's rotation": node.tally.steps_length_from_g2g,
              "groups_deferred_verification": node.tally.groups_deferred,
              "groups_skipped_stride": node.tally.groups_skipped,
              "groups_dropped": dropped,
              **{f"groups_dropped {k}": v for k, v in sorted(drops.items())},
              "untrained_model": bool(node.pipeline is not None and node.pipeline.untrained),
              "newest_image_age_s": "none yet" if newest is None else f"{newest:.1f}"}
    if node.active:
        stats = node.sync.stats()
        for cam, hz in node.inputs.rates_hz().items():
            values[f"{cam} rate_hz"] = f"{hz:.2f}"
            values[f"{cam} received"] = node.inputs.received[cam]
            values[f"{cam} dropped"] = (stats.dropped_total(cam)
                                        + node.inputs.rejected_future[cam])
            values[f"{cam} queued"] = stats.queued[cam]
            values[f"{cam} in_groups"] = stats.grouped[cam]
        values["sync groups_emitted"] = stats.groups_emitted
        values["sync groups_degraded"] = stats.groups_degraded
        values["sync groups_dropped"] = stats.groups_dropped
        values["sync last_skew_ms"] = (None if stats.last_skew_ns is None
                                       else stats.last_skew_ns * 1e-6)
        values["sync max_skew_ms"] = (None if stats.max_skew_ns is None
                                      else stats.max_skew_ns * 1e-6)
    if node.odometry is not None:
        values["rejected_steps"] = node.odometry.rejected
    publish_estimator_status(node, state, text, values, cameras=node.last_cameras,
                             processed=node.tally.groups_processed, dropped=dropped,
                             diag_name="rig odometry", hardware_id="g2g_rig", stale=stale)
