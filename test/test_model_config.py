"""G2GConfig: presets, dict round trip, validation at the boundary."""

import pytest

from g2g_model.model.config import PRESETS, G2GConfig, preset, preset_name_of


def test_paper_preset_is_the_released_configuration():
    cfg = preset("paper")
    assert (cfg.hidden_dim, cfg.num_heads, cfg.mlp_ratio, cfg.num_latents) == (768, 8, 4.0, 64)
    assert (cfg.resampler_layers, cfg.bridge_layers) == (2, 2)
    assert (cfg.pose_head_hidden_dim, cfg.pose_head_layers) == (512, 3)
    assert (cfg.max_frames, cfg.input_dim, cfg.layernorm_eps) == (5, 768, 1e-5)
    assert cfg.use_anchor_embed and cfg.reinject_anchor_after_merge and cfg.cross_group_attention
    assert not cfg.has_input_projection
    assert cfg.num_identity_embeddings == 9


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_dict_round_trip(name):
    cfg = preset(name, max_frames=4)
    assert G2GConfig.from_dict(cfg.to_dict()) == cfg
    assert preset_name_of(cfg) == name


def test_from_dict_rejects_unknown_keys_and_fills_defaults():
    with pytest.raises(ValueError, match="hidden_size"):
        G2GConfig.from_dict({"hidden_size": 3})
    assert G2GConfig.from_dict({"max_frames": 8}) == preset("paper", max_frames=8)


def test_unknown_preset_lists_choices():
    with pytest.raises(ValueError, match="paper"):
        preset("huge")


@pytest.mark.parametrize("field, value", [
    ("num_heads", 7), ("max_frames", 0), ("pose_head_layers", 1), ("hidden_dim", 64.0),
    ("rotation_loss", "geodesic"), ("dropout", 1.0), ("cross_group_attention", 1),
    ("resampler_layers", -1),
])
def test_invalid_values_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        preset("paper").replace(**{field: value})


def test_replace_rejects_unknown_field():
    with pytest.raises(ValueError, match="frames"):
        preset("small").replace(frames=3)


def test_differences_names_fields():
    diff = preset("paper").differences(preset("paper", max_frames=4, num_heads=4))
    assert diff == {"num_heads": (8, 4), "max_frames": (5, 4)}
