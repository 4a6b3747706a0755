"""Greedy, sampling and beam search over any model with `encode`, `init_cache` and `decode`.

`search(model, src, options)` is the one entry: the options of a search are one
`SearchOptions` (built from a `DecodingConfig`), and every strategy returns, per
sentence, a list of `Hypothesis` (best first). All strategies share one step
(`SearchState.step`); with `use_cache=True` a step feeds only the newest token and
reads the rest of the prefix from a `DecoderCache`, with `use_cache=False` it re-runs
the whole prefix. The two give the same ids. On a GPU, greedy and beam search replay each decoder
step as one CUDA graph over static shapes (`fast_inference.graphs`), with the same ids as the eager
search. Lengths count generated tokens including EOS; BOS and pad are never generated. The
search runs on the model it is given: whoever loads a model for inference passes its
`inference_copy` (`transformer.fast_inference`), made once. `greedy_decode` and `beam_search` are
keyword shorthands of `search` that return ids.
"""

import torch
from torch import Tensor

from transformer.beam import beam, penalty_divisor
from transformer.config import DecodingConfig
from transformer.fast_inference.graphs import StaticGreedy, applies
from transformer.interface import Seq2SeqModel
from transformer.search_state import NEG_INF, Hypothesis, SearchOptions, SearchState, limits, strip_eos

__all__ = ["Hypothesis", "SearchOptions", "beam_search", "greedy_decode", "penalty_divisor", "search"]


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


def _one_best(model: Seq2SeqModel, src: Tensor, options: SearchOptions, limit: Tensor, pick) -> tuple[Tensor, Tensor]:
    """One hypothesis per sentence, choosing each token with `pick`; finished rows leave the batch.

    Returns ids (B, steps) without BOS, EOS included, pad_id after EOS, and their log-probabilities.
    """
    batch, eos_id = src.size(0), options.eos_id
    longest = int(limit.max()) if batch else 0
    out = torch.full((batch, longest), model.pad_id, dtype=torch.long, device=src.device)
    scores = torch.zeros(batch, longest, device=src.device)
    search = SearchState(model, src, options, longest)
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


def _greedy(model: Seq2SeqModel, src: Tensor, options: SearchOptions, limit: Tensor) -> tuple[Tensor, Tensor]:
    """`_one_best` with greedy choices: replayed as a CUDA graph per step where that applies, else eagerly."""
    if applies(model, src, options):
        return StaticGreedy(model, src, options, limit).run()
    return _one_best(model, src, options, limit, _pick_greedy)


def _as_hypotheses(ids: Tensor, scores: Tensor, eos_id: int, pad_id: int) -> list[list[Hypothesis]]:
    """`_one_best`'s rows as one `Hypothesis` per sentence, scored by its log-probability."""
    hyps = []
    for row, row_scores in zip(ids.tolist(), scores.tolist()):
        n = row.index(eos_id) + 1 if eos_id in row else len([t for t in row if t != pad_id])
        total = sum(row_scores[:n])
        hyps.append([Hypothesis(strip_eos(row[:n], eos_id), total, total, row_scores[:n])])
    return hyps


def _prepared(model: Seq2SeqModel, src: Tensor, options: SearchOptions, max_len: int | Tensor | None) -> Tensor:
    """Put `model` in eval mode; the per-sentence output limits (B,): `max_len`, else `options.output_limits` of the
    source lengths."""
    model.eval()
    if max_len is None:
        return options.output_limits((src != model.pad_id).sum(1), model.max_positions)
    return limits(max_len, src.size(0), src.device)


def _checked_sampler(options: SearchOptions, generator: torch.Generator | None, device: torch.device):
    if generator is not None and generator.device.type != device.type:
        raise ValueError(f"sampling on {device} needs a generator there, not on {generator.device}")
    return _sampler(options, generator)


@torch.inference_mode()
def search(
    model: Seq2SeqModel,
    src: Tensor,
    options: SearchOptions,
    generator: torch.Generator | None = None,
    max_len: int | Tensor | None = None,
) -> list[list[Hypothesis]]:
    """Hypotheses (best first; greedy and sampling give one) for each source row of `src` (B, S).

    Output limits are `options.output_limits` of the source lengths unless `max_len` (an int or
    a (B,) tensor) is given; `generator` (on `src`'s device) drives sampling.
    """
    limit = _prepared(model, src, options, max_len)
    if options.strategy == "beam":
        return beam(model, src, options, limit)
    if options.strategy == "greedy":
        ids, scores = _greedy(model, src, options, limit)
    else:
        ids, scores = _one_best(model, src, options, limit, _checked_sampler(options, generator, src.device))
    return _as_hypotheses(ids, scores, options.eos_id, model.pad_id)


@torch.inference_mode()
def greedy_decode(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    max_len: int | Tensor,
    use_cache: bool = True,
    cuda_graphs: bool = True,
) -> Tensor:
    """`search`'s greedy ids as one tensor (B, ≤max_len): without BOS, EOS included where generated, pad_id after.

    `max_len` may be a (B,) tensor of per-sentence limits; `cuda_graphs=False` keeps a GPU search eager.
    """
    options = SearchOptions.from_config(
        strategy="greedy", bos_id=bos_id, eos_id=eos_id, use_cache=use_cache, cuda_graphs=cuda_graphs
    )
    return _greedy(model, src, options, _prepared(model, src, options, max_len))[0]


def beam_search(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    beam_size: int,
    bos_id: int,
    eos_id: int,
    max_len: int | Tensor,
    length_penalty: float = DecodingConfig.length_penalty,
    use_cache: bool = True,
    cuda_graphs: bool = True,
) -> list[list[int]]:
    """Beam search: the best hypothesis of each sentence as a list of ids without BOS and EOS; `cuda_graphs=False`
    keeps a GPU search eager."""
    options = SearchOptions.from_config(
        strategy="beam",
        beam_size=beam_size,
        bos_id=bos_id,
        eos_id=eos_id,
        length_penalty=length_penalty,
        use_cache=use_cache,
        cuda_graphs=cuda_graphs,
    )
    return [hyps[0].tokens for hyps in search(model, src, options, max_len=max_len)]
