"""Batches formed by token count with length bucketing (`batch_order`), and their padded tensors: a training
batch's ids are gathered from the memory-mapped Arrow columns (`IdColumn`) and padded with numpy."""

import itertools
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from transformer.core.special_ids import BOS_ID, EOS_ID, PAD_ID
from transformer.data.arrow_ids import IdColumn, list_lengths
from transformer.data.batch_order import Batches, KeyLayout, sorted_keys, token_batches
from transformer.data.mixture import TrainingCorpus, corpus_starts, epoch_counts, epoch_parts
from transformer.data.tokenizer import Tokenizer

if TYPE_CHECKING:  # importing datasets takes seconds; translating needs none of it
    import datasets
    import pyarrow as pa

__all__ = ["Batch", "Batches", "TrainBatches", "collate", "pad", "padded", "token_batches"]

log = logging.getLogger(__name__)


@dataclass
class Batch:
    """Padded tensors for teacher forcing: src+EOS, BOS+tgt (input), tgt+EOS (output)."""

    src: Tensor  # (B, S)
    tgt_in: Tensor  # (B, T)
    tgt_out: Tensor  # (B, T)
    links: Tensor | None = None  # (K, 3) guided alignment: (row, target piece, source piece) links
    link_weights: Tensor | None = None  # (K,) each link's share of its target piece: 1 / its links

    @property
    def n_tokens(self) -> int:
        """Target tokens that count in the loss."""
        return int((self.tgt_out != PAD_ID).sum())

    def to(self, device: torch.device) -> "Batch":
        links = None if self.links is None else (self.links.to(device), self.link_weights.to(device))
        return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device), *(links or ()))


def padded(ids: np.ndarray, lengths: np.ndarray, first: int | None = None, last: int | None = None) -> Tensor:
    """(B, L) int64 rows of `ids` (one row after the other, `lengths` long), `first` before and `last` after each,
    right-padded with PAD_ID."""
    shift = int(first is not None)
    width = int(lengths.max(initial=0)) + shift + int(last is not None)
    columns = np.arange(width)
    out = np.full((len(lengths), width), PAD_ID, dtype=np.int64)
    out[(columns >= shift) & (columns < lengths[:, None] + shift)] = ids
    if first is not None:
        out[:, 0] = first
    if last is not None:
        out[np.arange(len(lengths)), lengths + shift] = last
    return torch.from_numpy(out)


def _flat(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """The ids of `seqs` one after the other, and each one's length."""
    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    return np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64, count=int(lengths.sum())), lengths


def pad(seqs: list[list[int]]) -> Tensor:
    """Right-pad id lists into a (B, L) int64 tensor."""
    return padded(*_flat(seqs))


def collate(src_ids: list[list[int]], tgt_ids: list[list[int]]) -> Batch:
    (src, src_lengths), (tgt, tgt_lengths) = _flat(src_ids), _flat(tgt_ids)
    return Batch(
        src=padded(src, src_lengths, last=EOS_ID),
        tgt_in=padded(tgt, tgt_lengths, first=BOS_ID),
        tgt_out=padded(tgt, tgt_lengths, last=EOS_ID),
    )


