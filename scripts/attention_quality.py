"""Quality of the attention variants: train each with the same steps and seed, evaluate, print one table.

Each row trains `+experiment=multi30k_cpu_fren` (Multi30k fr→en, `small`) for `--steps`
steps with one variant in one use, then evaluates val and test_2016_flickr BLEU, greedy
and beam, and reads the median training tokens/s from train.log. Runs are sequential (one
CPU machine); `--only NAME` runs the rows whose label contains NAME; a row whose run folder
holds a finished training is scored again without retraining, so the table can be built in parts. The markdown table
gives the command of each row.

    python scripts/attention_quality.py --steps 1500 --out outputs/attention  # all rows, hours on 2 cores
    python scripts/attention_quality.py --only dot --only local            # a subset
"""

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
ROWS = {  # label -> overrides; every variant in every use it can serve (transformer/models/attention/)
    "dot": [],
    "encoder additive": ["model.attention.encoder=additive"],
    "encoder local w=16": ["model.attention.encoder=local", "model.attention.window=16"],
    "encoder strided w=8 s=8": [
        "model.attention.encoder=strided",
        "model.attention.window=8",
        "model.attention.stride=8",
    ],
    "encoder lsh c=16 r=2": ["model.attention.encoder=lsh", "model.attention.bucket_size=16"],
    "encoder linformer k=16": ["model.attention.encoder=linformer", "model.attention.rank=16"],
    "decoder additive": ["model.attention.decoder=additive"],
    "decoder local w=8": ["model.attention.decoder=local", "model.attention.window=8"],
    "decoder strided w=4 s=4": [
        "model.attention.decoder=strided",
        "model.attention.window=4",
        "model.attention.stride=4",
    ],
    "cross additive": ["model.attention.cross=additive"],
    "cross linformer k=16": ["model.attention.cross=linformer", "model.attention.rank=16"],
}


def bleu(checkpoint: Path, split: str, strategy: str) -> float:
    out = subprocess.run(
        [str(BIN / "transformer-evaluate"), f"checkpoint={checkpoint}", f"split={split}", f"decoding={strategy}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(re.search(r"BLEU = ([\d.]+)", out).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--out", default="outputs/attention")
    parser.add_argument("--only", action="append", default=[], help="rows whose label contains this")
    args = parser.parse_args()
    rows = [label for label in ROWS if not args.only or any(o in label for o in args.only)]
    lines = [
        "| attention | val greedy | val beam | test_2016 greedy | test_2016 beam | train tokens/s | command |",
        "|---|---|---|---|---|---|---|",
    ]
    for label in rows:
        run_dir = Path(args.out) / re.sub(r"\W+", "_", label)
        command = [
            "transformer-train",
            "+experiment=multi30k_cpu_fren",
            f"trainer.max_steps={args.steps}",
            "trainer.max_minutes=0",
            "trainer.seed=1234",
            "trainer.progress=false",
            *ROWS[label],
            f"hydra.run.dir={run_dir}",
        ]
        if not (run_dir / "finished").exists():  # rows already trained are scored again, not retrained
            done = subprocess.run([str(BIN / command[0]), *command[1:]], capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"{label}: transformer-train failed:\n{done.stderr[-2000:]}")
            (run_dir / "finished").touch()
        rates = [float(r) for r in re.findall(r"([\d.]+) tokens/s", (run_dir / "train.log").read_text())]
        scores = [bleu(run_dir, split, s) for split in ("val", "test_2016_flickr") for s in ("greedy", "beam")]
        cells = " | ".join(f"{b:.2f}" for b in scores)
        lines.append(f"| {label} | {cells} | {statistics.median(rates):.0f} | `{' '.join(command)}` |")
        print(lines[-1], flush=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
