"""What every attention variant shares: the reference formula and the masks.

Masks are boolean with True meaning "may attend" (the convention of
`torch.nn.functional.scaled_dot_product_attention`), broadcastable to
(B, H, T_query, T_key).
"""

import math

import torch
from torch import Tensor


def attention_weights(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    """The attention probabilities softmax(QKᵀ/√d + mask), (B, H, Tq, Tk)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)


def attention_reference(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    """softmax(QKᵀ/√d + mask)·V written out; the specification the fast path is tested against."""
    return attention_weights(q, k, mask) @ v


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Key-padding mask (B, 1, 1, S): True where the key is a real token."""
    return (tokens != pad_id)[:, None, None, :]


def causal_mask(length: int, device: torch.device | None = None) -> Tensor:
    """Lower-triangular mask (T, T): position i may attend to positions ≤ i."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


def prefix_causal_mask(queries: int, keys: int, device: torch.device | None = None) -> Tensor:
    """Causal mask (Tq, Tk) for the last `queries` positions of `keys`: query i sees keys ≤ keys - queries + i."""
    return torch.ones(queries, keys, dtype=torch.bool, device=device).tril(diagonal=keys - queries)


def combine(*masks: Tensor | None) -> Tensor | None:
    """The conjunction of the masks given (None = no constraint)."""
    present = [m for m in masks if m is not None]
    if not present:
        return None
    out = present[0]
    for m in present[1:]:
        out = out & m
    return out
