"""`transformer-backtranslate`: monolingual text through a reverse model into a synthetic parallel corpus.

See `transformer.recipe.backtranslation` for the output folder and how an interrupted run continues; docs/data.md.
"""

import functools
import logging
import time
from collections.abc import Iterator
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from transformer.cli import hydra_app, user_errors
from transformer.core.config import BacktranslateConfig
from transformer.core.errors import UserError
from transformer.core.locks import lock_run_dir
from transformer.data.corpus import evaluation_splits, fetch
from transformer.data.sources import build_source, given, read_lines, source_config
from transformer.decoding.chunks import show_progress, translate_in_chunks
from transformer.recipe import backtranslation

log = logging.getLogger(__name__)


def input_paths(value) -> list[Path]:
    """`input=PATH` or `input=[A,B]` as paths."""
    paths = [Path(value)] if isinstance(value, str) else [Path(p) for p in value]
    if not paths:
        raise UserError("input=[] names no file; give input=PATH or input=[A,B]")
    return paths


def monolingual(cfg: DictConfig, data: DictConfig) -> tuple[list[str], Iterator[str]]:
    """The text to back-translate (in the model's source language), and what names it in the job record: the
    `input` files' lines, or that language's side of the corpus `source` (a TSV column, a TMX language ...)."""
    settings = source_config(cfg.source, "source")
    if not given(settings):
        paths = input_paths(cfg.input)
        return [str(p.resolve()) for p in paths], (line for path in paths for line in read_lines(path))
    source = build_source(settings, data.src_lang, data.tgt_lang, "source")
    return [f"{source.describe()}, {data.src_lang} side"], source.side(data.src_lang)


def source_sentences(data: DictConfig, splits: list[str]) -> set[str]:
    """The source side (the language back-translated) of `splits` of the model's corpus."""
    return {src for source in fetch(data, splits).values() for src, _ in source.pairs()}


def job_record(cfg: DictConfig, loaded, models: list[str], inputs: list[str]) -> dict:
    """What the output folder holds: the corpus's direction, the model(s), the decoding, the inputs."""
    data = loaded.config.data
    return {
        "src_lang": data.tgt_lang,
        "tgt_lang": data.src_lang,
        "model": [str(Path(p).resolve()) for p in models],
        "model_step": loaded.meta.get("step"),
        "decoding": OmegaConf.to_container(cfg.decoding),
        "inputs": inputs,
        "chunk_lines": cfg.chunk_lines,
        "selection": list(backtranslation.SELECTION_RULES),  # a folder begun under other rules holds other sentences
    }


@hydra_app("backtranslate", BacktranslateConfig)
def main(cfg: DictConfig) -> None:
    from transformer.runs.loading import checkpoint_paths, load  # torch: see transformer.cli

    with user_errors():
        if cfg.decoding.n_best != 1:
            raise UserError("back-translation keeps one translation per sentence: decoding.n_best=1")
        if (cfg.input is None) == (not given(source_config(cfg.source, "source"))):
            raise UserError("give the text to back-translate: input=PATH (or input=[A,B]) or source.*: one of them")
        output = Path(cfg.output)
        lock_run_dir(output, job="back-translation", elsewhere="output=DIR")
        loaded = load(cfg.checkpoint, device=cfg.device)
        data = loaded.config.data
        inputs, lines = monolingual(cfg, data)
        translator = loaded.translator(cfg.decoding)  # refuses a tag the model lacks
        job = job_record(cfg, loaded, checkpoint_paths(cfg.checkpoint), inputs)
        if backtranslation.start(output, job):
            log.info("%s already holds this back-translation, complete", output)
            return
        evaluation = source_sentences(data, [data.val_split, *evaluation_splits(data)])
        counts: dict[str, int] = {}
        sentences = backtranslation.select_sentences(
            lines, evaluation, source_sentences(data, [data.train_split]), counts
        )
        langs = (job["src_lang"], job["tgt_lang"])
        translate = functools.partial(backtranslation.translate_chunk, translator)
        start = time.perf_counter()
        sink = backtranslation.chunk_folder(output, langs)
        done = translate_in_chunks(sentences, translate, sink, cfg.chunk_lines, show_progress(cfg.progress))
        seconds = time.perf_counter() - start
        log.info(
            "back-translated %d sentences in %.1f s (%.1f sentences/s)",
            done.translated,
            seconds,
            done.translated / max(seconds, 1e-9),
        )
        dropped = ", ".join(f"{rule} {counts[rule]:,}" for rule in backtranslation.SELECTION_RULES)
        log.info("%s lines read; dropped: %s; %s sentences kept", f"{counts['read']:,}", dropped, f"{done.lines:,}")
        backtranslation.finish(output, job, langs, done.chunks, {**counts, "kept": done.lines})
        log.info("wrote %s/train.%s and train.%s: use it with +data.extra_train.NAME.dir=%s", output, *langs, output)


if __name__ == "__main__":
    main()
