"""Beam search under hard lexical constraints: target phrases that must each appear in every hypothesis, in any
order, found by dynamic beam allocation (Post & Vilar 2018) vectorized over the batch (Hu et al. 2019).

Each hypothesis carries how far it is through its sentence's phrases: the phrases met, the one in progress and the
tokens of it matched. At each step a sentence's candidates are its best extensions (as in `beam`), each
hypothesis' best token, and each hypothesis' tokens that advance a phrase (the next token of the one in progress,
the first of each one unmet). A candidate's bank is the number of phrase tokens it has matched; the beam's K slots
go round the banks, the best candidate of each bank first (the fullest bank first on a tie), then the second best
of each, and so on: hypotheses that have placed more phrases keep places beside those that score better. Only a
hypothesis that has met every phrase may end (EOS); a sentence none of whose hypotheses has by its output limit
gets no hypothesis. A phrase matched inside a longer match of another is not looked for (no trie, as Hu et al.).
Given the target pieces (`Controls.pieces`), a phrase ends on a word's end: the piece after it may not go on its
last word.
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from transformer.decoding.beam import Pool, divisors, in_place
from transformer.decoding.search_state import NEG_INF, Hypothesis, SearchOptions, SearchState
from transformer.decoding.steering import Controls, forced_lengths
from transformer.models.interface import Seq2SeqModel


@dataclass
class Phrases:
    """A batch's constraints: `ids` (B, C, L) padded with -1, `lengths` (B, C) (0: no phrase), `total` (B,)."""

    ids: Tensor
    lengths: Tensor
    total: Tensor

    @classmethod
    def pack(cls, constraints: list[list[list[int]]], device: torch.device) -> "Phrases":
        """Each sentence's phrases (lists of ids) as padded tensors."""
        count = max((len(c) for c in constraints), default=0) or 1
        longest = max((len(p) for c in constraints for p in c), default=0) or 1
        ids = torch.full((len(constraints), count, longest), -1, dtype=torch.long)
        for b, phrases in enumerate(constraints):
            for c, phrase in enumerate(phrases):
                ids[b, c, : len(phrase)] = torch.tensor(phrase, dtype=torch.long)
        lengths = (ids >= 0).sum(-1)
        return cls(ids.to(device), lengths.to(device), lengths.sum(-1).to(device))


@dataclass
class Progress:
    """Where each row stands: `met` (N, C) phrases met (padding counts as met), `current` (N,) the phrase in
    progress (-1: none), `matched` (N,) its tokens matched so far, `ended` (N,) whether its last token ended one."""

    met: Tensor
    current: Tensor
    matched: Tensor
    ended: Tensor

    def rows(self, index: Tensor) -> "Progress":
        return Progress(self.met[index], self.current[index], self.matched[index], self.ended[index])

    def bank(self, lengths: Tensor) -> Tensor:
        """(N,): the phrase tokens each row has matched; `lengths` (N, C) its sentence's phrase lengths."""
        return (self.met * lengths).sum(-1) + self.matched

    def complete(self) -> Tensor:
        return self.met.all(-1)


def start(phrases: Phrases) -> Progress:
    """One row per sentence, nothing matched."""
    batch = phrases.ids.size(0)
    none = torch.full((batch,), -1, dtype=torch.long, device=phrases.ids.device)
    return Progress(phrases.lengths == 0, none, torch.zeros_like(none), torch.zeros_like(none, dtype=torch.bool))


def advance(progress: Progress, ids: Tensor, lengths: Tensor, tokens: Tensor) -> Progress:
    """Each row's progress after it takes `tokens` (N,); `ids` (N, C, L) and `lengths` (N, C) its sentence's
    phrases. A token that continues the phrase in progress continues it; else one that starts an unmet phrase
    starts it (the first such); else the row is in none."""
    rows = torch.arange(tokens.numel(), device=tokens.device)
    current = progress.current.clamp(min=0)
    expected = ids[rows, current, progress.matched.clamp(max=ids.size(2) - 1)]  # (N,)
    goes_on = (progress.current >= 0) & (tokens == expected)
    starts = (ids[:, :, 0] == tokens[:, None]) & ~progress.met  # (N, C)
    begun = starts.any(-1) & ~goes_on
    phrase = torch.where(goes_on, progress.current, torch.where(begun, starts.int().argmax(-1), -1))
    matched = torch.where(goes_on, progress.matched + 1, begun.long())
    done = (phrase >= 0) & (matched == lengths[rows, phrase.clamp(min=0)])
    met = progress.met.clone()
    met[rows[done], phrase[done]] = True
    return Progress(met, torch.where(done, -1, phrase), torch.where(done, 0, matched), done)


