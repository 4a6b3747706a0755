"""Corpus sources: the formats a parallel corpus can come in, one class each in `SOURCES`.

A source is built from a `SourceConfig` (data.train, data.val, data.test.NAME, data.extra_train.NAME, evaluate's
and backtranslate's `source`) and reads its pairs as a stream, never the whole corpus at once (`Source`). Files may
be compressed, by their suffix (`streams.OPENERS`). A new format is one module here and one line in `SOURCES`.
"""

from dataclasses import fields, is_dataclass

from omegaconf import OmegaConf

from transformer.core.config import SourceConfig
from transformer.core.errors import UserError
from transformer.data.sources.base import Source
from transformer.data.sources.hf import HFDataset
from transformer.data.sources.streams import OPENERS, count_lines, decode_line, open_text, raw_lines, read_lines
from transformer.data.sources.text import TextFiles
from transformer.data.sources.tmx import TmxFile
from transformer.data.sources.tsv import TsvFile

# Every corpus format, by the name `format` takes; without one, the first that claims the settings reads them.
SOURCES: dict[str, type[Source]] = {"text": TextFiles, "tsv": TsvFile, "tmx": TmxFile, "datasets": HFDataset}


def source_config(entry, key: str, schema: type[SourceConfig] = SourceConfig) -> SourceConfig:
    """The settings `entry` (a `schema` dataclass, or a mapping such as the free-form data.test.NAME and
    data.extra_train.NAME) as `schema`; an unknown key is refused."""
    if isinstance(entry, schema):
        return entry
    if is_dataclass(entry):
        entry = {f.name: getattr(entry, f.name) for f in fields(entry)}
    values = OmegaConf.to_container(entry, resolve=True) if OmegaConf.is_config(entry) else dict(entry)
    valid = [f.name for f in fields(schema)]
    unknown = sorted(set(values) - set(valid))
    if unknown:
        raise UserError(f"{key}.{unknown[0]} is no setting; valid keys: {', '.join(valid)}")
    return schema(**values)


def given(cfg: SourceConfig) -> bool:
    """Whether the settings name a corpus at all (a file or a path)."""
    return any(value is not None for value in (cfg.src, cfg.tgt, cfg.path))


def build_source(cfg: SourceConfig, src_lang: str, tgt_lang: str, key: str) -> Source:
    """The source the settings `cfg` (named `key` in messages) describe, for the languages src_lang -> tgt_lang.
    Nothing is read yet."""
    if cfg.path and (cfg.src or cfg.tgt):
        raise UserError(f"{key}: give either {key}.src and {key}.tgt, or {key}.path, not both")
    if cfg.format:
        if cfg.format not in SOURCES:
            raise UserError(f"{key}.format={cfg.format!r} is not one of {', '.join(SOURCES)}")
        kind = SOURCES[cfg.format]
    else:
        kind = next((kind for kind in SOURCES.values() if kind.claims(cfg)), None)
        if kind is None:
            ways = ", or ".join(option.given_as.format(key=key) for option in SOURCES.values())
            raise UserError(f"{key} names no corpus: give {ways}")
    return kind(cfg, src_lang, tgt_lang, key)


__all__ = [
    "count_lines",
    "OPENERS",
    "SOURCES",
    "Source",
    "build_source",
    "decode_line",
    "given",
    "open_text",
    "raw_lines",
    "read_lines",
    "source_config",
]
