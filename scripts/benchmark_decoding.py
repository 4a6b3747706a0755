"""Decoding speed: our greedy and beam search (KV-cached and not) against Hugging Face MarianMT.

Both models get the same dimensions, random weights and the same random source
batch; EOS is disabled so every sentence decodes exactly `--out-len` tokens.
Calls are interleaved round by round and the median time of each is reported.

    python scripts/benchmark_decoding.py --size small            # table
    python scripts/benchmark_decoding.py --size small --json     # ... and a JSON last line
    python scripts/benchmark_decoding.py --size base --device cuda --dtype bfloat16

On CPU our searches run on an inference copy whose linear maps use pre-packed oneDNN weights
(transformer/fast_inference.py);
`--unpacked` adds our runs with oneDNN off, i.e. through `F.linear` as MarianMT does;
`--products` instead times the decoder's matrix products alone, in GFLOP/s, through F.linear and through the
kernel of each inference precision (`decoding.precision`: fp32, bf16 where the CPU has bf16 products, int8).
Hugging Face is measured when `transformers` is installed (`pip install -e .[bench]`), on a
MarianMT of the same size (its own random weights: MarianMT has no pre-norm). CTranslate2 float32
and int8 are measured on our model's very weights, exported with `transformer.export.ctranslate2`,
when `ctranslate2` is installed (`pip install -e .[export]`), with as many threads as torch uses,
in a process of its own (called in turn with the others).
"""

import argparse
import atexit
import functools
import json
import multiprocessing
import shutil
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from transformer.config import InferencePrecision, choices
from transformer.decoding import beam_search, greedy_decode
from transformer.fast_inference import inference_copy
from transformer.fast_inference.kernels import cpu_isa, runs
from transformer.marian_reference import SIZES, marian, model_config
from transformer.model import Transformer
from transformer.tokenizer import BOS_ID, PAD_ID


def ours(size: str, vocab: int) -> Transformer:
    """Our model as `model=<size>` trains it (configs/model/<size>.yaml)."""
    return Transformer(vocab, vocab, model_config(size), joint_vocab=True).eval()


def hf_generate(model, src: torch.Tensor, beams: int, out_len: int) -> Callable[[], object]:
    mask = src != PAD_ID

    def run():
        with torch.inference_mode():
            return model.generate(
                input_ids=src,
                attention_mask=mask,
                num_beams=beams,
                do_sample=False,
                max_new_tokens=out_len,
                min_new_tokens=out_len,
                eos_token_id=None,
                length_penalty=1.0,
                early_stopping=False,
            )

    return run


def without_onednn(run: Callable[[], object]) -> Callable[[], object]:
    """`run` with oneDNN off, so our linear maps fall back to `F.linear` (MKL's sgemm on CPU)."""

    def unpacked():
        with warnings.catch_warnings(), torch.backends.mkldnn.flags(enabled=False):
            warnings.filterwarnings("ignore", message="TF32 acceleration")  # the flags' note about Intel GPUs
            return run()

    return unpacked


class _Pieces:
    """A stand-in SentencePiece vocabulary for random ids: our four specials, then t4, t5, ..."""

    def __init__(self, size: int):
        self.size = size

    def get_piece_size(self) -> int:
        return self.size

    def id_to_piece(self, i: int) -> str:
        return ["<pad>", "<s>", "</s>", "<unk>"][i] if i < 4 else f"t{i}"


def _ct2_worker(conn, folder: str, tokens: list[list[str]], device: str, threads: int, out_len: int) -> None:
    """In its own process: run the CTranslate2 call named by each message, answer when it is done."""
    import ctranslate2

    fixed = dict(max_decoding_length=out_len, min_decoding_length=out_len, length_penalty=1.0)
    translators = {
        kind: ctranslate2.Translator(folder, device=device, compute_type=kind, intra_threads=threads)
        for kind in ("float32", "int8")
    }
    while (name := conn.recv()) is not None:
        _, kind, search = name.split()
        translators[kind].translate_batch(tokens, beam_size=1 if search == "greedy" else 5, **fixed)
        conn.send(name)


def ctranslate2_cases(model: Transformer, src: torch.Tensor, args: argparse.Namespace) -> dict[str, Callable]:
    """CTranslate2 float32 and int8 greedy and beam 5 on `model`'s weights; {} without ctranslate2.

    CTranslate2 runs in a process of its own: once it has translated in a process, that process's
    torch calls run up to 1.8× slower (measured here, MarianMT's too), which would bias every ratio.
    """
    try:
        from omegaconf import OmegaConf

        from transformer.export.ctranslate2 import CheckpointConverter
    except ImportError:
        return {}
    vocab = _Pieces(args.vocab)
    tokenizer = SimpleNamespace(src=vocab, tgt=vocab)
    ckpt = SimpleNamespace(model=model, config=OmegaConf.create({"model": asdict(model.config)}), tokenizer=tokenizer)
    folder = tempfile.mkdtemp(prefix="bench_ct2_")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    CheckpointConverter(ckpt).convert(folder, force=True)
    tokens = [[vocab.id_to_piece(i) for i in row[:-1]] for row in src.tolist()]  # CTranslate2 appends EOS
    conn, child_end = multiprocessing.Pipe()
    worker = multiprocessing.get_context("spawn").Process(
        target=_ct2_worker, args=(child_end, folder, tokens, args.device, torch.get_num_threads(), args.out_len)
    )
    worker.start()
    atexit.register(lambda: (conn.send(None), worker.join()))

    def call(name: str) -> None:
        conn.send(name)
        conn.recv()

    names = [f"CT2 {kind} {search}" for kind in ("float32", "int8") for search in ("greedy", "beam5")]
    return {name: functools.partial(call, name) for name in names}


