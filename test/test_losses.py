"""G2G loss: zero at the truth, hand-computed chordal values, weights, clamp, B0 components."""

import math

import pytest
import torch

from g2g_model.training.losses import LOSS_PRESETS, LossConfig, g2g_loss, rotation_distance


def rz(deg):
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)


def poses(rots, trans):
    """rots [B,N,3,3], trans [B,N,3] -> [B,N,4,4]."""
    out = torch.zeros(rots.shape[:2] + (4, 4), dtype=torch.float64)
    out[..., :3, :3] = rots
    out[..., :3, 3] = trans
    out[..., 3, 3] = 1.0
    return out


def random_rotations(n, gen):
    q = torch.randn(n, 4, generator=gen, dtype=torch.float64)
    q = q / q.norm(dim=-1, keepdim=True)
    x, y, z, w = q.unbind(-1)
    return torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
        2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
        2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y),
    ], -1).reshape(n, 3, 3)


def test_prediction_equal_to_truth_gives_zero():
    gen = torch.Generator().manual_seed(0)
    b, na, nb = 2, 4, 3
    ra = random_rotations(b * (na - 1), gen).reshape(b, na - 1, 3, 3)
    rb = random_rotations(b * nb, gen).reshape(b, nb, 3, 3)
    ta = torch.randn(b, na - 1, 3, generator=gen, dtype=torch.float64)
    tb = torch.randn(b, nb, 3, generator=gen, dtype=torch.float64)
    gt_a = torch.cat([poses(torch.eye(3).expand(b, 1, 3, 3).double(), torch.zeros(b, 1, 3)),
                      poses(ra, ta)], dim=1)
    out = g2g_loss(ra, ta, rb, tb, gt_a, poses(rb, tb))
    for key, value in out.items():
        assert value.item() == pytest.approx(0.0, abs=1e-12), key


def test_chordal_known_values():
    eye = torch.eye(3, dtype=torch.float64)
    # 90 deg about z: R^T - I has entries {-1, 1, -1, -1} -> L1 mean 4/9, squared 4/9.
    assert rotation_distance(rz(90), eye).item() == pytest.approx(4 / 9)
    assert rotation_distance(rz(90), eye, "chordal_frobenius").item() == pytest.approx(4 / 9)
    # 180 deg: diag(-2, -2, 0) -> L1 4/9 (same as 90: the known non-monotonicity), Frob 8/9.
    assert rotation_distance(rz(180), eye).item() == pytest.approx(4 / 9)
    assert rotation_distance(rz(180), eye, "chordal_frobenius").item() == pytest.approx(8 / 9)
    # Small angle theta: L1 form = 4 sin(theta)/9 + 2 (1 - cos theta)/9.
    th = math.radians(10)
    expected = (2 * math.sin(th) + 2 * (1 - math.cos(th))) / 9
    assert rotation_distance(rz(10), eye).item() == pytest.approx(expected)
    with pytest.raises(ValueError, match="kind"):
        rotation_distance(eye, eye, "geodesic")


def test_weights_by_hand():
    b = 2
    ident = torch.eye(3, dtype=torch.float64).expand(b, 1, 3, 3)
    zeros = torch.zeros(b, 1, 3, dtype=torch.float64)
    # A1: rotation off by 90 deg (d_R = 4/9), translation exact.
    rot_a = rz(90).expand(b, 1, 3, 3)
    gt_a = poses(ident, zeros)
    # B0: rotation exact, translation off by (0.3, -0.6, 0.9) -> ||.||_1 = 1.8.
    # B1: exact.
    rot_b = torch.eye(3, dtype=torch.float64).expand(b, 2, 3, 3)
    trans_b = torch.zeros(b, 2, 3, dtype=torch.float64)
    trans_b[:, 0] = torch.tensor([0.3, -0.6, 0.9], dtype=torch.float64)
    gt_b = poses(rot_b, torch.zeros(b, 2, 3, dtype=torch.float64))
    out = g2g_loss(rot_a, zeros, rot_b, trans_b, gt_a, gt_b)
    loss_a = 5 * 4 / 9
    loss_b = (1 / 3 * 1.8 + 0.0) / 2
    assert out["loss_a"].item() == pytest.approx(loss_a)
    assert out["loss_b"].item() == pytest.approx(loss_b)
    assert out["loss"].item() == pytest.approx(0.5 * loss_a + 1.0 * loss_b)
    assert out["rot_a"].item() == pytest.approx(4 / 9)
    assert out["trans_b0"].item() == pytest.approx(0.6)  # mean |error| per axis
    assert out["trans_b"].item() == pytest.approx(0.3)
    assert out["rot_b0"].item() == pytest.approx(0.0)
    custom = LossConfig(rot_weight=1.0, trans_weight=1.0, weight_a=2.0, weight_b=3.0)
    out = g2g_loss(rot_a, zeros, rot_b, trans_b, gt_a, gt_b, custom)
    assert out["loss"].item() == pytest.approx(2.0 * 4 / 9 + 3.0 * 1.8 / 2)
    # gt_a given without A0 gives the same result.
    out2 = g2g_loss(rot_a, zeros, rot_b, trans_b, gt_a[:, 0:1], gt_b, custom)
    assert out2["loss"].item() == pytest.approx(out["loss"].item())


