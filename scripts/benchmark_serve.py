"""Serving speed: sentences/s and latency percentiles of transformer-serve under concurrent clients.

Starts `transformer-serve` on loopback with dynamic batching on and then off, sends the
sentences of a file one per request from 1, 8, 32 and 64 concurrent clients, and compares
with offline translation of the same sentences (the whole file in one `Translator.search`,
as `transformer-translate input=FILE` does after loading, and one sentence at a time), measured
in a fresh process per round, as each round starts a fresh server: the median of `--rounds`.

    python scripts/benchmark_serve.py --checkpoint RUN_DIR                 # Multi30k test 2016, 1,000 sentences
    python scripts/benchmark_serve.py --checkpoint RUN_DIR --sentences 64 --clients 1 8 --json

Besides throughput and latency, each row gives what its searches were: mean sentences per search (`batch`), the
share of the wall time the server spent searching (`searching`) and the sentences per second of searching (`search
rate`), read from the answers' `batch` fields; throughput = searching × search rate.

Needs the serve extra (pip install -e '.[serve]'). Figures from a busy machine are noisy: say so.
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import torch

from transformer.bench.serving import (
    DEFAULT_FILE,
    RawClient,
    add_server_options,
    decoding_overrides,
    percentile,
    read_sentences,
    start_server,
)
from transformer.core import presets
from transformer.core.config import DecodingConfig
from transformer.core.precision import TRANSLATED_IN
from transformer.decoding.translator import Translator
from transformer.runs.checkpoint import load_checkpoint


def offline(checkpoint: str, sentences: list[str], decoding: DecodingConfig, rounds: int) -> dict:
    """Offline throughput (one search over all, median of `rounds`) and single-sentence latencies, after loading
    and packing the weights once (as the server does)."""
    ckpt = load_checkpoint(checkpoint)
    translator = Translator(ckpt.model, ckpt.tokenizer, decoding)
    translator.translate(sentences[:8])  # warm-up
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        translator.translate(sentences)
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    singles = []
    for sentence in sentences:
        start = time.perf_counter()
        translator.translate([sentence])
        singles.append(time.perf_counter() - start)
    return {
        "sentences_per_s": len(sentences) / seconds,
        "single_p50": percentile(singles, 50),
        "single_p95": percentile(singles, 95),
    }


def offline_in_fresh_process(args: argparse.Namespace) -> dict:
    """`offline()` in a new process of its own: each process has its own speed (±10% here), as each server has."""
    command = [sys.executable, __file__, "--checkpoint", args.checkpoint, "--file", args.file, "--offline-only"]
    command += ["--sentences", str(args.sentences), "--decoding", args.decoding, "--threads", str(args.threads)]
    command += ["--precision", args.precision] if args.precision else []
    command += ["--compiled"] if args.compiled else []
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def file_translation(args: argparse.Namespace, sentences: list[str]) -> float:
    """Wall seconds of `transformer-translate input=FILE` on the sentences, loading included, in the server's
    decoding and precision."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "input.fr"
        path.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
        script = Path(sys.executable).parent / "transformer-translate"
        start = time.perf_counter()
        subprocess.run(
            [str(script), f"checkpoint={args.checkpoint}", f"input={path}", *decoding_overrides(args)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **({"OMP_NUM_THREADS": str(args.threads)} if args.threads else {})},
        )
        return time.perf_counter() - start


async def load(url: str, sentences: list[str], clients: int, kind: str) -> tuple[float, list[float], dict]:
    """Wall time, per-request latencies and the batches answered ({id: (sentences, decode ms)}) of `clients`
    clients sharing the sentences, one per request."""
    todo = list(reversed(sentences))
    latencies: list[float] = []
    batches: dict[int, tuple[int, float]] = {}

    def record(body: bytes) -> None:
        batch = json.loads(body)["batch"]
        batches[batch["id"]] = (batch["sentences"], batch["decode_ms"])

    async def raw_client() -> None:
        http = RawClient(url)
        try:
            while todo:
                sentence = todo.pop()
                start = time.perf_counter()
                status, body = await http.post("/translate", {"text": sentence, "split": False})
                assert status == 200, status
                latencies.append(time.perf_counter() - start)
                record(body)
        finally:
            await http.close()

    async def httpx_client() -> None:
        async with httpx.AsyncClient(timeout=600) as http:
            while todo:
                sentence = todo.pop()
                start = time.perf_counter()
                response = await http.post(f"{url}/translate", json={"text": sentence, "split": False})
                response.raise_for_status()
                latencies.append(time.perf_counter() - start)
                record(response.content)

    client = raw_client if kind == "raw" else httpx_client
    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return time.perf_counter() - start, latencies, batches


