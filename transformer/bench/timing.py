"""What the benchmarks time with: the CPU's description, interleaved medians, the decoding workload's options and
the profiler's operator table."""

import argparse
import re
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

ISA = {
    "AVX2": "avx2",
    "AVX512F": "avx512f",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX": "amx_tile",
}


def cpu_description() -> tuple[str, list[str]]:
    """The CPU's model name and which of `ISA` it has, from /proc/cpuinfo (lscpu's output where that is missing)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        try:
            text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        except OSError:
            text = ""
    name = re.search(r"^model name\s*:\s*(.+)$", text, re.M | re.I)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.M | re.I)
    have = set(flags.group(1).split()) if flags else set()
    return (name.group(1).strip() if name else "unknown CPU"), [isa for isa, flag in ISA.items() if flag in have]


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


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the workload both decoding benchmarks time: lengths, vocabulary, rounds, batch-1 sentences."""
    parser.add_argument("--src-len", type=int, default=32)
    parser.add_argument("--out-len", type=int, default=48)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-sentences", type=int, default=8, help="sentences of a batch-1 call")


def operator_table(run, top: int, cuda: bool, by_device: bool = False) -> None:
    """Each operator's self CPU time (and, on a GPU, its device time) as a share of one call's wall time.

    With `by_device`, the GPU's kernels instead, by their time on it (what bounds a GPU-bound call)."""
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        run()
        if cuda:
            torch.cuda.synchronize()
        wall_us = (time.perf_counter() - start) * 1e6
    events = prof.key_averages()
    kernels = [e for e in events if e.device_type == DeviceType.CUDA]  # an operator's device time repeats these
    if by_device:
        rows, name = sorted(kernels, key=lambda e: e.self_device_time_total, reverse=True), "kernel"
    else:
        rows, name = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True), "operator"
    print(f"{name:40} {'calls':>7} {'share':>7}" + (f" {'on GPU':>7}" if cuda else ""))
    for event in rows[:top]:
        gpu = f" {event.self_device_time_total / wall_us:7.1%}" if cuda else ""
        print(f"{event.key[:40]:40} {event.count:7} {event.self_cpu_time_total / wall_us:7.1%}{gpu}")
    in_ops = sum(e.self_cpu_time_total for e in events)
    print(f"{'all operators':40} {'':7} {in_ops / wall_us:7.1%}  (the rest: Python and dispatch)")
    if cuda:
        busy = sum(e.self_device_time_total for e in kernels)
        print(f"{'GPU busy':40} {'':7} {busy / wall_us:7.1%}  of the wall time (the rest: launches and Python)")
