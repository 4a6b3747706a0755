"""The first pass over a training corpus: the text rules of cleaning and SentencePiece's sample, shard by shard.

Each shard of pairs leaves, in the corpus's work folder, its pairs' 64-bit fingerprints and text flags
(`screen-NNNNN.npz`) and which of its pairs are in SentencePiece's sample so far (`sample-NNNNN.npz`: their keys and
rows, never their text). The sample is a bottom-k sample held in memory, its text as UTF-8 blocks: the pairs with
the k lowest keys, a key being a mix of the fingerprint, so equal pairs are one candidate and the sample does not
depend on the sharding. A kill loses at most the shard in flight; `Screen.run` run again reads past the finished
shards, offering the sample again the pairs each held when it was finished, and goes on. Once every shard is
screened, `Screen.keep` finds each corpus's repeats (the first of equal pairs stays) a slice of fingerprints at a time
and writes which pairs the text rules keep.
"""

import json
import operator
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import compress
from pathlib import Path

import numpy as np
from tqdm import tqdm

from transformer.core.config import CleanConfig
from transformer.core.files import atomic_write_text
from transformer.data.cleaning import CleaningReport, keep_mask
from transformer.data.sources.base import PairReader

CHUNK = 20_000  # pairs read and flagged at a time
SLICE = 1_000_000  # fingerprints sorted at a time when finding repeats


def fingerprints(srcs: list[bytes], tgts: list[bytes]) -> np.ndarray:
    """A 64-bit fingerprint per pair of UTF-8 sides: CRC-32 of the source, then of the target (equal pairs, equal
    fingerprints)."""
    src, tgt = (np.fromiter(map(zlib.crc32, side), np.uint64, len(side)) for side in (srcs, tgts))
    return (src << np.uint64(32)) | tgt


