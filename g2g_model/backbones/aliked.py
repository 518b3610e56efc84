"""ALIKED local features in plain PyTorch: a frozen image-encoder candidate (docs/TRAINING.md).

ALIKED (Zhao et al., "ALIKED: A Lighter Keypoint and Descriptor Extraction Network via
Deformable Transformation", IEEE T-IM 2023) is a small keypoint detector and descriptor trained
to match across viewpoint and lighting. This is our own implementation of the published
architecture; the pretrained weights come from the BSD-3-Clause repository Shiaoming/ALIKED and
are converted with their provenance by ``tools/make_aliked_asset.py``.

Architecture (``c1..c4``, ``dim``, ``M`` per variant in :data:`VARIANTS`; SELU after every
normalisation or projection; batch norm in eval mode):

* input RGB in [0, 1] (no mean/std normalisation), replicate-padded (centred) to a multiple of 32;
* ``block1``: two 3x3 convolutions at full resolution (``c1`` channels);
* ``block2``: after 2x2 average pooling, a residual block of two 3x3 convolutions (``c2``);
* ``block3``, ``block4``: after 4x4 average pooling each, residual blocks whose two 3x3
  convolutions are *deformable*: a plain 3x3 convolution predicts an (dy, dx) offset per kernel
  tap and pixel (clamped to a quarter of the larger side of that level), and the kernel reads
  the input bilinearly at the shifted taps (zeros outside); a 1x1 convolution with bias is the
  shortcut. Strides 1, 2, 8, 32;
* aggregation: each level goes through a 1x1 projection to ``dim/4`` channels, is upsampled to
  full resolution (bilinear, corners aligned) and the four are concatenated: the L2-normalised
  result is the dense ``feature_map`` ([B, dim, H, W]);
* score head: 1x1 to 8, three 3x3 convolutions (4, 4, 1 channels), sigmoid;
* descriptor head (SDDH): for a keypoint, a 3x3 convolution over the 3x3 patch of the feature
  map around it and a 1x1 convolution give ``M`` sampling offsets (x then y, clamped to a
  quarter of the larger image side); the feature map is sampled bilinearly there, each sample
  goes through a shared 1x1 projection and SELU, and ``M`` per-position ``dim x dim`` matrices
  sum them into one descriptor, L2-normalised.

Parameter names follow the published state dicts, so they load strictly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

# variant -> (c1, c2, c3, c4, dim, M): channels per level, descriptor size, SDDH positions.
VARIANTS: Dict[str, Tuple[int, int, int, int, int, int]] = {
    "t16": (8, 16, 32, 64, 64, 16),
    "n16": (16, 32, 64, 128, 128, 16),
    "n32": (16, 32, 64, 128, 128, 32),
}
ASSET_KEY = "g2g_pretrained_aliked"
ASSET_VERSION = 1
_ROOT = Path(__file__).resolve().parents[2]


def asset_path(variant: str) -> Path:
    """The converted weights: shipped in ``g2g_model/assets/`` if they are, else the working
    copy under ``outputs/aliked/`` that ``tools/make_aliked_asset.py`` writes by default."""
    name = f"aliked_{variant}.safetensors"
    shipped = _ROOT / "g2g_model" / "assets" / name
    return shipped if shipped.is_file() else _ROOT / "outputs" / "aliked" / name


def _to_grid(px: torch.Tensor, size: int) -> torch.Tensor:
    """Pixel coordinates (centres at integers) -> grid_sample coordinates, align_corners=False."""
    return (2.0 * px + 1.0) / size - 1.0


def sample_bilinear(x: torch.Tensor, px: torch.Tensor, py: torch.Tensor) -> torch.Tensor:
    """``x`` [B, C, H, W] read at pixel positions ``px``, ``py`` [B, P, Q] -> [B, C, P, Q];
    bilinear, zero outside the map."""
    h, w = x.shape[-2:]
    grid = torch.stack([_to_grid(px, w), _to_grid(py, h)], dim=-1)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def deform_conv3x3(x: torch.Tensor, offset: torch.Tensor, weight: torch.Tensor,
                   bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """3x3 deformable convolution, stride 1, padding 1.

    ``offset`` [B, 18, H, W] holds (dy, dx) for the taps in row-major order (tap ``k`` of kernel
    row ``i``, column ``j`` is ``3 i + j``; channels ``2k``, ``2k + 1``). Output pixel (y, x)
    reads the input at (y + i - 1 + dy, x + j - 1 + dx). Zero offsets give ``F.conv2d(x, weight,
    bias, padding=1)``.
    """
    b, c, h, w = x.shape
    ys = torch.arange(h, dtype=x.dtype, device=x.device).view(1, 1, h, 1)
    xs = torch.arange(w, dtype=x.dtype, device=x.device).view(1, 1, 1, w)
    taps = torch.arange(9, device=x.device)
    ty = (taps // 3 - 1).to(x.dtype).view(1, 9, 1, 1)
    tx = (taps % 3 - 1).to(x.dtype).view(1, 9, 1, 1)
    py = ys + ty + offset[:, 0::2]  # [B, 9, H, W]
    px = xs + tx + offset[:, 1::2]
    cols = sample_bilinear(x, px.reshape(b, 9 * h, w), py.reshape(b, 9 * h, w))
    cols = cols.view(b, c, 9, h * w)
    out = torch.einsum("bckp,ock->bop", cols, weight.reshape(weight.shape[0], c, 9))
    out = out.reshape(b, -1, h, w)
    return out if bias is None else out + bias.view(1, -1, 1, 1)


class DeformableConv3x3(nn.Module):
    """A 3x3 convolution whose taps move by offsets predicted from its input (no modulation)."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.offset_conv = nn.Conv2d(cin, 18, 3, padding=1, bias=True)
        self.regular_conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        limit = max(x.shape[-2:]) / 4.0
        offset = self.offset_conv(x).clamp(-limit, limit)
        return deform_conv3x3(x, offset, self.regular_conv.weight, self.regular_conv.bias)


