"""Linear maps whose CPU inference can run through oneDNN with pre-packed weights.

On CPU, `F.linear` calls MKL's sgemm; on the AMD CPU we measured, oneDNN with the
weight reordered once into its blocked layout does the same fp32 products 1.3-3.3× faster
for the 32-160-row matrices of step-by-step decoding
(`scripts/benchmark_decoding.py --products`). Packing happens only inside a
`packed_weights(model)` block (every search in `decoding.py` runs in one): each weight
is packed at its first use there and dropped at the end, so weights may change freely
between blocks (fused Adam updates them without bumping their version counters, so a
cache kept across blocks could not tell). Autograd, autocast, other devices and dtypes,
and CPUs other than x86-64 (where this was not measured) use `F.linear`.
"""

import math
import platform
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

X86_64 = platform.machine().lower() in ("x86_64", "amd64")


def packable(x: Tensor, weight: Tensor) -> bool:
    """Whether x @ weightᵀ may take the packed oneDNN path: CPU inference in fp32 (or bf16 where oneDNN has it)."""
    if not (X86_64 and torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled):
        return False
    if weight.dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return False  # e.g. CPUs without AVX-512
    return (
        x.device.type == "cpu"
        and not torch.is_grad_enabled()
        and not torch.is_autocast_enabled("cpu")
        and x.dtype == weight.dtype
        and weight.dtype in (torch.float32, torch.bfloat16)
    )


class PackedLinear:
    """`F.linear` for one weight (or one fixed slice of it), through a packed copy inside `packed_weights`."""

    def __init__(self):
        self.depth = 0  # open `packed_weights` blocks
        self.packed_copy: Tensor | None = None

    def __call__(self, x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        if self.depth == 0 or not packable(x, weight):
            return F.linear(x, weight, bias)
        packed = self.packed_copy
        if packed is None:
            rows = max(1, math.prod(x.shape[:-1]))  # a layout hint; any row count works with the copy
            packed = self.packed_copy = torch.ops.mkldnn._reorder_linear_weight(weight, rows)
        return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


class Linear(nn.Linear):
    """`nn.Linear` (same parameters and state dict) that uses a packed weight inside `packed_weights`."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device, dtype)
        self.packed = PackedLinear()

    def forward(self, x: Tensor) -> Tensor:
        return self.packed(x, self.weight, self.bias)


_depth_lock = threading.Lock()  # blocks may open and close in several threads at once


@contextmanager
def packed_weights(model: object) -> Iterator[None]:
    """Within the block, `model`'s linear maps use packed weights for CPU inference.

    The weights must not change inside the block, and the model cannot be deep-copied or
    pickled there (packed copies are opaque). Blocks nest; the copies are dropped when the
    outermost one ends.
    """
    modules = model.modules() if isinstance(model, nn.Module) else ()  # e.g. a scripted test decoder
    maps = [value for module in modules for value in vars(module).values() if isinstance(value, PackedLinear)]
    with _depth_lock:
        for linear in maps:
            linear.depth += 1
    try:
        yield
    finally:
        with _depth_lock:
            for linear in maps:
                linear.depth -= 1
                if linear.depth == 0:
                    linear.packed_copy = None
