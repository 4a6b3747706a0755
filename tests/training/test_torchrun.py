"""torchrun at scale: the data prepared before the process group, validation shared by the processes, several
nodes without a shared folder (two node groups on loopback)."""

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from tests import ROOT
from tests.conftest import WORDS_EN, WORDS_FR, files_data, tiny_model, write_corpus
from transformer.cli import CONFIG_PATH
from transformer.core.config import DecodingConfig, TokenizerConfig, TrainerConfig
from transformer.data.corpus import fetch, split_names
from transformer.data.preparation import prepared_path
from transformer.data.tokenizer import Tokenizer, train_sentencepiece
from transformer.runs.checkpoint import load_checkpoint
from transformer.training import distributed
from transformer.training.validation import Validator

BIN = Path(sys.executable).parent
TINY = ["model=tiny", "trainer.batch_tokens=256", "trainer.progress=false", "trainer.log_every=1"]
TINY += ["optim.warmup_steps=2", "model.dropout=0", "trainer.val_every=2"]


def toy_corpus(folder: Path) -> list[str]:
    """A toy corpus in `folder`; data overrides that name its files, and the prepared folder, relative to it."""
    folder.mkdir(parents=True, exist_ok=True)
    pairs = {"train": write_corpus(folder, "train", 300, seed=1, gz=True), "val": write_corpus(folder, "val", 20, 2)}
    relative = {split: tuple(Path(p.name) for p in files) for split, files in pairs.items()}
    return files_data(relative["train"], relative["val"], Path("prepared"))


def node_copy(corpus: Path, node: Path, mtime: int) -> None:
    """Copy the corpus files of `corpus` into `node`, dated `mtime`: another node's copy of them."""
    node.mkdir(parents=True)
    for path in corpus.iterdir():
        if path.is_file():
            os.utime(shutil.copy(path, node), (mtime, mtime))


def data_config(overrides: list[str]):
    with initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
        return compose(config_name="train", overrides=overrides).data


def name(cfg) -> str:
    """The prepared folder's name for `cfg`'s files as they are now (paths relative to the working folder)."""
    return prepared_path(cfg, fetch(cfg, split_names(cfg))).name


def test_copies_of_a_corpus_with_other_dates_are_prepared_under_one_name(tmp_path, monkeypatch):
    """Each node's copy of the corpus, at the same paths, has its own mtimes; the prepared folder's name does not
    depend on them, but changes with the text."""
    cfg = data_config(toy_corpus(tmp_path / "corpus"))
    names = []
    for node, mtime in (("a", 1_000_000_000), ("b", 1_700_000_000)):
        node_copy(tmp_path / "corpus", tmp_path / node, mtime)
        monkeypatch.chdir(tmp_path / node)
        names.append(name(cfg))
    (tmp_path / "b" / "val.fr").write_text("un chien\n" * 20)
    assert names[0] == names[1] != name(cfg)


def test_each_process_validates_its_share_and_one_gather_joins_them(monkeypatch, caplog):
    """3 processes score every third val pair each; their gathered loss sums and translations are one process'."""
    sentences = [" ".join(WORDS_FR[i:] + WORDS_EN[:i]) for i in range(len(WORDS_FR))] * 5
    model_proto = train_sentencepiece(iter(sentences), TokenizerConfig(vocab_size=60))
    tokenizer = Tokenizer(model_proto, model_proto)
    model = tiny_model(vocab=tokenizer.src_vocab_size, max_positions=32, joint_vocab=True)
    src, tgt = sentences[:12], sentences[1:13]
    val = {"src": src, "tgt": tgt, "src_ids": tokenizer.encode_src(src), "tgt_ids": tokenizer.encode_tgt(tgt)}
    trainer = TrainerConfig(batch_tokens=100, attention_images=0, progress=False, val_max_sentences=10)
    with caplog.at_level("INFO"):
        alone = Validator(model, tokenizer, val, trainer, DecodingConfig())
    assert "validating on the first 10 of the 12 val pairs" in caplog.text
    shares = [Validator(model, tokenizer, val, trainer, DecodingConfig(), rank, 3) for rank in range(3)]
    assert sorted(row for v in shares for row in v.rows) == list(range(10))
    assert all(len(b) > 1 for b in alone.batches) and len(alone.batches) > 1  # batches of up to 100 tokens
    others = [(v.loss_sums(), v.translations(v.translator())) for v in shares[1:]]
    translated = sorted(pair for _, pairs in others for pair in pairs) + shares[0].translations(shares[0].translator())
    assert sorted(translated) == sorted(alone.translations(alone.translator()))
    single = alone(None, 1)
    monkeypatch.setattr(distributed, "all_gather", lambda value: [value, *others])
    joined = shares[0](None, 1)
    assert joined.loss == pytest.approx(single.loss) and joined.bleu == pytest.approx(single.bleu)


