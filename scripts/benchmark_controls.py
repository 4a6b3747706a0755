"""Steering a translation, measured as the papers measure it: constraints drawn from the references, and prefixes.

Constraints (Post & Vilar 2018; Hu et al. 2019): the checkpoint translates each split with plain beam search; each
sentence then gets 1-3 phrases of 1-3 words (letters only) of its reference that its translation lacks
(`transformer.bench.controls.draw_constraints`, seeded), and is translated again holding them. The table gives the
share of constraints found in their output (as whole words), BLEU of the whole split without and with them, and the
seconds of constrained beam against plain beam over the constrained sentences at batch 32 (`--rounds` rounds,
medians) and one sentence at a time (the first `--latency-sentences`).

Prefixes (interactive translation): each reference's first half of words, ending in a space, is the prefix; the
table gives BLEU of the completions against the rest of the references and the share of completions whose first word
is the reference's next word. Ours (an unfinished word completed; after a space the next piece starts a word), ours
forcing the prefix's pieces as CTranslate2 does, and CTranslate2 on the checkpoint's export, all in fp32: the last
two should agree.

    python scripts/benchmark_controls.py --checkpoint runs/fren --json
    python scripts/benchmark_controls.py --checkpoint runs/fren --limit 100 --rounds 1   # a quick look

The `--json` last line holds `cpu`, the settings and one record per split: `constraints` (`sentences`,
`constrained`, `phrases`, `found`, `bleu_plain`, `bleu_constrained`, `seconds` {batch: {plain, constrained}},
`slowdown` {batch: ratio}) and `prefix` ({engine: {bleu, next_word}}).
"""

import argparse
import json
import random
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import sacrebleu
import torch

