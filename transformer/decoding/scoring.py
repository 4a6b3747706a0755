"""Scores of given translations (forced decoding): each target token's log-probability under the model, from one
teacher-forced pass per batch, scored as beam search scores its own hypotheses.

A target is scored with its EOS (as a finished hypothesis is): `logprob` is the sum of its tokens' log-probabilities,
`score` that over `beam.penalty_divisor(length with EOS, options.length_penalty, options.length_penalty_kind)`, so a
beam hypothesis that ended with EOS scores here what the beam reported for it. BOS and padding count as the search
counts them (never generated: their log-probabilities are -inf, the others' are not renormalised).
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from transformer.decoding.beam import penalty_divisor
from transformer.decoding.search_state import SearchOptions, never_generated, next_log_probs
from transformer.models.interface import Seq2SeqModel


@dataclass
class Scored:
    """A given target's score (its log-probability over the length penalty), log-probability, and the
    log-probability of each of its tokens, EOS last."""

    score: float
    logprob: float
    token_scores: list[float]


def scored(token_scores: list[float], options: SearchOptions) -> Scored:
    """A target's score from its tokens' log-probabilities (EOS last), over `options`' length penalty."""
    total = sum(token_scores)
    divisor = penalty_divisor(len(token_scores), options.length_penalty, options.length_penalty_kind)
    return Scored(total / divisor, total, token_scores)


def _padded(rows: list[list[int]], pad_id: int, device: torch.device) -> Tensor:
    out = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out.to(device)


def _logits(model: Seq2SeqModel, src: Tensor, tgt_in: Tensor) -> Tensor:
    """Next-token logits (B, T, V) after each prefix of `tgt_in` (B, T): one pass where `decode` gives every position,
    else (an ensemble gives the last) one cached call a token."""
    memory, mask = model.encode(src)
    logits = model.decode(tgt_in, memory, mask)
    if logits.size(1) == tgt_in.size(1):
        return logits
    cache = model.init_cache(memory, 1, tgt_in.size(1))
    return torch.cat([model.decode(tgt_in[:, t : t + 1], memory, mask, cache) for t in range(tgt_in.size(1))], dim=1)


@torch.inference_mode()
def score(model: Seq2SeqModel, src: Tensor, targets: list[list[int]], options: SearchOptions) -> list[Scored]:
    """The score of each target (ids without BOS and EOS) as the translation of its row of `src` (B, S)."""
    if not targets:
        return []
    model.eval()
    device = src.device
    tgt_in = _padded([[options.bos_id, *t] for t in targets], model.pad_id, device)  # (B, T)
    tgt_out = _padded([[*t, options.eos_id] for t in targets], model.pad_id, device)
    logits = _logits(model, src, tgt_in)
    banned = never_generated(options, model, device)
    logp = next_log_probs(logits.flatten(0, 1), banned).view(*logits.shape[:2], -1)  # (B, T, V)
    picked = logp.gather(2, tgt_out[:, :, None]).squeeze(2).tolist()  # (B, T)
    return [scored(row[: len(target) + 1], options) for target, row in zip(targets, picked)]
