"""Linear maps of an inference copy: fp32 or bf16 weights packed once for oneDNN, and attention with fused q/k/v.

On CPU, `F.linear` calls MKL's sgemm; on the AMD CPU we measured, oneDNN with the weight reordered once into its
blocked layout does the same fp32 products 1.3-3.3× faster for the 32-160-row matrices of step-by-step decoding
(`scripts/benchmark_decoding.py --products`).
"""

import copy
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer.compute.hardware import native_bf16
from transformer.fast_inference.kernels import onednn
from transformer.models.attention.dot import DotAttention
from transformer.models.attention.masks import attention_reference


def packable(x: Tensor, weight: Tensor) -> bool:
    """Whether x @ weightᵀ may take the packed oneDNN path: CPU inference in fp32 (or bf16 where oneDNN has it)."""
    if not (onednn() and torch.backends.mkldnn.enabled):
        return False
    if weight.dtype == torch.bfloat16 and not native_bf16("cpu"):
        return False  # e.g. CPUs without AVX-512
    return (
        x.device.type == "cpu"
        and not torch.is_grad_enabled()
        and not torch.is_autocast_enabled("cpu")
        and x.dtype == weight.dtype
        and weight.dtype in (torch.float32, torch.bfloat16)
    )


class FusedLinear(nn.Module):
    """x @ Wᵀ + b, then ReLU if `relu`, for W, b the row-wise concatenation of `weights`/`biases`; the kernels of
    the subclasses prepare the weight at its first use (a fused product may never be used). `per_source`: a product
    run once per source sentence on all its positions (the encoder's, cross-attention's keys and values), never in a
    decoding step. `after_relu`: its input is a ReLU's output, never negative (int8 rounds it twice as finely)."""

    def __init__(
        self, weights: list[Tensor], biases: list[Tensor | None], relu=False, per_source=False, after_relu=False
    ):
        super().__init__()
        self.parts, self.relu, self.per_source, self.after_relu = (weights, biases), relu, per_source, after_relu
        self.weight: Tensor | None = None
        self.bias: Tensor | None = None

    @classmethod
    def of(cls, *linears: nn.Linear, **options) -> "FusedLinear":
        """The product of `linears` side by side (output features concatenated); a missing bias counts as zeros."""
        return cls([m.weight for m in linears], [m.bias for m in linears], **options)

    def prepare(self) -> None:
        """Make the weight now (a trace must not make it at its first call); a kernel may add its own."""
        self._fuse()

    def _fuse(self) -> None:
        """Set the concatenated bias, then the weight: a thread that sees the weight also sees its bias."""
        weights, biases = self.parts
        if any(b is not None for b in biases):
            filled = [w.new_zeros(w.size(0)) if b is None else b for w, b in zip(weights, biases)]
            self.bias = torch.cat(filled) if len(filled) > 1 else filled[0].detach()
        self.weight = torch.cat(weights) if len(weights) > 1 else weights[0].detach()

    def plain(self, x: Tensor) -> Tensor:
        """The product through `F.linear`, in the weight's own dtype."""
        y = F.linear(x, self.weight, self.bias)
        return F.relu(y) if self.relu else y


class PlainLinear(FusedLinear):
    """A `FusedLinear` through `F.linear`: what `torch.export` traces (AOTInductor packs the weights itself)."""

    def forward(self, x: Tensor) -> Tensor:
        if self.weight is None:
            self._fuse()
        return self.plain(x)


LinearKernel = Callable[..., FusedLinear]  # a kernel's `FusedLinear.of`: (*linears, **FusedLinear's options) -> it


class PackedLinear(FusedLinear):
    """A `FusedLinear` through a oneDNN weight packed at first use, in `dtype` (default: the weight's own); a
    bf16 product of fp32 inputs takes them in bf16 and gives fp32 back."""

    def __init__(self, weights: list[Tensor], biases: list[Tensor | None], dtype=None, **options):
        super().__init__(weights, biases, **options)
        self.dtype = dtype
        self.packed: Tensor | None = None
        self.packed_bias: Tensor | None = None

    def _pack(self, rows: int) -> None:
        """Pack the weight (and cast the bias) in `dtype`; `rows` is a layout hint, any row count works with it."""
        dtype = self.dtype or self.weight.dtype
        self.packed_bias = None if self.bias is None else self.bias.to(dtype)
        self.packed = torch.ops.mkldnn._reorder_linear_weight(self.weight.to(dtype), rows)

    def forward(self, x: Tensor) -> Tensor:
        if self.weight is None:
            self._fuse()
        if not packable(x, self.weight):
            return self.plain(x)
        if self.packed is None:
            self._pack(max(1, math.prod(x.shape[:-1])))
        attr = "relu" if self.relu else "none"
        if self.packed.dtype == x.dtype:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.packed_bias, attr, [], "")
        y = torch.ops.mkldnn._linear_pointwise(x.to(self.packed.dtype), self.packed, self.packed_bias, attr, [], "")
        return y.to(x.dtype)


class PackedAttention(DotAttention):
    """A `DotAttention` whose projections run through an inference kernel, with q/k/v (and cross-attention's k/v)
    fused into one product each."""

    @classmethod
    def of(cls, attention: DotAttention, linear: LinearKernel = PackedLinear.of) -> "PackedAttention":
        """A shallow copy of `attention` (every field of it shared, so none can be forgotten) whose submodules
        are the projections through `linear`; no weights are made or initialised."""
        packed = copy.copy(attention)
        packed.__class__ = cls
        q, k, v = attention.q_proj, attention.k_proj, attention.v_proj
        packed._modules = {
            "q_proj": linear(q),
            "out_proj": linear(attention.out_proj),
            "qkv_proj": linear(q, k, v),
            "kv_proj": linear(k, v, per_source=True),
        }
        return packed

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool) -> Tensor:
        """Several queries per sentence and head without a causal mask (a beam's hypotheses folded into
        cross-attention's query axis, the encoder) as two batched products: at batch 32 on CPU 1.1-1.2× SDPA's
        fused kernel, 2-3.6× once `torch.set_num_threads` has run (`scripts/benchmark_attention.py --queries`,
        docs/speed.md); SDPA for one query, where it is the faster."""
        if is_causal or q.size(2) == 1:
            return super().attend(q, k, v, mask, is_causal)
        return attention_reference(q, k, v, mask)

    def project_qkv(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        q, k, v = self.qkv_proj(x).chunk(3, dim=-1)
        return self.split_heads(q), self.split_heads(k), self.split_heads(v)

    def project_kv(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Cross-attention's keys and values, made once per source: contiguous, so no step copies them again."""
        k, v = self.kv_proj(x).chunk(2, dim=-1)
        return self.split_heads(k).contiguous(), self.split_heads(v).contiguous()


class TracedAttention(PackedAttention):
    """A `PackedAttention` whose attention is written out (`attention_reference`) for a compiled step: inside a package
    SDPA's CPU kernel summed a source padded to its batch's longest otherwise than the same source alone, so a
    sentence's translation depended on its batch; written out, the padding adds exact zeros."""

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool) -> Tensor:
        if is_causal:
            return super().attend(q, k, v, mask, is_causal)
        return attention_reference(q, k, v, mask)
