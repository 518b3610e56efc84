"""Scoring of a relocalization replay, fix by fix (``benchmarks/bench_real_reloc.py``).

g2g-eval-bag's report gives counts and medians; this adds what the real-sequence benchmark
needs on top: each published fix with its error, the verifier's evidence that the node
publishes with it (``GroupAlignment``: path, inliers, pose source, window overlap) and how its
error in the covariance published with it (as g2g-eval-bag scores it), false accepts at a
strict threshold, and how much of the query the map covers.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence

import numpy as np

from g2g_model.metrics import rotation_error_deg, translation_error_m
from g2g_ros.bags.fix_covariance import sd_units, widest_sd

FALSE_ACCEPT_TRANS_M = 0.15
FALSE_ACCEPT_ROT_DEG = 3.0
# A query frame is "covered" when a map keyframe of the same camera stands this close and
# looks this nearly the same way (the optical axes).
COVER_TRANS_M = 0.5
COVER_ROT_DEG = 30.0


def fix_records(fixes: Sequence[tuple], ground_truth: Mapping[int, np.ndarray],
                alignments: Sequence[object],
                covariances: Mapping[int, np.ndarray] = None) -> List[Dict[str, object]]:
    """One record per published fix ``(stamp_ns, map_T_base)`` that has ground truth
    (``ground_truth``: stamp -> map_T_base): its errors, the evidence of its alignment
    message (the ``GroupAlignment`` published with it: :func:`~g2g_ros.bags.alignment_fields.
    fix_stamp` gives the fix's stamp) and, where ``covariances`` (stamp -> the published
    ``[6, 6]``) has it, its errors in published standard deviations
    (:mod:`g2g_ros.bags.fix_covariance`, as g2g-eval-bag scores them)."""
    from g2g_ros.bags.alignment_fields import fix_stamp

    by_stamp = {fix_stamp(msg): msg for msg in alignments}
    covariances = covariances or {}
    records = []
    for stamp, pose in fixes:
        ref = ground_truth.get(int(stamp))
        if ref is None:
            continue
        msg = by_stamp.get(int(stamp))
        cov = covariances.get(int(stamp))
        sd_m, sd_deg = widest_sd(cov) if cov is not None else (None, None)
        records.append({
            "stamp_ns": int(stamp),
            "trans_err_m": float(translation_error_m(pose[None], ref[None])[0]),
            "rot_err_deg": float(rotation_error_deg(pose[None], ref[None])[0]),
            "path": (getattr(msg, "path", "") or "g2g") if msg is not None else "unknown",
            "inliers": int(getattr(msg, "inliers", 0)) if msg is not None else None,
            "pose_source": str(getattr(msg, "pose_source", "")) if msg is not None else "",
            "overlap_score": (float(msg.overlap_score) if msg is not None else None),
            "published_sd_m": sd_m, "published_sd_deg": sd_deg,
        })
        rec = records[-1]
        rec["sd_units_m"], rec["sd_units_deg"] = sd_units(rec["trans_err_m"],
                                                          rec["rot_err_deg"], cov)
    return records


def is_false_accept(record: Mapping[str, object], trans_m: float = FALSE_ACCEPT_TRANS_M,
                    rot_deg: float = FALSE_ACCEPT_ROT_DEG) -> bool:
    return bool(record["trans_err_m"] > trans_m or record["rot_err_deg"] > rot_deg)


def coverage(query_world_T_cam: np.ndarray, map_world_T_cam: np.ndarray,
             trans_m: float = COVER_TRANS_M, rot_deg: float = COVER_ROT_DEG) -> np.ndarray:
    """Per query frame: True when some map keyframe is within ``trans_m`` and its optical axis
    (OpenCV z) within ``rot_deg`` of the query's."""
    q = np.asarray(query_world_T_cam, np.float64)
    m = np.asarray(map_world_T_cam, np.float64)
    if not len(q):
        return np.zeros(0, bool)
    if not len(m):
        return np.zeros(len(q), bool)
    dist = np.linalg.norm(q[:, None, :3, 3] - m[None, :, :3, 3], axis=-1)
    cos = np.einsum("qi,mi->qm", q[:, :3, 2], m[:, :3, 2])
    angle = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
    return np.any((dist <= trans_m) & (angle <= rot_deg), axis=1)


def summarize(records: Sequence[Mapping[str, object]], localizations: int,
              covered_fraction: float) -> Dict[str, object]:
    """The benchmark's row: localizations, fixes (by path), fix errors, false accepts and the
    fix rate where the map covers the query (fixes / (localizations x covered fraction), at
    most 1: localizations are spread over the query as its frames are)."""
    trans = np.array([r["trans_err_m"] for r in records], np.float64)
    rot = np.array([r["rot_err_deg"] for r in records], np.float64)
    by_path: Dict[str, int] = {}
    for r in records:
        by_path[str(r["path"])] = by_path.get(str(r["path"]), 0) + 1
    expected = localizations * covered_fraction
    return {
        "localizations": int(localizations), "fixes": len(records), "by_path": by_path,
        "trans_median_m": float(np.median(trans)) if len(trans) else None,
        "trans_max_m": float(trans.max()) if len(trans) else None,
        "rot_median_deg": float(np.median(rot)) if len(rot) else None,
        "rot_max_deg": float(rot.max()) if len(rot) else None,
        "false_accepts": sum(is_false_accept(r) for r in records),
        "false_accepts_by_path": {p: sum(is_false_accept(r) for r in records
                                         if r["path"] == p) for p in by_path},
        "covered_fraction": float(covered_fraction),
        "fix_rate_where_covered": (min(1.0, len(records) / expected) if expected > 0
                                   else None),
    }
