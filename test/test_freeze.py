"""Freezing by name: loud on typos, eval mode locked, no gradient into frozen parameters."""

import copy
import io

import pytest
import torch
from torch import nn

from g2g_model.training.freeze import (
    freeze_modules, frozen_module_names, is_frozen, match_module_names, unfreeze_modules,
)


class TinyModel(nn.Module):
    """A small transformer 'backbone' with dropout and a trainable head."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32,
                                           dropout=0.5, batch_first=True)
        self.backbone = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.bridge = nn.Sequential(nn.LayerNorm(16), nn.Dropout(0.5), nn.Linear(16, 16))
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.bridge(self.backbone(x))).mean(dim=1)


def make_model():
    torch.manual_seed(0)
    return TinyModel()


def test_no_gradient_reaches_frozen_parameters_and_optimizer_leaves_them():
    model = make_model()
    assert freeze_modules(model, ["backbone"]) == ["backbone"]
    model.train()
    before = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2,
                            weight_decay=0.01)
    x = torch.randn(4, 5, 16)
    loss = model(x).pow(2).sum()
    loss.backward()
    assert all(p.grad is None for p in model.backbone.parameters())
    assert all(p.grad is not None and p.grad.abs().sum() > 0
               for p in model.head.parameters())
    opt.step()
    for k, v in model.backbone.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_frozen_modules_stay_in_eval_mode():
    model = make_model()
    freeze_modules(model, "backbone")
    model.train()
    assert model.training and model.head.training and model.bridge[1].training
    assert not any(m.training for m in model.backbone.modules())
    # Direct train() on a frozen submodule is also refused.
    model.backbone.layers[0].train()
    assert not model.backbone.layers[0].training
    # Dropout inside the frozen backbone is inactive: its output is deterministic in train mode.
    x = torch.randn(2, 5, 16)
    assert torch.equal(model.backbone(x), model.backbone(x))
    # ...while the trainable bridge's dropout is active.
    y = model.backbone(x)
    assert not torch.equal(model.bridge(y), model.bridge(y))
    model.eval()
    model.train(True)
    assert not model.backbone.training
    # The lock survives deepcopy; state_dict keys are unchanged by freezing.
    clone = copy.deepcopy(model)
    clone.train()
    assert not clone.backbone.training and clone.head.training
    assert list(clone.state_dict()) == list(make_model().state_dict())
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    loaded.train()
    assert not loaded.backbone.training and loaded.head.training


def test_patterns_globs_and_errors():
    model = make_model()
    with pytest.raises(ValueError, match="'backbon' matches no submodule"):
        freeze_modules(model, ["backbon"])
    with pytest.raises(ValueError, match="at least one"):
        freeze_modules(model, [])
    # Nothing was frozen by the failed calls.
    assert all(p.requires_grad for p in model.parameters())
    names = match_module_names(model, ["backbone.layers.*", "backbone.layers.0.linear1"])
    assert names == ["backbone.layers.0", "backbone.layers.1"]
    frozen = freeze_modules(model, ["backbone.layers.1", "bridge.0"])
    assert frozen == ["backbone.layers.1", "bridge.0"]
    assert frozen_module_names(model) == frozen
    assert all(p.requires_grad for p in model.backbone.layers[0].parameters())
    assert not any(p.requires_grad for p in model.backbone.layers[1].parameters())
    model.train()
    assert model.backbone.layers[0].training and not model.backbone.layers[1].training
    x = torch.randn(2, 5, 16)
    model(x).sum().backward()
    assert model.backbone.layers[0].linear1.weight.grad is not None
    assert model.backbone.layers[1].linear1.weight.grad is None
    assert model.bridge[0].weight.grad is None and model.bridge[2].weight.grad is not None


def test_unfreeze_restores_training():
    model = make_model()
    freeze_modules(model, "backbone")
    unfreeze_modules(model, "backbone")
    assert not is_frozen(model.backbone) and frozen_module_names(model) == []
    model.train()
    assert model.backbone.training
    assert all(p.requires_grad for p in model.parameters())
