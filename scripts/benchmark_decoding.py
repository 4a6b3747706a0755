"""Decoding speed: ours in fp32, bf16 and int8 against CTranslate2 float32 and int8 on the very same weights.

For each size (`small`, `base`), search (greedy, beam 5) and batch (32: throughput; 1: latency, the
sentences decoded one at a time), every engine decodes the same random source sentences with EOS
disabled, so each sentence decodes exactly `--out-len` tokens. Our model has random weights;
CTranslate2 runs them exported with `transformer.export.ctranslate2` (`pip install -e .[export]`);
Hugging Face's MarianMT of the same size, with weights of its own, is timed too when `transformers` is
installed (`pip install -e .[bench]`). Ours runs as a `Translator` runs it: through its
inference copy (transformer/fast_inference/) in each precision, made once. Each engine runs in a
process of its own, with the same number of threads: a process that has run CTranslate2 runs torch up
to 1.8× slower. Calls are interleaved round by round after one warm-up each; the table gives medians.

    python scripts/benchmark_decoding.py                          # small and base, every precision
    python scripts/benchmark_decoding.py --size small --json      # ... and a JSON last line
    python scripts/benchmark_decoding.py --quick --precisions fp32  # a tiny run (the tests')
    python scripts/benchmark_decoding.py --size base --device cuda --precisions fp32 bf16

`--uncached` and `--unpacked` add our fp32 search without the KV cache and with oneDNN off (`F.linear`), `--eager`
(GPU) without CUDA graphs;
`--products` instead times the decoder's matrix products alone, in GFLOP/s, through F.linear and through the
kernel of each inference precision (`decoding.precision`: fp32, bf16 where the CPU has bf16 products, int8).
"""

import argparse
import functools
import importlib.util
import json
import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from transformer.bench.engines import CT2_PRECISIONS, DTYPES, Case, EngineError, Engines, Pieces, Setup, ours
from transformer.bench.timing import ISA, add_workload_arguments, cpu_description, measure
from transformer.config import InferencePrecision, choices
from transformer.fast_inference import inference_copy
from transformer.fast_inference.kernels import cpu_isa, runs
from transformer.marian_reference import SIZES, model_config
from transformer.precision import TRANSLATED_IN, resolve

PRECISIONS = ("fp32", "bf16", "int8")
QUICK = dict(size=["small"], batch=[4, 1], src_len=6, out_len=4, vocab=64, rounds=1, latency_sentences=2)


def default_precision(device: str = "cpu") -> str:
    """The precision translate and serve run in by default on `device`: `precision.TRANSLATED_IN`, resolved on this
    CPU; fp32 on a GPU (bf16 and int8 are CPU inference kernels)."""
    if device != "cpu":
        return "fp32"
    return resolve(TRANSLATED_IN, "inference", "cpu")


def product_gflops(rows: int, k: int, n: int, rounds: int, calls: int = 50) -> dict[str, float]:
    """GFLOP/s of one (rows × k)·(k × n) product through F.linear and through an inference copy's kernel in each
    precision that runs natively here (a precision that would fall back to fp32 is left out)."""
    layer, x = torch.nn.Linear(k, n), torch.randn(rows, k)
    products = {"F.linear": lambda: F.linear(x, layer.weight, layer.bias)}
    for precision in choices(InferencePrecision):
        if runs(precision) == precision:
            copy = inference_copy(torch.nn.Sequential(layer), precision)
            products[precision] = functools.partial(copy, x)

    def repeated(product: Callable[[], object]) -> Callable[[], object]:
        return lambda: [product() for _ in range(calls)]

    with torch.inference_mode():
        seconds = measure({name: repeated(product) for name, product in products.items()}, rounds, x.device)
    return {name: 2 * rows * k * n * calls / sec / 1e9 for name, sec in seconds.items()}


