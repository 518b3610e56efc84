"""Matches between the cells of two frames' feature maps (steps 2 and 3 of
:mod:`g2g_model.estimation.rotation_matching`): mutual nearest neighbours by cosine, each moved
to where the similarity peaks between cells, and the viewing rays through matched cells.
"""

from __future__ import annotations

from typing import Tuple

import torch
import torch.nn.functional as F


def cell_rays(cells: torch.Tensor, stride: float, intrinsics: torch.Tensor,
              cam_to_anchor: torch.Tensor) -> torch.Tensor:
    """Unit rays ``[K, 3]`` in the anchor frame through the centres of grid ``cells`` ``[K, 2]``
    (column, row) described with ``stride`` pixels per cell; ``intrinsics`` ``[3, 3]`` and
    ``cam_to_anchor`` ``[4, 4]`` of one frame, or ``[K, 3, 3]`` / ``[K, 4, 4]``: each cell's
    own frame."""
    # Pixel centres at integer coordinates (g2g_model.estimation.groups): cell c spans pixels
    # [c stride, (c + 1) stride - 1].
    centres = (cells.double() + 0.5) * stride - 0.5
    pix = torch.cat([centres, torch.ones(len(cells), 1, dtype=torch.float64)], 1)
    k_inv = torch.linalg.inv(intrinsics.double())
    rotation = cam_to_anchor[..., :3, :3].double()
    if k_inv.dim() == 2:
        return F.normalize(pix @ k_inv.T, dim=1) @ rotation.T
    rays = F.normalize(torch.einsum("kij,kj->ki", k_inv, pix), dim=1)
    return torch.einsum("kij,kj->ki", rotation, rays)


def mutual_matches(feats_a: torch.Tensor, feats_b: torch.Tensor, subcell: bool = False
                   ) -> Tuple[torch.Tensor, ...]:
    """Mutual nearest neighbours (cosine) between the cells of two ``[C, h, w]`` feature maps:
    (cells of A ``[K, 2]``, cells of B ``[K, 2]``), (column, row). With ``subcell`` the cells of
    B are float: where A's cell falls between B's cells (:func:`subcell_offsets`)."""
    _, _, cells_a, cells_b = group_matches(feats_a[None], feats_b[None], subcell)
    return cells_a, cells_b


def group_matches(feats_a: torch.Tensor, feats_b: torch.Tensor, subcell: bool = False
                  ) -> Tuple[torch.Tensor, ...]:
    """:func:`mutual_matches` between every frame of ``[N, C, h, w]`` and every frame of
    ``[M, C, h', w']`` feature maps, in one batched product: (frame of A ``[K]``, frame of B
    ``[K]``, cells of A ``[K, 2]``, cells of B ``[K, 2]``), ordered by frame pair (A's frame,
    then B's), then by A's cell."""
    wa = feats_a.shape[-1]
    h, w = feats_b.shape[-2:]
    da = F.normalize(feats_a.flatten(2).transpose(1, 2).float(), dim=2)  # [N, hw_a, C]
    db = F.normalize(feats_b.flatten(2).transpose(1, 2).float(), dim=2)  # [M, hw_b, C]
    sim = torch.einsum("nac,mbc->nmab", da, db)  # [N, M, hw_a, hw_b]
    a_to_b, b_to_a = sim.argmax(3), sim.argmax(2)  # [N, M, hw_a], [N, M, hw_b]
    mutual = b_to_a.gather(2, a_to_b) == torch.arange(da.shape[1])
    fi, fj, ia = torch.nonzero(mutual, as_tuple=True)
    ib = a_to_b[fi, fj, ia]
    cells_a, cells_b = torch.stack([ia % wa, ia // wa], 1), torch.stack([ib % w, ib // w], 1)
    if subcell:
        cells_b = cells_b.double() + subcell_offsets(sim[fi, fj, ia].view(-1, h, w), cells_b)
    return fi, fj, cells_a, cells_b


def subcell_offsets(similarity: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
    """Offsets ``[K, 2]`` (column, row; within half a cell) of the similarity peaks: a parabola
    through each ``[K, h, w]`` map's best cell ``cells`` ``[K, 2]`` and its two neighbours, per
    axis (0 on the grid's border and where the three do not make a peak). A turn smaller than a
    cell keeps most matches at the same cell; the peak between cells still moves."""
    k = torch.arange(len(cells))
    offsets = []
    for axis, size in ((0, similarity.shape[2]), (1, similarity.shape[1])):
        step = torch.zeros_like(cells)
        step[:, axis] = 1
        lo, hi = (cells - step).clamp(min=0), cells + step
        hi[:, 0].clamp_(max=similarity.shape[2] - 1)
        hi[:, 1].clamp_(max=similarity.shape[1] - 1)
        left = similarity[k, lo[:, 1], lo[:, 0]].double()
        mid = similarity[k, cells[:, 1], cells[:, 0]].double()
        right = similarity[k, hi[:, 1], hi[:, 0]].double()
        curvature = left - 2 * mid + right
        inside = (cells[:, axis] > 0) & (cells[:, axis] < size - 1) & (curvature < -1e-6)
        offset = 0.5 * (left - right) / torch.where(inside, curvature, torch.ones_like(mid))
        offsets.append(torch.where(inside, offset, torch.zeros_like(mid)).clamp(-0.5, 0.5))
    return torch.stack(offsets, 1)
