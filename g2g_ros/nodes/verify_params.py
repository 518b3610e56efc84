"""Parameters of the geometric verification, shared by ``relocalize`` and ``rig_odometry``
(:class:`~g2g_model.localization.verification.VerifierConfig`)."""

from __future__ import annotations

from typing import Dict

from g2g_model.localization.verification import VerifierConfig


def declare_verify_parameters(node, what: str, max_image_px: int = 0,
                              max_features: int = 2000) -> None:
    """Declare ``verify``, ``verify_feature``, ``verify_min_inliers``,
    ``verify_reprojection_px``, ``verify_max_image_px`` and ``verify_max_features`` on a
    :class:`~g2g_ros.managed_node.ManagedNode` (read at configure); ``what`` says what is
    verified, for the descriptions; the last two arguments are the node's defaults."""
    d = node.declare
    d("verify", True, f"geometric verification and refinement of {what} (local features, "
      "PoseLib's multi-camera solvers seeded with G2G); false = G2G alone", True)
    d("verify_feature", "sift", "local features for verification: 'sift' (RootSIFT)", True)
    d("verify_min_inliers", 30, "fewer geometric inliers: keep G2G's estimate (the reason is in "
      "~/status)", True, value_range=(6, 100000))
    d("verify_reprojection_px", 4.0, "inlier threshold of the geometric solver, pixels", True,
      value_range=(0.1, 100.0))
    d("verify_max_image_px", max_image_px, "an image whose long side is longer is described "
      "downscaled to this long side (keypoints are given in the camera's pixels); 0 = full "
      "size, else at least 64", True, value_range=(0, 16384))
    d("verify_max_features", max_features, "at most this many local features per image (the "
      "strongest)", True, value_range=(16, 100000))


def verifier_config(p: Dict) -> VerifierConfig:
    """The verification the parameters describe (``ValueError`` naming a bad value). The
    rig-odometry parameter ``verify_max_turn_deg`` is used where it is declared."""
    return VerifierConfig(enabled=bool(p["verify"]), feature=p["verify_feature"],
                          min_inliers=p["verify_min_inliers"],
                          reprojection_px=p["verify_reprojection_px"],
                          max_image_px=p["verify_max_image_px"],
                          max_features=p["verify_max_features"],
                          max_turn_deg=p.get("verify_max_turn_deg", 180.0)).validate()
