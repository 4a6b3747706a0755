"""Training speed: forward + loss + backward + Adam step, ours against Hugging Face MarianMT.

Same dimensions, same fixed random batch, same label-smoothed loss. Ours runs in
fp32 and, with `--precision auto` (what `make train` uses), also with bf16 autocast where
the device computes bf16 natively; MarianMT the standard way (fp32). Calls are
interleaved round by round; medians are reported, with the achieved FLOP/s as a
fraction of this machine's measured matmul peak.

    python scripts/benchmark_training.py --size small
    python scripts/benchmark_training.py --size small --json   # JSON last line
    python scripts/benchmark_training.py --size base --device cuda --sentences 1024 --length 64
    python scripts/benchmark_training.py --size small --guided   # + guided alignment's step, and its cost

Hugging Face is measured when `transformers` is installed (`pip install -e .[bench]`).
"""

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import numpy
import torch

from transformer.bench.marian_reference import SIZES, marian, marian_loss, model_config
from transformer.bench.timing import operator_table
from transformer.compute.auto import resolve
from transformer.compute.runtime import autocast
from transformer.core.config import GuidedAlignmentConfig
from transformer.data.batching import collate, link_tensors
from transformer.models.transformer import Transformer
from transformer.training.loss import guided_loss_sums, loss_sum


def random_batch(sentences: int, length: int, vocab: int):
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(length // 2, length + 1, (sentences,), generator=g).tolist()
    src = [torch.randint(4, vocab, (n,), generator=g).tolist() for n in lengths]
    tgt = [torch.randint(4, vocab, (max(1, n - 2),), generator=g).tolist() for n in lengths]
    return collate(src, tgt)


def with_links(batch, seed: int = 0):
    """`batch` with guided alignment's links: each target piece linked to one random source piece."""
    g = torch.Generator().manual_seed(seed)
    n_src, n_tgt = (batch.src != 0).sum(1) - 1, (batch.tgt_out != 0).sum(1) - 1  # without EOS
    pairs = [[t, int(torch.randint(int(s), (1,), generator=g))] for s, n in zip(n_src, n_tgt) for t in range(int(n))]
    flat = numpy.array(pairs).reshape(-1)
    return replace(batch, **dict(zip(("links", "link_weights"), link_tensors(flat, 2 * n_tgt.numpy()))))


def ours_step(
    size: str, vocab: int, batch, precision: str, device: torch.device, compile: str, guided: bool = False
) -> Callable[[], None]:
    """One training step of ours; `compile`: "" (eager), "model" (trainer.compile=true) or "loss" (model and loss);
    `guided`: with guided alignment's loss (λ = 0.05, layer -2, head 0) over the batch's links."""
    model = Transformer(vocab, vocab, model_config(size), joint_vocab=True).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), fused=True)
    forward = torch.compile(model) if compile == "model" else model
    objective = torch.compile(loss_sum) if compile == "loss" else loss_sum
    if guided:
        head = GuidedAlignmentConfig(weight=0.05)

        def objective(model, batch, smoothing):
            translation, alignment = guided_loss_sums(model, batch, smoothing, head)
            return translation + head.weight * alignment

    def step():
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, precision):
            loss = objective(forward, batch, 0.1) / batch.n_tokens
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    return step


