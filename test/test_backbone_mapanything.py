"""The mapanything_v1 backbone against MapAnything V1's golden fixture and checkpoint layout.

The golden data (fixtures/mapanything_v1) come from the reference implementation run in
float32 on CPU; the full-size checks use the meta device so that no 508M-parameter model is
ever allocated here.
"""

import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from g2g_model.backbones.base import backbone_class, registered_backbones
from g2g_model.backbones.mapanything.checkpoint import (
    depth_input_keys,
    load_mapanything_v1,
    select_feature_path,
)
from g2g_model.backbones.mapanything.config import MapAnythingV1Config, preset
from g2g_model.backbones.mapanything.geometric_inputs import (
    normalize_translations,
    ray_directions,
    relative_pose_inputs,
)
from g2g_model.backbones.mapanything_v1 import MapAnythingV1Backbone

REPO = Path(__file__).resolve().parents[1]
# A copy of ../shared/fixtures/mapanything_v1 (golden data from the reference implementation).
FIXTURES = REPO / "test" / "fixtures" / "mapanything_v1"

IMAGE_SHA256 = "8aa22e76869353d258d6c36cbea78abb807c14013b427a303d699ae622974520"
TOL = 1e-4  # the fixture README's suggested tolerance (float32 noise is ~1e-6)


@pytest.fixture(scope="module")
def tiny_config():
    return MapAnythingV1Config.from_fixture_config(
        json.loads((FIXTURES / "tiny_config.json").read_text()))


@pytest.fixture(scope="module")
def tiny_model(tiny_config):
    return load_mapanything_v1(FIXTURES / "tiny_state_dict.safetensors", config=tiny_config)


@pytest.fixture(scope="module")
def tiny_inputs():
    raw = load_file(str(FIXTURES / "tiny_inputs.safetensors"))
    # README: float32(u8) / 255 in float32, channels first; the backbone then normalises.
    images = (raw["img_uint8"].float() / 255).permute(0, 1, 4, 2, 3).contiguous()
    return images, raw


@pytest.fixture(scope="module")
def golden():
    return load_file(str(FIXTURES / "tiny_features.safetensors"))


@pytest.fixture(scope="module")
def feature_keys():
    return json.loads((FIXTURES / "mapanything_v1_feature_keys.json").read_text())


@pytest.fixture(scope="module")
def tiny_output(tiny_model, tiny_inputs):
    images, raw = tiny_inputs
    with torch.no_grad():
        return tiny_model.forward_features(images, raw["intrinsics"], raw["camera_poses"],
                                           raw["is_metric_scale"])


def _max_diff(a, b):
    return (a - b).abs().max().item()


# -- registry -------------------------------------------------------------------------------------
def test_registry_returns_the_class():
    assert backbone_class("mapanything_v1") is MapAnythingV1Backbone
    assert "mapanything_v1" in registered_backbones()
    assert MapAnythingV1Backbone.name == "mapanything_v1"


# -- golden tiny model ----------------------------------------------------------------------------
def test_tiny_features_match_golden(tiny_output, golden):
    assert tiny_output.features.shape == golden["features"].shape == (2, 3, 256, 32)
    assert _max_diff(tiny_output.features, golden["features"]) < TOL
    assert _max_diff(tiny_output.scale_token, golden["scale_token_features"]) < TOL


def test_forward_defaults_to_metric_and_can_return_scale_token(tiny_model, tiny_inputs, golden):
    images, raw = tiny_inputs
    with torch.no_grad():
        features, scale = tiny_model(images, raw["intrinsics"], raw["camera_poses"],
                                     return_scale_token=True)
        plain = tiny_model(images[:1], raw["intrinsics"][:1], raw["camera_poses"][:1])
    assert _max_diff(features, golden["features"]) < TOL
    assert _max_diff(scale, golden["scale_token_features"]) < TOL
    assert _max_diff(plain, golden["features"][:1]) < TOL


def test_metric_scale_flag_changes_features(tiny_model, tiny_inputs, golden):
    images, raw = tiny_inputs
    with torch.no_grad():
        features = tiny_model(images, raw["intrinsics"], raw["camera_poses"],
                              is_metric_scale=torch.zeros(2, 3, dtype=torch.bool))
    assert _max_diff(features, golden["features"]) > 0.1


