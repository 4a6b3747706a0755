"""Two aligned text files, one sentence per line."""

from collections import Counter
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path

from transformer.config import SourceConfig
from transformer.errors import UserError
from transformer.sources.base import Source, file_stats
from transformer.sources.streams import read_lines


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

    def side(self, lang: str) -> Iterator[str]:
        return read_lines(self.files[self.side_index(lang)])

    def fingerprint(self) -> dict:
        return {"files": [file_stats(path, self.key) for path in self.files]}

    def describe(self) -> str:
        return " + ".join(map(str, self.files))
