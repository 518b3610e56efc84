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
    (column, row) of one frame described with ``stride`` pixels per cell."""
    # Pixel centres at integer coordinates (g2g_model.estimation.groups): cell c spans pixels
    # [c stride, (c + 1) stride - 1].
    centres = (cells.double() + 0.5) * stride - 0.5
    pix = torch.cat([centres, torch.ones(len(cells), 1, dtype=torch.float64)], 1)
    rays = F.normalize(pix @ torch.linalg.inv(intrinsics.double()).T, dim=1)
    return rays @ cam_to_anchor[:3, :3].double().T


def mutual_matches(feats_a: torch.Tensor, feats_b: torch.Tensor, subcell: bool = False
                   ) -> Tuple[torch.Tensor, ...]:
    """Mutual nearest neighbours (cosine) between the cells of two ``[C, h, w]`` feature maps:
    (cells of A ``[K, 2]``, cells of B ``[K, 2]``), (column, row). With ``subcell`` the cells of
    B are float: where A's cell falls between B's cells (:func:`subcell_offsets`)."""
    wa = feats_a.shape[-1]
    h, w = feats_b.shape[-2:]
    da = F.normalize(feats_a.flatten(1).T.float(), dim=1)
    db = F.normalize(feats_b.flatten(1).T.float(), dim=1)
    sim = da @ db.T
    a_to_b, b_to_a = sim.argmax(1), sim.argmax(0)
    ia = torch.nonzero(b_to_a[a_to_b] == torch.arange(len(da))).flatten()
    ib = a_to_b[ia]
    cells_a, cells_b = torch.stack([ia % wa, ia // wa], 1), torch.stack([ib % w, ib // w], 1)
    if subcell:
        cells_b = cells_b.double() + subcell_offsets(sim[ia].view(-1, h, w), cells_b)
    return cells_a, cells_b


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
