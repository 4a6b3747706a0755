"""Prepared data: a SentencePiece tokenizer and tokenized splits, as memory-mapped Arrow shards of ids.

`prepare` runs once per corpus and tokenizer setting; later calls reuse the directory it wrote
(`data.prepared_dir/<name>-<src>-<tgt>-<hash>`). It works in two passes over each training corpus, shard by shard
(`data.shard_pairs` pairs): screening (the text rules of cleaning, SentencePiece's sample; `screening`),
then, once SentencePiece is trained, tokenizing what screening kept (`binarization`); a corpus whose
shards another prepared folder already holds is linked from there instead (`shard_reuse`). The work lies in
a hidden folder beside the result, `.<name>.partial`, renamed into place when complete: a kill loses at most the
shard in flight, and the same command run again goes on from there.
"""

import hashlib
import json
import logging
import os
import shutil
from collections import Counter
from dataclasses import asdict, replace
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
from omegaconf import OmegaConf

from transformer.core.config import DataConfig
from transformer.core.errors import UserError
from transformer.core.files import DiskFull, atomic_rename_dir, atomic_write_text, disk_errors
from transformer.core.locks import exclusive
from transformer.core.memory import release_free_memory
from transformer.data.binarization import Encoder, binarize, token_report
from transformer.data.cleaning import CleaningReport
from transformer.data.corpus import extra_corpus, fetch, split_names, training_corpora
from transformer.data.mixture import TrainingCorpus
from transformer.data.screening import CHUNK, Sample, Screen, sample_size
from transformer.data.shard_reuse import corpus_key, models_digest, prepared_corpora, reused, source_identity, usable
from transformer.data.shards import SHARD, shard_paths, write_shard
from transformer.data.sources import Source
from transformer.data.sources.base import PairReader
from transformer.data.tokenizer import Tokenizer, train_sentencepiece

if TYPE_CHECKING:
    import datasets

log = logging.getLogger(__name__)


LAYOUT = 4  # version of the prepared directory's layout; part of its hash


def _settings(cfg: DataConfig, tokenizer: Tokenizer | None = None) -> dict:
    """The settings that determine the prepared data (not the corpora's weights: they apply when training).
    With a given `tokenizer` (a fine-tuned model's), its models' digest stands for the tokenizer settings.

    A Hydra node is resolved where it sits, so interpolations such as `${data.src_lang}` find their root."""
    node = cfg if OmegaConf.is_config(cfg) else OmegaConf.structured(cfg)
    data = OmegaConf.to_container(node, resolve=True)
    keys = ("name", "src_lang", "tgt_lang", "train", "val", "test", "tag", "clean", "max_len", "tokenizer")
    keys += ("both_directions",) if data["both_directions"] else ()  # so that one-way folders keep their names
    settings = {"layout": LAYOUT, **{key: data[key] for key in keys}, "shard_pairs": data["shard_pairs"]}
    settings["train_text"] = data["subword_dropout"] > 0  # BPE-dropout re-encodes the training text
    settings["extra_train"] = {
        name: {k: v for k, v in asdict(extra_corpus(name, entry)).items() if k != "weight"}
        for name, entry in data["extra_train"].items()
    }
    if tokenizer is not None:
        settings["tokenizer"] = {"given": models_digest(tokenizer)}
    return settings


