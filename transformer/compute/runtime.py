"""Where and how computation runs: device choice, seeding, mixed precision (read from `transformer.core.precision`)."""

import contextlib
import random

import numpy as np
import torch

from transformer.compute.auto import resolve
from transformer.core.errors import UserError
from transformer.core.precision import PRECISIONS


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


def autocast(device: torch.device, precision: str):
    """The mixed-precision context for `precision` (`auto` resolved): none for fp32, else autocast to its dtype
    (`transformer.core.precision.PRECISIONS`)."""
    dtype = PRECISIONS[resolve(precision, "training", device.type)].dtype
    return contextlib.nullcontext() if dtype == "float32" else torch.autocast(device.type, dtype=getattr(torch, dtype))
