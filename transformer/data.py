"""Prepared data: a SentencePiece tokenizer and tokenized splits cached as Arrow datasets.

`prepare` runs once per corpus and tokenizer setting; later calls reuse the
directory it wrote (`data.prepared_dir/<name>-<src>-<tgt>-<hash>`).
"""

import hashlib
import json
import logging
import shutil
import tempfile
from itertools import chain
from pathlib import Path

import datasets
import datasets.exceptions
from omegaconf import OmegaConf

from transformer.config import DataConfig
from transformer.corpus import ParallelFiles, extra_train_files, fetch, read_parallel, split_names
from transformer.errors import UserError
from transformer.files import atomic_rename_dir, atomic_write_text, disk_errors
from transformer.locks import exclusive
from transformer.tokenizer import Tokenizer, train_sentencepiece

log = logging.getLogger(__name__)


LAYOUT = 2  # version of the prepared directory's layout; part of its hash


def _settings(cfg: DataConfig) -> dict:
    """The settings that determine the prepared data (not max_len: that is applied when training).

    A Hydra node is resolved where it sits, so interpolations such as `${data.src_lang}` find their root."""
    node = cfg if OmegaConf.is_config(cfg) else OmegaConf.structured(cfg)
    data = OmegaConf.to_container(node, resolve=True)
    keys = ("name", "src_lang", "tgt_lang", "train", "val", "test", "extra_train", "tokenizer")
    return {"layout": LAYOUT, **{key: data[key] for key in keys}}


def prepared_path(cfg: DataConfig, files: dict[str, ParallelFiles]) -> Path:
    """Where `cfg` is prepared: the name hashes the settings and each file's path, size and mtime,
    so an edited corpus is prepared anew."""
    stats = {s: [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in (f.src, f.tgt)] for s, f in files.items()}
    key = json.dumps({"settings": _settings(cfg), "files": stats}, sort_keys=True)
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return Path(cfg.prepared_dir) / f"{cfg.name}-{cfg.src_lang}-{cfg.tgt_lang}-{digest}"


class PreparedData:
    """A prepared directory: the tokenizer and one Arrow dataset per split."""

    def __init__(self, directory: Path):
        self.dir = directory
        try:
            self.tokenizer = Tokenizer.load(directory)
            self.meta = json.loads((directory / "meta.json").read_text())
        except (OSError, ValueError, RuntimeError) as err:
            raise self._damaged(err) from err

    def _damaged(self, err: Exception) -> UserError:
        return UserError(
            f"the prepared data in {self.dir} is damaged ({type(err).__name__}: {err}); "
            f"delete that folder (rm -r {self.dir}) and run again to rebuild it"
        )

    def split(self, name: str) -> datasets.Dataset:
        """Columns: src, tgt (text), src_ids, tgt_ids (subword ids without BOS/EOS), src_len, tgt_len."""
        if name not in self.meta["splits"]:
            raise UserError(f"no split {name!r} in {self.dir}; available: {self.meta['splits']}")
        try:
            return datasets.load_from_disk(str(self.dir / name))
        except (OSError, ValueError) as err:
            raise self._damaged(err) from err


def _pairs(files: ParallelFiles):
    skipped: list[int] = []
    yield from ({"src": s, "tgt": t} for s, t in read_parallel(files, skipped))
    if skipped:
        log.warning(
            "%s: skipped %d pairs with an empty side (lines %s%s)",
            files.src,
            len(skipped),
            ", ".join(map(str, skipped[:5])),
            ", ..." if len(skipped) > 5 else "",
        )


def _read_split(files: ParallelFiles, cache: str) -> datasets.Dataset:
    """The raw text pairs of one split as an Arrow dataset; our own input errors pass through unwrapped."""
    try:
        return datasets.Dataset.from_generator(_pairs, gen_kwargs={"files": files}, cache_dir=cache)
    except datasets.exceptions.DatasetGenerationError as err:
        if isinstance(err.__cause__, UserError):
            raise err.__cause__ from None
        raise


def _tokenize(batch: dict, src_model: bytes, tgt_model: bytes) -> dict:
    tokenizer = Tokenizer(src_model, tgt_model)
    src_ids, tgt_ids = tokenizer.encode_src(batch["src"]), tokenizer.encode_tgt(batch["tgt"])
    return {
        "src_ids": src_ids,
        "tgt_ids": tgt_ids,
        "src_len": list(map(len, src_ids)),
        "tgt_len": list(map(len, tgt_ids)),
    }


