"""Why transformer-serve searches in the main thread: the same torch work timed there and in a worker thread.

A small op (LayerNorm of 5×256, one OpenMP parallel region) and, with --checkpoint, beam searches of one
sentence at a time and of groups of 32 (Multi30k test 2016; in file order, and sorted by length as offline
translation batches them), each first in the main thread, then in a new
`threading.Thread`, then in the main thread again.

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 python scripts/benchmark_threads.py --checkpoint RUN
    OMP_WAIT_POLICY=ACTIVE python scripts/benchmark_threads.py          # OpenMP's workers spinning instead of sleeping
"""

import argparse
import threading
import time
from collections.abc import Callable

import torch

from transformer.bench.serving import DEFAULT_FILE, read_sentences
from transformer.core.config import DecodingConfig
from transformer.decoding.translator import Translator
from transformer.runs.checkpoint import load_checkpoint


def layer_norm_us(reps: int = 5000) -> str:
    """Microseconds per LayerNorm call on a (5, 1, 256) input."""
    norm, x = torch.nn.LayerNorm(256).eval(), torch.randn(5, 1, 256)
    with torch.inference_mode():
        for _ in range(100):
            norm(x)
        start = time.perf_counter()
        for _ in range(reps):
            norm(x)
    return f"LayerNorm {1e6 * (time.perf_counter() - start) / reps:.1f} µs"


def searches(checkpoint: str, file: str) -> Callable[[], str]:
    """A function timing beam searches (beam 5) of one sentence at a time and of groups of 32."""
    ckpt = load_checkpoint(checkpoint)
    translator = Translator(ckpt.model, ckpt.tokenizer, DecodingConfig(strategy="beam", batch_size=32))
    sentences = read_sentences(file, 256)

    def timed() -> str:
        translator.search(sentences[:4])  # warm-up
        start = time.perf_counter()
        for sentence in sentences[:64]:
            translator.search([sentence])
        single = 1000 * (time.perf_counter() - start) / 64
        rates = []
        for order in (sentences, sorted(sentences, key=len)):  # as requests arrive; as offline batches them
            start = time.perf_counter()
            for i in range(0, len(order), 32):
                translator.search(order[i : i + 32])
            rates.append(len(order) / (time.perf_counter() - start))
        return f"one sentence {single:.1f} ms, groups of 32 {rates[0]:.1f} sent/s (sorted by length {rates[1]:.1f})"

    return timed


def in_a_thread(work: Callable[[], str]) -> str:
    out: list[str] = []
    thread = threading.Thread(target=lambda: out.append(work()))
    thread.start()
    thread.join()
    return out[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="run directory or .safetensors file: also time beam searches")
    parser.add_argument("--file", default=DEFAULT_FILE, help="French sentences, one per line (.gz or plain)")
    args = parser.parse_args()
    work = [layer_norm_us] + ([searches(args.checkpoint, args.file)] if args.checkpoint else [])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    layer_norm_us()  # warm-up: the first regions of a process are slower still
    for where, run in (("main thread", lambda w: w()), ("worker thread", in_a_thread), ("main thread", lambda w: w())):
        print(f"{where:13}: " + "; ".join(run(w) for w in work), flush=True)


if __name__ == "__main__":
    main()
