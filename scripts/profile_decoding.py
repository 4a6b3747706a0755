"""Where a decoding step goes: one search of `scripts/benchmark_decoding.py`'s model, profiled.

The table gives each operator's (or, with `--python`, each Python function's) share of the
search's wall time; what the operators leave is Python and dispatch. Shares, not speeds:
they hold on a loaded machine, absolute times do not.

    python scripts/profile_decoding.py --strategy greedy --batch 32
    python scripts/profile_decoding.py --strategy beam --batch 1 --python
"""

import argparse
import cProfile
import pstats
import time

import torch
from torch.profiler import ProfilerActivity, profile

from transformer.decoding import SearchOptions, search
from transformer.fast_inference import inference_copy
from transformer.marian_reference import SIZES, model_config
from transformer.model import Transformer


def operator_table(run, top: int) -> None:
    """Each operator's self CPU time as a share of one call's wall time, largest first."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        run()
        wall_us = (time.perf_counter() - start) * 1e6
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    in_ops = sum(e.self_cpu_time_total for e in events)
    print(f"{'operator':40} {'calls':>7} {'share':>7}")
    for event in events[:top]:
        print(f"{event.key[:40]:40} {event.count:7} {event.self_cpu_time_total / wall_us:7.1%}")
    print(f"{'all operators':40} {'':7} {in_ops / wall_us:7.1%}  (the rest: Python and dispatch)")


def python_table(run, top: int) -> None:
    """Each Python function's own time (builtins, i.e. torch calls, included) as cProfile sees it."""
    profiler = cProfile.Profile()
    profiler.runcall(run)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--strategy", choices=["greedy", "beam"], default="greedy")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--src-len", type=int, default=32)
    parser.add_argument("--out-len", type=int, default=48)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--no-cache", action="store_true", help="decode without the KV cache")
    parser.add_argument("--python", action="store_true", help="profile Python functions (cProfile), not operators")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 = torch's default")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = inference_copy(Transformer(args.vocab, args.vocab, model_config(args.size), joint_vocab=True))
    src = torch.randint(3, args.vocab, (args.batch, args.src_len))
    options = SearchOptions.from_config(strategy=args.strategy, eos_id=-1, use_cache=not args.no_cache)

    def run():
        return search(model, src, options, max_len=args.out_len)

    run()  # packs the weights
    print(f"{args.size}, {args.strategy}, batch {args.batch}, {args.out_len} steps, {torch.get_num_threads()} threads")
    (python_table if args.python else operator_table)(run, args.top)


if __name__ == "__main__":
    main()
