"""One optimiser step of each task lowers the loss on a fixed batch."""

import torch

from g2g_model.backbones.compact import CompactBackbone
from g2g_model.training.compact_pretrain import CompactPretrainHeads, PretrainConfig
from g2g_model.training.losses import LossConfig
from g2g_model.model.config import preset
from g2g_model.model.g2g import G2GModel
from g2g_model.training.task_modules import PairTrainModule, PretrainModule, step_generator


def _random_poses(batch, frames, gen):
    poses = torch.eye(4).repeat(batch, frames, 1, 1)
    angle = torch.rand(batch, frames, generator=gen) * 0.5
    poses[..., 0, 0], poses[..., 0, 2] = angle.cos(), angle.sin()
    poses[..., 2, 0], poses[..., 2, 2] = -angle.sin(), angle.cos()
    poses[..., :3, 3] = torch.randn(batch, frames, 3, generator=gen)
    return poses


def test_g2g_step_reduces_loss_on_fixed_batch():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    module = PairTrainModule(G2GModel(preset("tiny")), LossConfig())
    fa, fb = torch.randn(4, 3, 16, 64, generator=gen), torch.randn(4, 3, 16, 64, generator=gen)
    gt_a, gt_b = _random_poses(4, 3, gen), _random_poses(4, 3, gen)
    gt_a[:, 0] = torch.eye(4)
    opt = torch.optim.AdamW(module.parameters(), lr=1e-3, weight_decay=0.01)
    before = module(fa, fb, gt_a, gt_b)["loss"]
    opt.zero_grad()
    before.backward()
    torch.nn.utils.clip_grad_norm_(module.parameters(), 5.0)
    opt.step()
    with torch.no_grad():
        after = module(fa, fb, gt_a, gt_b)["loss"]
    assert torch.isfinite(before) and after < before


def test_pretrain_step_reduces_loss_on_fixed_batch():
    torch.manual_seed(0)
    backbone = CompactBackbone("compact_xs")
    module = PretrainModule(backbone, CompactPretrainHeads.for_backbone(backbone),
                            PretrainConfig())
    gen = torch.Generator().manual_seed(2)
    k = torch.tensor([[32.0, 0, 31.5], [0, 32.0, 31.5], [0, 0, 1]])
    batch = {"images": torch.rand(2, 3, 3, 64, 64, generator=gen),
             "intrinsics": k.expand(2, 3, 3, 3).clone(),
             "cam_to_anchor": _random_poses(2, 3, gen),
             "depth": 1.0 + 3.0 * torch.rand(2, 3, 64, 64, generator=gen)}
    batch["cam_to_anchor"][:, 0] = torch.eye(4)
    opt = torch.optim.AdamW(module.parameters(), lr=1e-3)
    before = module(batch, step_generator(0, 0, 0))["loss"]
    opt.zero_grad()
    before.backward()
    opt.step()
    with torch.no_grad():
        after = module(batch, step_generator(0, 0, 0))["loss"]  # same hidden poses and noise
    assert after < before
