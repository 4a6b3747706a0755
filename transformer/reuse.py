"""A training corpus's shards found in another prepared folder, linked instead of screened and tokenized again.

A corpus's key hashes everything its shards depend on: the tokenizer's model bytes, the corpus's source (settings,
content fingerprint, direction), tag and noise, and the settings every corpus shares (layout, languages, cleaning,
max_len, shard size, text columns, and the val and test sets for the eval-overlap rule). Repeats are found within a
corpus and the tokenizer's sample is in its bytes, so no other corpus enters the key: adding an extra corpus leaves
the others' keys as they were. Each complete prepared folder keeps its corpora's keys in meta.json.
"""

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass, fields
from pathlib import Path

from transformer.cleaning import CleaningReport
from transformer.config import SourceConfig
from transformer.corpus import TrainingCorpus
from transformer.sources import Source
from transformer.tokenizer import Tokenizer

log = logging.getLogger(__name__)


def models_digest(tokenizer: Tokenizer) -> str:
    """The SHA-256 of the tokenizer's SentencePiece model(s)."""
    return hashlib.sha256(tokenizer.src_model + b"\0" + tokenizer.tgt_model).hexdigest()


def source_identity(source: Source) -> dict:
    """What determines the pairs a source yields: its format, settings, languages, direction and content."""
    settings = {f.name: getattr(source.cfg, f.name) for f in fields(SourceConfig)}
    return {
        "format": type(source).__name__,
        "settings": settings,
        "langs": list(source.langs),
        "swapped": source.swapped,
        "content": source.fingerprint(),
    }


def corpus_key(shared: dict, corpus: TrainingCorpus) -> str:
    """The key of `corpus`'s shards given the `shared` settings (tokenizer digest included); its name and weight
    are no part of it."""
    own = {"source": source_identity(corpus.source), "tag": corpus.tag, "noise": corpus.noise}
    text = json.dumps({"shared": shared, "corpus": own}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class PreparedCorpus:
    """A training corpus in a complete prepared folder: its shard folder and its cleaning counts (meta.json's)."""

    folder: Path
    cleaning: dict[str, int]

    def report(self) -> CleaningReport:
        """Its cleaning counts: pairs read, and those every rule dropped (the token rules' included)."""
        dropped = dict(self.cleaning)
        return CleaningReport(dropped.pop("read"), dropped)


def prepared_corpora(prepared_dir: Path) -> dict[str, PreparedCorpus]:
    """Key -> every training corpus in the complete prepared folders below `prepared_dir` (a folder whose
    meta.json cannot be read is passed over)."""
    found: dict[str, PreparedCorpus] = {}
    for meta_path in sorted(prepared_dir.glob("*/meta.json")):
        if meta_path.parent.name.startswith("."):
            continue
        try:
            meta = json.loads(meta_path.read_text())
            for entry in meta["corpora"]:
                if "key" in entry:
                    folder = meta_path.parent / meta["train"] / entry["folder"]
                    found.setdefault(entry["key"], PreparedCorpus(folder, entry["cleaning"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def link_shards(source: Path, target: Path) -> None:
    """Put the shards and counts of `source` into `target`: hard links where the filesystem allows, else copies,
    each through a temporary name (a kill leaves whole files; counts come before their shard, as they are written).
    Raises FileNotFoundError when `source` went away meanwhile."""
    target.mkdir(parents=True, exist_ok=True)
    files = sorted([*source.glob("counts-*.json"), *source.glob("shard-*.arrow")])
    if not files:
        raise FileNotFoundError(f"no shards in {source}")
    for path in files:
        tmp = target / f".{path.name}.{os.getpid()}.tmp"
        tmp.unlink(missing_ok=True)
        try:
            os.link(path, tmp)
        except FileNotFoundError:
            raise
        except OSError:  # another filesystem, or one without hard links
            shutil.copyfile(path, tmp)
        os.replace(tmp, target / path.name)


def linked(prepared: PreparedCorpus | None, out: Path, name: str) -> bool:
    """Whether the shards of corpus `name` were linked into `out` from where it was prepared before (None: nowhere);
    False when they went away meanwhile."""
    if prepared is None:
        return False
    try:
        link_shards(prepared.folder, out)
    except FileNotFoundError:
        log.warning("the prepared corpus %s went away; preparing corpus %s anew", prepared.folder, name)
        return False
    log.info("reused corpus %s from %s", name, prepared.folder.parent.parent)
    return True
