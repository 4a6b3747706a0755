"""Back-translation (Sennrich et al. 2016): monolingual text translated by a reverse model into a synthetic corpus.

A model trained X→Y translates text in X; the output folder holds `train.Y` (its translations, the source side)
and `train.X` (the original text, the target side): a Y→X corpus for `data.extra_train.NAME.dir`. Its manifest
(`backtranslation.json`) records the direction, the model, the decoding, the inputs and the line counts; training
refuses the folder for another direction, or while it is unfinished. The input is read as a stream and the
selected sentences translated in chunks of `chunk_lines` (`decoding.chunks`), each kept under `chunks/` with its
sentences, written atomically; a restarted run skips a chunk already there for the same sentences, and sampling
draws each chunk from its own seed, so an interrupted run ends with the files an uninterrupted one writes. The last
step joins the chunks. Memory holds one chunk and a 16-byte digest per kept sentence (to drop repeats).
"""

import hashlib
import json
import logging
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from transformer.core.errors import UserError
from transformer.core.files import atomic_write_text
from transformer.data.backtranslated import MANIFEST, read_manifest
from transformer.decoding.chunks import Chunk, ChunkFolder, chunk_seed, lines_text

if TYPE_CHECKING:  # the translator's imports (torch) wait until a translation runs
    from transformer.decoding.translator import Translator

log = logging.getLogger(__name__)

CHUNKS = "chunks"


SELECTION_RULES = ("empty", "eval overlap", "in training data", "duplicate")


def _dropped_by(text: str, exclude: set[str], known: frozenset[str] | set[str], seen: set[bytes]) -> str | None:
    """The selection rule that drops the stripped line `text`, or None when it is kept (`seen`: kept lines' keys)."""
    if not text:
        return "empty"
    if text in exclude:
        return "eval overlap"
    if text in known:
        return "in training data"
    return "duplicate" if _key(text) in seen else None


def _key(text: str) -> bytes:
    """What `select_sentences` remembers of a kept line to drop its repeats: a 16-byte digest, not the line."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def select_sentences(
    lines: Iterable[str],
    exclude: set[str],
    known: frozenset[str] | set[str] = frozenset(),
    counts: dict[str, int] | None = None,
) -> Iterator[str]:
    """The lines to translate, in input order, as they are read: stripped, without empty lines, lines in `exclude`
    (val/test references), lines in `known` (the model's own training sentences: no new text) and repeats.
    `counts` gets how many lines were read and dropped by each rule (`SELECTION_RULES`) so far."""
    counts = {} if counts is None else counts
    counts.update({"read": 0, **dict.fromkeys(SELECTION_RULES, 0)})
    seen: set[bytes] = set()
    for line in lines:
        counts["read"] += 1
        text = line.strip()
        rule = _dropped_by(text, exclude, known, seen)
        if rule:
            counts[rule] += 1
            continue
        seen.add(_key(text))
        yield text


def start(folder: Path, job: dict) -> bool:
    """Open `folder` for `job` (its settings): True when the job is already complete. Refuses a folder that
    holds another job, or files that are no back-translation's."""
    manifest = read_manifest(folder)
    if manifest is None:
        if folder.exists() and any(p.name not in ("train.lock", CHUNKS) for p in folder.iterdir()):
            raise UserError(f"output={folder} holds other files; give a new or empty folder")
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / MANIFEST, json.dumps({**job, "complete": False}, indent=2) + "\n")
        return False
    changed = [key for key in job if manifest.get(key) != job[key]]
    if changed:
        raise UserError(
            f"output={folder} holds a back-translation with other settings ({', '.join(changed)}); "
            "give another output folder, or run it with the same settings to continue it"
        )
    return manifest["complete"]


def chunk_folder(folder: Path, langs: tuple[str, str]) -> ChunkFolder:
    """Where finished chunks wait (langs: (translation side, original side)): `chunks/{k:06d}.{original}` holds a
    chunk's sentences, then `chunks/{k:06d}.{translation}` their translations."""
    return ChunkFolder(folder / CHUNKS, (langs[1], langs[0]), lines_text)


def translate_chunk(translator: "Translator", chunk: Chunk, bar: tqdm) -> str:
    """The best translation of each sentence of `chunk` ('' where none: too long for the model), one per line."""
    generator = translator.generator(chunk_seed(translator.cfg.seed, chunk.index))
    results = translator.search(chunk.lines, generator=generator, bar=bar)
    found = [hyps[0] for _, hyps in results if hyps]
    texts = iter(translator.detokenize(found))
    return lines_text([next(texts) if hyps else "" for _, hyps in results])


def _empty_lines(path: Path) -> int:
    # bytes decoded, not read_text: its universal newlines would turn a carriage return inside a line into a line
    return path.read_bytes().decode("utf-8").split("\n")[:-1].count("")


def finish(folder: Path, job: dict, langs: tuple[str, str], chunks: int, counts: dict[str, int]) -> None:
    """Join the first `chunks` chunks into `train.{lang}`, record the counts and completion in the manifest, drop
    the chunks."""
    parts = chunk_folder(folder, langs)
    for lang in langs:
        parts.join(lang, chunks, folder / f"train.{lang}")
    untranslated = sum(_empty_lines(path) for path in parts.parts(langs[0], chunks))
    lines = {**counts, "untranslated": untranslated}
    atomic_write_text(folder / MANIFEST, json.dumps({**job, "lines": lines, "complete": True}, indent=2) + "\n")
    if parts.folder.exists():
        shutil.rmtree(parts.folder)
