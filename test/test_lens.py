"""Lens models (g2g_model.cameras.lens): rectification maps of real calibrations, refusal of
what cannot be rectified, and the verified pose of a distorted camera against its pinhole twin.

The pose test renders one simulated place (real renderer, real SIFT, real PoseLib): a map window
of pinhole images, and query images as real lenses see them (test/lens_fixtures.py). The
verified pose from the rectified query must match the pose from a pinhole twin rendered
directly with the rectified K; the same distorted images used as pinhole images (what the nodes
did before lens models) must give a clearly biased pose.
"""

from __future__ import annotations

import pathlib
import sys

import cv2
import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from lens_fixtures import (OAKD_RATIONAL, T265_FISHEYE, TUM_FR1, covering_pinhole,  # noqa: E402
                           distort, lens)

from g2g_model.cameras.lens import (  # noqa: E402
    DEFAULT_FISHEYE_HFOV_DEG, Lens, Rectifier, UnsupportedLens,
)
from g2g_model.geometry import (axis_angle_to_matrix, invert_pose, make_pose,  # noqa: E402
                                relative_pose, rotation_angle_deg)

CALIBRATIONS = {"plumb_bob": TUM_FR1, "rational_polynomial": OAKD_RATIONAL,
                "equidistant": T265_FISHEYE}


