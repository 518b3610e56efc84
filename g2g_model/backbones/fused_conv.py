"""Convolutions with their ReLU6 in one oneDNN call, weights stored in the dtype they run in.

The frozen MobileNetV2 trunk (:mod:`g2g_model.backbones.mobilenet_v2`) is a chain of
convolution -> ReLU6 pairs. Run as separate PyTorch ops on a CPU, every ReLU6 is one more pass
over the activations, and under bf16 autocast every convolution first casts its fp32 weight to
bf16 on every call. oneDNN, which runs PyTorch's CPU convolutions anyway, applies the
activation inside the convolution (``torch.ops.mkldnn._convolution_pointwise``, the kernel
PyTorch's own compiler emits for the same pattern); holding the weights in the dtype the trunk
runs in removes the casts. Ten frames of the trunk under bf16 (2026-11-30, 2 cores): 12.4 ->
10.0 ms at 112 px and 22.3 -> 14.1 ms at 160 px on a Xeon with AMX bf16, 5.7 -> 4.8 and 9.1 ->
7.6 ms on an AMD EPYC without AMX, the same features (``benchmarks/RESULTS_g2g.md``, trunk
tables).

The op is internal to PyTorch, so :func:`available` checks for it and the trunk keeps its plain
folded copy wherever it is missing (other builds, GPUs); ``test/test_mobilenet_trunk.py``
compares both against the reference network.
"""

from __future__ import annotations

import copy
from typing import List

import torch
from torch import nn


def available(device: torch.device) -> bool:
    """Whether fused convolutions can run on ``device`` (a CPU with oneDNN and the op)."""
    return (torch.device(device).type == "cpu" and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_convolution_pointwise"))


class ConvReLU6(nn.Module):
    """``conv`` (followed by ReLU6 when ``relu6``) as one oneDNN call, weights in ``dtype``;
    the input is cast to ``dtype`` (the output is in ``dtype``)."""

    def __init__(self, conv: nn.Conv2d, relu6: bool, dtype: torch.dtype) -> None:
        super().__init__()
        if conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise ValueError("fused convolutions take numeric zero padding only")
        self.register_buffer("weight", conv.weight.detach().to(dtype).clone())
        self.register_buffer("bias", None if conv.bias is None
                             else conv.bias.detach().to(dtype).clone())
        self.padding, self.stride = list(conv.padding), list(conv.stride)
        self.dilation, self.groups = list(conv.dilation), conv.groups
        self.activation, self.scalars = ("hardtanh", [0.0, 6.0]) if relu6 else ("none", [])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._convolution_pointwise(
            x.to(self.weight.dtype), self.weight, self.bias, self.padding, self.stride,
            self.dilation, self.groups, self.activation, self.scalars, "")


def fuse_activations(module: nn.Module, dtype: torch.dtype) -> nn.Module:
    """A copy of ``module`` with every ``Conv2d`` of an ``nn.Sequential`` (and the ``ReLU6``
    right after it, if any) replaced by :class:`ConvReLU6` in ``dtype``; other modules are
    copied, submodules with children are rebuilt the same way."""
    if isinstance(module, nn.Sequential):
        children = list(module)
        layers: List[nn.Module] = []
        index = 0
        while index < len(children):
            child = children[index]
            if isinstance(child, nn.Conv2d):
                relu6 = index + 1 < len(children) and isinstance(children[index + 1], nn.ReLU6)
                layers.append(ConvReLU6(child, relu6, dtype))
                index += 2 if relu6 else 1
            else:
                layers.append(fuse_activations(child, dtype))
                index += 1
        return nn.Sequential(*layers).eval()
    if not any(True for _ in module.children()):
        return copy.deepcopy(module).eval()
    fused = copy.copy(module)
    fused._parameters, fused._buffers = dict(module._parameters), dict(module._buffers)
    fused._modules = {name: fuse_activations(child, dtype)
                      for name, child in module.named_children()}
    return fused.eval()