def torchrun_env(slow_seconds: float = 0) -> dict[str, str]:
    """The environment of a torchrun that runs this checkout's `tests.training.slowed_train`."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "SLOW_SECONDS": str(slow_seconds)}


def slowed(stderr: str, what: str) -> list[str]:
    """The ranks `tests.training.slowed_train` slowed `what` on, in order."""
    return re.findall(rf"slowed {what} on rank (\d)", stderr)


@pytest.mark.slow
def test_a_preparation_and_a_validation_longer_than_the_collective_timeout_stop_nothing(tmp_path):
    """SentencePiece training (one process; the other waits on the prepared folder's lock) and each process'
    validation at step 2 of 3 take 10 s against a collective timeout of 6 s: the run ends normally."""
    cmd = [str(BIN / "torchrun"), "--standalone", "--nproc-per-node=2", "-m", "tests.training.slowed_train"]
    cmd += [*toy_corpus(tmp_path), *TINY, "trainer.max_steps=3", "trainer.collective_timeout_minutes=0.1"]
    cmd += ["hydra.run.dir=run"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=tmp_path, env=torchrun_env(10))
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(slowed(result.stderr, "SentencePiece")) == 1
    assert sorted(slowed(result.stderr, "validation")) == ["0", "1"]
    assert "built by another process meanwhile" in result.stderr
    assert load_checkpoint(str(tmp_path / "run" / "checkpoints" / "last.safetensors")).state["progress"]["step"] == 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_nodes_without_a_shared_folder_each_prepare_the_same_data(tmp_path):
    """Two single-process node groups on loopback, each in its own folder with its own copy of the corpus (other
    mtimes) and its own prepared folder, prepare it under one name and train together."""
    overrides = toy_corpus(tmp_path / "corpus")
    nodes = [tmp_path / "node0", tmp_path / "node1"]
    for node, mtime in zip(nodes, (1_000_000_000, 1_700_000_000)):
        node_copy(tmp_path / "corpus", node, mtime)
    rendezvous = ["--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}"]
    train = ["-m", "transformer.cli.train", *overrides, *TINY, "trainer.max_steps=2", "hydra.run.dir=run"]
    runs = [
        subprocess.Popen(
            [str(BIN / "torchrun"), *rendezvous, f"--node-rank={i}", *train],
            cwd=node,
            env=torchrun_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, node in enumerate(nodes)
    ]
    try:
        errors = [run.communicate(timeout=240)[1] for run in runs]
    finally:
        for run in runs:
            if run.poll() is None:
                run.terminate()  # torchrun stops its worker on SIGTERM (not on SIGKILL)
                run.wait(60)
    for run, stderr in zip(runs, errors):
        assert run.returncode == 0, stderr[-3000:]
        assert "prepared prepared/files-src-tgt-" in stderr and "on 2 process(es)" in stderr  # each built its own
    prepared = [sorted(p.name for p in (node / "prepared").iterdir() if not p.name.startswith(".")) for node in nodes]
    assert len(prepared[0]) == 1 and prepared[0] == prepared[1]
    checkpoints = [node / "run" / "checkpoints" / "last.safetensors" for node in nodes]
    assert [c.exists() for c in checkpoints].count(True) == 1  # rank 0's node saves
    assert load_checkpoint(str(next(c for c in checkpoints if c.exists()))).state["progress"]["step"] == 2
