"""Linear maps whose CPU inference runs through oneDNN with a pre-packed weight.

On CPU, `F.linear` calls MKL's sgemm; on the AMD CPUs we measured, oneDNN with the
weight reordered once into its blocked layout does the same fp32 products 2-3× faster
for the 32-160-row matrices of step-by-step decoding (`scripts/benchmark_decoding.py`).
The packed copy is made on first use and made again whenever the weight changes.
Training (autograd), autocast, other devices and dtypes, and CPUs other than x86-64
(where this was not measured) use `F.linear`.
"""

import platform
import weakref

import torch
import torch.nn.functional as F
from torch import Tensor, nn

X86_64 = platform.machine().lower() in ("x86_64", "amd64")


def packable(x: Tensor, weight: Tensor) -> bool:
    """Whether x @ weightᵀ may take the packed oneDNN path: CPU inference in fp32 or bf16."""
    return (
        X86_64
        and x.device.type == "cpu"
        and not torch.is_grad_enabled()
        and not torch.is_autocast_enabled("cpu")
        and x.dtype == weight.dtype
        and weight.dtype in (torch.float32, torch.bfloat16)
        and not weight.is_inference()  # inference tensors have no version counter to watch
        and torch.backends.mkldnn.is_available()
        and torch.backends.mkldnn.enabled
    )


class PackedLinear:
    """`F.linear` for one weight (or one fixed slice of it), through a packed copy where `packable`.

    The copy is keyed on the weight's storage, offset, shape and version counter, so an
    optimizer step, `load_state_dict` or `.to()` makes it stale and it is packed again.
    """

    def __init__(self):
        self._cached: tuple | None = None  # (weakref to the packed weight's base, its key, the packed copy)

    def __call__(self, x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        if not packable(x, weight):
            return F.linear(x, weight, bias)
        base = weight if weight._base is None else weight._base
        key = (weight.data_ptr(), weight.shape, weight.dtype, weight._version)
        cached = self._cached  # read once: another thread may replace it, never half-way
        if cached is None or cached[0]() is not base or cached[1] != key:
            packed = torch.ops.mkldnn._reorder_linear_weight(weight, x.numel() // x.size(-1))
            cached = self._cached = (weakref.ref(base), key, packed)
        return torch.ops.mkldnn._linear_pointwise(x, cached[2], bias, "none", [], "")

    def __deepcopy__(self, memo: dict) -> "PackedLinear":
        return PackedLinear()  # a copy packs its own weights when first used


class Linear(nn.Linear):
    """`nn.Linear` (same parameters and state dict) whose CPU inference uses a packed weight."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__(in_features, out_features, bias)
        self.packed = PackedLinear()

    def forward(self, x: Tensor) -> Tensor:
        return self.packed(x, self.weight, self.bias)