def test_clamp_caps_total_and_blocks_gradient():
    b = 1
    rot = torch.eye(3, dtype=torch.float64).expand(b, 1, 3, 3)
    gt = poses(rot, torch.zeros(b, 1, 3, dtype=torch.float64))
    far = torch.full((b, 1, 3), 20.0, dtype=torch.float64, requires_grad=True)
    out = g2g_loss(rot[:, :0], far[:, :0], rot, far, gt[:, :0], gt)
    assert out["loss_unclamped"].item() == pytest.approx(20.0)  # (1/3) * 60
    assert out["loss"].item() == pytest.approx(10.0)
    out["loss"].backward()
    assert torch.all(far.grad == 0)
    near = torch.full((b, 1, 3), 0.5, dtype=torch.float64, requires_grad=True)
    out = g2g_loss(rot[:, :0], near[:, :0], rot, near, gt[:, :0], gt)
    out["loss"].backward()
    assert torch.allclose(near.grad, torch.full_like(near, 1 / 3))
    unclamped = LossConfig(clamp_max=None)
    out = g2g_loss(rot[:, :0], far[:, :0], rot, far, gt[:, :0], gt, unclamped)
    assert out["loss"].item() == pytest.approx(20.0)


def test_presets_and_validation():
    assert LOSS_PRESETS["g2g"].weight_a == 0.5
    assert LOSS_PRESETS["g2g_frobenius"].rotation_distance == "chordal_frobenius"
    with pytest.raises(ValueError, match="rotation_distance"):
        LossConfig(rotation_distance="l2")
    with pytest.raises(ValueError, match="weight_b"):
        LossConfig(weight_b=-1.0)
    rot = torch.eye(3).expand(1, 2, 3, 3)
    with pytest.raises(ValueError, match="gt_b"):
        g2g_loss(rot[:, :0], torch.zeros(1, 0, 3), rot, torch.zeros(1, 2, 3),
                 torch.zeros(1, 1, 4, 4), torch.zeros(1, 3, 4, 4))


def test_length_term_weighs_the_length_alone():
    """``g2g_length``: standing still costs more than the right length reversed (the plain L1
    term says the opposite), the right length in any direction costs the same, and the term
    is 0 with ``length_weight`` 0."""
    rot = torch.eye(3, dtype=torch.float64).expand(1, 1, 3, 3)
    truth = torch.tensor([[[2.0, 0.0, 0.0]]], dtype=torch.float64)
    gt = poses(rot, truth)
    empty = gt[:, :0]

    def loss(pred, config):
        return g2g_loss(rot[:, :0], pred[:, :0], rot, pred, empty, gt, config)["loss"].item()

    plain, length = LOSS_PRESETS["g2g"], LOSS_PRESETS["g2g_length"]
    still, reversed_ = torch.zeros_like(truth), -truth
    assert loss(still, plain) < loss(reversed_, plain)
    assert loss(still, length) > loss(reversed_, length)
    assert loss(still, length) - loss(still, plain) == pytest.approx(
        math.log(2.05 / 0.05))
    assert loss(reversed_, length) == pytest.approx(loss(reversed_, plain))
    sideways = torch.tensor([[[0.0, 2.0, 0.0]]], dtype=torch.float64)
    assert loss(sideways, length) == pytest.approx(loss(sideways, plain))
    with pytest.raises(ValueError, match="length_weight"):
        LossConfig(length_weight=-1.0)
