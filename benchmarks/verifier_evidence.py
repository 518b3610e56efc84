"""The verifier's evidence behind each published relocalization fix (bench_real_reloc.py).

A published ``GroupAlignment`` names its map window (``stamps_a``), its query window
(``stamps_b``), G2G's poses (``poses_b``) and the verifier's path and inlier count. This runs
the relocalize node's verifier (:class:`~g2g_model.localization.verification.StructureVerifier`,
default settings with its window span off: the whole window's solve) again on the same
windows -- the map's keyframes, the query images newest instant first, the
query's intra-window poses from the bag's (drifted) odometry and G2G's estimate carried by that
odometry, as the node does -- and records what it decided on, at the window's newest instant
(where the node's geometric fix holds and is stamped; "B0" and "anchor" below are that
instant, the verifier's anchor):

* ``inliers``, ``position_sd_m`` / ``rotation_sd_deg`` (the covariance it publishes),
  ``g2g_m`` / ``g2g_deg`` (how far G2G's pose was from the geometric one);
* ``spread``: the share of a 4 x 4 grid of each query image that holds an inlier (mean over
  the query frames), and ``frames_with_inliers``;
* ``residual_px``: the median / 90th percentile reprojection residual of the inliers;
* ``anchor_m`` / ``anchor_deg`` / ``anchor_inliers``: the query's anchor frame solved alone
  (PoseLib's single-camera absolute pose on its own 2D-3D matches, the same RANSAC threshold),
  which needs no odometry, against the group solution, which takes the query's intra-window
  poses from the odometry;
* ``prev_fix_m`` / ``prev_fix_deg``: how far the fix's map->odom correction is from the one the
  previous published fix put in force (the odometry-propagated previous fix);
* ``classical_odom_err_m`` / ``_deg`` (with the ground truth): the classical SIFT + RANSAC
  baseline (``g2g-eval --classical``'s) on the same map window and query images with the
  query's intra-window poses from the odometry, as the node has them; g2g-eval's classical row
  is given the true ones (``classical_true_err_m`` / ``_deg``, the same run here).

The solver call is observed, not changed: PoseLib's generalized absolute pose is wrapped to
keep its inputs and inlier masks for the residuals and the spread.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence
from unittest import mock

import numpy as np

from g2g_model.estimation.groups import Group
from g2g_model.geometry import invert_pose, relative_pose, rotation_angle_deg
from g2g_ros.bags.alignment_fields import alignment_camera, fix_stamp
from g2g_ros.conversions import pose_to_matrix, stamp_ns

GRID = 4


def _project(Rt: np.ndarray, K: np.ndarray, X: np.ndarray) -> np.ndarray:
    cam = X @ Rt[:3, :3].T + Rt[:3, 3]
    uv = cam[:, :2] / cam[:, 2:3]
    return uv @ K[:2, :2].T + K[:2, 2]


def _evidence_of_solve(call: Mapping) -> Dict[str, object]:
    """Spread and residuals of the inliers of one recorded PoseLib call."""
    pose = call["pose"]
    b0_R, b0_t = np.asarray(pose.R), np.asarray(pose.t)
    residuals, cells = [], []
    for x, X, ext, cam, mask in zip(call["p2d"], call["p3d"], call["exts"], call["cams"],
                                    call["inliers"]):
        mask = np.asarray(mask, bool)
        if not mask.any():
            cells.append(0.0)
            continue
        # Frame j's camera: x_j = R_ext (R_b0 X + t_b0) + t_ext.
        Rt = np.eye(4)
        Rt[:3, :3] = np.asarray(ext.R) @ b0_R
        Rt[:3, 3] = np.asarray(ext.R) @ b0_t + np.asarray(ext.t)
        fx, fy, cx, cy = cam["params"][:4]
        K = np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1.0]])
        pts = np.asarray(x, float)[mask]
        uv = _project(Rt, K, np.asarray(X, float)[mask])
        residuals.append(np.linalg.norm(uv - pts, axis=1))
        w, h = cam["width"], cam["height"]
        gx = np.clip((pts[:, 0] / max(w, 1) * GRID).astype(int), 0, GRID - 1)
        gy = np.clip((pts[:, 1] / max(h, 1) * GRID).astype(int), 0, GRID - 1)
        cells.append(len(set(zip(gx.tolist(), gy.tolist()))) / GRID ** 2)
    res = np.concatenate(residuals) if residuals else np.zeros(0)
    return {**_anchor_alone(call, b0_R, b0_t),
            "spread": float(np.mean(cells)) if cells else 0.0,
            "frames_with_inliers": int(sum(c > 0 for c in cells)),
            "residual_px_median": float(np.median(res)) if len(res) else None,
            "residual_px_p90": float(np.percentile(res, 90)) if len(res) else None}


def _anchor_alone(call: Mapping, b0_R: np.ndarray, b0_t: np.ndarray) -> Dict[str, object]:
    """The anchor frame solved from its own matches, and how far that is from the group's."""
    import poselib

    x, X = np.asarray(call["p2d"][0], float), np.asarray(call["p3d"][0], float)
    if len(x) < 6:
        return {"anchor_m": None, "anchor_deg": None, "anchor_inliers": 0}
    pose, info = poselib.estimate_absolute_pose(
        x, X, call["cams"][0], {"max_reproj_error": call["threshold"], "seed": 0},
        {"loss_scale": call["threshold"]})
    group = np.eye(4)
    group[:3, :3], group[:3, 3] = b0_R, b0_t
    alone = np.eye(4)
    alone[:3, :3], alone[:3, 3] = np.asarray(pose.R), np.asarray(pose.t)
    rel = relative_pose(invert_pose(group), invert_pose(alone))
    return {"anchor_m": float(np.linalg.norm(rel[:3, 3])),
            "anchor_deg": float(rotation_angle_deg(rel[:3, :3])),
            "anchor_inliers": int(np.sum(info.get("inliers", []))),
            "anchor_map_T_b0": invert_pose(alone)}