from transformer.bench.controls import (
    completions_of,
    coverage,
    draw_constraints,
    half_prefixes,
    next_word_accuracy,
)
from transformer.bench.serving import read_sentences
from transformer.bench.timing import cpu_description, measure
from transformer.cli.export import export
from transformer.core.config import DecodingConfig
from transformer.runs.checkpoint import load_checkpoint
from transformer.runs.loading import load

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a run folder or checkpoint file")
    parser.add_argument(
        "--data",
        default=None,
        help="folder of SPLIT.LANG.gz files (default: data/multi30k, else ../shared/data/multi30k)",
    )
    parser.add_argument("--splits", nargs="+", default=["test_2016_flickr", "test_2017_flickr"])
    parser.add_argument("--src-lang", default="fr")
    parser.add_argument("--tgt-lang", default="en")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--precision", default="auto", help="ours for the constraints (the prefixes: fp32)")
    parser.add_argument("--limit", type=int, default=0, help="sentences per split; 0 = all")
    parser.add_argument("--latency-sentences", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-ctranslate2", action="store_true", help="leave CTranslate2 out")
    parser.add_argument("--json", action="store_true", help="a JSON last line")
    return parser.parse_args()


def data_folder(given: str | None) -> Path:
    if given:
        return Path(given)
    local = Path("data/multi30k")
    return local if (local / "test_2016_flickr.fr.gz").is_file() else SHARED


def constraint_figures(translator, sources: list[str], references: list[str], args) -> dict:
    """Coverage, BLEU without and with constraints, and constrained against plain beam's seconds."""
    plain = translator.translate(sources)
    rng = random.Random(args.seed)
    drawn = [draw_constraints(ref, hyp, rng) for ref, hyp in zip(references, plain)]
    chosen = [i for i, phrases in enumerate(drawn) if phrases]
    subset, phrases = [sources[i] for i in chosen], [drawn[i] for i in chosen]
    constrained = translator.translate(subset, constraints=phrases)
    found, total = coverage(constrained, phrases)
    merged = list(plain)
    for i, out in zip(chosen, constrained):
        merged[i] = out
    seconds, slowdown = {}, {}
    for batch, count in ((32, len(subset)), (1, args.latency_sentences)):
        t = translator.with_config(replace(translator.cfg, batch_size=batch))
        runs = {
            "plain": lambda t=t, n=count: t.translate(subset[:n]),
            "constrained": lambda t=t, n=count: t.translate(subset[:n], constraints=phrases[:n]),
        }
        seconds[batch] = measure(runs, args.rounds if batch == 32 else 1, torch.device("cpu"))
        slowdown[batch] = seconds[batch]["constrained"] / seconds[batch]["plain"]
    return {
        "sentences": len(sources),
        "constrained": len(chosen),
        "phrases": total,
        "found": found,
        "bleu_plain": sacrebleu.corpus_bleu(plain, [references]).score,
        "bleu_constrained": sacrebleu.corpus_bleu(merged, [references]).score,
        "seconds": seconds,
        "slowdown": slowdown,
    }


def prefix_figures(engines: dict, sources: list[str], references: list[str]) -> dict:
    """BLEU of the completions after half of each reference, and next-word accuracy, per engine."""
    prefixes, rests, nexts = half_prefixes(references)
    figures = {}
    for name, translator in engines.items():
        completions = completions_of(translator.translate(sources, prefixes=prefixes), prefixes)
        figures[name] = {
            "bleu": sacrebleu.corpus_bleu(completions, [rests]).score,
            "next_word": next_word_accuracy(completions, nexts),
        }
    return figures


def prefix_engines(checkpoint: str, loaded, beam: int, ctranslate2: bool, folder: Path) -> dict:
    """Ours (words completed), ours forcing pieces as CTranslate2 does, and CTranslate2 on an export: fp32, beam."""
    cfg = DecodingConfig(strategy="beam", beam_size=beam, precision="fp32", batch_size=32)
    ours = loaded.translator(cfg)
    as_ct2 = loaded.translator(cfg)
    as_ct2.spells_words = False
    engines = {"ours": ours, "ours_forcing_pieces": as_ct2}
    if ctranslate2:
        from transformer.decoding.ctranslate2_engine import CTranslate2Translator

        export(load_checkpoint(str(loaded.path)), "ctranslate2", folder / "ct2")
        threads = torch.get_num_threads()
        engines["ctranslate2"] = CTranslate2Translator(
            str(folder / "ct2"), cfg, compute_type="float32", intra_threads=threads
        )
    return engines


def main() -> None:
    args = arguments()
    cpu, _ = cpu_description()
    loaded = load(args.checkpoint, device="cpu")
    cfg = DecodingConfig(strategy="beam", beam_size=args.beam, precision=args.precision, batch_size=32)
    translator = loaded.translator(cfg)
    data = data_folder(args.data)
    records = {}
    with tempfile.TemporaryDirectory() as tmp:
        engines = prefix_engines(args.checkpoint, loaded, args.beam, not args.no_ctranslate2, Path(tmp))
        for split in args.splits:
            n = args.limit or 10**9
            sources = read_sentences(str(data / f"{split}.{args.src_lang}.gz"), n)
            references = read_sentences(str(data / f"{split}.{args.tgt_lang}.gz"), n)
            start = time.perf_counter()
            records[split] = {
                "constraints": constraint_figures(translator, sources, references, args),
                "prefix": prefix_figures(engines, sources, references),
            }
            show(split, records[split], time.perf_counter() - start)
    print(f"cpu: {cpu}; ours in {translator.precision}; beam {args.beam}; {torch.get_num_threads()} threads")
    if args.json:
        settings = {"beam": args.beam, "precision": translator.precision, "seed": args.seed, "rounds": args.rounds}
        print(json.dumps({"cpu": cpu, "checkpoint": args.checkpoint, "settings": settings, "splits": records}))


def show(split: str, record: dict, seconds: float) -> None:
    c = record["constraints"]
    print(f"\n{split} ({seconds:.0f} s)")
    print(f"  constraints: {c['found']}/{c['phrases']} found in {c['constrained']} of {c['sentences']} sentences")
    print(f"  BLEU without {c['bleu_plain']:.2f}, with {c['bleu_constrained']:.2f}")
    for batch, times in c["seconds"].items():
        print(
            f"  batch {batch}: plain {times['plain']:.2f} s, constrained {times['constrained']:.2f} s "
            f"({c['slowdown'][batch]:.2f}x)"
        )
    for engine, figures in record["prefix"].items():
        print(f"  prefix, {engine}: BLEU {figures['bleu']:.2f}, next word {100 * figures['next_word']:.1f}%")


if __name__ == "__main__":
    main()
