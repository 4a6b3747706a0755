"""Peak memory of `transformer-translate input=FILE output=FILE` against the number of lines: flat, as it reads,
translates and writes `chunk_lines` lines at a time.

    python scripts/benchmark_translate_memory.py                          # 10,000 and 100,000 lines
    python scripts/benchmark_translate_memory.py --lines 1000 10000 --chunk-lines 500

A tiny random model (`transformer.bench.tiny.write_checkpoint`) translates generated lines greedily with at most two
output tokens a line (decoding.max_len_a=0, max_len_b=2), so that the run measures the command, not the model. The
peak is the process's VmHWM in /proc/PID/status, polled until it ends. Run it alone: it takes a CPU for minutes.
"""

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from transformer.bench.tiny import WORDS_FR, write_checkpoint

ROOT = Path(__file__).resolve().parent.parent


def peak_rss_mib(command: list[str]) -> tuple[float, float]:
    """Run `command`; its peak resident memory (MiB, VmHWM polled from /proc) and wall-clock seconds."""
    start, peak = time.perf_counter(), 0
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    status = Path(f"/proc/{process.pid}/status")
    while process.poll() is None:
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines())
            peak = max(peak, int(fields["VmHWM"].split()[0]))  # kB
        except (OSError, KeyError):
            pass  # ending
        time.sleep(0.05)
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{process.stderr.read().decode()[-2000:]}")
    return peak / 1024, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument("--chunk-lines", type=int, default=2000)
    args = parser.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = write_checkpoint(Path(tmp) / "tiny.safetensors")
        print(f"{'lines':>10} {'peak RSS MiB':>13} {'seconds':>8}   chunk_lines={args.chunk_lines}")
        for n in args.lines:
            source = Path(tmp) / f"in.{n}.fr"
            with open(source, "w") as f:
                for _ in range(n):
                    f.write(" ".join(rng.choices(WORDS_FR, k=rng.randint(3, 12))) + "\n")
            command = [sys.executable, "-m", "transformer.cli.translate", f"checkpoint={checkpoint}"]
            command += [f"input={source}", f"output={Path(tmp) / 'out.en'}", f"chunk_lines={args.chunk_lines}"]
            command += ["decoding=greedy", "decoding.max_len_a=0", "decoding.max_len_b=2", "device=cpu"]
            mib, seconds = peak_rss_mib(command)
            print(f"{n:>10,} {mib:>13.1f} {seconds:>8.1f}", flush=True)
        print("each row:", " ".join(command).replace(tmp, "TMP"))


if __name__ == "__main__":
    main()
