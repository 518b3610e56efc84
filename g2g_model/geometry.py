"""SE(3) / SO(3) helpers shared by the model, data tools, metrics and the ROS nodes.

Conventions (ARCHITECTURE §1): poses are 4x4 homogeneous camera-to-X transforms, OpenCV camera
axes (x right, y down, z forward), metres. Quaternions are (x, y, z, w), scalar last, as in ROS
and MapAnything. Functions accept numpy arrays with any leading batch shape ``[..., 4, 4]``.
"""

from __future__ import annotations

import numpy as np


def make_pose(rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:
    """Stack ``R [...,3,3]`` and ``t [...,3]`` into ``T [...,4,4]``."""
    rotation = np.asarray(rotation, dtype=np.float64)
    translation = np.asarray(translation, dtype=np.float64)
    shape = np.broadcast_shapes(rotation.shape[:-2], translation.shape[:-1])
    pose = np.zeros(shape + (4, 4))
    pose[..., :3, :3] = rotation
    pose[..., :3, 3] = translation
    pose[..., 3, 3] = 1.0
    return pose


def invert_pose(pose: np.ndarray) -> np.ndarray:
    """Closed-form inverse of rigid transforms ``[...,4,4]``."""
    pose = np.asarray(pose, dtype=np.float64)
    rot_t = np.swapaxes(pose[..., :3, :3], -1, -2)
    return make_pose(rot_t, -np.einsum("...ij,...j->...i", rot_t, pose[..., :3, 3]))


def relative_pose(world_T_a: np.ndarray, world_T_b: np.ndarray) -> np.ndarray:
    """``T_{a<-b} = inv(world_T_a) @ world_T_b``."""
    return invert_pose(world_T_a) @ np.asarray(world_T_b, dtype=np.float64)


def reanchor(world_T_cams: np.ndarray) -> np.ndarray:
    """Express a group of poses ``[N,4,4]`` relative to its first frame (frame 0 = identity)."""
    world_T_cams = np.asarray(world_T_cams, dtype=np.float64)
    return invert_pose(world_T_cams[0])[None] @ world_T_cams


def rotation_angle_deg(rotation: np.ndarray) -> np.ndarray:
    """Geodesic angle of rotation matrices ``[...,3,3]`` in degrees (numerically safe)."""
    rotation = np.asarray(rotation, dtype=np.float64)
    cos = (np.trace(rotation, axis1=-2, axis2=-1) - 1.0) / 2.0
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def axis_angle_to_matrix(axis_angle: np.ndarray) -> np.ndarray:
    """Rodrigues: rotation vectors ``[...,3]`` (radians) to matrices ``[...,3,3]``."""
    v = np.asarray(axis_angle, dtype=np.float64)
    theta = np.linalg.norm(v, axis=-1, keepdims=True)
    safe = np.where(theta > 1e-12, theta, 1.0)
    k = v / safe
    kx, ky, kz = k[..., 0], k[..., 1], k[..., 2]
    zero = np.zeros_like(kx)
    skew = np.stack([zero, -kz, ky, kz, zero, -kx, -ky, kx, zero], axis=-1).reshape(v.shape + (3,))
    th = theta[..., None]
    eye = np.broadcast_to(np.eye(3), skew.shape)
    return eye + np.sin(th) * skew + (1.0 - np.cos(th)) * (skew @ skew)


def quat_xyzw_to_matrix(quat: np.ndarray) -> np.ndarray:
    """Unit quaternions ``[...,4]`` (x, y, z, w) to rotation matrices ``[...,3,3]``."""
    q = np.asarray(quat, dtype=np.float64)
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    if np.any(norm < 1e-12):
        raise ValueError("quaternion with zero norm")
    x, y, z, w = np.moveaxis(q / norm, -1, 0)
    return np.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
            2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
            2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y),
        ],
        axis=-1,
    ).reshape(q.shape[:-1] + (3, 3))


def matrix_to_quat_xyzw(rotation: np.ndarray) -> np.ndarray:
    """Rotation matrices ``[...,3,3]`` to unit quaternions ``[...,4]`` (x, y, z, w), w >= 0."""
    r = np.asarray(rotation, dtype=np.float64)
    m00, m11, m22 = r[..., 0, 0], r[..., 1, 1], r[..., 2, 2]
    # Four candidate magnitudes; pick the best-conditioned one per matrix (Shepperd's method).
    cands = np.stack(
        [1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22], -1
    )
    best = np.argmax(cands, axis=-1)
    s = np.sqrt(np.maximum(np.take_along_axis(cands, best[..., None], -1)[..., 0], 1e-12)) * 2
    q = np.empty(r.shape[:-2] + (4,))
    w_case = best == 0
    x_case = best == 1
    y_case = best == 2
    z_case = best == 3
    d21 = r[..., 2, 1] - r[..., 1, 2]
    d02 = r[..., 0, 2] - r[..., 2, 0]
    d10 = r[..., 1, 0] - r[..., 0, 1]
    s01 = r[..., 0, 1] + r[..., 1, 0]
    s02 = r[..., 0, 2] + r[..., 2, 0]
    s12 = r[..., 1, 2] + r[..., 2, 1]
    q[w_case] = np.stack([d21 / s, d02 / s, d10 / s, 0.25 * s], -1)[w_case]
    q[x_case] = np.stack([0.25 * s, s01 / s, s02 / s, d21 / s], -1)[x_case]
    q[y_case] = np.stack([s01 / s, 0.25 * s, s12 / s, d02 / s], -1)[y_case]
    q[z_case] = np.stack([s02 / s, s12 / s, 0.25 * s, d10 / s], -1)[z_case]
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[..., 3:4] < 0, -q, q)


