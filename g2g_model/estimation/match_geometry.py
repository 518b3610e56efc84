"""Two-view geometry of matched rays between two groups of known intra-group poses.

The matches of :mod:`g2g_model.estimation.rotation_matching` are pairs of unit rays, one in each
group's anchor frame, leaving camera centres that the known intra-group poses place. Two solves:

- :func:`translation_given_rotation`: with R_{A0<-B0} fixed, each match is one linear
  constraint on B0's position (the generalized epipolar constraint with the rotation known);
- :func:`generalized_pose`: R and t together, where the groups stand far apart for the scene's
  depth and one rotation no longer explains the matches (parallax). This is PoseLib's
  generalized relative pose (RANSAC over minimal multi-camera solvers, then a robust
  refinement), fed the matches as pixels of the frames they were described in.

:func:`plane_inliers` scores a pose by how many matches lie near their epipolar plane, the
measure by which the matcher decides between the two (rotation_matching, step 6), and
:func:`with_pose` puts the answer on group B's frames.

Why our own linear solve for the translation: PoseLib has no translation solver for a known
rotation (its generalized solvers move the rotation too; on cell-sized matches of nearby groups
that was measured worse, docs/TRAINING.md, "Pose from feature matches").
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np


def translation_given_rotation(rays_a: np.ndarray, rays_b: np.ndarray, centres_a: np.ndarray,
                               centres_b: np.ndarray, rotation: np.ndarray, prior: np.ndarray,
                               prior_weight: float, huber_m: float = 0.02,
                               iterations: int = 5) -> np.ndarray:
    """B0's position t in A0's frame from matched rays with R = R_{A0<-B0} fixed.

    A match's two rays, from camera centres ``centres_a`` (A0's frame) and ``centres_b`` (B0's
    frame), meet at one point, so t + R c_b - c_a lies in the plane of the rays a and R b: with
    n the unit normal of that plane, n . t = n . (c_a - R c_b), linear in t (the generalized
    epipolar constraint with the rotation known). The centres' spread within each group (its
    known poses) gives the metric scale. Solved by least squares, Huber-weighted (``huber_m``),
    with ``prior_weight`` x |t - prior|^2 added: where the rows do not fix t (no baseline within
    the groups, or rays too close to parallel) the prior does."""
    rb = rays_b @ rotation.T
    normals = np.cross(rays_a, rb)
    norm = np.linalg.norm(normals, axis=1)
    keep = norm > 1e-3
    normals = normals[keep] / norm[keep, None]
    rhs = np.sum(normals * (centres_a[keep] - centres_b[keep] @ rotation.T), axis=1)
    t = prior.copy()
    for _ in range(iterations):
        r = normals @ t - rhs
        w = np.where(np.abs(r) < huber_m, 1.0, huber_m / np.maximum(np.abs(r), 1e-12))
        h = (normals * w[:, None]).T @ normals + prior_weight * np.eye(3)
        t = np.linalg.solve(h, (normals * w[:, None]).T @ rhs + prior_weight * prior)
    return t


def plane_inliers(rays_a: np.ndarray, rays_b: np.ndarray, centres_a: np.ndarray,
                  centres_b: np.ndarray, rotation: np.ndarray, translation: np.ndarray,
                  max_deg: float) -> int:
    """How many matches lie within ``max_deg`` of their epipolar plane under the pose (R, t) =
    T_{A0<-B0}: the plane through ray a's centre c_a, the ray R b and B's centre t + R c_b
    (where the two centres coincide, the angle between a and R b counts instead)."""
    rb = rays_b @ rotation.T
    base = translation[None] + centres_b @ rotation.T - centres_a
    normals = np.cross(rb, base)
    norm = np.linalg.norm(normals, axis=1)
    off_plane = np.abs(np.sum(rays_a * normals, axis=1)) / np.maximum(norm, 1e-12)
    off_ray = np.sqrt(np.maximum(0.0, 1.0 - np.sum(rays_a * rb, axis=1) ** 2))
    sine = np.where(norm > 1e-9, off_plane, off_ray)
    return int((sine < np.sin(np.radians(max_deg))).sum())


def generalized_pose(pixels_a: np.ndarray, pixels_b: np.ndarray, frames_a: np.ndarray,
                     frames_b: np.ndarray, intrinsics_a: np.ndarray, intrinsics_b: np.ndarray,
                     poses_a: np.ndarray, poses_b: np.ndarray, size: Tuple[int, int],
                     seed: np.ndarray, max_error_px: float, iterations: int = 2000
                     ) -> np.ndarray:
    """T_{A0<-B0} ``[4, 4]`` from matched pixels by PoseLib's generalized relative pose.

    ``pixels_*`` ``[K, 2]`` in the frames ``frames_*`` ``[K]`` (indices into the groups) of
    ``size`` (h, w) with ``intrinsics_*`` ``[N, 3, 3]``; ``poses_*`` ``[N, 4, 4]`` T_{X0<-Xi};
    ``seed``: the caller's T_{A0<-B0}, scored first; ``max_error_px``: the RANSAC's epipolar
    threshold (and the refinement's loss scale); ``iterations``: at most this many RANSAC
    iterations."""
    import poselib

    from g2g_model.geometry import invert_pose
    from g2g_model.poselib_conversions import camera_pose, pinhole_camera, pose_matrix

    matches = []
    for i, j in sorted(set(zip(frames_a.tolist(), frames_b.tolist()))):
        pick = (frames_a == i) & (frames_b == j)
        m = poselib.PairwiseMatches()
        m.cam_id1, m.cam_id2 = int(i), int(j)
        m.x1, m.x2 = pixels_a[pick], pixels_b[pick]
        matches.append(m)
    # PoseLib's rig extrinsics map the rig (anchor) frame to each camera; its pose maps rig-1
    # coordinates to rig-2 coordinates: T_{B0<-A0}.
    extrinsics = [[camera_pose(invert_pose(T)) for T in poses] for poses in (poses_a, poses_b)]
    cameras = [[pinhole_camera(K, tuple(size)) for K in ks] for ks in (intrinsics_a, intrinsics_b)]
    pose, _ = poselib.estimate_generalized_relative_pose(
        matches, extrinsics[0], cameras[0], extrinsics[1], cameras[1],
        {"max_epipolar_error": max_error_px, "seed": 0, "max_iterations": int(iterations),
         "min_iterations": min(100, int(iterations))},
        {"loss_scale": max_error_px}, initial_pose=camera_pose(invert_pose(seed)))
    return invert_pose(pose_matrix(pose))


def with_pose(a0_T_b0: np.ndarray, input_b: np.ndarray, rotation: np.ndarray,
              translation: Optional[np.ndarray] = None) -> np.ndarray:
    """Group B's ``[N, 4, 4]`` T_{A0<-Bj}: ``a0_T_b0`` with its rotation replaced by
    ``rotation`` (and its translation by ``translation`` when given), the frames carried
    rigidly through the known T_{B0<-Bj} ``input_b``."""
    a0_T_b0 = a0_T_b0.copy()
    a0_T_b0[:3, :3] = rotation
    if translation is not None:
        a0_T_b0[:3, 3] = translation
    return np.stack([a0_T_b0 @ q for q in input_b])
