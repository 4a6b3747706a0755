"""scripts/benchmark_decoding.py in its tiniest modes, synthetic and real: the table, and the JSON line other scripts
read."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu

from tests import ROOT
from tests.conftest import fit
from transformer.compute.auto import resolve
from transformer.compute.hardware import native_bf16
from transformer.core.config import DecodingConfig
from transformer.core.precision import TRANSLATED_IN
from transformer.data.batching import collate
from transformer.data.preparation import prepare
from transformer.runs.checkpoint import load_checkpoint, save_checkpoint
from transformer.runs.loading import load

RECORD_KEYS = {"engine", "precision", "size", "strategy", "batch", "sent_per_s", "tok_per_s"}
CELLS = [(s, b) for s in ("greedy", "beam") for b in (4, 1)]  # --quick's batches


def compute_types() -> list[str]:
    """CTranslate2's plain compute types on this CPU ([] without CTranslate2)."""
    if not importlib.util.find_spec("ctranslate2"):
        return []
    from transformer.bench.engines import ct2_compute_types

    return ct2_compute_types()


def benchmark(*args: str) -> tuple[list[str], dict]:
    """The script's output lines and its JSON last line, run with `args` on one thread."""
    command = [sys.executable, str(ROOT / "scripts" / "benchmark_decoding.py"), *args, "--threads", "1", "--json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    assert set(result) == {"cpu", "records", "default_precision", "ct2_best"}
    assert result["cpu"] in lines[0] and result["default_precision"] == resolve(TRANSLATED_IN, "inference", "cpu")
    return lines, result


def check_ct2_best(result: dict, size: str) -> None:
    """`ct2_best` names, in every cell, CTranslate2's fastest compute type and its speed."""
    best = {}
    for strategy, batch in CELLS if compute_types() else []:
        here = [
            r
            for r in result["records"]
            if r["engine"] == "ctranslate2" and (r["strategy"], r["batch"]) == (strategy, batch)
        ]
        fastest = max(here, key=lambda r: r["sent_per_s"])
        best[f"{size},{strategy},{batch}"] = {"compute_type": fastest["precision"], "sent_per_s": fastest["sent_per_s"]}
    assert result["ct2_best"] == best


@pytest.mark.slow  # a process per engine
def test_quick_run_ends_with_one_json_line_of_every_case():
    lines, result = benchmark("--quick", "--precisions", "fp32", "--no-marian")
    engines = [("ours", "fp32"), *(("ctranslate2", t) for t in compute_types())]
    wanted = [(e, p, "small", s, b) for s, b in CELLS for e, p in engines]
    records = result["records"]
    assert [(r["engine"], r["precision"], r["size"], r["strategy"], r["batch"]) for r in records] == wanted
    assert all(set(r) == RECORD_KEYS and r["sent_per_s"] > 0 for r in records)
    assert all(r["tok_per_s"] == pytest.approx(4 * r["sent_per_s"], rel=1e-3) for r in records)  # --out-len 4
    assert any(line.startswith("small, beam, 1") and " ms)" in line for line in lines)  # latency per sentence
    check_ct2_best(result, "small")


@pytest.fixture(scope="module")
def trained_run(cli_setup, tmp_path_factory) -> tuple[Path, Path, Path]:
    """The shared tiny checkpoint fitted to its validation split (BLEU well above 0), as a run folder, and that
    split's source and reference files."""
    fixture = load_checkpoint(str(Path(cli_setup["tmp"]) / "run" / "checkpoints" / "best.safetensors"), "cpu")
    val = prepare(fixture.config.data).split(fixture.config.data.val_split)
    model = fit(fixture.model, collate(list(val["src_ids"]), list(val["tgt_ids"])), steps=30)
    run = tmp_path_factory.mktemp("bench_real") / "run"
    save_checkpoint(run / "checkpoints" / "best.safetensors", model, fixture.tokenizer, fixture.config, step=30)
    return run, Path(cli_setup["tmp"]) / "val.fr", Path(cli_setup["tmp"]) / "val.en"


@pytest.mark.slow  # a process per engine
def test_real_mode_times_every_engine_and_scores_what_our_translator_gives(trained_run):
    run, sources, references = trained_run
    lines, result = benchmark(
        "--quick", "--checkpoint", str(run), "--sentences", str(sources), "--references", str(references)
    )
    ours = ["auto", "fp32", *(["bf16"] if native_bf16("cpu") else []), "int8"]
    engines = [*(("ours", p) for p in ours), *(("ctranslate2", t) for t in compute_types())]
    records = result["records"]
    wanted = [(e, p, "tiny", s, b) for s, b in CELLS for e, p in engines]  # the size: the checkpoint's preset
    assert sorted((r["engine"], r["precision"], r["size"], r["strategy"], r["batch"]) for r in records) == sorted(
        wanted
    )
    assert all(set(r) == RECORD_KEYS | {"bleu"} and r["sent_per_s"] > 0 and r["tok_per_s"] > 0 for r in records)
    check_ct2_best(result, "tiny")
    assert any(line.startswith("ours auto=") or " ours auto=" in line for line in lines)  # auto, with what it ran in

    src, refs = sources.read_text().splitlines(), references.read_text().splitlines()
    for strategy in ("greedy", "beam"):
        record = {(r["engine"], r["precision"], r["batch"]): r for r in records if r["strategy"] == strategy}
        beam = dict(beam_size=5) if strategy == "beam" else {}
        translator = load(str(run), device="cpu").translator(
            DecodingConfig(strategy=strategy, batch_size=4, precision="fp32", **beam)
        )
        hyps = translator.translate(src)
        assert record["ours", "fp32", 4]["bleu"] == round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2) > 10
        pieces = sum(len(h[0].tokens) for _, h in translator.search(src))
        fp32 = record["ours", "fp32", 4]
        assert round(fp32["tok_per_s"] / fp32["sent_per_s"] * len(src)) == pieces  # target pieces, EOS excluded
        assert record["ours", "auto", 4]["bleu"] == record["ours", resolve("auto", "inference", "cpu"), 4]["bleu"]
