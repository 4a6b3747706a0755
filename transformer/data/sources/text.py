"""Two aligned text files, one sentence per line."""

from collections import Counter
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path

from transformer.core.config import SourceConfig
from transformer.core.errors import UserError
from transformer.data.sources.base import Source, file_stats
from transformer.data.sources.streams import line_blocks, read_lines


class TextFiles(Source):
    """Two aligned text files, one sentence per line: line n of `tgt` translates line n of `src`."""

    given_as = "{key}.src and {key}.tgt (two text files)"

    @classmethod
    def claims(cls, cfg: SourceConfig) -> bool:
        return cfg.src is not None or cfg.tgt is not None

    def check(self) -> None:
        if not (self.cfg.src and self.cfg.tgt):
            raise UserError(f"{self.key} needs both {self.key}.src and {self.key}.tgt")

    @property
    def files(self) -> tuple[Path, Path]:
        return Path(self.cfg.src), Path(self.cfg.tgt)

    def rows(self, skipped: Counter) -> Iterator[tuple[str, str]]:
        src_lines, tgt_lines = map(read_lines, self.files)
        for number, (src, tgt) in enumerate(zip_longest(src_lines, tgt_lines), start=1):
            if src is None or tgt is None:
                rest = 1 + sum(1 for _ in (src_lines if tgt is None else tgt_lines))  # the longer file's lines left
                counts = (number - 1 + rest, number - 1) if tgt is None else (number - 1, number - 1 + rest)
                raise self.error(
                    f"{self.files[0]} has {counts[0]} lines but {self.files[1]} has {counts[1]}; the two sides of "
                    "a parallel corpus must have one line per sentence pair"
                )
            yield src, tgt

    def row_chunks(self, size: int, skipped: Counter) -> Iterator[tuple[list[str], list[str]]]:
        blocks = [line_blocks(path) for path in self.files]
        buffers: list[list[str]] = [[], []]
        read = 0
        while True:
            for side in (0, 1):
                while len(buffers[side]) < size and (block := next(blocks[side], None)) is not None:
                    buffers[side] += block
            n = min(size, *map(len, buffers))
            if n == 0:
                break
            yield buffers[0][:n], buffers[1][:n]
            buffers = [buffers[0][n:], buffers[1][n:]]
            read += n
        if buffers[0] or buffers[1]:
            counts = [read + len(buffers[side]) + sum(map(len, blocks[side])) for side in (0, 1)]
            raise self.error(
                f"{self.files[0]} has {counts[0]} lines but {self.files[1]} has {counts[1]}; the two sides of "
                "a parallel corpus must have one line per sentence pair"
            )

    def side(self, lang: str) -> Iterator[str]:
        return read_lines(self.files[self.side_index(lang)])

    def fingerprint(self) -> dict:
        return {"files": [file_stats(path, self.key) for path in self.files]}

    def describe(self) -> str:
        return " + ".join(map(str, self.files))
