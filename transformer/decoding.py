"""Greedy, sampling and beam search over any model with `encode`, `init_cache` and `decode`.

All searches share one step function; with `use_cache=True` a step feeds only
the newest token and reads the rest of the prefix from a `DecoderCache`, with
`use_cache=False` it re-runs the whole prefix. The two give the same ids.
Lengths count generated tokens including EOS; BOS and pad are never generated.
Each search runs inside `packed_weights(model)` (fast CPU products, `transformer.linear`).
"""

import functools
from dataclasses import dataclass

import torch
from torch import Tensor

from transformer.cache import DecoderCache
from transformer.linear import packed_weights

NEG_INF = float("-inf")


@dataclass
class Hypothesis:
    """A finished translation: ids without BOS/EOS, its length-normalised score,
    its log-probability, and the log-probability of each generated token (EOS included)."""

    tokens: list[int]
    score: float
    logprob: float
    token_scores: list[float]


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


def limits(max_len: int | Tensor, batch: int, device: torch.device) -> Tensor:
    """Per-sentence output limits (B,) from an int or a (B,) tensor."""
    if isinstance(max_len, Tensor):
        return max_len.to(device=device, dtype=torch.long)
    return torch.full((batch,), int(max_len), dtype=torch.long, device=device)


class _Search:
    """Encoder output, optional cache and prefixes for a batch of rows (hypotheses).

    Rows are `group` hypotheses per source sentence, sentence-major.
    """

    def __init__(
        self,
        model,
        src: Tensor,
        bos_id: int,
        eos_id: int,
        group: int,
        max_len: int,
        use_cache: bool,
        min_len: int = 0,
        no_repeat_ngram_size: int = 0,
    ):
        self.model, self.eos_id = model, eos_id
        self.memory, self.src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S)
        self.cache: DecoderCache | None = model.init_cache(self.memory, group, max_len) if use_cache else None
        self.prefix = torch.full((src.size(0) * group, max_len + 1), bos_id, dtype=torch.long, device=src.device)
        self.logprobs = torch.zeros(src.size(0) * group, max_len, device=src.device)  # per generated token
        self.length = 1  # filled prefix positions, BOS included
        self.banned = [bos_id, model.pad_id]
        self.min_len, self.ngram = min_len, no_repeat_ngram_size

    def step(self) -> Tensor:
        """Log-probabilities (N, V) of the next token for every row, with banned tokens at -inf."""
        prefix = self.prefix[:, : self.length]
        tgt_in = prefix[:, -1:] if self.cache is not None else prefix
        logits = self.model.decode(tgt_in, self.memory, self.src_mask, self.cache)
        logp = torch.log_softmax(logits[:, -1].float(), dim=-1)
        logp[:, self.banned] = NEG_INF
        if self.length - 1 < self.min_len and 0 <= self.eos_id < logp.size(1):
            logp[:, self.eos_id] = NEG_INF
        if self.ngram > 0 and self.length >= self.ngram:
            self._block_repeats(logp, prefix)
        return logp

    def _block_repeats(self, logp: Tensor, prefix: Tensor) -> None:
        """Forbid tokens that would repeat an n-gram already in the row's prefix."""
        n = self.ngram
        windows = prefix.unfold(1, n, 1)  # (N, W, n): every n-gram so far
        tail = prefix[:, None, self.length - n + 1 :]  # (N, 1, n-1): the newest n-1 tokens
        seen = (windows[:, :, : n - 1] == tail).all(dim=-1)  # (N, W)
        logp.scatter_add_(1, windows[:, :, -1], torch.where(seen, NEG_INF, 0.0))

    def append(self, tokens: Tensor, logprobs: Tensor) -> None:
        self.prefix[:, self.length] = tokens
        self.logprobs[:, self.length - 1] = logprobs
        self.length += 1

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep `rows` (and, when the batch shrinks, their `sentences`) in that order."""
        self.prefix = self.prefix.index_select(0, rows)
        self.logprobs = self.logprobs.index_select(0, rows)
        if sentences is not None:
            self.memory = self.memory.index_select(0, sentences)
            self.src_mask = self.src_mask.index_select(0, sentences)
        if self.cache is not None:
            self.cache.reorder(rows, sentences)


def _pick_greedy(logp: Tensor) -> Tensor:
    return logp.argmax(dim=-1)


def _sampler(top_k: int, top_p: float, temperature: float, generator: torch.Generator | None):
    """A token picker drawing from the (temperature-scaled, top-k / nucleus filtered) distribution."""

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


def _packing(search):
    """Run `search(model, ...)` with the model's weights packed for CPU inference (see `transformer.linear`)."""

    @functools.wraps(search)
    def run(model, *args, **kwargs):
        with packed_weights(model):
            return search(model, *args, **kwargs)

    return run


