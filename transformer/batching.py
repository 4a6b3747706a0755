"""Batches formed by token count with length bucketing, and their padded tensors."""

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from transformer.mixture import Corpus, corpus_index, epoch_counts, epoch_positions
from transformer.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer

if TYPE_CHECKING:  # importing datasets takes seconds; translating needs none of it
    import datasets

log = logging.getLogger(__name__)


@dataclass
class Batch:
    """Padded tensors for teacher forcing: src+EOS, BOS+tgt (input), tgt+EOS (output)."""

    src: Tensor  # (B, S)
    tgt_in: Tensor  # (B, T)
    tgt_out: Tensor  # (B, T)

    @property
    def n_tokens(self) -> int:
        """Target tokens that count in the loss."""
        return int((self.tgt_out != PAD_ID).sum())

    def to(self, device: torch.device) -> "Batch":
        return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device))


def pad(seqs: list[list[int]]) -> Tensor:
    """Right-pad id lists into a (B, L) int64 tensor."""
    out = torch.full((len(seqs), max(map(len, seqs))), PAD_ID, dtype=torch.long)
    for i, seq in enumerate(seqs):
        out[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out


def collate(src_ids: list[list[int]], tgt_ids: list[list[int]]) -> Batch:
    return Batch(
        src=pad([s + [EOS_ID] for s in src_ids]),
        tgt_in=pad([[BOS_ID] + t for t in tgt_ids]),
        tgt_out=pad([t + [EOS_ID] for t in tgt_ids]),
    )


def token_batches(lengths: np.ndarray, batch_tokens: int, rng: np.random.Generator | None) -> list[np.ndarray]:
    """Group example indices into batches of at most `batch_tokens` padded tokens.

    `lengths` (N, 2) holds source and target lengths. Examples are sorted by
    length (ties broken at random when `rng` is given) so that a batch holds
    similar lengths; the batches are then shuffled.
    """
    order = rng.permutation(len(lengths)) if rng is not None else np.arange(len(lengths))
    order = order[np.lexsort((lengths[order, 0], lengths[order, 1]))]  # by target, then source length
    longest = lengths[order].max(axis=1)
    batches, start, widest = [], 0, 0
    for i, width in enumerate(longest):
        widest = max(widest, width)
        if (i + 1 - start) * widest > batch_tokens and i > start:
            batches.append(order[start:i])
            start, widest = i, width
    batches.append(order[start:])
    if rng is not None:
        rng.shuffle(batches)
    return batches


def padding_fraction(lengths: np.ndarray, batches: list[np.ndarray]) -> float:
    """Share of padded positions (source and target together) over all batches."""
    real = padded = 0
    for idx in batches:
        real += lengths[idx].sum()
        padded += len(idx) * lengths[idx].max(axis=0).sum()
    return 1.0 - real / padded


class TrainBatches:
    """The training split: a memory-mapped Arrow dataset plus a table of lengths, and the corpora it mixes.

    Only the lengths live in memory; a batch's rows are read when it is collated,
    so a process touches just its own share of a corpus larger than memory.
    """

    def __init__(
        self,
        ds: "datasets.Dataset",
        rows: np.ndarray,
        lengths: np.ndarray,
        batch_tokens: int,
        seed: int,
        sampling: tuple[Tokenizer, float] | None = None,
        corpora: list[Corpus] | None = None,
    ):
        self.sampling = sampling  # (tokenizer, BPE-dropout): re-encode each batch's text with dropout
        self.ds = ds.select_columns(["src", "tgt"] if sampling else ["src_ids", "tgt_ids"])
        self.rows, self.lengths = rows, lengths  # kept dataset rows (N,), their (N, 2) lengths with EOS/BOS
        self.batch_tokens, self.seed = batch_tokens, seed
        self.corpora = corpora or [Corpus("train", len(ds))]  # the split's corpora, their rows one after the other
        self.owner = corpus_index(self.corpora, rows)  # (N,) the corpus of each kept pair

    @classmethod
    def from_dataset(
        cls,
        ds: "datasets.Dataset",
        max_len: int,
        batch_tokens: int,
        seed: int,
        sampling: tuple[Tokenizer, float] | None = None,
        corpora: list[Corpus] | None = None,
    ) -> "TrainBatches":
        """Pairs longer than `max_len` tokens (with EOS) are dropped and counted; both use deterministic lengths.
        (Prepared data holds none over its own data.max_len, dropped when it was cleaned; this serves a caller with
        its own limit, such as scripts/train_marian_reference.py.)"""
        table = ds.with_format("numpy", columns=["src_len", "tgt_len"])[:]
        lengths = np.stack([table["src_len"], table["tgt_len"]], axis=1).astype(np.int32) + 1
        rows = np.flatnonzero(lengths.max(axis=1) <= max_len)
        if len(rows) < len(lengths):
            log.info(
                "dropped %d of %d training pairs longer than data.max_len=%d tokens",
                len(lengths) - len(rows),
                len(lengths),
                max_len,
            )
        return cls(ds, rows, lengths[rows], batch_tokens, seed, sampling, corpora)

    def __len__(self) -> int:
        return len(self.rows)

    def epoch(self, epoch: int) -> list[np.ndarray]:
        """Batches (positions into the kept pairs) for `epoch`: each corpus's share by its weight, deterministic
        given the seed. With every weight 1, every pair once, as without a mixture."""
        positions = epoch_positions(self.owner, [c.weight for c in self.corpora], self.seed, epoch)
        batches = token_batches(self.lengths[positions], self.batch_tokens, np.random.default_rng([self.seed, epoch]))
        return [positions[b] for b in batches]

    def pairs_per_corpus(self, batches: list[np.ndarray]) -> dict[str, int]:
        """How many pairs of each corpus `batches` (an epoch's) hold."""
        return epoch_counts(self.corpora, self.owner, np.concatenate(batches))

    def collate(self, indices: np.ndarray, epoch: int) -> Batch:
        """The padded batch of `indices`; with sampling, its segmentation depends on (seed, epoch, batch)."""
        pairs = self.ds[self.rows[indices].tolist()]
        if self.sampling is None:
            return collate(pairs["src_ids"], pairs["tgt_ids"])
        tokenizer, dropout = self.sampling
        state = np.random.SeedSequence([self.seed, epoch, int(indices[0])]).generate_state(2)
        src_seed, tgt_seed = (state % 0xFFFFFFFF).tolist()  # SentencePiece ignores the seed 2**32 - 1
        src_ids, tgt_ids = tokenizer.sample_pairs(pairs["src"], pairs["tgt"], dropout, (src_seed, tgt_seed))
        tags = [tokenizer.tag_prefix(self.corpora[i].tag) for i in self.owner[indices]]
        return collate([tag + ids for tag, ids in zip(tags, src_ids)], tgt_ids)
