"""The results table: checkpoints x test sets x decodings, with BLEU, chrF and how each was obtained.

Test sets: every test split of the checkpoint's own corpus, plus, when found under
`extra_dir` (default: the checkpoint's data.shared_dir), Tatoeba test and newstest2014 in
the same direction. Decodings are `configs/decoding/*.yaml` presets, each with optional
overrides (`beam:length_penalty=0.6`; choose them on val, e.g. with
`transformer-evaluate -m split=val decoding.length_penalty=0.6,1.0 ...`). The Markdown
holds one table, the model each decoding's val row chooses (with `val=true`), the sacreBLEU
signatures, and sample translations (the best and worst by sentence BLEU) from the first test set.
With `tests=chosen` every model is scored on val first and only the one val chooses on the test sets.
"""

import platform
from pathlib import Path

import sacrebleu
import torch
from omegaconf import DictConfig

from transformer.core import presets
from transformer.core.config import DecodingConfig
from transformer.core.errors import UserError
from transformer.core.strategies import STRATEGIES
from transformer.data.corpus import builtin_files, builtin_source, evaluation_splits, fetch
from transformer.data.sources import Source
from transformer.runs.loading import Loaded

EXTRA = {"tatoeba_test": ("tatoeba", "test"), "newstest2014": ("newstest2014", "test")}
HEADER = ["| checkpoint | params | trained | test set | decoding | BLEU | chrF |", "|---|---|---|---|---|---|---|"]


def decoding(spec: str) -> DecodingConfig:
    """A `configs/decoding` preset with optional overrides: `beam` or `beam:beam_size=8,length_penalty=0.6`."""
    name, _, overrides = spec.partition(":")
    try:
        return presets.compose("decoding", name, [o for o in overrides.split(",") if o])
    except UserError as err:
        raise UserError(f"decodings: {spec!r}: {err}") from None


def test_sets(data_cfg: DictConfig, extra_dir: str | None, val: bool = False) -> dict[str, Source]:
    """The checkpoint's own test splits, plus Tatoeba test and newstest2014 where `extra_dir` holds them, and
    its val split last when `val`."""
    sets = fetch(data_cfg, evaluation_splits(data_cfg))
    extra = extra_dir or data_cfg.get("shared_dir")
    langs = (data_cfg.src_lang, data_cfg.tgt_lang)
    for name, (corpus, split) in EXTRA.items() if extra else []:
        folder = Path(extra) / corpus
        if all(path.exists() for path in builtin_files(folder, split, *langs)) and data_cfg.get("name") != corpus:
            sets[name] = builtin_source(folder, split, *langs)
    return sets | (val_sets(data_cfg) if val else {})


def val_sets(data_cfg: DictConfig) -> dict[str, Source]:
    """The checkpoint's val split, by its name."""
    return fetch(data_cfg, [data_cfg.val_split])


def hardware() -> str:
    """The GPU's name, else the CPU's model and torch's thread count."""
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
    picked = scored[: n // 2] + scored[len(scored) - (n - n // 2) :]
    rows = ["| source | ours | reference |", "|---|---|---|"]
    return rows + [f"| {cell(sources[i])} | {cell(hyps[i])} | {cell(refs[i])} |" for i in picked]


def label(cfg: DecodingConfig, precision: str) -> str:
    """A decoding as the table names it, then the precision it ran in: greedy, fp32; beam 5, power α=1.0, int8."""
    return f"{STRATEGIES[cfg.strategy].title(cfg)}, {precision}"


class Report:
    """The table's rows, the sacreBLEU signatures and the sample rows, filled in checkpoint by checkpoint."""

    def __init__(self, decodings: dict[str, DecodingConfig], n_samples: int) -> None:
        self.decodings, self.n_samples = decodings, n_samples
        self.rows, self.signatures, self.sample_rows = list(HEADER), set(), []
        self.bleu: dict[str, dict[str, dict[str, float]]] = {}  # decoding spec -> model name -> set name -> BLEU
        self.precisions: dict[str, str] = {}  # decoding spec -> the precision it ran in
        self.val_set: str | None = None

    def score(
        self,
        name: str,
        loaded: Loaded,
        sets: dict[str, Source],
        val_set: str | None = None,
        specs: list[str] | None = None,
    ) -> None:
        """Translate every set with every decoding (or those of `specs`) by the model, or the ensemble, `loaded`
        and add one row each (also printed); `val_set` names the set in `sets` that chooses among the models."""
        self.val_set = val_set or self.val_set
        params = sum(p.numel() for p in loaded.model.parameters()) / 1e6
        trained = " + ".join(
            f"{float(c.meta.get('train_minutes') or 'nan'):.0f} min, step {c.meta.get('step')}" for c in loaded.members
        )
        for set_name, source in sets.items():
            pairs = list(source.pairs())
            sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
            for spec, cfg in ((spec, self.decodings[spec]) for spec in specs or self.decodings):
                translator = loaded.translator(cfg)
                hyps = translator.translate(sources, progress=True)
                self.precisions[spec] = translator.precision
                bleu, chrf = sacrebleu.BLEU(), sacrebleu.CHRF()
                b, c = bleu.corpus_score(hyps, [refs]).score, chrf.corpus_score(hyps, [refs]).score
                self.bleu.setdefault(spec, {}).setdefault(name, {})[set_name] = b
                decoded = label(cfg, translator.precision)
                row = f"| {name} | {params:.1f}M | {trained} | {set_name} | {decoded} | {b:.2f} | {c:.2f} |"
                self.rows.append(row)
                print(row, flush=True)
                self.signatures.update({f"BLEU: `{bleu.get_signature()}`", f"chrF: `{chrf.get_signature()}`"})
                if not self.sample_rows and spec == list(self.decodings)[-1] and set_name != self.val_set:
                    self.sample_rows = samples(sources, hyps, refs, self.n_samples)

    def best(self) -> dict[str, str]:
        """Each decoding with the model of the best val BLEU; none without val."""
        return {
            spec: max(by_model, key=lambda model: by_model[model].get(self.val_set, float("-inf")))
            for spec, by_model in (self.bleu.items() if self.val_set else [])
        }

    def chosen(self) -> list[str]:
        """One line per decoding naming the model with the best val BLEU and its test scores; none without val."""
        lines = []
        for spec, name in self.best().items():
            scores = self.bleu[spec][name]
            tests = ", ".join(f"{s} {b:.2f}" for s, b in scores.items() if s != self.val_set)
            val = scores[self.val_set]
            decoded = label(self.decodings[spec], self.precisions[spec])
            lines.append(f"Chosen on val ({decoded}): {name}, val {val:.2f}; {tests}.")
        return lines

    def markdown(self) -> str:
        """The whole report: the table, the model val chooses, the hardware, the signatures and the samples."""
        last = list(self.decodings)[-1]
        return (
            "\n".join(
                [
                    *self.rows,
                    "",
                    *(line for chosen in self.chosen() for line in (chosen, "")),
                    f"Hardware: {hardware()}.",
                    *sorted(self.signatures),
                    "",
                    f"Samples ({last}, first test set, best and worst by sentence BLEU):",
                    "",
                    *self.sample_rows,
                ]
            )
            + "\n"
        )
