"""`transformer-translate`: translate sentences given inline, in a file, or on stdin.

Translations alone go to stdout, one line per input line in input order (an
empty line stays empty); logs and progress go to stderr. With decoding.n_best > 1
each input line gives n_best lines "LINE<TAB>SCORE<TAB>TRANSLATION".
"""

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from transformer.checkpoint import load_checkpoint
from transformer.cli import CONFIG_PATH, user_errors
from transformer.config import check_config
from transformer.corpus import read_lines
from transformer.runtime import pick_device
from transformer.translator import Translator


def interactive(translator: Translator) -> None:
    """Translate each line as it is typed, until end of input."""
    print("Type a sentence and press Enter; Ctrl-D to quit.", file=sys.stderr)
    while True:
        try:
            line = input("> ")
        except EOFError:
            print(file=sys.stderr)
            return
        print(translator.translate([line])[0], flush=True)


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="translate")
def main(cfg: DictConfig) -> None:
    with user_errors():
        check_config(cfg)
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
        if cfg.decoding.n_best > 1:  # n-best lists: "LINE<TAB>SCORE<TAB>TRANSLATION", best first
            for number, hyps in enumerate(translator.translate_nbest(lines, progress=len(lines) > 100), 1):
                for text, score in hyps:
                    print(f"{number}\t{score:.4f}\t{text}")
            return None
        for translation in translator.translate(lines, progress=len(lines) > 100):
            print(translation)


if __name__ == "__main__":
    main()
