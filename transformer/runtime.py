"""Where and how computation runs: device choice, seeding, mixed precision."""

import contextlib
import functools
import random
import statistics
import time

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
    (AVX-512 or AMX). Elsewhere bf16 is emulated (`bf16_ratio`: 5.9x fp32's time on an AVX2 Zen 3)."""
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return (
        device_type == "cpu" and torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    )


# bf16 autocast pays on a CPU only where its products take well under fp32's time, since the casts and the work outside
# products cost extra; 0.8x is a chosen margin, not a measured break-even. Measured: bf16 training 1.5-2x fp32's
# tokens/s on Zen 4, while an Intel Xeon family 6 model 207 without AMX computes bf16 natively at 1.77x fp32's time
# (docs/speed.md, "bf16 that is slower than fp32").
BF16_PAYS_BELOW = 0.8


@functools.cache
def linear_ms() -> dict[str, float]:
    """Median milliseconds of one training-sized linear map (2048x256 by 256x1024) on one CPU thread in fp32 and in
    bf16, 7 interleaved rounds after a warm-up (measured once per process, about 0.2 s). One thread, so that processes
    measuring side by side (torchrun ranks, test workers) do not skew each other's ratio."""
    x, w = torch.randn(2048, 256), torch.randn(1024, 256)
    inputs = {"fp32": (x, w), "bf16": (x.bfloat16(), w.bfloat16())}
    times: dict[str, list[float]] = {name: [] for name in inputs}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(8):
            for name, (a, b) in inputs.items():
                start = time.perf_counter()
                torch.nn.functional.linear(a, b)
                times[name].append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return {name: statistics.median(t[1:]) * 1e3 for name, t in times.items()}


def bf16_ratio() -> float:
    """bf16's time over fp32's for one training-sized linear map on this CPU (`linear_ms`)."""
    ms = linear_ms()
    return ms["bf16"] / ms["fp32"]


def bf16_pays(device_type: str) -> bool:
    """Whether bf16 autocast speeds training up on `device_type`: native bf16, and on a CPU products that take under
    `BF16_PAYS_BELOW` of fp32's time (some CPUs compute bf16 natively, but slower than fp32)."""
    if not native_bf16(device_type):
        return False
    return device_type != "cpu" or bf16_ratio() < BF16_PAYS_BELOW


def resolve_precision(precision: Precision, device: torch.device) -> Precision:
    """`auto` as bf16 where it speeds `device` up (`bf16_pays`), else fp32; any other precision as it is."""
    if precision != "auto":
        return precision
    return "bf16" if bf16_pays(device.type) else "fp32"


def autocast(device: torch.device, precision: Precision):
    """The mixed-precision context for `precision`: fp32 (none), bf16 or fp16 autocast; `auto` resolved first."""
    precision = resolve_precision(precision, device)
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision in ("bf16", "fp16"):
        return torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)
    raise ValueError(f"trainer.precision={precision!r}; choose {', '.join(choices(Precision))}")
