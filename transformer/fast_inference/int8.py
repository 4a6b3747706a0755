"""Int8 linear maps: weights in int8 with one scale per output row, activations quantized per row at each call.

Each row is quantized on its own scale, as CTranslate2's per-row scales do, so that a row's result never depends on
the other rows of the call: a sentence on the sentences beside it or on its batch's size, a cached step on the
prefix an uncached one recomputes. A row becomes steps of its largest magnitude over 127, rounded half to even, in
[-127, 127]; the quantized products accumulate in int32, exactly; the row's step, the weight's scale and the bias
are applied to the fp32 result.
Two of PyTorch's kernels do the products, chosen by the batch (the input's leading dimension: sentences or
hypotheses, the same for a cached and an uncached step), and both give the same bits for a row:
- below `QLINEAR_FROM`, `quantized::linear_dynamic` (fbgemm, or oneDNN with VNNI). It quantizes its input with one
  scale for the whole tensor, chosen from its range, so it is given the rows already in steps plus two sentinel
  rows at the ends of the u8 range (-128 and 127): its scale is then exactly 1 and its zero point 128 whatever the
  batch, and it rounds each step as the other kernel does.
- from `QLINEAR_FROM` on, where the CPU multiplies u8 by s8 natively (VNNI, AMX), oneDNN's `qlinear_pointwise` on
  u8 activations (the steps plus 128) with a weight packed once: 6-13% faster a `base` search at batch 32 (level at
  `small`), slower than `linear_dynamic` at a few rows, where its per-call cost dominates
  (docs/lab/speed.md#int8-products-by-batch-size-zen-4-2026-11-29).
The feed-forward's second product takes a ReLU's output, never negative (`after_relu`): its rows are rounded to
[0, 255] steps of their largest value, zero point 0, half the step of a row of either sign, on the same kernels.
Without VNNI, fbgemm adds pairs of u8·s8 products in 16 bits, so activations take 7 bits (`reduce_range`): steps in
[-63, 63] (after a ReLU [0, 127]) on `linear_dynamic` alone.
"""

import warnings

import torch
from torch import Tensor

from transformer.fast_inference.kernels import QLINEAR_FROM, int8_engine, qlinear_available, reduce_range
from transformer.fast_inference.packed import FusedLinear

LEVELS = 127  # int8 weights and a row's activation steps in [-127, 127]: symmetric
U8_ZERO = 128  # the zero point of u8 activations of either sign: steps in [-127, 127] become [1, 255]
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
    """`rows` (N, K) in steps of each row's own scale (its largest magnitude over `levels`), rounded half to even,
    and that scale (N, 1)."""
    step = row_magnitude(rows).div_(levels).clamp_min_(TINY)
    return torch.div(rows, step).round_(), step


def activation_range(after_relu: bool, reduced: bool) -> tuple[int, int]:
    """The levels of a row's steps and the zero point of its u8 values: (127, 128) for rows of either sign, (255, 0)
    after a ReLU; half the levels (and zero point) where activations take 7 bits (`reduce_range`)."""
    levels, zero = (2 * LEVELS + 1, 0) if after_relu else (LEVELS, U8_ZERO)
    return (levels // 2, zero // 2) if reduced else (levels, zero)


class Int8Linear(FusedLinear):
    """A `FusedLinear` in int8 (see the module's docstring), its weight quantized and packed for a kernel at that
    kernel's first use."""

    def __init__(self, weights: list[Tensor], biases: list[Tensor | None], **options):
        super().__init__(weights, biases, **options)
        self.reduce_range = reduce_range()
        self.levels, self.zero = activation_range(self.after_relu, self.reduce_range)
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
        steps, step = row_steps(rows, self.levels)
        y = self.product(steps, x.size(0))  # (N, out) in units of the rows' steps (N, 1)
        y = y * step if self.bias is None else torch.addcmul(self.bias, y, step)
        if self.relu:
            y = y.relu_()
        return y.view(*x.shape[:-1], y.size(-1))

    def product(self, steps: Tensor, batch: int) -> Tensor:
        """Rows of rounded `steps` (N, K) times the weight, by the kernel of a call of `batch` sentences."""
        qlinear = self.qlinear_from is not None and batch >= self.qlinear_from
        return self.qlinear(steps) if qlinear else self.dynamic(steps)

    def dynamic(self, steps: Tensor) -> Tensor:
        """Rows of rounded `steps` (N, K) times the weight through `linear_dynamic`, which sees their u8 range."""
        if self.packed is None:
            k = self.weight.size(1)
            ends = [[float(self.levels)], [float(-self.zero)]]  # the u8 range's ends: its scale 1, zero point `zero`
            self.sentinel = torch.tensor(ends).expand(2, k)  # (2, K)
            with int8_engine():
                self.packed = torch.ops.quantized.linear_prepack(quantized_weight(self.weight), None)
        framed = steps.new_empty(steps.size(0) + 2, steps.size(1))  # (N + 2, K): the rows, then the sentinel
        framed[:-2] = steps
        framed[-2:] = self.sentinel
        return torch.ops.quantized.linear_dynamic(framed, self.packed, self.reduce_range)[:-2]

    def qlinear(self, steps: Tensor) -> Tensor:
        """Rows of rounded `steps` (N, K) times the weight through oneDNN's `qlinear_pointwise` on u8 activations."""
        if self.qpacked is None:
            weight = quantized_weight(self.weight)
            self.qscales = weight.q_per_channel_scales().float()
            self.qzeros = torch.zeros(weight.size(0), dtype=torch.long)
            self.qpacked = torch.ops.onednn.qlinear_prepack(weight.int_repr(), None)
        u8 = steps.add_(self.zero).to(torch.uint8)  # in [1, 255] (after a ReLU, [0, 255])
        return torch.ops.onednn.qlinear_pointwise(
            u8, 1.0, self.zero, self.qpacked, self.qscales, self.qzeros, None, 1.0, 0, torch.float32, "none", [], ""
        )


class Int8Traced(Int8Linear):
    """`Int8Linear`'s arithmetic in operators `torch.export` traces, for a compiled step: each row's steps as s8
    times the int8 weight by `torch._int_mm`, exact in int32, scaled as `Int8Linear` scales; the same bits.

    A ReLU's output takes steps in [0, 255], beyond s8: it is shifted by -128, and 128 times each output's weight sum
    added back to the int32 sums, still exact."""

    def prepare(self) -> None:
        """Fuse, quantize and transpose the weight now, as buffers: a trace must not do it."""
        super().prepare()
        weight = quantized_weight(self.weight)
        self.shift = U8_ZERO if self.levels > LEVELS else 0  # steps beyond s8 are shifted into it
        int8 = weight.int_repr()
        self.register_buffer("w_int8", int8.t().contiguous())  # (K, N)
        self.register_buffer("w_scales", weight.q_per_channel_scales().float())  # (N,)
        self.register_buffer("shifted_sums", self.shift * int8.sum(1, dtype=torch.int32))  # (N,)

    def product(self, steps: Tensor, batch: int) -> Tensor:
        sums = torch._int_mm(steps.sub_(self.shift).to(torch.int8), self.w_int8)  # (N, out), int32
        return (sums + self.shifted_sums).float() * self.w_scales
