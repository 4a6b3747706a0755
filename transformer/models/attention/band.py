"""Banded attention shared by `local` and `strided`, in blocks: O(T·w) time and memory.

Positions are cut into blocks of w; the queries of a block score the keys of that block
and its neighbours (the previous block; non-causal also the next), a (w, 3w) or (w, 2w)
tile per block, masked to the band |i − j| < w (causal: 0 ≤ i − j < w).
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

NEG = -1e9  # a finite "minus infinity": a query whose window is all padding gets finite (unused) output


def _blocks(x: Tensor, w: int, causal: bool) -> Tensor:
    """(B, H, T', ...) with T' = n·w -> each block's keys (B, H, n, 2w or 3w, ...): previous, own (and next)."""
    x = F.pad(x, (0, 0) * (x.dim() - 3) + (w, 0 if causal else w))
    tiles = x.unfold(2, 2 * w if causal else 3 * w, w)  # (B, H, n, ..., K)
    return tiles.movedim(-1, 3)


def band_scores(q: Tensor, k: Tensor, mask: Tensor | None, w: int, causal: bool) -> Tensor:
    """Scaled scores (B, H, n, w, K) of each block of queries against its keys, masked to the band."""
    b, h, t, dh = q.shape
    pad = -t % w
    q, k = F.pad(q, (0, 0, 0, pad)), F.pad(k, (0, 0, 0, pad))
    n = (t + pad) // w
    scores = q.view(b, h, n, w, dh) @ _blocks(k, w, causal).transpose(-2, -1) / math.sqrt(dh)
    valid = torch.ones(b, 1, t, dtype=torch.bool, device=q.device) if mask is None else mask.reshape(b, 1, t)
    valid = _blocks(F.pad(valid, (0, pad))[..., None], w, causal)[..., 0][:, :, :, None, :]  # (B, 1, n, 1, K)
    a = torch.arange(w, device=q.device)[:, None]
    rel = a - torch.arange(scores.size(-1), device=q.device)[None, :] + w  # i − j within a tile
    near = (rel >= 0) & (rel < w) if causal else rel.abs() < w
    return scores.masked_fill(~(valid & near), NEG)


def band_output(p: Tensor, v: Tensor, w: int, causal: bool) -> Tensor:
    """Weights (B, H, n, w, K) over each block's values -> (B, H, T, Dh) for values (B, H, T, Dh)."""
    b, h, t, dh = v.shape
    v = F.pad(v, (0, 0, 0, -t % w))
    return (p @ _blocks(v, w, causal)).reshape(b, h, -1, dh)[:, :, :t]


def band_pattern(queries: int, keys: int, window: int, causal: bool, device: torch.device) -> Tensor:
    """(Tq, S): |i - j| < window (causal: 0 ≤ i - j < window), queries being the last of the keys."""
    i = torch.arange(keys - queries, keys, device=device)[:, None]
    j = torch.arange(keys, device=device)[None, :]
    near = (i - j).abs() < window
    return near & (j <= i) if causal else near
