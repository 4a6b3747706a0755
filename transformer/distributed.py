"""Data-parallel helpers for `torchrun`: process group set-up and the one collective of a training step.

Without torchrun's environment everything degrades to a single process.
"""

import os

import torch
import torch.distributed as dist


def init(device: torch.device) -> tuple[int, int]:
    """Join the process group torchrun describes (gloo on CPU, nccl on CUDA); returns (rank, world size)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return dist.get_rank(), world


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def all_sum(values: list[float], device: torch.device) -> list[float]:
    """Element-wise sums of `values` over all processes, in one all-reduce (float64)."""
    if not dist.is_initialized():
        return list(values)
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def barrier() -> None:
    """Wait for every process (a no-op without torchrun)."""
    if dist.is_initialized():
        dist.barrier()


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
