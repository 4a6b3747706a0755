"""Int8 linear maps: weights in int8 with one scale per output row, activations quantized per row at each call
(or, in one sentence's decoding steps, kept in bf16).

Each row is quantized on its own scale, as CTranslate2's per-row scales do, so that a row's result never depends on
the other rows of the call: a sentence on the sentences beside it, a cached step on the prefix an uncached one
recomputes. The quantized products accumulate in int32, exactly; the row's scale and the bias are applied to the
fp32 result.
Three of PyTorch's kernels do the products, chosen by the batch (the input's leading dimension: sentences or
hypotheses, the same for a cached and an uncached step):
- one sentence's decoding steps (greedy at batch 1), where torch's kernels are AVX2 or AVX-512:
  `_weight_int8pack_mm`, the int8 weights times the activations in bf16 (not quantized), one call a product:
  1.2-1.8× a whole greedy search at batch 1 (docs/speed.md). It is slow for many rows, so the products run once per
  source (`per_source`) do not take it.
- below `QLINEAR_FROM`, `quantized::linear_dynamic` (fbgemm, or oneDNN with VNNI). It quantizes its input with one
  scale for the whole tensor, so each row is divided by its largest magnitude first and two rows of +1s and -1s are
  appended: the tensor's range is then [-1, 1] whatever the batch, its one scale the same for every call.
- from `QLINEAR_FROM` on, where the CPU multiplies u8 by s8 natively (VNNI, AMX), oneDNN's `qlinear_pointwise` on u8
  activations (each row rounded to [-127, 127] steps of its own scale, plus 128) with a weight packed once: 6-13%
  faster a `base` search at batch 32 (level at `small`), slower than `linear_dynamic` at a few rows, where its
  per-call cost dominates (docs/speed.md#int8-products-by-batch-size-zen-4-2026-11-29).
The feed-forward's second product takes a ReLU's output, never negative (`after_relu`): its rows are rounded to
[0, 255] steps of their largest value, zero point 0 (linear_dynamic's sentinel rows span [0, 1]), half the step of a
row of either sign, on the same kernels.
The kernels round a row differently (by up to one int8 step), so a sentence decoded alone or in a batch of
`QLINEAR_FROM` or more may differ from it decoded in a batch between (fp32 and bf16 give the same bits either way).
"""

import warnings

import torch
from torch import Tensor

from transformer.fast_inference.kernels import (
    QLINEAR_FROM,
    WEIGHT_ONLY_BLOCK,
    int8_engine,
    qlinear_available,
    reduce_range,
    weight_only_available,
)
from transformer.fast_inference.packed import FusedLinear

LEVELS = 127  # int8 weights in [-127, 127]: symmetric, zero point 0
U8_ZERO = 128  # the zero point of qlinear's u8 activations: a row's steps in [-127, 127] become [1, 255]
U8_LEVELS = 255  # a ReLU's output, never negative, takes u8 steps in [0, 255], zero point 0: twice as fine
TINY = torch.finfo(torch.float32).tiny  # the scale of a row of zeros


def row_magnitude(rows: Tensor) -> Tensor:
    """The largest magnitude of each row of `rows` (N, K), as (N, 1)."""
    return rows.abs().amax(dim=1, keepdim=True)


def quantized_weight(weight: Tensor) -> Tensor:
    """`weight` (N, K) as a qint8 tensor with one scale per output row (its largest magnitude over 127)."""
    scale = (row_magnitude(weight)[:, 0] / LEVELS).clamp_min(TINY).double()  # (N,)
    zero = torch.zeros(weight.size(0), dtype=torch.long)
    with warnings.catch_warnings():  # PyTorch 2.13 marks quantized tensors deprecated; its int8 products need them
        warnings.filterwarnings("ignore", message="torch.quantize_per_tensor, torch.quantize_per_channel")
        return torch.quantize_per_channel(weight.detach().float(), scale, zero, 0, torch.qint8)


def row_steps(rows: Tensor, levels: int = LEVELS) -> tuple[Tensor, Tensor]:
    """`rows` (N, K) in steps of each row's own scale (its largest magnitude over `levels`), not yet rounded, and
    that scale (N, 1)."""
    step = row_magnitude(rows).div_(levels).clamp_min_(TINY)
    return torch.div(rows, step), step