def ctranslate2_ratios(seconds: dict[str, float]) -> dict[str, float]:
    """Our time over CTranslate2's (above 1: CTranslate2 is faster), printed and returned."""
    ratios = {}
    for compute_type in ("float32", "int8"):
        for search in ("greedy", "beam5"):
            if f"CT2 {compute_type} {search}" in seconds:
                ratio = seconds[f"ours {search}"] / seconds[f"CT2 {compute_type} {search}"]
                ratios[f"ours_over_ct2_{compute_type}_{search}"] = round(ratio, 3)
    if ratios:
        print("ours / CT2 time: " + ", ".join(f"{k[len('ours_over_ct2_') :]} {v:.2f}x" for k, v in ratios.items()))
    return ratios


def cases(args: argparse.Namespace) -> dict[str, Callable]:
    """The timed calls: ours (cached, and uncached unless --no-uncached) and HF's, on one random batch."""
    size, vocab, out_len = args.size, args.vocab, args.out_len
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    torch.manual_seed(0)
    src = torch.randint(3, vocab, (args.batch, args.src_len), device=device)
    model = ours(size, vocab).to(device, dtype)
    # each timed call makes and packs its own inference copy (a translator makes one for all its searches)
    greedy = dict(bos_id=BOS_ID, eos_id=-1, max_len=out_len)
    beam5 = dict(greedy, beam_size=5)
    runs = {
        "ours greedy": lambda: greedy_decode(inference_copy(model), src, **greedy),
        "ours beam5": lambda: beam_search(inference_copy(model), src, **beam5),
    }
    if args.unpacked:
        runs["ours greedy (unpacked)"] = without_onednn(runs["ours greedy"])
        runs["ours beam5 (unpacked)"] = without_onednn(runs["ours beam5"])
    if not args.no_uncached:
        runs["ours greedy (no cache)"] = lambda: greedy_decode(inference_copy(model), src, **greedy, use_cache=False)
        runs["ours beam5 (no cache)"] = lambda: beam_search(inference_copy(model), src, **beam5, use_cache=False)
    hf = marian(size, vocab, dropout=0.0)
    if hf is not None:
        hf = hf.to(device, dtype).eval()
        runs["HF greedy"] = hf_generate(hf, src, 1, out_len)
        runs["HF beam5"] = hf_generate(hf, src, 5, out_len)
    if device.type == "cpu" and args.dtype == "float32":
        runs |= ctranslate2_cases(model, src, args)
    return runs


def measure(runs: dict[str, Callable], rounds: int, device: torch.device) -> dict[str, float]:
    """Median seconds per call, calls interleaved round by round after one warm-up each."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            if device.type == "cuda":
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--src-len", type=int, default=32)
    parser.add_argument("--out-len", type=int, default=48)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 = torch's default")
    parser.add_argument("--no-uncached", action="store_true", help="skip the slow uncached runs")
    parser.add_argument("--unpacked", action="store_true", help="also time ours with oneDNN off (F.linear)")
    parser.add_argument("--products", action="store_true", help="time the decoder's matrix products alone")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="weights of both models")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the results")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.products:
        return products(args)
    seconds = measure(cases(args), args.rounds, torch.device(args.device))
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"{torch.get_num_threads()} threads"
    print(
        f"{args.size}: batch {args.batch}, source {args.src_len}, output {args.out_len} tokens, "
        f"{args.dtype}, {where}, median of {args.rounds}"
    )
    print(f"{'':24} {'sent/s':>8} {'s/batch':>8}")
    for name, sec in seconds.items():
        print(f"{name:24} {args.batch / sec:8.1f} {sec:8.3f}")
    result = {
        "size": args.size,
        "batch": args.batch,
        "out_len": args.out_len,
        "device": args.device,
        "dtype": args.dtype,
        **{name.replace(" ", "_"): round(args.batch / sec, 2) for name, sec in seconds.items()},
    }
    if "HF greedy" in seconds:
        result["greedy_ratio"] = round(seconds["HF greedy"] / seconds["ours greedy"], 3)
        result["beam_ratio"] = round(seconds["HF beam5"] / seconds["ours beam5"], 3)
        print(f"ours / HF: greedy {result['greedy_ratio']:.2f}x, beam5 {result['beam_ratio']:.2f}x")
    if "ours greedy (no cache)" in seconds:
        result["kv_speedup"] = round(seconds["ours greedy (no cache)"] / seconds["ours greedy"], 3)
        result["kv_speedup_beam"] = round(seconds["ours beam5 (no cache)"] / seconds["ours beam5"], 3)
        print(f"KV cache speed-up: greedy {result['kv_speedup']:.2f}x, beam5 {result['kv_speedup_beam']:.2f}x")
    if "ours greedy (unpacked)" in seconds:
        result["packed_speedup"] = round(seconds["ours greedy (unpacked)"] / seconds["ours greedy"], 3)
        result["packed_speedup_beam"] = round(seconds["ours beam5 (unpacked)"] / seconds["ours beam5"], 3)
        print(f"packed weights: greedy {result['packed_speedup']:.2f}x, beam5 {result['packed_speedup_beam']:.2f}x")
    result |= ctranslate2_ratios(seconds)
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