def _train_tokenizer(cfg: DataConfig, train: datasets.Dataset) -> Tokenizer:
    tok_cfg = cfg.tokenizer
    if tok_cfg.joint:
        model = train_sentencepiece(chain(train["src"], train["tgt"]), tok_cfg)
        return Tokenizer(model, model)
    return Tokenizer(train_sentencepiece(iter(train["src"]), tok_cfg), train_sentencepiece(iter(train["tgt"]), tok_cfg))


def prepare(cfg: DataConfig) -> PreparedData:
    """Fetch the corpus, train SentencePiece on its training split, tokenize every split.

    Work happens in a temporary folder of this process, renamed into place at the end, so a
    failure (a bad file, Ctrl-C) leaves no half-prepared folder behind. A lock
    (`.<folder>.lock`) lets one process build at a time: a second one waits, then reuses what the first built.
    """
    splits = split_names(cfg)
    files = fetch(cfg, splits)
    extras = extra_train_files(cfg)
    out = prepared_path(cfg, {**files, **extras})
    if (out / "meta.json").exists():
        log.info("reusing prepared data in %s", out)
        return PreparedData(out)
    with exclusive(out.with_name(f".{out.name}.lock")):
        if (out / "meta.json").exists():
            log.info("reusing prepared data in %s (built by another process meanwhile)", out)
            return PreparedData(out)
        for stale in out.parent.glob(f"{out.name}.tmp*"):  # left by a killed process: nobody else builds now
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{out.name}.tmp-", dir=out.parent))
        try:
            with disk_errors(out):
                counts = _build(cfg, files, extras, tmp)
            shutil.rmtree(out, ignore_errors=True)  # an incomplete folder without meta.json
            atomic_rename_dir(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    log.info("prepared %s: %s", out, ", ".join(f"{s} {n}" for s, n in counts.items()))
    return PreparedData(out)


def _build(
    cfg: DataConfig, files: dict[str, ParallelFiles], extras: dict[str, ParallelFiles], tmp: Path
) -> dict[str, int]:
    """Write the tokenizer, every tokenized split and meta.json into `tmp`; returns pair counts.
    The `extras` corpora are appended to the training split."""
    cache = str(tmp / ".cache")  # datasets' working files; the saved splits below are the real cache
    raw = {split: _read_split(f, cache) for split, f in files.items()}
    if extras:
        parts = {name: _read_split(f, cache) for name, f in extras.items()}
        added = ", ".join(f"{name} {len(ds)}" for name, ds in parts.items())
        log.info("training split: %d pairs + %s", len(raw[cfg.train_split]), added)
        raw[cfg.train_split] = datasets.concatenate_datasets([raw[cfg.train_split], *parts.values()])
    if len(raw[cfg.train_split]) == 0:
        raise UserError(f"training split {files[cfg.train_split].src} has no sentence pairs")
    tokenizer = _train_tokenizer(cfg, raw[cfg.train_split])
    tokenizer.save(tmp)
    log.info(
        "SentencePiece %s: %d source / %d target pieces (%s)",
        cfg.tokenizer.model_type,
        tokenizer.src_vocab_size,
        tokenizer.tgt_vocab_size,
        "joint" if tokenizer.joint else "separate",
    )
    if min(tokenizer.src_vocab_size, tokenizer.tgt_vocab_size) < cfg.tokenizer.vocab_size:
        log.warning(
            "the training split is too small for data.tokenizer.vocab_size=%d; the vocabulary was lowered",
            cfg.tokenizer.vocab_size,
        )
    counts = {}
    for split, ds in raw.items():
        ds = ds.map(
            _tokenize,
            batched=True,
            num_proc=cfg.num_proc if cfg.num_proc > 1 else None,
            fn_kwargs={"src_model": tokenizer.src_model, "tgt_model": tokenizer.tgt_model},
            desc=f"tokenizing {split}",
        )
        ds.save_to_disk(str(tmp / split))
        counts[split] = len(ds)
    meta = {
        "splits": list(files),
        "pairs": counts,
        "settings": _settings(cfg),
        "files": {s: {"src": str(f.src), "tgt": str(f.tgt)} for s, f in {**files, **extras}.items()},
    }
    atomic_write_text(tmp / "meta.json", json.dumps(meta, indent=2))
    shutil.rmtree(cache)
    return counts