class Int8Linear(FusedLinear):
    """A `FusedLinear` in int8 (see the module's docstring), its weight quantized and packed for a kernel at that
    kernel's first use."""

    def __init__(self, weights: list[Tensor], biases: list[Tensor | None], **options):
        super().__init__(weights, biases, **options)
        self.levels, self.zero = (U8_LEVELS, 0) if self.after_relu else (LEVELS, U8_ZERO)  # qlinear's u8 activations
        self.weight_only = self.weight_only_runs()  # one sentence's steps: `weight_only_product`
        self.w_int8: Tensor | None = None  # its int8 weight (N, K) and bf16 scales (N,)
        self.w_scales: Tensor | None = None
        self.reduce_range = reduce_range()
        self.packed = None  # linear_dynamic's packed weight (a torch.ScriptObject)
        self.sentinel: Tensor | None = None
        self.qlinear_from = QLINEAR_FROM if qlinear_available() else None  # None: linear_dynamic for every batch
        self.qpacked: Tensor | None = None  # qlinear's packed weight, its scales (N,) and zero points (N,)
        self.qscales: Tensor | None = None
        self.qzeros: Tensor | None = None

    def forward(self, x: Tensor) -> Tensor:
        if self.weight is None:
            self._fuse()
        rows = x.reshape(-1, x.size(-1))  # (N, K)
        if self.weight_only and x.size(0) == 1:
            y = self.weight_only_product(rows)
            if self.bias is not None:
                y += self.bias
        else:
            qlinear = self.qlinear_from is not None and x.size(0) >= self.qlinear_from
            y, scale = self.qlinear(rows) if qlinear else self.dynamic(rows)  # (N, out) in units of scale (N, 1)
            y = y * scale if self.bias is None else torch.addcmul(self.bias, y, scale)
        if self.relu:
            y = y.relu_()
        return y.view(*x.shape[:-1], y.size(-1))

    def dynamic(self, rows: Tensor) -> tuple[Tensor, Tensor]:
        """`rows` (N, K) times the weight through `linear_dynamic`, in units of each row's magnitude (N, 1)."""
        if self.packed is None:
            k = self.weight.size(1)
            low = torch.zeros(1, k) if self.after_relu else -torch.ones(1, k)
            self.sentinel = torch.cat([torch.ones(1, k), low])  # (2, K): the range [-1, 1] (after a ReLU, [0, 1])
            with int8_engine():
                self.packed = torch.ops.quantized.linear_prepack(quantized_weight(self.weight), None)
        magnitude = row_magnitude(rows).clamp_min_(TINY)  # (N, 1)
        scaled = rows.new_empty(rows.size(0) + 2, rows.size(1))  # (N + 2, K): the rows in [-1, 1], then the sentinel
        torch.div(rows, magnitude, out=scaled[:-2])
        scaled[-2:] = self.sentinel
        return torch.ops.quantized.linear_dynamic(scaled, self.packed, self.reduce_range)[:-2], magnitude

    def qlinear(self, rows: Tensor) -> tuple[Tensor, Tensor]:
        """`rows` (N, K) times the weight through oneDNN's `qlinear_pointwise`, in units of each row's int8 step."""
        if self.qpacked is None:
            weight = quantized_weight(self.weight)
            self.qscales = weight.q_per_channel_scales().float()
            self.qzeros = torch.zeros(weight.size(0), dtype=torch.long)
            self.qpacked = torch.ops.onednn.qlinear_prepack(weight.int_repr(), None)
        steps, step = row_steps(rows, self.levels)
        u8 = steps.add_(self.zero + 0.5).to(torch.uint8)  # round(x / step) + zero point, in [1, 255] (or [0, 255])
        y = torch.ops.onednn.qlinear_pointwise(
            u8, 1.0, self.zero, self.qpacked, self.qscales, self.qzeros, None, 1.0, 0, torch.float32, "none", [], ""
        )
        return y, step

    def weight_only_runs(self) -> bool:
        """Whether `weight_only_product` may run this product: a step's (not `per_source`), where the CPU runs it, with
        K a multiple of the kernel's block."""
        k = self.parts[0][0].size(1)
        return weight_only_available() and not self.per_source and k % WEIGHT_ONLY_BLOCK == 0

    def weight_only_product(self, rows: Tensor) -> Tensor:
        """`rows` (N, K) in bf16 times the int8 weight through `_weight_int8pack_mm`, in fp32, without the bias."""
        if self.w_int8 is None:
            weight = quantized_weight(self.weight)
            self.w_scales = weight.q_per_channel_scales().bfloat16()  # (N,), each within 2^-9 of its fp32 value
            self.w_int8 = weight.int_repr()
        aligned = rows.to(torch.bfloat16, copy=True)  # a fresh tensor: the kernel's loads need its alignment
        return torch.ops.aten._weight_int8pack_mm(aligned, self.w_int8, self.w_scales).float()
