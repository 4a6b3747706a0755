"""Bahdanau's RNN against the `small` Transformer on Multi30k fr->en: the same steps, and the same minutes.

Trains each model through `transformer-train` with the `make train` recipe (`+experiment=multi30k_cpu_fren`:
the same data, batch, optimizer, schedule and bf16; only `model=` differs), then scores
the last checkpoint on val and test_2016_flickr with greedy and beam search (the Translator of
`transformer-evaluate`), and reports parameters, training tokens/s (median of the run's TensorBoard
`train/tokens_per_s`), decoding sentences/s and BLEU, as a Markdown table and JSON, with the curves of
all runs on one plot (by step and by minutes), and the cross-attention of the same sentences in both models side by
side (heatmaps.png).

    python scripts/compare_rnn.py --out runs/compare --steps 3000 --minutes 55           # the full comparison
    python scripts/compare_rnn.py --out runs/compare-short --steps 200 --minutes 0 --eval-sentences 200
    python scripts/compare_rnn.py --out runs/compare --rnn model.rnn.decoder_hidden=256  # another RNN size
    python scripts/compare_rnn.py --out runs/compare --reuse transformer-55min=outputs/make_train  # a `make train` run

`--reuse NAME=DIR` scores a finished run in DIR as the row NAME instead of training it: a `make train` run is the
Transformer's 55-minute row.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import sacrebleu
import torch
from omegaconf import OmegaConf

from transformer.bench.curves import plot, read_scalars
from transformer.core.config import DecodingConfig
from transformer.data.corpus import fetch
from transformer.decoding.heatmaps import attention_matrix, attention_tokens, draw_heatmap, save_figure
from transformer.decoding.translator import Translator
from transformer.runs.checkpoint import load_checkpoint
from transformer.runs.run_folder import RunFolder

BIN = Path(sys.executable).parent
MODELS = {"transformer": ["model=small"], "rnn": ["model=rnn"]}
SPLITS = ("val", "test_2016_flickr")
HEATMAP_SENTENCES = ("Un homme avec un chapeau orange regardant quelque chose.", "Deux chiens jouent dans la neige.")
STRATEGIES = {"greedy": {"strategy": "greedy"}, "beam": {"strategy": "beam", "beam_size": 5}}


def train(run_dir: Path, overrides: list[str]) -> None:
    """One `transformer-train` run into `run_dir`, resumed if it was interrupted; skipped if it finished."""
    if RunFolder(run_dir).last.exists() and (run_dir / "finished").exists():
        return
    resume = ["trainer.resume=true"] if RunFolder(run_dir).last.exists() else []
    cmd = [str(BIN / "transformer-train"), *overrides, *resume, f"hydra.run.dir={run_dir}", "trainer.progress=false"]
    print(" ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    (run_dir / "finished").touch()


def score(run_dir: Path, eval_sentences: int, batch_size: int) -> dict:
    """Parameters, training tokens/s, and per split and search: BLEU and decoding sentences/s."""
    ckpt = load_checkpoint(str(RunFolder(run_dir).last))
    params = sum(p.numel() for p in {id(p): p for p in ckpt.model.parameters()}.values())
    speeds = [s.value for s in read_scalars(run_dir).get("train/tokens_per_s", [])]
    result = {"step": int(ckpt.meta["step"]), "parameters": params, "train_tokens_per_s": statistics.median(speeds)}
    files = fetch(ckpt.config.data, list(SPLITS))
    for split in SPLITS:
        pairs = list(files[split].pairs())[: eval_sentences or None]
        sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
        for name, settings in STRATEGIES.items():
            decoding = OmegaConf.structured(DecodingConfig(batch_size=batch_size, **settings))
            translator = Translator(ckpt.model, ckpt.tokenizer, decoding)
            translator.translate(sources[:8])  # warm-up: the first search pays for one-time set-up
            start = time.perf_counter()
            hyps = translator.translate(sources)
            seconds = time.perf_counter() - start
            result[f"{split}/{name}/bleu"] = round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
            result[f"{split}/{name}/sentences_per_s"] = round(len(sources) / seconds, 1)
    return result


def heatmaps(runs: dict[str, Path], path: Path) -> None:
    """The cross-attention of HEATMAP_SENTENCES (rows) in each run's model (columns), greedy translations,
    the Transformer's averaged over its layers and heads."""
    fig, axes = plt.subplots(len(HEATMAP_SENTENCES), len(runs), figsize=(6 * len(runs), 4.5 * len(HEATMAP_SENTENCES)))
    for col, (name, run_dir) in enumerate(runs.items()):
        ckpt = load_checkpoint(str(RunFolder(run_dir).last))
        translator = Translator(ckpt.model, ckpt.tokenizer, DecodingConfig(strategy="greedy"))
        for row, (src_ids, hyps) in enumerate(translator.search(list(HEATMAP_SENTENCES))):
            matrix = attention_matrix(ckpt.model, src_ids, hyps[0].tokens).cpu()
            draw_heatmap(axes[row, col], matrix, *attention_tokens(ckpt.tokenizer, src_ids, hyps[0].tokens), name)
    fig.tight_layout()
    save_figure(fig, path)


