"""Is a 2D-3D pose the only one its matches support? Repeated texture (tiles, a row of windows,
the simulator's dotted walls) can give a second, equally well supported pose one texture period
away, and RANSAC then picks either by chance.

After the structure's solve, the matches its pose leaves as outliers are searched for a rival
pose by the same solver (PoseLib's generalized absolute pose, fewer iterations). A rival
competes in the images the pose explains: in each query image its inliers count up to as many as
the pose's own there. (A window bent by odometry drift also has a second pose, but it explains
other images than the first: each image sides with one pose, and no image is contested.) The
solution stands unless a rival more than :data:`DISTINCT_M` / :data:`DISTINCT_DEG` away competes
nearly as well: the pose must lead by :data:`MARGIN_SD` standard deviations of a count
difference, ``n_pose - n_rival >= MARGIN_SD * sqrt(n_pose + n_rival)`` (were both poses equally
right, each match would side with either by chance, and the difference would spread that much).

Measured 2026-11-30 (query windows of the simulated hand-held twin of ``bench_real_reloc``, scene
20002, whose floor repeats every 0.75 m; real TUM windows through the node and by g2g-eval; the
lead of each published pose, docs/VERIFICATION.md): a first fix 0.76 m / 1.9 deg off with 104
inliers had a rival 0.68 m / 3.2 deg from the truth competing with 75 (a lead of 2.2 sd); of the
correct poses, the least clear leads were 3.7 sd (real photographs: 110 against 62), 4.3 (real
TUM windows) and 4.7-5.3 (simulated), rivals one period away included (406 against 236 matches:
6.7 sd). A thin margin on both sides: a statistical threshold, not a wide separation.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, List, Optional, Tuple

import numpy as np

from g2g_model.geometry import invert_pose, relative_pose, rotation_angle_deg
from g2g_model.localization.absolute_pose import absolute_pose, reprojection_errors
from g2g_model.localization.verdict import Fallback

if TYPE_CHECKING:
    from g2g_model.localization.verifier_config import VerifierConfig

#: The winner's lead over a rival, in standard deviations of the count difference.
MARGIN_SD = 3.0
#: A rival closer than this is the same place (an error below a false fix's 0.15 m / 3 deg).
DISTINCT_M = 0.15
DISTINCT_DEG = 3.0
#: The rival search: RANSAC iterations at most, and the fewest inliers a rival needs.
RIVAL_ITERATIONS = 2000
RIVAL_MIN_INLIERS = 6


class Ambiguous(Fallback):
    """A rival pose explains the matches nearly as well: neither is trusted."""


def lead_sd(best: int, rival: int) -> float:
    """How far ``best`` inliers lead ``rival`` ones, in standard deviations of the difference."""
    total = best + rival
    return float("inf") if total == 0 else (best - rival) / np.sqrt(total)


def rival_pose(p2d: List[np.ndarray], p3d: List[np.ndarray], exts, cams, intrinsics,
               world_T_b0: np.ndarray, cfg: "VerifierConfig"
               ) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """``(inliers of world_T_b0 per image, the rival's per image, the rival's world_T_b0 or
    None)``: the best pose among the matches that ``world_T_b0`` leaves as outliers (arguments
    as :func:`~.absolute_pose.absolute_pose`). No search where even all of them could not come
    within :data:`MARGIN_SD` of it."""
    errors = reprojection_errors(invert_pose(world_T_b0), p2d, p3d, [e.Rt for e in exts],
                                 intrinsics)
    outside = [e >= cfg.reprojection_px for e in errors]
    best = np.array([int((~m).sum()) for m in outside])
    none = (best, np.zeros_like(best), None)
    left = int(sum(m.sum() for m in outside))
    if left < RIVAL_MIN_INLIERS or lead_sd(int(best.sum()), left) >= MARGIN_SD:
        return none
    search = replace(cfg, min_inliers=RIVAL_MIN_INLIERS,
                     ransac_iterations=min(cfg.ransac_iterations, RIVAL_ITERATIONS))
    p2d_left = [x[m] for x, m in zip(p2d, outside)]
    p3d_left = [x[m] for x, m in zip(p3d, outside)]
    try:
        rival, _, _ = absolute_pose(p2d_left, p3d_left, exts, cams, intrinsics, world_T_b0,
                                    search)
    except Fallback:
        return none
    counts = reprojection_errors(invert_pose(rival), p2d_left, p3d_left, [e.Rt for e in exts],
                                 intrinsics)
    return best, np.array([int((e < cfg.reprojection_px).sum()) for e in counts]), rival


def check_unambiguous(p2d: List[np.ndarray], p3d: List[np.ndarray], exts, cams, intrinsics,
                      world_T_b0: np.ndarray, cfg: "VerifierConfig") -> None:
    """Raises :class:`Ambiguous` where a rival pose (:func:`rival_pose`) at least
    :data:`DISTINCT_M` / :data:`DISTINCT_DEG` from ``world_T_b0`` competes within
    :data:`MARGIN_SD` of its inliers in the images it explains (module docstring)."""
    best, rival_counts, rival = rival_pose(p2d, p3d, exts, cams, intrinsics, world_T_b0, cfg)
    if rival is None:
        return
    rel = relative_pose(world_T_b0, rival)
    dt, dr = float(np.linalg.norm(rel[:3, 3])), float(rotation_angle_deg(rel[:3, :3]))
    contested = int(np.minimum(best, rival_counts).sum())
    lead = lead_sd(int(best.sum()), contested)
    if (dt > DISTINCT_M or dr > DISTINCT_DEG) and lead < MARGIN_SD:
        raise Ambiguous(f"ambiguous: a second pose {dt:.2f} m / {dr:.1f} deg away explains "
                        f"{contested} matches in the images where this pose explains "
                        f"{int(best.sum())} (a lead of {lead:.1f} sd < {MARGIN_SD:g}): "
                        "repeated texture?")
