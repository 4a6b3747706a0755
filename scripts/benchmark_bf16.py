"""Whether this CPU computes bf16 natively: one linear map (2048×256 by 256×1024) in fp32 and in bf16, medians of 7.

    python scripts/benchmark_bf16.py
"""

import statistics
import time

import torch

from transformer.runtime import native_bf16


def median_ms(x: torch.Tensor, w: torch.Tensor) -> float:
    torch.nn.functional.linear(x, w)
    times = []
    for _ in range(7):
        start = time.perf_counter()
        torch.nn.functional.linear(x, w)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


if __name__ == "__main__":
    x, w = torch.randn(2048, 256), torch.randn(1024, 256)
    fp32, bf16 = median_ms(x, w), median_ms(x.bfloat16(), w.bfloat16())
    print(f"native bf16: {native_bf16('cpu')}; fp32 {fp32:.2f} ms, bf16 {bf16:.2f} ms ({bf16 / fp32:.2f}x fp32's time)")