def verify_again(verifier, group_a: Group, query: Group, map_T_b: np.ndarray
                 ) -> Dict[str, object]:
    """Run ``verifier`` on the windows, observing its solver; its decision and evidence."""
    import poselib

    real = poselib.estimate_generalized_absolute_pose
    calls: List[Dict[str, object]] = []

    def observed(p2d, p3d, exts, cams, *args, **kwargs):
        pose, info = real(p2d, p3d, exts, cams, *args, **kwargs)
        calls.append({"p2d": p2d, "p3d": p3d, "exts": exts, "cams": cams, "pose": pose,
                      "inliers": info.get("inliers", []),
                      "threshold": float(args[0]["max_reproj_error"])})
        return pose, info

    with mock.patch.object(poselib, "estimate_generalized_absolute_pose", observed):
        result = verifier(group_a, query, map_T_b)
    cov = np.asarray(result.covariance, float)
    out = {"path": result.path, "inliers": int(result.inliers), "reason": result.reason,
           "position_sd_m": float(np.sqrt(max(np.linalg.eigvalsh(cov[:3, :3]).max(), 0.0))),
           "rotation_sd_deg": float(np.degrees(np.sqrt(max(
               np.linalg.eigvalsh(cov[3:, 3:]).max(), 0.0)))),
           "g2g_m": None, "g2g_deg": None, "map_T_b0": np.asarray(result.map_T_b0, float)}
    if result.g2g_disagreement is not None:
        out["g2g_m"], out["g2g_deg"] = (float(v) for v in result.g2g_disagreement)
    if calls:  # the whole window's solve (a refinement near its start may follow it)
        out.update(_evidence_of_solve(calls[0]))
    return out


def _error(truth: Optional[np.ndarray], pose: Optional[np.ndarray]) -> tuple:
    if truth is None or pose is None:
        return None, None
    rel = relative_pose(truth, pose)
    return float(np.linalg.norm(rel[:3, 3])), float(rotation_angle_deg(rel[:3, :3]))


