"""An epoch's batch order without Python per pair: each pair becomes one uint64 key, numpy sorts the keys, and the
batches are cut once per distinct width.

A key's high half is the pair's length class and a tie-break: its wider side w, then target minus source (shifted
to be non-negative), then random bits; its low half is the pair's position. Sorted, the keys walk each width
through (w, 1) ... (w, w) ... (1, w), so neighbours differ by a token on one side, and their low halves, read in
place, are the epoch's order.
"""

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

_LOW, _HIGH = (0, 1) if np.little_endian else (1, 0)  # which uint32 of a uint64 holds its low and high bits
_BLOCK = 1 << 16  # pairs keyed or measured at once: their temporaries stay in the cache


@dataclass(frozen=True)
class KeyLayout:
    """How a pair's lengths and random bits pack into the high half of its key."""

    longest: int  # the widest side of any pair
    random_bits: int

    @classmethod
    def of(cls, lengths: np.ndarray, random: bool) -> "KeyLayout":
        """The layout for (N, 2) `lengths`; with `random`, every bit the lengths leave free is random."""
        longest = int(lengths.max(initial=1))
        class_bits = longest.bit_length() + (2 * longest - 2).bit_length()
        if class_bits > 32 or len(lengths) > 1 << 32:  # a key's high half, and its low half (the position)
            raise ValueError(f"{len(lengths)} pairs of up to {longest} tokens: at most 2**32 of up to 32,767")
        return cls(longest, 32 - class_bits if random else 0)

    @property
    def diff_bits(self) -> int:
        return (2 * self.longest - 2).bit_length()

    @property
    def width_shift(self) -> int:
        return self.diff_bits + self.random_bits

    def classes(self, lengths: np.ndarray) -> np.ndarray:
        """(N,) uint32 length classes of pairs with (N, 2) `lengths`: their keys' high halves, random bits zero."""
        out = np.empty(len(lengths), dtype=np.uint32)
        for start in range(0, len(lengths), _BLOCK):
            block = lengths[start : start + _BLOCK]
            src, tgt = block[:, 0].astype(np.uint32), block[:, 1].astype(np.uint32)
            high = np.left_shift(np.maximum(src, tgt), self.width_shift, out=out[start : start + len(block)])
            high |= (tgt + (self.longest - 1) - src) << self.random_bits
        return out

    def add_random_bits(self, high: np.ndarray, rng: np.random.Generator) -> None:
        """Set the random bits of (E,) `high` halves, in blocks (their draws do not depend on how E was made)."""
        if not self.random_bits:
            return
        mask = np.uint32((1 << self.random_bits) - 1)
        for start in range(0, len(high), _BLOCK):  # the generator's raw words: several times faster than integers()
            bits = high[start : start + _BLOCK]
            bits |= rng.bit_generator.random_raw((len(bits) + 1) // 2).view(np.uint32)[: len(bits)] & mask

    def lengths(self, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Source and target lengths (int32) of the pairs whose keys have the high halves `high`."""
        width = (high >> self.width_shift).view(np.int32)
        diff = ((high >> self.random_bits) & np.uint32((1 << self.diff_bits) - 1)).view(np.int32)
        diff -= self.longest - 1  # target minus source
        return width - np.maximum(diff, 0), width + np.minimum(diff, 0)

    def width_starts(self, keys: np.ndarray) -> np.ndarray:
        """(longest + 1,) where widths 1, 2, ... longest start among sorted `keys`, then their count."""
        widths = np.arange(1, self.longest + 1, dtype=np.uint64)
        return np.append(np.searchsorted(keys, widths << (self.width_shift + 32)), len(keys))


def halves(keys: np.ndarray) -> np.ndarray:
    """(E, 2) uint32 view of (E,) uint64 `keys`: columns _LOW and _HIGH."""
    return keys.view(np.uint32).reshape(-1, 2)


def sorted_keys(
    classes: np.ndarray, parts: list[range | np.ndarray], layout: KeyLayout, rng: np.random.Generator | None
) -> np.ndarray:
    """The sorted (E,) keys of the positions in `parts` (ranges, or uint32 arrays) into (N,) length `classes`."""
    keys = np.empty(sum(map(len, parts)), dtype=np.uint64)
    low, high = halves(keys)[:, _LOW], halves(keys)[:, _HIGH]
    done = 0
    for part in parts:
        for start in range(0, len(part), _BLOCK):
            block = part[start : start + _BLOCK]
            end = done + len(block)
            if isinstance(block, range):  # a slice of the classes: no gather
                low[done:end] = np.arange(block.start, block.stop, dtype=np.uint32)
                high[done:end] = classes[block.start : block.stop]
            else:
                low[done:end], high[done:end] = block, classes[block]
            done = end
    if rng is not None:
        layout.add_random_bits(high, rng)
    keys.sort()
    return keys


def _cuts(width_starts: np.ndarray, batch_tokens: int) -> np.ndarray:
    """(n + 1,) batch bounds over pairs sorted by width: a batch grows while its count times its widest side stays
    within `batch_tokens` (a pair wider than that is a batch alone). One step per width, none per pair."""
    bounds, start = [np.zeros(1, dtype=np.int64)], 0
    for width in np.flatnonzero(np.diff(width_starts)) + 1:
        low, high = int(width_starts[width - 1]), int(width_starts[width])
        most = max(1, batch_tokens // width)
        if low - start >= most:  # the open batch is full at this width
            bounds.append(np.array([low]))
            start = low
        cuts = np.arange(start + most, high, most)
        bounds.append(cuts)
        start = int(cuts[-1]) if len(cuts) else start
    total = int(width_starts[-1])
    return np.concatenate(bounds + [np.array([total])] if total else bounds)


@dataclass(frozen=True, eq=False)
class Batches:
    """An epoch's batches: the sorted keys cut at `bounds`, taken in the order `schedule`. Slicing gives the
    batches of a stretch of the schedule; each batch is its positions, ascending."""

    keys: np.ndarray  # (E,) sorted keys; their low halves are the positions
    layout: KeyLayout
    bounds: np.ndarray  # (n + 1,) where each batch starts among the keys, then where the last ends
    schedule: np.ndarray  # (m,) the batches taken, in order: all n, shuffled, or a stretch of them

    @classmethod
    def cut(cls, keys: np.ndarray, layout: KeyLayout, batch_tokens: int, rng: np.random.Generator | None):
        """The batches of sorted `keys`, shuffled with `rng` (in length order without)."""
        bounds = _cuts(layout.width_starts(keys), batch_tokens)
        n = len(bounds) - 1
        return cls(keys, layout, bounds, rng.permutation(n) if rng is not None else np.arange(n))

    @property
    def order(self) -> np.ndarray:
        """(E,) the positions, batch after batch, shortest batches first (a view of the keys)."""
        return halves(self.keys)[:, _LOW]

    def __len__(self) -> int:
        return len(self.schedule)

    def __getitem__(self, i: int | slice) -> "np.ndarray | Batches":
        if isinstance(i, slice):
            return Batches(self.keys, self.layout, self.bounds, self.schedule[i])
        batch = self.schedule[i]
        return np.sort(self.order[self.bounds[batch] : self.bounds[batch + 1]])

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self[i] for i in range(len(self)))

    def shapes(self) -> tuple[np.ndarray, np.ndarray]:
        """(n, 2) each batch's longest source and target, and (n,) its tokens (both sides, without padding), in
        length order; read from the keys a block of whole batches at a time."""
        n, bounds, high = len(self.bounds) - 1, self.bounds, halves(self.keys)[:, _HIGH]
        longest, tokens = np.empty((n, 2), dtype=np.int64), np.empty(n, dtype=np.int64)
        first = 0
        while first < n:
            last = max(first + 1, int(np.searchsorted(bounds, bounds[first] + _BLOCK, side="right")) - 1)
            src, tgt = self.layout.lengths(high[bounds[first] : bounds[last]])
            at = bounds[first:last] - bounds[first]  # the batches' starts in this block
            longest[first:last, 0] = np.maximum.reduceat(src, at)
            longest[first:last, 1] = np.maximum.reduceat(tgt, at)
            tokens[first:last] = np.add.reduceat(src + tgt, at, dtype=np.int64)
            first = last
        return longest, tokens

    def padding_fraction(self) -> float:
        """Share of padded positions (source and target together) over the scheduled batches."""
        longest, tokens = self.shapes()
        padded = int((np.diff(self.bounds)[self.schedule] * longest[self.schedule].sum(axis=1)).sum())
        return 1.0 - int(tokens[self.schedule].sum()) / padded if padded else 0.0


def token_batches(lengths: np.ndarray, batch_tokens: int, rng: np.random.Generator | None) -> Batches:
    """Group the positions of (N, 2) source and target `lengths` into batches of at most `batch_tokens` padded
    tokens a side: k pairs whose widest side is w make a batch while k * w <= batch_tokens (or k = 1).

    Pairs are sorted by their wider side, then target minus source, ties broken at random when `rng` is given,
    so that a batch holds similar lengths; the batches are then shuffled."""
    layout = KeyLayout.of(lengths, rng is not None)
    keys = sorted_keys(layout.classes(lengths), [range(len(lengths))], layout, rng)
    return Batches.cut(keys, layout, batch_tokens, rng)