def serve_rows(args, sentences: list[str], batching: bool) -> list[dict]:
    process, url = start_server(args, batching)
    rows = []
    try:
        asyncio.run(load(url, sentences[:16], 4, args.client))  # warm-up
        for clients in args.clients:
            wall, latencies, batches = asyncio.run(load(url, sentences, clients, args.client))
            search_s = sum(ms for _, ms in batches.values()) / 1000
            rows.append(
                {
                    "batching": batching,
                    "clients": clients,
                    "sentences_per_s": len(sentences) / wall,
                    **{f"p{q}": percentile(latencies, q) for q in (50, 95, 99)},
                    "batch_sentences": len(sentences) / len(batches),  # mean sentences per search
                    "search_busy": search_s / wall,  # share of the wall time spent searching
                    "search_rate": len(sentences) / search_s,  # sentences per second of searching
                }
            )
            print(
                f"  batching={batching} clients={clients}: {rows[-1]['sentences_per_s']:.1f} sentences/s",
                file=sys.stderr,
            )
    finally:
        process.terminate()
        process.wait(timeout=60)
    return rows


def medians(runs: list[list[dict]]) -> list[dict]:
    """Rows of the same batching mode and clients over several runs: the median of each figure."""
    rows = []
    for same in zip(*runs):
        figures = ("sentences_per_s", "p50", "p95", "p99", "batch_sentences", "search_busy", "search_rate")
        rows.append(same[0] | {key: statistics.median(row[key] for row in same) for key in figures})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default=DEFAULT_FILE, help="French sentences, one per line (.gz or plain)")
    parser.add_argument("--sentences", type=int, default=1000, help="the first N of the file")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 64])
    add_server_options(parser)
    parser.add_argument("--rounds", type=int, default=1, help="runs of everything; the tables give medians")
    parser.add_argument("--batching", nargs="+", default=["on", "off"], choices=["on", "off"], help="server modes")
    parser.add_argument("--client", default="raw", choices=["raw", "httpx"], help="the load generator's HTTP client")
    parser.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    parser.add_argument("--offline-only", action="store_true", help="print offline figures of this process as JSON")
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    sentences = read_sentences(args.file, args.sentences)
    # as the server and transformer-translate decode
    overrides = [f"precision={args.precision or TRANSLATED_IN}", f"compiled={args.compiled}"]
    decoding = presets.compose("decoding", args.decoding, overrides)
    if args.offline_only:
        print(json.dumps(offline(args.checkpoint, sentences, decoding, rounds=3)))
        return
    bases = [offline_in_fresh_process(args) for _ in range(args.rounds)]
    base = {key: statistics.median(b[key] for b in bases) for key in bases[0]}
    file_seconds = file_translation(args, sentences)
    rows = [
        row
        for mode in args.batching
        for row in medians([serve_rows(args, sentences, mode == "on") for _ in range(args.rounds)])
    ]
    threads = torch.get_num_threads()
    print(f"{len(sentences)} sentences, decoding={args.decoding}, torch threads {threads}, {args.rounds} rounds")
    rate = len(sentences) / file_seconds
    print(f"transformer-translate input=FILE: {file_seconds:.1f} s with loading, {rate:.1f} sentences/s")
    rates = ", ".join(f"{b['sentences_per_s']:.1f}" for b in bases)
    print(
        f"offline ({rates} in {args.rounds} processes): {base['sentences_per_s']:.1f} sentences/s in one search; "
        "one sentence alone: "
        f"p50 {1000 * base['single_p50']:.0f} ms, p95 {1000 * base['single_p95']:.0f} ms\n"
    )
    head = "| batching | clients | sentences/s | vs offline | p50 ms | p95 ms | p99 ms"
    print(f"{head} | batch | searching | search rate |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {'on' if r['batching'] else 'off'} | {r['clients']} | {r['sentences_per_s']:.1f} | "
            f"{r['sentences_per_s'] / base['sentences_per_s']:.0%} | {1000 * r['p50']:.0f} | "
            f"{1000 * r['p95']:.0f} | {1000 * r['p99']:.0f} | {r['batch_sentences']:.1f} | "
            f"{r['search_busy']:.0%} | {r['search_rate']:.0f} |"
        )
    if args.json:
        print(json.dumps({"offline": base, "offline_runs": bases, "file_seconds": file_seconds, "serve": rows}))


if __name__ == "__main__":
    main()
