"""Where and how computation runs: device choice, seeding, mixed precision."""

import contextlib
import functools
import random

import numpy as np
import torch

from transformer.config import Precision, choices
from transformer.errors import UserError


def device_problem(name: str) -> str | None:
    """Why the device `name` cannot be used here, or None when it can."""
    if name in ("auto", "cpu"):
        return None
    try:
        device = torch.device(name)
    except RuntimeError:
        return "not a device; choose auto, cpu, cuda or cuda:N"
    if device.type == "cuda":
        if not torch.cuda.is_available():
            return "no CUDA GPU is available here; use device auto or cpu"
        if device.index is not None and device.index >= torch.cuda.device_count():
            return f"only {torch.cuda.device_count()} CUDA device(s) here"
    elif device.type != "cpu":
        return "choose auto, cpu, cuda or cuda:N"
    return None


def pick_device(name: str) -> torch.device:
    """`auto` means CUDA when available, else CPU; a device that is not there is a user error."""
    problem = device_problem(name)
    if problem:
        raise UserError(f"device {name}: {problem}")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@functools.cache
def native_bf16(device_type: str) -> bool:
    """Whether `device_type` computes bf16 products natively: a CUDA GPU with bf16, a CPU oneDNN runs bf16 on
    (AVX-512 or AMX). Elsewhere bf16 is emulated (scripts/benchmark_bf16.py: 5.9x fp32's time on an AVX2 Zen 3)."""
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return (
        device_type == "cpu" and torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    )


def resolve_precision(precision: Precision, device: torch.device) -> Precision:
    """`auto` as bf16 where `device` computes bf16 natively, else fp32; any other precision as it is."""
    if precision != "auto":
        return precision
    return "bf16" if native_bf16(device.type) else "fp32"


def autocast(device: torch.device, precision: Precision):
    """The mixed-precision context for `precision`: fp32 (none), bf16 or fp16 autocast; `auto` resolved first."""
    precision = resolve_precision(precision, device)
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision in ("bf16", "fp16"):
        return torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)
    raise ValueError(f"trainer.precision={precision!r}; choose {', '.join(choices(Precision))}")
