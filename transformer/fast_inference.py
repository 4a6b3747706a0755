"""Fast CPU inference: a copy of a model whose linear maps use pre-packed oneDNN weights.

On CPU, `F.linear` calls MKL's sgemm; on the AMD CPU we measured, oneDNN with the
weight reordered once into its blocked layout does the same fp32 products 1.3-3.3×
faster for the 32-160-row matrices of step-by-step decoding
(`scripts/benchmark_decoding.py --products`). `inference_copy(model)` shares the
model's parameters but swaps every `nn.Linear` for a `PackedLinear` (and, for `dot`
attention, fuses q/k/v into one product); each weight is packed at its first use in
that copy. The copy is made once where a model is loaded for inference (a `Translator`)
and kept for all its searches, by every thread. A packed weight does not follow the
parameters: weights changed in place (e.g. by fused Adam, which does not even bump
their version counters) need a fresh copy, so validation during training makes one
each time. The model itself is never modified.
"""

import copy
import math
import platform

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer.attention.dot import DotAttention

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


class PackedLinear(nn.Module):
    """x @ Wᵀ + b for W, b the row-wise concatenation of `weights`/`biases`, through a weight packed at first use."""

    def __init__(self, weights: list[Tensor], biases: list[Tensor | None]):
        super().__init__()
        self.parts = (weights, biases)  # concatenated lazily: a fused product may never be used
        self.weight: Tensor | None = None
        self.bias: Tensor | None = None
        self.packed: Tensor | None = None

    @classmethod
    def of(cls, *linears: nn.Linear) -> "PackedLinear":
        """The product of `linears` side by side (output features concatenated); a missing bias counts as zeros."""
        return cls([m.weight for m in linears], [m.bias for m in linears])

    def _fuse(self) -> None:
        """Set the concatenated bias, then the weight: a thread that sees the weight also sees its bias."""
        weights, biases = self.parts
        if any(b is not None for b in biases):
            filled = [w.new_zeros(w.size(0)) if b is None else b for w, b in zip(weights, biases)]
            self.bias = torch.cat(filled) if len(filled) > 1 else filled[0].detach()
        self.weight = torch.cat(weights) if len(weights) > 1 else weights[0].detach()

    def forward(self, x: Tensor) -> Tensor:
        if self.weight is None:
            self._fuse()
        if not packable(x, self.weight):
            return F.linear(x, self.weight, self.bias)
        if self.packed is None:
            rows = max(1, math.prod(x.shape[:-1]))  # a layout hint; any row count works with the copy
            self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight, rows)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


class PackedAttention(DotAttention):
    """A `DotAttention` whose projections are packed, with q/k/v (and cross-attention's k/v) fused."""

    @classmethod
    def of(cls, attention: DotAttention) -> "PackedAttention":
        """A shallow copy of `attention` (every field of it shared, so none can be forgotten) whose submodules
        are the packed projections; no weights are made or initialised."""
        packed = copy.copy(attention)
        packed.__class__ = cls
        q, k, v = attention.q_proj, attention.k_proj, attention.v_proj
        packed._modules = {
            "q_proj": PackedLinear.of(q),
            "out_proj": PackedLinear.of(attention.out_proj),
            "qkv_proj": PackedLinear.of(q, k, v),
            "kv_proj": PackedLinear.of(k, v),
        }
        return packed

    def project_qkv(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v = self.qkv_proj(x).chunk(3, dim=-1)
        return self.split_heads(q), self.split_heads(k), self.split_heads(v)

    def project_kv(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        k, v = self.kv_proj(x).chunk(2, dim=-1)
        return self.split_heads(k), self.split_heads(v)


def _swapped(module: nn.Module) -> nn.Module:
    """A shallow copy of `module` sharing its parameters, with its linear maps (recursively) packed."""
    if isinstance(module, nn.Linear):
        return PackedLinear.of(module)
    if type(module) is DotAttention:  # fused q/k/v only where the projections are known; other variants
        return PackedAttention.of(module)  # keep their own code with their nn.Linear maps packed one by one
    clone = copy.copy(module)
    clone._modules = {name: None if child is None else _swapped(child) for name, child in module._modules.items()}
    return clone


def fast_cpu(model) -> bool:
    """Whether `model` gains from `inference_copy`: an nn.Module on an x86-64 CPU with oneDNN, fp32 or bf16,
    with `nn.Linear` maps to pack (a copy has none left)."""
    if not isinstance(model, nn.Module) or not (X86_64 and torch.backends.mkldnn.is_available()):
        return False
    weight = next(model.parameters(), None)
    if weight is None or weight.device.type != "cpu" or weight.dtype not in (torch.float32, torch.bfloat16):
        return False
    return any(isinstance(m, nn.Linear) for m in model.modules())


def inference_copy(model):
    """A copy of `model` in eval mode, for searches (no autograd), with packed linear maps; `model` itself where
    that would not help (other devices or dtypes, other CPUs, models that are not modules, a copy already)."""
    return _swapped(model).eval() if fast_cpu(model) else model
