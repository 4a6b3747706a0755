"""Where a parallel corpus comes from: its splits' sources, a mirror directory, or a download.

Builtin corpora (multi30k, tatoeba) are `{dir}/{split}.{lang}.gz`; `data=files` gives each split as any corpus
source (transformer/data/sources/), and `data.extra_train.NAME` adds more training corpora.
"""

import logging
import urllib.request
from pathlib import Path

from transformer.core.config import DataConfig, ExtraCorpus, SourceConfig
from transformer.core.errors import UserError
from transformer.core.files import atomic_copy, atomic_write
from transformer.data.backtranslated import check_corpus_folder
from transformer.data.mixture import TrainingCorpus
from transformer.data.sources import OPENERS, Source, build_source, given, source_config

log = logging.getLogger(__name__)


def evaluation_splits(cfg: DataConfig) -> list[str]:
    """The corpus's test sets, first one first: its builtin test splits (`data.test_splits`), then the
    splits given as sources (`data.test.NAME`). The one rule for prepare, train's hint, evaluate and results."""
    return [*cfg.test_splits, *(name for name in cfg.test if name not in cfg.test_splits)]


def split_names(cfg: DataConfig) -> list[str]:
    """Every split the corpus offers: train, val, then the test sets."""
    return [cfg.train_split, cfg.val_split, *evaluation_splits(cfg)]


def explicit_splits(cfg: DataConfig) -> dict[str, tuple[str, SourceConfig]]:
    """The splits given as sources (data.train, data.val, data.test.NAME): their setting's name and settings."""
    entries = {cfg.train_split: ("data.train", cfg.train), cfg.val_split: ("data.val", cfg.val)}
    entries |= {name: (f"data.test.{name}", entry) for name, entry in cfg.test.items()}
    return {split: (key, source_config(entry, key)) for split, (key, entry) in entries.items() if entry is not None}


def split_source(cfg: DataConfig, split: str) -> Source:
    """The source of `split`: as data.train, data.val or data.test.NAME give it, else the builtin layout."""
    explicit = explicit_splits(cfg).get(split)
    if explicit is not None:
        key, settings = explicit
        return build_source(settings, cfg.src_lang, cfg.tgt_lang, key)
    if cfg.dir is None or split not in split_names(cfg):
        raise UserError(f"corpus {cfg.name!r} has no split {split!r}; its splits are {split_names(cfg)}")
    return builtin_source(Path(cfg.dir), split, cfg.src_lang, cfg.tgt_lang)


def builtin_files(folder: Path, split: str, src_lang: str, tgt_lang: str) -> tuple[Path, Path]:
    """A builtin corpus's split in `folder` (its local copy or its mirror): `{split}.{lang}.gz` for each side."""
    return folder / f"{split}.{src_lang}.gz", folder / f"{split}.{tgt_lang}.gz"


def builtin_source(folder: Path, split: str, src_lang: str, tgt_lang: str) -> Source:
    """A builtin corpus's split in `folder` as a source."""
    return text_source(*builtin_files(folder, split, src_lang, tgt_lang), src_lang, tgt_lang, f"{folder}/{split}")


def text_source(src: str | Path, tgt: str | Path, src_lang: str, tgt_lang: str, key: str) -> Source:
    """Two aligned text files as a source."""
    return build_source(SourceConfig(src=str(src), tgt=str(tgt)), src_lang, tgt_lang, key)


def extra_corpus(name: str, entry) -> ExtraCorpus:
    """The settings of `data.extra_train.NAME` (a free-form mapping in the schema) with their defaults."""
    return source_config(entry, f"data.extra_train.{name}", ExtraCorpus)


def training_corpora(cfg: DataConfig) -> list[TrainingCorpus]:
    """The main corpus's training split, then each `data.extra_train.NAME` (a source, or a folder) in order; with
    `data.both_directions`, then each of them the other way round."""
    corpora = [TrainingCorpus(cfg.name, split_source(cfg, cfg.train_split), cfg.weight, cfg.tag)]
    for name, entry in cfg.extra_train.items():
        extra = extra_corpus(name, entry)
        corpora.append(TrainingCorpus(name, extra_source(cfg, name, extra), extra.weight, extra.tag, extra.noise))
    if cfg.both_directions:
        corpora += [reversed_corpus(c) for c in corpora]
    return corpora


def reversed_corpus(corpus: TrainingCorpus) -> TrainingCorpus:
    """`corpus` the other way round, untagged and unnoised, named NAME-reversed."""
    return TrainingCorpus(f"{corpus.name}-reversed", corpus.source.reversed(), corpus.weight, reverse=True)


