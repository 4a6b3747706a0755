"""Our two int8 products and `torch._int_mm`, on the decoder's shapes: µs a call and error, by rows.

`fast_inference.int8.Int8Linear` runs `quantized::linear_dynamic` (each row scaled to [-1, 1], two sentinel rows)
for batches below `kernels.QLINEAR_FROM` and oneDNN's `qlinear_pointwise` (u8 rows in steps of their own scale, a
weight packed once) from there on, where the CPU has VNNI; here each is forced for every row count, beside
`torch._int_mm` (s8 · s8 -> s32 on a plain (K, N) int8 weight, then both scales and the bias) with the same per-row
activation scales and per-output-row weight scales. Each call's error is |y - y_fp32| / |y_fp32| over the whole
product. Medians of `--rounds` rounds of 50 calls, each product alone (its weight stays in cache: a search, which
runs every layer's product in turn, reads them from memory). `--searches` times whole searches of an int8 copy
instead (greedy and beam 5 on random sources, EOS disabled, as benchmark_decoding.py does), each way of choosing the
kernel in turn in one process: linear_dynamic for every batch, qlinear for every batch, and ours (qlinear from
`QLINEAR_FROM` sentences or hypotheses on, and for one sentence's steps int8 weights with bf16 activations,
`_weight_int8pack_mm`, where torch runs it with AVX2 or AVX-512).

    python scripts/benchmark_int8_products.py                 # size base, rows 1 5 32 160
    python scripts/benchmark_int8_products.py --size small --rows 32 --threads 2
    python scripts/benchmark_int8_products.py --searches --batch 32 1 --rounds 9
"""

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import Tensor, nn

from transformer.bench.engines import ours, search_call
from transformer.bench.int8_products import RULES, IntMM, int8_linear, ruled_searches
from transformer.bench.timing import add_workload_arguments, measure
from transformer.fast_inference import inference_copy
from transformer.fast_inference.kernels import cpu_isa, int8_available, qlinear_available
from transformer.marian_reference import SIZES, model_config
from transformer.tokenizer import BOS_ID


def microseconds(product: Callable[[Tensor], Tensor], x: Tensor, rounds: int, calls: int = 50) -> float:
    """Median µs a call of `product(x)`, after one warm-up call."""
    product(x)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            product(x)
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def compare_products(args: argparse.Namespace) -> None:
    """The table of single products: µs a call and error of each kernel, by rows and product."""
    cfg = model_config(args.size)
    d, ff = cfg.d_model, cfg.d_ff
    shapes = {"qkv": (d, 3 * d), "attention out": (d, d), "ff in": (d, ff), "ff out": (ff, d), "vocab": (d, args.vocab)}
    print("| rows | product | linear_dynamic | qlinear u8 | _int_mm | time: qlinear / dynamic | _int_mm / dynamic |")
    print("|---|---|---|---|---|---|---|")
    for rows in args.rows:
        for name, (k, n) in shapes.items():
            linear, x = nn.Linear(k, n), torch.randn(rows, k)
            exact = linear(x)
            kernels = {
                "dynamic": int8_linear(linear, False),
                "qlinear": int8_linear(linear, True),
                "int_mm": IntMM(linear),
            }
            us = {key: microseconds(m, x, args.rounds) for key, m in kernels.items()}
            err = {key: float((m(x) - exact).norm() / exact.norm()) for key, m in kernels.items()}
            cells = " | ".join(f"{us[key]:.1f} ({err[key]:.4f})" for key in kernels)
            ratios = f"{us['qlinear'] / us['dynamic']:.2f} | {us['int_mm'] / us['dynamic']:.2f}"
            print(f"| {rows} | {name} {k}×{n} | {cells} | {ratios} |")


def compare_searches(args: argparse.Namespace) -> None:
    """The table of whole searches: sentences a second under each of `RULES`, by strategy and batch."""
    model = inference_copy(ours(args.size, args.vocab), "int8")
    rest = list(RULES)[1:]
    print(f"source {args.src_len} tokens, output {args.out_len} (EOS off); {args.latency_sentences}+ sentences a run")
    rates, ratios = [f"{name} sent/s" for name in RULES], [f"time: {name} / linear_dynamic" for name in rest]
    print(f"| strategy | batch | {' | '.join(rates + ratios)} |")
    print("|---" * (2 + len(rates) + len(ratios)) + "|")
    for strategy in ("greedy", "beam"):
        search = search_call(strategy, bos_id=BOS_ID, eos_id=-1, max_len=args.out_len)
        for batch in args.batch:
            sentences = max(batch, args.latency_sentences)
            batches = torch.randint(3, args.vocab, (sentences, args.src_len)).split(batch)
            runs = {name: ruled_searches(model, rule, search, batches) for name, rule in RULES.items()}
            seconds = measure(runs, args.rounds, torch.device("cpu"))
            rates = [f"{sentences / s:.1f}" for s in seconds.values()]
            ratios = [f"{seconds[name] / seconds['linear_dynamic']:.3f}" for name in rest]
            print(f"| {strategy} | {batch} | {' | '.join(rates + ratios)} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=SIZES, default="base")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 5, 32, 160], help="single products: rows a call")
    parser.add_argument("--threads", type=int, default=2, help="torch threads; 0 = torch's default")
    parser.add_argument("--searches", action="store_true", help="time whole searches instead of single products")
    parser.add_argument("--batch", type=int, nargs="+", default=[32, 1], help="--searches: sentences a call")
    add_workload_arguments(parser)  # --src-len, --out-len, --latency-sentences: --searches only
    parser.set_defaults(rounds=7)
    args = parser.parse_args()
    if not (int8_available() and qlinear_available()):
        parser.error("our int8 products need PyTorch's x86 int8 engine and oneDNN's qlinear with VNNI, not on this CPU")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    what = "whole searches, sentences a second" if args.searches else "µs a call (relative error)"
    print(f"{args.size}, {cpu_isa()}, {threads} threads; {what}, median of {args.rounds} rounds")
    with torch.inference_mode():
        (compare_searches if args.searches else compare_products)(args)


if __name__ == "__main__":
    main()
