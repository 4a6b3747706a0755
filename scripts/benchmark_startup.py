"""How long each console script takes to answer `--help`: Python, Hydra and whatever its module imports.

    python scripts/benchmark_startup.py                          # this checkout
    python scripts/benchmark_startup.py --checkout . /tmp/before  # two checkouts side by side (e.g. a worktree)

Each command runs as `python -m transformer.cli.NAME --help` with the checkout first on PYTHONPATH, `--rounds`
times, the checkouts interleaved; the table gives the median seconds. Run it alone: it measures a loaded machine too.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from transformer.bench.timing import cpu_description

COMMANDS = (
    "train",
    "prepare",
    "evaluate",
    "translate",
    "results",
    "average",
    "export",
    "backtranslate",
    "recipe",
    "serve",
)


def seconds(checkout: Path, command: str) -> float:
    """One `--help` of `command` from `checkout`, in wall-clock seconds."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", f"transformer.cli.{command}", "--help"],
        cwd=checkout,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", nargs="+", type=Path, default=[Path(".")], help="repository roots to time")
    parser.add_argument("--commands", nargs="+", choices=COMMANDS, default=list(COMMANDS))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    checkouts = [c.resolve() for c in args.checkout]
    times: dict[tuple[Path, str], list[float]] = {(c, n): [] for c in checkouts for n in args.commands}
    for _ in range(args.rounds):
        for command in args.commands:
            for checkout in checkouts:
                times[checkout, command].append(seconds(checkout, command))
    name, isa = cpu_description()
    print(f"{name} ({', '.join(isa) or 'no AVX2'}), {os.cpu_count()} CPUs; median of {args.rounds}, seconds")
    print(f"{'command':26}" + "".join(f"{str(c)[-30:]:>32}" for c in checkouts))
    for command in args.commands:
        row = "".join(f"{statistics.median(times[c, command]):32.2f}" for c in checkouts)
        print(f"{'transformer-' + command:26}" + row)


if __name__ == "__main__":
    main()