@_packing
def _one_best(model, src, bos_id, eos_id, max_len, use_cache, pick, min_len, no_repeat_ngram_size):
    """Decode one hypothesis per sentence, choosing each token with `pick`; finished rows leave the batch."""
    model.eval()
    batch = src.size(0)
    limit = limits(max_len, batch, src.device)
    longest = int(limit.max()) if batch else 0
    out = torch.full((batch, longest), model.pad_id, dtype=torch.long, device=src.device)
    scores = torch.zeros(batch, longest, device=src.device)
    search = _Search(model, src, bos_id, eos_id, 1, longest, use_cache, min_len, no_repeat_ngram_size)
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
    out, scores = _one_best(model, src, bos_id, eos_id, max_len, use_cache, _pick_greedy, min_len, no_repeat_ngram_size)
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
    if temperature <= 0 or not 0 < top_p <= 1:
        raise ValueError(f"need temperature > 0 and 0 < top_p <= 1 (got {temperature}, {top_p})")
    pick = _sampler(top_k, top_p, temperature, generator)
    return _one_best(model, src, bos_id, eos_id, max_len, use_cache, pick, min_len, no_repeat_ngram_size)[0]


class _Pool:
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

    def keep(self, sentences: Tensor) -> None:
        for name in ("score", "raw", "tokens", "token_scores", "length"):
            setattr(self, name, getattr(self, name).index_select(0, sentences))

    def hypotheses(self, b: int, eos_id: int) -> list[Hypothesis]:
        out = []
        for j in range(self.score.size(1)):
            if self.score[b, j] == NEG_INF:
                break
            n = int(self.length[b, j])
            tokens = self.tokens[b, j, :n].tolist()
            out.append(
                Hypothesis(
                    tokens[:-1] if tokens[-1] == eos_id else tokens,
                    float(self.score[b, j]),
                    float(self.raw[b, j]),
                    self.token_scores[b, j, :n].tolist(),
                )
            )
        return out


@torch.inference_mode()
@_packing
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
    """Beam search; for each sentence the `n_best` best finished hypotheses, best first.

    Each step ranks all beam × vocabulary extensions of a sentence. Extensions
    ending in EOS among the top `beam_size` are finished and set aside; the best
    `beam_size` others continue. A sentence stops once it has `n_best` finished
    hypotheses and no live one can still beat them; at its length limit every
    live hypothesis is finished as it stands. Scores are log-probabilities
    divided by `penalty_divisor(length incl. EOS, α=length_penalty, kind)`.
    """
    model.eval()
    if beam_size < 1 or not 1 <= n_best <= beam_size:
        raise ValueError(f"need beam_size >= 1 and 1 <= n_best <= beam_size (got {beam_size}, {n_best})")
    k, batch, device = beam_size, src.size(0), src.device
    limit = limits(max_len, batch, device)
    longest = int(limit.max())
    divisor = torch.tensor(
        [penalty_divisor(n, length_penalty, length_penalty_kind) for n in range(1, longest + 1)], device=device
    )
    # A live hypothesis' log-probability only falls, so its best possible score is
    # its current one over the largest divisor it could still reach.
    best_divisor = divisor.cummax(0).values[limit - 1]  # (B,)
    search = _Search(model, src, bos_id, eos_id, k, longest, use_cache, min_len, no_repeat_ngram_size)
    pool = _Pool(batch, n_best, longest, model.pad_id, device)
    scores = torch.full((batch, k), NEG_INF, device=device)
    scores[:, 0] = 0.0  # only the first beam is live at the start
    active = torch.arange(batch, device=device)  # original sentence of each batch position
    results: list[list[Hypothesis]] = [[] for _ in range(batch)]
    for t in range(longest):
        logp = search.step()  # (B·K, V)
        n, vocab = scores.size(0), logp.size(-1)
        cand = (scores[:, :, None] + logp.view(n, k, vocab)).view(n, k * vocab)
        top_scores, top_idx = cand.topk(min(2 * k, k * vocab), dim=1)  # (B, 2K), best first
        top_logp = logp.view(n, k * vocab).gather(1, top_idx)
        top_tok = top_idx % vocab
        rows = torch.arange(n, device=device)[:, None] * k + top_idx // vocab  # (B, 2K)
        is_eos = top_tok == eos_id
        last = limit[active] == t + 1  # (B,)
        rank = torch.arange(top_idx.size(1), device=device)
        finishing = (is_eos | last[:, None]) & (rank < k) & (top_scores > NEG_INF)
        if finishing.any():
            tokens = torch.cat([search.prefix[rows, 1 : t + 1], top_tok[:, :, None]], dim=2)  # (B, 2K, t+1)
            token_scores = torch.cat([search.logprobs[rows, :t], top_logp[:, :, None]], dim=2)
            pool.add(torch.where(finishing, top_scores / divisor[t], NEG_INF), top_scores, tokens, token_scores)
        order = is_eos.to(torch.int8).argsort(dim=1, stable=True)[:, :k]  # the K best non-EOS, by rank
        next_scores = top_scores.gather(1, order)
        bound = next_scores[:, 0] / best_divisor[active]
        done = last | ((pool.score[:, -1] > NEG_INF) & (pool.score[:, -1] >= bound))
        for b in done.nonzero().flatten().tolist():
            results[int(active[b])] = pool.hypotheses(b, eos_id)
        keep = (~done).nonzero().flatten()
        if keep.numel() == 0:
            break
        shrink = keep if keep.numel() < n else None
        search.select(rows.gather(1, order)[keep].flatten(), shrink)
        search.append(top_tok.gather(1, order)[keep].flatten(), top_logp.gather(1, order)[keep].flatten())
        scores, active = next_scores[keep], active[keep]
        if shrink is not None:
            pool.keep(keep)
    return results


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
        1,
        use_cache,
        min_len,
        no_repeat_ngram_size,
    )
    return [h[0].tokens for h in hyps]
