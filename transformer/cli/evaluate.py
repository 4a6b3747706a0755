"""`transformer-evaluate`: sacreBLEU and chrF of a checkpoint on a corpus split or given files."""

import logging
import time
from pathlib import Path

import sacrebleu
from omegaconf import DictConfig

from transformer.cli import hydra_app, user_errors
from transformer.core.config import DecodingConfig, EvaluateConfig
from transformer.core.errors import UserError
from transformer.core.files import atomic_write_text
from transformer.core.strategies import STRATEGIES
from transformer.data.corpus import fetch, text_source
from transformer.data.sources import Source, build_source, given, source_config

log = logging.getLogger(__name__)


def decoding_label(d: DictConfig) -> str:
    """The decoding in a file name, so two decodings never share one: its strategy's label (greedy, beam5,
    sample-t1-k0-p0.9-seed0, beam5-lp0.6), plus every length setting that differs from its default (e.g. -min3) and a
    tag (-tagbt); `main` adds the precision it ran in."""
    label, default = STRATEGIES[d.strategy].label(d), DecodingConfig()
    short = {"max_len_a": "a", "max_len_b": "b", "min_len": "min", "no_repeat_ngram_size": "norepeat"}
    for key, tag in short.items():
        if d[key] != getattr(default, key):
            label += f"-{tag}{d[key]:g}" if isinstance(d[key], float) else f"-{tag}{d[key]}"
    return label + (f"-tag{d.tag}" if d.tag else "")


def evaluation_source(cfg: DictConfig, data_cfg: DictConfig) -> tuple[str, Source]:
    """The pairs to score and their name: explicit `src_file`/`ref_file`, or a `source`, else `split` of the
    checkpoint's corpus."""
    langs, settings = (data_cfg.src_lang, data_cfg.tgt_lang), source_config(cfg.source, "source")
    if cfg.src_file or cfg.ref_file:
        if not (cfg.src_file and cfg.ref_file) or given(settings):
            raise UserError("give both src_file=PATH and ref_file=PATH, or source.*, or neither (then split=NAME)")
        return Path(cfg.src_file).name, text_source(Path(cfg.src_file), cfg.ref_file, *langs, "src_file/ref_file")
    if given(settings):
        return Path(settings.path or settings.src).name, build_source(settings, *langs, "source")
    return cfg.split, fetch(data_cfg, [cfg.split])[cfg.split]


@hydra_app("evaluate", EvaluateConfig)
def main(cfg: DictConfig) -> None:
    from transformer.runs.loading import load  # torch: see transformer.cli

    with user_errors():
        if cfg.output and Path(cfg.output).is_dir():
            raise UserError(f"output={cfg.output} is a folder; give the hypotheses file's name (or leave output out)")
        ckpt = load(cfg.checkpoint, engine=cfg.engine, device=cfg.device)
        translator = ckpt.translator(cfg.decoding)
        name, source = evaluation_source(cfg, ckpt.config.data)
        pairs = list(source.pairs())
        sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
        start = time.perf_counter()
        hyps = translator.translate(sources, progress=True)
        seconds = time.perf_counter() - start
        log.info("translated %d sentences in %.1f s (%.1f sentences/s)", len(hyps), seconds, len(hyps) / seconds)
        members = len(ckpt.members)
        ensemble = f"-ensemble{members}" if members > 1 else ""
        label = f"{decoding_label(cfg.decoding)}-{translator.precision}{ensemble}"  # the precision it ran in
        output = Path(cfg.output) if cfg.output else ckpt.path.with_name(f"{ckpt.path.stem}.{name}.{label}.hyp")
        atomic_write_text(output, "".join(line + "\n" for line in hyps))
        bleu, chrf = sacrebleu.BLEU(), sacrebleu.CHRF()
        decoded = f"decoded in {translator.precision}"  # validation and transformer-results state it too
        print(f"{bleu.corpus_score(hyps, [refs])}  ({bleu.get_signature()}; {decoded})")
        print(f"{chrf.corpus_score(hyps, [refs])}  ({chrf.get_signature()}; {decoded})")
        log.info("%d hypotheses written to %s (step %s)", len(hyps), output, ckpt.meta.get("step"))


if __name__ == "__main__":
    main()
