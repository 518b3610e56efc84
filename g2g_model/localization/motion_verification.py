"""The outcome of one rig-motion verification (:mod:`.rig_motion`): the step, its covariance,
which path and geometry made it, and the keyframe matches it explains (worked out when first
read)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

import numpy as np

from g2g_model.localization.rig_epipolar import G2G_STEP_COVARIANCE
from g2g_model.localization.verdict import PATH_G2G


# One camera pair's explained matches: (cam_a, cam_b, pixels in a [M, 2], pixels in b [M, 2]).
Correspondence = Tuple[int, int, np.ndarray, np.ndarray]


@dataclass
class MotionVerification:
    """Outcome of one rig-motion verification.

    Attributes:
        path: ``"g2g"``, ``"verified"`` or ``"refined"``.
        delta: ``[4, 4]`` base_prev_T_base_now (for ``"g2g"``: G2G's, unchanged; with
            ``length_from_g2g``: the geometry's rotation and direction, G2G's length; of a
            mirrored relative pose, the geometry's rotation and G2G's translation).
        covariance: ``[6, 6]`` of that motion (x y z, roll pitch yaw; in the previous base
            frame; metres and radians).
        inliers: inlier correspondences (0 on the ``"g2g"`` path, save with
            ``length_from_g2g``).
        reason: why this path.
        matched: the correspondences the geometry was solved from (0 where not solved).
    """

    path: str
    delta: np.ndarray
    covariance: np.ndarray = field(default_factory=lambda: G2G_STEP_COVARIANCE.copy())
    inliers: int = 0
    reason: str = ""
    g2g_disagreement: Optional[Tuple[float, float]] = None
    matched: int = 0
    stationary: bool = False  # the images did not move: identity motion (module docstring)
    # Which geometry made the motion: "overlap" (the rig's overlapping cameras, absolute
    # pose), "relative" (generalized relative pose between keyframes), "keyframe map" (points
    # of the last two keyframes, absolute pose), "one camera pair", "standstill"; "" on the
    # "g2g" path.
    method: str = ""
    # The rotation and direction are geometric, the length G2G's (straight motion, one camera
    # pair): the path is "g2g", since the geometry did not verify the length.
    length_from_g2g: bool = False
    # Two geometries gave steps more than rig_keyframe_map.DISPUTED_LENGTH apart: the
    # one nearer the previous step's velocity was taken, but its length is not carried into the
    # next step's map.
    disputed: bool = False
    # Computes :attr:`correspondences` when they are first read (only a refined window reads
    # them: rig_window).
    explain: Optional[Callable[[], List[Correspondence]]] = field(default=None, repr=False,
                                                                  compare=False)
    _explained: Optional[List[Correspondence]] = field(default=None, init=False, repr=False,
                                                       compare=False)

    @property
    def correspondences(self) -> List[Correspondence]:
        """The keyframe matches this motion explains (Sampson error under the epipolar
        threshold), per camera pair ``(cam_a, cam_b, pixels in a, pixels in b)``: a refined
        window's tracks (rig_window). Worked out on first read."""
        if self._explained is None:
            self._explained = self.explain() if self.explain is not None else []
        return self._explained

    @correspondences.setter
    def correspondences(self, value: List[Correspondence]) -> None:
        self._explained = list(value)

    @property
    def geometric(self) -> bool:
        """Whether :attr:`delta` comes from the geometry: verified or refined, or its rotation
        and direction with G2G's length (``length_from_g2g``, on the ``g2g`` path; a mirrored
        relative pose: its rotation with G2G's translation)."""
        return self.path != PATH_G2G or self.length_from_g2g

    @property
    def carries_length(self) -> bool:
        """Whether the geometry measured this step's length undisputed: the next step's
        keyframe map may carry it (``RigMotionVerifier(..., before=...)``)."""
        return self.path != PATH_G2G and not self.length_from_g2g and not self.disputed
