"""Fast CPU inference: a copy of a model whose linear maps run through packed oneDNN weights (fp32 or bf16) or
int8 products, with nothing a search does not need.

`inference_copy(model, precision)` shares the model's parameters but swaps every `nn.Linear` for the kernel of
`precision` (`packed.PackedLinear`, `int8.Int8Linear`), fuses q/k/v of `dot` attention into one product (and runs
its attention with several queries a sentence, a beam's cross-attention, as two batched products) and the
feed-forward's ReLU into its first product, and swaps the dropouts (no-ops in eval mode) for identities. Each
weight is packed or quantized at its first use in that copy. Layer norm, softmax and the log-softmax stay fp32 in
every precision. fp32 gives the model's own results; bf16 and int8 run where the CPU has their kernels and fall back
to fp32 with one warning elsewhere; auto is what `transformer.compute.auto.resolve` makes it, int8 where it runs, else
fp32, without a warning (`kernels.runs` logs which kernels run; `decoded_in` names the precision a search ran in).
The copy is made once where a model is loaded for inference (a `Translator`) and kept for all its searches, by
every thread. A packed weight does not follow the parameters: weights changed in place (e.g. by
fused Adam, which does not even bump their version counters) need a fresh copy, so validation during training
makes one each time. The model itself is never modified. On a GPU the copy is the model itself and the speed comes
from the search: `decoding.cuda_graphs` runs it with static shapes, each decoder step replayed as one CUDA graph.
On the CPU the same static step (`static_step`) can be compiled ahead of time into native code (`compiled`,
`decoding.compiled`), from `traced_copy`: the copy's arithmetic in operators `torch.export` traces.
It may import `models`, `compute` and `core`.
"""

import copy
from functools import partial

import torch
from torch import Tensor, nn

from transformer.compute.auto import resolve
from transformer.core.precision import AUTO, named
from transformer.fast_inference.int8 import Int8Linear, Int8Traced
from transformer.fast_inference.kernels import X86_64, not_applied, onednn, runs
from transformer.fast_inference.packed import (
    FusedLinear,
    LinearKernel,
    PackedAttention,
    PackedLinear,
    PlainLinear,
    TracedAttention,
    packable,
)
from transformer.models.attention.dot import DotAttention
from transformer.models.transformer import FeedForward

__all__ = [
    "X86_64",
    "PackedAttention",
    "PackedLinear",
    "TRACED_KERNELS",
    "decoded_in",
    "fast_cpu",
    "inference_copy",
    "packable",
    "traced_copy",
]


class FusedFeedForward(FeedForward):
    """A `FeedForward` whose ReLU is fused into its first product, without its dropout."""

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.fc1(x))


def _recast(module: nn.Module, cls: type, children: dict[str, nn.Module | None]) -> nn.Module:
    """A shallow copy of `module` (every field shared) as a `cls`, with `children` as its submodules."""
    clone = copy.copy(module)
    clone.__class__, clone._modules = cls, children
    return clone


def _swapped(module: nn.Module, linear: LinearKernel, attention: type[PackedAttention] = PackedAttention) -> nn.Module:
    """A shallow copy of `module` sharing its parameters, with its linear maps (recursively) through `linear`."""
    if isinstance(module, nn.Linear):
        return linear(module)
    if isinstance(module, nn.Dropout):  # a no-op in eval mode, still a call that checks its arguments
        return nn.Identity()
    if type(module) is DotAttention:  # fused q/k/v only where the projections are known; other variants
        return attention.of(module, linear)  # keep their own code with their nn.Linear maps swapped one by one
    if type(module) is FeedForward:
        products = {"fc1": linear(module.fc1, relu=True), "fc2": linear(module.fc2, after_relu=True)}
        return _recast(module, FusedFeedForward, products)
    children = {}
    for name, child in module._modules.items():
        kernel = partial(linear, per_source=True) if name == "encoder" else linear  # it runs once a source
        children[name] = None if child is None else _swapped(child, kernel, attention)
    return _recast(module, type(module), children)


def _first_weight(model) -> Tensor | None:
    """A parameter of `model` where it is a module with `nn.Linear` maps to swap (a copy has none left); else None."""
    if not isinstance(model, nn.Module) or not any(isinstance(m, nn.Linear) for m in model.modules()):
        return None
    return next(model.parameters())


def fast_cpu(model) -> bool:
    """Whether `model` gains from `inference_copy`: an nn.Module with `nn.Linear` maps, fp32 or bf16, on an x86-64
    CPU with oneDNN."""
    weight = _first_weight(model)
    if weight is None or not onednn():
        return False
    return weight.device.type == "cpu" and weight.dtype in (torch.float32, torch.bfloat16)


def _kernel(precision: str) -> LinearKernel:
    """The linear maps of `precision` as it runs on this CPU."""
    ran = runs(precision)
    if ran == "int8":
        return Int8Linear.of
    return partial(PackedLinear.of, dtype=torch.bfloat16) if ran == "bf16" else PackedLinear.of


def _applied(model, precision: str) -> str:
    """`precision` as `inference_copy` applies it to `model` (bf16 and int8 apply to fp32 models on CPU), `auto`
    resolved; says once where an asked precision is not applied."""
    weight, fast = _first_weight(model), fast_cpu(model)
    fp32_on_cpu = fast and weight.dtype == torch.float32  # what bf16 and int8 apply to
    if precision == AUTO and not fp32_on_cpu:
        return "fp32"  # the model as it is, silently
    precision = resolve(precision, "inference", "cpu")
    if weight is not None and precision != "fp32" and not fp32_on_cpu:
        not_applied(precision, f"{weight.device.type} {weight.dtype}")
        return "fp32"
    return precision


def decoded_in(model, precision: str) -> str:
    """The precision `inference_copy(model, precision)` searches in, as a BLEU figure states it: the kernels' on this
    CPU (`kernels.runs`), or the model's own dtype where no copy is made (another device, dtype or CPU)."""
    applied, weight = _applied(model, precision), _first_weight(model)
    if weight is None:
        return applied
    if fast_cpu(model) and weight.dtype == torch.float32:
        return runs(applied)
    return named(str(weight.dtype).removeprefix("torch."))


def inference_copy(model, precision: str = "fp32"):
    """A copy of `model` in eval mode, for searches (no autograd), in `precision` (fp32: the model's own results;
    bf16; int8; auto: `transformer.compute.auto.resolve`, int8 where it runs, else fp32, silently; see the module's
    docstring); `model` itself where a copy would not help (other devices or dtypes, other CPUs, models that are not
    modules, a copy already). bf16 and int8 apply to fp32 models on CPU."""
    applied = _applied(model, precision)
    return _swapped(model, _kernel(applied)).eval() if fast_cpu(model) else model


TRACED_KERNELS: dict[str, LinearKernel] = {"fp32": PlainLinear.of, "int8": Int8Traced.of}  # what a trace keeps


def traced_copy(model: nn.Module, precision: str) -> nn.Module:
    """A copy of `model` in eval mode for `torch.export`, in `precision` (fp32 or int8, as `inference_copy` computes
    it): its fused products and ReLUs through operators a trace keeps (`PlainLinear`, `Int8Traced`), their weights
    prepared now rather than at a first call inside the trace, and attention written out (`TracedAttention`)."""
    traced = _swapped(model, TRACED_KERNELS[precision], TracedAttention).eval()
    for module in traced.modules():
        if isinstance(module, FusedLinear):
            module.prepare()
    return traced