def test_image_normalisation_is_bit_exact(tiny_model, tiny_inputs):
    images, _ = tiny_inputs
    pixels = tiny_model.normalize_images(images).contiguous()
    assert pixels.dtype == torch.float32
    assert hashlib.sha256(pixels.numpy().tobytes()).hexdigest() == IMAGE_SHA256


def test_rays_from_intrinsics_are_bit_exact(tiny_inputs):
    _, raw = tiny_inputs
    rays = ray_directions(raw["intrinsics"], 224, 224)
    expected = raw["ray_directions_unique"][raw["ray_directions_index"]]
    assert rays.shape == (2, 3, 224, 224, 3)
    assert torch.equal(rays, expected)


def test_pose_encoder_inputs_match(tiny_inputs):
    _, raw = tiny_inputs
    inter = load_file(str(FIXTURES / "tiny_intermediates.safetensors"))
    quats, trans = relative_pose_inputs(raw["camera_poses"])
    trans, factor = normalize_translations(trans)
    assert _max_diff(quats, inter["cam_rot_encoder_input_quats_xyzw"]) < 1e-6
    assert _max_diff(trans, inter["cam_trans_encoder_input_normalized_trans"]) < 1e-6
    log_factor = torch.log(factor + 1e-8)
    assert _max_diff(log_factor, inter["cam_trans_scale_encoder_input_log_norm_factor"][:, 0, 0]) \
        < 1e-6


def test_image_encoder_and_fusion_intermediates(tiny_model, tiny_inputs):
    images, raw = tiny_inputs
    inter = load_file(str(FIXTURES / "tiny_intermediates.safetensors"))
    captured = {}
    hooks = [
        tiny_model.encoder.register_forward_hook(
            lambda m, i, o: captured.__setitem__("image", o)),
        tiny_model.fusion_norm_layer.register_forward_hook(
            lambda m, i, o: captured.__setitem__("fused", o)),
    ]
    try:
        with torch.no_grad():
            tiny_model(images[:1], raw["intrinsics"][:1], raw["camera_poses"][:1])
    finally:
        for hook in hooks:
            hook.remove()
    assert _max_diff(captured["image"].reshape(1, 3, 256, 64),
                     inter["image_encoder_features_b0"]) < TOL
    assert _max_diff(captured["fused"], inter["fused_features_after_fusion_norm_b0"]) < TOL


def test_features_do_not_depend_on_the_world_frame(tiny_model, tiny_inputs):
    """Each group is encoded relative to its frame 0: a common rigid motion changes nothing."""
    images, raw = tiny_inputs
    angle = torch.tensor(0.7)
    world = torch.eye(4)
    world[:3, :3] = torch.tensor([[torch.cos(angle), 0.0, torch.sin(angle)],
                                  [0.0, 1.0, 0.0],
                                  [-torch.sin(angle), 0.0, torch.cos(angle)]])
    world[:3, 3] = torch.tensor([3.0, -1.0, 2.0])
    with torch.no_grad():
        moved = tiny_model(images, raw["intrinsics"], world @ raw["camera_poses"])
        base = tiny_model(images, raw["intrinsics"], raw["camera_poses"])
    assert _max_diff(moved, base) < TOL


def test_bf16_autocast_runs_close_to_fp32(tiny_config, tiny_inputs, golden):
    images, raw = tiny_inputs
    model = load_mapanything_v1(FIXTURES / "tiny_state_dict.safetensors", config=tiny_config,
                                autocast_dtype=torch.bfloat16)
    with torch.no_grad():
        features = model(images, raw["intrinsics"], raw["camera_poses"])
    assert features.dtype == torch.float32
    diff = _max_diff(features, golden["features"])
    assert 0 < diff < 0.1  # bf16 keeps ~3 significant digits; golden absmax is 3.9 (seen: 0.04)


