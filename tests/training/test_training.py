"""Training runs on a toy corpus: exact resume, checkpoints, and torchrun data parallelism."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from safetensors.torch import load_file
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import transformer.training.trainer as trainer_module
import transformer.training.validation as validation_module
from tests.conftest import files_data
from transformer.cli import CONFIG_PATH
from transformer.data.preparation import prepare
from transformer.models.factory import build_model
from transformer.runs.checkpoint import load_checkpoint
from transformer.training import Trainer
from transformer.training.validation import Validator

BIN = Path(sys.executable).parent


def toy_overrides(corpus, tmp_path) -> list[str]:
    return [
        *files_data(corpus["train"], corpus["val"], tmp_path / "prepared"),
        "model=tiny",
        "trainer.batch_tokens=256",
        "trainer.progress=false",
        "trainer.val_every=1000",
        "trainer.log_every=1",
        "optim.warmup_steps=2",
    ]


def make_trainer(overrides: list[str], run_dir: Path) -> Trainer:
    with initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
        return Trainer(compose(config_name="train", overrides=overrides), run_dir)


def train(overrides: list[str], run_dir: Path) -> None:
    make_trainer(overrides, run_dir).fit()


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return {
        k: v for k, v in load_file(str(run_dir / "checkpoints" / "last.safetensors")).items() if k.startswith("model.")
    }


RNN = [
    "model=rnn",
    *(f"model.rnn.{k}=24" for k in ("embedding_dim", "encoder_hidden", "decoder_hidden", "attention_dim")),
]
# The toy test split as a second, tagged training corpus seen half per epoch, the main one 1.5 times, re-segmented
# by BPE-dropout; larger batches so that 7 steps cross epochs (each with its own sample)
MIXTURE = [
    *(f"+data.extra_train.more.{side}={{tmp}}/test.{lang}" for side, lang in (("src", "fr"), ("tgt", "en"))),
    "+data.extra_train.more.weight=0.5",
    "+data.extra_train.more.tag=more",
    "data.weight=1.5",
    "data.subword_dropout=0.1",
    "trainer.batch_tokens=4096",
]


def with_model(overrides: list[str], extra: list[str]) -> list[str]:
    """`overrides` then `extra`, whose `model=...` (if any) replaces toy_overrides' `model=tiny`."""
    if any(o.startswith("model=") for o in extra):
        overrides = [o for o in overrides if not o.startswith("model=")]
    return [*overrides, *extra]


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra", [[], ["data.subword_dropout=0.1"], RNN, MIXTURE], ids=["plain", "bpe_dropout", "rnn", "mixture"]
)
def test_resume_continues_exactly(corpus, tmp_path, extra):
    base = with_model(toy_overrides(corpus, tmp_path), [e.format(tmp=tmp_path) for e in extra])
    train([*base, "trainer.max_steps=4"], tmp_path / "split")
    train([*base, "trainer.max_steps=7", "trainer.resume=true"], tmp_path / "split")
    train([*base, "trainer.max_steps=7"], tmp_path / "straight")
    resumed, straight = weights(tmp_path / "split"), weights(tmp_path / "straight")
    assert resumed.keys() == straight.keys()
    for name in straight:
        torch.testing.assert_close(resumed[name], straight[name], atol=0, rtol=0, msg=name)
    state = load_checkpoint(str(tmp_path / "split" / "checkpoints" / "last.safetensors")).state
    assert state["progress"]["step"] == 7 and "exp_avg" in state["optimizer"]["state"]["0"]
    # TensorBoard: the resumed curve carries on at step 5, once per step, on the straight run's schedule (no new warmup)
    resumed_lr, straight_lr = scalars(tmp_path / "split", "train/lr"), scalars(tmp_path / "straight", "train/lr")
    assert [step for step, _ in resumed_lr] == list(range(1, 8))
    assert resumed_lr == straight_lr
    # the training clock carries on from the checkpoint's minutes instead of restarting at zero
    minutes = [value for _, value in scalars(tmp_path / "split", "train/minutes")]
    assert len(minutes) == 7 and minutes == sorted(minutes) and minutes[0] > 0


def scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    """(step, value) of one TensorBoard scalar over every event file of a run, in step order."""
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    return sorted((e.step, e.value) for e in events.Scalars(tag))


@pytest.mark.slow
def test_patience_stops_after_validations_without_a_better_bleu(corpus, tmp_path, monkeypatch):
    scripted_bleu(monkeypatch, [10.0, 12.0, 11.0, 12.0, 13.0])  # best at the 2nd validation, then two without gain
    overrides = [*toy_overrides(corpus, tmp_path), "trainer.val_every=1", "trainer.patience=2", "trainer.max_steps=20"]
    trainer = make_trainer(overrides, tmp_path / "run")
    trainer.fit()
    assert trainer.progress.step == 4 and trainer.progress.best_bleu == 12.0
    assert [step for step, _ in scalars(tmp_path / "run", "val/bleu")] == [1, 2, 3, 4]


