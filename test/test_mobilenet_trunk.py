"""The frozen pretrained MobileNetV2 trunk under the compact backbone (`compact_mnv2`), and both
pretrained stems (`compact_mnv2`, `compact_aliked`) under it."""

import hashlib
import re

import pytest
import torch

from g2g_model.backbones import fused_conv
from g2g_model.backbones.compact import CompactBackbone
from g2g_model.backbones.mobilenet_v2 import (
    ASSET, ASSET_KEY, MobileNetV2Trunk, load_pretrained,
)
from g2g_model.tagged_safetensors import read_tagged, write_tagged


def test_shipped_weights_match_their_notice():
    """The file's sha256 and provenance header agree with NOTICE.md (they cannot drift)."""
    digest = hashlib.sha256(ASSET.read_bytes()).hexdigest()
    notice = (ASSET.parent / "NOTICE.md").read_text()
    assert f"this file: `{digest}`" in notice
    header, tensors = read_tagged(ASSET, ASSET_KEY, 1, "trunk")
    assert header["architecture"] == "mobilenet_v2" and header["license"].startswith("MIT")
    assert header["source_sha256"] in notice and header["wheel_sha256"] in notice
    assert max(int(k.split(".")[1]) for k in tensors) == 13
    assert "MIT License" in notice
    for default in ("g2g_reloc_mnv2", "g2g_rig_mnv2"):  # the defaults hold the same blocks
        path = ASSET.parent / f"{default}.safetensors"
        assert f"`{hashlib.sha256(path.read_bytes()).hexdigest()}`" in notice, default


@pytest.mark.parametrize("stride,channels", [(8, 32), (16, 96)])
def test_trunk_is_pretrained_frozen_and_strided(stride, channels):
    trunk = MobileNetV2Trunk(stride)
    trunk.train()
    assert not trunk.training and not any(p.requires_grad for p in trunk.parameters())
    out = trunk(torch.rand(2, 3, 64, 96))
    assert out.shape == (2, channels, 64 // stride, 96 // stride)
    # Pretrained, not random: the loaded weights equal the file's.
    first = load_pretrained(1)["features.0.0.weight"]
    assert torch.equal(trunk.features[0][0].weight, first)
    assert not torch.equal(MobileNetV2Trunk(stride, load_weights=False).features[0][0].weight,
                           first)


def test_folded_channels_last_trunk_equals_the_plain_network_and_follows_its_weights():
    """forward runs a copy with batch norms folded, channels last (speed); it gives the plain
    network's features and is rebuilt when the weights change (loading, in-place edits)."""
    trunk = MobileNetV2Trunk(16)
    images = torch.rand(3, 3, 48, 64)
    with torch.inference_mode():
        plain = trunk.plain_forward(images)
        fast = trunk(images)
    assert plain.shape == fast.shape and torch.allclose(fast, plain, atol=1e-4, rtol=1e-4)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in trunk.fast_features().modules())
    assert trunk.fast_features() is trunk.fast_features()  # cached
    assert "_fast" not in str(list(trunk.state_dict()))
    # New weights (a checkpoint load; an in-place edit) rebuild the copy: never stale features.
    random = MobileNetV2Trunk(16, load_weights=False)
    trunk.load_state_dict(random.state_dict())
    with torch.inference_mode():
        assert torch.allclose(trunk(images), random.plain_forward(images), atol=1e-4,
                              rtol=1e-4)
    with torch.no_grad():
        trunk.features[0][1].running_mean.add_(1.0)
    with torch.inference_mode():
        moved = trunk(images)
        assert torch.allclose(moved, trunk.plain_forward(images), atol=1e-4, rtol=1e-4)
    # Gradients still reach the input where a caller asks for them.
    x = images.clone().requires_grad_(True)
    trunk(x).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


@pytest.mark.skipif(not fused_conv.available(torch.device("cpu")),
                    reason="this PyTorch build has no fused oneDNN convolutions")
