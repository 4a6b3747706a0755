"""Prepared data: a SentencePiece tokenizer and tokenized splits cached as Arrow datasets.

`prepare` runs once per corpus and tokenizer setting; later calls reuse the
directory it wrote (`data.prepared_dir/<name>-<src>-<tgt>-<hash>`).
"""

import functools
import hashlib
import json
import logging
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from itertools import chain
from pathlib import Path

import datasets
import datasets.exceptions
import numpy as np
from omegaconf import OmegaConf

from transformer.cleaning import CleaningReport, keep_mask, text_flags, token_flags
from transformer.config import DataConfig
from transformer.corpus import (
    ParallelFiles,
    TrainingCorpus,
    count_lines,
    extra_corpus,
    fetch,
    read_parallel,
    split_names,
    training_corpora,
)
from transformer.errors import UserError
from transformer.files import atomic_rename_dir, atomic_write_text, disk_errors
from transformer.locks import exclusive
from transformer.mixture import Corpus
from transformer.noise import noised_batch
from transformer.tokenizer import Tokenizer, train_sentencepiece

log = logging.getLogger(__name__)


LAYOUT = 3  # version of the prepared directory's layout; part of its hash


def _settings(cfg: DataConfig, tokenizer: Tokenizer | None = None) -> dict:
    """The settings that determine the prepared data (not the corpora's weights: they apply when training).
    With a given `tokenizer` (a fine-tuned model's), its models' digest stands for the tokenizer settings.

    A Hydra node is resolved where it sits, so interpolations such as `${data.src_lang}` find their root."""
    node = cfg if OmegaConf.is_config(cfg) else OmegaConf.structured(cfg)
    data = OmegaConf.to_container(node, resolve=True)
    keys = ("name", "src_lang", "tgt_lang", "train", "val", "test", "tag", "clean", "max_len", "tokenizer")
    keys += ("both_directions",) if data["both_directions"] else ()  # so that one-way folders keep their names
    settings = {"layout": LAYOUT, **{key: data[key] for key in keys}}
    settings["extra_train"] = {
        name: {k: v for k, v in asdict(extra_corpus(name, entry)).items() if k != "weight"}
        for name, entry in data["extra_train"].items()
    }
    if tokenizer is not None:
        models = hashlib.sha256(tokenizer.src_model + b"\0" + tokenizer.tgt_model).hexdigest()
        settings["tokenizer"] = {"given": models}
    return settings


def fingerprint(path: Path, block: int = 1 << 20) -> str:
    """A file's size and the SHA-256 of its first and last `block` bytes: the same for copies of a file on other
    nodes (unlike its mtime), different after an edit that changes its size or its ends (a gzip file's last bytes
    hold the CRC of its whole text)."""
    size = path.stat().st_size
    if not path.is_file():  # a folder: reading the corpus says what is wrong
        return str(size)
    with open(path, "rb") as f:
        head = f.read(block)
        f.seek(max(size - block, 0))
        tail = f.read(block)
    return f"{size}:{hashlib.sha256(head + tail).hexdigest()[:16]}"


def prepared_path(cfg: DataConfig, files: dict[str, ParallelFiles], tokenizer: Tokenizer | None = None) -> Path:
    """Where `cfg` is prepared (with `tokenizer`, else its own): the name hashes the settings and each file's path
    and `fingerprint`, so an edited corpus is prepared anew, and nodes holding copies of a corpus at the same paths
    prepare it under the same name."""
    stats = {s: [[str(p), fingerprint(p)] for p in (f.src, f.tgt)] for s, f in files.items()}
    key = json.dumps({"settings": _settings(cfg, tokenizer), "files": stats}, sort_keys=True)
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

    @property
    def corpora(self) -> list[dict]:
        """The training split's corpora in order: name, pairs (its rows, one after the other), tag, cleaning counts."""
        return self.meta["corpora"]

    def mixture(self, cfg: DataConfig) -> list[Corpus]:
        """The training split's corpora with the weights `cfg` gives them (no part of the prepared data)."""
        weights = {corpus.name: corpus.weight for corpus in training_corpora(cfg)}
        return [Corpus(c["name"], c["pairs"], weights[c["name"]], c["tag"]) for c in self.corpora]

    def log_cleaning(self) -> None:
        """One line per training corpus: the pairs kept and those each cleaning rule dropped."""
        for corpus in self.corpora:
            counts = dict(corpus["cleaning"])
            report = CleaningReport(counts.pop("read"), counts)
            log.info("training corpus %s: %s", corpus["name"], report)


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


