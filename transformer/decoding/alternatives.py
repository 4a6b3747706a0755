"""Alternatives for interactive translation (CTranslate2's `return_alternatives`): the k likeliest pieces at each
sentence's first searched position (after its prefix), each then completed to a whole translation by the strategy.

An alternative's score is its completion's score (the strategy's, after the prefix and its first piece) plus that
first piece's log-probability; so is its log-probability. Alternatives come in the order of their first piece.
"""

from dataclasses import replace

import torch
from torch import Tensor

from transformer.decoding.search_state import NEG_INF, Hypothesis, SearchOptions, SearchState
from transformer.decoding.steering import Controls, forced_lengths
from transformer.models.interface import Seq2SeqModel


def first_pieces(
    model: Seq2SeqModel, src: Tensor, options: SearchOptions, controls: Controls, k: int
) -> list[list[tuple[int, float]]]:
    """Per sentence, the `k` likeliest (piece, log-probability) at its first searched position, best first: the
    controls' masks apply, EOS is none of them, and a sentence gets fewer where fewer pieces are possible."""
    forced = forced_lengths(controls, src.size(0))
    state = SearchState(model, src, options, max(forced) + 1, controls)
    found: list[list[tuple[int, float]]] = [[] for _ in forced]
    for t in range(max(forced) + 1):
        logp = state.step()
        for row in (i for i, n in enumerate(forced) if n == t):
            scores = logp[row].clone()
            scores[options.eos_id] = NEG_INF
            values, ids = scores.topk(min(k, scores.numel()))
            found[row] = [(i, v) for i, v in zip(ids.tolist(), values.tolist()) if v > NEG_INF]
        tokens = logp.argmax(dim=-1)  # the forced token where there is one; the others are done
        state.append(tokens, logp.gather(1, tokens[:, None]).squeeze(1))
    return found


def alternatives(search, model, src, options, limit, generator, text, controls: Controls) -> list[list[Hypothesis]]:
    """Per sentence of `src` (B, S), up to `controls.alternatives` hypotheses: one per first piece, each completed
    by `search` (a `searching.SEARCHES` entry) with one hypothesis."""
    firsts = first_pieces(model, src, options, controls, controls.alternatives)
    index = torch.tensor([i for i, pieces in enumerate(firsts) for _ in pieces], dtype=torch.long)
    if index.numel() == 0:
        return [[] for _ in firsts]
    prefixes, steered = forced_lengths(controls, src.size(0)), controls.rows(index)
    chosen = [piece for found in firsts for piece, _ in found]
    extended = [p + [c] for p, c in zip(steered.prefixes or [[]] * len(chosen), chosen)]
    rests = None if steered.partial is None else [steered.rest_after(r, c) for r, c in zip(steered.partial, chosen)]
    steered = replace(steered, prefixes=extended, partial=rests, alternatives=0, lone_end=False)
    one = replace(options, n_best=1) if options.strategy == "beam" else options
    rows = index.to(src.device)
    completed = search(model, src[rows], one, limit[rows], generator, text, steered)
    out: list[list[Hypothesis]] = [[] for _ in firsts]
    for i, (_, logprob), (hyp,) in zip(index.tolist(), (p for found in firsts for p in found), completed):
        out[i].append(replace(hyp, score=hyp.score + logprob, logprob=hyp.logprob + logprob, forced=prefixes[i]))
    return out
