"""What every search shares: its options, its hypotheses, and the step over a batch of prefixes."""

from collections.abc import Callable
from dataclasses import dataclass, field, fields, make_dataclass

import torch
from torch import Tensor

from transformer.core.config import DecodingBase, DecodingConfig, Strategy
from transformer.core.special_ids import BOS_ID, EOS_ID
from transformer.core.strategies import options, problems
from transformer.decoding.steering import Controls, Steering
from transformer.models.interface import SearchCache, Seq2SeqModel

NEG_INF = float("-inf")
Text = Callable[[list[list[int]]], list[str]]  # target ids → text, for a strategy that compares translations


@dataclass
class Hypothesis:
    """A finished translation: ids without BOS/EOS, its score (beam: length-normalised; otherwise its
    log-probability), its log-probability, the log-probability of each token (EOS included), and how many of its
    first tokens a prefix forced (the score and log-probability count only those after them)."""

    tokens: list[int]
    score: float
    logprob: float
    token_scores: list[float]
    forced: int = 0


def strip_eos(tokens: list[int], eos_id: int) -> list[int]:
    """`tokens` without a final EOS."""
    return tokens[:-1] if tokens and tokens[-1] == eos_id else tokens


@dataclass(frozen=True)
class _SearchSettings:
    """The settings of one search that every strategy shares (meaning and defaults on `DecodingConfig`)."""

    strategy: Strategy
    max_len_a: float = DecodingBase.max_len_a
    max_len_b: int = DecodingBase.max_len_b
    min_len: int = DecodingBase.min_len
    no_repeat_ngram_size: int = DecodingBase.no_repeat_ngram_size
    use_cache: bool = True
    cuda_graphs: bool = True  # on a GPU: replay each step as one CUDA graph (`decoding.cuda_graphs`)
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID

    @classmethod
    def from_config(cls, cfg: DecodingConfig | None = None, **overrides) -> "SearchOptions":
        """The options of `cfg` (default `DecodingConfig()`), with `overrides` (any field) replacing its values."""
        cfg = DecodingConfig() if cfg is None else cfg
        values = {f.name: getattr(cfg, f.name) for f in fields(cls) if f.name in DecodingConfig.__dataclass_fields__}
        return cls(**{**values, **overrides})

    def __post_init__(self):
        found = problems(self)
        if found:
            raise ValueError("; ".join(found))

    def output_limits(self, src_lengths: Tensor, max_positions: int) -> Tensor:
        """Per-sentence output limits a·len+b (source tokens incl. EOS), capped by the model's positions."""
        limit = (self.max_len_a * src_lengths.double() + self.max_len_b).long()  # as Python's int(a * n + b)
        return limit.clamp(1, max_positions - 1)


# The settings of one search: the shared ones and every strategy's options (`transformer.core.strategies`).
SearchOptions = make_dataclass(
    "SearchOptions",
    [(name, type(o.default), field(default=o.default)) for name, o in options().items()],
    bases=(_SearchSettings,),
    frozen=True,
    namespace={"__module__": __name__, "__doc__": "The settings of one search, checked by the strategies' table."},
)


def never_generated(options: SearchOptions, model: Seq2SeqModel, device: torch.device) -> Tensor:
    """The ids no search may generate: BOS and padding."""
    return torch.tensor([options.bos_id, model.pad_id], device=device)


def next_log_probs(logits: Tensor, banned: Tensor) -> Tensor:
    """Log-probabilities (N, V), in fp32, of the next token from its logits (N, V), with `banned` ids at -inf."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    logp.index_fill_(1, banned, NEG_INF)
    return logp


def limits(max_len: int | Tensor, batch: int, device: torch.device) -> Tensor:
    """Per-sentence output limits (B,) from an int or a (B,) tensor."""
    if isinstance(max_len, Tensor):
        return max_len.to(device=device, dtype=torch.long)
    return torch.full((batch,), int(max_len), dtype=torch.long, device=device)


class SearchState:
    """Encoder output, optional cache and prefixes for a batch of rows (hypotheses).

    There is one row per source sentence at first; `select` keeps, repeats or drops rows
    (beam search fans each sentence out to its hypotheses, sentence-major). `controls` steer each sentence
    (`decoding.steering`).
    """

    def __init__(
        self, model: Seq2SeqModel, src: Tensor, options: SearchOptions, max_len: int, controls: Controls | None = None
    ):
        self.model, self.eos_id = model, options.eos_id
        self.memory, self.src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S)
        self.cache: SearchCache | None = model.init_cache(self.memory, 1, max_len) if options.use_cache else None
        self.prefix = torch.full((src.size(0), max_len + 1), options.bos_id, dtype=torch.long, device=src.device)
        self.logprobs = torch.zeros(src.size(0), max_len, device=src.device)  # per generated token
        self.length = 1  # filled prefix positions, BOS included
        self.banned = never_generated(options, model, src.device)
        self.min_len, self.ngram = options.min_len, options.no_repeat_ngram_size
        self.steering = None if controls is None else Steering(controls, src.size(0), src.device)

    @property
    def offset(self) -> Tensor:
        """(N,): the log-probability of each row's forced tokens, which its score does not count."""
        return self.steering.offset if self.steering is not None else self.logprobs.new_zeros(self.prefix.size(0))

    def step(self) -> Tensor:
        """Log-probabilities (N, V) of the next token for every row, with banned tokens at -inf."""
        prefix = self.prefix[:, : self.length]
        tgt_in = prefix[:, -1:] if self.cache is not None else prefix
        logits = self.model.decode(tgt_in, self.memory, self.src_mask, self.cache)
        logp = next_log_probs(logits[:, -1], self.banned)
        forced = self.steering.forced_now(self.length - 1) if self.steering is not None else None
        forced_logp = logp.gather(1, forced.clamp(min=0)[:, None]).squeeze(1) if forced is not None else None
        if self.length - 1 < self.min_len and 0 <= self.eos_id < logp.size(1):
            logp[:, self.eos_id] = NEG_INF
        if self.ngram > 0 and self.length >= self.ngram:
            self._block_repeats(logp, prefix)
        if self.steering is not None:
            self.steering.constrain(logp, prefix, forced_logp)
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
        if self.steering is not None:
            self.steering.advance(tokens, logprobs)

    def select(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep `rows` (indices into the current rows, repeats allowed) and, when the batch shrinks, `sentences`."""
        self.prefix = self.prefix.index_select(0, rows)
        self.logprobs = self.logprobs.index_select(0, rows)
        if self.steering is not None:
            self.steering.select(rows)
        if sentences is not None:
            self.memory = self.memory.index_select(0, sentences)
            self.src_mask = self.src_mask.index_select(0, sentences)
        if self.cache is not None:
            self.cache.reorder(rows, sentences)