def wanted(progress: Progress, ids: Tensor) -> Tensor:
    """(N, 1 + C): the tokens that advance each row's phrases: the next of the one in progress, then the first of
    each unmet one other than it (-1 where none)."""
    rows = torch.arange(ids.size(0), device=ids.device)
    nxt = ids[rows, progress.current.clamp(min=0), progress.matched.clamp(max=ids.size(2) - 1)]
    nxt = torch.where(progress.current >= 0, nxt, -1)
    others = torch.arange(ids.size(1), device=ids.device) != progress.current[:, None]
    firsts = torch.where(~progress.met & others, ids[:, :, 0], -1)  # (N, C)
    return torch.cat([nxt[:, None], firsts], dim=1)


def word_pieces(pieces: list[str] | None, size: int, device: torch.device) -> Tensor:
    """(V,): the pieces that go on a word (a letter or digit first, no "▁"): none may follow a phrase, whose last
    word would grow ("cat" + "s"); none known without `pieces`."""
    glues = [bool(piece) and piece[0].isalnum() for piece in (pieces or [])[:size]]
    return torch.tensor(glues + [False] * (size - len(glues)), dtype=torch.bool, device=device)


def allocate(bank: Tensor, scores: Tensor, k: int, banks: int) -> Tensor:
    """The `k` candidates (B, k) of each sentence's (B, M) that the beam keeps: round the banks, best first
    (positions into M; -inf scores last)."""
    order = scores.argsort(dim=1, descending=True, stable=True)
    sorted_bank = bank.gather(1, order)
    same = sorted_bank[:, :, None] == sorted_bank[:, None, :]  # (B, M, M)
    earlier = torch.ones_like(same[0]).tril(-1)  # [i, j]: j before i
    rank = (same & earlier).sum(-1)  # (B, M): place within its bank
    key = rank * (banks + 1) + (banks - sorted_bank)
    key = key.masked_fill(scores.gather(1, order) == NEG_INF, torch.iinfo(key.dtype).max)
    chosen = key.topk(min(k, key.size(1)), dim=1, largest=False).indices
    return order.gather(1, chosen)


def _candidates(scores: Tensor, logp: Tensor, want: Tensor, k: int) -> tuple[Tensor, Tensor, Tensor]:
    """Each sentence's candidates (B, M): their scores, tokens and rows extended (global row numbers), duplicates
    and impossible ones at -inf. `scores` (B, W), `logp` (B·W, V), `want` (B·W, 1 + C)."""
    batch, width = scores.shape
    row_logp, row_tok = logp.topk(min(2 * k, logp.size(1)), dim=1)  # (B·W, n)
    n = row_tok.size(1)
    row_ids = torch.arange(batch * width, device=logp.device)
    best = (scores.view(-1, 1) + row_logp).view(batch, -1).topk(min(2 * k, width * n), dim=1)  # (B, 2K)
    best_rows = row_ids.view(batch, width).repeat_interleave(n, 1).gather(1, best.indices)
    best_tok = row_tok.view(batch, -1).gather(1, best.indices)
    want_logp = logp.gather(1, want.clamp(min=0)).masked_fill(want < 0, NEG_INF)  # (B·W, 1 + C)
    extra_tok = torch.cat([row_tok[:, :1], want.clamp(min=0)], dim=1)  # (B·W, 2 + C)
    extra_scores = scores.view(-1, 1) + torch.cat([row_logp[:, :1], want_logp], dim=1)
    extra_rows = row_ids[:, None].expand_as(extra_tok)
    tokens = torch.cat([best_tok, extra_tok.reshape(batch, -1)], dim=1)  # (B, M)
    rows = torch.cat([best_rows, extra_rows.reshape(batch, -1)], dim=1)
    total = torch.cat([best.values, extra_scores.reshape(batch, -1)], dim=1)
    key = rows * logp.size(1) + tokens
    sorted_key, order = key.sort(dim=1, stable=True)
    repeat = torch.zeros_like(sorted_key, dtype=torch.bool)
    repeat[:, 1:] = sorted_key[:, 1:] == sorted_key[:, :-1]
    duplicate = torch.empty_like(repeat).scatter_(1, order, repeat)
    return total.masked_fill(duplicate, NEG_INF), tokens, rows


