"""The results table: checkpoints x test sets x decodings, with BLEU, chrF and how each was obtained.

    python scripts/results.py RUN_DIR [RUN_DIR ...] --output results.md

Test sets: every test split of the checkpoint's own corpus, plus, when found under
`--extra-dir` (default ../shared/data), Tatoeba test and newstest2014 in the same
direction. Decodings are `configs/decoding/*.yaml` presets named by `--decodings`,
each with optional overrides (`beam:length_penalty=0.6`; choose them on val, e.g.
with `transformer-evaluate -m split=val decoding.length_penalty=0.6,1.0 ...`).
The Markdown holds one table, the sacreBLEU signatures, and sample translations
(the best and worst by sentence BLEU) from the first test set.
"""

import argparse
import platform
from pathlib import Path

import sacrebleu
import torch
from omegaconf import OmegaConf

from transformer.checkpoint import load_checkpoint
from transformer.cli import CONFIG_PATH
from transformer.config import DecodingConfig
from transformer.corpus import ParallelFiles, evaluation_splits, fetch, read_parallel
from transformer.files import atomic_write_text
from transformer.translator import Translator

EXTRA = {"tatoeba_test": ("tatoeba", "test"), "newstest2014": ("newstest2014", "test")}


def decoding(spec: str) -> DecodingConfig:
    """A `configs/decoding` preset with optional overrides: `beam` or `beam:beam_size=8,length_penalty=0.6`."""
    name, _, overrides = spec.partition(":")
    preset = OmegaConf.load(Path(CONFIG_PATH) / "decoding" / f"{name}.yaml")
    dotlist = OmegaConf.from_dotlist([o for o in overrides.split(",") if o])
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(DecodingConfig), preset, dotlist))


def test_sets(data_cfg, extra_dir: Path) -> dict[str, ParallelFiles]:
    sets = fetch(data_cfg, evaluation_splits(data_cfg))
    for name, (corpus, split) in EXTRA.items():
        files = ParallelFiles(
            *(extra_dir / corpus / f"{split}.{lang}.gz" for lang in (data_cfg.src_lang, data_cfg.tgt_lang))
        )
        if files.src.exists() and files.tgt.exists() and data_cfg.get("name") != corpus:
            sets[name] = files
    return sets


def hardware() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return f"{model}, {torch.get_num_threads()} threads"


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")


def samples(sources: list[str], hyps: list[str], refs: list[str], n: int) -> list[str]:
    """Markdown rows for the n/2 best and n/2 worst translations by sentence BLEU."""
    scored = sorted(range(len(hyps)), key=lambda i: -sacrebleu.sentence_bleu(hyps[i], [refs[i]]).score)
    picked = scored[: n // 2] + scored[-(n - n // 2) :]
    rows = ["| source | ours | reference |", "|---|---|---|"]
    return rows + [f"| {cell(sources[i])} | {cell(hyps[i])} | {cell(refs[i])} |" for i in picked]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", help="run directories or checkpoint files")
    parser.add_argument("--output", type=Path, default=Path("results.md"))
    parser.add_argument("--decodings", nargs="+", default=["greedy", "beam"])
    parser.add_argument("--extra-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--samples", type=int, default=12)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    lines = ["| checkpoint | params | trained | test set | decoding | BLEU | chrF |", "|---|---|---|---|---|---|---|"]
    signatures, sample_rows = set(), []
    for path in args.checkpoints:
        ckpt = load_checkpoint(path, device)
        params = sum(p.numel() for p in ckpt.model.parameters()) / 1e6
        trained = f"{float(ckpt.meta.get('train_minutes') or 'nan'):.0f} min, step {ckpt.meta.get('step')}"
        for set_name, files in test_sets(ckpt.config.data, args.extra_dir).items():
            pairs = list(read_parallel(files))
            sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
            for name in args.decodings:
                cfg = decoding(name)
                hyps = Translator(ckpt.model, ckpt.tokenizer, cfg).translate(sources, progress=True)
                bleu, chrf = sacrebleu.BLEU(), sacrebleu.CHRF()
                b, c = bleu.corpus_score(hyps, [refs]).score, chrf.corpus_score(hyps, [refs]).score
                label = cfg.strategy
                if cfg.strategy == "beam":
                    label = f"beam {cfg.beam_size}, {cfg.length_penalty_kind} α={cfg.length_penalty}"
                lines.append(f"| {path} | {params:.1f}M | {trained} | {set_name} | {label} | {b:.2f} | {c:.2f} |")
                print(lines[-1], flush=True)
                signatures.update({f"BLEU: `{bleu.get_signature()}`", f"chrF: `{chrf.get_signature()}`"})
                if not sample_rows and name == args.decodings[-1]:
                    sample_rows = samples(sources, hyps, refs, args.samples)
    report = [
        *lines,
        "",
        f"Hardware: {hardware()}.",
        *sorted(signatures),
        "",
        f"Samples ({args.decodings[-1]}, first test set, best and worst by sentence BLEU):",
        "",
        *sample_rows,
    ]
    atomic_write_text(args.output, "\n".join(report) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