def fix_evidence(alignments: Sequence[object], map_frames: Mapping[tuple, object],
                 query_images: Mapping[int, np.ndarray], query_K: np.ndarray,
                 odom_T_base: Mapping[int, np.ndarray], base_T_cam: np.ndarray,
                 truth_T_base: Optional[Mapping[int, np.ndarray]] = None,
                 verifier=None) -> List[Dict[str, object]]:
    """Evidence per published alignment (module docstring), in publication order.

    ``map_frames``: ``(camera, stamp) ->`` map frame (``decode()``, ``intrinsics``,
    ``world_T_cam``); ``query_images``: stamp -> RGB image; ``odom_T_base``: the bag's odometry
    input by stamp; ``base_T_cam``: the query camera's extrinsics. With ``truth_T_base`` (the
    ground truth by stamp) each row also has the errors at the anchor (the window's newest
    instant) of the group solution
    (``err_m`` / ``err_deg``), of the anchor alone (``anchor_err_m`` / ``_deg``) and of the
    group solved again with the true intra-window poses instead of the odometry's
    (``true_window_err_m`` / ``_deg``, ``true_window_inliers``): a control that isolates what
    the odometry inside the window costs."""
    from g2g_model.baseline.classical import ClassicalBaseline, ImageGroup
    from g2g_model.localization.verification import StructureVerifier, VerifierConfig

    verifier = verifier or StructureVerifier(VerifierConfig(window_span_m=0.0))
    classical = ClassicalBaseline("default")
    truth_T_base = truth_T_base or {}
    records: List[Dict[str, object]] = []
    previous: Optional[np.ndarray] = None
    for msg in alignments:
        cam_a = alignment_camera(msg)
        frames = [map_frames.get((cam_a, stamp_ns(t))) for t in msg.stamps_a]
        # The node verifies the query window newest instant first (relocalizer.newest_first):
        # its "B0" here is that newest instant, where a geometric fix holds.
        b0 = stamp_ns(msg.stamps_b[0]) if len(msg.stamps_b) else None
        sb = [stamp_ns(t) for t in msg.stamps_b][::-1]
        if any(f is None for f in frames) or any(s not in query_images or s not in odom_T_base
                                                 for s in sb):
            records.append({"stamp_ns": fix_stamp(msg), "skipped": True})
            continue
        group_a = Group(images=[f.decode() for f in frames],
                        intrinsics=np.stack([f.intrinsics for f in frames]),
                        cam_to_world=np.stack([f.world_T_cam for f in frames]))
        a0_T_b0 = pose_to_matrix(msg.poses_b[0])

        def query_group(base_poses: Mapping[int, np.ndarray]) -> Group:
            """The query window with these intra-window poses (odometry's or the truth)."""
            return Group(images=[query_images[s] for s in sb], intrinsics=query_K,
                         cam_to_world=np.stack([base_poses[s] @ base_T_cam for s in sb]))

        def classical_b0(base_poses: Mapping[int, np.ndarray]) -> Optional[np.ndarray]:
            """map_T_b0 of the classical baseline with these intra-window poses."""
            query = query_group(base_poses)
            result = classical.predict(
                ImageGroup(group_a.images, group_a.intrinsics, group_a.cam_to_world),
                ImageGroup(query.images, query.intrinsics, query.cam_to_world))
            a0_T = np.asarray(result.poses_b[0], float)
            return group_a.cam_to_world[0] @ a0_T if np.all(np.isfinite(a0_T)) else None

        def solve(base_poses: Mapping[int, np.ndarray]) -> Dict[str, object]:
            query = query_group(base_poses)
            cams = query.cam_to_world
            # G2G's correction, from its anchor B0 (the window's first instant), as the node.
            map_T_odom = (group_a.cam_to_world[0] @ a0_T_b0
                          @ invert_pose(base_poses[b0] @ base_T_cam))
            return {**verify_again(verifier, group_a, query, map_T_odom @ cams),
                    "map_T_odom": map_T_odom, "odom_T_b0": cams[0]}

        got = solve(odom_T_base)
        truth = truth_T_base.get(sb[0])
        truth_b0 = truth @ base_T_cam if truth is not None else None
        solved, anchor = got.pop("map_T_b0"), got.pop("anchor_map_T_b0", None)
        row = {"stamp_ns": fix_stamp(msg), "published_inliers": int(msg.inliers),
               "published_path": msg.path or "g2g", "window_span_m": float(np.linalg.norm(
                   odom_T_base[sb[-1]][:3, 3] - odom_T_base[sb[0]][:3, 3])),
               **{k: v for k, v in got.items() if k not in ("map_T_odom", "odom_T_b0")}}
        row["err_m"], row["err_deg"] = _error(truth_b0, solved)
        row["anchor_err_m"], row["anchor_err_deg"] = _error(truth_b0, anchor)
        if truth is not None and all(s in truth_T_base for s in sb):
            control = solve(truth_T_base)
            row["true_window_err_m"], row["true_window_err_deg"] = _error(
                truth_b0, control["map_T_b0"])
            row["true_window_inliers"] = control["inliers"]
            row["classical_odom_err_m"], row["classical_odom_err_deg"] = _error(
                truth_b0, classical_b0(odom_T_base))
            row["classical_true_err_m"], row["classical_true_err_deg"] = _error(
                truth_b0, classical_b0(truth_T_base))
        fix_T_odom = (solved @ invert_pose(got["odom_T_b0"]) if row["path"] != "g2g"
                      else got["map_T_odom"])
        if previous is not None:
            row["prev_fix_m"], row["prev_fix_deg"] = _error(previous, fix_T_odom)
        previous = fix_T_odom
        records.append(row)
    return records


def _over(key: str, limit: float, when: Optional[tuple] = None):
    def rule(r: Mapping[str, object]) -> bool:
        if when is not None and not (r.get(when[0]) or 0) >= when[1]:
            return False
        value = r.get(key)
        return value is not None and value > limit
    return rule


# Candidate acceptance rules (True: the fix would be rejected), each on evidence the node has.
RULES = {
    "residual median > 1.5 px": _over("residual_px_median", 1.5),
    "published position sd > 25 mm": _over("position_sd_m", 0.025),
    "G2G vs geometry > 0.1 m": _over("g2g_m", 0.1),
    "anchor alone vs group > 0.1 m (anchor alone >= 30 inliers)":
        _over("anchor_m", 0.1, ("anchor_inliers", 30)),
    "query window spans > 1 m of odometry": _over("window_span_m", 1.0),
    "inliers < 35": lambda r: r.get("inliers") is not None and r["inliers"] < 35,
}


def rule_table(records: Sequence[Mapping[str, object]], bad: Sequence[bool]
               ) -> Dict[str, Dict[str, int]]:
    """Per rule: how many of the bad fixes it rejects and how many good ones it keeps."""
    out = {}
    for name, rule in RULES.items():
        hits = [bool(rule(r)) for r in records]
        out[name] = {"bad_rejected": sum(h and b for h, b in zip(hits, bad)),
                     "bad": sum(bad),
                     "good_kept": sum((not h) and (not b) for h, b in zip(hits, bad)),
                     "good": sum(not b for b in bad)}
    return out
