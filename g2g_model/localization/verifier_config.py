"""The settings of both verifiers (relocalization's :mod:`.verification` and rig odometry's
:mod:`.rig_motion`), named like the node parameters that set them
(``g2g_ros/nodes/verify_params.py``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from g2g_model.localization.local_features import FEATURES, MIN_IMAGE_PX


@dataclass
class VerifierConfig:
    """Settings of the structure-based verifier (named like the node parameters)."""

    enabled: bool = True
    feature: str = "sift"               # local features: "sift" (RootSIFT) or "aliked"
    # Relocalization: where ``feature`` gives no geometric pose (and no ambiguous one), the
    # same verification again with these features ("": none); see window_relative.
    fallback_feature: str = ""
    max_features: int = 2000            # per image
    min_inliers: int = 30               # fewer: fall back to G2G
    reprojection_px: float = 4.0        # RANSAC / inlier threshold, pixels
    agree_translation_m: float = 0.5    # G2G and geometry agree within these: "verified"
    agree_rotation_deg: float = 10.0
    prior_translation_m: float = 2.0    # geometry further than these from G2G is not trusted
    prior_rotation_deg: float = 45.0
    ransac_iterations: int = 10000      # at most
    max_matches_per_frame: int = 150    # the most distinctive 2D-3D matches of a query frame
    max_position_sd_m: float = 0.1      # a solution less certain than this is not trusted
    trust_inliers: int = 50             # this many inliers are trusted even far from G2G
    ratio: float = 0.8                  # Lowe's ratio test
    min_triangulation_deg: float = 1.5  # a map point needs this much parallax
    max_pair_angle_deg: float = 60.0    # map frames are paired when their axes are this close
    prior_view_angle_deg: float = 60.0  # with a view prior: map frames within this of a query
    # Relocalization while tracking a geometric fix (a view prior): each query keypoint competes
    # only with the map points the prior projects within this many pixels of it
    # (projection_guidance; 0: off, every point of the window).
    tracking_radius_px: float = 0.0
    cache_size: int = 160               # frames whose features are kept (at most)
    cache_mb: float = 128.0             # memory of all caches of one verifier (at most)
    # Describe images downscaled to this long side (0: full size); the nodes reduce their
    # images to it once, as they arrive. 1936 x 1216 cameras: a first localization on 5 + 5
    # images at 1/9 of the full-size time, as accurate (docs/VERIFICATION.md, "Cost").
    max_image_px: int = 480
    max_turn_deg: float = 180.0         # rig odometry: the rig's largest turn between keyframes
    #                                     that camera pairing allows for (180: every pair)
    standstill_deg: float = 0.25        # rig odometry: matches moved less: no motion (rig_motion)
    overlap: bool = True                # rig odometry: where the relative pose fails or takes
    #                                     G2G's length, solve the step from the points that the
    #                                     rig's overlapping cameras triangulate (rig_overlap)
    keyframe_map: bool = True           # rig odometry: also solve a step from the points of
    #                                     the last two keyframes, the previous step's length
    #                                     carried forward, where the relative pose's step
    #                                     departs from the previous step's velocity; where the
    #                                     two disagree, the step nearer that velocity is taken
    #                                     (rig_keyframe_map)
    # Relocalization: the whole window's solution is refined on the query instants within this
    # odometry travel of the first (0: off); drift inside a long window bends the group (the
    # real TUM replay: wrong fixes 0.19-0.21 m over 2.2 m windows; 2.8 cm within 0.5 m).
    window_span_m: float = 0.5
    # Relocalization: where the map window's structure gives no pose, the relative pose between
    # the map window and the query window (window_relative). Off by default: more fixes on real
    # and simulated windows, but some of them wrong (docs/VERIFICATION.md).
    relative_fallback: bool = False

    def validate(self) -> "VerifierConfig":
        for name in ("max_features", "min_inliers", "cache_size", "trust_inliers",
                     "ransac_iterations", "max_matches_per_frame"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("reprojection_px", "agree_translation_m", "agree_rotation_deg",
                     "prior_translation_m", "prior_rotation_deg", "max_position_sd_m",
                     "min_triangulation_deg", "max_pair_angle_deg", "prior_view_angle_deg",
                     "cache_mb"):
            value = float(getattr(self, name))
            if not np.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive finite number, got {value}")
        radius = float(self.tracking_radius_px)
        if not np.isfinite(radius) or radius < 0:
            raise ValueError(f"tracking_radius_px must be >= 0 (0: off), got {radius}")
        if self.fallback_feature not in ("",) + tuple(FEATURES) or (
                self.fallback_feature == self.feature):
            raise ValueError(f"fallback_feature must be empty (none) or one of {FEATURES} other "
                             f"than feature ({self.feature!r}), got {self.fallback_feature!r}")
        if not 0 < self.ratio < 1:
            raise ValueError(f"ratio must be in (0, 1), got {self.ratio}")
        if self.max_image_px and int(self.max_image_px) < MIN_IMAGE_PX:
            raise ValueError(f"max_image_px must be 0 (full size) or >= {MIN_IMAGE_PX}, got "
                             f"{self.max_image_px}")
        if not 0 <= float(self.standstill_deg) < 10:
            raise ValueError(f"standstill_deg must be in [0, 10) (0: off): {self.standstill_deg}")
        if not (np.isfinite(float(self.window_span_m)) and float(self.window_span_m) >= 0):
            raise ValueError(f"window_span_m must be >= 0 (0: the whole window), got "
                             f"{self.window_span_m}")
        if not 0 <= float(self.max_turn_deg) <= 180:
            raise ValueError(f"max_turn_deg must be in [0, 180], got {self.max_turn_deg}")
        return self
