"""What every corpus source offers (`Source`), and what the formats share."""

import copy
import hashlib
import re
from collections import Counter
from collections.abc import Iterator
from itertools import compress, islice
from pathlib import Path

from transformer.core.config import SourceConfig
from transformer.core.errors import UserError


def same_language(code: str, lang: str) -> bool:
    """Whether the language code `code` (fr, fr-FR, fr_CA, FR) is the language `lang` (fr), regions aside."""
    return re.split(r"[-_]", code.strip().lower())[0] == re.split(r"[-_]", lang.strip().lower())[0]


def file_stats(path: Path, key: str, block: int = 1 << 20) -> list:
    """A file's path, size and the SHA-256 of its first and last `block` bytes (the setting `key` names it when it is
    missing): the same for copies of a file on other nodes (unlike its mtime), different after an edit that changes
    its size or its ends (a compressed file's last bytes hold a checksum of its whole text)."""
    if not path.exists():
        raise UserError(f"missing corpus file {path}; check the {key} settings")
    size = path.stat().st_size
    if not path.is_file():  # a folder: reading the corpus says what is wrong
        return [str(path), size]
    with open(path, "rb") as f:
        head = f.read(block)
        f.seek(max(size - block, 0))
        tail = f.read(block)
    return [str(path), size, hashlib.sha256(head + tail).hexdigest()[:16]]


class Source:
    """A parallel corpus in one format, read as a stream of (source, target) pairs in order.

    `given_as` says which settings name this format (for messages); `claims` says whether a setting without
    `format` is this one (the first class in `SOURCES` that claims it wins)."""

    given_as = ""

    def __init__(self, cfg: SourceConfig, src_lang: str, tgt_lang: str, key: str):
        self.cfg, self.langs, self.key, self.swapped = cfg, (src_lang, tgt_lang), key, False
        self.check()

    @classmethod
    def claims(cls, cfg: SourceConfig) -> bool:
        return False

    def check(self) -> None:
        """Refuse settings this format cannot read (no file is opened)."""
        if not self.cfg.path:
            raise UserError(f"{self.key} needs {self.key}.path")

    def pairs(self, skipped: Counter | None = None) -> Iterator[tuple[str, str]]:
        """The pairs of `chunks` one at a time (read a chunk ahead): for corpora small enough to list."""
        for srcs, tgts in self.chunks(10_000, skipped):
            yield from zip(srcs, tgts)

    def chunks(self, size: int, skipped: Counter | None = None) -> Iterator[tuple[list[str], list[str]]]:
        """Stripped (source, target) pairs in order, as (sources, targets) lists of at most `size`, with no Python
        step per pair where the format allows it. A pair with an empty side is left out and counted as
        `skipped["empty"]`, and the format's own skips under their own reason."""
        skipped = Counter() if skipped is None else skipped
        for srcs, tgts in self.row_chunks(size, skipped):
            srcs, tgts = [s.strip() for s in srcs], [t.strip() for t in tgts]
            if not (all(srcs) and all(tgts)):
                whole = [bool(s and t) for s, t in zip(srcs, tgts)]
                skipped["empty"] += whole.count(False)
                srcs, tgts = list(compress(srcs, whole)), list(compress(tgts, whole))
            yield (tgts, srcs) if self.swapped else (srcs, tgts)

    def row_chunks(self, size: int, skipped: Counter) -> Iterator[tuple[list[str], list[str]]]:
        """`rows` as (sources, targets) lists of `size` (a format may read them faster a block at a time)."""
        rows = self.rows(skipped)
        while chunk := list(islice(rows, size)):
            srcs, tgts = zip(*chunk)
            yield list(srcs), list(tgts)

    def rows(self, skipped: Counter) -> Iterator[tuple[str, str]]:
        """The pairs as the format holds them, in the order of `self.langs`."""
        raise NotImplementedError

    def side(self, lang: str) -> Iterator[str]:
        """The lines in language `lang` (one of `self.langs`), as read: e.g. monolingual text to back-translate."""
        raise NotImplementedError

    def side_index(self, lang: str) -> int:
        """0 for the source language, 1 for the target language."""
        if lang not in self.langs:
            raise self.error(f"it holds {self.langs[0]} and {self.langs[1]}, not {lang}")
        return self.langs.index(lang)

    def fingerprint(self) -> dict:
        """What identifies the content read, for the prepared data's name (paths, sizes and times of files)."""
        return {"files": [file_stats(Path(self.cfg.path), self.key)]}

    def describe(self) -> str:
        """A short description for logs and messages."""
        return str(self.cfg.path)

    def error(self, problem: str) -> UserError:
        """A UserError about this source: `KEY (DESCRIPTION): PROBLEM`."""
        return UserError(f"{self.key} ({self.describe()}): {problem}")

    def reversed(self) -> "Source":
        """The same corpus the other way round: (target, source) pairs."""
        other = copy.copy(self)
        other.swapped = not self.swapped
        return other


class PairReader:
    """Exact numbers of pairs from a source's `chunks`, however they come."""

    def __init__(self, chunks: Iterator[tuple[list[str], list[str]]]):
        self.chunks, self.srcs, self.tgts = chunks, [], []

    def take(self, n: int) -> tuple[list[str], list[str]]:
        """The next `n` pairs as (sources, targets); fewer only at the end of the corpus."""
        while len(self.srcs) < n:
            more = next(self.chunks, None)
            if more is None:
                break
            self.srcs += more[0]
            self.tgts += more[1]
        taken = self.srcs[:n], self.tgts[:n]
        self.srcs, self.tgts = self.srcs[n:], self.tgts[n:]
        return taken

    def skip(self, n: int) -> int:
        """Read past `n` pairs; returns how many there were."""
        read = 0
        while read < n and (got := len(self.take(min(n - read, 100_000))[0])):
            read += got
        return read
