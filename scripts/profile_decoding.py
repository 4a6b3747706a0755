"""Where a decoding step goes: one search of `scripts/benchmark_decoding.py`'s model, profiled.

The table gives each operator's (or, with `--python`, each Python function's) share of the
search's wall time; what the operators leave is Python and dispatch. Shares, not speeds:
they hold on a loaded machine, absolute times do not.

    python scripts/profile_decoding.py --strategy greedy --batch 32
    python scripts/profile_decoding.py --strategy beam --batch 1 --python
    python scripts/profile_decoding.py --size base --strategy beam --precision int8
    python scripts/profile_decoding.py --device cuda --size base --batch 256   # GPU busy vs launches
    python scripts/profile_decoding.py --checkpoint RUN --sentences test.fr.gz --strategy beam --precision auto
    python scripts/profile_decoding.py --checkpoint RUN --sentences test.fr.gz --strategy beam --batch 1 --compiled

With `--checkpoint` and `--sentences` (the real mode) it profiles what `transformer-translate` runs instead: the
trained model translating the first `--limit` sentences (EOS on, natural lengths) in batches of `--batch`.

On a GPU (`--device cuda`, `--dtype bf16` for the model in bf16) the table adds each operator's time on the
device, and the last line the share of the wall time the GPU was busy: far below 100% means the search is bound
by kernel launches and Python, not by the GPU.
"""

import argparse
import cProfile
import pstats
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from transformer.bench.engines import decoding
from transformer.bench.marian_reference import SIZES, model_config
from transformer.bench.timing import operator_table
from transformer.core.config import InferencePrecision, choices
from transformer.data.sources.streams import read_lines
from transformer.decoding import SearchOptions, search
from transformer.fast_inference import inference_copy
from transformer.models.transformer import Transformer


def python_table(run, top: int) -> None:
    """Each Python function's own time (builtins, i.e. torch calls, included) as cProfile sees it."""
    profiler = cProfile.Profile()
    profiler.runcall(run)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def synthetic(args: argparse.Namespace) -> tuple[Callable[[], object], str]:
    """One search of random sources with random weights, EOS disabled (`--out-len` steps), and its description."""
    torch.manual_seed(0)
    device = torch.device(args.device)
    model = Transformer(args.vocab, args.vocab, model_config(args.size), joint_vocab=True)
    if device.type == "cuda":
        model = model.to(device, torch.bfloat16 if args.dtype == "bf16" else torch.float32).eval()
    model = inference_copy(model, args.precision)
    src = torch.randint(3, args.vocab, (args.batch, args.src_len), device=device)
    options = SearchOptions.from_config(strategy=args.strategy, eos_id=-1, use_cache=not args.no_cache)
    where = (
        torch.cuda.get_device_name(device) + f" {args.dtype}"
        if device.type == "cuda"
        else f"{args.precision}, {torch.get_num_threads()} threads"
    )
    what = f"{args.size}, {args.strategy}, batch {args.batch}, {args.out_len} steps, {where}"
    return (lambda: search(model, src, options, max_len=args.out_len)), what


def real(args: argparse.Namespace) -> tuple[Callable[[], object], str]:
    """`transformer-translate`'s work: the checkpoint translating the first `--limit` sentences, and its
    description."""
    from transformer.runs.loading import load

    sentences = list(read_lines(Path(args.sentences)))[: args.limit]
    cfg = decoding(args.strategy, args.batch, args.precision)  # as benchmark_decoding.py's real mode
    translator = load(args.checkpoint, device=args.device).translator(replace(cfg, compiled=args.compiled))
    where = f"{translator.precision}{', compiled step' if args.compiled else ''}, {torch.get_num_threads()} threads"
    what = f"{args.checkpoint}, {args.strategy}, batch {args.batch}, {len(sentences)} sentences, {where}"
    return (lambda: translator.translate(sentences)), what


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
    parser.add_argument("--checkpoint", help="real mode: a run folder or checkpoint file")
    parser.add_argument("--sentences", help="real mode: source sentences, one a line (plain or .gz)")
    parser.add_argument("--limit", type=int, default=256, help="real mode: sentences translated")
    parser.add_argument("--compiled", action="store_true", help="real mode: decoding.compiled=true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if bool(args.checkpoint) != bool(args.sentences):
        parser.error("the real mode takes both --checkpoint and --sentences")
    run, what = real(args) if args.checkpoint else synthetic(args)
    run()  # packs the weights; on a GPU, warms up the kernels
    print(what)
    if args.python:
        python_table(run, args.top)
    else:
        operator_table(run, args.top, args.device.startswith("cuda"))


if __name__ == "__main__":
    main()
