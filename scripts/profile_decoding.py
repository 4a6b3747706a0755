"""Where a decoding step goes: one search of `scripts/benchmark_decoding.py`'s model, profiled.

The table gives each operator's (or, with `--python`, each Python function's) share of the
search's wall time; what the operators leave is Python and dispatch. Shares, not speeds:
they hold on a loaded machine, absolute times do not.

    python scripts/profile_decoding.py --strategy greedy --batch 32
    python scripts/profile_decoding.py --strategy beam --batch 1 --python
    python scripts/profile_decoding.py --size base --strategy beam --precision int8
    python scripts/profile_decoding.py --device cuda --size base --batch 256   # GPU busy vs launches

On a GPU (`--device cuda`, `--dtype bf16` for the model in bf16) the table adds each operator's time on the
device, and the last line the share of the wall time the GPU was busy: far below 100% means the search is bound
by kernel launches and Python, not by the GPU.
"""

import argparse
import cProfile
import pstats

import torch

from transformer.bench.timing import operator_table
from transformer.config import InferencePrecision, choices
from transformer.decoding import SearchOptions, search
from transformer.fast_inference import inference_copy
from transformer.marian_reference import SIZES, model_config
from transformer.model import Transformer


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
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="the model's dtype on a GPU")
    parser.add_argument(
        "--precision", choices=choices(InferencePrecision), default="fp32", help="the inference copy's (CPU)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = Transformer(args.vocab, args.vocab, model_config(args.size), joint_vocab=True)
    if device.type == "cuda":
        model = model.to(device, torch.bfloat16 if args.dtype == "bf16" else torch.float32).eval()
    model = inference_copy(model, args.precision)
    src = torch.randint(3, args.vocab, (args.batch, args.src_len), device=device)
    options = SearchOptions.from_config(strategy=args.strategy, eos_id=-1, use_cache=not args.no_cache)

    def run():
        return search(model, src, options, max_len=args.out_len)

    run()  # packs the weights; on a GPU, warms up the kernels
    where = (
        torch.cuda.get_device_name(device) + f" {args.dtype}"
        if device.type == "cuda"
        else f"{args.precision}, {torch.get_num_threads()} threads"
    )
    print(f"{args.size}, {args.strategy}, batch {args.batch}, {args.out_len} steps, {where}")
    if args.python:
        python_table(run, args.top)
    else:
        operator_table(run, args.top, device.type == "cuda")


if __name__ == "__main__":
    main()