def prepared_path(cfg: DataConfig, files: dict[str, Source], tokenizer: Tokenizer | None = None) -> Path:
    """Where `cfg` is prepared (with `tokenizer`, else its own): the name hashes the settings and each source's
    fingerprint (a file's path and content fingerprint), so an edited corpus is prepared anew, and nodes holding
    copies of a corpus at the same paths prepare it under the same name."""
    stats = {split: source.fingerprint() for split, source in files.items()}
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

    def split(self, name: str) -> "datasets.Dataset":
        """Columns: src_ids, tgt_ids (subword ids without BOS/EOS), src_len, tgt_len; src, tgt (text) for val and
        test sets, and for the training split with BPE-dropout. The training split is its corpora one after the
        other."""
        if name not in self.meta["splits"]:
            raise UserError(f"no split {name!r} in {self.dir}; available: {self.meta['splits']}")
        train = name == self.meta["train"]
        folders = [self.dir / name / c["folder"] for c in self.corpora] if train else [self.dir / name]
        import datasets  # a second of start-up: not for commands that only prepare

        try:
            parts = [datasets.Dataset.from_file(str(path)) for folder in folders for path in shard_paths(folder)]
            return datasets.concatenate_datasets(parts)
        except (OSError, ValueError, pa.ArrowInvalid) as err:
            raise self._damaged(err) from err

    @property
    def corpora(self) -> list[dict]:
        """The training split's corpora in order: name, pairs (its rows, one after the other), tag, cleaning counts."""
        return self.meta["corpora"]

    def mixture(self, cfg: DataConfig) -> list[TrainingCorpus]:
        """The training split's corpora in its order, as `cfg` gives them (their weights are no part of the
        prepared data), with the pairs each holds here."""
        given = {corpus.name: corpus for corpus in training_corpora(cfg)}
        return [replace(given[c["name"]], pairs=c["pairs"]) for c in self.corpora]

    def log_cleaning(self) -> None:
        """One line per training corpus: the pairs kept and those each cleaning rule dropped."""
        for corpus in self.corpora:
            counts = dict(corpus["cleaning"])
            report = CleaningReport(counts.pop("read"), counts)
            log.info("training corpus %s: %s", corpus["name"], report)


def _train_tokenizer(cfg: DataConfig, sample: Sample, tags: list[str]) -> Tokenizer:
    """SentencePiece on the sample's sources and targets; `tags` reserved on the source."""
    tok_cfg = cfg.tokenizer
    src, tgt = sample.drained()
    if tok_cfg.joint:
        model = train_sentencepiece(chain(src, tgt), tok_cfg, tags)
        return Tokenizer(model, model)
    return Tokenizer(train_sentencepiece(src, tok_cfg, tags), train_sentencepiece(tgt, tok_cfg))


def prepare(cfg: DataConfig, tokenizer: Tokenizer | None = None) -> PreparedData:
    """Fetch the corpus, clean its training corpora, train SentencePiece on them (or take `tokenizer`: the
    SentencePiece model(s) of the checkpoint a run starts from, never retrained), tokenize every split.

    Work happens in `.<folder>.partial` beside the result and is renamed into place at the end, so no half-prepared
    folder is ever trusted; a rerun after a failure or a kill goes on with what the partial folder holds. A lock
    (`.<folder>.lock`) lets one process build at a time: a second one waits, then reuses what the first built.
    """
    files = fetch(cfg, split_names(cfg))
    corpora = training_corpora(cfg)
    every = {**files, **{f"extra_train.{c.name}": c.source for c in corpora[1:]}}
    if tokenizer is not None:
        for corpus in corpora:
            tokenizer.tag_prefix(corpus.tag)  # refuses a tag the vocabulary lacks
        own = prepared_path(cfg, every)
        if (own / "meta.json").exists() and PreparedData(own).tokenizer.same_models(tokenizer):
            return _reuse(own, "tokenized with the same SentencePiece model")
    out = prepared_path(cfg, every, tokenizer)
    if (out / "meta.json").exists():
        return _reuse(out, "")
    with disk_errors(out):
        out.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(out.with_name(f".{out.name}.lock")):
        if (out / "meta.json").exists():
            return _reuse(out, "built by another process meanwhile")
        work = out.with_name(f".{out.name}.partial")
        if work.exists():
            log.info("continuing the preparation in %s", work)
            for stray in list(work.rglob(".*.tmp*")):  # what a killed write left: no part of the data, nor its size
                stray.unlink() if stray.is_file() else shutil.rmtree(stray, ignore_errors=True)
        if not (work / "meta.json").exists():  # else: complete, killed while its work files were removed
            try:
                with disk_errors(out):
                    work.mkdir(exist_ok=True)
                    meta = _build(cfg, files, corpora, tokenizer, work)
            except DiskFull:
                raise  # kept: the same command goes on once space is freed
            except UserError:
                shutil.rmtree(work, ignore_errors=True)  # a bad input: its fix changes the folder's name anyway
                raise
            meta["settings"], meta["files"] = _settings(cfg, tokenizer), {s: f.fingerprint() for s, f in every.items()}
            with disk_errors(out):
                atomic_write_text(work / "meta.json", json.dumps(meta, indent=2, default=str))
        for scratch in ("screening", ".tokenizer.tmp"):
            shutil.rmtree(work / scratch, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)  # an incomplete folder without meta.json
        atomic_rename_dir(work, out)
    prepared = PreparedData(out)
    log.info("prepared %s: %s", out, ", ".join(f"{s} {n:,}" for s, n in prepared.meta["pairs"].items()))
    prepared.log_cleaning()
    log.info("%s on disk, %.2f bytes per token", _size(out), prepared.meta["bytes_per_token"])
    return prepared


