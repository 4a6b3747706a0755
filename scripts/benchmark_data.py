"""Data-side scaling: tokenization throughput and the training process's peak memory vs corpus size.

For each size, writes a synthetic parallel corpus (random pseudo-words), prepares
it (SentencePiece + tokenization into Arrow, `--num-proc` processes), then runs a
short real `transformer-train` on it and reads that process's peak resident memory.
Memory should stay flat as the corpus grows: the training split stays memory-mapped.

    python scripts/benchmark_data.py --lines 1000000 4000000 [--json]
"""

import argparse
import gzip
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from transformer.config import DataConfig, SplitFiles
from transformer.data import prepare


def write_corpus(directory: Path, name: str, lines: int, seed: int) -> tuple[Path, Path]:
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(8000)]
    paths = (directory / f"{name}.src.gz", directory / f"{name}.tgt.gz")
    with gzip.open(paths[0], "wt", compresslevel=1) as src, gzip.open(paths[1], "wt", compresslevel=1) as tgt:
        for _ in range(lines):
            sentence = rng.choices(words, k=rng.randint(4, 30))
            src.write(" ".join(sentence) + "\n")
            tgt.write(" ".join(reversed(sentence)) + "\n")
    return paths


def measure(lines: int, workdir: Path, num_proc: int) -> dict:
    train, val = write_corpus(workdir, f"train{lines}", lines, 1), write_corpus(workdir, f"val{lines}", 500, 2)
    cfg = DataConfig(
        name=f"synthetic{lines}",
        src_lang="src",
        tgt_lang="tgt",
        train=SplitFiles(*map(str, train)),
        val=SplitFiles(*map(str, val)),
        prepared_dir=str(workdir / "prepared"),
        num_proc=num_proc,
    )
    cfg.tokenizer.input_sentence_size = 200_000
    start = time.perf_counter()
    prepare(cfg)
    seconds = time.perf_counter() - start
    overrides = [
        "data=files",
        f"data.name={cfg.name}",
        "data.src_lang=src",
        "data.tgt_lang=tgt",
        f"data.train.src={train[0]}",
        f"data.train.tgt={train[1]}",
        f"data.val.src={val[0]}",
        f"data.val.tgt={val[1]}",
        f"data.prepared_dir={cfg.prepared_dir}",
        "data.num_proc=1",
        "data.tokenizer.input_sentence_size=200000",
        "model=tiny",
        "trainer.max_steps=30",
        "trainer.val_every=1000",
        "trainer.val_max_sentences=20",
        "trainer.progress=false",
        f"hydra.run.dir={workdir / f'run{lines}'}",
    ]
    # A fresh wrapper per run, whose only child is the training process, reports that child's peak.
    wrapper = (
        "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "sys.stderr.write(r.stderr[-2000:] if r.returncode else ''); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)"
    )
    train_cmd = [str(Path(sys.executable).parent / "transformer-train"), *overrides]
    result = subprocess.run([sys.executable, "-c", wrapper, *train_cmd], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    peak_mb = int(result.stdout.split()[-1]) / 1024
    return {
        "lines": lines,
        "prepare_s": round(seconds, 1),
        "lines_per_s": round(lines / seconds),
        "train_peak_rss_mb": round(peak_mb),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, nargs="+", default=[1_000_000, 4_000_000])
    parser.add_argument("--num-proc", type=int, default=2, help="tokenization processes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        for lines in args.lines:
            rows.append(measure(lines, Path(tmp), args.num_proc))
            print(
                f"{rows[-1]['lines']:>10,} lines: prepared in {rows[-1]['prepare_s']:7.1f} s "
                f"({rows[-1]['lines_per_s']:,} lines/s); training process peak RSS "
                f"{rows[-1]['train_peak_rss_mb']:,} MB",
                flush=True,
            )
    if args.json:
        print(json.dumps({"runs": rows}))


if __name__ == "__main__":
    main()
