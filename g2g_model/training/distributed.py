"""DDP set-up from the ``torchrun`` environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_*)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str) -> DistInfo:
    """Join the process group when WORLD_SIZE > 1 (gloo on CPU, nccl on CUDA)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        backend = "nccl" if device.startswith("cuda") else "gloo"
        dist.init_process_group(backend=backend, rank=rank, world_size=world)
    return DistInfo(rank, world, local)


def device_for(device: str, info: DistInfo) -> torch.device:
    """``cuda`` becomes ``cuda:<local_rank>`` under DDP."""
    if device == "cuda" and info.enabled:
        return torch.device(f"cuda:{info.local_rank}")
    return torch.device(device)


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def mean_across_ranks(values: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """Average of a tensor over ranks (identity without DDP)."""
    if not info.enabled:
        return values
    out = values.detach().clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out / info.world_size


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
