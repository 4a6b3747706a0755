"""Our int8 product against two other int8 kernels PyTorch offers, on the decoder's shapes: µs a call and error.

Ours (`fast_inference.int8.Int8Linear`: `quantized::linear_dynamic` with each row scaled to [-1, 1] and two sentinel
rows) against, with the same per-row activation scales and per-output-row weight scales:
- `torch._int_mm`: s8 · s8 -> s32 on a plain (K, N) int8 weight, then both scales and the bias;
- oneDNN's `onednn.qlinear_pointwise` on a weight packed once (`onednn.qlinear_prepack`), with u8 activations
  (zero point 128), since it takes one activation scale per call, the rows are pre-scaled as ours are. Where it
  has no kernel for this CPU it runs a reference path: slow, not wrong.
Each call's error is |y - y_fp32| / |y_fp32| over the whole product. Medians of `--rounds` rounds of 50 calls.

    python scripts/benchmark_int8_products.py                 # size base, rows 1 5 32 160
    python scripts/benchmark_int8_products.py --size small --rows 32 --threads 2
"""

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import Tensor, nn

from transformer.fast_inference.int8 import LEVELS, TINY, Int8Linear, quantized_weight
from transformer.fast_inference.kernels import cpu_isa, int8_available
from transformer.marian_reference import SIZES, model_config


def _row_scaled(x: Tensor) -> tuple[Tensor, Tensor]:
    """`x` (N, K) in int8 steps of its own row's scale, and that scale (N, 1)."""
    scale = x.abs().amax(dim=1, keepdim=True).clamp_min_(TINY).div_(LEVELS)
    return torch.round(x / scale), scale


def _int8_weight(linear: nn.Linear) -> tuple[Tensor, Tensor]:
    """`linear`'s weight (N, K) quantized as ours is (`int8.quantized_weight`): int8 values and one scale a row (N,)."""
    q = quantized_weight(linear.weight)
    return q.int_repr(), q.q_per_channel_scales().float()


class IntMM(nn.Module):
    """x·Wᵀ + b through `torch._int_mm` on a plain int8 weight."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        w_int8, self.w_scale = _int8_weight(linear)
        self.w_int8 = w_int8.t().contiguous()  # (K, N)
        self.bias = linear.bias.detach()

    def forward(self, x: Tensor) -> Tensor:
        q, scale = _row_scaled(x)
        y = torch._int_mm(q.to(torch.int8), self.w_int8)  # (N, out) int32
        return torch.addcmul(self.bias, y.float(), scale * self.w_scale)


class QLinear(nn.Module):
    """x·Wᵀ + b through oneDNN's `qlinear_pointwise`, u8 activations with zero point 128."""

    def __init__(self, linear: nn.Linear, rows: int):
        super().__init__()
        w_int8, self.w_scale = _int8_weight(linear)
        self.packed = torch.ops.onednn.qlinear_prepack(w_int8, [rows, w_int8.size(1)])
        self.zeros = torch.zeros(w_int8.size(0), dtype=torch.long)
        self.bias = linear.bias.detach()

    def forward(self, x: Tensor) -> Tensor:
        q, scale = _row_scaled(x)
        u8 = q.add_(128).to(torch.uint8)
        args = (self.packed, self.w_scale, self.zeros, None, 1.0, 0, torch.float32, "none", [], "")
        y = torch.ops.onednn.qlinear_pointwise(u8, 1.0, 128, *args)  # (N, out), still in row-scale units
        return torch.addcmul(self.bias, y, scale)


def microseconds(product: Callable[[Tensor], Tensor], x: Tensor, rounds: int, calls: int = 50) -> float:
    """Median µs a call of `product(x)`, after one warm-up call."""
    product(x)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            product(x)
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=SIZES, default="base")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 5, 32, 160])
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2, help="torch threads; 0 = torch's default")
    args = parser.parse_args()
    if not int8_available():
        parser.error("PyTorch's x86 int8 engine does not run on this CPU (it needs AVX2)")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = model_config(args.size)
    d, ff = cfg.d_model, cfg.d_ff
    shapes = {"qkv": (d, 3 * d), "attention out": (d, d), "ff in": (d, ff), "ff out": (ff, d), "vocab": (d, args.vocab)}
    threads = torch.get_num_threads()
    print(f"{args.size}, {cpu_isa()}, {threads} threads; µs a call (relative error), median of {args.rounds} rounds")
    print("| rows | product | ours int8 | torch._int_mm | qlinear u8 | time: _int_mm / ours | qlinear / ours |")
    print("|---|---|---|---|---|---|---|")
    with torch.inference_mode():
        for rows in args.rows:
            for name, (k, n) in shapes.items():
                linear, x = nn.Linear(k, n), torch.randn(rows, k)
                exact = linear(x)
                kernels = {"ours": Int8Linear.of(linear), "int_mm": IntMM(linear), "qlinear": QLinear(linear, rows)}
                us = {key: microseconds(m, x, args.rounds) for key, m in kernels.items()}
                err = {key: float((m(x) - exact).norm() / exact.norm()) for key, m in kernels.items()}
                cells = " | ".join(f"{us[key]:.1f} ({err[key]:.4f})" for key in kernels)
                ratios = f"{us['int_mm'] / us['ours']:.2f} | {us['qlinear'] / us['ours']:.2f}"
                print(f"| {rows} | {name} {k}×{n} | {cells} | {ratios} |")


if __name__ == "__main__":
    main()
