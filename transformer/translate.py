"""`transformer-translate`: translate sentences given inline, in a file, or on stdin.

Translations alone go to stdout, one line per input line in input order (an
empty line stays empty); logs and progress go to stderr. With decoding.n_best > 1
each input line gives n_best lines "LINE<TAB>SCORE<TAB>TRANSLATION". With split_sentences=true each
line is split into sentences (a paragraph per line), which are translated and joined back on one line.
"""

import logging
import sys
from pathlib import Path

from omegaconf import DictConfig

from transformer.checkpoint import load_checkpoint
from transformer.cli import hydra_app, user_errors
from transformer.config import TranslateConfig, check_config
from transformer.corpus import read_lines
from transformer.errors import UserError
from transformer.plotting import attention_figure, save_figure
from transformer.runtime import pick_device
from transformer.splitting import split_line
from transformer.translator import Translator

log = logging.getLogger(__name__)


def interactive(translator: Translator) -> None:
    """Translate each line as it is typed, until end of input (Ctrl-D); prompts go to stderr."""
    print("Type a sentence and press Enter; Ctrl-D quits.", file=sys.stderr)
    while True:
        print("> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line:
            print(file=sys.stderr)
            return
        print(translator.translate([line.rstrip("\r\n")])[0], flush=True)


def write_output(translator: Translator, results: list, n_best: int) -> None:
    """Best translation per input line, or with n_best > 1 "LINE<TAB>SCORE<TAB>TRANSLATION" lines."""
    for number, (_, hyps) in enumerate(results, start=1):
        texts = translator.tokenizer.decode_tgt([h.tokens for h in hyps])
        if n_best == 1:
            print(texts[0] if texts else "")
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
    for number, (src_ids, hyps) in enumerate(results, start=1):
        if hyps:
            fig = attention_figure(translator.model, translator.tokenizer, src_ids, hyps[0].tokens, layer)
            save_figure(fig, directory / f"{number:04d}.png")
    log.info("attention heatmaps written to %s", directory)


@hydra_app("translate", TranslateConfig)
def main(cfg: DictConfig) -> None:
    with user_errors():
        check_config(cfg)
        if cfg.split_sentences and (cfg.decoding.n_best > 1 or cfg.plot_attention):
            raise UserError("split_sentences=true prints one line per input line: no n_best > 1 or plot_attention")
        ckpt = load_checkpoint(cfg.checkpoint, pick_device(cfg.device))
        translator = Translator(ckpt.model, ckpt.tokenizer, cfg.decoding)
        if cfg.sentences:
            lines = list(cfg.sentences)
        elif cfg.input:
            lines = list(read_lines(Path(cfg.input)))
        elif sys.stdin.isatty():
            return interactive(translator)
        else:
            lines = [line.rstrip("\r\n") for line in sys.stdin]
        if cfg.split_sentences:
            return translate_paragraphs(translator, lines)
        results = translator.search(lines, progress=len(lines) > 100)
        write_output(translator, results, cfg.decoding.n_best)
        if cfg.plot_attention:
            plot_attention(translator, results, Path(cfg.plot_attention), cfg.plot_layer)


if __name__ == "__main__":
    main()
