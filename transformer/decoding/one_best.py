"""Greedy search and sampling: one hypothesis per sentence, each token chosen from the step's log-probabilities.

Both share `_one_best` (finished rows leave the batch); on a GPU greedy replays each step as one CUDA graph over
static shapes (`cuda_graphs.StaticGreedy`), with the same ids as the eager search.
"""

import torch
from torch import Tensor

from transformer.decoding.cuda_graphs import StaticGreedy, applies
from transformer.decoding.search_state import NEG_INF, Hypothesis, SearchOptions, SearchState, strip_eos
from transformer.decoding.steering import Controls, forced_lengths
from transformer.models.interface import Seq2SeqModel


def _pick_greedy(logp: Tensor) -> Tensor:
    return logp.argmax(dim=-1)


def _sampler(options: SearchOptions, generator: torch.Generator | None):
    """A token picker drawing from the (temperature-scaled, top-k / nucleus filtered) distribution."""
    top_k, top_p, temperature = options.top_k, options.top_p, options.temperature

    def pick(logp: Tensor) -> Tensor:
        # From the best token's 0 down, over a temperature no smaller than the dtype's smallest normal: a tiny one
        # sends the others to -inf, never the best one (no NaN).
        scale = max(temperature, torch.finfo(logp.dtype).tiny)
        scores = (logp - logp.max(dim=-1, keepdim=True).values) / scale
        if top_k > 0:
            kth = scores.topk(min(top_k, scores.size(-1)), dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < kth, NEG_INF)
        if top_p < 1.0:
            sorted_scores, order = scores.sort(dim=-1, descending=True)
            cumulative = sorted_scores.softmax(-1).cumsum(-1)
            drop = cumulative - sorted_scores.softmax(-1) >= top_p  # keep the smallest set reaching top_p
            drop[:, 0] = False  # the best token stays, however small top_p (found by schemathesis: top_p=5e-324)
            scores = scores.scatter(1, order, sorted_scores.masked_fill(drop, NEG_INF))
        return torch.multinomial(scores.softmax(-1), 1, generator=generator).squeeze(1)

    return pick


def _one_best(
    model: Seq2SeqModel, src: Tensor, options: SearchOptions, limit: Tensor, pick, controls: Controls | None = None
) -> tuple[Tensor, Tensor]:
    """One hypothesis per sentence, choosing each token with `pick` (steered by `controls`); finished rows leave
    the batch.

    Returns ids (B, steps) without BOS, EOS included, pad_id after EOS, and their log-probabilities.
    """
    batch, eos_id = src.size(0), options.eos_id
    longest = int(limit.max()) if batch else 0
    out = torch.full((batch, longest), model.pad_id, dtype=torch.long, device=src.device)
    scores = torch.zeros(batch, longest, device=src.device)
    search = SearchState(model, src, options, longest, controls)
    active = torch.arange(batch, device=src.device)  # original index of each row; `limit` is per row too
    steps = 0
    for t in range(longest):
        logp = search.step()
        tokens = pick(logp)
        chosen = logp.gather(1, tokens[:, None]).squeeze(1)
        out[active, t], scores[active, t] = tokens, chosen
        steps = t + 1
        search.append(tokens, chosen)
        running = ((tokens != eos_id) & (limit > t + 1)).nonzero().squeeze(1)
        if running.numel() == 0:
            break
        if running.numel() < active.numel():
            search.select(running, running)
            active, limit = active[running], limit[running]
    return out[:, :steps], scores[:, :steps]


def greedy_ids(
    model: Seq2SeqModel, src: Tensor, options: SearchOptions, limit: Tensor, controls: Controls | None = None
) -> tuple[Tensor, Tensor]:
    """`_one_best` with greedy choices: replayed as a CUDA graph per step where that applies (no controls), else
    eagerly."""
    if controls is None and applies(model, src, options):
        return StaticGreedy(model, src, options, limit).run()
    return _one_best(model, src, options, limit, _pick_greedy, controls)


def _as_hypotheses(ids: Tensor, scores: Tensor, eos_id: int, pad_id: int, forced: list[int]) -> list[list[Hypothesis]]:
    """`_one_best`'s rows as one `Hypothesis` per sentence, scored by the log-probability of its tokens after the
    `forced` first ones of each row."""
    hyps = []
    for row, row_scores, skip in zip(ids.tolist(), scores.tolist(), forced):
        n = row.index(eos_id) + 1 if eos_id in row else len([t for t in row if t != pad_id])
        total = sum(row_scores[skip:n])
        hyps.append([Hypothesis(strip_eos(row[:n], eos_id), total, total, row_scores[:n], skip)])
    return hyps


def greedy(
    model: Seq2SeqModel, src: Tensor, options: SearchOptions, limit: Tensor, controls: Controls | None = None
) -> list[list[Hypothesis]]:
    """The greedy hypothesis of each row of `src` (B, S), steered by `controls`."""
    ids, scores = greedy_ids(model, src, options, limit, controls)
    return _as_hypotheses(ids, scores, options.eos_id, model.pad_id, forced_lengths(controls, src.size(0)))


def sample(
    model: Seq2SeqModel,
    src: Tensor,
    options: SearchOptions,
    limit: Tensor,
    generator: torch.Generator | None,
    controls: Controls | None = None,
) -> list[list[Hypothesis]]:
    """One sampled hypothesis of each row of `src` (B, S), drawn with `generator` (on `src`'s device), steered by
    `controls`."""
    if generator is not None and generator.device.type != src.device.type:
        raise ValueError(f"sampling on {src.device} needs a generator there, not on {generator.device}")
    ids, scores = _one_best(model, src, options, limit, _sampler(options, generator), controls)
    return _as_hypotheses(ids, scores, options.eos_id, model.pad_id, forced_lengths(controls, src.size(0)))
