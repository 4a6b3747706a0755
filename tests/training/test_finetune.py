"""Fine-tuning (`trainer.init_from`): a trained model's weights and vocabulary, everything else afresh; a later
launch of the run folder resumes it; settings that cannot fit the checkpoint are refused before any work."""

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from tests.conftest import write_corpus
from tests.training.test_training import make_trainer, scalars, toy_overrides, train
from transformer.cli import CONFIG_PATH
from transformer.cli.checks import check_config
from transformer.core.errors import UserError
from transformer.data.preparation import prepare
from transformer.runs.checkpoint import load_checkpoint
from transformer.training.start import check_init_from


@pytest.fixture(scope="module")
def parent(tmp_path_factory) -> Path:
    """A run folder of 2 steps on the toy corpus plus a tagged one (`bt`): its vocabulary holds <bt>."""
    tmp = tmp_path_factory.mktemp("parent")
    corpus = {"train": write_corpus(tmp, "train", 300, seed=1, gz=True), "val": write_corpus(tmp, "val", 20, seed=2)}
    extra = write_corpus(tmp, "extra", 60, seed=4)
    tagged = [
        f"+data.extra_train.bt.src={extra[0]}",
        f"+data.extra_train.bt.tgt={extra[1]}",
        "+data.extra_train.bt.tag=bt",
    ]
    train([*toy_overrides(corpus, tmp), *tagged, "trainer.max_steps=2", "trainer.val_every=2"], tmp / "run")
    return tmp / "run"


def child_overrides(tmp_path: Path, parent: Path, *extra: str) -> list[str]:
    """Another corpus (other sentences, another size), fine-tuned from `parent` with other training settings."""
    corpus = {"train": write_corpus(tmp_path, "new", 150, seed=9), "val": write_corpus(tmp_path, "newval", 10, seed=8)}
    changed = ["model.dropout=0.3", "model.attention_dropout=0.1", "optim.lr=5e-4", "trainer.batch_tokens=128"]
    changed += ["trainer.max_steps=2", "data.tag=bt"]  # training settings may differ; the checkpoint's tags serve
    return [*toy_overrides(corpus, tmp_path), f"trainer.init_from={parent}", *changed, *extra]


def test_init_from_takes_the_weights_and_vocabulary_and_starts_everything_else_afresh(parent, tmp_path):
    trainer = make_trainer(child_overrides(tmp_path, parent), tmp_path / "child")
    best = load_checkpoint(str(parent))
    mine = trainer.model.state_dict()
    assert all(torch.equal(mine[name].cpu(), tensor) for name, tensor in best.model.state_dict().items())
    assert trainer.optimizer.state_dict()["state"] == {}
    progress = trainer.progress
    assert (progress.step, progress.epoch, progress.position, progress.best_bleu, progress.history) == (
        0,
        0,
        0,
        -1.0,
        [],
    )
    assert trainer.tokenizer.same_models(best.tokenizer) and trainer.tokenizer.tags == ("bt",)
    (bt,) = trainer.tokenizer.tag_prefix("bt")
    assert all(ids[0] == bt for ids in trainer.train_data.ds["src_ids"])  # data.tag=bt: the corpus tagged as <bt>
    own = prepare(trainer.cfg.data)  # what this corpus gets when it trains its own SentencePiece model
    assert not own.tokenizer.same_models(best.tokenizer)
    assert prepare(trainer.cfg.data, best.tokenizer).dir != own.dir  # the prepared data is keyed by the tokenizer
    trainer.fit()
    assert [step for step, _ in scalars(tmp_path / "child", "train/lr")] == list(range(1, 3))  # step count afresh


def test_a_later_launch_of_the_run_folder_resumes_it(parent, tmp_path, caplog):
    overrides = child_overrides(tmp_path, parent)
    make_trainer(overrides, tmp_path / "child").fit()
    with caplog.at_level("INFO"):
        again = make_trainer([*overrides, "trainer.max_steps=3"], tmp_path / "child")
    assert again.progress.step == 2 and again.optimizer.state_dict()["state"]
    assert "resuming this run from" in caplog.text and "first launch only" in caplog.text
    assert again.tokenizer.same_models(load_checkpoint(str(parent)).tokenizer)


def composed(overrides: list[str]):
    with initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
        return compose("train", overrides=["model=tiny", *overrides])


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["model.d_model=32"], r"model.d_model=32 \(the checkpoint's: 64\); a fine-tuned model keeps its architecture"),
        (
            ["model.n_heads=2", "model.pre_norm=false"],
            r"model.n_heads=2 .*; model.pre_norm=false \(the checkpoint's: true\)",
        ),
        (["model.attention.encoder=local"], r"model.attention.encoder=local \(the checkpoint's: dot\)"),
        (["model=rnn"], r"model.family=rnn \(the checkpoint's: transformer\);"),
        (["data.tag=news"], r"data.tag=news: the vocabulary of .* lacks the tag <news> \(its tags: bt\)"),
        (["decoding.tag=news"], r"decoding.tag=news: the vocabulary of .* lacks the tag <news>"),
        (["+data.extra_train.x.src={tmp}/a", "+data.extra_train.x.tgt={tmp}/a", "+data.extra_train.x.tag=x"], "<x>"),
    ],
)
def test_settings_that_cannot_fit_the_checkpoint_are_refused(parent, tmp_path, overrides, message):
    (tmp_path / "a").touch()
    cfg = composed([f"trainer.init_from={parent}", *(o.format(tmp=tmp_path) for o in overrides)])
    with pytest.raises(UserError, match=message):
        check_init_from(cfg)


def test_resume_and_init_from_together_are_refused_with_the_difference_explained(parent):
    with pytest.raises(UserError, match="resume continues a run exactly .* init_from starts a new run"):
        check_config(composed([f"trainer.init_from={parent}", "trainer.resume=true"]))


@pytest.mark.parametrize("joint", [True, False])
def test_the_other_direction_is_refused_only_with_a_vocabulary_per_side(tmp_path, joint):
    """A joint vocabulary reads either language on either side: an en->fr run may start from a fr->en model (the
    recipe's --warm-start); with one vocabulary per side the source vocabulary is the other language's."""
    corpus = {"train": write_corpus(tmp_path, "train", 300, seed=1), "val": write_corpus(tmp_path, "val", 20, seed=2)}
    vocabulary = [f"data.tokenizer.joint={str(joint).lower()}", f"model.tie_embeddings={str(joint).lower()}"]
    fr_en = ["data.src_lang=fr", "data.tgt_lang=en", "trainer.max_steps=1"]
    train([*toy_overrides(corpus, tmp_path), *vocabulary, *fr_en], tmp_path / "fr_en")
    mine = [f"trainer.init_from={tmp_path / 'fr_en'}", vocabulary[1]]
    check_init_from(composed(mine))  # the same direction
    other = composed([*mine, "data.src_lang=en", "data.tgt_lang=fr"])
    if joint:
        check_init_from(other)
    else:
        with pytest.raises(UserError, match=r"translates fr->en with one vocabulary per side, .* is fr's; start from"):
            check_init_from(other)
