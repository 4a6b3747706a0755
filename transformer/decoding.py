"""Greedy, sampling and beam search over any model with `encode`, `init_cache` and `decode`.

`search(model, src, options)` is the one entry: the options of a search are one
`SearchOptions` (built from a `DecodingConfig`), and every strategy returns, per
sentence, a list of `Hypothesis` (best first). All strategies share one step
function (`_Search`); with `use_cache=True` a step feeds only the newest token and
reads the rest of the prefix from a `DecoderCache`, with `use_cache=False` it re-runs
the whole prefix. The two give the same ids. Lengths count generated tokens
including EOS; BOS and pad are never generated. Each search runs on its own
`inference_copy` of the model (fast CPU products, `transformer.fast_inference`).
`greedy_decode`, `sample_decode`, `beam_search` and `beam_search_hypotheses` are
keyword-compatible shorthands.
"""

import torch
from torch import Tensor

from transformer.beam import beam, penalty_divisor
from transformer.fast_inference import inference_copy
from transformer.search_state import NEG_INF, Hypothesis, SearchOptions, SearchState, limits, strip_eos

__all__ = ["Hypothesis", "SearchOptions", "beam_search", "beam_search_hypotheses", "greedy_decode"]
__all__ += ["penalty_divisor", "sample_decode", "search"]


def _pick_greedy(logp: Tensor) -> Tensor:
    return logp.argmax(dim=-1)


def _sampler(options: SearchOptions, generator: torch.Generator | None):
    """A token picker drawing from the (temperature-scaled, top-k / nucleus filtered) distribution."""
    top_k, top_p, temperature = options.top_k, options.top_p, options.temperature

    def pick(logp: Tensor) -> Tensor:
        scores = logp / temperature
        if top_k > 0:
            kth = scores.topk(min(top_k, scores.size(-1)), dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < kth, NEG_INF)
        if top_p < 1.0:
            sorted_scores, order = scores.sort(dim=-1, descending=True)
            cumulative = sorted_scores.softmax(-1).cumsum(-1)
            drop = cumulative - sorted_scores.softmax(-1) >= top_p  # keep the smallest set reaching top_p
            scores = scores.scatter(1, order, sorted_scores.masked_fill(drop, NEG_INF))
        return torch.multinomial(scores.softmax(-1), 1, generator=generator).squeeze(1)

    return pick


def _one_best(model, src: Tensor, options: SearchOptions, limit: Tensor, pick) -> tuple[Tensor, Tensor]:
    """One hypothesis per sentence, choosing each token with `pick`; finished rows leave the batch.

    Returns ids (B, steps) without BOS, EOS included, pad_id after EOS, and their log-probabilities.
    """
    batch, eos_id = src.size(0), options.eos_id
    longest = int(limit.max()) if batch else 0
    out = torch.full((batch, longest), model.pad_id, dtype=torch.long, device=src.device)
    scores = torch.zeros(batch, longest, device=src.device)
    search = SearchState(model, src, options, 1, longest)
    active = torch.arange(batch, device=src.device)  # original index of each row
    steps = 0
    for t in range(longest):
        logp = search.step()
        tokens = pick(logp)
        chosen = logp.gather(1, tokens[:, None]).squeeze(1)
        out[active, t], scores[active, t] = tokens, chosen
        steps = t + 1
        search.append(tokens, chosen)
        running = ((tokens != eos_id) & (limit[active] > t + 1)).nonzero().squeeze(1)
        if running.numel() == 0:
            break
        if running.numel() < active.numel():
            search.select(running, running)
            active = active[running]
    return out[:, :steps], scores[:, :steps]


def _as_hypotheses(ids: Tensor, scores: Tensor, eos_id: int, pad_id: int) -> list[list[Hypothesis]]:
    """`_one_best`'s rows as one `Hypothesis` per sentence, scored by its log-probability."""
    hyps = []
    for row, row_scores in zip(ids.tolist(), scores.tolist()):
        n = row.index(eos_id) + 1 if eos_id in row else len([t for t in row if t != pad_id])
        total = sum(row_scores[:n])
        hyps.append([Hypothesis(strip_eos(row[:n], eos_id), total, total, row_scores[:n])])
    return hyps


def _prepared(model, src: Tensor, options: SearchOptions, max_len: int | Tensor | None):
    """The search's own inference copy of `model` (in eval mode) and the per-sentence output limits (B,)."""
    model.eval()
    if max_len is None:
        limit = options.output_limits((src != model.pad_id).sum(1), model.max_positions)
    else:
        limit = limits(max_len, src.size(0), src.device)
    return inference_copy(model), limit


