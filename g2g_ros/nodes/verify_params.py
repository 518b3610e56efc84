"""Parameters of the geometric verification, shared by ``relocalize`` and ``rig_odometry``
(:class:`~g2g_model.localization.verification.VerifierConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

from g2g_model.localization.verifier_config import VerifierConfig
from g2g_ros.parameters import param

MAX_IMAGE_PX = ("images are reduced once, as they arrive, to this long side (an image wider "
                "than 16:9 to the short side of a 16:9 image of it; JPEG decoded at 1/2, 1/4 "
                "or 1/8, the rest area-averaged; never below the model's input size) and "
                "described at it, with K scaled to match; 0 = full size, else at least 64")
MAX_FEATURES = "at most this many local features per image (the strongest)"


def verify_param(what: str):
    """The ``verify`` field; ``what`` says what is verified, for its description."""
    return param(True, f"geometric verification and refinement of {what} (local features, "
                 "PoseLib's multi-camera solvers seeded with G2G); false = G2G alone")


def max_image_px_param(default: int):
    return param(default, MAX_IMAGE_PX, value_range=(0, 16384))


def max_features_param(default: int):
    return param(default, MAX_FEATURES, value_range=(16, 100000))


@dataclass
class VerifyParams:
    """``verify`` (declared by each node with :func:`verify_param`), ``verify_feature``,
    ``verify_min_inliers``, ``verify_reprojection_px``, ``verify_max_image_px`` and
    ``verify_max_features`` (a node may redeclare the last two with its own defaults)."""

    verify_feature: str = param("sift", "local features for verification: 'sift' (RootSIFT) "
                                "or 'aliked' (ALIKED-t16: more matches on plain surfaces but "
                                "less accurate poses and false fixes on real images, about ten "
                                "times the cost per image: docs/VERIFICATION.md)")
    verify_min_inliers: int = param(30, "fewer geometric inliers: keep G2G's estimate (the "
                                    "reason is in ~/status)", value_range=(6, 100000))
    verify_reprojection_px: float = param(4.0, "inlier threshold of the geometric solver, "
                                          "pixels", value_range=(0.1, 100.0))
    verify_max_image_px: int = max_image_px_param(VerifierConfig.max_image_px)
    verify_max_features: int = max_features_param(2000)


def verifier_config(p: Dict) -> VerifierConfig:
    """The verification the parameters describe (``ValueError`` naming a bad value). The
    rig-odometry parameters ``verify_max_turn_deg``, ``verify_standstill_deg``,
    ``verify_overlap`` and ``verify_keyframe_map``, and relocalization's
    ``verify_window_span_m``, ``verify_relative_fallback``, ``verify_fallback_feature`` and
    ``verify_tracking_radius_px``, are used where they are declared."""
    return VerifierConfig(enabled=bool(p["verify"]), feature=p["verify_feature"],
                          min_inliers=p["verify_min_inliers"],
                          reprojection_px=p["verify_reprojection_px"],
                          max_image_px=p["verify_max_image_px"],
                          max_features=p["verify_max_features"],
                          max_turn_deg=p.get("verify_max_turn_deg", 180.0),
                          standstill_deg=p.get("verify_standstill_deg",
                                               VerifierConfig.standstill_deg),
                          overlap=bool(p.get("verify_overlap", VerifierConfig.overlap)),
                          keyframe_map=bool(p.get("verify_keyframe_map",
                                                  VerifierConfig.keyframe_map)),
                          window_span_m=p.get("verify_window_span_m",
                                              VerifierConfig.window_span_m),
                          relative_fallback=bool(p.get("verify_relative_fallback",
                                                       VerifierConfig.relative_fallback)),
                          fallback_feature=p.get("verify_fallback_feature",
                                                 VerifierConfig.fallback_feature),
                          tracking_radius_px=p.get("verify_tracking_radius_px",
                                                   VerifierConfig.tracking_radius_px)
                          ).validate()
