"""sacreBLEU of one checkpoint in each inference precision of ours, and in CTranslate2's on the same weights.

Our engine decodes in fp32, bf16 and int8 (`decoding.precision`; a precision this CPU lacks runs as fp32 and is
left out); when `ctranslate2` is installed, the checkpoint is exported with `transformer-export`'s code and
CTranslate2 decodes it in float32 and int8 (its `compute_type`). Greedy and beam 5 are the `configs/decoding`
presets. Sentences per second are printed beside each score (one run each: measure speed with
`scripts/benchmark_decoding.py`).

    python scripts/precision_bleu.py outputs/RUN                        # test_2016_flickr
    python scripts/precision_bleu.py outputs/RUN --split val --json     # ... and a JSON last line
    python scripts/precision_bleu.py outputs/RUN --batch 1              # one sentence at a time (int8's own kernel)
"""

import argparse
import json
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from itertools import chain
from pathlib import Path

import sacrebleu
import torch

from transformer.checkpoint import load_checkpoint
from transformer.cli import CONFIG_PATH
from transformer.config import DecodingConfig, InferencePrecision, choices
from transformer.corpus import fetch
from transformer.fast_inference.kernels import cpu_isa, runs
from transformer.precision import COMPUTE_TYPES
from transformer.results import decoding
from transformer.translator import TextTranslator, Translator

STRATEGIES = {"greedy": "greedy", "beam": "beam:beam_size=5"}  # name -> configs/decoding preset and overrides


def preset(spec: str, batch: int) -> DecodingConfig:
    """The decoding settings of `spec` (a `STRATEGIES` value), with `batch` sentences a batch (0: the preset's)."""
    cfg = decoding(spec, Path(CONFIG_PATH))
    return replace(cfg, batch_size=batch) if batch else cfg


def ours(ckpt, batch: int) -> Iterator[tuple[str, str, str, TextTranslator]]:
    """(engine, precision, strategy, translator) of our engine in each precision this CPU runs as itself (made one
    at a time: CTranslate2 comes after, since a process that has run it runs torch slower)."""
    for precision in choices(InferencePrecision):
        if runs(precision) != precision:
            continue
        for strategy, spec in STRATEGIES.items():
            cfg = replace(preset(spec, batch), precision=precision)
            yield "ours", precision, strategy, Translator(ckpt.model, ckpt.tokenizer, cfg)


def ctranslate2(ckpt, folder: Path, batch: int) -> Iterator[tuple[str, str, str, TextTranslator]]:
    """The same for CTranslate2 float32 and int8 on `ckpt` exported to `folder`; nothing without ctranslate2."""
    try:
        from transformer.cli.export import export
        from transformer.export.engine import CTranslate2Translator
    except ImportError:
        return
    export(ckpt, "ctranslate2", folder)
    threads = torch.get_num_threads()
    for compute_type in COMPUTE_TYPES.values():
        for strategy, spec in STRATEGIES.items():
            cfg = preset(spec, batch)
            translator = CTranslate2Translator(str(folder), cfg, compute_type=compute_type, intra_threads=threads)
            yield "ctranslate2", compute_type, strategy, translator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="run folder or checkpoint file")
    parser.add_argument("--split", default="test_2016_flickr", help="a split of the checkpoint's corpus")
    parser.add_argument("--sentences", type=int, default=0, help="the first N pairs only; 0 = all")
    parser.add_argument("--threads", type=int, default=0, help="torch (and CTranslate2) threads; 0 = torch's default")
    parser.add_argument("--batch", type=int, default=0, help="sentences a batch; 0 = the presets' (64, 32)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the results")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    ckpt = load_checkpoint(args.checkpoint, "cpu")
    pairs = list(fetch(ckpt.config.data, [args.split])[args.split].pairs())
    pairs = pairs[: args.sentences or len(pairs)]
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    batch, threads = f"batch {args.batch}" if args.batch else "the presets' batches", torch.get_num_threads()
    print(f"{args.checkpoint}, {args.split} ({len(pairs)} sentences), {batch}, {cpu_isa()}, {threads} threads")
    print(f"{'engine':12} {'precision':9} {'strategy':8} {'BLEU':>6} {'sent/s':>7}")
    records = []
    with tempfile.TemporaryDirectory(prefix="precision_bleu_") as tmp:
        engines = chain(ours(ckpt, args.batch), ctranslate2(ckpt, Path(tmp) / "ct2", args.batch))
        for engine, precision, strategy, translator in engines:
            start = time.perf_counter()
            hyps = translator.translate(sources)
            speed = len(sources) / (time.perf_counter() - start)
            bleu = sacrebleu.corpus_bleu(hyps, [refs]).score
            print(f"{engine:12} {precision:9} {strategy:8} {bleu:6.2f} {speed:7.1f}")
            records.append(dict(engine=engine, precision=precision, strategy=strategy, bleu=bleu, sent_per_s=speed))
    if args.json:
        summary = {"checkpoint": args.checkpoint, "split": args.split, "batch": args.batch, "cpu": cpu_isa()}
        print(json.dumps({**summary, "records": records}))


if __name__ == "__main__":
    main()
