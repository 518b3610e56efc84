"""Geometric verification and refinement of G2G's estimates (work in progress: interface)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Which path produced a published pose.
PATH_G2G = "g2g"            # G2G alone (verification off, or it found no trustworthy pose)
PATH_VERIFIED = "verified"  # geometry found a pose that agrees with G2G; the geometric one is used
PATH_REFINED = "refined"    # geometry found a well-supported pose that G2G did not predict


@dataclass
class VerifierConfig:
    """Settings of the structure-based verifier (named like the node parameters)."""

    enabled: bool = True
    feature: str = "sift"               # local features: "sift"
    max_features: int = 2000            # per image
    min_inliers: int = 30               # fewer: fall back to G2G
    reprojection_px: float = 4.0        # RANSAC / inlier threshold, pixels
    agree_translation_m: float = 0.5    # G2G and geometry agree within these: "verified"
    agree_rotation_deg: float = 10.0


@dataclass
class Verification:
    """Outcome of one verification.

    Attributes:
        path: ``"g2g"``, ``"verified"`` or ``"refined"`` (see the PATH_* constants).
        map_T_b0: ``[4, 4]`` pose of the query's first camera in the map frame (for ``"g2g"``:
            G2G's own estimate, unchanged).
        covariance: ``[6, 6]`` covariance of that pose (x y z roll pitch yaw, metres and
            radians, as in ROS PoseWithCovariance).
        inliers: 2D-3D inliers of the geometric solution (0 on the ``"g2g"`` path).
        reason: why this path (e.g. ``"too few features in the query (12)"``).
    """

    path: str
    map_T_b0: np.ndarray
    covariance: np.ndarray = field(default_factory=lambda: np.diag([0.05] * 3 + [0.01] * 3))
    inliers: int = 0
    reason: str = ""
