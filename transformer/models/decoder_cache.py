"""The decoder's key/value cache for incremental decoding."""

import torch
from torch import Tensor


def _copy_rows(x: Tensor, rows: Tensor) -> None:
    """Make row i of `x` its row `rows[i]` for every i < len(rows), in place, copying only the rows that change."""
    moved = (rows != torch.arange(rows.numel(), device=rows.device)).nonzero().squeeze(1)
    if moved.numel():
        x.index_copy_(0, moved, x.index_select(0, rows[moved]))


class DecoderCache:
    """Per-layer attention keys/values kept between decoding steps.

    Self-attention keys/values of all layers live in one preallocated buffer written
    one step at a time, so no step re-concatenates the prefix (a position is written
    before any query reads it, so the buffer starts uninitialised). Positions come before
    heads in it: a row's keys at one position lie together, which attention reads faster on
    a CPU at 32-160 rows and a reorder copies in longer runs (docs/speed.md); beam reordering copies,
    in place, only the rows whose hypothesis changed (none: nothing is copied). When queries
    see only the last `reach` positions (`local` attention) the buffer holds 2·reach
    positions and slides: memory stays flat in the output length. Cross-attention
    keys/values are computed once per source sentence and shared by every hypothesis
    (row) decoded from it.
    """

    def __init__(self, cross_kv: list[tuple[Tensor, Tensor]], group: int, max_len: int, reach: int | None = None):
        self.cross_kv = cross_kv  # per layer: (B, H, S, Dh) keys and values
        b, h, _, dh = cross_kv[0][0].shape
        capacity = max_len if reach is None else min(max_len, 2 * reach)
        self.buffer = cross_kv[0][0].new_empty(b * group, 2 * len(cross_kv), capacity, h, dh)  # (N, 2·layers, L, H, Dh)
        self.reach = reach
        self.rows = b * group  # rows in use
        self.length = 0  # positions decoded so far: the next one's index
        self.filled = 0  # positions held in the buffer: the last `filled` of them

    def make_room(self, steps: int) -> None:
        """Before a step of `steps` positions: with a bounded reach, slide out positions no query will see."""
        if self.reach is None or self.filled + steps <= self.buffer.size(2):
            return
        keep = min(self.filled, self.reach - 1)  # the new positions' queries see at most reach − 1 earlier ones
        if keep + steps > self.buffer.size(2):  # a long forced prefix: grow to hold it
            shape = (*self.buffer.shape[:2], keep + steps, *self.buffer.shape[3:])
            grown = self.buffer.new_empty(shape)
            grown[:, :, :keep] = self.buffer[:, :, self.filled - keep : self.filled]
            self.buffer = grown
        else:
            self.buffer[:, :, :keep] = self.buffer[:, :, self.filled - keep : self.filled].clone()
        self.filled = keep

    def extend(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Write this step's keys/values (N, H, T, Dh) for `layer`; return the held prefix, each (N, H, L, Dh)."""
        end = self.filled + k.size(2)
        keys, values = self.buffer[: self.rows, 2 * layer], self.buffer[: self.rows, 2 * layer + 1]  # (N, L, H, Dh)
        keys[:, self.filled : end] = k.transpose(1, 2)
        values[:, self.filled : end] = v.transpose(1, 2)
        return keys[:, :end].transpose(1, 2), values[:, :end].transpose(1, 2)

    def advance(self, steps: int = 1) -> None:
        """Mark `steps` more positions as decoded (after every layer has written them)."""
        self.length += steps
        self.filled += steps

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep the rows `rows` (indices into the current rows) in that order.

        More rows than the buffer holds (a beam's first step, one row per sentence,
        fanning out to its hypotheses) grow it once. `sentences` (indices into the
        current sentences) shrinks the cross-attention cache when finished sentences
        leave the batch.
        """
        held = self.buffer[:, :, : self.filled]  # positions past `filled` hold nothing yet
        if rows.numel() > self.buffer.size(0):
            grown = self.buffer.new_empty(rows.numel(), *self.buffer.shape[1:])
            grown[:, :, : self.filled] = held.index_select(0, rows)
            self.buffer = grown
        else:
            _copy_rows(held, rows)
        self.rows = rows.numel()
        if sentences is not None:
            self.cross_kv = [(k.index_select(0, sentences), v.index_select(0, sentences)) for k, v in self.cross_kv]
