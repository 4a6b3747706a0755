"""Scoring given translations (`transformer-score`: one teacher-forced pass per batch) against translating the same
sentences (beam search), on one test split, in the same process, interleaved round by round (medians).

    python scripts/benchmark_scoring.py --checkpoint runs/fren --json

The `--json` last line holds `cpu`, the settings, `sentences`, `seconds` {translate, score} and `speedup`.
"""

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from transformer.bench.serving import read_sentences
from transformer.bench.timing import cpu_description
from transformer.core.config import DecodingConfig
from transformer.runs.loading import load

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a run folder or checkpoint file")
    parser.add_argument("--data", default=str(SHARED), help="folder of SPLIT.LANG.gz files")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--precision", default="auto", help="decoding.precision (auto: int8 where the CPU runs it)")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    loaded = load(args.checkpoint, device="cpu")
    cfg = DecodingConfig(strategy="beam", beam_size=args.beam, batch_size=args.batch, precision=args.precision)
    translator = loaded.translator(cfg)
    sources = read_sentences(f"{args.data}/{args.split}.fr.gz", 10**9)
    references = read_sentences(f"{args.data}/{args.split}.en.gz", 10**9)
    runs = {"translate": lambda: translator.translate(sources), "score": lambda: translator.score(sources, references)}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    seconds = {name: statistics.median(t) for name, t in times.items()}
    speedup = seconds["translate"] / seconds["score"]
    print(
        f"{args.split}: {len(sources)} sentences, beam {args.beam}, batch {args.batch}, {translator.precision}, "
        f"{torch.get_num_threads()} threads; {cpu_description()}"
    )
    print(f"translate {seconds['translate']:.2f} s, score {seconds['score']:.2f} s: scoring {speedup:.1f}x faster")
    if args.json:
        settings = {"split": args.split, "beam": args.beam, "batch": args.batch, "precision": translator.precision}
        result = {"cpu": cpu_description(), **settings, "sentences": len(sources), "seconds": seconds}
        print(json.dumps(result | {"speedup": round(speedup, 2)}))


if __name__ == "__main__":
    main()