def test_fused_trunk_gives_the_folded_features_in_fp32_and_under_bf16_autocast():
    """On a CPU the fast copy runs each convolution with its ReLU6 in one oneDNN call, with
    weights in the dtype it runs in: the same features as the folded copy of separate ops,
    in fp32 and under bf16 autocast (where it holds bf16 weights and returns bf16)."""
    trunk = MobileNetV2Trunk(16)
    images = torch.rand(4, 3, 64, 96)
    fused = trunk.fast_features()
    assert any(isinstance(m, fused_conv.ConvReLU6) for m in fused.modules())
    assert not any(isinstance(m, (torch.nn.Conv2d, torch.nn.ReLU6)) for m in fused.modules())
    separate = trunk.fast_features(fused=False)
    assert any(isinstance(m, torch.nn.ReLU6) for m in separate.modules())
    with torch.inference_mode():
        normalized = trunk.normalized(images)
        assert torch.allclose(trunk(images), separate(normalized), atol=1e-5, rtol=1e-5)
        assert torch.allclose(trunk(images), trunk.plain_forward(images), atol=1e-4, rtol=1e-4)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            fast16, reference16 = trunk(images), separate(normalized)
    assert fast16.dtype == torch.bfloat16 == reference16.dtype
    weights = {m.weight.dtype for m in trunk.fast_features(torch.bfloat16).modules()
               if isinstance(m, fused_conv.ConvReLU6)}
    assert weights == {torch.bfloat16}
    assert (fast16.float() - reference16.float()).abs().max() <= 0.02 * reference16.abs().max()
    assert not fused_conv.available(torch.device("meta"))


def test_missing_or_foreign_weight_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="make_mobilenet_asset"):
        load_pretrained(14, tmp_path / "absent.safetensors")
    other = write_tagged(tmp_path / "other.safetensors", ASSET_KEY,
                         {"version": 1, "architecture": "resnet"}, {"x": torch.zeros(1)})
    with pytest.raises(ValueError, match="not mobilenet_v2"):
        load_pretrained(14, other)
    with pytest.raises(ValueError, match="stride"):
        MobileNetV2Trunk(32)


@pytest.mark.parametrize("preset, image_size",
                         [("compact_mnv2", (64, 64)), ("compact_aliked", (64, 80))])
def test_pretrained_stems_train_the_projection_not_the_network(preset, image_size):
    # compact_mnv2 (MobileNetV2 trunk) and compact_aliked (ALIKED-t16): the frozen network gets
    # no gradient, the projection does; features follow each frame's own image.
    torch.manual_seed(0)
    backbone = CompactBackbone(preset)
    h, w = image_size
    images = torch.rand(1, 2, 3, h, w)
    k = torch.tensor([[60.0, 0, w / 2], [0, 60, h / 2], [0, 0, 1]]).expand(1, 2, 3, 3)
    poses = torch.eye(4).expand(1, 2, 4, 4).clone()
    poses[0, 1, 0, 3] = 0.3
    feats = backbone(images, k, poses)
    assert feats.shape == (1, 2, (h // 16) * (w // 16), backbone.feature_dim)   # row-major cells
    feats.square().mean().backward()
    assert backbone.stem.proj.weight.grad.abs().sum() > 0
    frozen = [p for n, p in backbone.stem.named_parameters() if not n.startswith(("proj", "norm"))]
    assert frozen and all(p.grad is None for p in frozen)
    other = images.clone()
    other[0, 1] = torch.rand(3, h, w)
    with torch.no_grad():
        changed = backbone(other, k, poses) - feats
    assert changed[0, 1].abs().mean() > 10 * changed[0, 0].abs().mean()
    assert re.match(r"^[0-9a-f]{16}$", backbone.config.fingerprint())


def test_stage1_step_under_bf16_autocast_keeps_noisy_poses_rigid():
    """Regression: the pose noise of stage 1 was multiplied in bf16 under autocast, and the
    backbone refused the non-rigid result (every bf16 pretraining run failed at step 1)."""
    from g2g_model import geometry
    from g2g_model.training.compact_pretrain import CompactPretrainHeads, pretrain_step

    torch.manual_seed(0)
    model = CompactBackbone("compact_xs")
    heads = CompactPretrainHeads(model.feature_dim, model.patch_size)
    rot = geometry.axis_angle_to_matrix(torch.randn(2, 4, 3).numpy() * 0.5)
    world = geometry.make_pose(rot, torch.randn(2, 4, 3).numpy())
    poses = torch.stack([torch.from_numpy(geometry.reanchor(w)).float() for w in world])
    k = torch.tensor([[58.0, 0, 32], [0, 58, 32], [0, 0, 1]])
    batch = {"images": torch.rand(2, 4, 3, 64, 64), "cam_to_anchor": poses,
             "intrinsics": k.expand(2, 4, 3, 3),
             "depth": torch.rand(2, 4, 64, 64) + 1.0}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        losses = pretrain_step(model, heads, batch, generator=torch.Generator().manual_seed(1))
    assert torch.isfinite(losses["total"])