def link_tensors(flat: np.ndarray, lengths: np.ndarray) -> tuple[Tensor, Tensor]:
    """A batch's piece links (K, 3) as (row, target piece, source piece), and each one's weight (K,): 1 over the
    links of its target piece; from each row's flattened (t, s) pairs, one row after the other."""
    pairs = flat.astype(np.int64).reshape(-1, 2)  # (K, 2)
    rows = np.repeat(np.arange(len(lengths)), lengths // 2)
    links = np.column_stack([rows, pairs])  # (K, 3)
    _, inverse, counts = np.unique(links[:, :2], axis=0, return_inverse=True, return_counts=True)
    weights = 1.0 / counts[inverse.reshape(-1)]
    return torch.from_numpy(links), torch.from_numpy(weights.astype(np.float32))


def _table_order(ds: "datasets.Dataset") -> "datasets.Dataset":
    """`ds` with its rows where its table holds them (a selection of rows is written out first)."""
    return ds if ds._indices is None else ds.flatten_indices()


class TrainBatches:
    """The training split: a memory-mapped Arrow dataset plus its pairs' length classes, and the corpora it mixes.

    Only the pairs' length classes live in memory (uint32: 4 bytes a pair, their lengths packed the way the sort
    keys hold them, so an epoch gathers no lengths), and an epoch's sort keys while it lasts (8 bytes a pair); a
    batch's rows are read when it is collated, so a process touches just its own share of a corpus larger than
    memory.
    """

    def __init__(
        self,
        ds: "datasets.Dataset",
        rows: np.ndarray | None,
        lengths: np.ndarray,
        batch_tokens: int,
        seed: int,
        sampling: tuple[Tokenizer, float] | None = None,
        corpora: list[TrainingCorpus] | None = None,
        links: "pa.ChunkedArray | None" = None,
    ):
        ds = _table_order(ds)
        self.sampling = sampling  # (tokenizer, BPE-dropout): re-encode each batch's text with dropout
        self.ds = ds.select_columns(["src", "tgt"] if sampling else ["src_ids", "tgt_ids"])
        self.ids = None if sampling else tuple(IdColumn(ds.data.column(name)) for name in ("src_ids", "tgt_ids"))
        self.rows = rows  # kept dataset rows (N,) or None: all
        self.batch_tokens, self.seed = batch_tokens, seed
        # the split's corpora, their rows one after the other
        self.corpora = corpora or [TrainingCorpus("train", pairs=len(ds))]
        self.starts = corpus_starts(self.corpora, rows)  # (C + 1,) where each corpus's kept pairs start
        self.layout = KeyLayout.of(lengths, random=True)
        self.classes = self.layout.classes(lengths)  # (N,) their (N, 2) lengths + EOS/BOS, packed
        self.links = None if links is None else IdColumn(links)  # guided alignment: each row's piece links
        if links is not None:
            self.link_lengths = np.empty(len(ds), dtype=np.int32)
            list_lengths(links, self.link_lengths)

    @classmethod
    def from_dataset(
        cls,
        ds: "datasets.Dataset",
        max_len: int,
        batch_tokens: int,
        seed: int,
        sampling: tuple[Tokenizer, float] | None = None,
        corpora: list[TrainingCorpus] | None = None,
        links: "pa.ChunkedArray | None" = None,
    ) -> "TrainBatches":
        """Pairs longer than `max_len` tokens (with EOS) are dropped and counted; both use deterministic lengths,
        read from the id columns' offsets. (Prepared data holds none over its own data.max_len, dropped when it was
        cleaned; this serves a caller with its own limit, such as scripts/train_marian_reference.py.)"""
        ds = _table_order(ds)
        lengths = np.empty((len(ds), 2), dtype=np.uint16 if max_len < 0xFFFF else np.uint32)
        for side, name in enumerate(("src_ids", "tgt_ids")):  # + EOS (source, target output) or BOS (target input)
            list_lengths(ds.data.column(name), lengths[:, side], plus=1)
        kept = np.maximum(lengths[:, 0], lengths[:, 1]) <= max_len
        rows = None if kept.all() else np.flatnonzero(kept).astype(np.uint32)
        if rows is not None:
            dropped = len(ds) - len(rows)
            log.info("dropped %d of %d training pairs longer than data.max_len=%d tokens", dropped, len(ds), max_len)
            lengths = lengths[rows]
        return cls(ds, rows, lengths, batch_tokens, seed, sampling, corpora, links)

    def __len__(self) -> int:
        return len(self.classes)

    def epoch(self, epoch: int) -> Batches:
        """Batches (positions into the kept pairs) for `epoch`: each corpus's share by its weight, deterministic
        given the seed. With every weight 1, every pair once, as without a mixture."""
        rng = np.random.default_rng([self.seed, epoch])
        parts = epoch_parts(self.starts, [c.weight for c in self.corpora], self.seed, epoch)
        return Batches.cut(sorted_keys(self.classes, parts, self.layout, rng), self.layout, self.batch_tokens, rng)

    def pairs_per_corpus(self, batches: Batches) -> dict[str, int]:
        """How many pairs of each corpus `batches` (an epoch's) hold."""
        return epoch_counts(self.corpora, self.starts, batches.order)

    def corpus_of(self, positions: np.ndarray) -> np.ndarray:
        """The corpus (index into `corpora`) of each of `positions`."""
        return np.searchsorted(self.starts, positions, side="right") - 1

    def collate(self, indices: np.ndarray, epoch: int) -> Batch:
        """The padded batch of `indices`; with sampling, its segmentation depends on (seed, epoch, batch)."""
        rows = (indices if self.rows is None else self.rows[indices]).astype(np.int64)
        if self.sampling is None:
            # (B,) each side's lengths without EOS/BOS
            src_len, tgt_len = (n.astype(np.int64) - 1 for n in self.layout.lengths(self.classes[indices]))
            src, tgt = (column.tokens(rows, n) for n, column in zip((src_len, tgt_len), self.ids))
            links = ()
            if self.links is not None:
                n_links = self.link_lengths[rows].astype(np.int64)
                links = link_tensors(self.links.tokens(rows, n_links), n_links)
            src_in, tgt_in = padded(src, src_len, last=EOS_ID), padded(tgt, tgt_len, first=BOS_ID)
            return Batch(src_in, tgt_in, padded(tgt, tgt_len, last=EOS_ID), *links)
        pairs = self.ds[rows.tolist()]
        tokenizer, dropout = self.sampling
        state = np.random.SeedSequence([self.seed, epoch, int(indices[0])]).generate_state(2)
        src_seed, tgt_seed = (state % 0xFFFFFFFF).tolist()  # SentencePiece ignores the seed 2**32 - 1
        src_ids, tgt_ids = tokenizer.sample_pairs(pairs["src"], pairs["tgt"], dropout, (src_seed, tgt_seed))
        tags = [tokenizer.tag_prefix(self.corpora[i].tag) for i in self.corpus_of(indices)]
        return collate([tag + ids for tag, ids in zip(tags, src_ids)], tgt_ids)

    def time_collate(self, count: int, epoch: int = 0) -> tuple[float, int]:
        """Seconds to collate the first `count` batches of `epoch` (the loader alone), and the tokens they hold
        (source and target, with EOS/BOS, without padding)."""
        batches = self.epoch(epoch)[:count]
        tokens = int(batches.shapes()[1][batches.schedule].sum())
        start = time.perf_counter()
        for indices in batches:
            self.collate(indices, epoch)
        return time.perf_counter() - start, tokens
