"""`local`: band (sliding-window) attention (Beltagy et al. 2020; Child et al. 2019's local part).

Query i sees keys j with |i − j| < w (decoder: i − w < j ≤ i, the previous w, itself
included): softmax over the window of QKᵀ/√d, times V. Keys are tiled per
block of w queries (band.py), so time and memory are O(T·w), not O(T²). Self-attention only
(encoder and decoder): a band across source and target positions has no meaning when
a decoding step's position is not the source's. In cached decoding a step attends to
the last w positions only, and the cache keeps no more than 2w (memory flat in output length).
"""

import torch
import torch.nn.functional as F
from torch import Tensor

from transformer.models.attention.band import band_output, band_pattern, band_scores
from transformer.models.attention.base import Attention
from transformer.models.attention.masks import combine


class LocalAttention(Attention):
    """Sliding-window attention of width `config.window`."""

    uses = ("encoder", "decoder")

    @property
    def reach(self) -> int:
        return self.config.window

    def pattern(self, queries: int, keys: int, is_causal: bool, device: torch.device) -> Tensor:
        return band_pattern(queries, keys, self.config.window, is_causal, device)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool) -> Tensor:
        t, s, w = q.size(2), k.size(2), self.config.window
        if t != s:  # cached decoding: the keys in reach of these new positions only
            first = max(0, s - t - w + 1) if is_causal else 0
            k, v = k[:, :, first:], v[:, :, first:]
            mask = None if mask is None else mask[..., first:]
            band = combine(mask, band_pattern(t, k.size(2), w, is_causal, q.device))
            return F.scaled_dot_product_attention(q, k, v, attn_mask=band)
        p = F.dropout(torch.softmax(band_scores(q, k, mask, w, is_causal), dim=-1), self.dropout, self.training)
        return band_output(p, v, w, is_causal)
