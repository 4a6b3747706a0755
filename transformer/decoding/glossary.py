"""A glossary: source terms and the target terms a translation must use for them (`decoding.glossary=FILE`).

The file is TSV, one "SOURCE TERM<TAB>TARGET TERM" per line (blank lines and lines starting with # skipped). A
source term applies to a sentence where it occurs as whole words, with the case given; its target term then joins
the sentence's constraints.
"""

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from transformer.core.errors import UserError
from transformer.data.sources import decode_line, raw_lines


@dataclass(frozen=True)
class Glossary:
    """(source pattern, target term) pairs, in file order."""

    entries: tuple[tuple[re.Pattern, str], ...]

    def terms(self, sentence: str) -> list[str]:
        """The target terms of the source terms that occur in `sentence` as whole words, each once, in file order."""
        return list(dict.fromkeys(target for pattern, target in self.entries if pattern.search(sentence)))


def whole_words(term: str) -> re.Pattern:
    """A pattern matching `term` where no word character touches it on either side (spaces as any whitespace)."""
    body = r"\s+".join(re.escape(word) for word in term.split())
    return re.compile(rf"(?<!\w){body}(?!\w)")


@functools.lru_cache(maxsize=4)
def load_glossary(path: str) -> Glossary:
    """The glossary in `path`; refuses a missing file, and a line without exactly two non-empty columns, naming it."""
    if not Path(path).is_file():
        raise UserError(f"decoding.glossary={path} is not a file; give a TSV of SOURCE TERM<TAB>TARGET TERM")
    entries = []
    for number, raw in enumerate(raw_lines(Path(path)), start=1):
        line = decode_line(raw, f"{path}:{number}")
        if not line.strip() or line.startswith("#"):
            continue
        columns = line.split("\t")
        if len(columns) != 2 or not all(column.strip() for column in columns):
            raise UserError(
                f"{path}:{number}: a glossary line is SOURCE TERM<TAB>TARGET TERM, two non-empty columns; "
                f"this one has {len(columns)} column(s){'' if len(columns) != 2 else ', one of them empty'}"
            )
        entries.append((whole_words(columns[0].strip()), columns[1].strip()))
    return Glossary(tuple(entries))
