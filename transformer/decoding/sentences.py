"""Paragraphs to sentences and back, for `transformer-serve` and `transformer-translate split_sentences=true`.

Each line of a text is one paragraph; pysbd (rule-based, with French abbreviations such as
"M.", "etc.", "p.") splits it into sentences, which are translated one by one and joined back
with spaces, one line per paragraph, so line and paragraph breaks stay where they were.
"""

from transformer.core.errors import UserError


def _segment(line: str) -> list[str]:
    try:
        import pysbd
    except ImportError as err:
        raise UserError("sentence splitting needs the serve extra: pip install -e '.[serve]'") from err
    # A fresh segmenter per call: pysbd's keeps the text it works on, so one shared by threads is unsafe.
    return pysbd.Segmenter(language="fr", clean=False).segment(line)


def split_line(line: str) -> list[str]:
    """The sentences of one paragraph (no newline inside), stripped; none for a blank line."""
    if not line.strip():
        return []
    return [s.strip() for s in _segment(line.strip()) if s.strip()]


def split_text(text: str) -> list[list[str]]:
    """Each line's sentences (an empty list for a blank line), lines in order."""
    return [split_line(line) for line in text.split("\n")]


def join_text(lines: list[list[str]]) -> str:
    """The inverse of `split_text` for translations: sentences joined by spaces, lines by newlines."""
    return "\n".join(" ".join(sentences) for sentences in lines)
