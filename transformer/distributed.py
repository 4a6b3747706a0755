"""Data-parallel helpers for `torchrun`: process group set-up and tiny collectives.

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


def all_sum(value: float, device: torch.device) -> float:
    """The sum of `value` over all processes."""
    if not dist.is_initialized():
        return value
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return float(tensor.item())


def any_true(flag: bool, device: torch.device) -> bool:
    """True on every process if `flag` is true on any (so all stop together)."""
    return all_sum(float(flag), device) > 0


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
