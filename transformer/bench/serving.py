"""What the serving benchmarks share: the sentences, a transformer-serve process on loopback, a light HTTP client
and the page's browser (Debian's Chromium, as the page's test drives it)."""

import argparse
import asyncio
import gzip
import json
import shutil
import socket
import subprocess
import sys
import time

import httpx

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
# Without the background-networking flags Chromium tries to reach the internet, which a closed network refuses.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DRAWN = "document.getElementById('heatmap').dataset.title"

DEFAULT_FILE = "/work/shared/data/multi30k/test_2016_flickr.fr.gz"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def read_sentences(path: str, n: int) -> list[str]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()][:n]


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """The options `start_server` reads: the checkpoint, and the server's decoding, threads, wait and precision."""
    parser.add_argument("--checkpoint", required=True, help="run directory or .safetensors file")
    parser.add_argument("--decoding", default="beam", choices=["greedy", "beam"], help="configs/decoding/*.yaml")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (the server's too); 0 = torch's default")
    parser.add_argument("--max-wait-ms", type=float, help="serve.max_wait_ms; default: the server's")
    parser.add_argument("--precision", help="decoding.precision (fp32, int8, ...); default: the server's")
    parser.add_argument("--compiled", action="store_true", help="decoding.compiled=true: the compiled decoder step")


def decoding_overrides(args: argparse.Namespace) -> list[str]:
    """The decoding of the server and of `transformer-translate`: `--decoding`, `--precision` where given and
    `--compiled`."""
    precision = [f"decoding.precision={args.precision}"] if args.precision else []
    return [f"decoding={args.decoding}", *precision, *(["decoding.compiled=true"] if args.compiled else [])]


def start_server(args: argparse.Namespace, batching: bool) -> tuple[subprocess.Popen, str]:
    """`transformer-serve` on a free loopback port, once it answers /health."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [
        *(sys.executable, "-m", "transformer.cli.serve"),  # transformer-serve as a module: no installed script needed
        f"checkpoint={args.checkpoint}",
        *decoding_overrides(args),
        f"serve.port={port}",
        f"serve.batching={str(batching).lower()}",
        f"serve.num_threads={args.threads}",
        "serve.timeout_s=600",
    ]
    command += [f"serve.max_wait_ms={args.max_wait_ms}"] if args.max_wait_ms is not None else []
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
    while True:
        try:
            httpx.get(f"{url}/health", timeout=5).raise_for_status()
            return process, url
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("transformer-serve did not start") from None
            time.sleep(0.2)


class RawClient:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams.

    The clients share the server's cores, so their own cost counts against it: httpx's pure-Python client spends
    about as much CPU per request as the server's HTTP side does (docs/serving.md), this one a small part of it.
    """

    def __init__(self, url: str):
        self.host, self.port = url.removeprefix("http://").split(":")
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: dict) -> tuple[int, bytes]:
        """Status and body of one POST of `body` as JSON."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, int(self.port))
        data = json.dumps(body).encode()
        head = f"POST {path} HTTP/1.1\r\nhost: {self.host}\r\ncontent-type: application/json\r\n"
        self.writer.write(f"{head}content-length: {len(data)}\r\n\r\n".encode() + data)
        lines = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in lines[1:] if line)
        return int(lines[0].split()[1]), await self.reader.readexactly(int(headers["content-length"]))

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()
