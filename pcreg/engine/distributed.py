"""torch.distributed plumbing for ``torchrun`` (gloo on CPU, nccl on CUDA).

Without the torchrun environment everything degrades to a single process."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

__all__ = ["DistInfo", "all_reduce_sum", "barrier", "cleanup", "setup"]


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup(device: str = "cpu") -> DistInfo:
    """Initialise the process group when launched by torchrun (``WORLD_SIZE`` > 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        backend = "nccl" if device.startswith("cuda") and torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend=backend)
    return DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)))


def all_reduce_sum(values: dict[str, float], info: DistInfo) -> dict[str, float]:
    """Sum scalars over ranks (returns the input on a single process)."""
    if info.world_size == 1:
        return dict(values)
    keys = sorted(values)
    t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64)
    dist.all_reduce(t)
    return dict(zip(keys, t.tolist(), strict=True))


def barrier(info: DistInfo) -> None:
    if info.world_size > 1:
        dist.barrier()


def cleanup(info: DistInfo) -> None:
    if info.world_size > 1 and dist.is_initialized():
        dist.destroy_process_group()