def _tokenize(batch: dict, src_model: bytes, tgt_model: bytes, tag: str) -> dict:
    tokenizer = Tokenizer(src_model, tgt_model)
    src_ids, tgt_ids = tokenizer.encode_src(batch["src"], tag), tokenizer.encode_tgt(batch["tgt"])
    return {
        "src_ids": src_ids,
        "tgt_ids": tgt_ids,
        "src_len": list(map(len, src_ids)),
        "tgt_len": list(map(len, tgt_ids)),
    }


def _text_pairs(ds: datasets.Dataset) -> Iterator[tuple[str, str]]:
    for batch in ds.iter(batch_size=10_000):
        yield from zip(batch["src"], batch["tgt"])


def _train_tokenizer(cfg: DataConfig, parts: list[datasets.Dataset], tags: list[str]) -> Tokenizer:
    """SentencePiece on every source, then every target, of the training corpora; `tags` reserved on the source."""
    tok_cfg = cfg.tokenizer
    src = chain.from_iterable(part["src"] for part in parts)
    tgt = chain.from_iterable(part["tgt"] for part in parts)
    if tok_cfg.joint:
        model = train_sentencepiece(chain(src, tgt), tok_cfg, tags)
        return Tokenizer(model, model)
    return Tokenizer(train_sentencepiece(src, tok_cfg, tags), train_sentencepiece(tgt, tok_cfg))


