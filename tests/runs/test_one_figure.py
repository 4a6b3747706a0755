"""One checkpoint, split and search give one BLEU: validation, `transformer-evaluate` and `transformer-results`
decode in the same precision by default, and each figure states it."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu

from tests.conftest import fit
from transformer.core.precision import SCORED_IN
from transformer.data.batching import collate
from transformer.data.preparation import prepare
from transformer.runs.checkpoint import load_checkpoint, save_checkpoint
from transformer.training.validation import Validator

BIN = Path(sys.executable).parent


def command(name: str, *args: str) -> str:
    """The standard output of the console script `name`."""
    result = subprocess.run([str(BIN / name), *args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow  # two console scripts
def test_validation_evaluate_and_results_print_one_bleu_with_default_settings(cli_setup, tmp_path):
    fixture = load_checkpoint(str(Path(cli_setup["tmp"]) / "run" / "checkpoints" / "best.safetensors"), "cpu")
    cfg, tokenizer = fixture.config, fixture.tokenizer  # the training settings: validation's search and precision
    split = cfg.data.val_split
    val = prepare(cfg.data).split(split)  # the folder the fixture prepared
    model = fit(fixture.model, collate(list(val["src_ids"]), list(val["tgt_ids"])), steps=30)  # BLEU well above 0
    run = tmp_path / "run"
    save_checkpoint(run / "checkpoints" / "best.safetensors", model, tokenizer, cfg, step=30)

    validator = Validator(model, tokenizer, val, cfg.trainer, cfg.decoding)
    translator = validator.translator()
    validated = [hyp for _, hyp in sorted(validator.translations(translator))]
    val_bleu = sacrebleu.corpus_bleu(validated, [validator.ref]).score
    assert val_bleu > 10 and translator.precision == SCORED_IN
    assert str(validator(None, step=0)).endswith(f"BLEU {val_bleu:.2f} ({SCORED_IN})")

    search = f"decoding={cfg.decoding.strategy}"  # the search validation used; the precision left to its default
    evaluated = command("transformer-evaluate", f"checkpoint={run}", f"split={split}", search, "device=cpu")
    bleu_line = next(line for line in evaluated.splitlines() if line.startswith("BLEU = "))
    assert bleu_line.endswith(f"; decoded in {SCORED_IN})")
    assert float(re.match(r"BLEU = ([\d.]+)", bleu_line).group(1)) == round(val_bleu, 2)
    hyp_file = run / "checkpoints" / f"best.{split}.{cfg.decoding.strategy}-{SCORED_IN}.hyp"
    assert hyp_file.read_text().splitlines() == validated  # the same translations, not only the same score

    report = tmp_path / "results.md"
    args = [f"checkpoints=[{run}]", f"decodings=[{cfg.decoding.strategy}]", "val=true", f"output={report}"]
    command("transformer-results", *args, "device=cpu")
    rows = [line.split(" | ") for line in report.read_text().splitlines() if line.startswith(f"| {run} |")]
    val_row = next(row for row in rows if row[3] == split)
    assert val_row[4] == f"{cfg.decoding.strategy}, {SCORED_IN}" and val_row[5] == f"{val_bleu:.2f}"
