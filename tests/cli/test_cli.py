"""End to end through the real console scripts: prepare -> train -> evaluate -> translate."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.conftest import files_data
from transformer.runs.checkpoint import load_checkpoint

BIN = Path(sys.executable).parent
DEVICE = os.environ.get("TEST_DEVICE", "cpu")  # TEST_DEVICE=cuda runs the end-to-end commands on a GPU


def run(tool: str, *args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run([str(BIN / tool), *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{tool} failed:\n{result.stderr[-3000:]}"
    return result


@pytest.fixture
def data_args(corpus, tmp_path) -> list[str]:
    return files_data(corpus["train"], corpus["val"], tmp_path / "prepared", corpus["test"])


RNN = [
    "model=rnn",
    *(f"model.rnn.{k}=32" for k in ("embedding_dim", "encoder_hidden", "decoder_hidden", "attention_dim")),
]


@pytest.mark.slow
@pytest.mark.parametrize("model", [["model=tiny"], RNN], ids=["transformer", "rnn"])
def test_prepare_train_evaluate_translate(data_args, tmp_path, model):
    prepared = run("transformer-prepare", *data_args, cwd=tmp_path)
    assert (Path(prepared.stdout.strip()) / "spm.model").exists()

    run_dir = tmp_path / "run"
    train = run(
        "transformer-train",
        *data_args,
        *model,
        "trainer.max_steps=6",
        "trainer.val_every=3",
        "trainer.batch_tokens=512",
        "trainer.log_every=2",
        "trainer.progress=false",
        f"trainer.device={DEVICE}",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert "reusing prepared data" in train.stderr and "transformer-evaluate checkpoint=" in train.stderr
    assert (run_dir / "checkpoints" / "best.safetensors").exists() and (run_dir / "train.log").exists()

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"train/loss", "train/lr", "train/tokens_per_s", "val/loss", "val/bleu"} <= set(tags)
    assert [e.step for e in events.Scalars("val/bleu")] == [3, 6]
    assert "attention/val_0" in events.Tags()["images"]

    evaluate = run(
        "transformer-evaluate",
        f"checkpoint={run_dir}",
        "split=toy",
        "decoding=greedy",
        f"device={DEVICE}",
        cwd=tmp_path,
    )
    assert "BLEU = " in evaluate.stdout and "chrF2 = " in evaluate.stdout and "nrefs:1" in evaluate.stdout
    hyps = run_dir / "checkpoints" / "best.toy.greedy-fp32.hyp"  # the precision it ran in names itself
    assert len(hyps.read_text().splitlines()) == 20

    translate = run(
        "transformer-translate",
        f"checkpoint={run_dir}",
        "decoding=beam",
        "decoding.beam_size=3",
        f"device={DEVICE}",
        f"plot_attention={tmp_path / 'attention'}",
        cwd=tmp_path,
        stdin="un chien rouge\n\nle chat dort dans le parc\n",
    )
    lines = translate.stdout.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""  # 3 lines, the empty one kept
    assert sorted(p.name for p in (tmp_path / "attention").iterdir()) == ["0001.png", "0003.png"]

    # a terminal on stdin gets the interactive prompt; each typed line is translated at once
    master, terminal = os.openpty()
    process = subprocess.Popen(
        [str(BIN / "transformer-translate"), f"checkpoint={run_dir}", "decoding=greedy"],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    os.write(master, b"un chien\nle chat dort\n\x04")
    out, err = process.communicate(timeout=120)
    os.close(master), os.close(terminal)
    assert process.returncode == 0 and "Ctrl-D quits" in err and len(out.splitlines()) == 2

    ckpt = load_checkpoint(str(run_dir / "checkpoints" / "last.safetensors"))
    assert ckpt.meta["step"] == "6" and ckpt.config.model.family == ("rnn" if model == RNN else "transformer")
    assert type(ckpt.model).__name__ == ("RNNModel" if model == RNN else "Transformer")
    src = torch.tensor([ckpt.tokenizer.encode_src(["un chien"])[0] + [2]])
    logits = ckpt.model(src, torch.tensor([[1]]))
    assert logits.shape == (1, 1, ckpt.tokenizer.tgt_vocab_size) and torch.isfinite(logits).all()


@pytest.mark.slow
def test_a_misspelt_setting_names_the_right_one_before_any_work(tmp_path):
    result = subprocess.run(
        [str(BIN / "transformer-train"), "trainer.max_stepz=3", f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: unknown setting trainer.max_stepz: did you mean trainer.max_steps?")
    assert not (tmp_path / "run").exists()