def _conv3x3(cin: int, cout: int, deformable: bool) -> nn.Module:
    return DeformableConv3x3(cin, cout) if deformable else nn.Conv2d(cin, cout, 3, 1, 1,
                                                                     bias=False)


class _Block(nn.Module):
    """Two (deformable) 3x3 convolutions with batch norm and SELU; residual when ``shortcut``."""

    def __init__(self, cin: int, cout: int, shortcut: bool, deformable: bool = False) -> None:
        super().__init__()
        self.conv1, self.bn1 = _conv3x3(cin, cout, deformable), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = _conv3x3(cout, cout, deformable), nn.BatchNorm2d(cout)
        self.downsample = nn.Conv2d(cin, cout, 1) if shortcut else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(F.selu(self.bn1(self.conv1(x)))))
        if self.downsample is None:
            return F.selu(out)
        return F.selu(out + self.downsample(x))


class SDDH(nn.Module):
    """Sparse deformable descriptor head: ``M`` learned sampling offsets per keypoint."""

    def __init__(self, dim: int, positions: int) -> None:
        super().__init__()
        self.positions = positions
        self.offset_conv = nn.Sequential(nn.Conv2d(dim, 2 * positions, 3), nn.SELU(),
                                         nn.Conv2d(2 * positions, 2 * positions, 1))
        self.sf_conv = nn.Conv2d(dim, dim, 1, bias=False)
        self.agg_weights = nn.Parameter(torch.rand(positions, dim, dim))

    def forward(self, feature_map: torch.Tensor, keypoints: torch.Tensor) -> torch.Tensor:
        """``feature_map`` [B, C, H, W], ``keypoints`` [B, N, 2] pixel (x, y) -> [B, N, C]."""
        b, c, h, w = feature_map.shape
        n, m = keypoints.shape[1], self.positions
        # The 3x3 patch around each keypoint's integer pixel, kept inside the map (as published:
        # its top-left corner is min(max(k - 1, 0), size - 4)).
        corner = (keypoints.long() - 1).clamp(min=0)
        cx = corner[..., 0].clamp(max=w - 4)
        cy = corner[..., 1].clamp(max=h - 4)
        d = torch.arange(3, device=keypoints.device)
        rows = (cy[..., None, None] + d.view(1, 1, 3, 1)).expand(b, n, 3, 3)
        cols = (cx[..., None, None] + d.view(1, 1, 1, 3)).expand(b, n, 3, 3)
        flat = (rows * w + cols).reshape(b, 1, n * 9).expand(b, c, n * 9)
        patches = feature_map.reshape(b, c, h * w).gather(2, flat).view(b, c, n, 3, 3)
        patches = patches.permute(0, 2, 1, 3, 4).reshape(b * n, c, 3, 3)
        limit = max(h, w) / 4.0
        offset = self.offset_conv(patches).view(b, n, 2, m).clamp(-limit, limit)
        px = keypoints[..., 0:1].to(feature_map.dtype) + offset[:, :, 0]  # [B, N, M]
        py = keypoints[..., 1:2].to(feature_map.dtype) + offset[:, :, 1]
        feats = sample_bilinear(feature_map, px, py)  # [B, C, N, M]
        feats = F.selu(self.sf_conv(feats))
        desc = torch.einsum("bcnm,mcd->bnd", feats, self.agg_weights)
        return F.normalize(desc, dim=-1)


