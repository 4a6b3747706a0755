"""The decoder's key/value cache for incremental decoding."""

import torch
from torch import Tensor


class DecoderCache:
    """Per-layer attention keys/values kept between decoding steps.

    Self-attention keys/values of all layers live in one buffer preallocated for
    `max_len` positions and written one step at a time, so no step re-concatenates
    the prefix; beam reordering is one `index_select` into a spare buffer of the
    same size (no allocation). Cross-attention keys/values are computed once per
    source sentence and shared by every hypothesis (row) decoded from it:
    rows = sentences × group.
    """

    def __init__(self, cross_kv: list[tuple[Tensor, Tensor]], group: int, max_len: int):
        self.cross_kv = cross_kv  # per layer: (B, H, S, Dh) keys and values
        b, h, _, dh = cross_kv[0][0].shape
        self.buffer = cross_kv[0][0].new_zeros(b * group, 2 * len(cross_kv), h, max_len, dh)  # (N, 2·layers, H, L, Dh)
        self.spare = torch.empty_like(self.buffer)
        self.rows = b * group  # rows in use
        self.length = 0  # positions filled so far

    def extend(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write this step's keys/values (N, H, T, Dh) for `layer`; return the whole prefix, each (N, H, L, Dh)."""
        end = self.length + k.size(2)
        keys, values = self.buffer[: self.rows, 2 * layer], self.buffer[: self.rows, 2 * layer + 1]
        keys[:, :, self.length : end] = k
        values[:, :, self.length : end] = v
        return keys[:, :, :end], values[:, :, :end]

    def advance(self, steps: int = 1) -> None:
        """Mark `steps` more positions as filled (after every layer has written them)."""
        self.length += steps

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep the rows `rows` (indices into the current rows) in that order.

        `sentences` (indices into the current sentences) shrinks the cross-attention
        cache when finished sentences leave the batch.
        """
        filled = self.buffer[: self.rows, :, :, : self.length]  # positions past `length` hold nothing yet
        torch.index_select(filled, 0, rows, out=self.spare[: rows.numel(), :, :, : self.length])
        self.buffer, self.spare, self.rows = self.spare, self.buffer, rows.numel()
        if sentences is not None:
            self.cross_kv = [(k.index_select(0, sentences), v.index_select(0, sentences)) for k, v in self.cross_kv]
