"""What this machine computes natively: the one probe of the CPU's (and GPU's) features, each asked once a process.

`compute.auto` decides from these what `auto` means; `fast_inference.kernels` which kernels run.
"""

import functools
import platform
import statistics
import time

import torch

X86_64 = platform.machine().lower() in ("x86_64", "amd64")
INT8_ENGINE = "x86"  # PyTorch's x86 engine: fbgemm, or oneDNN where the CPU has VNNI (PyTorch's own choice)


def has(feature: str) -> bool:
    """Whether the CPU has `feature` as `torch.cpu._is_{feature}_supported` tells (False where torch lacks it)."""
    probe = getattr(torch.cpu, f"_is_{feature}_supported", None)
    return bool(probe and probe())


def cpu_isa() -> str:
    """The widest instruction set for int8/bf16 products this CPU has: AMX, AVX512_BF16, AVX512_VNNI, AVX512, AVX2
    or "no AVX2"."""
    for name, feature in (
        ("AMX", "amx_tile"),
        ("AVX512_BF16", "avx512_bf16"),
        ("AVX512_VNNI", "vnni"),
        ("AVX512", "avx512"),
        ("AVX2", "avx2"),
    ):
        if has(feature):
            return name
    return "no AVX2"


@functools.cache
def native_bf16(device_type: str) -> bool:
    """Whether `device_type` computes bf16 products natively: a CUDA GPU with bf16, a CPU oneDNN runs bf16 on
    (AVX-512 or AMX). Elsewhere bf16 is emulated (5.9x fp32's time on an AVX2 Zen 3)."""
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return (
        device_type == "cpu" and torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    )


def int8_available() -> bool:
    """Whether PyTorch's x86 quantized engine runs here: fbgemm needs AVX2."""
    return X86_64 and INT8_ENGINE in torch.backends.quantized.supported_engines and has("avx2")


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
