"""Token ids of a list<int> Arrow column read in place: a batch's rows are gathered straight from the (memory-mapped)
buffers with numpy, so reading a batch costs a few numpy calls per file and none per row."""

from collections.abc import Iterator

import numpy as np
import pyarrow as pa


def list_lengths(column: pa.ChunkedArray, out: np.ndarray, plus: int = 0) -> None:
    """Write each list's length in `column`, plus `plus`, into `out` (N,), capped at its dtype's largest value."""
    cap, row = np.iinfo(out.dtype).max, 0
    for chunk in column.chunks:
        n = len(chunk)
        out[row : row + n] = np.minimum(np.diff(chunk.offsets.to_numpy()) + plus, cap)
        row += n


def _root(buffer: pa.Buffer) -> pa.Buffer:
    """The buffer that `buffer` is a slice of, at the top: a whole memory-mapped file, or `buffer` itself."""
    while buffer.parent is not None:
        buffer = buffer.parent
    return buffer


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _runs(keys: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """(start, end, key) of each stretch of equal `keys`."""
    if not len(keys):
        return iter(())
    edges = (np.flatnonzero(keys[1:] != keys[:-1]) + 1).tolist()
    starts, ends = [0, *edges], [*edges, len(keys)]
    return zip(starts, ends, keys[starts].tolist())


class IdColumn:
    """One list<int> column (any integer width; int32 or int64 offsets), read without copying.

    Chunks whose buffers are slices of one allocation, such as the record batches of one memory-mapped Arrow
    file, share one numpy view of it: each chunk is a base (an element index) into a view."""

    def __init__(self, column: pa.ChunkedArray):
        chunks = [chunk for chunk in column.chunks if len(chunk)]
        self.row_starts = np.cumsum([0] + [len(chunk) for chunk in chunks])  # (C + 1,) each chunk's first row, then N
        self.dtype = np.dtype(column.type.value_type.to_pandas_dtype())
        self._views: list[np.ndarray] = []
        self._view_of: dict[tuple[int, int, str], int] = {}
        placed = [(*self._place(chunk.offsets), *self._place(chunk.values)) for chunk in chunks]
        placed = np.array(placed, dtype=np.int64).reshape(-1, 4)  # (C, 4) per chunk: offsets' view, base; values'
        self.offset_view, self.offset_base, self.value_view, self.value_base = placed.T

    def _place(self, array: pa.Array) -> tuple[int, int]:
        """(view, base): where `array`'s first element lies among the views."""
        own = array.to_numpy(zero_copy_only=True)
        size, root = own.dtype.itemsize, _root(array.buffers()[1])
        shift = _address(own) - root.address
        if root.address % size or shift % size:  # not whole elements from the top: the array is its own view
            root, shift = array.buffers()[1], _address(own) - array.buffers()[1].address
        key = (root.address, root.size, own.dtype.str)
        if key not in self._view_of:
            self._view_of[key] = len(self._views)
            self._views.append(np.frombuffer(root, dtype=own.dtype, count=root.size // size))
        return self._view_of[key], shift // size

    def tokens(self, rows: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The ids of `rows` one after the other, as one array; `lengths` gives each row's length.

        Any order of rows works; ascending rows read each file in one stretch, so they cost the fewest calls."""
        chunk = np.searchsorted(self.row_starts, rows, side="right") - 1
        at = self.offset_base[chunk] + (rows - self.row_starts[chunk])  # each row's offset entry
        starts = np.empty(len(rows), dtype=np.int64)
        for a, b, view in _runs(self.offset_view[chunk]):
            starts[a:b] = self._views[view][at[a:b]]
        starts += self.value_base[chunk]
        ends = np.cumsum(lengths)
        firsts = ends - lengths  # where each row's ids start in the result
        index = np.repeat(starts - firsts, lengths) + np.arange(ends[-1] if len(ends) else 0)  # (total,)
        out = np.empty(len(index), dtype=self.dtype)
        for a, b, view in _runs(self.value_view[chunk]):
            lo, hi = firsts[a], ends[b - 1]
            out[lo:hi] = self._views[view][index[lo:hi]]
        return out