def is_rotation(rotation: np.ndarray, atol: float = 1e-3) -> np.ndarray:
    """True where ``R^T R = I`` and ``det R = +1`` within ``atol``; shape ``[...]``."""
    r = np.asarray(rotation, dtype=np.float64)
    ortho = np.abs(np.swapaxes(r, -1, -2) @ r - np.eye(3)).max(axis=(-1, -2)) < atol
    return ortho & (np.abs(np.linalg.det(r) - 1.0) < atol)


def project_to_rotation(matrix: np.ndarray) -> np.ndarray:
    """Closest rotation (Frobenius norm) to ``[...,3,3]`` via SVD."""
    u, _, vt = np.linalg.svd(np.asarray(matrix, dtype=np.float64))
    d = np.sign(np.linalg.det(u @ vt))
    u[..., :, 2] *= d[..., None]
    return u @ vt


def project_to_rigid(poses: np.ndarray) -> np.ndarray:
    """``[..., 4, 4]`` float64 rigid transforms closest to ``poses``: rotation block projected
    onto SO(3) (:func:`project_to_rotation`), last row ``[0, 0, 0, 1]``.

    Model outputs computed in float32 are orthonormal only to ~1e-7, which the geodesic angle
    (arccos of the trace) amplifies at small angles; a consumer of a ``geometry_msgs/Pose`` sees
    the rotation anyway (a quaternion), so predictions are made proper once, where they leave
    the model.
    """
    out = np.array(poses, dtype=np.float64)
    out[..., :3, :3] = project_to_rotation(out[..., :3, :3])
    out[..., 3, :] = (0.0, 0.0, 0.0, 1.0)
    return out


def fuse_poses(poses) -> np.ndarray:
    """Mean of rigid transforms ``[N, 4, 4]``: chordal L2 mean of the rotations, mean of the
    translations."""
    poses = np.asarray(poses, dtype=np.float64)
    rot = project_to_rotation(poses[:, :3, :3].mean(axis=0))
    return make_pose(rot, poses[:, :3, 3].mean(axis=0))


def estimate_spread(pose, estimates) -> float:
    """The largest distance (metres) of ``[K, 4, 4]`` estimates' translations from ``pose``'s:
    how far the estimates of one transform T_{A0<-B0} put B0 from the answer, in A0's frame.

    Callers gate here, in the frame the estimates share, and carry only the answer into their
    own frames (map->odom, the rig's base motion): measured after carrying, a rotation
    disagreement would be multiplied by the distance from that frame's origin.
    """
    pose = np.asarray(pose, dtype=np.float64)
    estimates = np.asarray(estimates, dtype=np.float64)
    if pose.shape != (4, 4) or not np.all(np.isfinite(pose)):
        raise ValueError(f"expected a finite [4, 4] pose, got shape {pose.shape}")
    if estimates.ndim != 3 or estimates.shape[1:] != (4, 4) or len(estimates) == 0:
        raise ValueError(f"expected [K, 4, 4] estimates with K >= 1, got shape "
                         f"{estimates.shape}")
    if not np.all(np.isfinite(estimates)):
        raise ValueError("the estimates contain non-finite values")
    return float(np.linalg.norm(estimates[:, :3, 3] - pose[:3, 3], axis=1).max())


def fuse_directions(forward_b: np.ndarray, backward_a: np.ndarray, input_a: np.ndarray,
                    input_b: np.ndarray):
    """Fuse the two passes of
    :meth:`g2g_model.estimation.pipeline.G2GPipeline.predict_prepared` into one rigid group B.

    Args:
        forward_b: ``[N_B, 4, 4]`` T_{A0<-Bj} predicted with A as the anchor group.
        backward_a: ``[N_A, 4, 4]`` T_{B0<-Ai} predicted with the groups exchanged.
        input_a, input_b: the known intra-group poses T_{A0<-Ai}, T_{B0<-Bj}.

    Returns:
        ``(poses_b, estimates)``: T_{A0<-B0} (the mean of all estimates) composed with
        ``input_b``, and the ``[N_B + N_A, 4, 4]`` estimates of T_{A0<-B0}.
    """
    estimates = np.concatenate([b0_estimates(forward_b, input_b),
                                invert_pose(b0_estimates(backward_a, input_a))])
    a0_T_b0 = fuse_poses(estimates)
    return np.stack([a0_T_b0 @ q for q in input_b]), estimates


def b0_estimates(poses: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    """``[N, 4, 4]`` estimates of the other group's T_{X0<-Y0}: each predicted T_{X0<-Yj}
    carried through the known T_{Y0<-Yj}."""
    return np.stack([p @ invert_pose(q) for p, q in zip(poses, inputs)])
