"""`transformer-translate`: translate sentences given inline, in a file, or on stdin.

Translations alone go to stdout, one line per input line in input order (an
empty line stays empty); logs and progress go to stderr. With decoding.n_best > 1
each input line gives n_best lines "LINE<TAB>SCORE<TAB>TRANSLATION"; a line left
untranslated (blank, too long, or not UTF-8) gives one line "LINE<TAB>0.0000<TAB>".
A line that is not valid UTF-8 is logged by its number and left untranslated; the
other lines are translated, and the command then exits with status 2. With
split_sentences=true each line is split into sentences (a paragraph per line), which
are translated and joined back on one line.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from transformer.cli import hydra_app, user_errors
from transformer.config import TranslateConfig
from transformer.errors import UserError
from transformer.sources import decode_line, raw_lines
from transformer.splitting import split_line

if TYPE_CHECKING:
    from transformer.translator import Translator

log = logging.getLogger(__name__)


def decode_input(raw: Iterable[bytes], name: str, bad: list[int], start: int = 1) -> list[str]:
    """Input lines as text; a line that is not UTF-8 is logged, becomes '' and its number goes to `bad`."""
    lines = []
    for number, line in enumerate(raw, start=start):
        try:
            lines.append(decode_line(line, f"{name} line {number}"))
        except UserError as err:
            log.warning("%s; it is left untranslated (an empty output line)", err)
            bad.append(number)
            lines.append("")
    return lines


def interactive(translator: Translator, bad: list[int]) -> None:
    """Translate each line as it is typed, until end of input (Ctrl-D); prompts go to stderr."""
    print("Type a sentence and press Enter; Ctrl-D quits.", file=sys.stderr)
    number = 0
    while True:
        print("> ", end="", file=sys.stderr, flush=True)
        raw = sys.stdin.buffer.readline()
        if not raw:
            print(file=sys.stderr)
            return
        number += 1
        line = decode_input([raw], "input", bad, start=number)[0]
        print(translator.translate([line])[0], flush=True)


def write_output(translator: Translator, results: list, n_best: int) -> None:
    """Best translation per input line, or with n_best > 1 "LINE<TAB>SCORE<TAB>TRANSLATION" lines
    (one "LINE<TAB>0.0000<TAB>" line for a line left untranslated)."""
    for number, (_, hyps) in enumerate(results, start=1):
        texts = translator.detokenize(hyps)
        if n_best == 1:
            print(texts[0] if texts else "")
        elif not hyps:
            print(f"{number}\t{0.0:.4f}\t")
        for text, hyp in zip(texts if n_best > 1 else [], hyps):
            print(f"{number}\t{hyp.score:.4f}\t{text}")


def translate_paragraphs(translator: Translator, lines: list[str]) -> None:
    """split_sentences=true: every line split into sentences, all translated together, joined back line by line."""
    layouts = [split_line(line) for line in lines]
    sentences = [s for layout in layouts for s in layout]
    translations = iter(translator.translate(sentences, progress=len(sentences) > 100))
    for layout in layouts:
        print(" ".join(next(translations) for _ in layout))


def plot_attention(translator: Translator, results: list, directory: Path, layer: int | None) -> None:
    """One cross-attention heatmap PNG per translated line: DIR/0001.png, DIR/0002.png, ..."""
    from transformer.plotting import attention_figure, save_figure  # matplotlib: seconds of start-up, only here

    for number, (src_ids, hyps) in enumerate(results, start=1):
        if hyps:
            fig = attention_figure(translator.model, translator.tokenizer, src_ids, hyps[0].tokens, layer)
            save_figure(fig, directory / f"{number:04d}.png")
    log.info("attention heatmaps written to %s", directory)


def read_input(cfg: DictConfig, bad: list[int]) -> list[str]:
    """The lines to translate: inline sentences, the `input` file, or stdin (not a terminal)."""
    if cfg.sentences:
        return list(cfg.sentences)
    if cfg.input:
        return decode_input(raw_lines(Path(cfg.input)), str(cfg.input), bad)
    return decode_input(sys.stdin.buffer, "input", bad)


def translate_lines(cfg: DictConfig, translator: Translator, lines: list[str]) -> None:
    """Print the translations of `lines` as the settings ask (paragraphs, n-best) and plot their attention."""
    if cfg.split_sentences:
        return translate_paragraphs(translator, lines)
    results = translator.search(lines, progress=len(lines) > 100)
    write_output(translator, results, cfg.decoding.n_best)
    if cfg.plot_attention:
        plot_attention(translator, results, Path(cfg.plot_attention), cfg.plot_layer)


@hydra_app("translate", TranslateConfig)
def main(cfg: DictConfig) -> None:
    from transformer.engines import load_engine  # torch: see transformer.cli
    from transformer.ensemble import checkpoint_paths

    with user_errors():
        if cfg.plot_attention and Path(cfg.plot_attention).is_file():
            raise UserError(f"plot_attention={cfg.plot_attention} is a file; give a folder for the PNG files")
        if cfg.plot_attention and len(checkpoint_paths(cfg.checkpoint)) > 1:
            raise UserError("plot_attention draws one model's attention: give one checkpoint=RUN_DIR")
        if cfg.split_sentences and (cfg.decoding.n_best > 1 or cfg.plot_attention):
            raise UserError("split_sentences=true prints one line per input line: no n_best > 1 or plot_attention")
        _, translator = load_engine(cfg.checkpoint, cfg.engine, cfg.decoding, cfg.device)
        bad: list[int] = []
        if not (cfg.sentences or cfg.input) and sys.stdin.isatty():
            interactive(translator, bad)
        else:
            translate_lines(cfg, translator, read_input(cfg, bad))
        if bad:
            shown = ", ".join(map(str, bad[:10])) + (", ..." if len(bad) > 10 else "")
            raise UserError(
                f"{len(bad)} input line(s) not valid UTF-8 (line {shown}) were left untranslated; "
                "re-encode the input as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
            )


if __name__ == "__main__":
    main()
