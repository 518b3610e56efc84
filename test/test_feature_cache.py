"""Tests of the per-group feature cache (LRU + .safetensors files)."""

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from g2g_model import geometry
from g2g_model.backbones.compact import CompactBackbone
from g2g_model.feature_cache import (
    FeatureCache,
    backbone_identity,
    read_feature_file,
    weights_digest,
)


class CountingBackbone(torch.nn.Module):
    """Wraps a real backbone and counts how many groups it encoded."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.name = inner.name
        self.config = inner.config
        self.groups_encoded = 0

    def forward(self, images, intrinsics, cam_to_anchor):
        self.groups_encoded += images.shape[0]
        return self.inner(images, intrinsics, cam_to_anchor)


def make_backbone(seed=0, **overrides):
    torch.manual_seed(seed)
    return CountingBackbone(CompactBackbone.from_preset("compact_xs", **overrides).eval())


def groups(batch, frames=3, seed=0):
    rng = np.random.default_rng(seed)
    images = torch.from_numpy(rng.random((batch, frames, 3, 64, 64))).float()
    k = torch.tensor([[60.0, 0, 31.5], [0, 60.0, 31.5], [0, 0, 1]]).expand(batch, frames, 3, 3)
    rot = geometry.axis_angle_to_matrix(rng.normal(scale=0.2, size=(batch, frames, 3)))
    world = geometry.make_pose(rot, rng.normal(size=(batch, frames, 3)))
    poses = torch.from_numpy(np.stack([geometry.reanchor(w) for w in world])).float()
    return images, k.contiguous(), poses


def test_hit_and_miss_reuse_features():
    backbone = make_backbone()
    cache = FeatureCache(backbone, max_entries=8)
    images, k, poses = groups(3)
    first = cache.encode(images, k, poses)
    assert (cache.hits, cache.misses, backbone.groups_encoded) == (0, 3, 3)
    with torch.no_grad():
        direct = backbone.inner(images, k, poses)
    torch.testing.assert_close(first, direct)
    # Groups 1 and 2 again plus one new group: only the new one is encoded.
    new_images, new_k, new_poses = groups(1, seed=1)
    second = cache.encode(torch.cat([images[1:], new_images]), torch.cat([k[1:], new_k]),
                          torch.cat([poses[1:], new_poses]))
    assert (cache.hits, cache.misses, backbone.groups_encoded) == (2, 4, 4)
    torch.testing.assert_close(second[:2], first[1:])
    assert not second.requires_grad


def test_key_depends_on_every_input_and_on_autocast():
    cache = FeatureCache(make_backbone())
    images, k, poses = groups(1)
    base = cache.group_key(images[0], k[0], poses[0])
    assert base == cache.group_key(images[0].clone(), k[0].clone(), poses[0].clone())
    moved = poses[0].clone()
    moved[1, 0, 3] += 1e-3
    other_k = k[0].clone()
    other_k[2, 0, 0] += 1.0
    other_images = images[0].clone()
    other_images[0, 0, 0, 0] += 1e-3
    keys = {base, cache.group_key(images[0], k[0], moved),
            cache.group_key(images[0], other_k, poses[0]),
            cache.group_key(other_images, k[0], poses[0])}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        keys.add(cache.group_key(images[0], k[0], poses[0]))
    assert len(keys) == 5


def test_lru_eviction_order():
    backbone = make_backbone()
    cache = FeatureCache(backbone, max_entries=2)
    a, b, c = (groups(1, seed=s) for s in (10, 11, 12))
    cache.encode(*a)
    cache.encode(*b)
    cache.encode(*a)  # a becomes most recently used
    cache.encode(*c)  # evicts b
    assert len(cache) == 2
    key_a, key_b = (cache.group_key(g[0][0], g[1][0], g[2][0]) for g in (a, b))
    assert key_a in cache and key_b not in cache
    cache.encode(*b)
    assert backbone.groups_encoded == 4


def test_save_load_round_trip(tmp_path):
    backbone = make_backbone()
    cache = FeatureCache(backbone)
    images, k, poses = groups(2)
    features = cache.encode(images, k, poses)
    path = tmp_path / "features.safetensors"
    assert cache.save(path) == 2
    stored, identity = read_feature_file(path)
    assert identity["backbone_name"] == "compact"
    assert set(stored) == set(cache.keys())

    fresh_backbone = make_backbone()  # same seed -> same weights, same identity
    fresh = FeatureCache(fresh_backbone)
    assert fresh.load(path) == 2
    again = fresh.encode(images, k, poses)
    assert fresh_backbone.groups_encoded == 0 and fresh.hits == 2
    torch.testing.assert_close(again, features, rtol=0, atol=0)


def test_load_rejects_other_config_weights_or_file(tmp_path):
    cache = FeatureCache(make_backbone())
    cache.encode(*groups(1))
    path = tmp_path / "features.safetensors"
    cache.save(path)
    with pytest.raises(ValueError, match=r"depth \(file 2, current 4\)"):
        FeatureCache(make_backbone(depth=4)).load(path)
    with pytest.raises(ValueError, match="weights_fingerprint"):
        FeatureCache(make_backbone(seed=5)).load(path)
    renamed = make_backbone()
    renamed.name = "other"
    with pytest.raises(ValueError, match="'compact'"):
        FeatureCache(renamed).load(path)
    foreign = tmp_path / "foreign.safetensors"
    save_file({"x": torch.zeros(2)}, str(foreign))
    with pytest.raises(ValueError, match="not a G2G feature cache"):
        FeatureCache(make_backbone()).load(foreign)
    with pytest.raises(ValueError, match="does not exist"):
        FeatureCache(make_backbone()).load(tmp_path / "missing.safetensors")


def test_identity_and_fingerprint():
    a, b = make_backbone(seed=1), make_backbone(seed=2)
    assert weights_digest(a) != weights_digest(b)
    assert weights_digest(a) == weights_digest(make_backbone(seed=1))
    unhashed = backbone_identity(a, fingerprint_weights=False)
    assert unhashed["weights_fingerprint"] == ""
    assert '"depth": 2' in unhashed["backbone_config"]
    with pytest.raises(ValueError, match="max_entries"):
        FeatureCache(a, max_entries=0)
