"""Distributed data parallel through ``torchrun`` (gloo on CPU, NCCL on CUDA).

``torchrun --nproc_per_node N -m tinyscope.cli run EXP ...`` sets RANK / WORLD_SIZE; each rank
takes every N-th row of the step's global batch, so the gradient equals the single-process one.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def dist_info() -> DistInfo:
    return DistInfo(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
                    int(os.environ.get("LOCAL_RANK", 0)))


def setup(device: torch.device) -> DistInfo:
    """Join the process group that torchrun describes; a no-op for a single process."""
    info = dist_info()
    if info.world > 1 and not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend)
    return info


def teardown() -> None:
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
