"""Where and how computation runs: device choice, seeding, mixed precision."""

import contextlib
import random

import numpy as np
import torch


def pick_device(name: str) -> torch.device:
    """`auto` means CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def autocast(device: torch.device, precision: str):
    """The mixed-precision context for `precision`: fp32 (none), bf16 or fp16 autocast."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision in ("bf16", "fp16"):
        return torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)
    raise ValueError(f"trainer.precision={precision!r}; choose fp32, bf16 or fp16")
