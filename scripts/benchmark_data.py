"""Data-side scaling: tokenization throughput and the training process's peak memory vs corpus size.

For each size, writes a synthetic parallel corpus (random pseudo-words), prepares
it (SentencePiece + tokenization into Arrow, `--num-proc` processes), then runs a
short real `transformer-train` on it and reads that process's peak resident memory.
Memory should stay flat as the corpus grows: the training split stays memory-mapped and
only an index of lengths (a few bytes per pair) is held; peak anonymous memory is what
the process holds, peak RSS adds the mapped file pages it happened to read.

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

from transformer.config import DataConfig, SourceConfig
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


def run_and_watch(cmd: list[str]) -> tuple[float, float]:
    """Run `cmd`; return its peak resident memory and peak anonymous memory (MB).

    RSS also counts pages of the memory-mapped Arrow files that were read, which the
    kernel drops under pressure; anonymous memory (heap, tensors, the lengths index)
    is what the process really holds, so it is polled from /proc every 20 ms.
    """
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, text=True)
        status, rss, anon = Path(f"/proc/{proc.pid}/status"), 0, 0
        while proc.poll() is None:
            try:
                fields = dict(line.split(":", 1) for line in status.read_text().splitlines())
                rss = max(rss, int(fields["VmHWM"].split()[0]))
                anon = max(anon, int(fields["RssAnon"].split()[0]))
            except (OSError, KeyError, ValueError):
                pass
            time.sleep(0.02)
        if proc.returncode != 0:
            log.seek(0)
            raise SystemExit(log.read()[-2000:])
    return rss / 1024, anon / 1024


def measure(lines: int, workdir: Path, num_proc: int) -> dict:
    train, val = write_corpus(workdir, f"train{lines}", lines, 1), write_corpus(workdir, f"val{lines}", 500, 2)
    cfg = DataConfig(
        name=f"synthetic{lines}",
        src_lang="src",
        tgt_lang="tgt",
        train=SourceConfig(*map(str, train)),
        val=SourceConfig(*map(str, val)),
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
    train_cmd = [str(Path(sys.executable).parent / "transformer-train"), *overrides]
    peak_rss_mb, peak_anon_mb = run_and_watch(train_cmd)
    return {
        "lines": lines,
        "prepare_s": round(seconds, 1),
        "lines_per_s": round(lines / seconds),
        "train_peak_rss_mb": round(peak_rss_mb),
        "train_peak_anon_mb": round(peak_anon_mb),
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
                f"({rows[-1]['lines_per_s']:,} lines/s); training process peak: "
                f"anonymous {rows[-1]['train_peak_anon_mb']:,} MB, RSS {rows[-1]['train_peak_rss_mb']:,} MB",
                flush=True,
            )
    if args.json:
        print(json.dumps({"runs": rows}))


if __name__ == "__main__":
    main()
