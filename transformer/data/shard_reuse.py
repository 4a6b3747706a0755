"""A training corpus's shards found in another prepared folder, linked instead of screened and tokenized again.

A corpus's key hashes everything its shards depend on but its tag: the tokenizer's model bytes, the corpus's source
(settings, content fingerprint, direction) and noise, and the settings every corpus shares (layout, languages,
cleaning, max_len, shard size, text columns, and the val and test sets for the eval-overlap rule). Repeats are found
within a corpus and the tokenizer's sample is in its bytes, so no other corpus enters the key: adding an extra corpus
leaves the others' keys as they were. Each complete prepared folder keeps its corpora's keys in meta.json. Shards
with the same tag are linked; with another tag (one piece, as every tag), they are written again with the new tag's
id first in each source, the token rules' counts unchanged; to or from no tag, the corpus is tokenized again.
"""

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

import pyarrow as pa

from transformer.core.config import SourceConfig
from transformer.data.cleaning import CleaningReport
from transformer.data.mixture import TrainingCorpus
from transformer.data.shards import shard_paths, write_shard
from transformer.data.sources import Source
from transformer.data.tokenizer import Tokenizer

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
    """The key of `corpus`'s shards given the `shared` settings (tokenizer digest included); its name, weight and
    tag are no part of it."""
    own = {"source": source_identity(corpus.source), "noise": corpus.noise}
    text = json.dumps({"shared": shared, "corpus": own}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class PreparedCorpus:
    """A training corpus in a complete prepared folder: its shard folder, cleaning counts and tag (meta.json's)."""

    folder: Path
    cleaning: dict[str, int]
    tag: str

    def report(self) -> CleaningReport:
        """Its cleaning counts: pairs read, and those every rule dropped (the token rules' included)."""
        dropped = dict(self.cleaning)
        return CleaningReport(dropped.pop("read"), dropped)


def prepared_corpora(prepared_dir: Path) -> dict[str, list[PreparedCorpus]]:
    """Key -> the training corpora of that key in the complete prepared folders below `prepared_dir` (a folder
    whose meta.json cannot be read is passed over)."""
    found: dict[str, list[PreparedCorpus]] = {}
    for meta_path in sorted(prepared_dir.glob("*/meta.json")):
        if meta_path.parent.name.startswith("."):
            continue
        try:
            meta = json.loads(meta_path.read_text())
            for entry in meta["corpora"]:
                if "key" in entry:
                    folder = meta_path.parent / meta["train"] / entry["folder"]
                    found.setdefault(entry["key"], []).append(PreparedCorpus(folder, entry["cleaning"], entry["tag"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def usable(candidates: list[PreparedCorpus], tag: str) -> PreparedCorpus | None:
    """The prepared corpus to take shards tagged `tag` from: one with that tag, else one with another tag when
    `tag` is one; None when there is none."""
    same = [c for c in candidates if c.tag == tag]
    return (same or [c for c in candidates if c.tag and tag] or [None])[0]


def link_files(paths: Iterable[Path], target: Path) -> None:
    """Put `paths` into `target`: hard links where the filesystem allows, else copies, each through a temporary name
    (a kill leaves whole files)."""
    for path in paths:
        tmp = target / f".{path.name}.{os.getpid()}.tmp"
        tmp.unlink(missing_ok=True)
        try:
            os.link(path, tmp)
        except FileNotFoundError:
            raise  # `path` went away: the caller prepares the corpus anew
        except OSError:  # another filesystem, or one without hard links
            shutil.copyfile(path, tmp)
        os.replace(tmp, target / path.name)


def retagged(path: Path, target: Path, tag_id: int) -> None:
    """Shard `path` written into `target` with `tag_id` in place of each source's first id (its tag)."""
    with pa.memory_map(str(path)) as stream:
        (batch,) = list(pa.ipc.open_stream(stream))
        columns = dict(zip(batch.schema.names, batch.columns))
        ids = columns["src_ids"]
        values = ids.values.to_numpy(zero_copy_only=False).copy()
        values[ids.offsets.to_numpy()[:-1]] = tag_id  # every source starts with its tag
        columns["src_ids"] = pa.ListArray.from_arrays(ids.offsets, pa.array(values, type=ids.type.value_type))
        write_shard(target / path.name, columns)


def reused(prepared: PreparedCorpus | None, out: Path, name: str, tag: str, tag_id: int | None) -> bool:
    """Whether the shards of corpus `name` (tagged `tag`, whose id is `tag_id`) were put into `out` from where it
    was prepared before (None: nowhere): linked, or retagged; False when they went away meanwhile."""
    if prepared is None:
        return False
    out.mkdir(parents=True, exist_ok=True)
    shards = shard_paths(prepared.folder)
    try:
        if not shards:
            raise FileNotFoundError(prepared.folder)
        link_files(sorted(prepared.folder.glob("counts-*.json")), out)  # counts before their shard, as written
        if prepared.tag == tag:
            link_files(shards, out)
        else:
            for path in shards:
                retagged(path, out, tag_id)
    except FileNotFoundError:
        log.warning("the prepared corpus %s went away; preparing corpus %s anew", prepared.folder, name)
        return False
    how = "" if prepared.tag == tag else f", retagged from <{prepared.tag}>"
    log.info("reused corpus %s from %s%s", name, prepared.folder.parent.parent, how)
    return True
