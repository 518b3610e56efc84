"""Epipolar residuals of a rig motion between two keyframes, and its covariance from them."""

from __future__ import annotations

import numpy as np

from g2g_model.geometry import invert_pose
from g2g_model.localization.epipolar_guidance import meet_in_front

# Per-step covariance of a G2G-only motion (x y z in m^2, roll pitch yaw in rad^2).
G2G_STEP_COVARIANCE = np.diag([1e-3] * 3 + [3e-4] * 3)


class SampsonTerms:
    """The Sampson errors (pixels) of rig matches as a function of the body motion:
    ``terms(delta)`` for ``delta`` = base_prev_T_base_now, concatenated over the camera pairs
    (the matches selected by ``masks``; None: all). What does not depend on the motion (the
    homogeneous keypoints, the inverse intrinsics, the cameras' extrinsics) is prepared once,
    so the 13 evaluations of :func:`motion_covariance` cost little more than one."""

    def __init__(self, matches, masks, ext_a, ext_b, cams_a, cams_b):
        self._pairs = []
        for k, m in enumerate(matches):
            mask = np.ones(len(m.x1), bool) if masks is None else np.asarray(masks[k], bool)
            if not mask.any():
                continue
            x1 = np.asarray(m.x1, float)[mask]
            x2 = np.asarray(m.x2, float)[mask]
            self._pairs.append((
                np.vstack([ext_a[m.cam_id1].Rt, [0, 0, 0, 1]]),
                invert_pose(np.vstack([ext_b[m.cam_id2].Rt, [0, 0, 0, 1]])),
                np.linalg.inv(camera_matrix(cams_a[m.cam_id1])).T,
                np.linalg.inv(camera_matrix(cams_b[m.cam_id2])),
                np.c_[x1, np.ones(len(x1))], np.c_[x2, np.ones(len(x2))]))

    def __call__(self, delta: np.ndarray) -> np.ndarray:
        out = []
        for a_T_body, body_T_b, ka_inv_t, kb_inv, x1, x2 in self._pairs:
            # camera_a <- camera_b through the bodies: E relates their normalised rays.
            a_T_b = a_T_body @ delta @ body_T_b
            t = a_T_b[:3, 3]
            E = np.array([[0, -t[2], t[1]], [t[2], 0, -t[0]], [-t[1], t[0], 0]]) @ a_T_b[:3, :3]
            F = ka_inv_t @ E @ kb_inv
            Fx2, Ftx1 = x2 @ F.T, x1 @ F
            num = np.sum(x1 * Fx2, 1)
            den = np.sqrt(Fx2[:, 0] ** 2 + Fx2[:, 1] ** 2 + Ftx1[:, 0] ** 2 + Ftx1[:, 1] ** 2)
            out.append(num / np.maximum(den, 1e-12))
        return np.concatenate(out) if out else np.zeros(0)


def sampson_errors(delta: np.ndarray, matches, masks, ext_a, ext_b, cams_a, cams_b
                   ) -> np.ndarray:
    """Sampson errors (pixels, signed) of the matches selected by ``masks`` (None: all) under
    the body motion ``delta`` (base_prev_T_base_now), concatenated over the camera pairs."""
    return SampsonTerms(matches, masks, ext_a, ext_b, cams_a, cams_b)(delta)


def explained_matches(delta: np.ndarray, matches, ext_a, ext_b, cams_a, cams_b,
                      threshold_px: float):
    """Per camera pair, the matches whose Sampson error under ``delta`` (base_prev_T_base_now)
    is below ``threshold_px``: ``[(cam_id1, cam_id2, x1 [M, 2], x2 [M, 2]), ...]``."""
    out = []
    for m in matches:
        keep = np.abs(SampsonTerms([m], None, ext_a, ext_b, cams_a, cams_b)(delta)) < threshold_px
        if keep.any():
            out.append((m.cam_id1, m.cam_id2, np.asarray(m.x1, float)[keep],
                        np.asarray(m.x2, float)[keep]))
    return out