def test_input_shapes_are_checked(tiny_model, tiny_inputs):
    images, raw = tiny_inputs
    with pytest.raises(ValueError, match="intrinsics"):
        tiny_model(images, raw["intrinsics"][:, :2], raw["camera_poses"])
    with pytest.raises(ValueError, match="cam_to_anchor"):
        tiny_model(images, raw["intrinsics"], raw["camera_poses"][..., :3, :])
    with pytest.raises(ValueError, match="patch_size"):
        tiny_model(images[..., :220], raw["intrinsics"], raw["camera_poses"])


def test_single_frame_group(tiny_model, tiny_inputs):
    """One frame: no translation to normalise by (factor clipped to 1e-8), still finite."""
    images, raw = tiny_inputs
    with torch.no_grad():
        features = tiny_model(images[:1, :1], raw["intrinsics"][:1, :1],
                              raw["camera_poses"][:1, :1])
    assert features.shape == (1, 1, 256, 32)
    assert torch.isfinite(features).all()


# -- full-size layout (meta device: nothing allocated) --------------------------------------------
def _meta_state_dict(entries):
    return {e["key"]: torch.empty(e["shape"], device="meta") for e in entries}


def test_full_size_keys_and_shapes(feature_keys):
    with torch.device("meta"):
        model = MapAnythingV1Backbone("full")
    ours = {k: list(v.shape) for k, v in model.state_dict().items()}
    reference = {e["key"]: e["shape"] for e in feature_keys["feature_path_keys"]}
    assert len(ours) == 686
    assert ours == reference
    assert sum(v.numel() for v in model.state_dict().values()) == 508_641_500
    assert model.feature_dim == 768 and model.num_patches(224, 224) == 256


def test_full_size_depth_keys_are_named_exactly(feature_keys):
    names = sorted(depth_input_keys(preset("full")))
    assert names == sorted(
        e["key"] for e in feature_keys["feature_path_zero_contribution_keys_depth_inputs"])


def test_full_checkpoint_with_depth_and_head_keys_is_accepted(feature_keys):
    with torch.device("meta"):
        model = MapAnythingV1Backbone("full")
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    checkpoint = _meta_state_dict(
        feature_keys["feature_path_keys"]
        + feature_keys["feature_path_zero_contribution_keys_depth_inputs"]
        + feature_keys["head_keys_not_needed"])
    assert len(checkpoint) == 686 + 28 + 166
    selected = select_feature_path(expected, checkpoint, preset("full"))
    assert set(selected) == set(expected)

    with pytest.raises(ValueError, match="unexpected keys.*encoder.model.mask_token"):
        select_feature_path(expected, {**checkpoint, "encoder.model.mask_token":
                                       torch.empty(1, 1024, device="meta")}, preset("full"))
    incomplete = dict(checkpoint)
    del incomplete["info_sharing.view_pos_table"]
    with pytest.raises(ValueError, match="missing keys.*info_sharing.view_pos_table"):
        select_feature_path(expected, incomplete, preset("full"))
    reshaped = {**checkpoint, "scale_token": torch.empty(768, device="meta")}
    with pytest.raises(ValueError, match="shape mismatches.*scale_token"):
        select_feature_path(expected, reshaped, preset("full"))


# -- loading real files (tiny) --------------------------------------------------------------------
def _tiny_checkpoint_with_heads(feature_keys):
    state = load_file(str(FIXTURES / "tiny_state_dict.safetensors"))
    for entry in feature_keys["head_keys_not_needed"][:20]:
        state[entry["key"]] = torch.zeros(3)
    return state


def test_tiny_checkpoint_with_head_keys_loads(tmp_path, feature_keys, tiny_config, tiny_inputs,
                                              golden):
    state = _tiny_checkpoint_with_heads(feature_keys)
    directory = tmp_path / "ckpt"
    directory.mkdir()
    save_file(state, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(tiny_config.to_dict()))
    model = load_mapanything_v1(directory)  # sizes from config.json
    assert not any(p.requires_grad for p in model.parameters()) and not model.training
    images, raw = tiny_inputs
    with torch.no_grad():
        features = model(images[1:], raw["intrinsics"][1:], raw["camera_poses"][1:])
    assert _max_diff(features, golden["features"][1:]) < TOL

    torch.save({"model": state}, tmp_path / "ckpt.pth")
    model = load_mapanything_v1(tmp_path / "ckpt.pth", config=tiny_config)
    assert torch.equal(model.scale_token, state["scale_token"])


