"""Back-translation (Sennrich et al. 2016): monolingual text translated by a reverse model into a synthetic corpus.

A model trained X→Y translates text in X; the output folder holds `train.Y` (its translations, the source side)
and `train.X` (the original text, the target side): a Y→X corpus for `data.extra_train.NAME.dir`. Its manifest
(`backtranslation.json`) records the direction, the model, the decoding, the inputs and the line counts; training
refuses the folder for another direction, or while it is unfinished. The selected sentences are translated in
chunks of `chunk_lines`, each written atomically under `chunks/`; a restarted run skips the chunks already there,
and sampling draws each chunk from its own seed, so an interrupted run ends with the files an uninterrupted one
writes. The last step joins the chunks.
"""

import json
import logging
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tqdm import tqdm

from transformer.errors import UserError
from transformer.files import atomic_write_text

if TYPE_CHECKING:  # the translator's imports (torch) stay out of the data path, which reads manifests only
    from transformer.translator import Translator

log = logging.getLogger(__name__)

MANIFEST = "backtranslation.json"
CHUNKS = "chunks"


SELECTION_RULES = ("empty", "eval overlap", "in training data", "duplicate")


def _dropped_by(text: str, exclude: set[str], known: frozenset[str] | set[str], seen: set[str]) -> str | None:
    """The selection rule that drops the stripped line `text`, or None when it is kept."""
    if not text:
        return "empty"
    if text in exclude:
        return "eval overlap"
    if text in known:
        return "in training data"
    return "duplicate" if text in seen else None


def select_sentences(
    lines: Iterable[str], exclude: set[str], known: frozenset[str] | set[str] = frozenset()
) -> tuple[list[str], dict[str, int]]:
    """The lines to translate, in input order: stripped, without empty lines, lines in `exclude` (val/test
    references), lines in `known` (the model's own training sentences: no new text) and repeats; and how many lines
    were read and dropped by each rule (`SELECTION_RULES`)."""
    kept, seen = [], set()
    counts = {"read": 0, **dict.fromkeys(SELECTION_RULES, 0)}
    for line in lines:
        counts["read"] += 1
        text = line.strip()
        rule = _dropped_by(text, exclude, known, seen)
        if rule:
            counts[rule] += 1
            continue
        seen.add(text)
        kept.append(text)
    return kept, counts


def read_manifest(folder: Path) -> dict | None:
    """The manifest of a back-translation folder, or None when the folder holds none."""
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise UserError(
            f"{path} cannot be read ({err}); run transformer-backtranslate again into a new folder"
        ) from None


def check_corpus_folder(folder: Path, src_lang: str, tgt_lang: str, key: str) -> None:
    """Refuse a back-translation folder for another direction than src_lang→tgt_lang, or one not finished."""
    manifest = read_manifest(folder)
    if manifest is None:
        return
    made = f"{manifest['src_lang']}→{manifest['tgt_lang']}"
    if made != f"{src_lang}→{tgt_lang}":
        raise UserError(
            f"{key}={folder} is a back-translated {made} corpus but this run trains {src_lang}→{tgt_lang}; "
            f"back-translate {tgt_lang} text with a {tgt_lang}→{src_lang} model instead"
        )
    if not manifest["complete"]:
        raise UserError(f"{key}={folder} is an unfinished back-translation; run transformer-backtranslate again")


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


def chunk_seed(seed: int, chunk: int) -> int:
    """The sampling seed of one chunk: the same for a chunk whether or not the run was interrupted before it."""
    return int(np.random.SeedSequence([seed, chunk]).generate_state(1)[0])


def _chunk_files(folder: Path, chunk: int, langs: tuple[str, str]) -> tuple[Path, Path]:
    return folder / CHUNKS / f"{chunk:06d}.{langs[0]}", folder / CHUNKS / f"{chunk:06d}.{langs[1]}"


def _translate(translator: "Translator", sentences: list[str], seed: int, bar: tqdm) -> list[str]:
    """The best translation of each sentence ('' where none: too long for the model)."""
    results = translator.search(sentences, generator=translator.generator(seed), bar=bar)
    found = [hyps[0] for _, hyps in results if hyps]
    texts = iter(translator.detokenize(found))
    return [next(texts) if hyps else "" for _, hyps in results]


def translate_chunks(
    translator: "Translator", sentences: list[str], folder: Path, chunk_lines: int, langs: tuple[str, str]
) -> int:
    """Translate every chunk not yet in `folder/chunks` (langs: (translation side, original side)); return how
    many sentences this call translated."""
    chunks = range(0, len(sentences), chunk_lines)
    todo = [k for k, _ in enumerate(chunks) if not _chunk_files(folder, k, langs)[0].is_file()]
    done = len(sentences) - sum(len(sentences[k * chunk_lines : (k + 1) * chunk_lines]) for k in todo)
    if done:
        log.info("resuming: %d of %d sentences were back-translated before", done, len(sentences))
    (folder / CHUNKS).mkdir(exist_ok=True)
    with tqdm(total=len(sentences), initial=done, desc="back-translating", unit="sent", smoothing=0.1) as bar:
        for k in todo:
            part = sentences[k * chunk_lines : (k + 1) * chunk_lines]
            translations = _translate(translator, part, chunk_seed(translator.cfg.seed, k), bar)
            synthetic, original = _chunk_files(folder, k, langs)
            atomic_write_text(original, "".join(s + "\n" for s in part))
            atomic_write_text(synthetic, "".join(t + "\n" for t in translations))  # last: marks the chunk done
    return len(sentences) - done


def finish(folder: Path, job: dict, langs: tuple[str, str], counts: dict[str, int]) -> None:
    """Join the chunks into `train.{lang}`, record the counts and completion in the manifest, drop the chunks."""
    paths = sorted((folder / CHUNKS).glob(f"*.{langs[0]}"))
    untranslated = 0
    for lang in langs:
        # bytes decoded, not read_text: its universal newlines would turn a carriage return inside a line into a line
        parts = [path.with_suffix(f".{lang}").read_bytes().decode("utf-8") for path in paths]
        if lang == langs[0]:
            untranslated = sum(line == "" for part in parts for line in part.split("\n")[:-1])
        atomic_write_text(folder / f"train.{lang}", "".join(parts))
    lines = {**counts, "untranslated": untranslated}
    atomic_write_text(folder / MANIFEST, json.dumps({**job, "lines": lines, "complete": True}, indent=2) + "\n")
    shutil.rmtree(folder / CHUNKS)
