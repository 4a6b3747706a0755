"""The results table (`transformer-results`): decoding presets, test sets, sample rows and the whole report."""

import gzip
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu
from omegaconf import OmegaConf

from tests.conftest import WORDS_EN, WORDS_FR
from transformer.core.config import DataConfig, DecodingConfig
from transformer.core.errors import UserError
from transformer.runs import results_table as results
from transformer.runs.results_table import decoding, samples

BIN = Path(sys.executable).parent


def test_a_preset_with_overrides():
    beam = decoding("beam")
    tuned = decoding("beam:beam_size=3,length_penalty=0.6")
    assert isinstance(tuned, DecodingConfig) and tuned.strategy == beam.strategy == "beam"
    assert (tuned.beam_size, tuned.length_penalty) == (3, 0.6)
    assert tuned.max_len_a == beam.max_len_a


@pytest.mark.parametrize(("spec", "message"), [("nope", "names no preset"), ("beam:beam_sise=3", "beam_sise")])
def test_a_bad_decoding_is_a_user_error(spec, message):
    with pytest.raises(UserError, match=message):
        decoding(spec)


@pytest.mark.parametrize("n", [0, 1, 4, 5, 10])
def test_samples_are_the_best_then_the_worst_by_sentence_bleu(n):
    sources = [" ".join(WORDS_FR[:i]) for i in range(1, 11)]
    refs = [" ".join(WORDS_EN[:i]) for i in range(1, 11)]
    hyps = [" ".join(WORDS_EN[: i // 2 + i % 3]) for i in range(1, 11)]

    def bleu(i: int) -> float:
        return sacrebleu.sentence_bleu(hyps[i], [refs[i]]).score

    rows = samples(sources, hyps, refs, n)[2:]
    shown = [bleu(sources.index(row.split(" | ")[0].removeprefix("| "))) for row in rows]
    ranked = sorted(map(bleu, range(10)), reverse=True)
    assert shown == ranked[: n // 2] + ranked[10 - (n - n // 2) :]


def test_extra_test_sets_in_the_same_direction(tmp_path):
    for corpus in ("tatoeba", "mine"):
        (tmp_path / corpus).mkdir()
        for lang in ("fr", "en"):
            (tmp_path / corpus / f"test.{lang}.gz").write_bytes(gzip.compress(b"un chien\n"))
    mine = {"src": str(tmp_path / "mine" / "test.fr.gz"), "tgt": str(tmp_path / "mine" / "test.en.gz")}
    cfg = OmegaConf.merge(OmegaConf.structured(DataConfig), {"name": "files", "test": {"mine": mine}})
    assert list(results.test_sets(cfg, str(tmp_path))) == ["mine", "tatoeba_test"]
    assert list(results.test_sets(cfg, str(tmp_path / "elsewhere"))) == ["mine"]
    assert list(results.test_sets(OmegaConf.merge(cfg, {"src_lang": "de"}), str(tmp_path))) == ["mine"]
    with_val = OmegaConf.merge(cfg, {"val": mine})  # val=true: the val split too, after the test sets
    assert list(results.test_sets(with_val, str(tmp_path), val=True)) == ["mine", "tatoeba_test", "val"]


def test_the_report_names_the_model_val_chooses():
    report = results.Report({"beam": decoding("beam"), "greedy": decoding("greedy")}, 0)
    report.bleu = {
        "beam": {"a": {"t16": 50.0, "val": 51.0}, "b": {"t16": 49.0, "val": 52.5}, "c": {"t16": 55.0, "val": 40.0}},
        "greedy": {"a": {"t16": 48.0, "val": 50.0}, "b": {"t16": 47.0, "val": 49.0}},
    }
    assert report.chosen() == []  # without a val set nothing is chosen
    report.val_set, report.precisions = "val", {"beam": "int8", "greedy": "fp32"}
    assert report.chosen() == [
        "Chosen on val (beam 5, power α=1.0, int8): b, val 52.50; t16 49.00.",
        "Chosen on val (greedy, fp32): a, val 50.00; t16 48.00.",
    ]
    assert "\nChosen on val (greedy, fp32): a," in report.markdown()


def model_and_pair(run: str, tmp_path: Path, options: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`transformer-results` of the model in `run` and its ensemble with itself, greedy and beam 2: its output and
    the report's lines."""
    report = tmp_path / "results.md"
    args = f"""'checkpoints=[{run},[{run},{run}]]' 'decodings=[greedy,"beam:beam_size=2"]' output={report} {options}"""
    result = subprocess.run(
        [str(BIN / "transformer-results"), *shlex.split(args)], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result, report.read_text().splitlines()


@pytest.mark.slow
def test_the_report_through_the_console_script(cli_setup, tmp_path):
    """Every checkpoint x test set (val last) x decoding gives one row, plus the model val chooses, the hardware, the
    signatures and the sample rows; an ensemble of a model with itself (a list in the list) scores as the model, with
    its parameters twice."""
    run = f"{cli_setup['tmp']}/run"
    result, lines = model_and_pair(run, tmp_path, f"samples=4 extra_dir={tmp_path} val=true")
    rows = [line for line in lines if line.startswith(f"| {run} |")]
    decodings = ["greedy, fp32", "beam 2, power α=1.0, fp32"]  # each states the precision it ran in
    assert [row.split(" | ")[3:5] for row in rows] == [[split, d] for split in ("toy", "val") for d in decodings]
    assert rows == result.stdout.splitlines()[:4] and f"wrote {tmp_path / 'results.md'}" in result.stdout
    pair = [line.split(" | ") for line in lines if line.startswith(f"| {run} + {run} |")]
    single = [row.split(" | ") for row in rows]
    assert [row[3:] for row in pair] == [row[3:] for row in single]  # test set, decoding, BLEU, chrF
    assert all(abs(float(p[1][:-1]) - 2 * float(s[1][:-1])) < 0.15 for p, s in zip(pair, single))  # "0.3M": rounded
    assert all(row[2] == f"{single[0][2]} + {single[0][2]}" for row in pair)
    val_rows = [row for row in (line.split(" | ") for line in lines) if len(row) == 7 and row[3] == "val"]
    for d in decodings:
        best = max(float(row[5]) for row in val_rows if row[4] == d)
        chosen = next(line for line in lines if line.startswith(f"Chosen on val ({d}): "))
        assert chosen.startswith(f"Chosen on val ({d}): {run}, val {best:.2f}; toy ")
    assert any(line.startswith("Hardware: ") for line in lines)
    assert sum(line.startswith(("BLEU: `", "chrF: `")) for line in lines) == 2
    assert len(lines[lines.index("| source | ours | reference |") :]) == 2 + 4


@pytest.mark.slow
def test_with_tests_chosen_every_model_scores_val_and_only_the_chosen_one_the_test_sets(cli_setup, tmp_path):
    """Val rows for every model and decoding come first; then the test rows of the model each decoding's val BLEU
    chooses, with that decoding only; the sample rows come from a test set."""
    run = f"{cli_setup['tmp']}/run"
    models = [run, f"{run} + {run}"]
    _, lines = model_and_pair(run, tmp_path, "samples=2 val=true tests=chosen")
    rows = [line.split(" | ") for line in lines if line.startswith("| ") and line.count(" | ") == 6][1:]
    decodings = ["greedy, fp32", "beam 2, power α=1.0, fp32"]
    assert [(row[0][2:], row[3], row[4]) for row in rows[:4]] == [(m, "val", d) for m in models for d in decodings]
    chosen = {}
    for d in decodings:
        best = max(float(row[5]) for row in rows[:4] if row[4] == d)
        line = next(line for line in lines if line.startswith(f"Chosen on val ({d}): "))
        chosen[d] = next(m for m in reversed(models) if line.startswith(f"Chosen on val ({d}): {m}, val {best:.2f}; "))
    assert sorted((row[0][2:], row[4]) for row in rows[4:]) == sorted((chosen[d], d) for d in decodings)
    assert {row[3] for row in rows[4:]} == {"toy"}
    samples = [row.split(" | ")[0][2:] for row in lines[lines.index("| source | ours | reference |") + 2 :]]
    assert len(samples) == 2 and set(samples) <= set(Path(cli_setup["tmp"], "test.fr").read_text().splitlines())
