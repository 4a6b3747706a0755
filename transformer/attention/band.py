"""Banded attention shared by `local` and `strided`: keys unfolded into one window per query, O(T·w)."""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

NEG = -1e9  # a finite "minus infinity": a query whose window is all padding gets finite (unused) output


def unfold(x: Tensor, before: int, after: int) -> Tensor:
    """(B, H, S, ...) -> (B, H, S, before+1+after, ...): for each position its neighbours, zero-padded."""
    extra = x.dim() - 3
    x = F.pad(x, (0, 0) * extra + (before, after))
    windows = x.unfold(2, before + 1 + after, 1)  # (B, H, S, ..., W)
    return windows.movedim(-1, 3)  # (B, H, S, W, ...)


def band_scores(q: Tensor, k: Tensor, mask: Tensor | None, window: int, causal: bool) -> tuple[Tensor, int]:
    """Scaled scores (B, H, T, W) of each query against its window, masked; and how many keys lie before it."""
    b, _, t, dh = q.shape
    before, after = window - 1, 0 if causal else window - 1
    scores = torch.einsum("bhtd,bhtwd->bhtw", q, unfold(k, before, after)) / math.sqrt(dh)
    valid = torch.ones(b, 1, t, dtype=torch.bool, device=q.device) if mask is None else mask.reshape(b, 1, t)
    valid = F.pad(valid, (before, after)).unfold(2, before + 1 + after, 1)  # (B, 1, T, W); False off the ends
    return scores.masked_fill(~valid, NEG), before


def band_output(p: Tensor, v: Tensor, before: int, causal: bool) -> Tensor:
    """Weights (B, H, T, W) over each query's window of values (B, H, T, Dh) -> (B, H, T, Dh)."""
    return torch.einsum("bhtw,bhtwd->bhtd", p, unfold(v, before, 0 if causal else before))


def band_pattern(queries: int, keys: int, window: int, causal: bool, device: torch.device) -> Tensor:
    """(Tq, S): |i - j| < window (causal: 0 ≤ i - j < window), queries being the last of the keys."""
    i = torch.arange(keys - queries, keys, device=device)[:, None]
    j = torch.arange(keys, device=device)[None, :]
    near = (i - j).abs() < window
    return near & (j <= i) if causal else near
