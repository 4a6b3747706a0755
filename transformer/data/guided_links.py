"""The training split's word alignments, for guided alignment training: the prepared pairs' words (their pieces
merged, lower-cased) go to the aligner in chunks of consecutive rows, and each word link becomes the links between
the two words' pieces. Chunks are written one Arrow file each under the prepared folder, so a killed run goes on
where it stopped and every later run reuses them.

A pair's links are one list of piece positions, (target, source) after one another: target position t is the
t-th target piece (the step that predicts it), source position s the s-th source piece as the model reads it.
"""

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from transformer.core.errors import UserError
from transformer.core.files import atomic_write
from transformer.core.locks import exclusive
from transformer.data.tokenizer import WORD_START, word_index
from transformer.data.word_links import Links, eflomal_links

if TYPE_CHECKING:
    import datasets

    from transformer.data.preparation import PreparedData

log = logging.getLogger(__name__)

ALIGNERS = ("eflomal",)


def pieces_to_words(pieces: list[str]) -> tuple[str, list[int]]:
    """A tokenized sentence as lower-cased words separated by spaces, and the word (`word_index`; -1: a tag before
    the first word) of each piece."""
    of = word_index(pieces)
    words = [""] * (max(of, default=-1) + 1)
    for piece, word in zip(pieces, of):
        if word >= 0:
            words[word] += piece.removeprefix(WORD_START)
    return " ".join(w.lower() or WORD_START for w in words), of


def piece_links(links: Links, src_of: list[int], tgt_of: list[int]) -> list[int]:
    """Word links as piece links, flattened: (t, s) for every target piece t of word j and source piece s of word
    i, for each link (i, j)."""
    src_pieces: dict[int, list[int]] = {}
    for s, word in enumerate(src_of):
        src_pieces.setdefault(word, []).append(s)
    out = []
    for t, word in enumerate(tgt_of):
        for i in sorted(i for i, j in links if j == word):
            for s in src_pieces.get(i, []):
                out += (t, s)
    return out


def _chunk_links(ds: "datasets.Dataset", start: int, stop: int, tables: tuple[list[str], list[str]]) -> pa.Table:
    """Piece links of rows [start, stop) of the training split."""
    rows = ds.select_columns(["src_ids", "tgt_ids"])[start:stop]
    src = [pieces_to_words([tables[0][i] for i in ids]) for ids in rows["src_ids"]]
    tgt = [pieces_to_words([tables[1][i] for i in ids]) for ids in rows["tgt_ids"]]
    links = eflomal_links((text for text, _ in src), (text for text, _ in tgt))
    flat = [piece_links(pair, s_of, t_of) for pair, (_, s_of), (_, t_of) in zip(links, src, tgt)]
    return pa.table({"links": pa.array(flat, type=pa.list_(pa.uint16()))})


def _write(table: pa.Table, path: Path) -> None:
    def write(tmp: Path) -> None:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)

    atomic_write(path, write)


def links_folder(prepared: "PreparedData", aligner: str, chunk_pairs: int) -> Path:
    """Where the links of `prepared`'s training split by `aligner` in chunks of `chunk_pairs` lie."""
    key = json.dumps({"aligner": aligner, "chunk_pairs": chunk_pairs, "layout": 1}, sort_keys=True)
    return prepared.dir / "alignments" / f"{aligner}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def prepare_links(prepared: "PreparedData", aligner: str, chunk_pairs: int) -> Path:
    """Align the training split of `prepared` (or reuse what an earlier run aligned); returns the links' folder."""
    if aligner not in ALIGNERS:
        raise UserError(f"data.word_alignment={aligner!r} is not an aligner; choose one of {', '.join(ALIGNERS)}")
    if chunk_pairs < 1:
        raise UserError("data.word_alignment_chunk must be at least 1 pair")
    folder = links_folder(prepared, aligner, chunk_pairs)
    ds = prepared.split(prepared.meta["train"])
    starts = list(range(0, len(ds), chunk_pairs))
    tables = (prepared.tokenizer.piece_table("src"), prepared.tokenizer.piece_table("tgt"))
    folder.mkdir(parents=True, exist_ok=True)
    with exclusive(folder / ".lock"):
        for k, start in enumerate(starts):
            path = folder / f"part-{k:05d}.arrow"
            if path.exists():
                continue
            began, stop = time.perf_counter(), min(start + chunk_pairs, len(ds))
            _write(_chunk_links(ds, start, stop, tables), path)
            seconds = time.perf_counter() - began
            log.info(
                "word alignments (%s): chunk %d of %d, %d pairs, %.0f s",
                aligner,
                k + 1,
                len(starts),
                stop - start,
                seconds,
            )
    log.info("word alignments of %d training pairs in %s", len(ds), folder)
    return folder


def read_links(folder: Path, pairs: int) -> pa.ChunkedArray:
    """The links column of a folder `prepare_links` wrote, one row per training pair (memory-mapped)."""
    chunks = []
    for path in sorted(folder.glob("part-*.arrow")):
        with pa.memory_map(str(path)) as source:
            chunks.extend(pa.ipc.open_stream(source).read_all().column("links").chunks)
    column = pa.chunked_array(chunks, type=pa.list_(pa.uint16()))
    if len(column) != pairs:
        raise UserError(
            f"the word alignments in {folder} cover {len(column)} pairs, not {pairs}; delete that folder and run again"
        )
    return column
