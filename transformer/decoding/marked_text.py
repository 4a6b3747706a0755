"""Marked-up sentences translated (`markup=xml`): the text without its markup is searched, aligned to its
translation, and the markup put back (`decoding.markup`)."""

import torch

from transformer.decoding.alignment import Aligner
from transformer.decoding.markup import Marked, MarkupError, parse, restore
from transformer.decoding.translator import TextTranslator


def translate_marked(
    translator: TextTranslator, aligner: Aligner, lines: list[str], generator: torch.Generator | None = None, bar=None
) -> list[str | MarkupError]:
    """Each line's translation with its markup carried across, in input order; a line whose markup is not
    well-formed gets its MarkupError (and no translation)."""
    parsed: list[Marked | MarkupError] = []
    for line in lines:
        try:
            parsed.append(parse(line))
        except MarkupError as err:
            parsed.append(err)
    texts = [m.text if isinstance(m, Marked) else "" for m in parsed]
    results = translator.search(texts, generator=generator, bar=bar)
    best = [(src, hyps[0].tokens) for src, hyps in results if hyps]
    found = iter(aligner.links([s for s, _ in best], [t for _, t in best], translator.cfg.batch_size))
    out: list[str | MarkupError] = []
    for marked, (_, hyps) in zip(parsed, results):
        if isinstance(marked, MarkupError):
            out.append(marked)
        else:
            text = translator.detokenize(hyps[:1])[0] if hyps else ""
            out.append(restore(marked, text, next(found) if hyps else []))
    return out
