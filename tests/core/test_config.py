"""The real Hydra configs compose, and bad settings are rejected before any work."""

import subprocess
import sys
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import MISSING, OmegaConf

from transformer.cli import CONFIG_PATH, SCHEMAS, check_override, compose_checked
from transformer.cli.checks import check_config
from transformer.core.config import EvaluateConfig, PrepareConfig, TrainConfig
from transformer.core.errors import UserError
from transformer.data.preparation import prepared_path


def make(name, overrides=()):
    with initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
        return compose(config_name=name, overrides=list(overrides))


@pytest.mark.parametrize("model", ["tiny", "small", "base"])
@pytest.mark.parametrize("data", ["multi30k", "tatoeba"])
def test_train_config_composes(model, data):
    cfg = make("train", [f"model={model}", f"data={data}"])
    assert cfg.model.d_model % cfg.model.n_heads == 0
    assert cfg.data.name == data


def commands() -> list[str]:
    """The console scripts' commands, read from pyproject.toml (transformer-NAME runs configs/NAME.yaml)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    scripts = tomllib.loads((Path(CONFIG_PATH).parent / "pyproject.toml").read_text())["project"]["scripts"]
    return sorted(command.removeprefix("transformer-") for command in scripts)


def required(schema: type) -> set[str]:
    """`schema`'s settings a user must give: its fields without a default that no config group fills."""
    hints = typing.get_type_hints(schema)
    return {f.name for f in fields(schema) if f.default is MISSING and not is_dataclass(hints[f.name])}


@pytest.mark.parametrize("command", commands())
def test_every_command_composes_to_its_schema_and_asks_only_for_what_a_user_must_give(command):
    schema = SCHEMAS[f"{command}_schema"]
    cfg = make(command)
    assert OmegaConf.get_type(cfg) is schema and set(cfg) == {f.name for f in fields(schema)}
    assert set(OmegaConf.missing_keys(cfg)) == required(schema)
    for key in required(schema):
        cfg[key] = ["x"] if key == "checkpoints" else "x"
    check_config(cfg)  # with what a user gives, the defaults pass the start-up checks


def test_direction_is_one_override():
    cfg = make("train", ["data.src_lang=en", "data.tgt_lang=fr"])
    assert (cfg.data.src_lang, cfg.data.tgt_lang) == ("en", "fr")


def test_experiment_overlay():
    cfg = make("train", ["+experiment=multi30k_cpu_fren"])
    assert cfg.trainer.max_minutes > 0 and cfg.model.d_model == 256


def test_the_back_translation_experiment_is_make_trains_with_less_dropout():
    recipe, bt = make("train", ["+experiment=multi30k_cpu_fren"]), make("train", ["+experiment=multi30k_cpu_fren_bt"])
    assert bt.model.dropout < recipe.model.dropout
    bt.model.dropout = recipe.model.dropout
    assert bt == recipe


def test_unknown_key_and_wrong_type_are_rejected():
    with pytest.raises(ConfigCompositionException):
        make("train", ["trainer.max_stepz=3"])
    with pytest.raises(ConfigCompositionException):
        make("train", ["trainer.max_steps=many"])


@pytest.mark.parametrize(
    "override, message",
    [
        ("trainer.max_stepz=3", "did you mean trainer.max_steps? valid keys of trainer: accumulate,"),
        ("data.tokenizer.vocab=8", "did you mean data.tokenizer.vocab_size?"),
        ("data.train.source=a.fr", "did you mean data.train.src? valid keys of data.train: columns, field, format"),
        ("beam_size=4", "did you mean decoding.beam_size"),
    ],
)
def test_unknown_keys_are_named_with_the_valid_ones(override, message):
    with pytest.raises(UserError, match="unknown setting") as err:
        check_override(TrainConfig, override)
    assert message in str(err.value)


@pytest.mark.parametrize("override", ["data.train.path=own.tsv", "data.train={path:own.tsv}"])
def test_a_setting_inside_an_unset_section_names_the_section(override):
    with pytest.raises(UserError, match="cannot set data.train.*: data.train is not set .*data=files"):
        compose_checked("prepare", [override])
    assert make("prepare", ["data=files", "data.train.path=own.tsv"]).data.train.path == "own.tsv"


def test_valid_overrides_and_hydra_syntax_pass_the_key_check():
    overrides = [
        "model=small",
        "trainer.max_steps=3",
        "data.train.src=a",
        "data.test.mine.src=x",
        "+foo=1",
        "hydra.run.dir=r",
        "--cfg",
        "job",
        "-m",
        "optim.lr=1e-3,2e-3",
    ]
    for override in overrides:
        check_override(TrainConfig, override)
    check_override(EvaluateConfig, "decoding.length_penalty=0.6")


