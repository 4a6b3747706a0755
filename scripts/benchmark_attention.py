"""Speed and memory of each attention variant: one layer, forward + backward, and one decoding step.

One attention module (d_model 256, 4 heads, batch 4, CPU, the machine's threads) per
variant, plus `dot-materialized` (forward + backward only): `dot` through SDPA's math kernel,
which stores the T×T weights as the formula reads, where `dot` itself runs PyTorch's fused CPU
kernel that never does. Each measurement runs in a forked child so its peak resident memory can be read
(ru_maxrss minus the child's size at fork) and an allocation past `--mem-gib` fails
there ("did not fit": `ms` null) without touching the others.

    python scripts/benchmark_attention.py --quick            # a subset, under two minutes
    python scripts/benchmark_attention.py --json --plot docs/attention_speed.png
    python scripts/benchmark_attention.py --queries           # dot's two CPU kernels at decoding's shapes
    python scripts/benchmark_attention.py --queries --threads 2   # ... after torch.set_num_threads(2)

`--queries` instead times `dot` attention at the shapes of a decoding step (`base`: 8 heads of 64; 32 keys; B
sentences, Q queries each: Q = 1 a greedy step, Q = 5 a beam's hypotheses folded into cross-attention's query
axis, Q = 32 the encoder) through SDPA's fused kernel and through two batched products (`attention_reference`),
the choice an inference copy makes (`transformer/fast_inference/packed.py`). `--threads N` calls
`torch.set_num_threads(N)` first, as the trainer, the server and the benchmarks do: in torch 2.13 on CPU, SDPA's
kernel for several queries is then up to 2.5× slower at the same thread count (docs/speed.md).
"""

import argparse
import contextlib
import json
import math
import os
import resource
import statistics
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from transformer.core.config import AttentionConfig
from transformer.models.attention import VARIANTS, build_attention, usable
from transformer.models.attention.masks import attention_reference
from transformer.models.decoder_cache import DecoderCache

D_MODEL, HEADS, BATCH = 256, 4, 4
TEXTBOOK = "dot-materialized"  # `dot` through SDPA's math kernel: the T×T weights stored, as the formula reads


def knobs_for(length: int) -> AttentionConfig:
    """The knobs at sequence length `length`: w = 64, k = 64, buckets of 64, strided s = w ≈ √T (at least 16)."""
    side = max(16, round(math.sqrt(length)))
    return AttentionConfig(window=64, stride=side, bucket_size=64, n_hashes=2, rank=64)


def train_step(name: str, length: int, reps: int) -> tuple[float, None]:
    """Median ms of forward + backward of one encoder self-attention layer at length `length`."""
    variant = "dot" if name == TEXTBOOK else name
    attn = build_attention(variant, D_MODEL, HEADS, 0.0, knobs_for(length), max(length, 1024))
    x = torch.randn(BATCH, length, D_MODEL, requires_grad=True)
    kernel = sdpa_kernel(SDPBackend.MATH) if name == TEXTBOOK else contextlib.nullcontext()
    times = []
    with kernel:
        for _ in range(reps + 1):  # the first is a warm-up
            start = time.perf_counter()
            attn(*attn.project_qkv(x)).sum().backward()
            times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times[1:]), None


