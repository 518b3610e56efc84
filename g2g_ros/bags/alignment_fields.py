"""What a recorded ``g2g_msgs/GroupAlignment`` says, read the same way by every evaluation.

A bag evaluation (:mod:`g2g_ros.bags.evaluation`), its pair index
(:mod:`g2g_ros.bags.eval_pairs`) and the real-sequence benchmark read the relocalize node's
alignments for: the map window's camera, the path that made the fix, where G2G's answer took
its pose, and the stamp of the fix (``relocalize/pose``) published with it. Bags recorded
before a field existed still read (a missing path is ``g2g``, a missing pose source ``not
recorded``).
"""

from __future__ import annotations

from g2g_ros.conversions import header_ns, stamp_ns


def fix_stamp(msg) -> int:
    """The stamp of the fix (``relocalize/pose``) published with a GroupAlignment: the query
    window's newest instant for a geometric fix (path ``verified`` / ``refined``: the node
    verifies the window newest first and the fix holds there), B0 (the header's) for G2G
    alone (``Relocalizer``'s ``fix_frame``)."""
    stamps = list(getattr(msg, "stamps_b", ()) or ())
    if alignment_path(msg) in ("verified", "refined") and stamps:
        return max(stamp_ns(t) for t in stamps)
    return header_ns(msg.header)


def alignment_camera(msg) -> str:
    """The map window's camera of a GroupAlignment (header frame ``<cam>_optical_frame@map``)."""
    return str(msg.header.frame_id).split("@")[0].split("_optical_frame")[0]


def alignment_path(msg) -> str:
    """The path that made a GroupAlignment's fix (``g2g`` where the bag has none)."""
    return getattr(msg, "path", "") or "g2g"


def pose_source_kind(msg) -> str:
    """The kind of a GroupAlignment's ``pose_source`` without its counts and reasons
    (``feature matches``, ``feature matches solved with parallax``, ``G2G``); bags recorded
    before the field existed give ``not recorded``."""
    text = getattr(msg, "pose_source", "") or ""
    return text.split(" (")[0].strip() or "not recorded"
