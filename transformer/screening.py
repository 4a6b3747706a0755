"""The first pass over a training corpus: the text rules of cleaning and SentencePiece's sample, shard by shard.

Each shard of pairs leaves, in the corpus's work folder, its pairs' 64-bit fingerprints and text flags
(`screen-NNNNN.npz`) and its candidates for SentencePiece's sample (`sample-NNNNN.arrow`). The sample is a
bottom-k sample: the pairs with the k lowest keys, a key being a mix of the fingerprint, so equal pairs are one
candidate and the sample does not depend on the sharding. A kill loses at most the shard in flight; `screen()` run
again reads past the finished shards and goes on. Once every shard is screened, `keep_masks` marks each corpus's
repeats (the first of equal pairs stays) and writes which pairs every text rule keeps.
"""

import json
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import numpy as np
import pyarrow as pa
from tqdm import tqdm

from transformer.cleaning import CleaningReport, keep_mask
from transformer.config import CleanConfig
from transformer.files import atomic_write_text
from transformer.shards import write_shard

CHUNK = 20_000  # pairs read and flagged at a time


def fingerprints(srcs: list[str], tgts: list[str]) -> np.ndarray:
    """A 64-bit fingerprint per pair: CRC-32 of the source, then of the target (equal pairs, equal fingerprints)."""
    crc = zlib.crc32
    pairs = zip(srcs, tgts)
    return np.fromiter((crc(s.encode()) << 32 | crc(t.encode()) for s, t in pairs), dtype=np.uint64, count=len(srcs))


def sample_keys(digests: np.ndarray) -> np.ndarray:
    """Pseudo-random keys from fingerprints (splitmix64's finaliser): pairs that share a source get unrelated keys."""
    with np.errstate(over="ignore"):
        z = digests.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


@dataclass
class Screened:
    """What screening a corpus found: pairs read (the source's skips apart), the source's skips by reason."""

    pairs: int
    skipped: dict[str, int]


