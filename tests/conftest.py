"""Shared fixtures: a tiny random model and a tiny parallel corpus written to disk."""

import gzip
import random
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from transformer.bench.tiny import WORDS_EN, WORDS_FR  # noqa: F401 (the tests import them from here)
from transformer.cli import CONFIG_PATH
from transformer.data.preparation import PreparedData, prepare
from transformer.models.factory import build_model
from transformer.models.transformer import Transformer
from transformer.runs.checkpoint import save_checkpoint
from transformer.training.loss import loss_sum


def tiny_model(seed: int = 0, vocab: int = 40, dropout: float = 0.0, **kwargs) -> Transformer:
    torch.manual_seed(seed)
    args = dict(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=dropout)
    args.update(kwargs)
    return Transformer(vocab, vocab, pad_id=0, **args).eval()


def fit(model: Transformer, batch, steps: int, lr: float = 3e-3) -> Transformer:
    """`model` after `steps` Adam steps on `batch` (token-mean cross-entropy, no smoothing), in eval mode."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        optimizer.zero_grad()
        (loss_sum(model, batch, 0.0) / batch.n_tokens).backward()
        optimizer.step()
    return model.eval()


def paused_process(code: str, argument: Path, ready: str) -> subprocess.Popen:
    """A Python process running `code` with `argument`, once it has printed `ready` (it then runs until killed)."""
    process = subprocess.Popen([sys.executable, "-c", code, str(argument)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == ready
    return process


def rebuilt(model: Transformer, **kwargs) -> Transformer:
    """A separately built tiny model (`kwargs` as for `tiny_model`) holding `model`'s current weights."""
    copy = tiny_model(seed=123, **kwargs)
    copy.load_state_dict(model.state_dict())
    return copy


def training_pairs(prepared: PreparedData) -> list[tuple[str, str]]:
    """The prepared training split's pairs as text (decoded from their ids, each corpus's tag left out): the
    training split stores ids alone."""
    train, tokenizer, pairs = prepared.split("train"), prepared.tokenizer, []
    for corpus in prepared.corpora:
        skip = len(tokenizer.tag_prefix(corpus["tag"]))
        rows = train.select(range(len(pairs), len(pairs) + corpus["pairs"]))
        srcs = [tokenizer.src.decode(ids[skip:]) for ids in rows["src_ids"]]
        pairs += zip(srcs, tokenizer.decode_tgt(rows["tgt_ids"]))
    return pairs


def write_corpus(directory: Path, name: str, n: int, seed: int, gz: bool = False) -> tuple[Path, Path]:
    """A word-for-word toy translation task: n sentence pairs in `name`.fr/.en."""
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(n):
        idx = [rng.randrange(len(WORDS_FR)) for _ in range(rng.randint(2, 7))]
        src.append(" ".join(WORDS_FR[i] for i in idx))
        tgt.append(" ".join(WORDS_EN[i] for i in idx))
    paths = []
    for lines, lang in ((src, "fr"), (tgt, "en")):
        path = directory / (f"{name}.{lang}.gz" if gz else f"{name}.{lang}")
        text = "".join(line + "\n" for line in lines).encode()
        path.write_bytes(gzip.compress(text) if gz else text)
        paths.append(path)
    return paths[0], paths[1]


@pytest.fixture
def corpus(tmp_path: Path) -> dict[str, tuple[Path, Path]]:
    return {
        "train": write_corpus(tmp_path, "train", 300, seed=1, gz=True),
        "val": write_corpus(tmp_path, "val", 20, seed=2),
        "test": write_corpus(tmp_path, "test", 20, seed=3),
    }


def files_data(
    train: tuple[Path, Path], val: tuple[Path, Path], prepared: Path, test: tuple[Path, Path] | None = None
) -> list[str]:
    """Overrides for `data=files` on these (src, tgt) files, with a 60-piece vocabulary; `test` as split toy."""
    (train_src, train_tgt), (val_src, val_tgt) = train, val
    args = ["data=files", f"data.train.src={train_src}", f"data.train.tgt={train_tgt}"]
    args += [f"data.val.src={val_src}", f"data.val.tgt={val_tgt}"]
    if test is not None:
        args += [f"+data.test.toy.src={test[0]}", f"+data.test.toy.tgt={test[1]}"]
    return [*args, f"data.prepared_dir={prepared}", "data.tokenizer.vocab_size=60"]


def _data_args(tmp: Path, prepared: Path) -> str:
    def pair(name: str, ext: str = "") -> tuple[Path, Path]:
        return tmp / f"{name}.fr{ext}", tmp / f"{name}.en{ext}"

    return " ".join(files_data(pair("train", ".gz"), pair("val"), prepared, pair("test")))


@pytest.fixture(scope="module")
def cli_setup(tmp_path_factory) -> dict[str, str]:
    """A tiny corpus, its prepared form (and a damaged copy) and an untrained checkpoint, made in-process."""
    tmp = tmp_path_factory.mktemp("mistakes")
    for name, n, seed, gz in (("train", 200, 1, True), ("val", 10, 2, False), ("test", 10, 3, False)):
        write_corpus(tmp, name, n, seed, gz)
    (tmp / "fake.fr.gz").write_text("un chien\n")  # plain text named .gz
    shutil.copy(tmp / "train.en.gz", tmp / "fake.en.gz")
    (tmp / "empty").mkdir()
    data = _data_args(tmp, tmp / "prepared")
    with initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
        cfg = compose("train", overrides=[*shlex.split(data), "model=tiny"])
    prepared = prepare(cfg.data)
    model = build_model(cfg.model, prepared.tokenizer)
    save_checkpoint(tmp / "run" / "checkpoints" / "best.safetensors", model, prepared.tokenizer, cfg, step=0)
    damaged = tmp / "damaged"
    shutil.copytree(tmp / "prepared", damaged)
    shutil.rmtree(damaged / prepared.dir.name / "train")
    return {
        "tmp": str(tmp),
        "data": data,
        "data_damaged": _data_args(tmp, damaged),
        "tiny": "model=tiny trainer.max_steps=2 trainer.val_every=1 trainer.batch_tokens=256 trainer.progress=false",
        "ckpt": f"checkpoint={tmp / 'run'}",
        "dir": str(tmp / "empty"),
    }
