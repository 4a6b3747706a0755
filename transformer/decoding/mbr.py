"""Minimum Bayes risk decoding (Eikema & Aziz 2020; Freitag et al. 2022): of each sentence's candidates, the one
with the highest expected utility, each other candidate standing in for a reference drawn from the model.

Candidates come from the batched, cached searches of the other strategies: `candidates` samples per sentence (one
batch of B·candidates rows) or the `candidates` best of a beam that wide. The utility is sacreBLEU's
sentence-level chrF or BLEU of a candidate's text against another's; each distinct pair is scored once.
"""

from collections.abc import Callable
from dataclasses import replace

import torch
from sacrebleu.metrics import BLEU, CHRF
from torch import Tensor

from transformer.decoding.beam import beam
from transformer.decoding.one_best import sample
from transformer.decoding.search_state import Hypothesis, SearchOptions, Text
from transformer.decoding.steering import Controls
from transformer.models.interface import Seq2SeqModel

Utility = Callable[[str, str], float]  # (hypothesis, reference) → score


def utility(name: str) -> Utility:
    """sacreBLEU's sentence-level `chrf` or `bleu` (with effective order, as sentence BLEU needs) as a function."""
    metric = CHRF() if name == "chrf" else BLEU(effective_order=True)
    return lambda hypothesis, reference: metric.sentence_score(hypothesis, [reference]).score


def expected_utilities(texts: list[str], score: Utility) -> list[float]:
    """Each candidate's mean utility against the others as pseudo-references (against itself when alone);
    a text drawn twice counts twice, and each distinct (hypothesis, reference) pair is scored once."""
    position = {t: i for i, t in enumerate(dict.fromkeys(texts))}
    distinct, index = list(position), [position[t] for t in texts]
    table = [[score(h, r) for r in distinct] for h in distinct]  # (U, U)
    if len(texts) == 1:
        return [table[0][0]]
    totals = [sum(table[index[i]][index[j]] for j in range(len(texts)) if j != i) for i in range(len(texts))]
    return [total / (len(texts) - 1) for total in totals]


def _candidates(
    model: Seq2SeqModel,
    src: Tensor,
    options: SearchOptions,
    limit: Tensor,
    generator: torch.Generator | None,
    controls: Controls | None,
) -> list[list[Hypothesis]]:
    """`options.candidates` hypotheses per row of `src` (B, S), steered by `controls`: samples of one batch of B·k
    rows, or a beam's k best."""
    k = options.candidates
    if options.candidates_from == "beam":
        return beam(model, src, replace(options, strategy="beam", beam_size=k, n_best=k), limit, controls)
    index = torch.arange(src.size(0)).repeat_interleave(k)  # (B·k,): sentence-major
    rows, limits = src[index.to(src.device)], limit[index.to(limit.device)]  # (B·k, S), (B·k,)
    steered = controls.rows(index) if controls is not None else None
    drawn = sample(model, rows, replace(options, strategy="sample"), limits, generator, steered)
    return [[hyps[0] for hyps in drawn[i * k : (i + 1) * k]] for i in range(src.size(0))]


def _ranked(hyps: list[Hypothesis], expected: list[float], n: int) -> list[Hypothesis]:
    """The `n` best distinct hypotheses by expected utility, each scored by it; ties keep the search's order."""
    kept: dict[tuple[int, ...], Hypothesis] = {}
    for i in sorted(range(len(hyps)), key=lambda i: -expected[i]):
        kept.setdefault(tuple(hyps[i].tokens), replace(hyps[i], score=expected[i]))
    return list(kept.values())[:n]


def mbr(
    model: Seq2SeqModel,
    src: Tensor,
    options: SearchOptions,
    limit: Tensor,
    generator: torch.Generator | None,
    text: Text | None,
    controls: Controls | None = None,
) -> list[list[Hypothesis]]:
    """For each row of `src` (B, S), its `n_best` distinct candidates by expected utility, best first, each scored
    by it; `text` turns ids into the text compared (without it, ids compare as space-separated words); `controls`
    steer the candidates' search."""
    score, candidates = utility(options.utility), _candidates(model, src, options, limit, generator, controls)
    ids = [h.tokens for hyps in candidates for h in hyps]
    texts = iter(text(ids) if text is not None else [" ".join(map(str, t)) for t in ids])
    results = []
    for hyps in candidates:
        expected = expected_utilities([next(texts) for _ in hyps], score)
        results.append(_ranked(hyps, expected, options.n_best))
    return results