def marian_step(size: str, vocab: int, batch, device: torch.device) -> Callable[[], None] | None:
    model = marian(size, vocab, dropout=0.1)
    if model is None:
        return None
    model = model.to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98))

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = marian_loss(model, batch, 0.1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    return step


def step_flops(size: str, vocab: int, batch) -> float:
    """Matmul FLOPs of one training step (forward + backward = 3x forward), padded positions included."""
    cfg = model_config(size)
    d, ff, enc_layers, dec_layers = cfg.d_model, cfg.d_ff, cfg.n_encoder_layers, cfg.n_decoder_layers
    b, s = batch.src.shape
    t = batch.tgt_in.size(1)
    enc = enc_layers * (2 * b * s * (4 * d * d + 2 * d * ff) + 4 * b * s * s * d)
    dec = dec_layers * (
        2 * b * t * (4 * d * d + 2 * d * ff)
        + 4 * b * t * t * d  # self-attention block, FFN
        + 2 * b * t * 2 * d * d
        + 2 * b * s * 2 * d * d
        + 4 * b * t * s * d
    )  # cross-attention
    out = 2 * b * t * d * vocab
    return 3.0 * (enc + dec + out)


def matmul_peak(dtype: torch.dtype, device: torch.device, repeats: int = 10) -> float:
    """Measured FLOP/s of a large square matmul in `dtype`."""
    n = 8192 if device.type == "cuda" else 2048
    a, b = torch.randn(n, n, dtype=dtype, device=device), torch.randn(n, n, dtype=dtype, device=device)
    a @ b
    sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    sync(device)
    return 2 * n**3 * repeats / (time.perf_counter() - start)


def sync(device: torch.device) -> None:
    """Wait for queued GPU work, so that wall-clock times mean something."""
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--sentences", type=int, default=128)
    parser.add_argument("--length", type=int, default=32, help="longest sentence; lengths vary from half of it")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--precision",
        default="auto",
        choices=["auto", "fp32", "bf16", "fp16"],
        help="ours' precision besides fp32; auto (what make train uses): bf16 where the device computes it natively",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument(
        "--compile",
        nargs="*",
        choices=["model", "loss"],
        help="torch.compile ours: the model (trainer.compile=true; the default of a bare --compile) and/or "
        "the model with its loss in one graph; each one given is timed side by side",
    )
    parser.add_argument("--profile", action="store_true", help="then profile a step of our fastest: where it goes")
    parser.add_argument("--guided", action="store_true", help="also ours with guided alignment (random links)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    args.precision = resolve(args.precision, "training", device.type)
    batch = random_batch(args.sentences, args.length, args.vocab).to(device)
    compiles = [""] if args.compile is None else args.compile or ["model"]
    names = {c: f"ours {args.precision}" + (f" ({c})" if len(compiles) > 1 else "") for c in compiles}
    runs = {}
    if args.precision != "fp32":
        runs["ours fp32"] = ours_step(args.size, args.vocab, batch, "fp32", device, compiles[0])
    for compile, name in names.items():
        runs[name] = ours_step(args.size, args.vocab, batch, args.precision, device, compile)
    if args.guided:
        linked = with_links(batch.to(torch.device("cpu"))).to(device)
        runs["ours guided"] = ours_step(args.size, args.vocab, linked, args.precision, device, compiles[0], True)
    peer = marian_step(args.size, args.vocab, batch, device)
    if peer is not None:
        runs["HF MarianMT fp32"] = peer
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, run in runs.items():
            sync(device)
            start = time.perf_counter()
            run()
            sync(device)
            times[name].append(time.perf_counter() - start)
    tokens, flops = batch.n_tokens, step_flops(args.size, args.vocab, batch)
    peaks = {"fp32": matmul_peak(torch.float32, device)}  # bf16's only where it runs: emulated, it takes minutes
    if args.precision == "bf16":
        peaks["bf16"] = matmul_peak(torch.bfloat16, device)
    where = torch.cuda.get_device_name() if device.type == "cuda" else f"{torch.get_num_threads()} threads"
    print(
        f"{args.size}: {args.sentences} sentences, {tokens} target tokens per step, "
        f"{where}, median of {args.rounds}; matmul peak "
        + ", ".join(f"{peak / 1e9:.0f} GFLOP/s {dtype}" for dtype, peak in peaks.items())
    )
    print(f"{'':24} {'tok/s':>8} {'s/step':>8} {'GFLOP/s':>8} {'of peak':>8}")
    rate = {}
    for name, t in times.items():
        sec = statistics.median(t)
        rate[name] = tokens / sec
        peak = peaks["bf16" if "bf16" in name else "fp32"]
        print(f"{name:24} {rate[name]:8.0f} {sec:8.3f} {flops / sec / 1e9:8.1f} {flops / sec / peak:8.1%}")
    main_name = names[compiles[0]]
    result = {
        "size": args.size,
        "precision": args.precision,
        "device": args.device,
        "compile": compiles[0],
        "ours_tok_s": round(rate[main_name], 1),
        "ours_fp32_tok_s": round(rate.get("ours fp32", rate[main_name]), 1),
    }
    if peer is not None:
        result["peer_tok_s"] = round(rate["HF MarianMT fp32"], 1)
        result["train_ratio"] = round(rate[main_name] / rate["HF MarianMT fp32"], 3)
        result["fp32_ratio"] = round(result["ours_fp32_tok_s"] / rate["HF MarianMT fp32"], 3)
        print(f"ours {args.precision} / HF fp32: {result['train_ratio']:.2f}x; both fp32: {result['fp32_ratio']:.2f}x")
    if args.guided:
        result["guided_cost"] = round(rate[main_name] / rate["ours guided"] - 1, 4)
        print(f"guided alignment costs {result['guided_cost']:.1%} of a step's time")
    if len(compiles) > 1:
        result["by_compile"] = {c: round(rate[name], 1) for c, name in names.items()}
    if args.profile:
        fastest = max(names.values(), key=rate.get)
        print(f"profile of one step of {fastest}:")
        operator_table(runs[fastest], top=25, cuda=device.type == "cuda", by_device=device.type == "cuda")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
