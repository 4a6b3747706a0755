"""Rerankers of a beam n-best that `scripts/rerank_nbest.py` scores: the noisy channel and minimum Bayes risk."""

import math
from dataclasses import dataclass

import torch
from torch import nn

from transformer.batching import collate
from transformer.decoding.mbr import utility
from transformer.tokenizer import PAD_ID


@dataclass
class Candidate:
    text: str
    score: float  # the forward search's: log-probability over length^α
    channel: float  # the reverse model's log-probability of the source, over the source's length


@torch.no_grad()
def channel_scores(model: nn.Module, src: list[list[int]], tgt: list[list[int]], batch: int = 128) -> list[float]:
    """log p(tgt | src) / (|tgt| + 1) under `model`, teacher-forced (EOS counted), for each pair of id lists;
    for the noisy channel `model` is the reverse one, `src` the hypotheses and `tgt` the sources."""
    out = [0.0] * len(src)
    order = sorted(range(len(src)), key=lambda i: len(src[i]))
    for start in range(0, len(order), batch):
        rows = order[start : start + batch]
        b = collate([src[i] for i in rows], [tgt[i] for i in rows])
        logp = model(b.src, b.tgt_in).float().log_softmax(-1)  # (B, T, V)
        real = b.tgt_out != PAD_ID
        token = logp.gather(2, b.tgt_out[:, :, None]).squeeze(2).masked_fill(~real, 0.0)  # (B, T)
        for i, total, n in zip(rows, token.sum(1).tolist(), real.sum(1).tolist()):
            out[i] = total / n
    return out


def noisy_channel(cands: list[Candidate], weight: float) -> str:
    """The candidate of the highest score + `weight` × channel score."""
    return max(cands, key=lambda c: c.score + weight * c.channel).text


def mbr(cands: list[Candidate], temperature: float) -> str:
    """The candidate of the highest expected sentence BLEU (`decoding.mbr.utility`) against the others, weighted by
    softmax(score / T)."""
    top = max(c.score for c in cands)
    weights = [math.exp((c.score - top) / temperature) for c in cands]
    total, bleu = sum(weights), utility("bleu")

    def risk(h: Candidate) -> float:
        return sum(w / total * bleu(h.text, c.text) for w, c in zip(weights, cands))

    return max(cands, key=risk).text
