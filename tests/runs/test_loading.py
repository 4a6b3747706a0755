"""`loading.load`: every kind of `checkpoint=` gives what translates, and every command loads through it."""

import importlib.util
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests import ROOT
from tests.serve.serving import write_checkpoint
from transformer.core.config import DecodingConfig
from transformer.core.errors import UserError
from transformer.decoding.ensemble import Ensemble
from transformer.decoding.translator import Translator
from transformer.runs.checkpoint import load_checkpoint, save_checkpoint
from transformer.runs.loading import checkpoint_paths, load
from transformer.runs.run_folder import RunFolder

SENTENCES = ["un chien rouge dort", "le chat mange dans le parc", ""]
GREEDY = DecodingConfig(strategy="greedy", max_len_b=8)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """A run folder whose best checkpoint is one random tiny model, and a file of another with the same vocabulary."""
    tmp = tmp_path_factory.mktemp("loading")
    run = RunFolder(tmp / "run")
    paths = {"run": run.path, "best": run.best, "file": tmp / "other.safetensors"}
    for seed, path in enumerate((run.best, paths["file"])):
        ckpt = load_checkpoint(str(write_checkpoint(tmp / f"seed{seed}.safetensors", seed=seed)))
        config = OmegaConf.merge(ckpt.config, {"data": {"src_lang": "fr", "tgt_lang": "en"}})
        save_checkpoint(path, ckpt.model, ckpt.tokenizer, config, step=seed + 3)
    return paths


def ours(model, path: Path, cfg: DecodingConfig = GREEDY) -> list[str]:
    """What a `Translator` over `model` and the tokenizer of the checkpoint `path` gives for SENTENCES."""
    return Translator(model, load_checkpoint(str(path)).tokenizer, cfg).translate(SENTENCES)


def test_a_run_folder_gives_its_best_checkpoint(models):
    loaded = load(str(models["run"]), device="cpu")
    assert [m.path for m in loaded.members] == [models["best"]] and loaded.meta["step"] == "3"
    translations = loaded.translator(GREEDY).translate(SENTENCES)
    assert translations == ours(load_checkpoint(str(models["best"])).model, models["best"])
    assert translations[0] and translations[-1] == ""


def test_a_file_gives_that_checkpoint(models):
    loaded = load(str(models["file"]), device="cpu")
    assert loaded.path == models["file"] and loaded.config.data.src_lang == "fr"
    beam = DecodingConfig(strategy="beam", beam_size=3, max_len_b=8)
    assert loaded.translator(beam).translate(SENTENCES) == ours(loaded.members[0].model, models["file"], beam)


def test_a_list_gives_the_ensemble_of_its_members(models):
    loaded = load([str(models["run"]), str(models["file"])], device="cpu")
    assert isinstance(loaded.model, Ensemble) and [m.path for m in loaded.members] == [models["best"], models["file"]]
    members = [load_checkpoint(str(models[name])).model for name in ("best", "file")]
    assert loaded.translator(GREEDY).translate(SENTENCES) == ours(Ensemble(members), models["best"])


def test_a_ctranslate2_export_gives_its_engine(models, tmp_path):
    if importlib.util.find_spec("ctranslate2") is None:  # as tests/export/test_export.py: the export extra is optional
        pytest.skip("ctranslate2 is not installed (pip install -e '.[export]')")
    from transformer.cli.export import export
    from transformer.decoding.ctranslate2_engine import CTranslate2Translator

    export(load(str(models["run"]), device="cpu").members[0], "ctranslate2", tmp_path / "ct2")
    loaded = load(str(tmp_path / "ct2"), engine="ctranslate2", device="cpu")
    translator = loaded.translator(GREEDY)
    assert isinstance(translator, CTranslate2Translator) and loaded.path == tmp_path / "ct2" / "model.bin"
    assert translator.translate(SENTENCES) == ours(load_checkpoint(str(models["best"])).model, models["best"])
    with pytest.raises(UserError, match="decodes one export"):
        load([str(tmp_path / "ct2")] * 2, engine="ctranslate2")


def test_what_names_no_model_is_refused(models, tmp_path):
    with pytest.raises(UserError, match="names no model"):
        load([])
    with pytest.raises(UserError, match="engine='onnx' is not one of pytorch, ctranslate2"):
        load(str(models["file"]), engine="onnx")
    with pytest.raises(UserError, match="no checkpoint in"):
        load(str(tmp_path), device="cpu")
    assert checkpoint_paths("a") == ["a"] and checkpoint_paths(["a", "b"]) == ["a", "b"]


COMMANDS = ["translate", "evaluate", "serve", "backtranslate", "results", "export"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_loads_through_load(command):
    assert "from transformer.runs.loading import" in (ROOT / "transformer" / "cli" / f"{command}.py").read_text()


def test_no_other_way_to_load_a_model_to_translate_with():
    """The commands, the service and the results table build no translator and load no checkpoint themselves."""
    files = [*(ROOT / "transformer" / "cli").glob("*.py"), *(ROOT / "transformer" / "serve").glob("*.py")]
    files.append(ROOT / "transformer" / "runs" / "results_table.py")
    loading = re.compile(r"\b(Translator|CTranslate2Translator|load_checkpoint|load_export)\(|\.tag_prefix\(")
    assert [f"{f.name}: {m.group()}" for f in files for m in loading.finditer(f.read_text())] == []