def _reuse(directory: Path, why: str) -> PreparedData:
    log.info("reusing prepared data in %s%s", directory, f" ({why})" if why else "")
    prepared = PreparedData(directory)
    prepared.log_cleaning()
    return prepared


def _threads(cfg: DataConfig) -> int:
    """SentencePiece's threads: `data.num_proc`, or one per core when it is 0."""
    return cfg.num_proc or len(os.sched_getaffinity(0))


def _build(
    cfg: DataConfig,
    files: dict[str, Source],
    corpora: list[TrainingCorpus],
    tokenizer: Tokenizer | None,
    work: Path,
) -> dict:
    """Screen every training corpus, train SentencePiece (unless given), tokenize every split into `work`; returns
    the pair counts and corpora for meta.json. The training split is the cleaned training corpora, one after the
    other. A corpus whose shards another prepared folder holds (`shard_reuse`) is linked from there; with a
    given tokenizer, it is not even screened."""
    evaluation = {split: _read_all(f) for split, f in files.items() if split != cfg.train_split}
    evals = tuple({pair[side] for pairs in evaluation.values() for pair in pairs} for side in (0, 1))
    trained = any((work / name).exists() for name in ("spm.model", "spm.src.model"))  # by a run killed later
    sample = Sample(sample_size(cfg.tokenizer.input_sentence_size, cfg.tokenizer.joint))
    sample = None if tokenizer is not None or trained else sample
    found = prepared_corpora(Path(cfg.prepared_dir))
    keys = _corpus_keys(cfg, files, corpora, tokenizer) if tokenizer is not None else []
    screens: list[Screen | None] = []
    reports = []
    for i, corpus in enumerate(corpora):
        prior = usable(found.get(keys[i], []), corpus.tag) if keys else None
        screen, report = (None, prior.report()) if prior else _screen(cfg, corpus, i, evals, sample, work)
        screens.append(screen), reports.append(report)
    _check_not_empty(sum(r.kept for r in reports), corpora)
    if tokenizer is None:
        tokenizer = _tokenizer(cfg, sample, sorted({c.tag for c in corpora if c.tag}), work)
        keys = _corpus_keys(cfg, files, corpora, tokenizer)
    else:
        _save_tokenizer(tokenizer, work)
    threads, limits = _threads(cfg), (cfg.max_len, cfg.clean.max_ratio)
    folders, tokens = [f"{i:02d}-{corpus.name}" for i, corpus in enumerate(corpora)], 0
    for i, (corpus, folder) in enumerate(zip(corpora, folders)):
        out = work / cfg.train_split / folder
        prior = usable(found.get(keys[i], []), corpus.tag)
        if reused(prior, out, corpus.name, corpus.tag, (tokenizer.tag_prefix(corpus.tag) or [None])[0]):
            reports[i] = prior.report()
            tokens += token_report(out)[1]
            continue
        if screens[i] is None:  # its shards went away since
            screens[i], reports[i] = _screen(cfg, corpus, i, evals, None, work)
        encoder = Encoder(tokenizer, corpus.tag, threads, text=cfg.subword_dropout > 0)
        pairs = PairReader(corpus.source.chunks(CHUNK))
        dropped, ids = binarize(pairs, screens[i], out, encoder, limits, corpus.noise, corpus.name)
        tokens += ids
        for rule, n in dropped.dropped.items():
            reports[i].dropped[rule] = reports[i].dropped.get(rule, 0) + n
    _check_not_empty(sum(r.kept for r in reports), corpora)
    for split, pairs in evaluation.items():
        tokens += _write_evaluation(work / split, pairs, Encoder(tokenizer, "", threads, text=True))
    return _meta(cfg, list(files), evaluation, corpora, reports, folders, keys, tokens, work)


