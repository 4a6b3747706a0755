"""Does `torch.compile` pay for decoding on the CPU? Our eager searches against the static-shape searches of
`transformer.fast_inference.graphs` with each step compiled by Inductor.

On a GPU the static searches replay each step as one CUDA graph; on the CPU they normally run eagerly (the tests'
check of their logic). Here the step they would record (greedy: the step and the choice of the token; beam: the
decoder step) is instead compiled once with `torch.compile` (shapes fixed), in three Inductor settings: the default
(Python wrapper), the C++ wrapper (`cpp_wrapper`: no Python between kernels), and frozen weights (`freezing`: the
weights become constants, the products packed for MKL). The static searches run the model itself in fp32; the eager
rows are the inference copy (`inference_copy`) in fp32 and in int8, as `transformer-translate` runs them. Same
model and sentences as `benchmark_decoding.py` (random weights, EOS disabled, every sentence `--out-len` tokens);
batch 1 decodes `--latency-sentences` sentences one at a time. The first call of a compiled row (its compile time)
is reported apart and left out of the medians.

    python scripts/benchmark_compiled_step.py --batch 1 32
    python scripts/benchmark_compiled_step.py --strategy beam --batch 1 --threads 1
"""

import argparse
import functools
import time
from collections.abc import Callable

import torch

from transformer.bench.engines import ours, search_call
from transformer.bench.timing import add_workload_arguments, cpu_description, measure
from transformer.fast_inference import graphs, inference_copy
from transformer.tokenizer import BOS_ID

INDUCTOR = {  # row name -> torch.compile's Inductor options
    "compiled": {},
    "compiled, C++ wrapper": {"cpp_wrapper": True},
    "compiled, frozen weights": {"freezing": True},
}


def compiling(options: dict) -> Callable:
    """A stand-in for `graphs.recorded` that compiles the step instead of recording a CUDA graph: one compiled
    function per step type, shared by every search, so only the first search compiles."""
    compiled: dict = {}

    def recorded(step: Callable, device: torch.device) -> Callable:
        function, owner = (step.__func__, step.__self__) if hasattr(step, "__self__") else (type(step).__call__, step)
        if function not in compiled:
            compiled[function] = torch.compile(function, dynamic=False, options=options)
        return functools.partial(compiled[function], owner)

    return recorded


def searches(model, batches: list[torch.Tensor], args: argparse.Namespace, static: dict | None) -> Callable:
    """Decode every batch of `batches`; with `static` (Inductor options), through the compiled static search."""
    decode = search_call(args.strategy, bos_id=BOS_ID, eos_id=-1, max_len=args.out_len)

    def run() -> list:
        return [decode(model, src) for src in batches]

    if static is None:
        return run
    recorded = compiling(static)

    def compiled_run() -> list:
        saved = graphs.STATIC_DEVICES, graphs.recorded
        graphs.STATIC_DEVICES, graphs.recorded = {"cpu"}, recorded
        try:
            return run()
        finally:
            graphs.STATIC_DEVICES, graphs.recorded = saved

    return compiled_run


def ids(outputs: list) -> list:
    """The ids of a run's outputs as lists (greedy gives a tensor per batch, beam search lists of ids)."""
    return [out.tolist() if isinstance(out, torch.Tensor) else out for out in outputs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="small", choices=["small", "base"])
    parser.add_argument("--strategy", default="greedy", choices=["greedy", "beam"])
    parser.add_argument("--batch", nargs="+", type=int, default=[1, 32])
    add_workload_arguments(parser)
    parser.add_argument("--threads", type=int, default=0, help="torch's threads; 0 = its default")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    name, isa = cpu_description()
    print(f"{name} ({', '.join(isa) or 'no AVX2'}), {torch.get_num_threads()} threads, torch {torch.__version__}")
    torch.manual_seed(0)
    model = ours(args.size, args.vocab)
    copies = {"eager fp32": inference_copy(model, "fp32"), "eager int8": inference_copy(model, "int8")}
    for batch in args.batch:
        src = torch.randint(4, args.vocab, (max(batch, args.latency_sentences), args.src_len))
        batches = [src[:batch]] if batch > 1 else [row[None] for row in src[: args.latency_sentences]]
        runs = {row: searches(copy, batches, args, None) for row, copy in copies.items()}
        runs |= {row: searches(model, batches, args, options) for row, options in INDUCTOR.items()}
        with torch.inference_mode():
            reference = runs["eager fp32"]()
            first = {}
            for row in INDUCTOR:
                start = time.perf_counter()
                same = ids(runs[row]()) == ids(reference)
                first[row] = f"{time.perf_counter() - start:.1f} s, ids {'=' if same else '≠'} eager fp32"
            seconds = measure(runs, args.rounds, torch.device("cpu"))
        sentences = sum(len(b) for b in batches)
        print(f"\n{args.size}, {args.strategy}, batch {batch} ({sentences} sentences a call), median of {args.rounds}")
        print(f"{'search':26} {'sent/s':>8} {'ms/sentence':>12}  first call")
        for row, s in seconds.items():
            print(f"{row:26} {sentences / s:8.1f} {1000 * s / sentences:12.1f}  {first.get(row, '')}")


if __name__ == "__main__":
    main()
