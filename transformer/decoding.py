"""Greedy and beam search over any model with `encode`, `init_cache` and `decode`.

Both searches share one step function; with `use_cache=True` a step feeds only
the newest token and reads the rest of the prefix from a `DecoderCache`, with
`use_cache=False` it re-runs the whole prefix. The two give the same ids.
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from transformer.cache import DecoderCache


@dataclass
class Hypothesis:
    """A finished translation: ids without BOS/EOS, its length-normalised and raw scores."""

    tokens: list[int]
    score: float
    logprob: float


def penalty_divisor(length: int, alpha: float, kind: str = "power") -> float:
    """The divisor of a hypothesis' log-probability: `power` len^α, `gnmt` ((5+len)/6)^α, `none` 1.

    α = 0 is neutral (raw log-probability) for both kinds.
    """
    if kind == "power":
        return float(length) ** alpha
    if kind == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    if kind == "none":
        return 1.0
    raise ValueError(f"unknown length penalty {kind!r}; choose power, gnmt or none")


class _Search:
    """Encoder output, optional cache and prefix for a batch of rows (hypotheses)."""

    def __init__(self, model, src: Tensor, bos_id: int, group: int, max_len: int, use_cache: bool):
        self.model = model
        self.memory, self.src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S)
        self.cache: DecoderCache | None = model.init_cache(self.memory, group, max_len) if use_cache else None
        self.prefix = torch.full((src.size(0) * group, 1), bos_id, dtype=torch.long, device=src.device)
        self.banned = [bos_id, model.pad_id]  # never generated

    def step(self) -> Tensor:
        """Log-probabilities (N, V) of the next token for every row's prefix."""
        tgt_in = self.prefix[:, -1:] if self.cache is not None else self.prefix
        logits = self.model.decode(tgt_in, self.memory, self.src_mask, self.cache)
        logp = torch.log_softmax(logits[:, -1].float(), dim=-1)
        logp[:, self.banned] = float("-inf")
        return logp

    def append(self, tokens: Tensor) -> None:
        self.prefix = torch.cat([self.prefix, tokens[:, None]], dim=1)

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep `rows` (and, when the batch shrinks, their `sentences`) in that order."""
        self.prefix = self.prefix.index_select(0, rows)
        if sentences is not None:
            self.memory = self.memory.index_select(0, sentences)
            self.src_mask = self.src_mask.index_select(0, sentences)
        if self.cache is not None:
            self.cache.reorder(rows, sentences)


@torch.inference_mode()
def greedy_decode(
    model,
    src: Tensor,
    bos_id: int,
    eos_id: int,
    max_len: int,
    use_cache: bool = True,
    return_scores: bool = False,
):
    """Pick the most likely token at each step.

    Returns ids (B, ≤max_len) without BOS, EOS included, pad_id after EOS; with
    `return_scores` also the chosen tokens' log-probabilities (B, ≤max_len).
    Finished rows leave the batch, so late steps run on fewer rows.
    """
    model.eval()
    batch = src.size(0)
    out = torch.full((batch, max_len), model.pad_id, dtype=torch.long, device=src.device)
    scores = torch.zeros(batch, max_len, device=src.device)
    search = _Search(model, src, bos_id, 1, max_len, use_cache)
    active = torch.arange(batch, device=src.device)  # original index of each row
    steps = 0
    for t in range(max_len):
        logp = search.step()
        best, tokens = logp.max(dim=-1)
        out[active, t] = tokens
        scores[active, t] = best
        steps = t + 1
        search.append(tokens)
        running = (tokens != eos_id).nonzero().squeeze(1)
        if running.numel() == 0:
            break
        if running.numel() < active.numel():
            search.select(running, running)
            active = active[running]
    out, scores = out[:, :steps], scores[:, :steps]
    return (out, scores) if return_scores else out


@torch.inference_mode()
def beam_search_hypotheses(
    model,
    src: Tensor,
    beam_size: int,
    bos_id: int,
    eos_id: int,
    max_len: int,
    length_penalty: float = 1.0,
    penalty: str = "power",
    n_best: int = 1,
    use_cache: bool = True,
) -> list[list[Hypothesis]]:
    """Beam search; for each sentence the `n_best` best finished hypotheses, best first.

    Each step ranks all beam × vocabulary extensions of a sentence. Extensions
    ending in EOS among the top `beam_size` are finished and set aside; the best
    `beam_size` others continue. A sentence stops once it has `n_best` finished
    hypotheses and no live one can still beat them; at `max_len` every live
    hypothesis is finished as it stands. Scores are log-probabilities divided
    by `penalty_divisor(len incl. EOS, α, penalty)`.
    """
    model.eval()
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best={n_best} must be between 1 and beam_size={beam_size}")
    k = beam_size
    batch = src.size(0)
    search = _Search(model, src, bos_id, k, max_len, use_cache)
    # Only the first beam is live at the start, so the first step expands one prefix.
    scores = torch.full((batch, k), float("-inf"), device=src.device)
    scores[:, 0] = 0.0
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    active = list(range(batch))  # original sentence of each batch position
    lp_max = max(penalty_divisor(n, length_penalty, penalty) for n in (1, max_len))
    for t in range(max_len):
        logp = search.step()  # (B·K, V)
        vocab = logp.size(-1)
        cand = (scores[:, :, None] + logp.view(-1, k, vocab)).view(-1, k * vocab)  # (B, K·V)
        top_scores, top_idx = cand.topk(2 * k, dim=1)  # (B, 2K)
        top_beam, top_tok = top_idx // vocab, top_idx % vocab
        last = t == max_len - 1
        top_scores, top_beam, top_tok = top_scores.tolist(), top_beam.tolist(), top_tok.tolist()
        next_rows, next_tokens, next_scores, keep = [], [], [], []
        for b, sent in enumerate(active):
            live = []
            for rank in range(2 * k):
                score, beam, tok = top_scores[b][rank], top_beam[b][rank], top_tok[b][rank]
                if score == float("-inf"):
                    break
                if tok == eos_id or last:
                    if rank < k:
                        tokens = search.prefix[b * k + beam, 1:].tolist() + ([] if tok == eos_id else [tok])
                        norm = score / penalty_divisor(t + 1, length_penalty, penalty)
                        finished[sent].append(Hypothesis(tokens, norm, score))
                elif len(live) < k:
                    live.append((beam, tok, score))
            finished[sent].sort(key=lambda h: -h.score)
            if last or _done(finished[sent], live, n_best, lp_max):
                continue
            keep.append(b)
            for beam, tok, score in live:
                next_rows.append(b * k + beam)
                next_tokens.append(tok)
                next_scores.append(score)
        if not keep:
            break
        device = src.device
        rows = torch.tensor(next_rows, device=device)
        sentences = torch.tensor(keep, device=device) if len(keep) < len(active) else None
        search.select(rows, sentences)
        search.append(torch.tensor(next_tokens, device=device))
        scores = torch.tensor(next_scores, device=device).view(-1, k)
        active = [active[b] for b in keep]
    return [hyps[:n_best] for hyps in finished]


def _done(finished: list[Hypothesis], live: list[tuple[int, int, float]], n_best: int, lp_max: float) -> bool:
    """True when `n_best` hypotheses are finished and no live one can overtake the worst of them.

    A live hypothesis' raw log-probability only falls as it grows, so its best
    possible normalised score is its current score divided by the largest
    penalty it could still get.
    """
    if len(finished) < n_best or not live:
        return len(finished) >= n_best
    best_live = max(score for _, _, score in live) / lp_max
    return finished[n_best - 1].score >= best_live


def beam_search(
    model,
    src: Tensor,
    beam_size: int,
    bos_id: int,
    eos_id: int,
    max_len: int,
    length_penalty: float = 1.0,
    use_cache: bool = True,
    penalty: str = "power",
) -> list[list[int]]:
    """The best hypothesis of each sentence as a list of ids without BOS and EOS."""
    hyps = beam_search_hypotheses(model, src, beam_size, bos_id, eos_id, max_len, length_penalty, penalty, 1, use_cache)
    return [h[0].tokens for h in hyps]
