"""Int8 linear maps: weights in int8 with one scale per output row, activations quantized per row at each call.

PyTorch's dynamic int8 product (`quantized::linear_dynamic`, fbgemm or oneDNN under the x86 engine) quantizes its
input with one scale for the whole tensor, so a row's result would depend on the other rows of the batch: a
sentence on the sentences beside it, a cached step on the prefix an uncached one recomputes. Each row is therefore
divided by its largest magnitude first, and two rows of +1s and -1s are appended: the tensor's range is then
[-1, 1] whatever the batch, its one scale the same for every call, and each row's int8 values its own (as
CTranslate2's per-row scales give). The products accumulate in int32, exactly; the row's magnitude and the bias are
applied to the fp32 result.
"""

import warnings

import torch
from torch import Tensor

from transformer.fast_inference.kernels import int8_engine, reduce_range
from transformer.fast_inference.packed import FusedLinear

LEVELS = 127  # int8 weights in [-127, 127]: symmetric, zero point 0
TINY = torch.finfo(torch.float32).tiny  # the scale of a row of zeros


def quantized_weight(weight: Tensor) -> Tensor:
    """`weight` (N, K) as a qint8 tensor with one scale per output row (its largest magnitude over 127)."""
    scale = (weight.abs().amax(dim=1) / LEVELS).clamp_min(TINY).double()
    zero = torch.zeros(weight.size(0), dtype=torch.long)
    with warnings.catch_warnings():  # PyTorch 2.13 marks quantized tensors deprecated; its int8 products need them
        warnings.filterwarnings("ignore", message="torch.quantize_per_tensor, torch.quantize_per_channel")
        return torch.quantize_per_channel(weight.detach().float(), scale, zero, 0, torch.qint8)


class Int8Linear(FusedLinear):
    """A `FusedLinear` in int8 (see the module's docstring), its weight quantized and packed at first use."""

    def __init__(self, weights: list[Tensor], biases: list[Tensor | None], relu: bool = False):
        super().__init__(weights, biases, relu)
        self.reduce_range = reduce_range()
        self.packed = None  # fbgemm's or oneDNN's packed weight (a torch.ScriptObject)
        self.sentinel: Tensor | None = None

    def _pack(self) -> None:
        """Quantize and pack the weight; the bias stays fp32 (added after the product, see `forward`)."""
        k = self.weight.size(1)
        self.sentinel = torch.cat([torch.ones(1, k), -torch.ones(1, k)])  # (2, K): the range [-1, 1]
        with int8_engine():
            self.packed = torch.ops.quantized.linear_prepack(quantized_weight(self.weight), None)

    def forward(self, x: Tensor) -> Tensor:
        if self.weight is None:
            self._fuse()
        if self.packed is None:
            self._pack()
        rows = x.reshape(-1, x.size(-1))  # (N, K)
        magnitude = rows.abs().amax(dim=1, keepdim=True).clamp_min_(TINY)  # (N, 1)
        scaled = rows.new_empty(rows.size(0) + 2, rows.size(1))  # (N + 2, K): the rows in [-1, 1], then the sentinel
        torch.div(rows, magnitude, out=scaled[:-2])
        scaled[-2:] = self.sentinel
        y = torch.ops.quantized.linear_dynamic(scaled, self.packed, self.reduce_range)[:-2]  # (N, out)
        y = y * magnitude if self.bias is None else torch.addcmul(self.bias, y, magnitude)
        if self.relu:
            y = y.relu_()
        return y.view(*x.shape[:-1], y.size(-1))
