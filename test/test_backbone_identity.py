"""The one encoder identity (g2g_model.backbones.identity): its two written forms, what makes
two encoders differ, and that the shipped files still name the shipped encoder."""

import pytest
import torch

from g2g_model.backbones.compact import CompactBackbone
from g2g_model.backbones.identity import (
    backbone_identity, encoder_id, encoder_mismatch, weights_digest,
)
from g2g_model.estimation.pipeline import G2GPipeline
from g2g_model.assets import default_checkpoint


def make_backbone(seed=0, **overrides):
    torch.manual_seed(seed)
    return CompactBackbone.from_preset("compact_xs", **overrides).eval()


def test_weights_and_configuration_make_the_identity():
    a, b = make_backbone(seed=1), make_backbone(seed=2)
    assert weights_digest(a) != weights_digest(b)
    assert weights_digest(a) == weights_digest(make_backbone(seed=1))
    assert encoder_mismatch(encoder_id(a), encoder_id(make_backbone(seed=1))) is None
    assert encoder_mismatch(encoder_id(a), encoder_id(b)) == "config_hash"
    assert encoder_mismatch(encoder_id(a), encoder_id(make_backbone(seed=1, depth=4))) == \
        "config_hash"
    assert encoder_mismatch({"name": "other"}, encoder_id(a)) == "name"
    full = backbone_identity(a)
    assert full["backbone_name"] == encoder_id(a)["name"] == "compact"
    assert full["weights_fingerprint"] == weights_digest(a)
    unhashed = backbone_identity(a, fingerprint_weights=False)
    assert unhashed["weights_fingerprint"] == "" and '"depth": 2' in unhashed["backbone_config"]


def test_shipped_covisibility_files_name_the_shipped_encoder():
    path = default_checkpoint("covisibility")
    if path is None or default_checkpoint("relocalization") is None:
        pytest.skip("no embedded checkpoints")
    from g2g_model.covisibility.checkpoint import load_checkpoint

    pipeline = G2GPipeline.from_checkpoint(default_checkpoint("relocalization"))
    _, meta = load_checkpoint(path, expect_encoder=pipeline.backbone_id())
    assert meta["encoder"] == pipeline.backbone_id() == encoder_id(pipeline.backbone)
