"""Tests of the compact backbone, its geometric inputs and its first-stage pretraining heads."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from g2g_model import geometry
from g2g_model.backbones import backbone_class, registered_backbones
from g2g_model.backbones.compact import CompactBackbone
from g2g_model.backbones.compact_checkpoint import load_compact_checkpoint, save_compact_checkpoint
from g2g_model.backbones.compact_config import COMPACT_PRESETS, CompactConfig, compact_config
from g2g_model.backbones.compact_geometry import (
    matrix_to_quat_xyzw,
    patch_ray_samples,
    pose_vectors,
)
from g2g_model.training.augment import ExtrinsicNoiseConfig, perturb_poses
from g2g_model.training.compact_pretrain import (
    CompactPretrainHeads,
    PretrainConfig,
    pretrain_step,
    sample_pose_known,
)
from g2g_model.model.rotation import rotation_6d_to_matrix
from g2g_model.backbones.compact_stem import PatchStem

SIZE = 64  # compact_xs image size


def random_group(batch, frames, seed=0, size=SIZE):
    """Images in [0,1], K for a ~60 deg FOV camera, anchor-relative rigid poses (frame 0 = I)."""
    rng = np.random.default_rng(seed)
    images = torch.from_numpy(rng.random((batch, frames, 3, size, size))).float()
    k = np.array([[0.9 * size, 0, size / 2 - 0.5], [0, 0.9 * size, size / 2 - 0.5], [0, 0, 1]])
    intrinsics = torch.from_numpy(np.broadcast_to(k, (batch, frames, 3, 3)).copy()).float()
    rot = geometry.axis_angle_to_matrix(rng.normal(scale=0.3, size=(batch, frames, 3)))
    world = geometry.make_pose(rot, rng.normal(scale=1.0, size=(batch, frames, 3)))
    poses = np.stack([geometry.reanchor(w) for w in world])
    return images, intrinsics, torch.from_numpy(poses).float()


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return CompactBackbone("compact_xs").eval()


def test_registry_returns_class():
    assert "compact" in registered_backbones()
    assert backbone_class("compact") is CompactBackbone
    built = backbone_class("compact")("compact_xs")
    assert built.name == "compact" and built.feature_dim == COMPACT_PRESETS["compact_xs"].dim


@pytest.mark.parametrize("frames", range(1, 9))
def test_shapes_for_1_to_8_frames(model, frames):
    images, k, poses = random_group(2, frames, seed=frames)
    with torch.no_grad():
        out = model(images, k, poses)
    patches = model.num_patches(SIZE, SIZE)
    assert patches == (SIZE // 16) ** 2
    assert out.shape == (2, frames, patches, model.feature_dim)
    assert torch.isfinite(out).all()


def test_other_resolution_interpolates_positions(model):
    images, k, poses = random_group(1, 3)
    images = torch.nn.functional.interpolate(images[0], size=(96, 64)).unsqueeze(0)
    with torch.no_grad():
        out = model(images, k, poses)
    assert out.shape == (1, 3, 6 * 4, model.feature_dim)


def test_frame0_must_be_identity(model):
    images, k, poses = random_group(1, 3)
    world = poses.clone()
    world[0, 0, :3, 3] = torch.tensor([1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="identity"):
        model(images, k, world)


def test_rejects_bad_inputs(model):
    images, k, poses = random_group(1, 3)
    scaled = poses.clone()
    scaled[0, 1, :3, :3] *= 1.1
    with pytest.raises(ValueError, match="rigid"):
        model(images, k, scaled)
    with pytest.raises(ValueError, match="intrinsics"):
        model(images, k[:, :2], poses)
    with pytest.raises(ValueError, match="cam_to_anchor"):
        model(images, k, poses[..., :3, :])
    with pytest.raises(ValueError, match="images"):
        model(images[0], k, poses)
    with pytest.raises(ValueError, match="divisible"):
        model(images[..., :60, :], k, poses)
    bad_k = k.clone()
    bad_k[0, 2, 0, 0] = 0.0
    with pytest.raises(ValueError, match="fx"):
        model(images, bad_k, poses)
    with pytest.raises(ValueError, match="pose_known"):
        model(images, k, poses, pose_known=torch.tensor([[False, True, True]]))


def test_pose_and_intrinsics_condition_the_features(model):
    images, k, poses = random_group(1, 4, seed=3)
    moved = poses.clone()
    moved[0, 2, :3, 3] += torch.tensor([0.5, -0.2, 0.3])
    turned = poses.clone()
    turned[0, 2, :3, :3] = torch.from_numpy(
        geometry.axis_angle_to_matrix(np.array([0.0, 0.4, 0.0]))).float() @ poses[0, 2, :3, :3]
    zoomed = k.clone()
    zoomed[0, 2, 0, 0] *= 1.5
    with torch.no_grad():
        base = model(images, k, poses)
        for variant in (model(images, k, moved), model(images, k, turned),
                        model(images, zoomed, poses)):
            # The changed frame changes, and through group attention so does the anchor frame.
            assert (variant[0, 2] - base[0, 2]).abs().max() > 1e-2
            assert (variant[0, 0] - base[0, 0]).abs().max() > 1e-4


def test_unknown_pose_is_ignored(model):
    images, k, poses = random_group(1, 4, seed=4)
    known = torch.tensor([[True, True, False, True]])
    moved = poses.clone()
    moved[0, 2, :3, 3] += 3.0
    moved[0, 2, :3, :3] = 7.0  # not even a rotation: ignored
    with torch.no_grad():
        a = model(images, k, poses, pose_known=known)
        b = model(images, k, moved, pose_known=known)
        full = model(images, k, poses)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    assert (a - full).abs().max() > 1e-2


def test_non_anchor_frames_are_permutation_equivariant(model):
    images, k, poses = random_group(1, 5, seed=5)
    k[0, 3, 0, 0] *= 1.2  # distinct intrinsics so a mix-up would show
    order = torch.tensor([0, 3, 1, 4, 2])
    with torch.no_grad():
        out = model(images, k, poses)
        permuted = model(images[:, order], k[:, order], poses[:, order])
    torch.testing.assert_close(permuted, out[:, order], rtol=1e-4, atol=1e-4)


def test_deterministic_construction_and_forward():
    images, k, poses = random_group(2, 3, seed=6)
    torch.manual_seed(1)
    first = CompactBackbone("compact_xs").eval()
    torch.manual_seed(1)
    second = CompactBackbone("compact_xs").eval()
    with torch.no_grad():
        a, b, c = first(images, k, poses), first(images, k, poses), second(images, k, poses)
    assert torch.equal(a, b)
    assert torch.equal(a, c)


def test_bf16_autocast_runs_close_to_fp32(model):
    images, k, poses = random_group(2, 3, seed=7)
    with torch.inference_mode():
        ref = model(images, k, poses)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model(images, k, poses)
    assert low.shape == ref.shape and torch.isfinite(low).all()
    # Final LayerNorm output has unit scale; bf16 keeps ~3 significant digits.
    assert (low.float() - ref).abs().mean() < 0.05


def test_config_round_trip_and_errors():
    config = compact_config("compact_s", depth=6)
    assert config.depth == 6 and config.dim == COMPACT_PRESETS["compact_s"].dim
    assert CompactConfig.from_dict(config.to_dict()) == config
    assert config.fingerprint() != COMPACT_PRESETS["compact_s"].fingerprint()
    with pytest.raises(ValueError, match="wdith"):
        CompactConfig.from_dict({"wdith": 3})
    with pytest.raises(ValueError, match="compact_huge"):
        compact_config("compact_huge")
    with pytest.raises(ValueError, match="num_heads"):
        CompactConfig(dim=100, num_heads=3)
    with pytest.raises(ValueError, match="patch_size"):
        CompactConfig(image_size=(224, 220))
    assert CompactBackbone.from_preset("compact_xs", depth=4).config.depth == 4


def test_quaternions_match_numpy_reference():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(64, 3))
    vectors[:8] = vectors[:8] / np.linalg.norm(vectors[:8], axis=1, keepdims=True) * math.pi
    rot = geometry.axis_angle_to_matrix(vectors)  # includes 180-degree rotations
    ours = matrix_to_quat_xyzw(torch.from_numpy(rot).float()).double().numpy()
    ref = geometry.matrix_to_quat_xyzw(rot)
    # q and -q are the same rotation (w = 0 cases); compare up to sign.
    err = np.minimum(np.abs(ours - ref).max(1), np.abs(ours + ref).max(1))
    assert err.max() < 1e-5
    np.testing.assert_allclose(geometry.quat_xyzw_to_matrix(ours), rot, atol=1e-5)


def test_patch_rays_and_pose_vectors():
    k = torch.tensor([[[[100.0, 0, 31.5], [0, 80.0, 20.0], [0, 0, 1]]]])
    rays = patch_ray_samples(k, (2, 3), 16, 1)
    assert rays.shape == (1, 1, 6, 1, 3)
    # Patch (row 1, col 2) centre is pixel (x, y) = (39.5, 23.5).
    expected = torch.tensor([(39.5 - 31.5) / 100.0, (23.5 - 20.0) / 80.0, 1.0])
    torch.testing.assert_close(rays[0, 0, 5, 0], expected / expected.norm())
    assert patch_ray_samples(k, (2, 3), 16, 4).shape == (1, 1, 6, 16, 3)

    poses = torch.eye(4).repeat(1, 3, 1, 1)
    poses[0, 1, :3, 3] = torch.tensor([2.0, 0, 0])
    poses[0, 2, :3, 3] = torch.tensor([0, 4.0, 0])
    known = torch.tensor([[True, True, True]])
    vec = pose_vectors(poses, known, 1e-3)
    torch.testing.assert_close(vec[0, :, :4], torch.tensor([[0, 0, 0, 1.0]] * 3))
    torch.testing.assert_close(vec[0, 2, 4:7], torch.tensor([0, 4.0 / 3.0, 0]))
    torch.testing.assert_close(vec[0, :, 7], torch.full((3,), math.log(3.0)))
    partial = pose_vectors(poses, torch.tensor([[True, True, False]]), 1e-3)
    assert torch.all(partial[0, 2] == 0)
    torch.testing.assert_close(partial[0, 1, 4:8], torch.tensor([1.0, 0, 0, math.log(2.0)]))
    single = pose_vectors(poses[:, :1], known[:, :1], 1e-3)
    torch.testing.assert_close(single[0, 0, 7], torch.tensor(math.log(1e-3)))


def test_rotation_6d_columns_convention():
    six = torch.tensor([[2.0, 0, 0, 1.0, 3.0, 0]])
    rot = rotation_6d_to_matrix(six)[0]
    torch.testing.assert_close(rot[:, 0], torch.tensor([1.0, 0, 0]))
    torch.testing.assert_close(rot[:, 1], torch.tensor([0, 1.0, 0]))
    many = rotation_6d_to_matrix(torch.randn(100, 6, generator=torch.Generator().manual_seed(0)))
    assert geometry.is_rotation(many.double().numpy(), atol=1e-5).all()


def test_pose_dropping_and_noise():
    gen = torch.Generator().manual_seed(0)
    config = PretrainConfig()
    known = sample_pose_known(200, 5, config, gen)
    assert known[:, 0].all()
    assert (~known[:, 1:]).any(dim=1).all()
    assert known[:, 1:].any()  # not everything dropped
    assert sample_pose_known(3, 1, config, gen).all()
    _, _, poses = random_group(4, 5, seed=9)
    noisy = perturb_poses(poses, ExtrinsicNoiseConfig(1.5, 0.1), gen, model="rotation_left")
    torch.testing.assert_close(noisy[:, 0], poses[:, 0])
    delta = (noisy[:, 1:, :3, 3] - poses[:, 1:, :3, 3]).std()
    assert 0.05 < delta < 0.2
    assert geometry.is_rotation(noisy[..., :3, :3].double().numpy(), atol=1e-4).all()


def test_pretrain_loss_decreases_on_fixed_batch():
    torch.manual_seed(0)
    model = CompactBackbone("compact_xs")
    heads = CompactPretrainHeads.for_backbone(model, pose_hidden=32)
    images, k, poses = random_group(2, 3, seed=10)
    # A learnable structure: a tilted plane per frame (depth grows down the image).
    rows = torch.linspace(0, 1, SIZE)[:, None].expand(SIZE, SIZE)
    depth = (1.5 + 2.0 * rows + torch.arange(3.0)[:, None, None]).expand(2, 3, SIZE, SIZE).clone()
    depth[:, :, :4] = 0.0  # invalid rows are ignored
    batch = {"images": images, "intrinsics": k, "cam_to_anchor": poses, "depth": depth}
    params = list(model.parameters()) + list(heads.parameters())
    optim = torch.optim.Adam(params, lr=3e-3)
    history = []
    for _ in range(20):
        # Same generator seed every step: same dropped frames and noise, a fixed objective.
        losses = pretrain_step(model, heads, batch, generator=torch.Generator().manual_seed(2))
        optim.zero_grad()
        losses["total"].backward()
        optim.step()
        history.append({key: float(value.detach()) for key, value in losses.items()})
    assert history[0]["dropped"] >= 2  # at least one per group
    assert history[-1]["total"] < 0.5 * history[0]["total"]
    assert history[-1]["depth"] < 0.3 * history[0]["depth"]
    assert history[-1]["pose"] < 0.7 * history[0]["pose"]
    with pytest.raises(ValueError, match="depth"):
        pretrain_step(model, heads, {key: batch[key] for key in batch if key != "depth"})


def test_patch_stem_equals_strided_convolutions():
    torch.manual_seed(0)
    mean, std = (0.4, 0.5, 0.6), (0.2, 0.25, 0.3)
    stem = PatchStem((4, 2, 2), (5, 6, 7), mean, std)
    convs = [torch.nn.Conv2d(3, 5, 4, 4), torch.nn.Conv2d(5, 6, 2, 2), torch.nn.Conv2d(6, 7, 2, 2)]
    with torch.no_grad():
        for conv, layer in zip(convs, stem.layers):
            # Linear input order is (sub-block row, sub-block col, channel) after level 1.
            weight = conv.weight if conv is convs[0] else conv.weight.permute(0, 2, 3, 1)
            layer.weight.copy_(weight.reshape(conv.out_channels, -1))
            layer.bias.copy_(conv.bias)
        images = torch.rand(2, 3, 32, 48)
        x = (images - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)
        x = convs[2](F.gelu(convs[1](F.gelu(convs[0](x)))))
        expected = x.flatten(2).transpose(1, 2)
        torch.testing.assert_close(stem(images), expected, rtol=1e-5, atol=1e-5)
        linear = PatchStem((16,), (4,), mean, std)
        conv = torch.nn.Conv2d(3, 4, 16, 16)
        linear.layers[0].weight.copy_(conv.weight.reshape(4, -1))
        linear.layers[0].bias.copy_(conv.bias)
        normalised = (images - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)
        torch.testing.assert_close(linear(images), conv(normalised).flatten(2).transpose(1, 2),
                                   rtol=1e-5, atol=1e-5)


def test_checkpoint_round_trip_and_strict_errors(tmp_path):
    torch.manual_seed(3)
    model = CompactBackbone("compact_xs").eval()
    path = tmp_path / "compact.safetensors"
    save_compact_checkpoint(model, path, {"note": "test"})
    loaded = load_compact_checkpoint(path, expected_config=model.config).eval()
    images, k, poses = random_group(1, 3)
    with torch.no_grad():
        torch.testing.assert_close(loaded(images, k, poses), model(images, k, poses),
                                   rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"depth \(file 2, expected 3\)"):
        load_compact_checkpoint(path, expected_config=compact_config("compact_xs", depth=3))
    # Another input size only when asked for, and then the same features as the file's model
    # run at that size (its positions interpolated in the forward pass).
    wider = compact_config("compact_xs", image_size=(128, 128))
    with pytest.raises(ValueError, match=r"image_size \(file \[64, 64\], expected \[128, 128\]"):
        load_compact_checkpoint(path, expected_config=wider)
    resized = load_compact_checkpoint(path, expected_config=wider, allow_image_size=True).eval()
    assert resized.pos_embed.shape[-2:] == (8, 8) and resized.image_size == (128, 128)
    images, k, poses = random_group(1, 3, size=128)
    with torch.no_grad():
        torch.testing.assert_close(resized(images, k, poses), model(images, k, poses))
    with pytest.raises(ValueError, match=r"depth \(file 2, expected 3\), image_size"):
        load_compact_checkpoint(path, expected_config=compact_config(
            "compact_xs", depth=3, image_size=(128, 128)), allow_image_size=True)
    state = load_file(str(path))
    state.pop("anchor_embed")
    state["extra.weight"] = torch.zeros(1)
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata()
    broken = tmp_path / "broken.safetensors"
    save_file(state, str(broken), metadata=metadata)
    with pytest.raises(ValueError, match=r"missing \['anchor_embed'\], unexpected \['extra"):
        load_compact_checkpoint(broken)
    plain = tmp_path / "plain.safetensors"
    save_file({"x": torch.zeros(1)}, str(plain))
    with pytest.raises(ValueError, match="not a compact backbone checkpoint"):
        load_compact_checkpoint(plain)
