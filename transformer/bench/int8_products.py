"""The int8 products `scripts/benchmark_int8_products.py` compares: ours forced to one kernel, `torch._int_mm`, and
whole searches under each way of choosing the kernel."""

from collections.abc import Callable

import torch
from torch import Tensor, nn

from transformer.fast_inference.int8 import Int8Linear, quantized_weight, row_steps
from transformer.fast_inference.kernels import QLINEAR_FROM

# --searches: each way of choosing the kernel, as its Int8Linear.qlinear_from (None: linear_dynamic for every batch)
# and whether one sentence's steps run int8 weights with bf16 activations (where they can: `weight_only_runs`); ours
# is what an inference copy does: qlinear from QLINEAR_FROM sentences or hypotheses, int8 weights for one sentence
RULES = {
    "linear_dynamic": (None, False),
    "qlinear": (0, False),
    "ours": (QLINEAR_FROM, True),
}


class IntMM(nn.Module):
    """x·Wᵀ + b through `torch._int_mm` on a plain int8 weight."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        weight = quantized_weight(linear.weight)  # as ours: int8 values, one scale a row
        self.w_int8 = weight.int_repr().t().contiguous()  # (K, N)
        self.w_scale = weight.q_per_channel_scales().float()  # (N,)
        self.bias = linear.bias.detach()

    def forward(self, x: Tensor) -> Tensor:
        steps, scale = row_steps(x)
        y = torch._int_mm(steps.round_().to(torch.int8), self.w_int8)  # (N, out) int32
        return torch.addcmul(self.bias, y.float(), scale * self.w_scale)


def int8_linear(linear: nn.Linear, qlinear: bool) -> Int8Linear:
    """Our int8 product of `linear`, through qlinear (or linear_dynamic) whatever the rows."""
    product = Int8Linear.of(linear)
    product.qlinear_from = 0 if qlinear else None
    return product


def ruled_searches(model: nn.Module, rule: tuple[int | None, bool], search: Callable, batches: tuple) -> Callable:
    """A run of `search(model, src)` over `batches`, every int8 product of `model` choosing its kernel by `rule`
    (`Int8Linear.qlinear_from`, and whether it may run `weight_only_product`)."""
    products = [m for m in model.modules() if isinstance(m, Int8Linear)]

    def run() -> list:
        qlinear_from, weight_only = rule
        for product in products:
            product.qlinear_from, product.weight_only = qlinear_from, weight_only and product.weight_only_runs()
        return [search(model, src) for src in batches]

    return run