def in_front_fraction(delta: np.ndarray, matches, masks, ext_a, ext_b, cams_a, cams_b) -> float:
    """The share of the matches selected by ``masks`` (None: all) whose two rays, under the body
    motion ``delta`` (base_prev_T_base_now), meet in front of both cameras (the closest points
    of the rays; 1.0 without matches). The epipolar constraint is blind to the sign of each
    camera pair's translation, so a rig moving straight also fits a motion that turns the body
    by a fraction of a degree and moves it a few centimetres: the lever arms of the side
    cameras then move them backwards and forwards along the true direction of travel, and every
    match triangulates behind its cameras (a simulated car rig without overlapping cameras,
    2026-11-30: 4 of 99 accepted relative-pose steps and 3 of the 50 whose length was G2G's,
    all with no inlier in front, against 99-100 % for every correct step)."""
    front, total = 0, 0
    for k, m in enumerate(matches):
        mask = np.ones(len(m.x1), bool) if masks is None else np.asarray(masks[k], bool)
        if not mask.any():
            continue
        a_T_b = (np.vstack([ext_a[m.cam_id1].Rt, [0, 0, 0, 1]]) @ np.asarray(delta, float)
                 @ invert_pose(np.vstack([ext_b[m.cam_id2].Rt, [0, 0, 0, 1]])))
        u = np.c_[np.asarray(m.x1, float)[mask], np.ones(mask.sum())] \
            @ np.linalg.inv(camera_matrix(cams_a[m.cam_id1])).T
        v = np.c_[np.asarray(m.x2, float)[mask], np.ones(mask.sum())] \
            @ np.linalg.inv(camera_matrix(cams_b[m.cam_id2])).T @ a_T_b[:3, :3].T
        # In camera a's frame; camera b's centre is a_T_b's translation.
        front += int(np.sum(meet_in_front(u / np.linalg.norm(u, axis=1, keepdims=True),
                                          v / np.linalg.norm(v, axis=1, keepdims=True),
                                          a_T_b[:3, 3])))
        total += int(mask.sum())
    return front / total if total else 1.0


def motion_covariance(delta: np.ndarray, matches, masks, ext_a, ext_b, cams_a, cams_b,
                      min_sigma_px: float = 0.5) -> np.ndarray:
    """``[6, 6]`` covariance of ``delta`` from the Sampson errors (pixels) of the inlier
    matches: ``sigma^2 (J^T J)^-1``, J by central differences of a perturbation of delta's
    translation and rotation (about the previous base frame's axes)."""
    terms = SampsonTerms(matches, masks, ext_a, ext_b, cams_a, cams_b)

    def sampson(d6: np.ndarray) -> np.ndarray:
        return terms(perturbed(delta, d6))

    r0 = sampson(np.zeros(6))
    eps = np.array([1e-4] * 3 + [1e-5] * 3)
    jac = np.stack([(sampson(np.eye(6)[k] * eps[k]) - sampson(-np.eye(6)[k] * eps[k]))
                    / (2 * eps[k]) for k in range(6)], axis=1)
    sigma2 = max(float(r0 @ r0) / max(len(r0) - 6, 1), min_sigma_px ** 2)
    try:
        cov = sigma2 * np.linalg.inv(jac.T @ jac)
    except np.linalg.LinAlgError:
        return G2G_STEP_COVARIANCE.copy()
    if not np.all(np.isfinite(cov)):
        return G2G_STEP_COVARIANCE.copy()
    return 0.5 * (cov + cov.T)


def perturbed(delta: np.ndarray, d6: np.ndarray) -> np.ndarray:
    """``delta`` moved by ``d6``: a translation (x y z) and a rotation vector about the previous
    base frame's axes (the covariances' parametrisation)."""
    import cv2

    out = np.array(delta, float)
    out[:3, :3] = cv2.Rodrigues(np.asarray(d6[3:], float))[0] @ out[:3, :3]
    out[:3, 3] += d6[:3]
    return out


def camera_matrix(camera: dict) -> np.ndarray:
    """K of a PoseLib pinhole camera dict."""
    fx, fy, cx, cy = camera["params"]
    return np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1.0]])
