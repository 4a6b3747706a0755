"""`transformer-evaluate`: sacreBLEU and chrF of a checkpoint on a corpus split or given files."""

import logging
import os
from pathlib import Path

import sacrebleu
from omegaconf import DictConfig

from transformer.checkpoint import load_checkpoint
from transformer.cli import hydra_app, user_errors
from transformer.config import EvaluateConfig, check_config
from transformer.corpus import ParallelFiles, fetch, read_parallel
from transformer.errors import UserError
from transformer.runtime import pick_device
from transformer.translator import Translator

log = logging.getLogger(__name__)


def write_lines(path: Path, lines: list[str]) -> None:
    """Write one line per item atomically (temporary file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, path)


def test_files(cfg: DictConfig, data_cfg: DictConfig) -> ParallelFiles:
    """The files to score: explicit `src_file`/`ref_file`, else `split` of the checkpoint's corpus."""
    if cfg.src_file or cfg.ref_file:
        if not (cfg.src_file and cfg.ref_file):
            raise UserError("give both src_file=PATH and ref_file=PATH, or neither (then split=NAME is used)")
        return ParallelFiles(Path(cfg.src_file), Path(cfg.ref_file))
    return fetch(data_cfg, [cfg.split])[cfg.split]


@hydra_app("evaluate", EvaluateConfig)
def main(cfg: DictConfig) -> None:
    with user_errors():
        check_config(cfg)
        ckpt = load_checkpoint(cfg.checkpoint, pick_device(cfg.device))
        files = test_files(cfg, ckpt.config.data)
        pairs = list(read_parallel(files))
        sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
        translator = Translator(ckpt.model, ckpt.tokenizer, cfg.decoding)
        hyps = translator.translate(sources, progress=True)
        name = cfg.split if not cfg.src_file else Path(cfg.src_file).name
        strategy = "greedy" if cfg.decoding.strategy == "greedy" else f"beam{cfg.decoding.beam_size}"
        output = Path(cfg.output) if cfg.output else ckpt.path.with_name(f"{ckpt.path.stem}.{name}.{strategy}.hyp")
        write_lines(output, hyps)
        bleu, chrf = sacrebleu.BLEU(), sacrebleu.CHRF()
        print(f"{bleu.corpus_score(hyps, [refs])}  ({bleu.get_signature()})")
        print(f"{chrf.corpus_score(hyps, [refs])}  ({chrf.get_signature()})")
        log.info("%d hypotheses written to %s (step %s)", len(hyps), output, ckpt.meta.get("step"))


if __name__ == "__main__":
    main()
