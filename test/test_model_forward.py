"""G2GModel forward: shapes, unequal groups, input errors, gradients, the no-cross-group mask."""

import pytest
import torch

from g2g_model.model.config import preset
from g2g_model.model.g2g import G2GModel

P = 6  # patches per frame: small on purpose


def _model(**overrides):
    torch.manual_seed(0)
    return G2GModel(preset("tiny", max_frames=4, **overrides))


def _features(batch, frames, dim=64, seed=1):
    return torch.randn(batch, frames, P, dim, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("frames_a, frames_b", [(4, 4), (2, 4), (4, 1), (1, 3)])
def test_unequal_groups(frames_a, frames_b):
    model = _model().eval()
    with torch.no_grad():
        out = model(_features(2, frames_a), _features(2, frames_b, seed=2))
    targets = frames_a - 1 + frames_b
    assert out["rotations_6d"].shape == (2, targets, 6)
    assert out["poses"].shape == (2, targets, 4, 4)
    assert out["poses_a"].shape == (2, frames_a - 1, 4, 4)
    assert out["poses_b"].shape == (2, frames_b, 4, 4)
    assert out["translations_b"].shape == (2, frames_b, 3)
    rot = out["rotation_matrices"]
    assert torch.allclose(rot.transpose(-1, -2) @ rot, torch.eye(3).expand_as(rot), atol=1e-5)
    assert torch.equal(out["poses"][..., :3, :3], rot)
    assert torch.equal(out["poses"][..., :3, 3], out["translations"])


def test_identity_rows_are_tied_to_frame_roles():
    head = _model().pose_head
    assert head.identity_indices(4, 4).tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert head.identity_indices(2, 3).tolist() == [0, 3, 4, 5]
    assert head.identity_indices(1, 1).tolist() == [3]


def test_group_b_prediction_depends_on_group_a_frames():
    # With group B of 1 frame, B0 depends on A only through attention; dropping A frames
    # must therefore change B0's prediction (the bridge is really joint).
    model = _model().eval()
    fa, fb = _features(1, 4), _features(1, 1, seed=2)
    with torch.no_grad():
        full = model(fa, fb)["poses_b"]
        fewer = model(fa[:, :2], fb)["poses_b"]
    assert not torch.allclose(full, fewer)


@pytest.mark.parametrize("which", ["features_a", "features_b"])
def test_too_many_frames_raises(which):
    model = _model()
    fa, fb = _features(1, 4), _features(1, 4)
    if which == "features_a":
        fa = _features(1, 5)
    else:
        fb = _features(1, 5)
    with pytest.raises(ValueError, match=f"{which} has 5 frames.*max_frames=4"):
        model(fa, fb)


def test_other_bad_inputs_name_the_problem():
    model = _model()
    with pytest.raises(ValueError, match="input_dim=64"):
        model(_features(1, 2, dim=32), _features(1, 2, dim=32))
    with pytest.raises(ValueError, match="batch sizes differ"):
        model(_features(1, 2), _features(2, 2))
    with pytest.raises(ValueError, match=r"\[B, N, P, D_in\]"):
        model(_features(1, 2)[0], _features(1, 2))
    with pytest.raises(ValueError, match="0 frames"):
        model(_features(1, 0), _features(1, 2))


def test_input_projection_only_when_dims_differ():
    assert isinstance(_model().embed_proj, torch.nn.Identity)
    proj = _model(input_dim=48)
    assert isinstance(proj.embed_proj, torch.nn.Linear)
    out = proj(_features(1, 3, dim=48), _features(1, 2, dim=48))
    assert out["poses"].shape == (1, 4, 4, 4)


def test_initial_prediction_is_identity_rotation_and_zero_translation_bias():
    model = _model()
    assert model.pose_head.rotation_head.bias.tolist() == [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert model.pose_head.translation_head.bias.abs().sum() == 0


def test_gradients_reach_every_trainable_parameter():
    model = _model(input_dim=48).train()
    out = model(_features(2, 4, dim=48), _features(2, 3, dim=48, seed=2))
    weights = torch.randn(out["poses"].shape, generator=torch.Generator().manual_seed(5))
    (out["poses"] * weights).sum().backward()
    for name, param in model.named_parameters():
        assert param.grad is not None, name
        assert torch.isfinite(param.grad).all(), name
        assert param.grad.abs().sum() > 0, name


def test_no_cross_group_ablation_isolates_the_bridge():
    fa, fb = _features(1, 3), _features(1, 3, seed=2)
    fa_other = _features(1, 3, seed=3)
    for cross, isolated in ((True, False), (False, True)):
        model = _model(cross_group_attention=cross).eval()
        with torch.no_grad():
            tokens = model(fa, fb, return_intermediates=True)["intermediate.all_tokens_b"]
            other = model(fa_other, fb, return_intermediates=True)["intermediate.all_tokens_b"]
        assert torch.allclose(tokens, other, atol=1e-6) == isolated
        mask = model.bridge.group_mask(3, 2, 8, torch.device("cpu"))
        if cross:
            assert mask is None
        else:
            assert mask.shape == (40, 40)
            assert not mask[:24, :24].any() and not mask[24:, 24:].any()
            assert mask[:24, 24:].all() and mask[24:, :24].all()
    # Same parameters either way: the ablation is a mask, not a different network.
    assert (sum(p.numel() for p in _model(cross_group_attention=False).parameters())
            == sum(p.numel() for p in _model().parameters()))


def test_without_anchor_embeddings():
    model = _model(use_anchor_embed=False)
    keys = set(model.state_dict())
    assert "bridge.anchor_embed" not in keys and "bridge.anchor_embed_merge" not in keys
    single = _model(reinject_anchor_after_merge=False)
    assert "bridge.anchor_embed" in set(single.state_dict())
    assert "bridge.anchor_embed_merge" not in set(single.state_dict())
    assert model(_features(1, 2), _features(1, 2))["poses"].shape == (1, 3, 4, 4)


def test_anchor_insertion_points():
    model = _model().eval()
    bridge = model.bridge
    lat_a, lat_b = torch.zeros(1, 2, 8, 64), torch.zeros(1, 3, 8, 64)
    _, _, inter = bridge(lat_a, lat_b, return_intermediates=True)
    merged = inter["bridge_merged_input"][0]
    fe, ge = bridge.frame_embed[:, 0], bridge.group_embed[:, 0]
    a0 = fe[0] + bridge.anchor_embed[0, 0] + ge[0] + bridge.anchor_embed_merge[0, 0]
    torch.testing.assert_close(merged[:8], a0.expand(8, -1))
    torch.testing.assert_close(merged[8:16], (fe[1] + ge[0]).expand(8, -1))
    torch.testing.assert_close(merged[16:24], (fe[0] + ge[1]).expand(8, -1))  # B0: no anchor
    torch.testing.assert_close(merged[32:40], (fe[2] + ge[1]).expand(8, -1))


def test_bf16_autocast_keeps_poses_in_float32():
    model = _model().eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(_features(1, 2), _features(1, 2))
    rot = out["rotation_matrices"]
    assert rot.dtype == torch.float32 and out["poses"].dtype == torch.float32
    assert torch.allclose(rot.transpose(-1, -2) @ rot, torch.eye(3).expand_as(rot), atol=1e-5)


@pytest.mark.parametrize("mode", ["grad", "inference", "bf16"])
def test_batch_first_attention_equals_torch_attention(mode):
    """The modules' attention hands torch sequence-first memory (speed); it computes what
    nn.MultiheadAttention does on the same batch-first tensors, key and value one tensor or
    two, with a mask, with gradients, in inference and under bf16 autocast."""
    from g2g_model.model.layers import BatchFirstAttention

    torch.manual_seed(0)
    ours = BatchFirstAttention(32, 4, dropout=0.0, batch_first=True).eval()
    reference = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    reference.load_state_dict(ours.state_dict())
    query, context = torch.randn(6, 5, 32), torch.randn(6, 9, 32)
    mask = torch.rand(5, 5) > 0.7
    mask.fill_diagonal_(False)
    cases = [((query, context, context), {}), ((query, context, context.clone()), {}),
             ((query, query, query), {"attn_mask": mask})]
    tol = 3e-2 if mode == "bf16" else 1e-5
    for args, kwargs in cases:
        if mode == "grad":
            got = ours(*args, need_weights=False, **kwargs)[0]
            want = reference(*args, need_weights=False, **kwargs)[0]
            got.sum().backward()
            assert ours.in_proj_weight.grad is not None
        else:
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16,
                                                        enabled=mode == "bf16"):
                got = ours(*args, need_weights=False, **kwargs)[0]
                want = reference(*args, need_weights=False, **kwargs)[0]
        assert got.shape == want.shape == query.shape
        assert torch.allclose(got.float(), want.float(), atol=tol, rtol=tol), mode