class Screen:
    """The screening of one corpus in `folder`: pairs per shard, the sample size `k` (0: no sample wanted)."""

    def __init__(self, folder: Path, shard_pairs: int, k: int):
        self.folder, self.shard_pairs, self.k = folder, shard_pairs, k
        folder.mkdir(parents=True, exist_ok=True)

    @property
    def done(self) -> Screened | None:
        path = self.folder / "screened.json"
        return Screened(**json.loads(path.read_text())) if path.exists() else None

    def finished_shards(self) -> int:
        n = 0
        while (self.folder / f"screen-{n:05d}.npz").exists():
            n += 1
        return n

    def run(self, pairs: Iterator[tuple[str, str]], skipped: Counter, evals: tuple[set, set], name: str) -> Screened:
        """Screen the pairs of one corpus (resuming after its finished shards); `skipped` counts the source's skips."""
        if self.done is not None:
            return self.done
        start = self.finished_shards()
        threshold = self._threshold(start)
        for _ in islice(pairs, start * self.shard_pairs):  # the finished shards, read again to reach the next one
            pass
        read = start * self.shard_pairs
        with tqdm(desc=f"screening {name}", unit=" pairs", initial=read, mininterval=1.0, leave=False) as bar:
            shard = start
            while True:
                n, threshold = self._shard(pairs, shard, evals, threshold, bar)
                read += n
                if n < self.shard_pairs:
                    break
                shard += 1
        result = Screened(read, dict(skipped))
        atomic_write_text(self.folder / "screened.json", json.dumps(result.__dict__))
        return result

    def _shard(self, pairs, shard: int, evals: tuple[set, set], threshold: int, bar) -> tuple[int, int]:
        """Screen up to `shard_pairs` pairs into shard `shard`; returns the pairs read and the new sample threshold."""
        digests, equal, overlap, cand = [], [], [], ([], [], [])
        eval_src, eval_tgt = evals
        left = self.shard_pairs
        while left > 0:
            chunk = list(islice(pairs, min(CHUNK, left)))
            if not chunk:
                break
            srcs, tgts = (list(side) for side in zip(*chunk))
            left -= len(chunk)
            d = fingerprints(srcs, tgts)
            eq = np.fromiter((s == t for s, t in chunk), dtype=bool, count=len(chunk))
            ov = np.fromiter((s in eval_src or t in eval_tgt for s, t in chunk), dtype=bool, count=len(chunk))
            digests.append(d), equal.append(eq), overlap.append(ov)
            if self.k:
                keys = sample_keys(d)
                for i in np.flatnonzero((keys < np.uint64(threshold)) & ~eq & ~ov):
                    cand[0].append(int(keys[i])), cand[1].append(srcs[i]), cand[2].append(tgts[i])
            bar.update(len(chunk))
        n = sum(map(len, digests))
        if n == 0 and shard > 0:
            return 0, threshold
        arrays = {k: np.concatenate(v) if v else np.zeros(0, t) for k, v, t in _named(digests, equal, overlap)}
        self._write_sample(shard, *cand)
        np.savez(self.folder / f".screen-{shard:05d}.tmp.npz", **arrays)
        (self.folder / f".screen-{shard:05d}.tmp.npz").replace(self.folder / f"screen-{shard:05d}.npz")
        return n, self._threshold(shard + 1)

    def _write_sample(self, shard: int, keys: list[int], srcs: list[str], tgts: list[str]) -> None:
        """This shard's lowest `k` distinct candidates (a pair below them all is the only kind that can stay)."""
        order = np.argsort(np.array(keys, dtype=np.uint64), kind="stable")
        _, first = np.unique(np.array(keys, dtype=np.uint64)[order], return_index=True)
        chosen = order[first][: self.k]
        columns = {
            "key": pa.array(np.array(keys, dtype=np.uint64)[chosen] if keys else np.zeros(0, np.uint64)),
            "src": pa.array([srcs[i] for i in chosen], type=pa.string()),
            "tgt": pa.array([tgts[i] for i in chosen], type=pa.string()),
        }
        write_shard(self.folder / f"sample-{shard:05d}.arrow", columns)

    def _threshold(self, shards: int) -> int:
        """The key below which a pair can still enter the sample: the k-th lowest of the first `shards` shards'."""
        if not self.k:
            return 0
        keys = np.unique(np.concatenate([np.zeros(0, np.uint64), *(self._sample_keys(s) for s in range(shards))]))
        return int(keys[self.k - 1]) if len(keys) >= self.k else 2**64 - 1

    def _sample_keys(self, shard: int) -> np.ndarray:
        with pa.memory_map(str(self.folder / f"sample-{shard:05d}.arrow")) as source:
            table = pa.ipc.open_stream(source).read_all()
        return table.column("key").to_numpy()

    def sample(self) -> pa.Table:
        """The corpus's candidates (key, src, tgt) from every shard, lowest keys first, each key once."""
        tables = []
        for path in sorted(self.folder.glob("sample-*.arrow")):
            with pa.memory_map(str(path)) as source:
                tables.append(pa.ipc.open_stream(source).read_all())
        table = pa.concat_tables(tables)
        keys = table.column("key").to_numpy()
        order = np.argsort(keys, kind="stable")
        _, first = np.unique(keys[order], return_index=True)
        return table.take(pa.array(order[first][: self.k]))

    def keep(self, clean: CleanConfig, report: CleaningReport) -> None:
        """Decide the text rules over the whole corpus: write `keep-NNNNN.npy` (the pairs they keep) per shard and
        count what each drops in `report`."""
        shards = [np.load(path) for path in sorted(self.folder.glob("screen-*.npz"))]
        digests = np.concatenate([s["digests"] for s in shards])
        duplicate = np.ones(len(digests), dtype=bool)
        duplicate[np.unique(digests, return_index=True)[1]] = False  # each pair's first occurrence stays
        del digests
        flags = {
            "duplicate": duplicate & clean.duplicates,
            "equal sides": np.concatenate([s["equal"] for s in shards]) & clean.equal_sides,
            "eval overlap": np.concatenate([s["overlap"] for s in shards]) & clean.eval_overlap,
        }
        kept = keep_mask(flags, report)
        ends = np.cumsum([len(s["digests"]) for s in shards])
        for shard, part in enumerate(np.split(kept, ends[:-1])):
            np.save(self.folder / f"keep-{shard:05d}.npy", part)

    def kept(self, shard: int) -> np.ndarray:
        """Which pairs of shard `shard` the text rules keep (bool per pair)."""
        return np.load(self.folder / f"keep-{shard:05d}.npy")


def _named(digests: list, equal: list, overlap: list):
    return (("digests", digests, np.uint64), ("equal", equal, bool), ("overlap", overlap, bool))


def sample_size(input_sentence_size: int, joint: bool) -> int:
    """Pairs in SentencePiece's sample: a joint model learns from both sides of each, so half as many."""
    return max(1, (input_sentence_size + 1) // 2) if joint else input_sentence_size
