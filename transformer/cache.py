"""The decoder's key/value cache for incremental decoding."""

import torch
from torch import Tensor


class DecoderCache:
    """Per-layer attention keys/values kept between decoding steps.

    Self-attention keys/values are written one step at a time into buffers
    preallocated for `max_len` positions, so no step re-concatenates the prefix.
    Cross-attention keys/values are computed once per source sentence and shared
    by every hypothesis (row) decoded from it: rows = sentences × group.
    """

    def __init__(self, cross_kv: list[tuple[Tensor, Tensor]], group: int, max_len: int):
        self.cross_kv = cross_kv  # per layer: (B, H, S, Dh) keys and values
        b, h, _, dh = cross_kv[0][0].shape
        like = cross_kv[0][0]
        self.self_k = [like.new_zeros(b * group, h, max_len, dh) for _ in cross_kv]
        self.self_v = [like.new_zeros(b * group, h, max_len, dh) for _ in cross_kv]
        self.length = 0  # positions filled so far

    def extend(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write this step's keys/values (N, H, T, Dh) for `layer`; return the whole prefix."""
        end = self.length + k.size(2)
        self.self_k[layer][:, :, self.length : end] = k
        self.self_v[layer][:, :, self.length : end] = v
        return self.self_k[layer][:, :, :end], self.self_v[layer][:, :, :end]

    def advance(self, steps: int = 1) -> None:
        """Mark `steps` more positions as filled (after every layer has written them)."""
        self.length += steps

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep the rows `rows` (indices into the current rows) in that order.

        `sentences` (indices into the current sentences) shrinks the cross-attention
        cache when finished sentences leave the batch.
        """
        self.self_k = [buf.index_select(0, rows) for buf in self.self_k]
        self.self_v = [buf.index_select(0, rows) for buf in self.self_v]
        if sentences is not None:
            self.cross_kv = [(k.index_select(0, sentences), v.index_select(0, sentences)) for k, v in self.cross_kv]

    @property
    def device(self) -> torch.device:
        return self.self_k[0].device
