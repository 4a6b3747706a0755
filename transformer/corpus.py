"""Where a parallel corpus comes from: local files, a mirror directory, or a download.

Builtin corpora (multi30k, tatoeba) are `{dir}/{split}.{lang}.gz`; `data=files`
names each split's two files directly. Reading checks what a user's files can
get wrong and says which file and line.
"""

import gzip
import logging
import urllib.request
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import IO

from transformer.backtranslation import check_corpus_folder
from transformer.config import DataConfig, ExtraCorpus
from transformer.errors import UserError
from transformer.files import atomic_copy, atomic_write

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ParallelFiles:
    """The source-side and target-side file of one split."""

    src: Path
    tgt: Path


def evaluation_splits(cfg: DataConfig) -> list[str]:
    """The corpus's test sets, first one first: its builtin test splits (`data.test_splits`), then the
    splits given as files (`data.test.NAME`). The one rule for prepare, train's hint, evaluate and results."""
    return [*cfg.test_splits, *(name for name in cfg.test if name not in cfg.test_splits)]


def split_names(cfg: DataConfig) -> list[str]:
    """Every split the corpus offers: train, val, then the test sets."""
    return [cfg.train_split, cfg.val_split, *evaluation_splits(cfg)]


def split_files(cfg: DataConfig, split: str) -> ParallelFiles:
    """The two files of `split` (for builtin corpora, in the local directory)."""
    explicit = {cfg.train_split: cfg.train, cfg.val_split: cfg.val}.get(split)
    if explicit is not None:
        return ParallelFiles(Path(explicit.src), Path(explicit.tgt))
    if split in cfg.test:
        return _named_pair(cfg.test[split], f"data.test.{split}")
    if cfg.dir is None or split not in split_names(cfg):
        raise UserError(f"corpus {cfg.name!r} has no split {split!r}; its splits are {split_names(cfg)}")
    return builtin_files(Path(cfg.dir), split, cfg.src_lang, cfg.tgt_lang)


def builtin_files(folder: Path, split: str, src_lang: str, tgt_lang: str) -> ParallelFiles:
    """A builtin corpus's split in `folder` (its local copy or its mirror): `{split}.{lang}.gz` for each side."""
    return ParallelFiles(folder / f"{split}.{src_lang}.gz", folder / f"{split}.{tgt_lang}.gz")


@dataclass(frozen=True)
class TrainingCorpus:
    """One corpus of the training split: the main one (named `data.name`) or a `data.extra_train.NAME`."""

    name: str
    files: ParallelFiles
    weight: float = 1.0
    tag: str = ""
    noise: float = 0.0  # word noise on the source (transformer/noise.py)
    reverse: bool = False  # a copy the other way round (data.both_directions): its source is the tgt_lang side


def extra_corpus(name: str, entry) -> ExtraCorpus:
    """The settings of `data.extra_train.NAME` (a free-form mapping in the schema) with their defaults."""
    fields = dict(entry)
    unknown = sorted(set(fields) - set(ExtraCorpus.__dataclass_fields__))
    if unknown:
        valid = ", ".join(ExtraCorpus.__dataclass_fields__)
        raise UserError(f"data.extra_train.{name}.{unknown[0]} is no setting; valid keys: {valid}")
    return ExtraCorpus(**fields)


def training_corpora(cfg: DataConfig) -> list[TrainingCorpus]:
    """The main corpus's training split, then each `data.extra_train.NAME` (two files, or a folder) in order; with
    `data.both_directions`, then each of them the other way round."""
    corpora = [TrainingCorpus(cfg.name, split_files(cfg, cfg.train_split), cfg.weight, cfg.tag)]
    for name, entry in cfg.extra_train.items():
        extra = extra_corpus(name, entry)
        corpora.append(TrainingCorpus(name, _extra_files(cfg, name, extra), extra.weight, extra.tag, extra.noise))
    if cfg.both_directions:
        corpora += [reversed_corpus(c) for c in corpora]
    return corpora


def reversed_corpus(corpus: TrainingCorpus) -> TrainingCorpus:
    """`corpus` the other way round, untagged and unnoised, named NAME-reversed."""
    files = ParallelFiles(corpus.files.tgt, corpus.files.src)
    return TrainingCorpus(f"{corpus.name}-reversed", files, corpus.weight, reverse=True)