class ALIKED(nn.Module):
    """ALIKED network (``variant`` "t16", "n16" or "n32"), frozen and in eval mode.

    Args:
        variant: the size, see :data:`VARIANTS`.
        load_weights: read the converted pretrained weights (:func:`load_pretrained`); False
            leaves random weights (tests of shapes).
        path: the converted file (default :func:`asset_path`).
    """

    def __init__(self, variant: str = "t16", load_weights: bool = True,
                 path: Optional[Path] = None) -> None:
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(f"ALIKED variant must be one of {sorted(VARIANTS)}, got {variant!r}")
        c1, c2, c3, c4, dim, positions = VARIANTS[variant]
        self.variant, self.dim = variant, dim
        self.block1 = _Block(3, c1, shortcut=False)
        self.block2 = _Block(c1, c2, shortcut=True)
        self.block3 = _Block(c2, c3, shortcut=True, deformable=True)
        self.block4 = _Block(c3, c4, shortcut=True, deformable=True)
        for i, cin in enumerate((c1, c2, c3, c4), start=1):
            setattr(self, f"conv{i}", nn.Conv2d(cin, dim // 4, 1, bias=False))
        self.score_head = nn.Sequential(
            nn.Conv2d(dim, 8, 1, bias=False), nn.SELU(), nn.Conv2d(8, 4, 3, 1, 1, bias=False),
            nn.SELU(), nn.Conv2d(4, 4, 3, 1, 1, bias=False), nn.SELU(),
            nn.Conv2d(4, 1, 3, 1, 1, bias=False))
        self.desc_head = SDDH(dim, positions)
        if load_weights:
            self.load_state_dict(load_pretrained(variant, path))
        self.requires_grad_(False)
        self.eval()

    def train(self, mode: bool = True) -> "ALIKED":
        """Always eval: the frozen network keeps its batch-norm statistics."""
        return super().train(False)

    def forward(self, images: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``[B, 3, H, W]`` RGB in [0, 1] -> (feature map ``[B, dim, H, W]``, unit length per
        pixel; score map ``[B, 1, H, W]`` in (0, 1))."""
        h, w = images.shape[-2:]
        ph, pw = (-h) % 32, (-w) % 32
        pad = (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2)
        x = F.pad(images, pad, mode="replicate") if ph or pw else images
        x1 = self.block1(x)
        x2 = self.block2(F.avg_pool2d(x1, 2))
        x3 = self.block3(F.avg_pool2d(x2, 4))
        x4 = self.block4(F.avg_pool2d(x3, 4))
        size = x1.shape[-2:]
        levels = [F.selu(self.conv1(x1))]
        for conv, feat in ((self.conv2, x2), (self.conv3, x3), (self.conv4, x4)):
            levels.append(F.interpolate(F.selu(conv(feat)), size=size, mode="bilinear",
                                        align_corners=True))
        both = torch.cat(levels, dim=1)
        scores = torch.sigmoid(self.score_head(both))
        feats = F.normalize(both, dim=1)
        crop = (..., slice(pad[2], pad[2] + h), slice(pad[0], pad[0] + w))
        return feats[crop], scores[crop]

    def describe(self, feature_map: torch.Tensor, keypoints: torch.Tensor) -> torch.Tensor:
        """SDDH descriptors ``[B, N, dim]`` at pixel positions ``keypoints`` [B, N, 2] (x, y)."""
        return self.desc_head(feature_map, keypoints)

    @staticmethod
    def detect(scores: torch.Tensor, top_k: int, radius: int = 2
               ) -> Tuple[torch.Tensor, torch.Tensor]:
        """The ``top_k`` local maxima of ``scores`` [B, 1, H, W] (window ``2 radius + 1``, not
        within ``radius`` of the border) -> (integer pixel (x, y) ``[B, K, 2]``, scores
        ``[B, K]``). A simplification of the published detector: no sub-pixel refinement."""
        b, _, h, w = scores.shape
        peak = scores == F.max_pool2d(scores, 2 * radius + 1, 1, radius)
        keep = torch.where(peak, scores, torch.zeros_like(scores))
        keep[..., :radius, :] = 0
        keep[..., h - radius:, :] = 0
        keep[..., :radius] = 0
        keep[..., w - radius:] = 0
        best = keep.view(b, -1).topk(top_k, dim=1)
        xy = torch.stack([best.indices % w, best.indices // w], dim=-1)
        return xy, best.values

    def cell_descriptors(self, images: torch.Tensor, grid: Union[int, Tuple[int, int]],
                         head: str = "map", step: int = 4) -> torch.Tensor:
        """One unit descriptor per cell of a ``grid x grid`` (or ``(rows, cols)``) partition of
        the image, ``[B, rows, cols, dim]``: ``head`` "map" averages the dense feature map over
        the cell; "sddh" averages SDDH descriptors at the pixels of a ``step``-pixel lattice in
        the cell."""
        feats, _ = self(images)
        if head == "map":
            pooled = F.adaptive_avg_pool2d(feats, grid)
        elif head == "sddh":
            h, w = feats.shape[-2:]
            ys = torch.arange(step // 2, h, step, device=feats.device)
            xs = torch.arange(step // 2, w, step, device=feats.device)
            yy, xx = torch.meshgrid(ys, xs, indexing="ij")
            kp = torch.stack([xx.reshape(-1), yy.reshape(-1)], -1).float()
            desc = self.describe(feats, kp.expand(feats.shape[0], -1, -1))
            desc = desc.transpose(1, 2).reshape(feats.shape[0], -1, len(ys), len(xs))
            pooled = F.adaptive_avg_pool2d(desc, grid)
        else:
            raise ValueError(f"head must be 'map' or 'sddh', got {head!r}")
        return F.normalize(pooled, dim=1).permute(0, 2, 3, 1)


class AlikedPatchStem(nn.Module):
    """``[M, 3, H, W]`` in [0, 1] -> ``[M, (H/16) * (W/16), D]``: the frozen network's SDDH
    descriptors averaged per 16-pixel cell (:meth:`ALIKED.cell_descriptors`, the encoder the
    probe chose, docs/TRAINING.md "Encoders") under a trainable LayerNorm and projection to
    ``dim``, row-major patches like :class:`g2g_model.backbones.compact_stem.PatchStem`."""

    def __init__(self, dim: int, variant: str = "t16", load_weights: bool = True) -> None:
        super().__init__()
        self.net = ALIKED(variant, load_weights=load_weights)
        self.patch_size = 16
        self.norm = nn.LayerNorm(self.net.dim)
        self.proj = nn.Linear(self.net.dim, dim)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        h, w = images.shape[-2:]
        with torch.no_grad():
            cells = self.net.cell_descriptors(images, (h // 16, w // 16), head="sddh")
        return self.proj(self.norm(cells.flatten(1, 2)))


class AlikedCellTrunk(nn.Module):
    """``[M, 3, H, W]`` in [0, 1] -> ``[M, dim, H/16, W/16]``: the frozen network's SDDH
    descriptors averaged per 16-pixel cell (:meth:`ALIKED.cell_descriptors`), unit length, as
    a stride-16 feature map: the shape of the MobileNetV2 trunk's, so that the rotation matcher
    (:mod:`g2g_model.estimation.rotation_matching`) can match cells of either."""

    def __init__(self, variant: str = "t16", load_weights: bool = True) -> None:
        super().__init__()
        self.net = ALIKED(variant, load_weights=load_weights)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        h, w = images.shape[-2:]
        cells = self.net.cell_descriptors(images, (h // 16, w // 16), head="sddh")
        return cells.permute(0, 3, 1, 2)


def load_pretrained(variant: str, path: Optional[Path] = None) -> Dict[str, torch.Tensor]:
    """The converted ALIKED weights of ``variant`` (header checked; read into memory)."""
    from g2g_model.tagged_safetensors import read_tagged

    path = Path(path) if path is not None else asset_path(variant)
    if not path.is_file():
        raise FileNotFoundError(
            f"ALIKED {variant} weights not found at {path}; create them with "
            f"`python tools/make_aliked_asset.py --variant {variant}`")
    header, weights = read_tagged(path, ASSET_KEY, ASSET_VERSION, "ALIKED weights file")
    if header.get("architecture") != "aliked" or header.get("variant") != variant:
        raise ValueError(f"{path} holds {header.get('architecture')!r} "
                         f"{header.get('variant')!r}, not aliked {variant!r}")
    return weights
