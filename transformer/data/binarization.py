"""The second pass over a training corpus: the pairs screening kept, tokenized into Arrow shards of ids.

SentencePiece encodes each chunk on `threads` threads while the next chunk is read (it releases the GIL); the token
rules of cleaning (too long, ratio) drop pairs as they are written. Shard `n` of the corpus holds what shard `n` of
its screening kept, so a kill loses at most the shard in flight and a rerun goes on after the finished ones.
"""

import json
from itertools import compress
from pathlib import Path

import numpy as np
import pyarrow as pa
from tqdm import tqdm

from transformer.core.files import atomic_write_text
from transformer.core.memory import release_free_memory
from transformer.data.cleaning import CleaningReport, keep_mask, token_flags
from transformer.data.noise import noised_batch
from transformer.data.screening import CHUNK, Screen
from transformer.data.shards import SHARD, id_column, id_type, shard_paths, write_shard
from transformer.data.sources.base import PairReader
from transformer.data.tokenizer import Tokenizer


class Encoder:
    """Tokenizes sentence pairs into id columns: the source's with `tag` first, in the vocabulary's id type."""

    def __init__(self, tokenizer: Tokenizer, tag: str, threads: int, text: bool):
        self.tokenizer, self.tag, self.threads, self.text = tokenizer, tag, threads, text
        self.tag_len = len(tokenizer.tag_prefix(tag))
        self.kinds = id_type(tokenizer.src_vocab_size), id_type(tokenizer.tgt_vocab_size)

    def encode(self, srcs: list[str], tgts: list[str]) -> dict[str, np.ndarray]:
        """Lengths (without EOS) and flat ids of both sides, and the text when it is kept."""
        part = {}
        for side, sentences, kind in (("src", srcs, self.kinds[0]), ("tgt", tgts, self.kinds[1])):
            tag = self.tag if side == "src" else ""
            lengths, values = self.tokenizer.encode_arrays(sentences, side, tag, self.threads)
            part[f"{side}_len"], part[f"{side}_values"] = lengths, values.astype(kind.to_pandas_dtype())
        if self.text:
            part["src"], part["tgt"] = np.array(srcs, dtype=object), np.array(tgts, dtype=object)
        return part

    def columns(self, parts: list[dict[str, np.ndarray]], keep: np.ndarray | None = None) -> dict[str, pa.Array]:
        """The shard's Arrow columns from encoded chunks, only the pairs `keep` marks (all when None)."""
        src_len, tgt_len = (np.concatenate([p[f"{s}_len"] for p in parts]) for s in ("src", "tgt"))
        columns = {}
        for side, lengths, kind in (("src", src_len, self.kinds[0]), ("tgt", tgt_len, self.kinds[1])):
            values = np.concatenate([p[f"{side}_values"] for p in parts])
            if keep is not None:
                values, lengths = values[np.repeat(keep, lengths)], lengths[keep]
            if self.text:
                text = np.concatenate([p[side] for p in parts])
                columns[side] = pa.array(list(text if keep is None else text[keep]), type=pa.string())
            columns[f"{side}_ids"] = id_column(lengths, values, kind)
            columns[f"{side}_len"] = pa.array(lengths.astype(np.uint16 if lengths.max(initial=0) < 2**16 else np.int32))
        return columns


def binarize(
    pairs: PairReader,
    screen: Screen,
    out: Path,
    encoder: Encoder,
    limits: tuple[int, float],
    noise: float,
    name: str,
) -> tuple[CleaningReport, int]:
    """Tokenize the pairs screening kept into `out/shard-NNNNN.arrow` (resuming after the finished shards); returns
    what the token rules dropped (`limits`: max_len and max_ratio) and the ids written. With `noise`, sources are
    noised first."""
    out.mkdir(parents=True, exist_ok=True)
    shards, size = screen.finished_shards(), screen.shard_pairs
    done = len(shard_paths(out))
    pairs.skip(done * size)
    total = screen.done.pairs
    with tqdm(
        desc=f"tokenizing {name}",
        unit=" pairs",
        total=total,
        initial=min(total, done * size),
        mininterval=1.0,
        leave=False,
    ) as bar:
        for shard in range(done, shards):
            kept = screen.kept(shard)
            parts = []
            for start in range(0, len(kept), CHUNK):
                mask = kept[start : start + CHUNK]
                srcs, tgts = (list(compress(side, mask)) for side in pairs.take(len(mask)))
                bar.update(len(mask))
                if not srcs:
                    continue
                if noise:
                    rows = np.flatnonzero(mask) + shard * size + start
                    srcs = noised_batch({"src": srcs}, rows.tolist(), noise)["src"]
                parts.append(encoder.encode(srcs, tgts))
            _write(out, shard, parts, encoder, limits)
            del parts
            release_free_memory()  # a shard's arrays differ in size from the next's: no heap grows shard by shard
    return token_report(out)


def _write(out: Path, shard: int, parts: list[dict], encoder: Encoder, limits: tuple[int, float]) -> None:
    """Shard `shard`: the encoded pairs the token rules keep, and its counts beside it (written first)."""
    report = CleaningReport(0)
    if parts:
        src_len, tgt_len = (np.concatenate([p[f"{s}_len"] for p in parts]) for s in ("src", "tgt"))
        flags = token_flags(src_len - encoder.tag_len, tgt_len, encoder.tag_len, *limits)
        keep = keep_mask(flags, report)
        columns = encoder.columns(parts, None if keep.all() else keep)
    else:
        columns = encoder.columns([encoder.encode([], [])])
    tokens = sum(len(columns[f"{side}_ids"].values) for side in ("src", "tgt"))
    atomic_write_text(out / f"counts-{shard:05d}.json", json.dumps({"dropped": report.dropped, "tokens": tokens}))
    write_shard(out / SHARD.format(shard), columns)


def token_report(out: Path) -> tuple[CleaningReport, int]:
    """What the token rules dropped over every shard of `out`, and the ids (both sides) the shards hold."""
    report, tokens = CleaningReport(0), 0
    for path in sorted(out.glob("counts-*.json")):
        counts = json.loads(path.read_text())
        tokens += counts["tokens"]
        for rule, n in counts["dropped"].items():
            report.dropped[rule] = report.dropped.get(rule, 0) + n
    return report, tokens