def extra_source(cfg: DataConfig, name: str, extra: ExtraCorpus) -> Source:
    """The source of `data.extra_train.NAME`: its source settings, or its folder's train files."""
    key = f"data.extra_train.{name}"
    if name == cfg.name:
        raise UserError(f"{key}: {name!r} is the main corpus's name (data.name); give this one another name")
    if extra.dir is None:
        return build_source(extra, cfg.src_lang, cfg.tgt_lang, key)
    _check_folder_alone(extra, key)
    check_corpus_folder(Path(extra.dir), cfg.src_lang, cfg.tgt_lang, f"{key}.dir")
    src, tgt = (_train_file(Path(extra.dir), lang, key) for lang in (cfg.src_lang, cfg.tgt_lang))
    return text_source(src, tgt, cfg.src_lang, cfg.tgt_lang, key)


def _check_folder_alone(extra: ExtraCorpus, key: str) -> None:
    if given(extra):
        raise UserError(f"{key}: give either {key}.dir or the corpus ({key}.src and {key}.tgt, or .path), not both")


def _train_file(folder: Path, lang: str, key: str) -> Path:
    """A corpus folder's `train.{lang}`, plain or compressed (`train.{lang}.gz` ...), whichever it holds."""
    names = [f"train.{lang}", *(f"train.{lang}{suffix}" for suffix in OPENERS)]
    found = [folder / name for name in names if (folder / name).is_file()]
    if len(found) != 1:
        holds = " and ".join(path.name for path in found) if found else f"none of {', '.join(names)}"
        raise UserError(f"{key}.dir={folder} holds {holds}; it needs exactly one train.{lang} (plain or compressed)")
    return found[0]


def check_sources(cfg: DataConfig) -> list[str]:
    """What is wrong with the settings of the corpus's sources (data.train, data.val, data.test.NAME,
    data.extra_train.NAME), one problem each; no file is read (a folder's files are checked when it is read)."""
    try:
        named = [(settings, key) for key, settings in explicit_splits(cfg).values()]
        named += [(extra_corpus(name, entry), f"data.extra_train.{name}") for name, entry in cfg.extra_train.items()]
    except UserError as err:
        return [str(err)]
    problems = []
    for settings, key in named:
        try:
            if getattr(settings, "dir", None) is None:
                build_source(settings, cfg.src_lang, cfg.tgt_lang, key)
            else:
                _check_folder_alone(settings, key)
        except UserError as err:
            problems.append(str(err))
    return problems


def fetch(cfg: DataConfig, splits: list[str]) -> dict[str, Source]:
    """The sources of `splits`, a builtin corpus's files made local first: copied from the mirror or downloaded."""
    sources = {split: split_source(cfg, split) for split in splits}
    explicit = explicit_splits(cfg)
    for split in (split for split in splits if split not in explicit):
        for path in builtin_files(Path(cfg.dir), split, cfg.src_lang, cfg.tgt_lang):
            if not path.exists():
                obtain(cfg, path)
    return sources


def obtain(cfg: DataConfig, path: Path) -> None:
    """Put the corpus file `path` (in `cfg.dir`) in place: a copy from `cfg.mirror`, else a download of `cfg.url`."""
    if cfg.dir is None or path.parent != Path(cfg.dir):
        raise UserError(f"missing corpus file {path}; check the data.* paths")
    mirror = Path(cfg.mirror) / path.name if cfg.mirror else None
    if mirror is not None and mirror.exists():
        log.info("copying %s -> %s", mirror, path)
        atomic_copy(mirror, path)
    elif cfg.url:
        split, lang = path.name[: -len(".gz")].rsplit(".", 1)
        url = cfg.url.format(split=split, lang=lang)
        log.info("downloading %s", url)
        try:
            atomic_write(path, lambda tmp: urllib.request.urlretrieve(url, tmp))
        except OSError as err:
            raise UserError(f"could not download {url} ({err}); put the file at {path} or set data.mirror") from err
    else:
        where = f"the mirror {mirror.parent} does not have it" if mirror else "no data.mirror is set"
        raise UserError(
            f"missing corpus file {path}: {where} and corpus {cfg.name!r} has no download source (data.url); "
            f"put the {cfg.name} files ({{split}}.{{lang}}.gz) in {cfg.dir}, or set data.shared_dir=DIR "
            f"(or data.mirror=DIR) to a folder that holds them"
        )