def _meta(
    cfg: DataConfig,
    splits: list[str],
    evaluation: dict[str, list],
    corpora: list[TrainingCorpus],
    reports: list[CleaningReport],
    folders: list[str],
    keys: list[str],
    tokens: int,
    work: Path,
) -> dict:
    """What meta.json says of the built splits: pair counts, each training corpus with its cleaning counts and
    reuse key, the tokens and the bytes each takes on disk."""
    return {
        "train": cfg.train_split,
        "splits": splits,
        "pairs": {
            split: sum(r.kept for r in reports) if split == cfg.train_split else len(evaluation[split])
            for split in splits
        },
        "corpora": [
            {"name": c.name, "pairs": r.kept, "tag": c.tag, "folder": f, "cleaning": {"read": r.read, **r.dropped}}
            | {"key": key}  # what transformer/data/shard_reuse.py finds it by
            for c, r, f, key in zip(corpora, reports, folders, keys)
        ],
        "tokens": tokens,
        "bytes_per_token": _bytes(work) / max(tokens, 1),
    }


def _screen(
    cfg: DataConfig, corpus: TrainingCorpus, index: int, evals: tuple[set, set], sample: Sample | None, work: Path
) -> tuple[Screen, CleaningReport]:
    """Screen corpus number `index` (offering `sample` its pairs) and apply the text rules: its screen and report."""
    screen = Screen(work / "screening" / f"{index:02d}", cfg.shard_pairs, index)
    skipped: Counter = Counter()
    evals_of = evals[::-1] if corpus.reverse else evals
    done = screen.run(PairReader(corpus.source.chunks(CHUNK, skipped)), skipped, evals_of, corpus.name, sample)
    report = CleaningReport(done.pairs + sum(done.skipped.values()), dict(done.skipped))
    screen.keep(cfg.clean, report)
    return screen, report


def _corpus_keys(
    cfg: DataConfig, files: dict[str, Source], corpora: list[TrainingCorpus], tokenizer: Tokenizer
) -> list[str]:
    """Each training corpus's key (`shard_reuse`) with `tokenizer`: the val and test sets count only for
    the eval-overlap rule."""
    settings = _settings(cfg)
    shared = {key: settings[key] for key in ("layout", "src_lang", "tgt_lang", "clean", "max_len", "shard_pairs")}
    shared |= {"train_text": settings["train_text"], "tokenizer": models_digest(tokenizer)}
    if cfg.clean.eval_overlap:
        shared["evals"] = {split: source_identity(f) for split, f in files.items() if split != cfg.train_split}
    return [corpus_key(shared, corpus) for corpus in corpora]


def _read_all(source: Source) -> list[tuple[str, str]]:
    """Every pair of a val or test set (small enough to hold)."""
    return list(source.pairs())


def _tokenizer(cfg: DataConfig, sample: Sample | None, tags: list[str], work: Path) -> Tokenizer:
    """SentencePiece trained on `sample` (a uniform sample of the pairs the text rules keep, in every training
    corpus), saved in `work`; the one saved there by an earlier run when `sample` is None."""
    if sample is None:
        return Tokenizer.load(work)
    log.info("training SentencePiece on %s pairs", f"{min(sample.k, len(sample)):,}")
    tokenizer = _train_tokenizer(cfg, sample, tags)
    release_free_memory()  # what SentencePiece's training took is no part of the stages after it
    _log_vocabulary(cfg, tokenizer)
    _save_tokenizer(tokenizer, work)
    return tokenizer


def _save_tokenizer(tokenizer: Tokenizer, work: Path) -> None:
    """The SentencePiece model(s) into `work`, each file whole or absent after a kill (a rerun trusts what is there)."""
    tmp = work / ".tokenizer.tmp"
    tmp.mkdir(exist_ok=True)
    tokenizer.save(tmp)
    for path in tmp.iterdir():
        os.replace(path, work / path.name)
    tmp.rmdir()


def _write_evaluation(folder: Path, pairs: list[tuple[str, str]], encoder: Encoder) -> int:
    """A val or test set as one shard with its text (validation and evaluation read it); returns its ids."""
    folder.mkdir(exist_ok=True)
    srcs, tgts = [p[0] for p in pairs], [p[1] for p in pairs]
    columns = encoder.columns([encoder.encode(srcs, tgts)])
    write_shard(folder / SHARD.format(0), columns)
    return sum(len(columns[f"{side}_ids"].values) for side in ("src", "tgt"))


def _bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and "screening" not in path.parts)


def _size(folder: Path) -> str:
    return f"{_bytes(folder) / 2**30:.2f} GiB"


def _check_not_empty(pairs: int, corpora: list[TrainingCorpus]) -> None:
    if pairs == 0:
        names = ", ".join(c.source.describe() for c in corpora)
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
