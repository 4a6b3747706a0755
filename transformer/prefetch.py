"""One item ahead: the next item of an iterator made in a background thread while the caller works on the last."""

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
_END = object()


def ahead(items: Iterable[T]) -> Iterator[T]:
    """`items` in order, each next one made in a thread while the caller works on the last, so that reading or
    collating overlaps work that releases the GIL (SentencePiece, zlib, torch). An error raised while making an
    item is raised here, in the caller's thread, in that item's place."""
    items = iter(items)
    with ThreadPoolExecutor(max_workers=1) as pool:
        upcoming = pool.submit(next, items, _END)
        while (item := upcoming.result()) is not _END:
            upcoming = pool.submit(next, items, _END)
            yield item