def scripted_bleu(monkeypatch, scores: list[float]) -> list[tuple[list[str], list[list[str]]]]:
    """Make validation see `scores` as its BLEU, one per validation; returns the (hyps, refs) it was given."""
    seen, scripted = [], iter(scores)

    def corpus_bleu(hyps, refs):
        seen.append((hyps, refs))
        return SimpleNamespace(score=next(scripted))

    monkeypatch.setattr(validation_module.sacrebleu, "corpus_bleu", corpus_bleu)
    return seen


@pytest.mark.slow
def test_keeps_the_newest_and_the_best_step_checkpoints(corpus, tmp_path, monkeypatch):
    scripted_bleu(monkeypatch, [5.0, 9.0, 3.0, 4.0])  # validations at steps 2, 4, 6, 8
    run = tmp_path / "run"
    limits = ["trainer.max_steps=8", "trainer.val_every=2", "trainer.keep_last=1", "trainer.keep_best=1"]
    train([*toy_overrides(corpus, tmp_path), *limits], run)
    checkpoints = run / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("step_*.safetensors")) == [
        "step_0000004.safetensors",  # the best BLEU
        "step_0000008.safetensors",  # the newest
    ]
    best = load_checkpoint(str(checkpoints / "best.safetensors"))
    assert (best.meta["step"], best.meta["val_bleu"]) == ("4", "9.00")
    last = load_checkpoint(str(checkpoints / "last.safetensors"))
    assert last.state["progress"]["history"] == [[4, 9.0], [8, 4.0]]
    assert (last.meta["step"], last.meta["val_bleu"]) == ("8", "9.00")


def test_val_loss_and_bleu_use_the_same_first_sentences(corpus, tmp_path, monkeypatch):
    seen = scripted_bleu(monkeypatch, [1.0])
    overrides = [*toy_overrides(corpus, tmp_path), "trainer.val_max_sentences=5", "trainer.max_steps=1"]
    trainer = make_trainer(overrides, tmp_path / "run")
    trainer.fit()
    val_src, val_tgt = (path.read_text().splitlines() for path in corpus["val"])
    hyps, refs = seen[0]
    assert len(hyps) == 5 and refs == [val_tgt[:5]]
    assert trainer.validator.src == val_src[:5]
    # the loss is that of the same five pairs: a validator given only them agrees, the whole split does not
    val = trainer.validator
    cfg, everything_cfg = trainer.cfg, cfg_with(trainer, val_max_sentences=0)
    five = Validator(val.model, val.tokenizer, val_split(trainer).select(range(5)), cfg.trainer, cfg.decoding)
    everything = Validator(val.model, val.tokenizer, val_split(trainer), everything_cfg.trainer, cfg.decoding)
    assert val.loss() == five.loss() != everything.loss()


def val_split(trainer: Trainer):
    return prepare(trainer.cfg.data).split(trainer.cfg.data.val_split)


def cfg_with(trainer: Trainer, **trainer_settings):
    return OmegaConf.merge(trainer.cfg, {"trainer": trainer_settings})


def test_one_collective_per_step(corpus, tmp_path, monkeypatch):
    calls = []
    real = trainer_module.distributed.all_sum

    def counted(values, device):
        calls.append(list(values))
        return real(values, device)

    monkeypatch.setattr(trainer_module.distributed, "all_sum", counted)
    trainer = make_trainer([*toy_overrides(corpus, tmp_path), "trainer.max_steps=3"], tmp_path / "run")
    trainer.fit()
    assert trainer.progress.step == 3 and len(calls) == 3
    tokens = [c[0] for c in calls]
    assert all(t > 0 for t in tokens) and [c[1] for c in calls] == [0.0, 0.0, 0.0]


