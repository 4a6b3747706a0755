"""Data at scale: `transformer-prepare` against SentencePiece's own limit, memory, disk, and training's start.

For each N it writes a WMT-like corpus (the project's corpora recombined: Multi30k, Tatoeba and newstest2014 pairs
joined until a sentence reaches a length drawn from a log-normal of ~25 words; it measures speed and memory, not
quality), then, one after the other and alone:

- the limit: SentencePiece trained on the same sample size, plus both sides encoded in chunks with its own threads
  (`encode(..., num_threads=cores)`), reading the files included;
- `transformer-prepare` as a process: wall clock, peak anonymous memory (`RssAnon`, summed over the process tree;
  SentencePiece's training stage apart, and the screening and tokenizing passes' alone), peak and final disk of the
  prepared folder;
- the epoch start (the batch order, padding and pairs per corpus; the median of three epochs, each built once the
  last is dropped, as the trainer does, and the first apart), the batch loader alone on one core (tokens/s over
  2,000 batches: cold, its files put out of the page cache first, then the same batches again, warm), and a real
  `transformer-train` of a tiny model: seconds to its first step and its peak anonymous memory.

    python scripts/benchmark_scale.py --pairs 1000000 4000000 --json      # --full adds 40M
    python scripts/benchmark_scale.py --pairs 1000000 --code ../old      # the same on another checkout
"""

import argparse
import contextlib
import gzip
import json
import os
import platform
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
SOURCES = [("newstest2014", "test"), ("multi30k", "train"), ("tatoeba", "train")]
BIN = Path(sys.executable).parent


def cpu() -> str:
    """The CPU's model name and the vector extensions that matter here."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = re.search(r"model name\s*:\s*(.*)", info)
    family = re.search(r"cpu family\s*:\s*(\d+)", info), re.search(r"\nmodel\s*:\s*(\d+)", info)
    flags = set(re.search(r"flags\s*:\s*(.*)", info).group(1).split()) if "flags" in info else set()
    ext = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile") if f in flags]
    fam = f" family {family[0].group(1)} model {family[1].group(1)}" if all(family) else ""
    return f"{model.group(1) if model else platform.processor()}{fam} ({', '.join(ext)}), {os.cpu_count()} cores"


def write_corpus(folder: Path, pairs: int, seed: int = 0) -> tuple[Path, Path]:
    """`pairs` WMT-like sentence pairs as two gzip files (fr, en) in `folder` (kept if they are there)."""
    paths = folder / f"wmtlike{pairs}.fr.gz", folder / f"wmtlike{pairs}.en.gz"
    if all(path.exists() for path in paths):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    pool = []
    for name, split in SOURCES:
        sides = [gzip.open(SHARED / name / f"{split}.{lang}.gz", "rt").read().splitlines() for lang in ("fr", "en")]
        pool += zip(*sides)
    rng = random.Random(seed)
    tmp = [path.with_suffix(".tmp") for path in paths]
    with gzip.open(tmp[0], "wt", compresslevel=1) as fr, gzip.open(tmp[1], "wt", compresslevel=1) as en:
        for _ in range(pairs):
            target, words, src, tgt = max(1, int(rng.lognormvariate(3.0, 0.6))), 0, [], []
            while words < target:
                a, b = rng.choice(pool)
                src.append(a), tgt.append(b)
                words += a.count(" ") + 1
            fr.write(" ".join(src) + "\n"), en.write(" ".join(tgt) + "\n")
    for done, path in zip(tmp, paths):
        done.replace(path)
    return paths


class Watch:
    """Polls a process tree's summed RssAnon (by stage, read from its log lines) and a folder's size, and times
    each stage."""

    def __init__(self, proc: subprocess.Popen, folder: Path | None, stages: dict[str, str]):
        self.proc, self.folder, self.stages = proc, folder, stages
        self.stage, self.anon, self.disk = "other", {}, 0
        self.seconds: dict[str, float] = {}
        self.since = time.perf_counter()
        threading.Thread(target=self._poll, daemon=True).start()

    def _tree(self) -> list[int]:
        pids, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            pids.append(pid)
            for task in Path(f"/proc/{pid}/task").glob("*"):
                children = Path(f"{task}/children")
                if children.exists():
                    todo += [int(c) for c in children.read_text().split()]
        return pids

    def _poll(self) -> None:
        while self.proc.poll() is None:
            total = 0
            try:
                for pid in set(self._tree()):
                    status = Path(f"/proc/{pid}/status").read_text()
                    total += int(re.search(r"RssAnon:\s+(\d+)", status).group(1)) * 1024
            except (OSError, AttributeError):
                pass
            self.anon[self.stage] = max(self.anon.get(self.stage, 0), total)
            if self.folder is not None:
                with contextlib.suppress(OSError):  # prepare renames and removes its temporary folders as it goes
                    self.disk = max(self.disk, du(self.folder))
            time.sleep(0.2)

    def follow(self) -> str:
        """Read the process's stderr to its end, switching stages on the log lines; returns the log."""
        log = []
        for line in self.proc.stderr:
            log.append(line)
            for pattern, stage in self.stages.items():
                if pattern in line:
                    self._enter(stage)
        self.proc.wait()
        self._enter("other")
        return "".join(log)

    def _enter(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[self.stage] = self.seconds.get(self.stage, 0.0) + now - self.since
        self.stage, self.since = stage, now


def du(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def run(cmd: list[str], env: dict, folder: Path | None = None, stages: dict | None = None) -> tuple[float, Watch, str]:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    watch = Watch(proc, folder, stages or {})
    log = watch.follow()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:2])} failed:\n{log[-3000:]}")
    return time.perf_counter() - start, watch, log


