"""Serving under steady load for a long time: requests, errors, latency and the server's memory per window.

Starts `transformer-serve` on loopback (as scripts/benchmark_serve.py does), then `--clients` clients, each with one
request at a time, send the sentences of a file one per request, round and round, for `--minutes`, at `--rate`
requests per second in all (0: each client sends again as soon as it is answered). Every `--window-s` seconds it
reports the requests answered, the errors (a status other than 200, a broken connection, no answer within
`--timeout-s`), the p50/p95/p99 latency, and the server's resident memory (VmRSS in /proc/PID/status, read every
second: the window's largest).

    python scripts/soak_serve.py --checkpoint outputs/fren_s33 --minutes 60 --window-s 300 \\
        --json docs/soak_serve.json --plot docs/soak_serve.png

Exit status 1 when a request failed or the memory of a later window grew by more than `--max-growth` (5%) over the
first window's. Needs the serve extra (pip install -e '.[serve]').
"""

import argparse
import asyncio
import contextlib
import itertools
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from transformer.bench.serving import (  # noqa: E402
    DEFAULT_FILE,
    RawClient,
    add_server_options,
    percentile,
    read_sentences,
    start_server,
)
from transformer.core.files import atomic_write, atomic_write_text  # noqa: E402


@dataclass
class Window:
    """What happened in one window: latencies (s) of the requests answered in it, errors, memory samples (MiB)."""

    start_s: float
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    rss_mib: list[float] = field(default_factory=list)

    def row(self) -> dict:
        ms = {f"p{q}_ms": 1000 * percentile(self.latencies, q) if self.latencies else None for q in (50, 95, 99)}
        rss = max(self.rss_mib, default=None)
        return {
            "start_min": self.start_s / 60,
            "requests": len(self.latencies),
            "errors": self.errors,
            **ms,
            "rss_mib": rss,
        }


class Soak:
    """The windows of one run, filled by the clients and the memory sampler."""

    def __init__(self, seconds: float, window_s: float):
        self.start, self.seconds, self.window_s = time.monotonic(), seconds, window_s
        self.windows = [Window(i * window_s) for i in range(max(1, round(seconds / window_s)))]

    def now(self) -> float:
        return time.monotonic() - self.start

    def window(self) -> Window:
        return self.windows[min(int(self.now() // self.window_s), len(self.windows) - 1)]

    def running(self) -> bool:
        return self.now() < self.seconds


def resident_mib(pid: int) -> float:
    """The resident memory of process `pid` (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


async def sample_memory(soak: Soak, pid: int) -> None:
    while soak.running():
        soak.window().rss_mib.append(resident_mib(pid))
        await asyncio.sleep(1.0)


async def client(soak: Soak, url: str, sentences, interval: float, timeout: float) -> None:
    """One client: a request, its answer, then the next (no sooner than `interval` after the previous one)."""
    http = RawClient(url)
    while soak.running():
        sent = time.monotonic()
        try:
            status, _ = await asyncio.wait_for(http.post("/translate", {"text": next(sentences)}), timeout)
            ok = status == 200
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError):
            ok = False
        if ok:
            soak.window().latencies.append(time.monotonic() - sent)
        else:
            soak.window().errors += 1
            with contextlib.suppress(OSError):
                await http.close()
            http = RawClient(url)  # a new connection after a broken one
        await asyncio.sleep(max(0.0, sent + interval - time.monotonic()))
    await http.close()


async def load(soak: Soak, url: str, pid: int, sentences: list[str], args: argparse.Namespace) -> None:
    cycle = itertools.cycle(sentences)
    interval = args.clients / args.rate if args.rate > 0 else 0.0
    clients = [client(soak, url, cycle, interval, args.timeout_s) for _ in range(args.clients)]
    await asyncio.gather(sample_memory(soak, pid), *clients)


def summary(rows: list[dict], max_growth: float) -> dict:
    """Totals, the memory growth of the later windows over the first, and whether both bounds held."""
    rss = [r["rss_mib"] for r in rows if r["rss_mib"] is not None]
    growth = max(rss[1:], default=rss[0]) / rss[0] - 1 if rss else None
    errors = sum(r["errors"] for r in rows)
    ok = errors == 0 and growth is not None and growth <= max_growth
    return {"requests": sum(r["requests"] for r in rows), "errors": errors, "memory_growth": growth, "ok": ok}


def table(rows: list[dict]) -> str:
    lines = [
        "| minutes | requests | errors | p50 ms | p95 ms | p99 ms | RSS MiB |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ms = " | ".join("-" if r[k] is None else f"{r[k]:.0f}" for k in ("p50_ms", "p95_ms", "p99_ms"))
        rss = "-" if r["rss_mib"] is None else f"{r['rss_mib']:.1f}"
        lines.append(f"| {round(r['start_min'], 2):g} | {r['requests']} | {r['errors']} | {ms} | {rss} |")
    return "\n".join(lines)


def plot(rows: list[dict], output: Path, title: str, max_growth: float) -> None:
    """Latency percentiles and resident memory (with its bound) per window, side by side."""
    minutes = [r["start_min"] for r in rows]
    fig, (lat, mem) = plt.subplots(1, 2, figsize=(10, 3.6))
    for q in (50, 95, 99):
        lat.plot(minutes, [r[f"p{q}_ms"] for r in rows], marker=".", label=f"p{q}")
    lat.set(title="latency per window", xlabel="minutes", ylabel="ms")
    lat.legend(fontsize=8)
    mem.plot(minutes, [r["rss_mib"] for r in rows], marker=".")
    mem.axhline(rows[0]["rss_mib"] * (1 + max_growth), color="gray", ls="--", lw=1, label="bound")
    mem.legend(fontsize=8)
    mem.set(title="server resident memory (window's largest)", xlabel="minutes", ylabel="MiB")
    mem.set_ylim(bottom=0)
    for ax in (lat, mem):
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    atomic_write(output, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", default=DEFAULT_FILE, help="French sentences, one per line (.gz or plain)")
    parser.add_argument("--sentences", type=int, default=1000, help="the first N of the file, sent round and round")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--window-s", type=float, default=300.0, help="seconds per reported window")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients, one request in flight each")
    parser.add_argument("--rate", type=float, default=0.0, help="requests per second in all; 0 = as answered")
    parser.add_argument("--timeout-s", type=float, default=30.0, help="a request not answered by then is an error")
    parser.add_argument("--max-growth", type=float, default=0.05, help="allowed memory growth over the first window")
    add_server_options(parser)
    parser.add_argument("--json", type=Path, help="write the settings, windows and summary here")
    parser.add_argument("--plot", type=Path, help="write the latency and memory plot (PNG) here")
    args = parser.parse_args()
    sentences = read_sentences(args.file, args.sentences)
    process, url = start_server(args, batching=True)
    try:
        soak = Soak(60 * args.minutes, args.window_s)
        asyncio.run(load(soak, url, process.pid, sentences, args))
    finally:
        process.terminate()
        process.wait(timeout=60)
    rows = [w.row() for w in soak.windows]
    result = {"settings": {k: str(v) for k, v in vars(args).items()}, "windows": rows, **summary(rows, args.max_growth)}
    print(table(rows))
    growth = "?" if result["memory_growth"] is None else f"{100 * result['memory_growth']:+.1f}%"
    print(f"{result['requests']} requests, {result['errors']} errors, memory {growth} over the first window")
    if args.json:
        atomic_write_text(args.json, json.dumps(result, indent=1))
    if args.plot:
        title = f"{args.clients} clients, {args.minutes:g} min, {len(sentences)} sentences round and round"
        plot(rows, args.plot, title, args.max_growth)
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
