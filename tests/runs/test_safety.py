"""Hostile and broken checkpoints, kills, signals and non-finite losses never lose a run."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from tests.training.test_training import make_trainer, toy_overrides, train
from transformer.core.errors import UserError
from transformer.runs.checkpoint import load_checkpoint

BIN = Path(sys.executable).parent


class Planted:
    """Unpickling this object would create a file: proof that code from the checkpoint ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_pickled_checkpoint_is_refused_and_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    run = tmp_path / "run" / "checkpoints"
    run.mkdir(parents=True)
    for path in (tmp_path / "evil.safetensors", tmp_path / "evil.pt", run / "best.safetensors"):
        torch.save({"model": Planted(marker)}, path)
    for target in (tmp_path / "evil.safetensors", tmp_path / "evil.pt", tmp_path / "run"):
        with pytest.raises(UserError, match="not a readable checkpoint"):
            load_checkpoint(str(target))
    assert not marker.exists()


@pytest.fixture
def trained(corpus, tmp_path) -> Path:
    run = tmp_path / "trained"
    train([*toy_overrides(corpus, tmp_path), "trainer.max_steps=2"], run)
    return run / "checkpoints" / "last.safetensors"


def test_truncated_corrupted_and_missing_checkpoints_give_clear_errors(trained, tmp_path):
    data = trained.read_bytes()
    (tmp_path / "truncated.safetensors").write_bytes(data[: len(data) // 2])
    (tmp_path / "corrupted.safetensors").write_bytes(b"\xff" * 8 + data[8:])
    for name in ("truncated", "corrupted"):
        with pytest.raises(UserError, match="not a readable checkpoint"):
            load_checkpoint(str(tmp_path / f"{name}.safetensors"))
    with pytest.raises(UserError, match="does not exist"):
        load_checkpoint(str(tmp_path / "nowhere.safetensors"))
    with pytest.raises(UserError, match="no checkpoint in"):
        load_checkpoint(str(tmp_path))
    assert load_checkpoint(str(trained)).meta["step"] == "2"  # the original is untouched


def test_foreign_and_incompatible_checkpoints_give_clear_errors(trained, tmp_path):
    tensors = load_file(str(trained))
    with safe_open(str(trained), framework="pt") as f:
        metadata = f.metadata()
    config = OmegaConf.create(metadata["config"])
    variants = {
        "foreign": ({**metadata, "format": "someone-else/1"}, "not a checkpoint of this tool"),
        "resized": ({**metadata, "config": edited(config, "model.d_ff", 48)}, "weights do not match its model config"),
        "future": ({**metadata, "config": edited(config, "model.rotary", True)}, "cannot be built by this version"),
    }
    for name, (meta, message) in variants.items():
        path = tmp_path / f"{name}.safetensors"
        save_file(tensors, str(path), metadata=meta)
        written = path.read_bytes()
        with pytest.raises(UserError, match=message):
            load_checkpoint(str(path))
        assert path.read_bytes() == written  # refusing a checkpoint leaves it as it was


def edited(config, key: str, value) -> str:
    """The YAML of `config` with one setting changed (or added)."""
    config = config.copy()
    OmegaConf.set_struct(config, False)
    OmegaConf.update(config, key, value)
    return OmegaConf.to_yaml(config)


def start_training(corpus, tmp_path, run: Path, *extra: str) -> subprocess.Popen:
    args = [
        *toy_overrides(corpus, tmp_path),
        "trainer.max_steps=100000",
        "trainer.val_every=3",
        "trainer.val_max_sentences=2",
        f"hydra.run.dir={run}",
        *extra,
    ]
    return subprocess.Popen(
        [str(BIN / "transformer-train"), *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for(path: Path, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not path.exists():
        assert process.poll() is None, process.stderr.read()
        assert time.time() < deadline, f"{path} did not appear"
        time.sleep(0.2)


@pytest.mark.slow
def test_sigkill_leaves_a_loadable_checkpoint_and_training_resumes(corpus, tmp_path):
    train([*toy_overrides(corpus, tmp_path), "trainer.max_steps=1"], tmp_path / "warmup")  # prepares the data
    run = tmp_path / "run"
    process = start_training(corpus, tmp_path, run)
    last = run / "checkpoints" / "last.safetensors"
    wait_for(last, process)
    time.sleep(1.5)  # let it get into later steps and saves
    process.send_signal(signal.SIGKILL)
    process.wait()
    step = int(load_checkpoint(str(last)).meta["step"])  # whatever moment the kill hit, this loads
    assert step >= 3
    train([*toy_overrides(corpus, tmp_path), f"trainer.max_steps={step + 2}", "trainer.resume=true"], run)
    resumed = load_checkpoint(str(last))
    assert int(resumed.meta["step"]) == step + 2 and resumed.state["progress"]["step"] == step + 2


@pytest.mark.slow
def test_sigterm_saves_a_resumable_checkpoint_and_exits_cleanly(corpus, tmp_path):
    train([*toy_overrides(corpus, tmp_path), "trainer.max_steps=1"], tmp_path / "warmup")
    run = tmp_path / "run"
    process = start_training(corpus, tmp_path, run, "trainer.val_every=100000")
    tb = run / "tensorboard"
    wait_for(tb, process)
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert "received SIGTERM" in stderr
    ckpt = load_checkpoint(str(run / "checkpoints" / "last.safetensors"))
    assert ckpt.state is not None and ckpt.state["progress"]["step"] >= 1


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_non_finite_losses_are_skipped_then_stop_the_run(corpus, tmp_path, monkeypatch, precision):
    overrides = [*toy_overrides(corpus, tmp_path), "trainer.max_nonfinite=3", f"trainer.precision={precision}"]
    trainer = make_trainer(overrides, tmp_path / "nan")
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    real = trainer.stepper.objective
    monkeypatch.setattr(trainer.stepper, "objective", lambda *args: real(*args) * float("nan"))
    batches = [trainer.train_data.collate(idx, 0) for idx in trainer.train_data.epoch(0)[:3]]
    scale = trainer.stepper.scaler.get_scale() if precision == "fp16" else None
    for batch in batches[:2]:
        assert not trainer.train_step([batch]).applied
    assert trainer.progress.step == 0 and trainer.stepper.nonfinite == 2
    if precision == "fp16":  # the gradient scaler skipped both steps and halved its scale each time
        assert trainer.stepper.scaler.get_scale() == scale / 4
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(tensor, before[name]), f"{name} was changed by a non-finite step"
    with pytest.raises(UserError, match="3 consecutive steps had non-finite gradients"):
        trainer.train_step([batches[2]])
