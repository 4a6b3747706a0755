"""How many sentences of a test split a checkpoint translates differently at one batch size than at another, per
precision: a sentence's translation should never depend on the sentences decoded beside it.

    python scripts/batch_invariance.py --checkpoint runs/fren --split test_2017_flickr --lines 300 --json

Each precision translates the first `--lines` sentences at every `--batches` size (greedy by default, or
`--strategy beam`); the `--json` last line holds `cpu`, the settings and, per precision, the number of sentences
whose translation at each batch size differs from the first size's.
"""

import argparse
import json
from pathlib import Path

from transformer.bench.serving import read_sentences
from transformer.bench.timing import cpu_description
from transformer.core.config import DecodingConfig
from transformer.runs.loading import load

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a run folder or checkpoint file")
    parser.add_argument("--data", default=str(SHARED), help="folder of SPLIT.fr.gz files")
    parser.add_argument("--split", default="test_2017_flickr")
    parser.add_argument("--lines", type=int, default=300, help="the first LINES sentences of the split")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64], help="decoding.batch_size values")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "auto"], help="decoding.precision values")
    parser.add_argument("--strategy", choices=["greedy", "beam"], default="greedy")
    parser.add_argument("--compiled", action="store_true", help="decoding.compiled=true (the compiled decoder step)")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def differing(loaded, sources: list[str], precision: str, args: argparse.Namespace) -> tuple[str, dict[int, int]]:
    """The precision the translator ran in, and per batch size the sentences translated unlike at the first size."""
    translations, ran = {}, precision
    for batch in args.batches:
        cfg = DecodingConfig(strategy=args.strategy, batch_size=batch, precision=precision, compiled=args.compiled)
        translator = loaded.translator(cfg)
        translations[batch], ran = translator.translate(sources), translator.precision
    first = translations[args.batches[0]]
    return ran, {batch: sum(a != b for a, b in zip(first, out)) for batch, out in translations.items()}


def main() -> None:
    args = arguments()
    loaded = load(args.checkpoint, device="cpu")
    sources = read_sentences(f"{args.data}/{args.split}.fr.gz", args.lines)
    engine = "compiled step" if args.compiled else "eager"
    print(f"{args.split}: first {len(sources)} sentences, {args.strategy}, {engine}; {cpu_description()}")
    results = {}
    for precision in args.precisions:
        ran, counts = differing(loaded, sources, precision, args)
        results[f"{precision} ({ran})"] = counts
        apart = ", ".join(f"batch {b}: {n}" for b, n in counts.items() if b != args.batches[0])
        print(f"{precision} ({ran}): differ from batch {args.batches[0]} at {apart}")
    if args.json:
        settings = {"split": args.split, "lines": len(sources), "strategy": args.strategy, "compiled": args.compiled}
        settings["batches"] = args.batches
        print(json.dumps({"cpu": cpu_description(), **settings, "differing": results}))


if __name__ == "__main__":
    main()
