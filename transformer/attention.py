"""Scaled dot-product and multi-head attention.

Masks are boolean with True meaning "may attend" (the convention of
`torch.nn.functional.scaled_dot_product_attention`), broadcastable to
(B, H, T_query, T_key).
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


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


class MultiHeadAttention(nn.Module):
    """Multi-head attention; the same module serves encoder self-attention,
    masked decoder self-attention and encoder-decoder cross-attention.

    Self-attention projects queries, keys and values from one input (`project_qkv`);
    cross-attention takes queries from the target (`project_q`) and keys/values from
    the source (`project_kv`), the latter once per sentence. A key bias would only add
    q·b to every score of a query, which softmax cancels (its gradient is zero), so
    `k_proj` has none.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads, self.d_model, self.dropout = n_heads, d_model, dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def split_heads(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        return x.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2)  # (B, H, T, Dh)

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values of `x` (B, T, D), each (B, H, T, Dh)."""
        return self.project_q(x), *self.project_kv(x)

    def project_q(self, x: Tensor) -> Tensor:
        """Queries of `x` (B, T, D) -> (B, H, T, Dh)."""
        return self.split_heads(self.q_proj(x))

    def project_kv(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of `x` (B, S, D), each (B, H, S, Dh)."""
        return self.split_heads(self.k_proj(x)), self.split_heads(self.v_proj(x))

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        """Attend from queries (B·G, H, T, Dh) to keys/values (B, H, S, Dh) -> output (B·G, T, D).

        When the query batch is G times the key batch (G beam hypotheses per
        source sentence), the G query rows of a sentence share its keys and
        values without copying them.
        """
        bg, h, t, dh = q.shape
        groups = bg // k.size(0)
        if groups > 1:  # fold the hypotheses of a sentence into its query axis
            q = q.view(k.size(0), groups, h, t, dh).transpose(1, 2).reshape(k.size(0), h, groups * t, dh)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0, is_causal=is_causal
        )
        if groups > 1:  # (B, H, G·T, Dh) -> (B·G, H, T, Dh)
            y = y.view(k.size(0), h, groups, t, dh).transpose(1, 2).reshape(bg, h, t, dh)
        y = y.transpose(1, 2).reshape(bg, t, h * dh)  # (B·G, T, D)
        return self.out_proj(y)
