"""Data-parallel helpers for `torchrun`: process group set-up and the few collectives of a run.

Without torchrun's environment everything degrades to a single process.

A process never waits inside a collective for work that another process does alone for long: the data is
prepared before the process group starts (the ranks of a node wait on the prepared folder's file lock, which has
no timeout), every process validates its share of the val sentences, and what rank 0 still does alone between
two steps (saving checkpoints, TensorBoard) takes seconds. `trainer.collective_timeout_minutes` (the process group's
timeout for every collective, and for joining the group) is generous all the same, so that a slow disk or a node
that prepares its own copy of the data for longer than another does not stop the run.
"""

import hashlib
import os
from datetime import timedelta

import torch
import torch.distributed as dist

from transformer.core.errors import UserError


def init(device: torch.device, timeout_minutes: float) -> tuple[int, int]:
    """Join the process group torchrun describes (gloo on CPU, nccl on CUDA), its collectives timing out after
    `timeout_minutes`; returns (rank, world size)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, timeout=timedelta(minutes=timeout_minutes))
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


def all_gather(value: object) -> list[object]:
    """Every process' `value` (picklable), in rank order: `[value]` without torchrun."""
    if not dist.is_initialized():
        return [value]
    out: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def check_same(values: dict[str, str | bytes]) -> None:
    """Refuse to go on when the processes disagree on any of `values` (what each process set up on its own; bytes
    are compared by their SHA-256)."""
    mine = {key: hashlib.sha256(v).hexdigest()[:10] if isinstance(v, bytes) else v for key, v in values.items()}
    every = all_gather(mine)
    differ = [key for key in mine if len({v[key] for v in every}) > 1]
    if differ:
        seen = "; ".join(f"{key}: " + ", ".join(f"rank {r} {v[key]}" for r, v in enumerate(every)) for key in differ)
        raise UserError(
            f"the processes of this run disagree ({seen}); on nodes without a shared data.prepared_dir, give each "
            "node identical corpus files at the same paths, or prepare on one node (transformer-prepare) and copy "
            "the prepared folder to the others; a resumed run needs its run folder on every node"
        )


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