@pytest.mark.parametrize(
    "override, message",
    [
        ("model.n_heads=3", "not divisible by model.n_heads=3"),
        ("decoding.beam_size=0", "decoding.beam_size=0 must be at least 1"),
        ("data.max_len=0", "data.max_len=0 must be at least 1"),
        ("data.subword_dropout=1.0", r"data.subword_dropout=1.0 must be in \[0, 1\)"),
        ("data.subword_dropout=0.1 data.tokenizer.model_type=unigram", "needs data.tokenizer.model_type=bpe"),
        ("data.both_directions=true data.tokenizer.joint=false", "data.both_directions needs data.tokenizer.joint"),
        ("trainer.precision=fp8", "trainer.precision='fp8' is not one of fp32, bf16, fp16"),
        ("decoding=sample decoding.temperature=0", "decoding.temperature=0.0 must be greater than 0"),
        ("decoding=sample decoding.top_p=1.5", r"decoding.top_p=1.5 must be in \(0, 1\]"),
        ("decoding=sample decoding.top_p=0", r"decoding.top_p=0.0 must be in \(0, 1\]"),
        ("decoding=sample decoding.top_k=-1", "decoding.top_k=-1 must be at least 0"),
        ("decoding=beam decoding.n_best=6", "decoding.n_best=6 must be at most decoding.beam_size=5"),
        ("decoding=greedy decoding.n_best=2", "needs decoding=beam"),
        ("decoding.max_len_a=-1", "decoding.max_len_a=-1.0 must be at least 0"),
        ("decoding.min_len=-1", "decoding.min_len=-1 must be at least 0"),
        ("decoding.batch_size=0", "decoding.batch_size=0 must be at least 1"),
        ("decoding.no_repeat_ngram_size=-2", "decoding.no_repeat_ngram_size=-2 must be at least 0"),
        ("model.dropout=-0.1", r"model.dropout=-0.1 must be in \[0, 1\)"),
        ("model.attention_dropout=1", r"model.attention_dropout=1.0 must be in \[0, 1\)"),
        ("model.d_model=33 model.n_heads=3", "model.d_model=33 must be even"),
        ("model.n_heads=0", "model.n_heads=0 must be at least 1"),
        ("data.max_len=2000", "model.max_positions=1024 must exceed data.max_len\\+1=2001"),
        ("data.tokenizer.character_coverage=0", r"character_coverage=0.0 must be in \(0, 1\]"),
        ("optim.lr=0", "optim.lr=0.0 must be greater than 0"),
        ("optim.warmup_steps=-1", "optim.warmup_steps=-1 must be at least 0"),
        ("optim.betas=[0.9,1.0]", r"optim.betas\[1\]=1.0 must be in \[0, 1\)"),
        ("optim.label_smoothing=1", r"optim.label_smoothing=1.0 must be in \[0, 1\)"),
        ("optim.clip_norm=-1", "optim.clip_norm=-1.0 must be at least 0"),
        ("trainer.keep_last=-1", "trainer.keep_last=-1 must be at least 0"),
        ("trainer.max_minutes=-5", "trainer.max_minutes=-5.0 must be at least 0"),
        pytest.param(
            "trainer.device=cuda",
            "trainer.device=cuda: no CUDA GPU is available here",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here"),
        ),
        ("trainer.device=tpu", "trainer.device=tpu: not a device"),
        ("data.weight=0", "data.weight=0.0 must be a number greater than 0"),
        ("+data.extra_train.x.dir=d +data.extra_train.x.weight=-1", "data.extra_train.x.weight=-1 must be a number"),
        ("data.tag=unk", "data.tag='unk' is not a tag name"),
        ("+data.extra_train.x.dir=d +data.extra_train.x.tag=a.b", "data.extra_train.x.tag='a.b' is not a tag name"),
        ("data.clean.max_ratio=0.5", "data.clean.max_ratio=0.5 must be 0 \\(off\\) or at least 1"),
        ("decoding.tag=bt", "decoding.tag=bt: validation would translate as a corpus tagged bt, but no training"),
        ("trainer.resume=true trainer.init_from=r", "trainer.resume and trainer.init_from exclude each other"),
    ],
)
def test_impossible_settings_are_rejected(override, message):
    check_config(make("train"))  # the defaults are fine
    with pytest.raises(UserError, match=message):
        check_config(make("train", override.split()))


def test_every_problem_is_named_in_one_line():
    with pytest.raises(UserError) as err:
        check_config(make("train", ["optim.lr=0", "decoding=sample", "decoding.temperature=-1"]))
    assert "optim.lr=0.0" in str(err.value) and "decoding.temperature=-1.0" in str(err.value)
    assert "\n" not in str(err.value)


def test_the_shared_corpora_folder_is_one_setting():
    cfg = make("train", ["+experiment=tatoeba_multi30k", "data.shared_dir=/corpora"])
    assert cfg.data.mirror == "/corpora/multi30k"
    assert cfg.data.extra_train.tatoeba.src == "/corpora/tatoeba/train.fr.gz"
    assert make("prepare", ["data=tatoeba", "data.shared_dir=/corpora"]).data.mirror == "/corpora/tatoeba"


def test_the_tatoeba_recipe_resolves_its_corpus_paths_for_the_prepared_data_name(tmp_path):
    """Its extra corpus paths interpolate `${data.src_lang}`, which must resolve against the whole config."""
    names = {
        (exp, src, tgt): prepared_path(
            make(
                "train",
                [f"+experiment={exp}", f"data.src_lang={src}", f"data.tgt_lang={tgt}", f"data.prepared_dir={tmp_path}"],
            ).data,
            {},
        )
        for exp in ("tatoeba_multi30k", "multi30k_cpu_fren")
        for src, tgt in (("fr", "en"), ("en", "fr"))
    }
    assert len(set(names.values())) == 4


@pytest.mark.parametrize("mode", [[], ["-m"]])
def test_a_command_checks_its_config_once(mode, monkeypatch, tmp_path):
    import transformer.cli as cli

    checked, ran = [], []
    monkeypatch.setattr(cli, "check_config", checked.append)
    main = cli.hydra_app("prepare", PrepareConfig)(ran.append)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["transformer-prepare", *mode])
    main()
    assert len(ran) == 1 and len(checked) == 1


def test_the_search_imports_no_hydra():
    code = "import sys, transformer.decoding.translator; print(any('hydra' in m for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