def _points_in_view(rect: Rectifier, n: int = 400) -> np.ndarray:
    """3D points (camera frame) seen at whole pixels of the rectified pinhole (away from its
    border), and those pixels."""
    rng = np.random.default_rng(0)
    w, h = rect.lens.size
    uv = np.stack([rng.integers(w // 20, w - w // 20, n), rng.integers(h // 20, h - h // 20, n)],
                  1).astype(float)
    rays = np.linalg.solve(rect.K, np.vstack([uv.T, np.ones(n)])).T
    return rays * rng.uniform(1.0, 10.0, (n, 1)), uv


@pytest.mark.parametrize("model", sorted(CALIBRATIONS))
def test_rectified_pixels_are_pinhole_projections_of_the_lens(model):
    """Each rectified pixel samples the distorted pixel where the lens images the same ray
    (OpenCV's forward projection with D), to a small fraction of a pixel."""
    rect = Rectifier(lens(CALIBRATIONS[model]))
    points, uv = _points_in_view(rect)
    zero = np.zeros(3)
    if model == "equidistant":
        distorted = cv2.fisheye.projectPoints(points[:, None], zero, zero, rect.lens.K,
                                              rect.lens.D)[0]
    else:
        distorted = cv2.projectPoints(points, zero, zero, rect.lens.K, rect.lens.D)[0]
    distorted = distorted.reshape(-1, 2)
    # Sample the maps at the rectified pixels: an image whose pixels hold their coordinates.
    coords = np.stack(np.meshgrid(np.arange(rect.lens.width), np.arange(rect.lens.height)),
                      -1).astype(np.float32)
    sampled = rect(coords)
    u, v = uv.astype(int).T
    ok = np.all(sampled[v, u] > 0, axis=1)  # pixels the lens sees
    assert ok.mean() > 0.9
    err = np.linalg.norm(sampled[v, u] - distorted, axis=1)[ok]
    assert np.percentile(err, 95) < 0.05, np.percentile(err, [50, 95, 100])
    assert not rect.lens.is_pinhole and rect.maps is not None


def test_zero_distortion_is_a_pinhole_without_a_remap():
    image = np.zeros((480, 640, 3), np.uint8)
    for model, d in (("plumb_bob", [0.0] * 5), ("plumb_bob", []), ("", []),
                     ("rational_polynomial", [0.0] * 8)):
        rect = Rectifier(Lens(model, TUM_FR1["K"], d, 640, 480))
        assert rect.lens.is_pinhole and rect.maps is None
        assert rect(image) is image
        np.testing.assert_array_equal(rect.K, np.array(TUM_FR1["K"], float))
    # An equidistant lens with zero coefficients is r = f theta, not a pinhole: rectified.
    fisheye = Rectifier(Lens("equidistant", T265_FISHEYE["K"], [0.0] * 4, 848, 800))
    assert not fisheye.lens.is_pinhole and fisheye.maps is not None


def test_fisheye_keeps_the_chosen_field_of_view():
    for hfov in (DEFAULT_FISHEYE_HFOV_DEG, 130.0):
        K = Rectifier(lens(T265_FISHEYE), hfov).K
        assert np.degrees(2 * np.arctan(424 / K[0, 0])) == pytest.approx(hfov)
        assert K[0, 0] == K[1, 1] and (K[0, 2], K[1, 2]) == (423.5, 399.5)
    with pytest.raises(ValueError, match="fisheye_hfov_deg"):
        Rectifier(lens(T265_FISHEYE), 179.0)


@pytest.mark.parametrize("model, d, match", [
    ("fov", [0.9], "'fov' is not supported"),
    ("kannala_brandt", [0.1] * 4, "'kannala_brandt' is not supported"),
    ("plumb_bob", [0.1, 0.0, 0.0, 0.0], "'plumb_bob' takes 5 coefficients, got 4"),
    ("equidistant", [], "'equidistant' takes 4 coefficients, got 0"),
    ("rational_polynomial", [0.1] * 5, "takes 8 coefficients, got 5"),
    ("", [0.1, 0, 0, 0, 0], "without a distortion model"),
    ("plumb_bob", [np.nan, 0, 0, 0, 0], "finite"),
])
def test_what_cannot_be_rectified_is_refused_with_its_name(model, d, match):
    with pytest.raises(ValueError, match=match) as info:
        Lens(model, TUM_FR1["K"], d, 640, 480, what="camera_info of cam3")
    assert "camera_info of cam3" in str(info.value)
    if "supported" in match:
        assert isinstance(info.value, UnsupportedLens)


# ------------------------------------------------------------------ the verified pose
SEED = 20003


@pytest.fixture(scope="module")
def place():
    """A map window of pinhole images and the poses of a query from another traversal
    (two rig cameras at five instants), all in one simulated scene."""
    from g2g_model.data.rig import pinhole_K
    from g2g_model.data.sim.renderer import Renderer
    from g2g_model.data.sim.rigs import make_rig
    from g2g_model.data.sim.scene import make_scene
    from g2g_model.data.sim.trajectory import make_traversals
    from g2g_model.estimation.groups import Group

    scene = make_scene(SEED, 0, "small")
    traversals = make_traversals(scene, 2, 24)
    T_body_cam = make_rig(SEED, "ring5").T_body_cams()[:2]

    def poses(traversal, frames):
        return np.stack([traversal.world_T_body[i] @ T for T in T_body_cam for i in frames])

    query = poses(traversals[1], range(4, 14, 2))
    dist = np.linalg.norm(traversals[0].world_T_body[:, :3, 3] - query[0, :3, 3], axis=1)
    m0 = int(np.clip(np.argmin(dist) - 4, 0, 24 - 9))
    map_poses = poses(traversals[0], range(m0, m0 + 9, 2))
    renderer = Renderer(scene)
    K_map = pinhole_K(320, 320, 80.0)
    window = Group(images=list(renderer.render(map_poses, K_map, 320, 320)[0]),
                   intrinsics=np.stack([K_map] * len(map_poses)), cam_to_world=map_poses)
    return renderer, window, query


def _verified(place, images, K) -> np.ndarray:
    """The verified map pose of the query's first camera, seeded 0.3 m / 5 deg off."""
    from g2g_model.estimation.groups import Group
    from g2g_model.localization.verification import PATH_G2G, StructureVerifier

    _, window, truth = place
    odom_T_map = make_pose(axis_angle_to_matrix(np.array([0.0, 0.0, 0.7])), [3.0, -2.0, 0.1])
    query = Group(images=images, intrinsics=np.stack([K] * len(images)),
                  cam_to_world=odom_T_map @ truth)
    delta = make_pose(axis_angle_to_matrix(np.radians(5.0) * np.array([0.0, 1.0, 0.0])),
                      [0.3, 0.0, 0.0])
    seed = np.stack([truth[0] @ delta @ invert_pose(truth[0]) @ T for T in truth])
    result = StructureVerifier()(window, query, seed)
    return result.map_T_b0, result.path != PATH_G2G, result.reason


def _apart(a: np.ndarray, b: np.ndarray):
    rel = relative_pose(a, b)
    return float(np.linalg.norm(rel[:3, 3])), float(rotation_angle_deg(rel[:3, :3]))


@pytest.mark.parametrize("model, binning, bias", [("plumb_bob", 2, (0.01, 0.3)),
                                                  ("equidistant", 2, (0.05, 1.0))])
def test_distorted_camera_verifies_like_its_pinhole_twin(place, model, binning, bias):
    """Real lenses (binned 2x2 to keep the test fast; D is unchanged by binning): the pose from
    the rectified images is the twin's within 1 cm / 0.1 deg; the raw images taken as a pinhole
    give a pose off by more than ``bias`` (metres, degrees) from the truth."""
    renderer, _, truth = place
    the_lens = lens(CALIBRATIONS[model], binning)
    rect = Rectifier(the_lens)
    width, height = the_lens.size
    twin = list(renderer.render(truth, rect.K, width, height)[0])
    K_src, w_src, h_src = covering_pinhole(the_lens)
    distorted = distort(the_lens, list(renderer.render(truth, K_src, w_src, h_src)[0]), K_src)

    twin_pose, twin_ok, why = _verified(place, twin, rect.K)
    assert twin_ok, why
    assert _apart(truth[0], twin_pose)[0] < 0.01, _apart(truth[0], twin_pose)
    rect_pose, rect_ok, why = _verified(place, [rect(im) for im in distorted], rect.K)
    assert rect_ok, why
    metres, degrees = _apart(twin_pose, rect_pose)
    assert metres < 0.01 and degrees < 0.1, (metres, degrees)
    raw_pose, _, why = _verified(place, distorted, the_lens.K)
    metres, degrees = _apart(truth[0], raw_pose)
    assert metres > bias[0] and degrees > bias[1], (metres, degrees, why)
