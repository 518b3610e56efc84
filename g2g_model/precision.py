"""Mixed precision: the one autocast helper of the project, and whether bf16 pays on a device."""

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


def autocast_dtype(device: Union[torch.device, str]) -> Optional[torch.dtype]:
    """The dtype autocast casts to on ``device``'s type at this point of the program, or None
    where autocast is off."""
    device_type = device.type if isinstance(device, torch.device) else str(device)
    if not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


def bf16_is_fast(device: torch.device) -> bool:
    """Whether bf16 autocast should be the default on ``device``.

    On CPUs with AVX-512 (or AMX) bf16 matmuls are several times faster than fp32; on AVX2-only
    CPUs they are emulated and much slower (measured 3-15x slower on this project's CI machine),
    so "auto" picks fp32 there.
    """
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        native = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
        if native is not None:
            return bool(native())
        cap = torch.backends.cpu.get_cpu_capability().upper()
        return cap.startswith("AVX512") or "AMX" in cap
    return False
