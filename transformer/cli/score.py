"""`transformer-score`: the score of given translations (forced decoding), one output line per pair.

Each line is "SCORE<TAB>LOGPROB", then with tokens=true each token's log-probability (space-separated, EOS last),
with alignments=true the pair's word alignment (Pharaoh). Scores follow `transformer.decoding.scoring`: a target is
scored as beam search scores its own hypotheses. A pair that cannot be scored gives an empty line, and a note on
stderr says which and why; the other pairs are scored. The pairs come from any corpus source (source.src and
source.tgt, source.path: TSV, TMX, a dataset) or from stdin as SOURCE<TAB>TARGET lines, and are read, scored and
written `chunk_lines` at a time, resumably into output=FILE, as `transformer-translate` does.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from transformer.cli import hydra_app, user_errors
from transformer.cli.translate import BadLines, decode_lines, model_job
from transformer.core.config import ScoreConfig
from transformer.core.errors import UserError
from transformer.data.sources import build_source, given, source_config
from transformer.decoding.chunks import Chunk, ChunkedFile, StreamSink, lines_text, show_progress, translate_in_chunks

if TYPE_CHECKING:
    from transformer.decoding.alignment import Aligner
    from transformer.decoding.translator import TextTranslator
    from transformer.runs.loading import Loaded

log = logging.getLogger(__name__)


def pair_lines(cfg: DictConfig, model: DictConfig, bad: BadLines) -> Iterable[str]:
    """Each pair as a line SOURCE<TAB>TARGET: the rows of the corpus `source` names (none skipped; a TMX or a
    dataset in the languages of the `model`'s training config), or stdin's lines."""
    settings = source_config(cfg.source, "source")
    if given(settings):
        langs = (OmegaConf.select(model, f"data.{side}_lang", default=side) for side in ("src", "tgt"))
        source = build_source(settings, *langs, "source")
        flat = str.maketrans("\t\n", "  ")  # a tab inside a side is whitespace to SentencePiece
        return (f"{src.translate(flat)}\t{tgt.translate(flat)}" for src, tgt in source.rows(Counter()))
    if sys.stdin.isatty():
        raise UserError(
            "give the pairs to score: source.src=FILE source.tgt=FILE, source.path=FILE (TSV, TMX, a dataset), "
            "or pipe lines SOURCE<TAB>TARGET"
        )
    return decode_lines(sys.stdin.buffer, "input", bad)


def score_line(result, tokens: bool, links: str | None) -> str:
    """One scored pair's output line."""
    fields = [f"{result.score:.4f}", f"{result.logprob:.4f}"]
    if tokens:
        fields.append(" ".join(f"{x:.4f}" for x in result.token_scores))
    return "\t".join(fields + ([links] if links is not None else []))


def score_chunk(cfg: DictConfig, translator: TextTranslator, aligner: Aligner | None, chunk: Chunk, bar: tqdm) -> str:
    """The output lines of one chunk of SOURCE<TAB>TARGET lines; a note for each pair left unscored."""
    from transformer.decoding.alignment import pharaoh
    from transformer.decoding.given_pairs import Unscored

    fields = [line.split("\t") for line in chunk.lines]
    pairs = translator.given(
        [f[0] if len(f) == 2 else "" for f in fields], [f[1] if len(f) == 2 else "" for f in fields]
    )
    results = translator.score(pairs)
    for i, line in enumerate(chunk.lines):
        if len(fields[i]) != 2 and line.strip():
            results[i] = Unscored(f"{len(fields[i])} tab-separated fields, not 2 (SOURCE<TAB>TARGET)")
    links: dict[int, str] = {}  # with an aligner, each scored pair's alignment
    if aligner is not None:
        done = [i for i, r in enumerate(results) if not isinstance(r, Unscored)]
        src_ids, tgt_ids = [pairs.src_ids[i] for i in done], [pairs.tgt_ids[i] for i in done]
        links = dict(zip(done, map(pharaoh, aligner.links(src_ids, tgt_ids, cfg.decoding.batch_size))))
    out = []
    for number, (i, result) in enumerate(enumerate(results), start=chunk.start + 1):
        if isinstance(result, Unscored):
            log.warning("line %d: %s; it is left unscored (an empty line)", number, result.reason)
            out.append("")
        else:
            out.append(score_line(result, cfg.tokens, links.get(i)))
    bar.update(len(chunk.lines))
    return lines_text(out)


def job_record(cfg: DictConfig, loaded: Loaded) -> dict:
    """What a chunk's scores depend on besides its lines."""
    return model_job(cfg, loaded) | {"tokens": cfg.tokens}


def check_settings(cfg: DictConfig) -> None:
    """Refuse what cannot work before the model loads."""
    if cfg.alignments and cfg.engine != "pytorch":
        raise UserError("alignments=true reads our model's attention: use engine=pytorch with a checkpoint")
    if cfg.output and Path(cfg.output).is_dir():
        raise UserError(f"output={cfg.output} is a folder; give a file name to write the scores to")


@hydra_app("score", ScoreConfig)
def main(cfg: DictConfig) -> None:
    from transformer.runs.loading import load  # torch: see transformer.cli

    with user_errors():
        check_settings(cfg)
        loaded = load(cfg.checkpoint, engine=cfg.engine, device=cfg.device)
        translator = loaded.translator(cfg.decoding)
        aligner = loaded.aligner(cfg.alignment) if cfg.alignments else None
        bad = BadLines()
        lines = pair_lines(cfg, loaded.config, bad)
        sink = ChunkedFile(Path(cfg.output), job_record(cfg, loaded)) if cfg.output else StreamSink(sys.stdout)
        score = functools.partial(score_chunk, cfg, translator, aligner)
        counts = translate_in_chunks(lines, score, sink, cfg.chunk_lines, show_progress(cfg.progress), desc="scoring")
        if isinstance(sink, ChunkedFile):
            sink.finish(counts.chunks)
            log.info("wrote the scores of %d pairs to %s", counts.lines, cfg.output)
        bad.check()


if __name__ == "__main__":
    main()
