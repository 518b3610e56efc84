"""feature_norm_patches: fixed per-patch/channel standardisation of the frozen features."""

import pytest
import torch

from g2g_model.backbones.compact import CompactBackbone
from g2g_model.model.checkpoint import load_checkpoint
from g2g_model.model.config import preset
from g2g_model.model.g2g import G2GModel
from g2g_model.training.smoke_data import make_smoke_collection, smoke_config
from g2g_model.training.run_files import MODEL_FILE
from g2g_model.training.trainer import Trainer


def test_standardised_model_equals_plain_model_on_standardised_features():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(3)
    plain = G2GModel(preset("tiny"))
    normed = G2GModel(preset("tiny", feature_norm_patches=16))
    missing, unexpected = normed.load_state_dict(plain.state_dict(), strict=False)
    assert sorted(missing) == ["feature_mean", "feature_scale"] and not unexpected
    # features with a large shared constant and a small varying part (the compact default's)
    base = 5.0 * torch.randn(16, 64, generator=gen)
    train = base + 0.01 * torch.randn(40, 3, 16, 64, generator=gen)
    normed.set_feature_statistics(train)
    mean, std = train.reshape(-1, 16, 64).mean(0), train.reshape(-1, 16, 64).std(0)
    torch.testing.assert_close(normed.feature_mean, mean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(normed.feature_scale, 1.0 / (std + 1e-6), rtol=1e-4, atol=1e-4)

    fa = base + 0.01 * torch.randn(2, 3, 16, 64, generator=gen)
    fb = base + 0.01 * torch.randn(2, 2, 16, 64, generator=gen)
    out = normed(fa, fb)
    m, k = normed.feature_mean, normed.feature_scale
    ref = plain((fa - m) * k, (fb - m) * k)
    for key in ("rotations_b", "translations_b"):
        torch.testing.assert_close(out[key], ref[key], rtol=1e-4, atol=1e-5)
    # the standardisation changes what the model sees
    assert not torch.allclose(out["translations_b"], plain(fa, fb)["translations_b"], atol=1e-3)


def test_patch_count_and_missing_statistics_are_named():
    model = G2GModel(preset("tiny", feature_norm_patches=16))
    with pytest.raises(ValueError, match="features_b has 9 patches.*cover 16"):
        model(torch.randn(1, 2, 16, 64), torch.randn(1, 2, 9, 64))
    with pytest.raises(ValueError, match="feature_norm_patches > 0"):
        G2GModel(preset("tiny")).set_feature_statistics(torch.randn(4, 16, 64))
    with pytest.raises(ValueError, match="feature_norm_patches"):
        preset("tiny", feature_norm_patches=-1)


def test_fresh_training_run_sets_and_exports_the_statistics(tmp_path):
    root = make_smoke_collection(tmp_path / "smoke")
    patches = CompactBackbone("compact_xs").num_patches(64, 64)
    cfg = smoke_config(root, tmp_path / "run",
                       model={"g2g_overrides": {"max_frames": 4,
                                                "feature_norm_patches": patches}},
                       optim={"max_steps": 2})
    trainer = Trainer(cfg, progress=False)
    try:
        trainer.run()
        mean = trainer.g2g.feature_mean.clone()
        scale = trainer.g2g.feature_scale.clone()
    finally:
        trainer.close()
    assert mean.abs().max() > 0 and not torch.allclose(scale, torch.ones_like(scale))
    model = load_checkpoint(tmp_path / "run" / MODEL_FILE).model
    assert model.config.feature_norm_patches == patches
    torch.testing.assert_close(model.feature_mean, mean)
    torch.testing.assert_close(model.feature_scale, scale)