def prepare(cfg: DataConfig, tokenizer: Tokenizer | None = None) -> PreparedData:
    """Fetch the corpus, clean its training corpora, train SentencePiece on them (or take `tokenizer`: the
    SentencePiece model(s) of the checkpoint a run starts from, never retrained), tokenize every split.

    Work happens in a temporary folder of this process, renamed into place at the end, so a
    failure (a bad file, Ctrl-C) leaves no half-prepared folder behind. A lock
    (`.<folder>.lock`) lets one process build at a time: a second one waits, then reuses what the first built.
    """
    files = fetch(cfg, split_names(cfg))
    corpora = training_corpora(cfg)
    every = {**files, **{f"extra_train.{c.name}": c.files for c in corpora[1:]}}
    if tokenizer is not None:
        for corpus in corpora:
            tokenizer.tag_prefix(corpus.tag)  # refuses a tag the vocabulary lacks
        own = prepared_path(cfg, every)
        if (own / "meta.json").exists() and PreparedData(own).tokenizer.same_models(tokenizer):
            return _reuse(own, "tokenized with the same SentencePiece model")
    out = prepared_path(cfg, every, tokenizer)
    if (out / "meta.json").exists():
        return _reuse(out, "")
    with exclusive(out.with_name(f".{out.name}.lock")):
        if (out / "meta.json").exists():
            return _reuse(out, "built by another process meanwhile")
        for stale in out.parent.glob(f"{out.name}.tmp*"):  # left by a killed process: nobody else builds now
            shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f"{out.name}.tmp-", dir=out.parent))
        try:
            with disk_errors(out):
                meta = _build(cfg, files, corpora, tokenizer, tmp)
                meta["settings"], meta["files"] = _settings(cfg, tokenizer), {s: asdict(f) for s, f in every.items()}
                atomic_write_text(tmp / "meta.json", json.dumps(meta, indent=2, default=str))
            shutil.rmtree(out, ignore_errors=True)  # an incomplete folder without meta.json
            atomic_rename_dir(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    prepared = PreparedData(out)
    log.info("prepared %s: %s", out, ", ".join(f"{s} {n}" for s, n in prepared.meta["pairs"].items()))
    prepared.log_cleaning()
    return prepared


def _reuse(directory: Path, why: str) -> PreparedData:
    log.info("reusing prepared data in %s%s", directory, f" ({why})" if why else "")
    prepared = PreparedData(directory)
    prepared.log_cleaning()
    return prepared


def _build(
    cfg: DataConfig,
    files: dict[str, ParallelFiles],
    corpora: list[TrainingCorpus],
    tokenizer: Tokenizer | None,
    tmp: Path,
) -> dict:
    """Write the tokenizer and every tokenized split into `tmp`; returns the pair counts and corpora for meta.json.
    The training split is the cleaned training corpora, one after the other."""
    cache = str(tmp / ".cache")  # datasets' working files; the saved splits below are the real cache
    evaluation = {split: _read_split(f, cache) for split, f in files.items() if split != cfg.train_split}
    evals = tuple({text for ds in evaluation.values() for text in ds[side]} for side in ("src", "tgt"))
    parts = [_read_split(corpus.files, cache) for corpus in corpora]
    reports = [_report(corpus, ds) for corpus, ds in zip(corpora, parts)]
    flags = [
        text_flags(_text_pairs(ds), len(ds), cfg.clean, evals[::-1] if c.reverse else evals)  # its sides swapped
        for c, ds in zip(corpora, parts)
    ]
    if tokenizer is None:
        kept = [ds.select(np.flatnonzero(~np.logical_or.reduce(list(f.values())))) for ds, f in zip(parts, flags)]
        _check_not_empty(sum(map(len, kept)), corpora)
        tokenizer = _train_tokenizer(cfg, kept, sorted({c.tag for c in corpora if c.tag}))
        _log_vocabulary(cfg, tokenizer)
    tokenizer.save(tmp)
    tokenize = functools.partial(_tokenized, tokenizer=tokenizer, num_proc=cfg.num_proc)
    parts = [_noised(ds, c) for c, ds in zip(corpora, parts)]
    cleaned = zip(corpora, parts, flags, reports)
    train = datasets.concatenate_datasets(
        [_clean_tokens(cfg, tokenize(ds, c.name, c.tag), c.tag, f, r) for c, ds, f, r in cleaned]
    )
    _check_not_empty(len(train), corpora)
    train.save_to_disk(str(tmp / cfg.train_split))
    for split, ds in evaluation.items():
        tokenize(ds, split).save_to_disk(str(tmp / split))
    shutil.rmtree(cache)
    return {
        "splits": list(files),
        "pairs": {split: len(train) if split == cfg.train_split else len(evaluation[split]) for split in files},
        "corpora": [
            {"name": c.name, "pairs": r.kept, "tag": c.tag, "cleaning": {"read": r.read, **r.dropped}}
            for c, r in zip(corpora, reports)
        ],
    }


def _report(corpus: TrainingCorpus, ds: datasets.Dataset) -> CleaningReport:
    """A corpus's report so far: the pairs its files hold, those with an empty side (the reading skipped them)."""
    read = count_lines(corpus.files.src)
    return CleaningReport(read, {"empty": read - len(ds)})


def _noised(ds: datasets.Dataset, corpus: TrainingCorpus) -> datasets.Dataset:
    """`ds` with word noise on its sources (after cleaning and SentencePiece saw the clean text), if it asks for it."""
    if not corpus.noise:
        return ds
    kwargs = {"drop": corpus.noise}
    return ds.map(noised_batch, batched=True, with_indices=True, fn_kwargs=kwargs, desc=f"noising {corpus.name}")


def _tokenized(ds: datasets.Dataset, name: str, tag: str = "", *, tokenizer: Tokenizer, num_proc: int):
    """`ds` with its ids and lengths (the source's with `tag` first)."""
    kwargs = {"src_model": tokenizer.src_model, "tgt_model": tokenizer.tgt_model, "tag": tag}
    processes = num_proc if num_proc > 1 else None
    return ds.map(_tokenize, batched=True, num_proc=processes, fn_kwargs=kwargs, desc=f"tokenizing {name}")


def _clean_tokens(
    cfg: DataConfig, ds: datasets.Dataset, tag: str, text: dict[str, np.ndarray], report: CleaningReport
) -> datasets.Dataset:
    """The pairs of a tokenized corpus that no rule drops, counted in `report` (`text`: the text rules' flags)."""
    table = ds.with_format("numpy", columns=["src_len", "tgt_len"])[:]
    tag_len = 1 if tag else 0
    lengths = token_flags(table["src_len"] - tag_len, table["tgt_len"], tag_len, cfg.max_len, cfg.clean.max_ratio)
    return ds.select(np.flatnonzero(keep_mask({**text, **lengths}, report)))


def _check_not_empty(pairs: int, corpora: list[TrainingCorpus]) -> None:
    if pairs == 0:
        names = ", ".join(str(c.files.src) for c in corpora)
        raise UserError(f"the training corpora ({names}) have no sentence pairs (after cleaning, see the log)")


def _log_vocabulary(cfg: DataConfig, tokenizer: Tokenizer) -> None:
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