def products(args: argparse.Namespace) -> None:
    """The decoder's products (rows: the greedy batch, then beam 5's) through F.linear and each precision's kernel."""
    cfg = model_config(args.size)
    d, ff = cfg.d_model, cfg.d_ff
    shapes = {"qkv": (d, 3 * d), "attention out": (d, d), "ff in": (d, ff), "ff out": (ff, d), "vocab": (d, args.vocab)}
    names = ["F.linear", *(p for p in choices(InferencePrecision) if runs(p) == p)]
    where = f"{cpu_isa()}, {torch.get_num_threads()} threads"
    print(f"{args.size}, {where}, GFLOP/s, median of {args.rounds} rounds of 50 calls")
    print(f"{'rows':>5} {'product':14} " + " ".join(f"{name:>9}" for name in names) + "  over fp32")
    for rows in (args.batch, 5 * args.batch):
        for name, (k, n) in shapes.items():
            gflops = product_gflops(rows, k, n, args.rounds)
            ratios = " ".join(f"{p} {gflops[p] / gflops['fp32']:.2f}x" for p in names if p not in ("F.linear", "fp32"))
            print(f"{rows:5} {name:14} " + " ".join(f"{gflops[p]:9.0f}" for p in names) + f"  {ratios}")


def plan(args: argparse.Namespace, engines: set[str]) -> list[Case]:
    """Every case, cell by cell (size, strategy, batch), each cell's engines one after the other."""
    ct2 = [("ctranslate2", p) for p in CT2_PRECISIONS if "ctranslate2" in engines]
    hf = [("marianmt", p) for p in (args.precisions if args.device != "cpu" else ["fp32"]) if p in DTYPES]
    rows = [*(("ours", p) for p in args.precisions), *ct2, *(hf if "marianmt" in engines else [])]
    cases = []
    for size in args.size:
        for strategy in ("greedy", "beam"):
            for batch in args.batch:
                cases += [Case(engine, p, size, strategy, batch) for engine, p in rows]
                cases += [Case("ours", "fp32", size, strategy, batch, v) for v in args.variants]
    return cases


def prepare(args: argparse.Namespace, folder: Path, ct2: bool) -> Setup:
    """Our weights for each size (and their CTranslate2 export) in `folder`, and the random sentences."""
    torch.manual_seed(0)
    for size in args.size:
        model = ours(size, args.vocab)
        torch.save(model.state_dict(), folder / f"{size}.pt")
        if ct2:
            from omegaconf import OmegaConf

            from transformer.export.ctranslate2 import CheckpointConverter

            vocab = Pieces(args.vocab)
            config = OmegaConf.create({"model": asdict(model.config)})
            ckpt = SimpleNamespace(model=model, config=config, tokenizer=SimpleNamespace(src=vocab, tgt=vocab))
            CheckpointConverter(ckpt).convert(str(folder / f"ct2_{size}"), force=True)
    sentences = max(*args.batch, args.latency_sentences)
    src = torch.randint(3, args.vocab, (sentences, args.src_len)).tolist()
    threads = args.threads or torch.get_num_threads()
    return Setup(
        str(folder), tuple(map(tuple, src)), args.vocab, args.out_len, args.latency_sentences, threads, args.device
    )


def label(case: Case) -> str:
    return " ".join(filter(None, [case.engine, case.precision, case.variant and f"({case.variant})"]))


def cell_value(case: Case, seconds: float, setup: Setup) -> str:
    """Sentences per second; at batch 1 also milliseconds per sentence."""
    n = setup.sentences(case.batch)
    return f"{n / seconds:.1f}" + (f" ({1000 * seconds / n:.0f} ms)" if case.batch == 1 else "")