LIMIT = """
import gzip, io, itertools, os, sys, time
import sentencepiece as spm
src, tgt, sample, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), len(os.sched_getaffinity(0))
start = time.perf_counter()
lines = [l.rstrip("\\n") for path in (src, tgt) for l in itertools.islice(gzip.open(path, "rt"), sample // 2)]
model = io.BytesIO()
spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=8000, model_type="bpe",
    input_sentence_size=sample, shuffle_input_sentence=True, hard_vocab_limit=False, minloglevel=2)
del lines
trained = time.perf_counter()
sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
for path in (src, tgt):
    with gzip.open(path, "rt") as f:
        while chunk := [l.rstrip("\\n") for l in itertools.islice(f, 20000)]:
            sp.encode(chunk, num_threads=threads, return_type="numpy")
print(trained - start, time.perf_counter() - trained)
"""

LOADER = """
import json, os, sys, time
from pathlib import Path
import torch
from transformer.data import batching
from transformer.data.preparation import PreparedData
torch.set_num_threads(1)
folder = Path(sys.argv[1])
for path in folder.rglob("*.arrow"):  # out of the page cache: the first pass reads the disk
    with open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
data = PreparedData(folder)
start = time.perf_counter()
train = batching.TrainBatches.from_dataset(data.split("train"), 256, 4096, 1)
built = time.perf_counter() - start
times, batches = [], None
for epoch in range(3):
    del batches  # as the trainer does: the last epoch's batches are gone before the next are built
    start = time.perf_counter()
    batches = train.epoch(epoch)
    if hasattr(batches, "padding_fraction"):
        batches.padding_fraction()
    else:  # the code before the vectorised batch order
        batching.padding_fraction(train.lengths, batches)
    train.pairs_per_corpus(batches)
    times.append(time.perf_counter() - start)
def load():
    tokens, start = 0, time.perf_counter()
    for i in range(min(2000, len(batches))):
        batch = train.collate(batches[i], 0)
        tokens += int((batch.src != 0).sum()) + int((batch.tgt_out != 0).sum())
    return tokens / (time.perf_counter() - start)
cold = load()
print(json.dumps({"load_s": built, "first_epoch_start_s": times[0], "epoch_start_s": sorted(times)[1],
                  "loader_cold_tokens_per_s": cold, "loader_tokens_per_s": load()}))
"""


