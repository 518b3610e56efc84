"""``g2g-eval --verify``: G2G followed by geometric verification, and geometry alone.

The same verifiers, with the same defaults, the ROS nodes run (:mod:`g2g_model.localization`):
relocalization pairs get
the structure-based verifier (map points triangulated from group A's poses, one generalized
absolute pose for group B; with ``--relative-fallback``, where that gives no pose, the anchor
frame's 2D-3D and 2D-2D matches, then the relative pose between the groups:
:mod:`g2g_model.localization.window_relative`), rig pairs the
generalized relative pose. Both
see the native images and the same (clean or noisy) input poses as every other method.

* ``<checkpoint>+verified``: G2G's prediction seeds the verifier and is checked against it; where
  verification finds no trustworthy pose, G2G's prediction is kept (path ``g2g``).
* ``geometry``: the verifier alone, seeded with "no motion" and with no G2G prior to check
  against; where it finds no pose the pair counts as failed.

Every pair records its path and inliers, so the evaluation reports the accepted share and the
false accepts (accepted with an error over 5 deg or 0.5 m) next to the errors.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Optional, Tuple

import numpy as np

from g2g_model.estimation.groups import Group
from g2g_model.localization.rig_motion import RigMotionVerifier, rig_verifier_config
from g2g_model.localization.verification import PATH_G2G, VerifierConfig
from g2g_model.localization.window_relative import RelocalizationVerifier

# An accepted estimate worse than this is a false accept.
FALSE_ACCEPT_DEG = 5.0
FALSE_ACCEPT_M = 0.5
VERIFICATION_COLUMNS = ("pairs", "accepted", "accepted_share", "false_accepts",
                        "false_accept_share", "accepted_rot_median_deg",
                        "accepted_trans_median_m")


class VerifiedMethod:
    """``predict(...) -> (pred_a, pred_b, path, inliers)``; ``g2g`` None = geometry alone."""

    def __init__(self, task: str, g2g=None, config: Optional[VerifierConfig] = None) -> None:
        cfg = config or (VerifierConfig() if task == "reloc" else rig_verifier_config())
        if g2g is None:  # nothing to check against: any well-supported pose is taken
            cfg = replace(cfg, prior_translation_m=1e9, prior_rotation_deg=180.0)
        self.task, self.g2g = task, g2g
        self.verifier = (RelocalizationVerifier(cfg) if task == "reloc"
                         else RigMotionVerifier(cfg))
        self.image_size = g2g.image_size if g2g is not None else None

    def predict(self, ga, gb, poses_a, poses_b, native: Tuple[list, np.ndarray, list, np.ndarray]
                ) -> Tuple[np.ndarray, np.ndarray, str, int]:
        """``ga``/``gb``: the groups at the G2G model's size; ``poses_*``: the input intra-group
        poses (anchor frames); ``native``: (images A, K A, images B, K B) at native size."""
        pa = poses_a.double().numpy()
        pb = poses_b.double().numpy()
        if self.g2g is not None:
            pred_a, pred_b = self.g2g.predict(ga, gb, poses_a, poses_b)
        else:  # "no motion": B0 at A0
            pred_a, pred_b = pa, pb
        images_a, k_a, images_b, k_b = native
        if self.task == "reloc":
            world_a = ga.world_T_cam[0][None] @ pa
            result = self.verifier(Group(images_a, k_a, world_a), Group(images_b, k_b, pb),
                                   world_a[0] @ pred_b[0] @ pb)
            b0 = np.linalg.inv(world_a[0]) @ result.map_T_b0
        else:
            result = self.verifier(Group(images_a, k_a, pa), Group(images_b, k_b, pb), pred_b[0])
            b0 = result.delta
        if not getattr(result, "geometric", result.path != PATH_G2G):
            return pred_a, pred_b, PATH_G2G, 0
        # The geometry's pose; on the g2g path its rotation (and direction, save a mirrored
        # relative pose) with G2G's length.
        return pa, b0 @ pb, result.path, 0 if result.path == PATH_G2G else int(result.inliers)


def verification_summary(rows: List[Dict]) -> Dict[str, float]:
    """Accepted share, false accepts and the accepted pairs' median errors of one method's
    per-pair rows (``path``, ``rot_err_deg``, ``trans_err_m``)."""
    accepted = [r for r in rows if r.get("path") not in (None, "", PATH_G2G)]
    false = [r for r in accepted if r["rot_err_deg"] > FALSE_ACCEPT_DEG
             or r["trans_err_m"] > FALSE_ACCEPT_M]
    out = {"pairs": len(rows), "accepted": len(accepted),
           "accepted_share": len(accepted) / max(len(rows), 1),
           "false_accepts": len(false), "false_accept_share": len(false) / max(len(rows), 1)}
    if accepted:
        out["accepted_rot_median_deg"] = float(np.median([r["rot_err_deg"] for r in accepted]))
        out["accepted_trans_median_m"] = float(np.median([r["trans_err_m"] for r in accepted]))
    return out
