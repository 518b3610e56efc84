"""How far off the relocalization fixes are, in the standard deviations published with them.

The relocalize node publishes each fix (``relocalize/pose``) with a covariance. A filter that
fuses the fixes (robot_localization, the gate) weighs them by it, so it must hold the errors:
too narrow, and the filter trusts a fix more than its odometry. With ground truth,
``g2g-eval-bag`` (and ``bench_real_reloc``) express each fix's errors in the standard deviation
along the covariance's widest axis, position and rotation apart, and count the fixes within 3
of them, for the published covariance and for the verifier's own (``PUBLISHED_SD_SCALE`` times
narrower: the trust rules judge that one). That factor is the structure's, the default path;
a fix of the relative pose between windows (``verify_relative_fallback``, off by default) is
published 10 times wider than its solve, and a G2G-only fix (``fix_needs_geometry`` false)
with G2G's fixed covariance, so where such fixes are counted the "verifier's own" share is an
approximation.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from g2g_model.localization.verification import PUBLISHED_SD_SCALE


def widest_sd(covariance: np.ndarray) -> Tuple[float, float]:
    """``(position sd m, rotation sd deg)`` along the widest axis of a ``[6, 6]`` pose
    covariance (x y z, then rotation about x y z in rad, as geometry_msgs orders it)."""
    c = np.asarray(covariance, np.float64).reshape(6, 6)
    return (float(np.sqrt(max(np.linalg.eigvalsh(c[:3, :3]).max(), 0.0))),
            float(np.degrees(np.sqrt(max(np.linalg.eigvalsh(c[3:, 3:]).max(), 0.0)))))


def sd_units(trans_err_m: float, rot_err_deg: float, covariance: Optional[np.ndarray]
             ) -> Tuple[Optional[float], Optional[float]]:
    """A fix's errors over its covariance's :func:`widest_sd` (None: no covariance, or a
    zero deviation)."""
    if covariance is None:
        return None, None
    sd_m, sd_deg = widest_sd(covariance)
    return (trans_err_m / sd_m if sd_m > 0 else None,
            rot_err_deg / sd_deg if sd_deg > 0 else None)


def coverage(units: Sequence[Tuple[Optional[float], Optional[float]]]) -> Dict[str, object]:
    """Over fixes' :func:`sd_units`: how many (``n``), the median and 90th percentile of the
    errors in published sd (``median_m``, ``p90_m``, ``median_deg``, ``p90_deg``), the share
    within 3 of them (``within_3sd_m`` / ``_deg``) and within 3 of the verifier's own
    (``verifier_within_3sd_m`` / ``_deg``)."""
    out: Dict[str, object] = {"n": 0, "verifier_sd_scale": PUBLISHED_SD_SCALE}
    for k, axis in enumerate(("m", "deg")):
        vals = np.array([u[k] for u in units if u[k] is not None], np.float64)
        out["n"] = max(int(out["n"]), len(vals))
        if not len(vals):
            continue
        out[f"median_{axis}"] = float(np.median(vals))
        out[f"p90_{axis}"] = float(np.percentile(vals, 90))
        out[f"within_3sd_{axis}"] = float(np.mean(vals <= 3.0))
        out[f"verifier_within_3sd_{axis}"] = float(np.mean(vals * PUBLISHED_SD_SCALE <= 3.0))
    return out
