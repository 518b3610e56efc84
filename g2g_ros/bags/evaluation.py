"""Metrics of recorded node outputs against a bag's ground truth (used by ``g2g-eval-bag``).

Reads two bags -- the input (ground truth ``ground_truth/odometry``, rig extrinsics on
``/tf_static``, the odometry input ``odom -> base_link`` on ``/tf``) and the recorded outputs
(``odometry``, ``relocalize/pose``, ``relocalize/alignment``, ``/tf``, status, diagnostics) --
and computes, with the functions of :mod:`g2g_model.metrics`:

* rig odometry, pairwise: for consecutive odometry outputs (keyframes) k-1, k the relative pose
  of the anchor camera ``T_{A0<-B0} = inv(T_bc) inv(O_{k-1}) O_k T_bc`` against the same from
  the ground truth (:func:`odometry_pairs`, :func:`g2g_model.metrics.summarize_pairs`);
* rig odometry, long horizon: KITTI-style RTE / RRE of the composed trajectory over *short*
  segments (default 0.5..4 m, for simulator runs; labelled as such in every output);
* relocalization: fixes (``relocalize/pose``) against the ground truth, the success rate
  (fixes within ``success_trans_m`` / ``success_rot_deg`` over all localization attempts), the
  error of the map->odom-corrected trajectory (the correction of the latest fix composed with
  the odometry input, every frame from the first fix on; :func:`fix_corrections`), and, given
  the map, the predicted poses of every ``GroupAlignment`` (B_j and A_i) and of every fix on
  its window against the ground truth; the fixes' errors in the standard deviations of the
  covariance published with them (:mod:`g2g_ros.bags.fix_covariance`);
* latency: replay wait per group, node stage latencies (the last, and each stage's runs:
  :mod:`g2g_ros.bags.stage_runs`), model inference time.

All statistics of empty sets are ``None`` (never NaN).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from g2g_model.data.pose_interp import interpolate_poses
from g2g_model.geometry import invert_pose
from g2g_model.metrics import (
    kitti_odometry_errors, rotation_error_deg, summarize_pairs, translation_error_m,
)
from g2g_ros.bags.alignment_fields import (
    alignment_camera, alignment_path, fix_stamp, pose_source_kind,
)
from g2g_ros.bags.bag_reader import (
    BagError, open_bag, read_metadata, read_topic, require_topics,
)
from g2g_ros.bags.fix_covariance import coverage, sd_units
from g2g_ros.bags.stage_runs import all_stage_runs, distinct_stage_samples
from g2g_ros.bags.typestore import GT_ODOM_TOPIC, TF_STATIC_TOPIC, TF_TOPIC
from g2g_ros.conversions import header_ns, pose_to_matrix, stamp_ns, transform_to_matrix

SHORT_SEGMENTS_M = (0.5, 1.0, 2.0, 4.0)
SHORT_SEGMENTS_LABEL = ("KITTI-style over SHORT segments for simulator runs (not comparable "
                        "with KITTI's 100..800 m)")


@dataclass
class GroundTruth:
    """From the input bag: ``world_T_base`` per stamp, extrinsics, odometry input, metadata."""

    stamps: np.ndarray                          # [T] int64, sorted
    world_T_base: np.ndarray                    # [T, 4, 4] (frame gt_world)
    base_T_cam: Dict[str, np.ndarray]
    odom_input: Dict[int, np.ndarray]           # stamp -> odom_T_base (the bag's odometry)
    metadata: Dict[str, object] = field(default_factory=dict)

    def at(self, stamp: int) -> Optional[np.ndarray]:
        i = int(np.searchsorted(self.stamps, stamp))
        return self.world_T_base[i] if i < len(self.stamps) and self.stamps[i] == stamp else None


@dataclass
class Outputs:
    """From the recorded bag (every list sorted by stamp)."""

    odometry: List[Tuple[int, np.ndarray]]
    reloc_poses: List[Tuple[int, np.ndarray]]
    alignments: List[object]
    diagnostics: Dict[str, Dict[str, str]]      # status name -> last key/values
    stage_latency_ms: Dict[str, Dict[str, float]]   # status topic -> last stage latencies
    # relocalize/pose's covariance per stamp ([6, 6]: x y z, then rotation about x y z, rad).
    reloc_covariances: Dict[int, np.ndarray] = field(default_factory=dict)
    # Status topic -> its stage latencies, one sample per change of any of them, in order
    # (:mod:`g2g_ros.bags.stage_runs`).
    stage_samples: Dict[str, List[Dict[str, float]]] = field(default_factory=dict)


def load_ground_truth(bag: str | Path, base_frame: str = "base_link",
                      odom_frame: str = "odom") -> GroundTruth:
    where = str(bag)
    with open_bag(bag) as reader:
        require_topics(reader, [GT_ODOM_TOPIC, TF_STATIC_TOPIC], where,
                       "for evaluation (ground truth and rig extrinsics)")
        gt = {}
        for _, msg in read_topic(reader, GT_ODOM_TOPIC, where):
            gt[header_ns(msg.header)] = pose_to_matrix(msg.pose.pose)
        extr = {}
        for _, msg in read_topic(reader, TF_STATIC_TOPIC, where):
            for t in msg.transforms:
                if t.header.frame_id == base_frame and t.child_frame_id.endswith(
                        "_optical_frame"):
                    extr[t.child_frame_id[: -len("_optical_frame")]] = transform_to_matrix(
                        t.transform)
        odom = {}
        if TF_TOPIC in reader.topics:
            for _, msg in read_topic(reader, TF_TOPIC, where):
                for t in msg.transforms:
                    if (t.header.frame_id, t.child_frame_id) == (odom_frame, base_frame):
                        odom[header_ns(t.header)] = transform_to_matrix(t.transform)
        meta = read_metadata(reader, where)
    if not gt:
        raise BagError(f"bag {where}: {GT_ODOM_TOPIC} has no messages")
    if not extr:
        raise BagError(f"bag {where}: no {base_frame} -> <cam>_optical_frame on /tf_static")
    stamps = np.array(sorted(gt), dtype=np.int64)
    return GroundTruth(stamps, np.stack([gt[s] for s in stamps]), extr, odom, meta)


def load_outputs(bag: str | Path) -> Outputs:
    where = str(bag)
    odometry, poses, aligns, covariances = [], [], [], []
    diags: Dict[str, Dict[str, str]] = {}
    stages: Dict[str, Dict[str, float]] = {}
    samples: Dict[str, List[Dict[str, float]]] = {}
    with open_bag(bag) as reader:
        topics = set(reader.topics)
        if "odometry" in topics:
            for _, msg in read_topic(reader, "odometry", where):
                odometry.append((header_ns(msg.header), pose_to_matrix(msg.pose.pose)))
        if "relocalize/pose" in topics:
            for _, msg in read_topic(reader, "relocalize/pose", where):
                poses.append((header_ns(msg.header), pose_to_matrix(msg.pose.pose)))
                covariances.append((header_ns(msg.header),
                                    np.asarray(msg.pose.covariance, np.float64).reshape(6, 6)))
        if "relocalize/alignment" in topics:
            aligns = [m for _, m in read_topic(reader, "relocalize/alignment", where)]
        if "/diagnostics" in topics:
            for _, msg in read_topic(reader, "/diagnostics", where):
                for st in msg.status:
                    diags[st.name] = {kv.key: kv.value for kv in st.values}
        for topic in ("rig_odometry/status", "relocalize/status"):
            if topic in topics:
                msgs = read_topic(reader, topic, where)
                if msgs:
                    samples[topic] = distinct_stage_samples(m for _, m in msgs)
                    stages[topic] = dict(samples[topic][-1])  # the last message's values
    dedupe = lambda seq: sorted(dict(seq).items())  # noqa: E731 - last message per stamp
    return Outputs(dedupe(odometry), dedupe(poses), aligns, diags, stages,
                   dict(covariances), samples)


# ---------------------------------------------------------------------------------- odometry
def odometry_pairs(gt: GroundTruth, odometry: Sequence[Tuple[int, np.ndarray]], camera: str
                   ) -> Tuple[List[Tuple[int, int]], np.ndarray, np.ndarray]:
    """Consecutive odometry outputs as camera pairs: ``(stamps, preds [N,4,4], gts [N,4,4])``.

    Both poses are ``T_{A0<-B0}`` of ``camera`` (A0 at the earlier keyframe); outputs whose stamp
    has no ground truth are skipped (with their pairs).
    """
    Tbc = gt.base_T_cam[camera]
    stamps, preds, gts = [], [], []
    for (s0, o0), (s1, o1) in zip(odometry[:-1], odometry[1:]):
        g0, g1 = gt.at(s0), gt.at(s1)
        if g0 is None or g1 is None:
            continue
        preds.append(invert_pose(Tbc) @ invert_pose(o0) @ o1 @ Tbc)
        gts.append(invert_pose(Tbc) @ invert_pose(g0) @ g1 @ Tbc)
        stamps.append((s0, s1))
    shape = (0, 4, 4)
    return (stamps, np.array(preds).reshape(shape if not preds else (-1, 4, 4)),
            np.array(gts).reshape(shape if not gts else (-1, 4, 4)))


def odometry_trajectories(gt: GroundTruth, odometry: Sequence[Tuple[int, np.ndarray]]):
    """``(stamps, gt [T,4,4], odometry [T,4,4])`` both starting at the identity."""
    kept = [(s, o) for s, o in odometry if gt.at(s) is not None]
    if not kept:
        return np.zeros(0, np.int64), np.zeros((0, 4, 4)), np.zeros((0, 4, 4))
    g0, o0 = gt.at(kept[0][0]), kept[0][1]
    g = np.stack([invert_pose(g0) @ gt.at(s) for s, _ in kept])
    o = np.stack([invert_pose(o0) @ o for _, o in kept])
    return np.array([s for s, _ in kept], dtype=np.int64), g, o


def evaluate_odometry(gt: GroundTruth, out: Outputs, camera: str,
                      segment_lengths_m: Sequence[float] = SHORT_SEGMENTS_M) -> Dict[str, object]:
    stamps, preds, gts = odometry_pairs(gt, out.odometry, camera)
    summary = summarize_pairs(preds, gts)["all"] if len(stamps) else None
    _, g, o = odometry_trajectories(gt, out.odometry)
    kitti = None
    if len(g) >= 2:
        kitti = kitti_odometry_errors(g, o, segment_lengths_m, step_frames=1)
        kitti["label"] = SHORT_SEGMENTS_LABEL
    return {"outputs": len(out.odometry), "pairs": len(stamps), "pair_camera": camera,
            "pair_stamps": [[int(a), int(b)] for a, b in stamps], "pairwise": summary,
            "kitti": kitti}


# ---------------------------------------------------------------------------- relocalization
def _stats(values: np.ndarray) -> Dict[str, object]:
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return {"n": 0, "mean": None, "median": None, "max": None}
    return {"n": int(values.size), "mean": float(values.mean()),
            "median": float(np.median(values)), "max": float(values.max())}


def fix_corrections(out: Outputs, odom_input: Dict[int, np.ndarray]
                    ) -> List[Tuple[int, np.ndarray]]:
    """``[(from stamp, map_T_odom)]`` sorted: the correction each published fix put in force.

    A fix (``relocalize/pose``: ``map_T_base`` at its instant, :func:`fix_stamp`) is the node's
    correction composed with its odometry there, so ``map_T_odom = map_T_base @
    inv(odom_T_base)`` with the bag's odometry input at the fix's stamp (interpolated between
    samples when it has none; a fix outside the odometry is skipped). It counts from the
    query's newest frame (its ``GroupAlignment``'s last ``stamps_b``; the fix's stamp without
    one): the earliest frame the node could have known it. Derived
    from the fixes and their stamps only, never from when ``/tf`` reached the recorder, so two
    replays of the same bag give the same figure."""
    if not out.reloc_poses or not odom_input:
        return []
    newest = {fix_stamp(a): max(stamp_ns(t) for t in a.stamps_b)
              for a in out.alignments if len(a.stamps_b)}
    o_stamps = np.array(sorted(odom_input), np.int64)
    o_poses = np.stack([odom_input[int(s)] for s in o_stamps])
    corrections = []
    for s, map_T_base in out.reloc_poses:
        if int(s) in odom_input:
            odom_T_base = odom_input[int(s)]
        elif len(o_stamps) >= 2:
            interp, ok = interpolate_poses(o_stamps, o_poses, np.array([s], np.int64))
            if not ok[0]:
                continue
            odom_T_base = interp[0]
        else:
            continue
        corrections.append((newest.get(int(s), int(s)), map_T_base @ invert_pose(odom_T_base)))
    return sorted(corrections, key=lambda c: c[0])


def corrected_trajectory(gt: GroundTruth, out: Outputs,
                         odom_input: Dict[int, np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """``(stamps, map_T_base [T,4,4])``: the correction in force (:func:`fix_corrections`)
    composed with the odometry input at every frame from the first fix on."""
    corrections = fix_corrections(out, odom_input)
    times = [t for t, _ in corrections]
    stamps, poses = [], []
    for s in gt.stamps:
        k = bisect.bisect_right(times, int(s)) - 1
        if k < 0 or int(s) not in odom_input:
            continue
        stamps.append(int(s))
        poses.append(corrections[k][1] @ odom_input[int(s)])
    return np.array(stamps, np.int64), (np.stack(poses) if poses else np.zeros((0, 4, 4)))


def map_frames_by_camera_stamp(map_path: str | Path) -> Dict[Tuple[str, int], np.ndarray]:
    """``(camera, stamp) -> world_T_cam`` of every frame of a map."""
    from g2g_model.maps.format import load_map

    gmap = load_map(map_path, load_features=False)
    return {(f.camera, int(f.stamp_ns)): f.world_T_cam for f in gmap.frames}


def alignment_pairs(gt: GroundTruth, alignments: Sequence[object],
                    map_frames: Dict[Tuple[str, int], np.ndarray], camera: str,
                    fixes: Optional[Dict[int, np.ndarray]] = None
                    ) -> Dict[str, Tuple[list, list]]:
    """Predicted vs ground-truth ``T_{A0<-X}`` of every GroupAlignment: keys ``b0``, ``b_all``,
    ``a_all`` -> ``(preds, gts)``. ``camera``: the query camera (group B); group A's camera is
    the map window's (:func:`alignment_camera`). Frames without ground truth are skipped.

    ``fixes``: the published fixes (``relocalize/pose``, ``map_T_base`` by stamp); key
    ``fix`` then holds each fix as ``T_{A0<-X}`` on its alignment's window at its own instant X
    (:func:`fix_stamp`: the window's newest for a geometric fix, B0 for G2G alone), against the
    ground truth there (G2G + verification)."""
    Tbc = gt.base_T_cam[camera]
    out = {"b0": ([], []), "fix": ([], []), "b_all": ([], []), "a_all": ([], [])}
    fixes = fixes or {}
    for msg in alignments:
        cam_a = alignment_camera(msg)
        sa = [(cam_a, stamp_ns(t)) for t in msg.stamps_a]
        sb = [stamp_ns(t) for t in msg.stamps_b]
        if not sa or sa[0] not in map_frames:
            continue
        a0_inv = invert_pose(map_frames[sa[0]])
        fix_at = fix_stamp(msg)
        for j, (s, p) in enumerate(zip(sb, msg.poses_b)):
            g = gt.at(s)
            if g is None:
                continue
            pair = (pose_to_matrix(p), a0_inv @ g @ Tbc)
            if j == 0:
                out["b0"][0].append(pair[0])
                out["b0"][1].append(pair[1])
            if s == fix_at and s in fixes:
                out["fix"][0].append(a0_inv @ fixes[s] @ Tbc)
                out["fix"][1].append(pair[1])
            out["b_all"][0].append(pair[0])
            out["b_all"][1].append(pair[1])
        for s, p in zip(sa[1:], list(msg.poses_a)[1:]):
            if s in map_frames:
                out["a_all"][0].append(pose_to_matrix(p))
                out["a_all"][1].append(a0_inv @ map_frames[s])
    return out


def fixes_by(alignments: Sequence[object], key: Callable[[object], str],
             t_err: Dict[int, float], r_err: Dict[int, float], trans_m: float,
             rot_deg: float) -> Dict[str, object]:
    """Published fixes grouped by ``key(alignment)`` (the path that made them, GroupAlignment
    ``path``: ``verified``, ``refined``, ``g2g``; or :func:`pose_source_kind`): count, false
    accepts (error over ``trans_m`` or ``rot_deg``) and the median errors of those with ground
    truth."""
    out: Dict[str, object] = {}
    for msg in alignments:
        stamp = fix_stamp(msg)
        row = out.setdefault(key(msg), {"fixes": 0, "with_gt": 0, "false_accepts": 0,
                                        "trans": [], "rot": []})
        row["fixes"] += 1
        if stamp in t_err:
            row["with_gt"] += 1
            row["trans"].append(t_err[stamp])
            row["rot"].append(r_err[stamp])
            row["false_accepts"] += int(t_err[stamp] > trans_m or r_err[stamp] > rot_deg)
    for row in out.values():
        row["median_trans_m"] = float(np.median(row.pop("trans"))) if row["with_gt"] else None
        row["median_rot_deg"] = float(np.median(row.pop("rot"))) if row["with_gt"] else None
    return out


def evaluate_relocalization(gt: GroundTruth, out: Outputs, odom_input: Dict[int, np.ndarray],
                            map_path: Optional[str] = None, success_trans_m: float = 0.5,
                            success_rot_deg: float = 5.0,
                            query_camera: Optional[str] = None) -> Dict[str, object]:
    """Relocalization metrics (module docstring). ``query_camera``: the relocalize node's camera
    (default: the first camera of the bag's metadata)."""
    fixes = [(s, p, gt.at(s)) for s, p in out.reloc_poses if gt.at(s) is not None]
    if fixes:
        pred = np.stack([p for _, p, _ in fixes])
        ref = np.stack([g for _, _, g in fixes])
        t_err, r_err = translation_error_m(pred, ref), rotation_error_deg(pred, ref)
    else:
        t_err = r_err = np.zeros(0)
    correct = int(np.sum((t_err < success_trans_m) & (r_err < success_rot_deg)))
    diag = next((v for k, v in out.diagnostics.items() if "relocalization" in k), {})
    accepted = int(diag.get("accepted_corrections", len(out.reloc_poses)) or 0)
    rejected = int(diag.get("rejected_corrections", 0) or 0)
    attempts = accepted + rejected
    stamps, corrected = corrected_trajectory(gt, out, odom_input)
    if len(stamps):
        ref = np.stack([gt.at(int(s)) for s in stamps])
        c_t, c_r = translation_error_m(corrected, ref), rotation_error_deg(corrected, ref)
    else:
        c_t = c_r = np.zeros(0)
    t_by_stamp = dict(zip([f[0] for f in fixes], t_err))
    r_by_stamp = dict(zip([f[0] for f in fixes], r_err))
    result: Dict[str, object] = {
        "fixes": len(out.reloc_poses), "fixes_with_gt": len(fixes),
        "attempts": attempts, "accepted": accepted, "rejected": rejected,
        "correct_fixes": correct,
        "success_threshold": {"trans_m": success_trans_m, "rot_deg": success_rot_deg},
        "success_rate_pct": (100.0 * correct / attempts) if attempts else None,
        "fix_error_trans_m": _stats(t_err), "fix_error_rot_deg": _stats(r_err),
        **{name: fixes_by(out.alignments, key, t_by_stamp, r_by_stamp, success_trans_m,
                          success_rot_deg)
           for name, key in (("by_path", alignment_path), ("by_pose_source", pose_source_kind))},
        "corrected_frames": int(len(stamps)),
        "corrected_error_trans_m": _stats(c_t), "corrected_error_rot_deg": _stats(c_r),
        # The fixes' errors in the standard deviations published with them.
        "published_covariance": coverage([
            sd_units(float(t), float(r), out.reloc_covariances.get(int(s)))
            for (s, _, _), t, r in zip(fixes, t_err, r_err)]),
        "predicted": None,
    }
    cam = query_camera or (gt.metadata.get("cameras") or sorted(gt.base_T_cam))[0]
    if map_path and out.alignments:
        if cam in gt.base_T_cam:
            pairs = alignment_pairs(gt, out.alignments, map_frames_by_camera_stamp(map_path), cam,
                                    dict(out.reloc_poses))
            result["predicted"] = {k: summarize_pairs(p, np.array(g).reshape(-1, 4, 4))["all"]
                                   for k, (p, g) in pairs.items() if p}
    return result


def evaluate_latency(out: Outputs, replay_latencies_s: Sequence[float]) -> Dict[str, object]:
    infer = [float(m.inference_time_ms) for m in out.alignments
             if np.isfinite(m.inference_time_ms)]
    return {"replay_wait_ms": _stats(1e3 * np.asarray(replay_latencies_s, dtype=np.float64)),
            "node_stage_ms": out.stage_latency_ms,
            "node_stage_runs_ms": {topic: all_stage_runs(samples)
                                   for topic, samples in out.stage_samples.items()},
            "reloc_inference_ms": _stats(np.asarray(infer))}


def untrained_flags(out: Outputs) -> Dict[str, bool]:
    """Status name -> whether the node said it runs with random weights."""
    return {name: str(values.get("untrained_model", "")).lower() == "true"
            for name, values in out.diagnostics.items() if "untrained_model" in values}