def measure(pairs: int, work: Path, env: dict, sample: int, corpora: Path) -> dict:
    src, tgt = write_corpus(corpora, pairs)
    row = {"pairs": pairs}
    out = subprocess.run(
        [sys.executable, "-P", "-c", LIMIT, str(src), str(tgt), str(sample)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    row["limit_train_s"], row["limit_encode_s"] = (round(float(x), 1) for x in out)
    row["limit_s"] = round(row["limit_train_s"] + row["limit_encode_s"], 1)
    prepared = work / f"prepared{pairs}"
    data = [
        "data=files",
        f"data.name=wmtlike{pairs}",
        f"data.train.src={src}",
        f"data.train.tgt={tgt}",
        f"data.val.src={src}",
        f"data.val.tgt={tgt}",
        f"data.prepared_dir={prepared}",
        f"data.tokenizer.input_sentence_size={sample}",
    ]
    val = work / "val.fr", work / "val.en"
    for path, full in zip(val, (src, tgt)):
        with gzip.open(full, "rt") as f:
            path.write_text("".join(next(f) for _ in range(1000)))
    data[4:6] = [f"data.val.src={val[0]}", f"data.val.tgt={val[1]}"]
    stages = {
        "screening ": "screening",
        "training SentencePiece": "sentencepiece",
        "SentencePiece bpe": "other",
        "tokenizing ": "tokenizing",
    }
    seconds, watch, _ = run([str(BIN / "transformer-prepare"), *data], env, prepared, stages)
    (folder,) = [p for p in prepared.iterdir() if p.is_dir() and not p.name.startswith(".")]
    meta = json.loads((folder / "meta.json").read_text())
    final = du(folder)
    spm_train = watch.seconds.get("sentencepiece", 0.0)
    row.update(
        prepare_s=round(seconds, 1),
        ratio=round(seconds / row["limit_s"], 2),
        spm_train_s=round(spm_train, 1),
        us_per_pair=round(seconds / pairs * 1e6, 1),
        us_per_pair_beyond_spm_train=round((seconds - spm_train) / pairs * 1e6, 1),
        peak_anon_gib=round(max(v for k, v in watch.anon.items() if k != "sentencepiece") / 2**30, 2),
        screening_anon_gib=round(watch.anon.get("screening", 0) / 2**30, 2),
        tokenizing_anon_gib=round(watch.anon.get("tokenizing", 0) / 2**30, 2),
        spm_train_anon_gib=round(watch.anon.get("sentencepiece", 0) / 2**30, 2),
        disk_peak_gib=round(watch.disk / 2**30, 2),
        disk_final_gib=round(final / 2**30, 2),
        bytes_per_token=round(final / max(meta.get("tokens", 0), 1), 2) if "tokens" in meta else None,
    )
    loader = (
        subprocess.run(
            [sys.executable, "-P", "-c", LOADER, str(folder)], env=env, check=True, capture_output=True, text=True
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    row.update({k: round(v) if k.startswith("loader") else round(v, 2) for k, v in json.loads(loader).items()})
    train = [
        str(BIN / "transformer-train"),
        *data,
        "model=tiny",
        "trainer.max_steps=1",
        "trainer.val_every=1000",
        "trainer.val_max_sentences=10",
        "trainer.progress=false",
        "trainer.attention_images=0",
        f"hydra.run.dir={work / f'run{pairs}'}",
    ]
    seconds, watch, _ = run(train, env)
    row.update(train_one_step_s=round(seconds, 1), train_anon_gib=round(max(watch.anon.values()) / 2**30, 2))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, nargs="+", default=[1_000_000, 4_000_000, 16_000_000])
    parser.add_argument("--full", action="store_true", help="add 40M pairs")
    parser.add_argument("--sample", type=int, default=2_000_000, help="SentencePiece's input_sentence_size")
    parser.add_argument("--workdir", default="/tmp", help="where the corpora and prepared folders go (removed after)")
    parser.add_argument("--corpora", help="keep the generated corpora in this folder and reuse them (default: removed)")
    parser.add_argument("--generate-only", action="store_true", help="write the corpora (--corpora) and stop")
    parser.add_argument("--code", help="another checkout to measure (its package first on PYTHONPATH)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args()
    # The snippets run with `python -P`: `-c` alone would put the working directory (this checkout) first.
    env = {**os.environ, "PYTHONPATH": str(Path(args.code).resolve()) if args.code else str(ROOT)}
    print(f"# {cpu()}; load before: {os.getloadavg()[0]:.2f}", flush=True)
    rows, sizes = [], args.pairs + ([40_000_000] if args.full else [])
    if args.generate_only:
        for pairs in sizes:
            write_corpus(Path(args.corpora), pairs)
        return
    for pairs in sizes:
        with tempfile.TemporaryDirectory(dir=args.workdir, prefix="scale-") as work:
            rows.append(measure(pairs, Path(work), env, args.sample, Path(args.corpora or work)))
        print(" ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)
    if args.json:
        print(json.dumps({"cpu": cpu(), "runs": rows}))


if __name__ == "__main__":
    main()
