"""One file of tab-separated columns."""

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from transformer.core.config import SourceConfig
from transformer.core.errors import UserError
from transformer.data.sources.base import Source
from transformer.data.sources.streams import decode_line, plain_suffix, raw_lines


class TsvFile(Source):
    """One file of tab-separated columns, two of them the source and the target (`columns`, 0-based); a line
    with too few columns is counted as skipped["columns"] and skipped."""

    given_as = "{key}.path=FILE.tsv"

    @classmethod
    def claims(cls, cfg: SourceConfig) -> bool:
        return bool(cfg.path) and plain_suffix(cfg.path) == ".tsv"

    def check(self) -> None:
        super().check()
        columns = self.columns
        if len(columns) != 2 or not all(isinstance(c, int) and c >= 0 for c in columns) or columns[0] == columns[1]:
            raise UserError(f"{self.key}.columns={columns} must be two different column numbers from 0")

    @property
    def columns(self) -> list:
        return [0, 1] if self.cfg.columns is None else list(self.cfg.columns)

    def _fields(self, skipped: Counter, needed: list[int]) -> Iterator[tuple[str, ...]]:
        path = Path(self.cfg.path)
        for number, raw in enumerate(raw_lines(path), start=1):
            cells = decode_line(raw, f"{path}:{number}").split("\t")
            if len(cells) <= max(needed):
                skipped["columns"] += 1
                continue
            yield tuple(cells[i] for i in needed)

    def rows(self, skipped: Counter) -> Iterator[tuple[str, str]]:
        return self._fields(skipped, self.columns)

    def side(self, lang: str) -> Iterator[str]:
        for (text,) in self._fields(Counter(), [self.columns[self.side_index(lang)]]):
            yield text

    def describe(self) -> str:
        return f"{self.cfg.path}, columns {self.columns[0]} and {self.columns[1]}"