@pytest.mark.slow
def test_torchrun_two_processes_match_one_process(corpus, tmp_path):
    """2 gloo processes x 1 batch per step == 1 process x 2 accumulated batches (same global batches)."""
    # both processes validate their shares at step 2, then take step 3 together
    common = [*toy_overrides(corpus, tmp_path), "model.dropout=0", "trainer.max_steps=3", "trainer.val_every=2"]
    train(["trainer.accumulate=2", *common], tmp_path / "single")  # also prepares the data
    cmd = [
        str(BIN / "torchrun"),
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "transformer.cli.train",
        *common,
        f"hydra.run.dir={tmp_path / 'ddp'}",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "on 2 process(es)" in result.stderr
    single, ddp = weights(tmp_path / "single"), weights(tmp_path / "ddp")
    for name in single:
        torch.testing.assert_close(ddp[name], single[name], atol=2e-5, rtol=1e-4, msg=name)
    assert not torch.equal(single["model.tgt_embed.weight"], weights_at_init(tmp_path / "single"))


def weights_at_init(run_dir: Path) -> torch.Tensor:
    """The initial target embedding of a run (same seed), to show that training changed the weights."""
    ckpt = load_checkpoint(str(run_dir))
    torch.manual_seed(1234)
    return build_model(ckpt.config.model, ckpt.tokenizer).tgt_embed.weight.detach()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("precision", "model"), [("bf16", []), ("fp16", []), ("bf16", RNN)], ids=["bf16", "fp16", "bf16-rnn"]
)
def test_mixed_precision_trains_like_fp32(corpus, tmp_path, precision, model):
    """bf16 autocast, and fp16 autocast with its gradient scaler: every step is taken, fp32 master weights
    move like fp32 training's, and the first loss is fp32's within the lower precision."""
    base = with_model(toy_overrides(corpus, tmp_path), [*model, "model.dropout=0", "trainer.max_steps=3"])
    train(base, tmp_path / "fp32")
    train([*base, f"trainer.precision={precision}"], tmp_path / precision)
    mixed, full = weights(tmp_path / precision), weights(tmp_path / "fp32")
    start = weights_at_init(tmp_path / "fp32")
    assert all(t.dtype == torch.float32 and torch.isfinite(t).all() for t in mixed.values())
    moved, moved_fp32 = (w["model.tgt_embed.weight"] - start for w in (mixed, full))
    assert torch.nn.functional.cosine_similarity(moved.flatten(), moved_fp32.flatten(), dim=0) > 0.9
    first_loss = [scalars(tmp_path / run, "train/loss")[0][1] for run in (precision, "fp32")]
    assert first_loss[0] == pytest.approx(first_loss[1], rel=2e-2)
    state = load_checkpoint(str(tmp_path / precision / "checkpoints" / "last.safetensors")).state
    assert state["progress"]["step"] == 3
    if precision == "fp16":
        assert 0 < state["scaler"]["scale"] <= 2.0**16  # the scaler ran (and may have backed off)
    else:
        assert state["scaler"] == {}  # no scaler without fp16


@pytest.mark.slow
def test_compiled_training_matches_eager(corpus, tmp_path):
    """trainer.compile=true (the model and its loss in one torch.compile graph) takes the eager run's steps.

    Adam's first step is lr·g/(|g|+eps): at the default eps (1e-9) that is lr·sign(g), which rounding flips
    where g is near 0 (beyond the tolerance on an AMX Xeon); with eps 1 it is nearly lr·g, so the weights
    compare the gradients."""
    adam_linear = ["optim.eps=1", "optim.lr=2"]  # lr 1 at step 1 of the 2-step warmup
    one_step = ["model.dropout=0", "trainer.max_steps=1"]  # one step: each shape compiles anew
    base = [*toy_overrides(corpus, tmp_path), *one_step, *adam_linear]
    train(base, tmp_path / "eager")
    train([*base, "trainer.compile=true"], tmp_path / "compiled")
    compiled, eager = weights(tmp_path / "compiled"), weights(tmp_path / "eager")
    assert not torch.equal(eager["model.tgt_embed.weight"], weights_at_init(tmp_path / "eager"))
    for name in eager:
        torch.testing.assert_close(compiled[name], eager[name], atol=1e-5, rtol=1e-4, msg=name)
    losses = [[value for _, value in scalars(tmp_path / run, "train/loss")] for run in ("compiled", "eager")]
    assert len(losses[0]) == 1 and losses[0] == pytest.approx(losses[1], rel=1e-5)


@pytest.mark.slow
def test_transformer_average(corpus, tmp_path):
    run = tmp_path / "run"
    train([*toy_overrides(corpus, tmp_path), "trainer.max_steps=6", "trainer.val_every=2"], run)
    command = [str(BIN / "transformer-average"), f"checkpoints=[{run}]", "last=2"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    files = sorted((run / "checkpoints").glob("step_*.safetensors"))[-2:]
    a, b = (load_checkpoint(str(f)).model.state_dict() for f in files)
    averaged = load_checkpoint(str(run / "checkpoints" / "avg_last2.safetensors"))
    assert averaged.meta["averaged"] == "4,6"
    newest = load_checkpoint(str(files[-1])).meta
    assert (averaged.meta["step"], averaged.meta["train_minutes"]) == (newest["step"], newest["train_minutes"])
    name = "decoder.0.ff.fc1.weight"
    torch.testing.assert_close(averaged.model.state_dict()[name], (a[name] + b[name]) / 2)


def test_the_bar_fills_with_the_budget_whichever_limit_is_nearer(tmp_path):
    """The bar shows the share of the budget used, so its time left holds for a run limited by the clock."""
    from torch.utils.tensorboard import SummaryWriter

    from transformer.core.config import TrainerConfig
    from transformer.training.monitor import TrainMonitor
    from transformer.training.progress import TrainingProgress

    limits = TrainerConfig(max_steps=1000, max_minutes=10.0, progress=True, log_every=1)
    progress = TrainingProgress(step=100)  # 10% of the steps
    with SummaryWriter(str(tmp_path)) as writer:
        monitor = TrainMonitor(writer, limits, progress.budget_used(60.0, limits), enabled=True)
        assert monitor.bar.n == 10.0  # one minute of ten is 10% too
        progress.step = 200
        monitor.stepped(200, 2.5, 1e-3, 5.0, progress.budget_used(300.0, limits))
        assert monitor.bar.n == 50.0  # five minutes of ten: the clock is nearer than 200 steps of 1000
        assert "50% of budget" in str(monitor.bar) and "step=200" in str(monitor.bar)
        monitor.close()
