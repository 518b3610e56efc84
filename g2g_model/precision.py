"""Mixed precision: the one autocast helper of the project."""

from __future__ import annotations

import contextlib
from typing import ContextManager, Optional, Union

import torch


def autocast(device: Union[torch.device, str], dtype: Optional[torch.dtype],
             inherit: bool = False) -> ContextManager:
    """Autocast to ``dtype`` (e.g. ``torch.bfloat16``) on ``device``'s type.

    ``dtype=None`` means float32: autocast is switched off inside the block, or, with
    ``inherit=True``, whatever autocast the caller set stays in force (a backbone called under
    a trainer's bf16 autocast follows it).
    """
    device_type = device.type if isinstance(device, torch.device) else str(device)
    if dtype is not None:
        return torch.autocast(device_type, dtype=dtype)
    if inherit:
        return contextlib.nullcontext()
    return torch.autocast(device_type, enabled=False)