def _extra_files(cfg: DataConfig, name: str, extra: ExtraCorpus) -> ParallelFiles:
    key = f"data.extra_train.{name}"
    if name == cfg.name:
        raise UserError(f"{key}: {name!r} is the main corpus's name (data.name); give this one another name")
    if extra.dir is not None:
        if extra.src is not None or extra.tgt is not None:
            raise UserError(f"{key}: give either {key}.dir or {key}.src and {key}.tgt, not both")
        check_corpus_folder(Path(extra.dir), cfg.src_lang, cfg.tgt_lang, f"{key}.dir")
        return ParallelFiles(*(_train_file(Path(extra.dir), lang, key) for lang in (cfg.src_lang, cfg.tgt_lang)))
    if extra.src is None or extra.tgt is None:
        raise UserError(f"{key} needs both {key}.src and {key}.tgt, or a folder: {key}.dir")
    files = ParallelFiles(Path(extra.src), Path(extra.tgt))
    for path in (files.src, files.tgt):
        if not path.exists():
            raise UserError(f"missing corpus file {path}; check the {key} paths")
    return files


def _train_file(folder: Path, lang: str, key: str) -> Path:
    """A corpus folder's `train.{lang}` or `train.{lang}.gz`, whichever it holds."""
    found = [path for path in (folder / f"train.{lang}", folder / f"train.{lang}.gz") if path.is_file()]
    if len(found) != 1:
        holds = "both" if found else "neither"
        raise UserError(f"{key}.dir={folder} holds {holds} of train.{lang} and train.{lang}.gz; it needs exactly one")
    return found[0]


def _named_pair(pair: dict[str, str], key: str) -> ParallelFiles:
    if "src" not in pair or "tgt" not in pair:
        raise UserError(f"{key} needs both {key}.src and {key}.tgt")
    return ParallelFiles(Path(pair["src"]), Path(pair["tgt"]))


def fetch(cfg: DataConfig, splits: list[str]) -> dict[str, ParallelFiles]:
    """Make sure the files of `splits` exist locally: copy from the mirror or download."""
    files = {split: split_files(cfg, split) for split in splits}
    for pair in files.values():
        for path in (pair.src, pair.tgt):
            if not path.exists():
                obtain(cfg, path)
    return files


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


def _open(path: Path) -> IO[bytes]:
    if not path.exists():
        raise UserError(f"missing corpus file {path}")
    if path.is_dir():
        raise UserError(f"{path} is a folder; give a text file (one sentence per line, plain or .gz)")
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def raw_lines(path: Path) -> Iterator[bytes]:
    """The undecoded lines of a text file, plain or gzip (by its .gz suffix)."""
    with _open(path) as f:
        try:
            yield from f
        except (gzip.BadGzipFile, EOFError, zlib.error) as err:
            raise UserError(
                f"{path} is not a valid gzip file ({err}); compress it with gzip, or drop the .gz from its name"
            ) from None


def decode_line(raw: bytes, where: str) -> str:
    """One line as text without its ending (LF or CRLF); `where` (e.g. "FILE:LINE") names it if it is not UTF-8."""
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise UserError(
            f"{where}: not valid UTF-8 ({err.reason} at byte {err.start + 1}); re-encode it as UTF-8"
        ) from None


def read_lines(path: Path) -> Iterator[str]:
    """Lines of a UTF-8 text file (plain or .gz) without line endings (LF or CRLF)."""
    for number, raw in enumerate(raw_lines(path), start=1):
        yield decode_line(raw, f"{path}:{number}")


def count_lines(path: Path) -> int:
    """How many lines a text file (plain or .gz) has."""
    return sum(1 for _ in raw_lines(path))


def read_parallel(files: ParallelFiles, skipped: list[int] | None = None) -> Iterator[tuple[str, str]]:
    """Aligned (source, target) pairs, each side stripped; pairs with an empty side are skipped and their line numbers
    put in `skipped`."""
    for number, (src, tgt) in enumerate(zip_longest(read_lines(files.src), read_lines(files.tgt)), start=1):
        if src is None or tgt is None:
            raise UserError(
                f"{files.src} has {count_lines(files.src)} lines but {files.tgt} has {count_lines(files.tgt)}; "
                "the two sides of a parallel corpus must have one line per sentence pair"
            )
        src, tgt = src.strip(), tgt.strip()
        if not src or not tgt:
            if skipped is not None:
                skipped.append(number)
            continue
        yield src, tgt