def sample_keys(digests: np.ndarray) -> np.ndarray:
    """Pseudo-random keys from fingerprints (splitmix64's finaliser): pairs that share a source get unrelated keys."""
    with np.errstate(over="ignore"):
        z = digests.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def sample_size(input_sentence_size: int, joint: bool) -> int:
    """Pairs in SentencePiece's sample: a joint model learns from both sides of each, so half as many."""
    return max(1, (input_sentence_size + 1) // 2) if joint else input_sentence_size


class Texts:
    """One side of the sample's pairs as UTF-8, a block per offer with where each sentence ends: a few bytes over the
    text per pair, where a Python string costs 50-75 more and fragments the heap as pairs come and go."""

    def __init__(self):
        self.blocks: list[tuple[np.ndarray, np.ndarray]] = []  # (bytes as uint8, each sentence's end)

    def __len__(self) -> int:
        return sum(len(ends) for _, ends in self.blocks)

    def add(self, sentences: list[bytes]) -> None:
        """A block of sentences (UTF-8)."""
        ends = np.cumsum(np.fromiter(map(len, sentences), np.int64, len(sentences)))
        self.blocks.append((np.frombuffer(b"".join(sentences), np.uint8), ends))

    def keep(self, mask: np.ndarray) -> None:
        """Keep the sentences where `mask` (a bool per sentence, in order) holds, block by block in place: the
        memory never holds a second copy of the text."""
        start = 0
        for i, (data, ends) in enumerate(self.blocks):
            mine, start = mask[start : start + len(ends)], start + len(ends)
            if not mine.all():
                lengths = np.diff(ends, prepend=0)
                self.blocks[i] = data[np.repeat(mine, lengths)], np.cumsum(lengths[mine])
        self.blocks = [block for block in self.blocks if len(block[1])]

    def drain(self) -> Iterator[str]:
        """The sentences in order, each block let go once read (SentencePiece copies what it reads)."""
        while self.blocks:
            data, ends = self.blocks.pop(0)
            text, start = data.tobytes(), 0
            del data
            for end in ends.tolist():
                yield text[start:end].decode()
                start = end


class Sample:
    """SentencePiece's sample of every training corpus: the `k` pairs with the lowest keys offered so far, each key
    once, with where each lies (corpus, row). Keys and places are arrays, the text of each side one `Texts`."""

    def __init__(self, k: int):
        self.k, self.threshold = k, np.uint64(2**64 - 1)
        self.keys, self.corpus, self.rows = np.zeros(0, np.uint64), np.zeros(0, np.int16), np.zeros(0, np.int64)
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # offered since the last `gather`
        self.src, self.tgt = Texts(), Texts()

    def __len__(self) -> int:
        return len(self.keys) + sum(len(keys) for keys, _, _ in self.parts)

    def offer(self, keys: np.ndarray, srcs: list[bytes], tgts: list[bytes], corpus: int, rows: np.ndarray) -> None:
        """Take the pairs whose key is below the threshold (keys, UTF-8 sides and rows aligned)."""
        take = np.flatnonzero(keys < self.threshold)
        if len(take):
            self.parts.append((keys[take], np.full(len(take), corpus, np.int16), rows[take]))
            self.src.add([srcs[i] for i in take])
            self.tgt.add([tgts[i] for i in take])
        if len(self) > self.k + self.k // 8:
            self.prune()

    def gather(self) -> None:
        """Join what was offered since the last call to the arrays."""
        if self.parts:
            self.keys, self.corpus, self.rows = (
                np.concatenate([whole, *(part[i] for part in self.parts)])
                for i, whole in enumerate((self.keys, self.corpus, self.rows))
            )
            self.parts = []

    def prune(self) -> None:
        """Keep the `k` lowest distinct keys (the threshold becomes the highest of them once there are `k`)."""
        self.gather()
        order = np.argsort(self.keys, kind="stable")
        _, first = np.unique(self.keys[order], return_index=True)
        kept = np.zeros(len(self.keys), dtype=bool)
        kept[order[first][: self.k]] = True
        self.keys, self.corpus, self.rows = self.keys[kept], self.corpus[kept], self.rows[kept]
        self.src.keep(kept), self.tgt.keep(kept)
        if len(self.keys) == self.k:
            self.threshold = self.keys.max()

    def rows_of(self, corpus: int, rows: np.ndarray) -> np.ndarray:
        """Which of `rows` (of `corpus`) the sample holds now."""
        self.gather()
        return rows[np.isin(rows, self.rows[self.corpus == corpus])]

    def drained(self) -> tuple[Iterator[str], Iterator[str]]:
        """The sampled sources and targets, each block let go once it is read."""
        self.prune()
        return self.src.drain(), self.tgt.drain()


@dataclass
class Screened:
    """What screening a corpus found: pairs read (the source's skips apart), the source's skips by reason."""

    pairs: int
    skipped: dict[str, int]


class Screen:
    """The screening of corpus number `corpus` in `folder`, `shard_pairs` pairs per shard."""

    def __init__(self, folder: Path, shard_pairs: int, corpus: int):
        self.folder, self.shard_pairs, self.corpus = folder, shard_pairs, corpus
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

    def run(self, pairs: PairReader, skipped, evals: tuple[set, set], name: str, sample: Sample | None):
        """Screen the pairs of one corpus, offering them to `sample` (None: none wanted); resumes after the finished
        shards, reading them again for their sampled pairs' text. `skipped` counts the source's skips."""
        start = self.finished_shards() if self.done is None else None
        with tqdm(desc=f"screening {name}", unit=" pairs", mininterval=1.0, leave=False) as bar:
            self._reread(pairs, start, sample, bar)
            if start is not None:
                shard = start
                while self._shard(pairs, shard, evals, sample, bar) == self.shard_pairs:
                    shard += 1
                atomic_write_text(self.folder / "screened.json", json.dumps({"pairs": bar.n, "skipped": dict(skipped)}))
        return self.done

    def _reread(self, pairs, shards: int | None, sample: Sample | None, bar) -> None:
        """Read the first `shards` finished shards again (all of them when None), offering `sample` the pairs they
        held when each was finished, a superset of those it would hold now; without a sample, only the first `shards`
        shards are skipped (none when all are finished)."""
        paths = sorted(self.folder.glob("sample-*.npz"))[:shards]
        if sample is None:
            bar.update(pairs.skip((shards or 0) * self.shard_pairs))
            return
        stored = [np.load(path) for path in paths]
        keys, rows = (
            np.concatenate([np.zeros(0, dtype), *(p[name] for p in stored)])
            for name, dtype in (("keys", np.uint64), ("rows", np.int64))
        )  # rows ascending: shard after shard
        read, finished = 0, len(paths) * self.shard_pairs
        while read < finished and (chunk := pairs.take(min(CHUNK, finished - read)))[0]:
            mine = slice(*np.searchsorted(rows, [read, read + len(chunk[0])]))
            picked = [[side[row - read].encode() for row in rows[mine].tolist()] for side in chunk]
            sample.offer(keys[mine], *picked, self.corpus, rows[mine])
            read += len(chunk[0])
        bar.update(read)

    def _shard(self, pairs, shard: int, evals: tuple[set, set], sample: Sample | None, bar) -> int:
        """Screen up to `shard_pairs` pairs into shard `shard`; returns the pairs read."""
        digests, equal, overlap, sampled = [], [], [], []
        eval_src, eval_tgt = evals
        first = shard * self.shard_pairs
        while (n := sum(map(len, digests))) < self.shard_pairs:
            srcs, tgts = pairs.take(min(CHUNK, self.shard_pairs - n))
            if not srcs:
                break
            encoded = [list(map(str.encode, side)) for side in (srcs, tgts)]
            d = fingerprints(*encoded)
            eq = np.fromiter(map(operator.eq, srcs, tgts), dtype=bool, count=len(srcs))
            ov = np.fromiter(map(eval_src.__contains__, srcs), dtype=bool, count=len(srcs))
            ov |= np.fromiter(map(eval_tgt.__contains__, tgts), dtype=bool, count=len(srcs))
            digests.append(d), equal.append(eq), overlap.append(ov)
            if sample is not None:
                rows, keys = np.arange(first + n, first + n + len(srcs)), sample_keys(d)
                eligible = ~eq & ~ov
                picked = [list(compress(side, eligible)) for side in encoded]
                sample.offer(keys[eligible], *picked, self.corpus, rows[eligible])
                sampled.append((keys[eligible], rows[eligible]))
            bar.update(len(srcs))
        n = sum(map(len, digests))
        if n == 0 and shard > 0:
            return 0
        self._save(shard, digests, equal, overlap, sampled, sample)
        return n

    def _save(self, shard: int, digests, equal, overlap, sampled, sample: Sample | None) -> None:
        """Shard `shard`'s flags, then its pairs the sample holds now (the shard counts as finished once both are)."""
        if sample is not None:
            keys = np.concatenate([np.zeros(0, np.uint64), *(k for k, _ in sampled)])
            rows = np.concatenate([np.zeros(0, np.int64), *(r for _, r in sampled)])
            held = np.isin(rows, sample.rows_of(self.corpus, rows))
            _save_npz(self.folder / f"sample-{shard:05d}.npz", keys=keys[held], rows=rows[held])
        arrays = {"digests": digests, "equal": equal, "overlap": overlap}
        _save_npz(self.folder / f"screen-{shard:05d}.npz", **{k: np.concatenate(v) for k, v in arrays.items()})

    def keep(self, clean: CleanConfig, report: CleaningReport) -> None:
        """Decide the text rules over the whole corpus: write `keep-NNNNN.npy` (the pairs they keep) per shard and
        count what each drops in `report`."""
        paths = sorted(self.folder.glob("screen-*.npz"))
        sizes = [len(np.load(path)["equal"]) for path in paths]
        duplicate = self._repeats(paths, sizes) if clean.duplicates else np.zeros(sum(sizes), dtype=bool)
        for shard, (path, start) in enumerate(zip(paths, np.cumsum([0, *sizes]))):
            flags = np.load(path)
            text = {
                "duplicate": duplicate[start : start + len(flags["equal"])],
                "equal sides": flags["equal"] & clean.equal_sides,
                "eval overlap": flags["overlap"] & clean.eval_overlap,
            }
            np.save(self.folder / f"keep-{shard:05d}.npy", keep_mask(text, report))

    def _repeats(self, paths: list[Path], sizes: list[int]) -> np.ndarray:
        """Each pair that repeats an earlier pair of the corpus (a bool per pair), found one slice of fingerprints at a
        time (by their value), so the memory it takes does not grow with the corpus."""
        duplicate = np.zeros(sum(sizes), dtype=bool)
        slices = max(1, -(-sum(sizes) // SLICE))
        for part in range(slices):
            digests, rows = [], []
            for path, start in zip(paths, np.cumsum([0, *sizes])):
                d = np.load(path)["digests"]
                mine = np.flatnonzero((d >> np.uint64(32)) % np.uint64(slices) == part)
                digests.append(d[mine]), rows.append(mine + start)
            d, r = np.concatenate(digests), np.concatenate(rows)
            order = np.argsort(d, kind="stable")  # equal fingerprints: the earliest row first
            d = d[order]
            duplicate[r[order[1:][d[1:] == d[:-1]]]] = True
        return duplicate

    def kept(self, shard: int) -> np.ndarray:
        """Which pairs of shard `shard` the text rules keep (bool per pair)."""
        return np.load(self.folder / f"keep-{shard:05d}.npy")


def _save_npz(path: Path, **arrays: np.ndarray) -> None:
    """Write arrays to `path` (.npz) through a temporary name, so a kill leaves the file whole or absent."""
    tmp = path.with_name(f".{path.stem}.tmp.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)