@torch.inference_mode()
def decode_step(name: str, length: int, reps: int) -> tuple[float, float]:
    """Median ms of one cached decoder self-attention step after `length` steps, and the cache's MiB.

    The keys and values live in the decoder's own `DecoderCache`, filled one step at a time,
    so a variant with a bounded reach (`local`) keeps only what its queries can see.
    """
    attn = build_attention(name, D_MODEL, HEADS, 0.0, knobs_for(length), max(length, 1024)).eval()
    source = torch.zeros(BATCH, HEADS, 1, D_MODEL // HEADS)
    cache = DecoderCache([(source, source)], 1, length + reps + 1, attn.reach)
    x = torch.randn(BATCH, 1, D_MODEL)
    times = []
    for step in range(length + reps + 1):  # the steps before `length` fill the cache and warm up
        start = time.perf_counter()
        cache.make_room(1)
        q, k, v = attn.project_qkv(x)
        attn(q, *cache.extend(0, k, v), is_causal=True)
        cache.advance()
        if step >= length:
            times.append(time.perf_counter() - start)
    cache_mib = cache.buffer.numel() * cache.buffer.element_size() / 2**20
    return 1000 * statistics.median(times), cache_mib


@torch.inference_mode()
def query_kernels(rounds: int = 7, calls: int = 100) -> None:
    """Print µs per call (median of `rounds`) of SDPA and of two batched products, by sentences and queries."""
    heads, head_dim, keys = 8, 64, 32
    print(f"{'sentences':>9} {'queries':>7} {'SDPA µs':>9} {'products µs':>11} {'SDPA / products':>15}")
    for sentences in (1, 8, 32):
        for queries in (1, 2, 5, 32):
            q = torch.randn(sentences, heads, queries, head_dim)
            k, v = torch.randn(2, sentences, heads, keys, head_dim)
            mask = torch.ones(sentences, 1, 1, keys, dtype=torch.bool)
            mask[:, ..., keys - 3 :] = False  # a padded source
            kernels = (torch.nn.functional.scaled_dot_product_attention, attention_reference)
            sdpa, products = (_median_us(kernel, (q, k, v, mask), rounds, calls) for kernel in kernels)
            print(f"{sentences:9} {queries:7} {sdpa:9.0f} {products:11.0f} {sdpa / products:14.2f}×", flush=True)


def _median_us(kernel, args: tuple, rounds: int, calls: int) -> float:
    kernel(*args)  # warm-up
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            kernel(*args)
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure(phase: str, name: str, length: int, reps: int, mem_gib: float) -> dict:
    """One record, measured in a forked child: {"variant", "phase", "T", "ms", "peak_mib"} (decode: "cache_mib")."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read)
        base = _rss_mib()
        limit = int(mem_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_DATA, (limit + int(base * 2**20), resource.RLIM_INFINITY))
        try:
            ms, cache = (train_step if phase == "train" else decode_step)(name, length, reps)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
        except (RuntimeError, MemoryError):
            ms, peak, cache = None, None, None
        os.write(write, json.dumps([ms, peak, cache]).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        data = f.read()
    os.waitpid(pid, 0)
    ms, peak, cache = json.loads(data) if data else (None, None, None)  # no answer: killed, e.g. out of memory
    record = {"variant": name, "phase": phase, "T": length, "ms": ms, "peak_mib": peak}
    return record if phase == "train" else {**record, "cache_mib": cache}


def plot(records: list[dict], path: str) -> None:
    """Log–log time and memory against T, one line per variant: train (peak memory) and decode (cache size)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for col, phase in enumerate(("train", "decode")):
        for row, key in enumerate(("ms", "peak_mib" if phase == "train" else "cache_mib")):
            ax = axes[row][col]
            for name in (*VARIANTS, TEXTBOOK):
                pts = [(r["T"], r.get(key)) for r in records if r["variant"] == name and r["phase"] == phase]
                pts = [(t, value) for t, value in pts if value]
                if pts:
                    ax.loglog(*zip(*pts), marker="o", label=name)
            ax.set_xlabel("T (sequence length)" if phase == "train" else "output length so far")
            ax.set_ylabel({"ms": "ms (median)", "peak_mib": "peak MiB", "cache_mib": "KV cache MiB"}[key])
            ax.set_title(f"{'forward + backward' if phase == 'train' else 'one decoding step'}: {key}", fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="T up to 2,048 and output lengths 256, 1,024")
    parser.add_argument("--json", action="store_true", help="end with one JSON line: the list of records")
    parser.add_argument("--plot", help="write the log–log PNG here")
    parser.add_argument("--mem-gib", type=float, default=12.0, help="memory a measurement may take")
    parser.add_argument("--max-ms", type=float, default=60_000, help="skip longer T once a step takes this long")
    parser.add_argument("--queries", action="store_true", help="dot's two CPU kernels at decoding's shapes instead")
    parser.add_argument("--threads", type=int, default=0, help="with --queries: torch threads; 0 = torch's default")
    args = parser.parse_args()
    if args.queries:
        if args.threads:
            torch.set_num_threads(args.threads)
        query_kernels()
        return
    train_lengths = [128, 512, 2048] if args.quick else [128, 512, 2048, 8192, 16384]
    decode_lengths = [256, 1024] if args.quick else [256, 512, 1024, 2048, 4096]
    reps = 2 if args.quick else 3
    records = []
    for phase, lengths in (("train", train_lengths), ("decode", decode_lengths)):
        for name in (*VARIANTS, TEXTBOOK) if phase == "train" else VARIANTS:
            if phase == "decode" and not usable(name, "decoder"):
                continue
            too_slow = False
            for length in lengths:
                record = measure(phase, name, length, reps, args.mem_gib) if not too_slow else None
                record = record or {"variant": name, "phase": phase, "T": length, "ms": None, "peak_mib": None}
                too_slow = too_slow or record["ms"] is None or record["ms"] > args.max_ms
                records.append(record)
                ms = "did not fit / skipped" if record["ms"] is None else f"{record['ms']:10.1f} ms"
                peak = "" if record["peak_mib"] is None else f"{record['peak_mib']:9.0f} MiB peak"
                cache = f"{record['cache_mib']:7.2f} MiB cache" if record.get("cache_mib") is not None else ""
                print(f"{phase:6} {name:9} T={length:6} {ms} {peak} {cache}", flush=True)
    if args.plot:
        plot(records, args.plot)
    if args.json:
        print(json.dumps(records))


if __name__ == "__main__":
    main()
