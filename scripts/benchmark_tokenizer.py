"""SentencePiece encode and decode time by batch size: one list call (its thread pool) against one call per sentence.

SentencePiece's list API starts a pool of threads on every call; for a few sentences that costs far more than
the work. `Tokenizer` calls it sentence by sentence below `transformer.data.tokenizer.POOL_FROM` sentences; this script
measures where the pool starts to pay on your machine (best of `--repeats` calls each).

    python scripts/benchmark_tokenizer.py --checkpoint outputs/RUN_DIR
"""

import argparse
import time
from functools import partial
from pathlib import Path

from transformer.data.sources import decode_line, raw_lines
from transformer.runs.checkpoint import load_checkpoint

DEFAULT_FILE = "/work/shared/data/multi30k/train.fr.gz"


def best_ms(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1000 * min(times)


def one_by_one(call, items: list) -> list:
    return [call(item) for item in items]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, help="run directory or .safetensors file (its tokenizer)")
    parser.add_argument("--file", default=DEFAULT_FILE, help="sentences, one per line (.gz or plain)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 32, 128, 512, 2048, 8192])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    tokenizer = load_checkpoint(args.checkpoint).tokenizer
    raw = zip(range(max(args.sizes)), raw_lines(Path(args.file)))
    lines = [decode_line(line, f"{args.file}:{i + 1}").strip() for i, line in raw]
    sp = tokenizer.src
    print("| sentences | encode, pool ms | encode, one by one ms | decode, pool ms | decode, one by one ms |")
    print("|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        batch = lines[:n]
        ids = sp.encode(batch)
        figures = [
            best_ms(partial(sp.encode, batch), args.repeats),
            best_ms(partial(one_by_one, sp.encode, batch), args.repeats),
            best_ms(partial(sp.decode, ids), args.repeats),
            best_ms(partial(one_by_one, sp.decode, ids), args.repeats),
        ]
        print(f"| {n} | " + " | ".join(f"{ms:.3f}" for ms in figures) + " |")


if __name__ == "__main__":
    main()
