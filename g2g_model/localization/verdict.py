"""The verdict both verifiers give (relocalization's :mod:`.verification`, rig odometry's
:mod:`.rig_motion`): which path a geometric pose takes against G2G's, and the fallback to G2G
with its reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

import numpy as np

from g2g_model.geometry import relative_pose, rotation_angle_deg

if TYPE_CHECKING:
    from g2g_model.localization.verifier_config import VerifierConfig

# Which path produced a published pose.
PATH_G2G = "g2g"            # G2G alone (verification off, or it found no trustworthy pose)
PATH_VERIFIED = "verified"  # geometry found a pose that agrees with G2G; the geometric one is used
PATH_REFINED = "refined"    # geometry found a well-supported pose that G2G did not predict


class Fallback(Exception):
    """Verification found no trustworthy pose; the message says why."""


def judge(prior: np.ndarray, solved: np.ndarray, covariance: np.ndarray, inliers: int,
          matched: int, cfg: "VerifierConfig", near_prior: bool = False
          ) -> Tuple[str, str, Tuple[float, float]]:
    """``(path, reason, (metres, degrees) apart)`` for a geometric pose ``solved`` with
    ``inliers`` and G2G's ``prior``: ``verified`` when they agree, ``refined`` when they do not
    but the geometry is trusted (close enough to G2G, or ``trust_inliers`` inliers); raises
    :class:`Fallback` when the geometry is not trusted (also when its position is less certain
    than ``max_position_sd_m``: e.g. the scale of a straight rig motion). ``near_prior``: never
    trusted beyond ``prior_translation_m`` / ``prior_rotation_deg`` of G2G, whatever its
    inliers (for weaker witnesses than 2D-3D inliers)."""
    position_sd = float(np.sqrt(max(np.linalg.eigvalsh(covariance[:3, :3]).max(), 0.0)))
    if not np.isfinite(position_sd) or position_sd > cfg.max_position_sd_m:
        raise Fallback(f"the geometric pose ({inliers} inliers) is poorly constrained: "
                       f"position sd {position_sd:.3g} m > {cfg.max_position_sd_m} m")
    rel = relative_pose(prior, solved)
    dt, dr = float(np.linalg.norm(rel[:3, 3])), float(rotation_angle_deg(rel[:3, :3]))
    trusted_far = not near_prior and inliers >= cfg.trust_inliers
    if not trusted_far and (dt > cfg.prior_translation_m or dr > cfg.prior_rotation_deg):
        why = "" if near_prior else f" < {cfg.trust_inliers}"
        raise Fallback(f"the geometric pose ({inliers} inliers{why}) is "
                       f"{dt:.2f} m / {dr:.1f} deg from G2G's (> {cfg.prior_translation_m} m"
                       f" / {cfg.prior_rotation_deg} deg): not trusted")
    agree = dt <= cfg.agree_translation_m and dr <= cfg.agree_rotation_deg
    reason = (f"{inliers} inliers of {matched} matches; G2G "
              f"{'agrees' if agree else 'was off'} by {dt:.2f} m / {dr:.1f} deg")
    return (PATH_VERIFIED if agree else PATH_REFINED), reason, (dt, dr)
