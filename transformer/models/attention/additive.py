"""`additive`: Bahdanau et al. (2015) attention, per head.

score(q, k) = vᵀ tanh(W_q q + W_k k), softmax over keys, times V. The T×S×d tanh
term is built for a chunk of queries at a time (at most `CHUNK` elements, recomputed
in the backward pass), so memory is O(T·S) like `dot`, not O(T·S·d); time O(T·S·d).
All three uses; W_k k is the cached key (once per source for cross-attention).
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from transformer.models.attention.base import Attention
from transformer.models.attention.masks import combine

CHUNK = 1 << 22  # elements of the tanh term held at once (16 MiB in fp32)
NEG = -1e9


class AdditiveAttention(Attention):
    """vᵀ tanh(W_q q + W_k k) scoring with one v per head."""

    def add_parameters(self) -> None:
        head = self.d_model // self.n_heads
        self.score_v = nn.Parameter(torch.randn(self.n_heads, head) * head**-0.5)

    def _chunk_scores(self, q: Tensor, k: Tensor) -> Tensor:
        """(B, H, c, Dh) × (B, H, S, Dh) -> (B, H, c, S)."""
        return torch.einsum("bhtsd,hd->bhts", torch.tanh(q[:, :, :, None, :] + k[:, :, None, :, :]), self.score_v)

    def scores(self, q: Tensor, k: Tensor) -> Tensor:
        """All additive scores (B, H, T, S), chunk by chunk of queries."""
        b, h, t, dh = q.shape
        rows = max(1, CHUNK // (b * h * k.size(2) * dh))
        parts = []
        for start in range(0, t, rows):
            qc = q[:, :, start : start + rows]
            if torch.is_grad_enabled() and (qc.requires_grad or k.requires_grad):
                parts.append(checkpoint(self._chunk_scores, qc, k, use_reentrant=False))
            else:
                parts.append(self._chunk_scores(qc, k))
        return torch.cat(parts, dim=2)

    def weights(self, q: Tensor, k: Tensor, mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        allowed = combine(mask, self.pattern(q.size(2), k.size(2), is_causal, q.device))
        s = self.scores(q, k)
        return torch.softmax(s if allowed is None else s.masked_fill(~allowed, NEG), dim=-1)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool) -> Tensor:
        p = F.dropout(self.weights(q, k, mask, is_causal), self.dropout, self.training)
        return p @ v
