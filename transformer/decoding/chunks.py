"""Translating a stream of lines in chunks, in input order, resumable into an output file.

`translate_in_chunks` reads `chunk_lines` lines at a time, has each chunk translated (batching by length happens
inside a chunk) and hands the text to a sink before it reads the next chunk: memory holds one chunk, whatever the
number of lines. A `StreamSink` writes each chunk to a stream (stdout) and flushes it; a `ChunkFolder` keeps each
finished chunk as files written atomically, beside a record of the lines it was translated from, and a rerun skips
a chunk whose lines are the same: a killed run continues after its last finished chunk and ends with the output of
an uninterrupted one (sampling draws each chunk from its own seed, `chunk_seed`). A chunk whose lines changed is
translated again. `ChunkedFile` builds one output file so (`transformer-translate output=FILE`);
`transformer.recipe.backtranslation` keeps its chunks in its own folder.
"""

import hashlib
import itertools
import json
import logging
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

import numpy as np
from tqdm import tqdm

from transformer.core.files import atomic_write, atomic_write_text
from transformer.core.locks import RUN_LOCK, lock_run_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Chunk:
    """`lines[i]` is input line `start + i + 1`; chunk `index` counts from 0."""

    index: int
    start: int
    lines: list[str]


class ChunkSink(Protocol):
    """Where translated chunks go, in order."""

    def finished(self, chunk: Chunk) -> bool:
        """Whether `chunk` was translated before from these same lines (then it is not translated again)."""

    def write(self, chunk: Chunk, text: str) -> None:
        """Keep the translation `text` of `chunk` (its output lines, each ending in a newline)."""


@dataclass
class ChunkCounts:
    """What `translate_in_chunks` went through: chunks and lines, and the lines of finished chunks it skipped."""

    chunks: int = 0
    lines: int = 0
    skipped: int = 0

    @property
    def translated(self) -> int:
        return self.lines - self.skipped


def chunk_seed(seed: int, chunk: int) -> int:
    """The sampling seed of one chunk: the same for a chunk whether or not the run was interrupted before it."""
    return int(np.random.SeedSequence([seed, chunk]).generate_state(1)[0])


def show_progress(setting: bool | None) -> bool:
    """A progress bar's setting: True or False as given; None (the default) when stderr is a terminal."""
    return sys.stderr.isatty() if setting is None else setting


def batched(items: Iterable[str], size: int) -> Iterator[list[str]]:
    """`items` in lists of `size` (the last one shorter), read lazily."""
    iterator = iter(items)
    while part := list(itertools.islice(iterator, size)):
        yield part


def translate_in_chunks(
    lines: Iterable[str],
    translate: Callable[[Chunk, tqdm], str],
    sink: ChunkSink,
    chunk_lines: int,
    progress: bool = False,
    total: int | None = None,
    desc: str = "translating",
) -> ChunkCounts:
    """Read `lines` `chunk_lines` at a time; give `sink` each chunk's `translate(chunk, bar)` in order, skipping the
    chunks it finished before. `translate` may advance the lines/s `bar` on stderr (shown when `progress`; `total`:
    the number of lines, when known) by up to the chunk's number of lines."""
    counts = ChunkCounts()
    with tqdm(total=total, desc=desc, unit="line", disable=not progress, smoothing=0.1) as bar:
        for index, part in enumerate(batched(lines, chunk_lines)):
            chunk, before = Chunk(index, counts.lines, part), bar.n
            if sink.finished(chunk):
                counts.skipped += len(part)
            else:
                if counts.lines and counts.skipped == counts.lines:
                    log.info("resuming at line %d: the lines before were translated by an earlier run", chunk.start + 1)
                sink.write(chunk, translate(chunk, bar))
            bar.update(len(part) - (bar.n - before))
            counts.chunks, counts.lines = counts.chunks + 1, counts.lines + len(part)
    return counts


class StreamSink:
    """Each chunk written to a text stream and flushed at once, so that a reader sees it before the input ends."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def finished(self, chunk: Chunk) -> bool:
        return False

    def write(self, chunk: Chunk, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


def lines_text(lines: list[str]) -> str:
    """The lines as file text, each ending in a newline."""
    return "".join(line + "\n" for line in lines)


def lines_digest(lines: list[str]) -> str:
    """A digest of the lines (SHA-256), which tells a chunk's input from any other."""
    return hashlib.sha256(lines_text(lines).encode("utf-8", "surrogatepass")).hexdigest()


class ChunkFolder:
    """Finished chunks as files in `folder`: chunk k's record of its input lines `{k:06d}.IN`, then its translation
    `{k:06d}.OUT`, which marks it finished (`suffixes`: (IN, OUT)); each written atomically. `record` makes the
    record's text from a chunk's lines: the lines themselves, or only their digest."""

    def __init__(self, folder: Path, suffixes: tuple[str, str], record: Callable[[list[str]], str]):
        self.folder, self.suffixes, self.record = folder, suffixes, record

    def path(self, index: int, suffix: str) -> Path:
        return self.folder / f"{index:06d}.{suffix}"

    def finished(self, chunk: Chunk) -> bool:
        record, output = (self.path(chunk.index, suffix) for suffix in self.suffixes)
        if not output.is_file():
            return False
        if record.is_file() and record.read_bytes() == self.record(chunk.lines).encode("utf-8", "surrogatepass"):
            return True
        first, last = chunk.start + 1, chunk.start + len(chunk.lines)
        log.warning(
            "lines %d-%d changed since they were translated into %s: translating them again", first, last, output
        )
        return False

    def write(self, chunk: Chunk, text: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path(chunk.index, self.suffixes[0]), self.record(chunk.lines))
        atomic_write_text(self.path(chunk.index, self.suffixes[1]), text)  # last: marks the chunk finished

    def parts(self, suffix: str, count: int) -> Iterator[Path]:
        """The files of chunks 0 to count - 1 with `suffix`, in order."""
        return (self.path(index, suffix) for index in range(count))

    def join(self, suffix: str, count: int, path: Path) -> None:
        """Write the files of chunks 0 to count - 1 with `suffix`, one after the other, to `path` (atomically)."""

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as out:
                for part in self.parts(suffix, count):
                    with open(part, "rb") as f:
                        shutil.copyfileobj(f, out)

        atomic_write(path, write)


class ChunkedFile(ChunkFolder):
    """An output file built chunk by chunk: finished chunks wait in the folder `.NAME.chunks` beside it, with the
    settings that made them (`job.json`), until `finish` joins them into the file (replacing it atomically) and
    removes the folder. A folder left by a run with other settings is emptied (logged): a rerun ends with what an
    uninterrupted run of its own settings writes. One process at a time builds a file."""

    JOB = "job.json"

    def __init__(self, path: Path, job: dict):
        super().__init__(path.parent / f".{path.name}.chunks", ("input", "txt"), lines_digest)
        self.output = path
        lock_run_dir(self.folder, job="translation", elsewhere="another output=FILE")
        recorded = self.folder / self.JOB
        if recorded.is_file() and json.loads(recorded.read_text()) == job:
            return
        stale = [p for p in self.folder.iterdir() if p.name != RUN_LOCK]
        if stale:
            log.warning("%s holds the chunks of a translation with other settings: starting over", self.folder)
        for entry in stale:
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        atomic_write_text(recorded, json.dumps(job, indent=2) + "\n")

    def finish(self, count: int) -> None:
        """Join chunks 0 to count - 1 into the output file, then remove the chunks' folder."""
        self.join(self.suffixes[1], count, self.output)
        shutil.rmtree(self.folder)
