"""Official G2G weights: parameter counts, key lists, golden outputs, strict loading.

Golden data: fixtures/g2g_official (official classes run unmodified, see its README.txt).
"""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from g2g_model.model.config import preset
from g2g_model.model.g2g import G2GModel, count_parameters
from g2g_model.model.official import (
    IGNORED_KEYS,
    extract_state_dict,
    infer_config,
    load_official,
    load_official_state_dict,
)

REPO = Path(__file__).resolve().parents[1]
# A copy of ../shared/fixtures/g2g_official (golden data from the official code), kept in the
# repository so that a fresh clone tests against it.
FIXTURES = REPO / "test" / "fixtures" / "g2g_official"
TOL = 1e-5  # the fixture README's suggested tolerance (measured differences are ~2e-6)
CASES = {"tiny": 64, "tiny_proj": 48}
EXPECTED_TOTAL = {4: 32_108_297, 5: 32_110_601, 8: 32_117_513}


@pytest.fixture(scope="module", params=[4, 5, 8])
def paper_model(request):
    torch.manual_seed(0)
    return request.param, G2GModel(preset("paper", max_frames=request.param))


def test_paper_parameter_counts(paper_model):
    frames, model = paper_model
    counts = count_parameters(model)
    assert counts["total"] == EXPECTED_TOTAL[frames]
    assert counts["embed_proj"] == 0
    if frames == 5:
        assert (counts["resampler"], counts["bridge"], counts["pose_head"]) == (
            14_229_504, 14_184_192, 3_696_905)


def test_official_key_list_loads_exactly(paper_model):
    frames, model = paper_model
    spec = json.loads((FIXTURES / f"official_g2g_keys_W{frames}.json").read_text())
    assert spec["total_parameters"] == EXPECTED_TOTAL[frames]
    # A distinct constant per tensor, so a key mapped onto the wrong parameter would show.
    state = {e["key"]: torch.full(e["shape"], float(i), dtype=getattr(torch, e["dtype"]))
             for i, e in enumerate(spec["keys"])}
    assert set(IGNORED_KEYS) <= set(state)
    load_official_state_dict(model, state)
    loaded = model.state_dict()
    assert list(loaded) == [e["key"] for e in spec["keys"] if e["key"] not in IGNORED_KEYS]
    for i, entry in enumerate(spec["keys"]):
        if entry["key"] in IGNORED_KEYS:
            continue
        value = loaded[entry["key"]]
        assert list(value.shape) == entry["shape"]
        assert value.min() == value.max() == i, entry["key"]
    assert infer_config(state) == preset("paper", max_frames=frames)


