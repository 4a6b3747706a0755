"""Attention variants, chosen per use (encoder self-attention, decoder self-attention, cross-attention).

`VARIANTS` is the one name → class table: a new variant is one module here plus a
line below (and its knobs in `transformer.core.config.AttentionConfig`, checked in `cli/checks.py`).
"""

from transformer.core.config import AttentionConfig
from transformer.models.attention.additive import AdditiveAttention
from transformer.models.attention.base import USES, Attention
from transformer.models.attention.dot import DotAttention
from transformer.models.attention.linformer import LinformerAttention
from transformer.models.attention.local import LocalAttention
from transformer.models.attention.lsh import LSHAttention
from transformer.models.attention.masks import attention_reference, attention_weights, causal_mask, padding_mask
from transformer.models.attention.strided import StridedAttention

VARIANTS: dict[str, type[Attention]] = {
    "dot": DotAttention,
    "additive": AdditiveAttention,
    "local": LocalAttention,
    "strided": StridedAttention,
    "lsh": LSHAttention,
    "linformer": LinformerAttention,
}
MultiHeadAttention = DotAttention  # today's name for the default

__all__ = [
    "USES",
    "VARIANTS",
    "Attention",
    "MultiHeadAttention",
    "attention_reference",
    "attention_weights",
    "build_attention",
    "causal_mask",
    "padding_mask",
    "usable",
]


def usable(name: str, use: str) -> bool:
    """Whether variant `name` may serve `use` (one of USES)."""
    return name in VARIANTS and use in VARIANTS[name].uses


def build_attention(
    name: str, d_model: int, n_heads: int, dropout: float, config: AttentionConfig, max_length: int
) -> Attention:
    """The attention module called `name`, with the variants' settings `config` (see `Attention`)."""
    return VARIANTS[name](d_model, n_heads, dropout, config, max_length)
