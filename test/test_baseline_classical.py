"""Classical SIFT baseline on a synthetic textured room rendered with known poses."""

import math

import cv2
import numpy as np
import pytest

from g2g_model.baseline.classical import (
    CLASSICAL_PRESETS, ClassicalBaseline, ClassicalConfig, ImageGroup,
)
from g2g_model.baseline.consensus import rotation_l1_median
from g2g_model.geometry import axis_angle_to_matrix, invert_pose, make_pose
from g2g_model.metrics import rotation_error_deg, translation_error_m

H, W = 240, 320
PX_PER_M = 80.0


def texture(height_m, width_m, rng):
    """Blob-and-shape texture rich in SIFT features, uint8 [h, w, 3]."""
    h, w = int(height_m * PX_PER_M), int(width_m * PX_PER_M)
    img = np.zeros((h, w, 3), np.float32)
    for cells in (6, 20, 60):  # multi-scale smooth noise
        small = rng.uniform(0, 255, (max(2, h * cells // w), cells, 3)).astype(np.float32)
        img += cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC) / 3.0
    img = np.clip(img, 0, 255).astype(np.uint8)
    for _ in range(int(height_m * width_m * 12)):
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        cx, cy = int(rng.integers(0, w)), int(rng.integers(0, h))
        size = int(rng.integers(4, 20))
        if rng.random() < 0.5:
            cv2.circle(img, (cx, cy), size, colour, -1)
        else:
            cv2.rectangle(img, (cx, cy), (cx + size, cy + int(rng.integers(4, 20))), colour, -1)
    return img


def room(rng):
    """Textured planes (origin, u axis, v axis, extent_u, extent_v, texture) of a box room.

    World axes follow OpenCV (x right, y down, z forward); the room spans x in [-5, 5],
    y in [-2, 1.5], z in [-3, 9].
    """
    planes = []

    def add(origin, u, v, eu, ev):
        planes.append((np.array(origin, float), np.array(u, float), np.array(v, float), eu, ev,
                       texture(ev, eu, rng)))

    add((-5, -2, 9), (1, 0, 0), (0, 1, 0), 10, 3.5)    # front wall z = 9
    add((-5, -2, -3), (0, 0, 1), (0, 1, 0), 12, 3.5)   # left wall x = -5
    add((5, -2, 9), (0, 0, -1), (0, 1, 0), 12, 3.5)    # right wall x = 5
    add((-5, 1.5, -3), (1, 0, 0), (0, 0, 1), 10, 12)   # floor y = 1.5
    # Free-standing panels at several depths and orientations: a scene of only a few large
    # planes is close to the planar degeneracy of the essential matrix.
    c, s = math.cos(math.radians(35)), math.sin(math.radians(35))
    add((-3.0, -1.2, 4.0), (1, 0, 0), (0, 1, 0), 1.4, 2.2)
    add((0.3, -1.6, 6.0), (c, 0, -s), (0, 1, 0), 1.6, 2.0)
    add((-0.8, 0.2, 3.2), (1, 0, 0), (0, 1, 0), 1.0, 1.3)
    add((3.2, -1.0, 3.0), (0, 0, 1), (0, 1, 0), 2.0, 2.5)
    add((-4.0, -0.5, 6.5), (c, 0, s), (0, 1, 0), 1.8, 1.5)
    return planes


def render(planes, k_mat, world_t_cam):
    """Ray-cast the planes: nearest hit per pixel, bilinear texture lookup."""
    u, v = np.meshgrid(np.arange(W, dtype=np.float64), np.arange(H, dtype=np.float64))
    pix = np.stack([u, v, np.ones_like(u)], -1) @ np.linalg.inv(k_mat).T
    dirs = pix @ world_t_cam[:3, :3].T
    centre = world_t_cam[:3, 3]
    depth = np.full((H, W), np.inf)
    out = np.zeros((H, W, 3), np.uint8)
    for origin, pu, pv, eu, ev, tex in planes:
        normal = np.cross(pu, pv)
        denom = dirs @ normal
        with np.errstate(divide="ignore", invalid="ignore"):
            s = ((origin - centre) @ normal) / denom
        hit = centre + s[..., None] * dirs
        a = (hit - origin) @ pu
        b = (hit - origin) @ pv
        ok = (s > 0) & (a >= 0) & (a <= eu) & (b >= 0) & (b <= ev) & (s < depth)
        sampled = cv2.remap(tex, (a * PX_PER_M).astype(np.float32),
                            (b * PX_PER_M).astype(np.float32), cv2.INTER_LINEAR)
        out[ok] = sampled[ok]
        depth[ok] = s[ok]
    return out


def cam_pose(position, yaw_deg, pitch_deg=0.0):
    rot = axis_angle_to_matrix(np.array([0.0, math.radians(yaw_deg), 0.0])) @ \
        axis_angle_to_matrix(np.array([math.radians(pitch_deg), 0.0, 0.0]))
    return make_pose(rot, np.array(position, float))


def intrinsics(f):
    return np.array([[f, 0, W / 2 - 0.5], [0, f, H / 2 - 0.5], [0, 0, 1.0]])


@pytest.fixture(scope="module")
def scene():
    rng = np.random.default_rng(0)
    planes = room(rng)
    # Two traversals of the same room, B0 about 2.6 m from A0, different yaw and focal lengths.
    poses_a = np.stack([cam_pose((-1.0 + 0.5 * i, 0.0, 0.2 * i), 5.0 * i - 5) for i in range(4)])
    poses_b = np.stack([cam_pose((1.2 + 0.4 * j, -0.2, 1.8 + 0.3 * j), -12.0 + 6.0 * j, 3.0)
                        for j in range(4)])
    k_a = intrinsics(260.0)
    k_b = np.stack([intrinsics(230.0 + 10 * j) for j in range(4)])
    images_a = [render(planes, k_a, p) for p in poses_a]
    images_b = [render(planes, k_b[j], p) for j, p in enumerate(poses_b)]
    return ImageGroup(images_a, k_a, poses_a), ImageGroup(images_b, k_b, poses_b)


def test_recovers_inter_group_pose(scene):
    group_a, group_b = scene
    result = ClassicalBaseline("fast").predict(group_a, group_b)
    assert result.ok, (result.rotation_reason, result.translation_reason)
    gt = invert_pose(group_a.poses[0])[None] @ group_b.poses  # T_{A0<-Bj}
    rot_err = rotation_error_deg(result.poses_b, gt)
    trans_err = translation_error_m(result.poses_b, gt)
    baseline_m = np.linalg.norm(gt[0, :3, 3])
    assert baseline_m > 2.5
    assert rot_err.max() < 2.0, rot_err
    assert trans_err.max() < 0.3, trans_err
    assert len(result.pairs) == 16
    assert sum(p.used_for_rotation for p in result.pairs) >= 12
    assert result.n_ray_inliers >= 2 and result.n_rays >= result.n_ray_inliers
    assert np.allclose(result.poses_a, invert_pose(group_a.poses[0])[None] @ group_a.poses)
    assert set(result.timing_s) == {"features", "pairs", "aggregation", "total"}
    assert result.timing_s["total"] > 0


def test_single_ray_translation_fails_not_zero(scene):
    group_a, group_b = scene
    # One frame per group: one ray, so the metric position of B0 is not observable.
    one_a = ImageGroup(group_a.images[2:3], group_a.intrinsics[2:3], group_a.poses[2:3])
    one_b = ImageGroup(group_b.images[1:2], group_b.intrinsics[1:2], group_b.poses[1:2])
    result = ClassicalBaseline("fast").predict(one_a, one_b)
    assert result.rotation_ok and not result.translation_ok
    assert "fewer than 2 usable rays" in result.translation_reason
    assert np.all(np.isnan(result.poses_b[:, :3, 3]))
    gt = invert_pose(group_a.poses[2]) @ group_b.poses[1]
    assert rotation_error_deg(result.poses_b[0], gt) < 2.0


def test_parallel_rays_are_degenerate(scene):
    # Group B rotates in place (one shared centre) and A has one frame: all rays point at the
    # same centre from the same origin, so the distance along them is unknown.
    group_a, _ = scene
    planes = room(np.random.default_rng(0))
    poses_b = np.stack([cam_pose((1.5, -0.2, 2.0), yaw) for yaw in (-10, 0, 10)])
    k_b = intrinsics(260.0)
    group_b = ImageGroup([render(planes, k_b, p) for p in poses_b], k_b, poses_b)
    one_a = ImageGroup(group_a.images[1:2], group_a.intrinsics[1:2], group_a.poses[1:2])
    result = ClassicalBaseline("fast").predict(one_a, group_b)
    assert result.rotation_ok and not result.translation_ok
    assert result.n_rays == 3
    assert "degenerate ray geometry" in result.translation_reason
    assert all(p.reason and not p.used_for_translation for p in result.pairs)
    assert np.all(np.isnan(result.poses_b[:, :3, 3]))


def test_unrelated_frame_is_reported_not_fatal(scene):
    group_a, group_b = scene
    other_room = room(np.random.default_rng(5))
    images_b = list(group_b.images)
    images_b[3] = render(other_room, group_b.intrinsics[3], group_b.poses[3])
    result = ClassicalBaseline("fast").predict(
        group_a, ImageGroup(images_b, group_b.intrinsics, group_b.poses))
    assert result.ok
    bad = [p for p in result.pairs if p.index_b == 3]
    assert all(not p.used_for_translation and p.reason for p in bad)
    assert {(p.index_a, p.index_b) for p in result.failed_pairs} >= {
        (p.index_a, 3) for p in bad if p.failed}
    gt = invert_pose(group_a.poses[0])[None] @ group_b.poses
    assert rotation_error_deg(result.poses_b, gt).max() < 2.0
    assert translation_error_m(result.poses_b, gt).max() < 0.3


def test_blank_images_fail_every_pair_with_reasons():
    blank = [np.zeros((H, W, 3), np.uint8) for _ in range(3)]
    poses = np.stack([cam_pose((0.3 * i, 0, 0), 0) for i in range(3)])
    result = ClassicalBaseline().predict((blank, intrinsics(250.0), poses),
                                         (blank[:2], intrinsics(250.0), poses[:2]))
    assert len(result.pairs) == 6 and len(result.failed_pairs) == 6
    assert all("too few keypoints" in p.reason for p in result.pairs)
    assert not result.rotation_ok and not result.translation_ok
    assert result.rotation_reason and result.translation_reason
    assert np.all(np.isnan(result.poses_b[:, :3, :]))


def test_input_validation():
    img = [np.zeros((H, W, 3), np.uint8)]
    with pytest.raises(ValueError, match="intrinsics"):
        ImageGroup(img, np.eye(2), np.eye(4)[None])
    with pytest.raises(ValueError, match="poses"):
        ImageGroup(img, intrinsics(200), np.eye(4))
    with pytest.raises(ValueError, match="uint8"):
        ImageGroup([np.zeros((H, W, 3), np.float32)], intrinsics(200), np.eye(4)[None])
    with pytest.raises(ValueError, match="unknown classical preset"):
        ClassicalBaseline("nope")
    with pytest.raises(ValueError, match="min_rays"):
        ClassicalConfig(min_rays=1)
    assert "default" in CLASSICAL_PRESETS


def test_rotation_l1_median_rejects_outlier():
    rng = np.random.default_rng(1)
    truth = axis_angle_to_matrix(np.array([0.2, -0.4, 0.1]))
    noisy = [truth @ axis_angle_to_matrix(rng.normal(scale=0.005, size=3)) for _ in range(6)]
    outliers = [axis_angle_to_matrix(np.array([2.0, 0.5, 0.0])),
                axis_angle_to_matrix(np.array([0.0, 2.5, 1.0]))]
    est = rotation_l1_median(np.stack(noisy + outliers))
    assert rotation_error_deg(est, truth) < 0.5
