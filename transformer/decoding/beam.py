"""Beam search over a `SearchState`, with length penalties and an n-best pool."""

from dataclasses import replace
from typing import get_args

import torch
from torch import Tensor

from transformer.core.strategies import LengthPenalty
from transformer.decoding.cuda_graphs import StaticSearchState, applies
from transformer.decoding.search_state import NEG_INF, Hypothesis, SearchOptions, SearchState, strip_eos
from transformer.decoding.steering import Controls, forced_lengths
from transformer.models.interface import Seq2SeqModel


def penalty_divisor(length: int, alpha: float, kind: LengthPenalty = "power") -> float:
    """The divisor of a hypothesis' log-probability: `power` len^α, `gnmt` ((5+len)/6)^α, `none` 1.

    α = 0 is neutral (raw log-probability) for both kinds.
    """
    if kind == "power":
        return float(length) ** alpha
    if kind == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    if kind == "none":
        return 1.0
    raise ValueError(f"unknown length penalty {kind!r}; choose {', '.join(get_args(LengthPenalty))}")


def divisors(options: SearchOptions, limit: Tensor, longest: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """The penalty divisor of each length 1..`longest` (EOS included), and each sentence's largest one within its
    `limit` (B,): a live hypothesis' log-probability only falls, so its best possible score is its current one over
    that."""
    lengths = range(1, longest + 1)
    divisor = torch.tensor([penalty_divisor(n, options.length_penalty, options.length_penalty_kind) for n in lengths])
    divisor = divisor.to(device)
    return divisor, divisor.cummax(0).values[limit - 1]


class Pool:
    """The best `n` finished hypotheses of each sentence, kept sorted by normalised score."""

    def __init__(self, batch: int, n: int, width: int, pad_id: int, device: torch.device):
        self.score = torch.full((batch, n), NEG_INF, device=device)  # normalised
        self.raw = torch.zeros(batch, n, device=device)
        self.tokens = torch.full((batch, n, width), pad_id, dtype=torch.long, device=device)
        self.token_scores = torch.zeros(batch, n, width, device=device)
        self.length = torch.zeros(batch, n, dtype=torch.long, device=device)

    def add(self, score: Tensor, raw: Tensor, tokens: Tensor, token_scores: Tensor) -> None:
        """Merge candidates (B, C) with (B, C, t) tokens; -inf scores are not candidates."""
        n, t = self.score.size(1), tokens.size(2)
        merged = torch.cat([self.score, score], dim=1)
        top, idx = merged.topk(n, dim=1)  # (B, n)
        padded = self.tokens.new_zeros(score.size(0), score.size(1), self.tokens.size(2))  # (B, C, width)
        padded_scores = self.token_scores.new_zeros(padded.shape)
        padded[:, :, :t], padded_scores[:, :, :t] = tokens, token_scores
        all_tokens = torch.cat([self.tokens, padded], dim=1)
        all_token_scores = torch.cat([self.token_scores, padded_scores], dim=1)
        all_length = torch.cat([self.length, torch.full_like(score, t, dtype=torch.long)], dim=1)
        gather3 = idx[:, :, None].expand(-1, -1, self.tokens.size(2))
        self.score, self.raw = top, torch.cat([self.raw, raw], dim=1).gather(1, idx)
        self.tokens, self.token_scores = all_tokens.gather(1, gather3), all_token_scores.gather(1, gather3)
        self.length = all_length.gather(1, idx)

    def settle(self, done: Tensor, active: Tensor, results: list, forced: list[int], eos_id: int) -> Tensor:
        """Put the hypotheses of the sentences `done` (B,) in `results` (by original sentence, `active` (B,); the
        first `forced` of each a prefix's) and return the positions of the sentences that go on."""
        finished = done.nonzero().flatten().tolist()
        for b, hyps in zip(active[finished].tolist(), self.hypotheses(finished, eos_id)):
            results[b] = [replace(h, forced=forced[b]) for h in hyps]
        return (~done).nonzero().flatten()

    def keep(self, sentences: Tensor) -> None:
        for name in ("score", "raw", "tokens", "token_scores", "length"):
            setattr(self, name, getattr(self, name).index_select(0, sentences))

    def hypotheses(self, sentences: list[int], eos_id: int) -> list[list[Hypothesis]]:
        """The finished hypotheses of each of `sentences` (batch positions), best first; read from the device once."""
        rows = torch.tensor(sentences, device=self.score.device)

        def kept(scores: list[float]) -> list[int]:  # the slots holding a hypothesis (-inf: none)
            return [j for j, score in enumerate(scores) if score > NEG_INF]

        score, raw, length, tokens, token_scores = (
            getattr(self, name).index_select(0, rows).tolist()
            for name in ("score", "raw", "length", "tokens", "token_scores")
        )
        return [
            [Hypothesis(strip_eos(t[j][: n[j]], eos_id), s[j], r[j], ts[j][: n[j]]) for j in kept(s)]
            for s, r, n, t, ts in zip(score, raw, length, tokens, token_scores)
        ]


def _candidates(scores: Tensor, logp: Tensor, n: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The `n` best extensions of each sentence's W hypotheses, best first: their scores, the new token's
    log-probability, the token and the row extended, each (B, ≤n).

    Only a row's own `n` best tokens can be among its sentence's `n` best, so no top-k spans W × vocabulary.
    """
    batch, width = scores.shape  # (B, W); logp (B·W, V)
    row_logp, row_tok = logp.topk(min(n, logp.size(1)), dim=1)  # (B·W, n')
    cand = (scores.view(-1, 1) + row_logp).view(batch, -1)  # (B, W·n'), hypothesis-major
    top_scores, idx = cand.topk(min(n, cand.size(1)), dim=1)  # (B, ≤n)
    rows = torch.arange(batch, device=logp.device)[:, None] * width + idx // row_logp.size(1)
    return top_scores, row_logp.view(batch, -1).gather(1, idx), row_tok.view(batch, -1).gather(1, idx), rows


def in_place(rows: Tensor, width: int) -> Tensor:
    """An order (B, K) of each sentence's K continuing hypotheses that leaves the first extension of every row in
    that row's own slot, so that the cache moves only the rows of a second or later extension (width = K).

    `rows` (B, K) are the rows extended, numbered across the batch (sentence-major, `width` per sentence).
    """
    parents = rows % width  # (B, K): the row extended, within its sentence
    slots = torch.arange(width, device=rows.device)
    earlier = torch.ones(width, width, dtype=torch.bool, device=rows.device).tril(-1)  # [j, i]: i < j
    first = ~((parents[:, :, None] == parents[:, None, :]) & earlier).any(2)  # (B, K): parent not seen before
    claimed = (parents[:, :, None] == slots).any(1)  # (B, K): slot s is some hypothesis' parent
    free = (~claimed).to(torch.int8).argsort(dim=1, descending=True, stable=True)  # unclaimed slots first, in order
    later = (~first).long().cumsum(1) - 1  # (B, K): the how-manieth second-or-later extension
    slot = torch.where(first, parents, free.gather(1, later.clamp(min=0)))  # a permutation of 0..K-1 per sentence
    return torch.empty_like(slot).scatter_(1, slot, slots.expand_as(slot))


def _lone_end(scores: Tensor, tokens: Tensor, first_free: Tensor, eos_id: int, pad_id: int) -> tuple[Tensor, Tensor]:
    """Candidates (B, C), best first, where right after a non-empty prefix (`first_free` (B,), the sentences at
    their first searched step) only the best may end the sentence (CTranslate2's rule, its issue #277: the one live
    hypothesis' other candidates would fill the n-best with the prefix alone). Such an end becomes a dead
    hypothesis (a pad at -inf) that keeps its rank's place, as in CTranslate2."""
    late = (tokens == eos_id) & first_free[:, None]
    late[:, 0] = False
    return scores.masked_fill(late, NEG_INF), tokens.masked_fill(late, pad_id)


def beam(
    model: Seq2SeqModel, src: Tensor, options: SearchOptions, limit: Tensor, controls: Controls | None = None
) -> list[list[Hypothesis]]:
    """Beam search; for each sentence the `n_best` best finished hypotheses, best first.

    Each step ranks the extensions of a sentence's hypotheses (one, the empty one,
    at the first step). Extensions ending in EOS among the top `beam_size` are
    finished and set aside; the best `beam_size` others continue. A sentence stops
    once it has `n_best` finished hypotheses and no live one can still beat them;
    at its length limit every live hypothesis is finished as it stands. Scores are
    log-probabilities divided by `penalty_divisor(length incl. EOS, α=length_penalty, kind)`; with a prefix
    (`controls`), of the tokens after it, over the whole length (as CTranslate2).
    """
    k, batch, device, eos_id = options.beam_size, src.size(0), src.device, options.eos_id
    longest = int(limit.max())
    divisor, best_divisor = divisors(options, limit, longest, device)
    forced = forced_lengths(controls, batch)
    lone_end = controls is not None and controls.lone_end  # the step after each prefix (-1: none)
    first_free = torch.tensor([n or -1 for n in forced], device=device) if lone_end else None
    if controls is None and applies(model, src, options):  # on a GPU: a CUDA graph per step
        search = StaticSearchState(model, src, options, longest)
    else:
        search = SearchState(model, src, options, longest, controls)
    pool = Pool(batch, options.n_best, longest, model.pad_id, device)
    scores = torch.zeros(batch, 1, device=device)  # (B, W): the live hypotheses' log-probabilities, in slot order
    may_finish = torch.arange(2 * k, device=device) < k  # by rank: only the top K candidates finish
    active = torch.arange(batch, device=device)  # original sentence of each batch position
    results: list[list[Hypothesis]] = [[] for _ in range(batch)]
    for t in range(longest):
        width = scores.size(1)
        top_scores, top_logp, top_tok, rows = _candidates(scores, search.step(), 2 * k)  # (B, C), C ≤ 2K
        if first_free is not None:
            top_scores, top_tok = _lone_end(top_scores, top_tok, first_free[active] == t, eos_id, model.pad_id)
        is_eos = top_tok == eos_id
        last = limit == t + 1  # (B,)
        finishing = (is_eos | last[:, None]) & may_finish[: top_scores.size(1)] & (top_scores > NEG_INF)
        if finishing.any():
            tokens = torch.cat([search.prefix[rows, 1 : t + 1], top_tok[:, :, None]], dim=2)  # (B, C, t+1)
            token_scores = torch.cat([search.logprobs[rows, :t], top_logp[:, :, None]], dim=2)
            own = top_scores - search.offset[rows]  # what the hypotheses add to their prefixes
            pool.add(torch.where(finishing, own / divisor[t], NEG_INF), own, tokens, token_scores)
        order = is_eos.to(torch.int8).argsort(dim=1, stable=True)[:, :k]  # the K best non-EOS, by rank
        scores = top_scores.masked_fill(is_eos, NEG_INF).gather(1, order)  # (B, K); an EOS never continues
        rows, tokens, logprobs = rows.gather(1, order), top_tok.gather(1, order), top_logp.gather(1, order)
        if width == k == scores.size(1):  # rows stay where they are: in slot order, no longer best first
            stay = in_place(rows, k)
            scores, rows, tokens, logprobs = (x.gather(1, stay) for x in (scores, rows, tokens, logprobs))
        best = (scores - search.offset[rows]).max(dim=1).values
        done = last | ((pool.score[:, -1] > NEG_INF) & (pool.score[:, -1] >= best / best_divisor))
        keep = None  # every sentence goes on
        if done.any():
            keep = pool.settle(done, active, results, forced, eos_id)
            if keep.numel() == 0:
                break
            per_sentence = (scores, rows, tokens, logprobs, active, limit, best_divisor)
            scores, rows, tokens, logprobs, active, limit, best_divisor = (x[keep] for x in per_sentence)
            pool.keep(keep)
        search.select(rows.flatten(), keep)
        search.append(tokens.flatten(), logprobs.flatten())
    return results