def report(seconds: dict[Case, float], setup: Setup, args: argparse.Namespace) -> dict:
    """Print the table (a row per cell, a column per engine) and return the JSON object."""
    name, isa = cpu_description()
    default = default_precision(str(setup.device))
    print(
        f"CPU: {name}; {', '.join(isa) or 'none of ' + '/'.join(ISA)}; torch kernels: "
        f"{torch.backends.cpu.get_cpu_capability()}; {setup.threads} threads; device {setup.device}"
    )
    print(
        f"source {args.src_len} tokens, output {setup.out_len} tokens (EOS disabled), vocabulary {setup.vocab}, "
        f"median of {args.rounds} rounds; batch 1: {setup.latency_sentences} sentences one by one; sentences/s"
    )
    columns = list(dict.fromkeys(label(case) for case in seconds))
    widths = [max(16, len(c)) for c in columns]
    print(
        " | ".join(
            [
                f"{'size, search, batch':20}",
                *(f"{c:>{w}}" for c, w in zip(columns, widths)),
                f"ours {default} / ctranslate2 int8",
            ]
        )
    )
    for cell in dict.fromkeys((case.size, case.strategy, case.batch) for case in seconds):
        here = {label(case): case for case in seconds if (case.size, case.strategy, case.batch) == cell}
        values = [cell_value(here[c], seconds[here[c]], setup) if c in here else "" for c in columns]
        ours_case, ct2_case = here.get(f"ours {default}"), here.get("ctranslate2 int8")
        ratio = f"{seconds[ct2_case] / seconds[ours_case]:.2f}x" if ours_case and ct2_case else ""
        print(" | ".join([f"{', '.join(map(str, cell)):20}", *(f"{v:>{w}}" for v, w in zip(values, widths)), ratio]))
    records = [
        {
            **{k: getattr(case, k) for k in ("engine", "precision", "size", "strategy", "batch")},
            "sent_per_s": round(setup.sentences(case.batch) / sec, 2),
        }
        for case, sec in seconds.items()
        if not case.variant
    ]
    return {"cpu": name, "records": records, "default_precision": default}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", nargs="+", choices=SIZES, default=list(SIZES))
    parser.add_argument("--batch", nargs="+", type=int, default=[32, 1], help="sentences per call; 1: latency")
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS), help="ours")
    add_workload_arguments(parser)
    parser.add_argument("--threads", type=int, default=0, help="threads of every engine; 0 = torch's default")
    parser.add_argument("--uncached", action="store_true", help="also time our fp32 search without the KV cache")
    parser.add_argument("--unpacked", action="store_true", help="also time our fp32 search with oneDNN off (F.linear)")
    parser.add_argument("--eager", action="store_true", help="also time our fp32 search without CUDA graphs (GPU)")
    parser.add_argument("--no-marian", action="store_true", help="leave out MarianMT")
    parser.add_argument(
        "--quick", action="store_true", help="a tiny run: " + ", ".join(f"{k}={v}" for k, v in QUICK.items())
    )
    parser.add_argument("--products", action="store_true", help="time the decoder's matrix products alone")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (CTranslate2 and int8: CPU only)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the results")
    args = parser.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    if args.device != "cpu" and "int8" in args.precisions:
        parser.error("int8 runs on the CPU only; choose --precisions fp32 bf16 with --device cuda")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.products:
        return products(argparse.Namespace(**{**vars(args), "size": args.size[0], "batch": args.batch[0]}))
    wanted = (("no cache", args.uncached), ("unpacked", args.unpacked), ("eager", args.eager))
    args.variants = [v for v, on in wanted if on]
    engines = {"ours"}
    if args.device == "cpu" and importlib.util.find_spec("ctranslate2"):
        engines.add("ctranslate2")
    if not args.no_marian and importlib.util.find_spec("transformers"):
        engines.add("marianmt")
    with tempfile.TemporaryDirectory(prefix="bench_decoding_") as folder:
        setup = prepare(args, Path(folder), "ctranslate2" in engines)
        with Engines(engines, setup) as processes:  # each waits for its own device: time as on the CPU
            runs = {case: functools.partial(processes.run, case) for case in plan(args, engines)}
            try:
                seconds = measure(runs, args.rounds, torch.device("cpu"))
            except EngineError as failure:
                parser.exit(2, f"error: {failure}\n")
    result = report(seconds, setup, args)
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