def _picker(options: SearchOptions, generator: torch.Generator | None, device: torch.device):
    if options.strategy != "sample":
        return _pick_greedy
    if generator is not None and generator.device.type != device.type:
        raise ValueError(f"sampling on {device} needs a generator there, not on {generator.device}")
    return _sampler(options, generator)


@torch.inference_mode()
def search(
    model,
    src: Tensor,
    options: SearchOptions,
    generator: torch.Generator | None = None,
    max_len: int | Tensor | None = None,
) -> list[list[Hypothesis]]:
    """Hypotheses (best first; greedy and sampling give one) for each source row of `src` (B, S).

    Output limits are `options.output_limits` of the source lengths unless `max_len` (an int or
    a (B,) tensor) is given; `generator` (on `src`'s device) drives sampling.
    """
    fast, limit = _prepared(model, src, options, max_len)
    if options.strategy == "beam":
        return beam(fast, src, options, limit)
    ids, scores = _one_best(fast, src, options, limit, _picker(options, generator, src.device))
    return _as_hypotheses(ids, scores, options.eos_id, model.pad_id)


@torch.inference_mode()
def greedy_decode(
    model,
    src: Tensor,
    bos_id: int,
    eos_id: int,
    max_len: int | Tensor,
    use_cache: bool = True,
    return_scores: bool = False,
    min_len: int = 0,
    no_repeat_ngram_size: int = 0,
):
    """Pick the most likely token at each step.

    Returns ids (B, ≤max_len) without BOS, EOS included, pad_id after EOS; with
    `return_scores` also the chosen tokens' log-probabilities (B, ≤max_len).
    `max_len` may be a (B,) tensor of per-sentence limits. Finished rows leave
    the batch, so late steps run on fewer rows.
    """
    options = SearchOptions.from_config(
        strategy="greedy",
        bos_id=bos_id,
        eos_id=eos_id,
        use_cache=use_cache,
        min_len=min_len,
        no_repeat_ngram_size=no_repeat_ngram_size,
    )
    fast, limit = _prepared(model, src, options, max_len)
    out, scores = _one_best(fast, src, options, limit, _pick_greedy)
    return (out, scores) if return_scores else out


@torch.inference_mode()
def sample_decode(
    model,
    src: Tensor,
    bos_id: int,
    eos_id: int,
    max_len: int | Tensor,
    top_k: int = 0,
    top_p: float = 1.0,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    min_len: int = 0,
    no_repeat_ngram_size: int = 0,
) -> Tensor:
    """Draw each token at random (e.g. for back-translation); same output layout as `greedy_decode`."""
    options = SearchOptions.from_config(
        strategy="sample",
        bos_id=bos_id,
        eos_id=eos_id,
        use_cache=use_cache,
        min_len=min_len,
        no_repeat_ngram_size=no_repeat_ngram_size,
        top_k=top_k,
        top_p=top_p,
        temperature=temperature,
    )
    fast, limit = _prepared(model, src, options, max_len)
    return _one_best(fast, src, options, limit, _picker(options, generator, src.device))[0]


def beam_search_hypotheses(
    model,
    src: Tensor,
    beam_size: int,
    bos_id: int,
    eos_id: int,
    max_len: int | Tensor,
    length_penalty: float = 1.0,
    length_penalty_kind: str = "power",
    n_best: int = 1,
    use_cache: bool = True,
    min_len: int = 0,
    no_repeat_ngram_size: int = 0,
) -> list[list[Hypothesis]]:
    """Beam search (`transformer.beam.beam`): for each sentence the `n_best` best hypotheses, best first."""
    options = SearchOptions.from_config(
        strategy="beam",
        beam_size=beam_size,
        n_best=n_best,
        bos_id=bos_id,
        eos_id=eos_id,
        length_penalty=length_penalty,
        length_penalty_kind=length_penalty_kind,
        use_cache=use_cache,
        min_len=min_len,
        no_repeat_ngram_size=no_repeat_ngram_size,
    )
    return search(model, src, options, max_len=max_len)


def beam_search(
    model,
    src: Tensor,
    beam_size: int,
    bos_id: int,
    eos_id: int,
    max_len: int | Tensor,
    length_penalty: float = 1.0,
    use_cache: bool = True,
    length_penalty_kind: str = "power",
    min_len: int = 0,
    no_repeat_ngram_size: int = 0,
) -> list[list[int]]:
    """The best hypothesis of each sentence as a list of ids without BOS and EOS."""
    hyps = beam_search_hypotheses(
        model,
        src,
        beam_size,
        bos_id,
        eos_id,
        max_len,
        length_penalty,
        length_penalty_kind,
        use_cache=use_cache,
        min_len=min_len,
        no_repeat_ngram_size=no_repeat_ngram_size,
    )
    return [h[0].tokens for h in hyps]