def constrained_beam(
    model: Seq2SeqModel, src: Tensor, options: SearchOptions, limit: Tensor, controls: Controls
) -> list[list[Hypothesis]]:
    """Beam search in which every hypothesis holds each of its sentence's `controls.constraints` (see the module
    docstring); scores as `beam`'s."""
    k, batch, device, eos_id = options.beam_size, src.size(0), src.device, options.eos_id
    phrases = Phrases.pack(controls.constraints or [[] for _ in range(batch)], device)
    banks = int(phrases.total.max())
    longest = int(limit.max())
    divisor, best_divisor = divisors(options, limit, longest, device)
    forced = forced_lengths(controls, batch)
    search = SearchState(model, src, options, longest, controls)
    progress = start(phrases)
    pool = Pool(batch, options.n_best, longest, model.pad_id, device)
    scores = torch.zeros(batch, 1, device=device)  # (B, W)
    active = torch.arange(batch, device=device)
    results: list[list[Hypothesis]] = [[] for _ in range(batch)]
    for t in range(longest):
        width = scores.size(1)
        sentence = active.repeat_interleave(width)  # (B·W,): the original sentence of each row
        ids, lengths = phrases.ids[sentence], phrases.lengths[sentence]
        logp = search.step()
        if t == 0:
            glues = word_pieces(controls.pieces, logp.size(1), device)
        logp[~progress.complete(), eos_id] = NEG_INF  # only a hypothesis holding every phrase may end
        logp[progress.ended[:, None] & glues] = NEG_INF  # a phrase ends on a word's end
        total, tokens, rows = _candidates(scores, logp, wanted(progress, ids), k)  # (B, M)
        token_logp = total - scores.view(-1)[rows]
        after = advance(progress.rows(rows.flatten()), ids[rows.flatten()], lengths[rows.flatten()], tokens.flatten())
        bank = after.bank(lengths[rows.flatten()]).view_as(tokens)
        last = limit == t + 1  # (B,)
        finishing = after.complete().view_as(tokens) & ((tokens == eos_id) | last[:, None]) & (total > NEG_INF)
        if finishing.any():
            history = torch.cat([search.prefix[rows, 1 : t + 1], tokens[:, :, None]], dim=2)  # (B, M, t+1)
            token_scores = torch.cat([search.logprobs[rows, :t], token_logp[:, :, None]], dim=2)
            own = total - search.offset[rows]
            pool.add(torch.where(finishing, own / divisor[t], NEG_INF), own, history, token_scores)
        chosen = allocate(bank, total.masked_fill(tokens == eos_id, NEG_INF), k, banks)  # (B, K)
        if width == k == chosen.size(1):  # rows stay in their slots where they can (`beam.in_place`)
            chosen = chosen.gather(1, in_place(rows.gather(1, chosen), k))
        scores = total.masked_fill(tokens == eos_id, NEG_INF).gather(1, chosen)
        rows, tokens, token_logp = (x.gather(1, chosen) for x in (rows, tokens, token_logp))
        flat = (chosen + torch.arange(chosen.size(0), device=device)[:, None] * total.size(1)).flatten()
        progress = after.rows(flat)
        best = (scores - search.offset[rows]).max(dim=1).values
        full = (pool.score[:, -1] > NEG_INF) & (pool.score[:, -1] >= best / best_divisor)
        done = last | full | (best == NEG_INF)
        keep = None
        if done.any():
            keep = pool.settle(done, active, results, forced, eos_id)
            if keep.numel() == 0:
                break
            per_sentence = (scores, rows, tokens, token_logp, active, limit, best_divisor)
            scores, rows, tokens, token_logp, active, limit, best_divisor = (x[keep] for x in per_sentence)
            kept = keep[:, None] * chosen.size(1) + torch.arange(chosen.size(1), device=device)  # (B', K)
            progress = progress.rows(kept.flatten())
            pool.keep(keep)
        search.select(rows.flatten(), keep)
        search.append(tokens.flatten(), token_logp.flatten())
    return results
