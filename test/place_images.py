"""Synthetic 'place' images for the image-model tests (image embedding, pair verifier)."""

import numpy as np
import torch


def place_image(place: int, gen: torch.Generator, size: int = 48) -> np.ndarray:
    """An RGB image of a 'place': a fixed coarse colour pattern per place, plus pixel noise."""
    pattern = torch.Generator().manual_seed(1000 + place)
    coarse = torch.randint(0, 256, (4, 4, 3), generator=pattern).float()
    img = coarse.repeat_interleave(size // 4, 0).repeat_interleave(size // 4, 1)
    img = img + 12.0 * torch.randn(img.shape, generator=gen)
    return img.clamp(0, 255).to(torch.uint8).numpy()
