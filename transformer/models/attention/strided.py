"""`strided`: the Sparse Transformer's fixed pattern (Child et al. 2019): a local band plus summary columns.

Query i sees keys j with |i − j| < w (the band) or j ≡ s − 1 (mod s) (every s-th
position, which gathers its block); causal: j ≤ i. One softmax over both sets.
Time and memory O(T·(w + T/s)), i.e. O(T·√T) with w, s ≈ √T. Self-attention only
(encoder and decoder); cached in decoding (a step scores the whole prefix under the pattern).
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from transformer.models.attention.band import NEG, band_output, band_pattern, band_scores
from transformer.models.attention.base import Attention
from transformer.models.attention.masks import combine


class StridedAttention(Attention):
    """Band of width `config.window` plus every `config.stride`-th key."""

    uses = ("encoder", "decoder")

    def pattern(self, queries: int, keys: int, is_causal: bool, device: torch.device) -> Tensor:
        s = self.config.stride
        i = torch.arange(keys - queries, keys, device=device)[:, None]
        j = torch.arange(keys, device=device)[None, :]
        summary = (j % s == s - 1) & (j <= i) if is_causal else j % s == s - 1
        return band_pattern(queries, keys, self.config.window, is_causal, device) | summary

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool) -> Tensor:
        t, s = q.size(2), k.size(2)
        if t != s:  # cached decoding: the pattern as a mask
            pattern = combine(mask, self.pattern(t, s, is_causal, q.device))
            return F.scaled_dot_product_attention(q, k, v, attn_mask=pattern)
        w, stride = self.config.window, self.config.stride
        local = band_scores(q, k, mask, w, is_causal)  # (B, H, n, w, K)
        ks, vs = k[:, :, stride - 1 :: stride], v[:, :, stride - 1 :: stride]  # (B, H, S/s, Dh) summary keys
        j = torch.arange(s, device=q.device)[None, stride - 1 :: stride]  # empty when s < stride
        i = torch.arange(t, device=q.device)[:, None]
        keep = ((i - j).abs() >= w) & ((j <= i) if is_causal else True)  # (T, S/s): not already in the band
        if mask is not None:
            keep = keep & mask[..., stride - 1 :: stride]
        far = (q @ ks.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(~keep, NEG)
        b, h, n = local.shape[:3]
        far = F.pad(far, (0, 0, 0, n * w - t)).view(b, h, n, w, -1)  # into the band's blocks
        p = F.dropout(torch.softmax(torch.cat([local, far], dim=-1), dim=-1), self.dropout, self.training)
        near_p, far_p = p.split([local.size(-1), far.size(-1)], dim=-1)
        return band_output(near_p, v, w, is_causal) + (far_p.reshape(b, h, n * w, -1) @ vs)[:, :, :t]