def table(results: dict[str, dict]) -> str:
    """The results as a Markdown table, one row per run."""
    columns = ["step", "parameters", "train_tokens_per_s"] + [
        f"{split}/{name}/{what}" for split in SPLITS for name in STRATEGIES for what in ("bleu", "sentences_per_s")
    ]
    lines = ["| run | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for run, row in results.items():
        cells = [f"{row[c]:,.0f}" if c in ("parameters", "train_tokens_per_s") else str(row[c]) for c in columns]
        lines.append(f"| {run} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for the runs, results.md/json and plots")
    parser.add_argument("--steps", type=int, default=3000, help="same-steps budget (0: skip)")
    parser.add_argument("--minutes", type=float, default=55.0, help="same-minutes budget (0: skip)")
    parser.add_argument("--rnn", nargs="*", default=[], help="extra overrides for the RNN, e.g. its sizes")
    parser.add_argument("--common", nargs="*", default=[], help="overrides for both, e.g. trainer.num_threads=2")
    parser.add_argument("--eval-sentences", type=int, default=0, help="score the first N sentences (0: all)")
    parser.add_argument("--batch-size", type=int, default=64, help="decoding batch size (sentences)")
    parser.add_argument("--reuse", action="append", default=[], help="NAME=DIR: score the run in DIR as row NAME")
    args = parser.parse_args()
    reused = {name: Path(folder) for name, folder in (item.split("=", 1) for item in args.reuse)}
    budgets = {}
    if args.steps:
        budgets[f"{args.steps}steps"] = [f"trainer.max_steps={args.steps}", "trainer.max_minutes=0"]
    if args.minutes:
        budgets[f"{args.minutes:g}min"] = [f"trainer.max_minutes={args.minutes}", "trainer.max_steps=1000000"]
    results = {}
    for budget, limit in budgets.items():
        for family, model in MODELS.items():
            name = f"{family}-{budget}"
            run_dir = reused.get(name, args.out / name)
            if name not in reused:
                extra = args.rnn if family == "rnn" else []
                train(run_dir, ["+experiment=multi30k_cpu_fren", *model, *extra, *args.common, *limit])
            results[name] = score(run_dir, args.eval_sentences, args.batch_size)
            print(json.dumps({name: results[name]}), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)  # every row may have been reused
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "results.md").write_text(table(results) + "\n")
    print(table(results))
    runs = [reused.get(name, args.out / name) for name in results]
    for x_axis in ("step", "minutes"):
        plot(runs, args.out / f"curves_{x_axis}.png", x_axis)
    last = list(budgets)[-1]
    heatmaps({name: run for name, run in zip(results, runs) if name.endswith(last)}, args.out / "heatmaps.png")


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
