"""Per-pair pose errors: rotation, translation and RTA, with the failure scoring of the package
docstring (:mod:`g2g_model.metrics`). Pure numpy."""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence, Tuple

import numpy as np

from g2g_model.geometry import rotation_angle_deg

# Translations shorter than 1 mm have no usable direction (a parked robot's odometry jitter).
DEFAULT_EPS = 1e-3
FAILED_ANGLE_DEG = 180.0


def rotation_error_deg(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """Geodesic angle between rotations, degrees.

    Args:
        pred, gt: poses ``[..., 4, 4]`` or rotations ``[..., 3, 3]`` (broadcastable).
    Returns:
        ``[...]`` angle of ``R_hat^T R`` in [0, 180].
    """
    r_hat = np.asarray(pred, dtype=np.float64)[..., :3, :3]
    r = np.asarray(gt, dtype=np.float64)[..., :3, :3]
    return rotation_angle_deg(np.swapaxes(r_hat, -1, -2) @ r)


def translation_error_m(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """Euclidean distance between translations ``[..., 4, 4]`` poses or ``[..., 3]`` vectors."""
    return np.linalg.norm(_translation(pred) - _translation(gt), axis=-1)


def translation_angle_deg(
    pred: np.ndarray, gt: np.ndarray, eps: float = DEFAULT_EPS
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """RTA: angle between predicted and true translation directions.

    Args:
        pred, gt: poses ``[..., 4, 4]`` or translations ``[..., 3]``.
        eps: a vector shorter than this has no direction.
    Returns:
        ``(angle_deg, gt_undefined, pred_undefined)``, each ``[...]``. ``angle_deg`` is 0 where
        either flag is set; callers must use the flags (it is a placeholder, not a measurement).
    """
    t_hat = _translation(pred)
    t = _translation(gt)
    n_hat = np.linalg.norm(t_hat, axis=-1)
    n = np.linalg.norm(t, axis=-1)
    gt_undef = n < eps
    pred_undef = (n_hat < eps) & ~gt_undef
    ok = ~(gt_undef | pred_undef)
    denom = np.where(ok, n_hat * n, 1.0)
    cos = np.einsum("...i,...i->...", t_hat, t) / denom
    angle = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
    return np.where(ok, angle, 0.0), gt_undef, pred_undef


@dataclasses.dataclass
class PoseErrors:
    """Per-pair errors of ``N`` pairs, all arrays ``[N]``.

    ``rta_deg`` is meaningful only where ``rta_defined``; ``failed`` marks missing / non-finite
    predictions (already scored with the failure values described in the module docstring).
    """

    rot_deg: np.ndarray
    trans_m: np.ndarray
    rta_deg: np.ndarray
    rta_undefined_gt: np.ndarray
    rta_undefined_pred: np.ndarray
    failed: np.ndarray

    @property
    def rta_defined(self) -> np.ndarray:
        return ~(self.rta_undefined_gt | self.rta_undefined_pred)

    def __len__(self) -> int:
        return int(self.rot_deg.shape[0])

    @staticmethod
    def concatenate(parts: Sequence["PoseErrors"]) -> "PoseErrors":
        if not parts:
            return PoseErrors.empty()
        fields = [f.name for f in dataclasses.fields(PoseErrors)]
        return PoseErrors(**{k: np.concatenate([getattr(p, k) for p in parts]) for k in fields})

    @staticmethod
    def empty() -> "PoseErrors":
        f = np.zeros(0)
        b = np.zeros(0, dtype=bool)
        return PoseErrors(f, f.copy(), f.copy(), b, b.copy(), b.copy())

    def subset(self, mask: np.ndarray) -> "PoseErrors":
        fields = [f.name for f in dataclasses.fields(PoseErrors)]
        return PoseErrors(**{k: getattr(self, k)[mask] for k in fields})


def pose_errors(
    preds: Sequence[Optional[np.ndarray]] | np.ndarray,
    gts: Sequence[np.ndarray] | np.ndarray,
    eps: float = DEFAULT_EPS,
) -> PoseErrors:
    """Errors of ``N`` predicted poses against ground truth.

    Args:
        preds: ``[N, 4, 4]`` array, or a length-N sequence whose entries are ``[4, 4]`` or
            ``None`` (failed). Non-finite entries also mark a failure.
        gts: ``[N, 4, 4]`` ground truth ``T_{A0<-X}``.
        eps: RTA undefined threshold (metres).
    Returns:
        :class:`PoseErrors` with ``N`` entries.
    """
    gts = np.asarray(gts, dtype=np.float64)
    if gts.ndim != 3 or gts.shape[1:] != (4, 4):
        raise ValueError(f"gts must have shape [N,4,4], got {gts.shape}")
    n = gts.shape[0]
    if len(preds) != n:
        raise ValueError(f"preds has {len(preds)} entries but gts has {n}")
    pred_arr = np.tile(np.eye(4), (n, 1, 1))
    failed = np.zeros(n, dtype=bool)
    for k in range(n):
        p = preds[k]
        if p is None:
            failed[k] = True
            continue
        p = np.asarray(p, dtype=np.float64)
        if p.shape != (4, 4):
            raise ValueError(f"preds[{k}] must have shape [4,4], got {p.shape}")
        if not np.all(np.isfinite(p)):
            failed[k] = True
            continue
        pred_arr[k] = p
    rot = rotation_error_deg(pred_arr, gts)
    trans = translation_error_m(pred_arr, gts)
    rta, gt_undef, pred_undef = translation_angle_deg(pred_arr, gts, eps)
    # Failure scoring (module docstring): worst angles; identity translation -> error ||t||.
    rot[failed] = FAILED_ANGLE_DEG
    trans[failed] = np.linalg.norm(gts[failed, :3, 3], axis=-1)
    rta[failed] = FAILED_ANGLE_DEG
    pred_undef = pred_undef & ~failed
    gt_undef = gt_undef & ~failed
    return PoseErrors(rot, trans, rta, gt_undef, pred_undef, failed)


def _translation(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.shape[-2:] == (4, 4):
        return x[..., :3, 3]
    if x.shape[-1] == 3:
        return x
    raise ValueError(f"expected poses [...,4,4] or translations [...,3], got shape {x.shape}")