def _fixture_state(case):
    return load_file(str(FIXTURES / f"{case}_state_dict.safetensors"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_seeded_init_reproduces_official_init_bit_exactly(case):
    torch.manual_seed(0)
    model = G2GModel(preset("tiny", input_dim=CASES[case]))
    official = _fixture_state(case)
    ours = model.state_dict()
    assert set(ours) == set(official) - set(IGNORED_KEYS)
    for key, value in ours.items():
        assert torch.equal(value, official[key]), key


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_outputs_and_intermediates(case):
    config = json.loads((FIXTURES / f"{case}_config.json").read_text())
    cfg = preset(
        "tiny",
        hidden_dim=config["embed_dim (hidden C)"],
        num_heads=config["num_heads"],
        mlp_ratio=config["ff_mult"],
        num_latents=config["num_latents (L)"],
        resampler_layers=config["resampler_layers"],
        bridge_layers=config["bridge_merged_layers"],
        pose_head_hidden_dim=config["pose_head_hidden_dim"],
        pose_head_layers=config["pose_head_layers"],
        max_frames=config["num_frames_per_group (W)"],
        input_dim=config["input_feature_dim (D_in, backbone info_sharing dim)"],
        layernorm_eps=config["layernorm_eps"],
        reinject_anchor_after_merge=config["reinject_anchor_after_merge"],
        use_anchor_embed=config["use_anchor_embed"],
    )
    assert cfg == preset("tiny", input_dim=CASES[case])
    model = G2GModel(cfg)
    load_official_state_dict(model, _fixture_state(case))
    assert sum(p.numel() for p in model.parameters()) == config["num_parameters"]
    model.eval()
    inputs = load_file(str(FIXTURES / f"{case}_inputs.safetensors"))
    expected = load_file(str(FIXTURES / f"{case}_outputs.safetensors"))
    with torch.no_grad():
        out = model(inputs["features_a"], inputs["features_b"], return_intermediates=True)
    out["T_rel"] = out["poses_b"][:, 0]  # the official name of T_{A0<-B0}
    assert len(expected) == 22
    for key, value in expected.items():
        assert out[key].shape == value.shape, key
        torch.testing.assert_close(out[key], value, atol=TOL, rtol=TOL, msg=key)
    # and the same model with gradients enabled (MHA slow path) agrees
    with torch.enable_grad():
        again = model(inputs["features_a"], inputs["features_b"])
    torch.testing.assert_close(again["poses"].detach(), out["poses"], atol=TOL, rtol=TOL)


def test_bad_keys_are_all_listed_and_nothing_is_loaded():
    model = G2GModel(preset("tiny"))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state = _fixture_state("tiny")
    del state["pose_head.rotation_head.bias"]
    state["bridge.extra_embed"] = torch.zeros(3)
    state["resampler.latents"] = torch.zeros(7, 64)
    with pytest.raises(ValueError) as info:
        load_official_state_dict(model, state)
    message = str(info.value)
    assert "pose_head.rotation_head.bias" in message
    assert "bridge.extra_embed" in message
    assert "resampler.latents" in message and "(7, 64)" in message
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_training_checkpoint_layouts(tmp_path):
    state = _fixture_state("tiny_proj")
    full = {
        "model_state_dict": {**state, "backbone.encoder.weight": torch.ones(2, 2)},
        "optimizer_state_dict": {"state": {}, "param_groups": []},
        "epoch": 3,
        "best_val_loss": 0.5,
    }
    assert set(extract_state_dict(full)) == set(state)
    assert set(extract_state_dict({"model": state})) == set(state)
    ddp = {"module." + k: v for k, v in state.items()}
    assert set(extract_state_dict(ddp)) == set(state)
    with pytest.raises(ValueError, match="epoch"):
        extract_state_dict({"epoch": 3, **state})

    path = tmp_path / "ckpt.pth"
    torch.save(full, path)
    model = load_official(path, num_heads=4, max_frames=3)
    assert model.config == preset("tiny", input_dim=48)
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key
    with pytest.raises(ValueError, match="max_frames=3.*max_frames=5"):
        load_official(path, num_heads=4, max_frames=5)


def test_alternating_bridge_layers_are_refused_with_a_reason():
    state = _fixture_state("tiny")
    state["bridge.inter_layers_a.0.norm1.weight"] = torch.ones(64)
    with pytest.raises(ValueError, match="bridge_alternating_pairs"):
        infer_config(state, num_heads=4)
    with pytest.raises(ValueError, match="unexpected keys.*inter_layers_a"):
        load_official_state_dict(G2GModel(preset("tiny")), state)


def test_unreadable_official_file(tmp_path):
    bad = tmp_path / "bad.pth"
    bad.write_bytes(b"not a pickle at all")
    with pytest.raises(ValueError, match="cannot read official weights"):
        load_official(bad)
    with pytest.raises(ValueError, match="does not exist"):
        load_official(tmp_path / "missing.pth")


def test_integer_buffers_load_but_integers_for_weights_are_refused():
    # BatchNorm's num_batches_tracked is an integer buffer of the model itself (the MobileNetV2
    # stem): a G2G checkpoint's backbone loads as the stage-1 weights of a fine-tuning run.
    # Integers where the model keeps floating-point weights stay refused.
    from g2g_model.backbones.base import build_backbone
    from g2g_model.assets import default_checkpoint
    from g2g_model.model.checkpoint import load_any
    from g2g_model.model.official import load_state_dict_strictly
    from g2g_model.training.config import ModelConfig
    from g2g_model.training.models import build_backbone as build_training_backbone

    path = str(default_checkpoint("rig_odometry"))
    loaded = load_any(path)
    info = loaded.header["backbone"]
    backbone = build_backbone(info["name"], info["config"])
    ints = [k for k, v in backbone.state_dict().items() if not v.is_floating_point()]
    assert ints and all(k.endswith("num_batches_tracked") for k in ints)
    trained = build_training_backbone(ModelConfig(
        backbone="compact", backbone_preset="compact_mnv2",
        backbone_overrides={"image_size": [112, 112]}, backbone_weights=path))
    for key, value in trained.state_dict().items():
        assert torch.equal(value, loaded.backbone_state_dict[key]), key
    bad = dict(loaded.backbone_state_dict)
    weight = next(k for k, v in bad.items() if v.is_floating_point() and v.dim() > 1)
    bad[weight] = bad[weight].long()
    before = {k: v.clone() for k, v in backbone.state_dict().items()}
    with pytest.raises(ValueError, match=f"non-floating-point tensors: .*{weight}"):
        load_state_dict_strictly(backbone, bad, "test")
    for key, value in backbone.state_dict().items():
        assert torch.equal(value, before[key]), key