def test_unknown_key_is_an_error(tmp_path, tiny_config):
    state = load_file(str(FIXTURES / "tiny_state_dict.safetensors"))
    state["info_sharing.extra_layer.weight"] = torch.zeros(2)
    path = tmp_path / "bad.safetensors"
    save_file(state, str(path))
    with pytest.raises(ValueError, match="info_sharing.extra_layer.weight"):
        load_mapanything_v1(path, config=tiny_config)


def test_missing_key_is_an_error(tmp_path, tiny_config):
    state = load_file(str(FIXTURES / "tiny_state_dict.safetensors"))
    del state["fusion_norm_layer.weight"]
    path = tmp_path / "bad.safetensors"
    save_file(state, str(path))
    with pytest.raises(ValueError, match="missing keys.*fusion_norm_layer.weight"):
        load_mapanything_v1(path, config=tiny_config)


# -- error cases ----------------------------------------------------------------------------------
def test_missing_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_mapanything_v1(tmp_path / "nope.safetensors")
    with pytest.raises(FileNotFoundError, match="no weights file"):
        load_mapanything_v1(tmp_path)


def test_truncated_safetensors(tmp_path, tiny_config):
    data = (FIXTURES / "tiny_state_dict.safetensors").read_bytes()
    path = tmp_path / "model.safetensors"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        load_mapanything_v1(path, config=tiny_config)


def test_width_1536_is_rejected(tmp_path, tiny_config):
    with pytest.raises(ValueError, match="V1.1"):
        MapAnythingV1Config(encoder_dim=1536, encoder_heads=24)
    with pytest.raises(ValueError, match="V1.1"):
        MapAnythingV1Config(info_dim=1536, info_heads=24)
    v1_1_config = {
        "encoder_config": {"encoder_str": "dinov2", "size": "giant", "with_registers": True},
        "info_sharing_config": {"model_type": "alternating_attention",
                                "module_args": {"depth": 16, "dim": 1536, "num_heads": 24}},
        "geometric_input_config": {},
        "use_register_tokens_from_encoder": True,
        "info_sharing_mlp_layer_str": "swiglufused",
    }
    directory = tmp_path / "v11"
    directory.mkdir()
    save_file({"scale_token": torch.zeros(1536)}, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(v1_1_config))
    with pytest.raises(ValueError, match="V1.1"):
        load_mapanything_v1(directory)
    # Without a config.json the tensor widths give it away.
    save_file({"encoder.model.cls_token": torch.zeros(1, 1, 1536)},
              str(tmp_path / "v11.safetensors"))
    with pytest.raises(ValueError, match="V1.1"):
        load_mapanything_v1(tmp_path / "v11.safetensors")


def test_init_kwargs_config(tiny_config):
    fixture = json.loads((FIXTURES / "tiny_config.json").read_text())
    kwargs = fixture["mapanything_init_kwargs"]
    parsed = MapAnythingV1Config.from_init_kwargs(kwargs)
    # The tiny fixture keeps encoder size "large" (its width is patched), so only the
    # info-sharing and geometric sizes come from the kwargs.
    assert (parsed.info_dim, parsed.info_depth, parsed.info_heads) == (32, 4, 2)
    assert parsed.ray_intermediate_dims == tiny_config.ray_intermediate_dims
    assert parsed.encoder_dim == 1024
    v1 = {
        "encoder_config": {"encoder_str": "dinov2", "size": "large", "with_registers": False},
        "info_sharing_config": {"model_type": "alternating_attention",
                                "module_args": {"depth": 24, "indices": [11, 17]}},
        "geometric_input_config": {
            "ray_dirs_encoder_config": {"intermediate_dims": [588, 768, 1024]},
            "cam_rot_encoder_config": {"intermediate_dims": [128, 256, 512]},
        },
    }
    assert MapAnythingV1Config.from_init_kwargs(v1) == preset("full")
    with pytest.raises(ValueError, match="unknown MapAnythingV1Config fields"):
        MapAnythingV1Config.from_dict({"encoder_width": 3})
