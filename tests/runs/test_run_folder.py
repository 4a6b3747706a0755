"""`RunFolder` owns every path inside a run folder: its paths, and no other module or script spelling one."""

import ast
import re
from pathlib import Path

import pytest

from tests import ROOT
from transformer.core.errors import UserError
from transformer.runs.checkpoint import resolve_checkpoint
from transformer.runs.run_folder import RunFolder

# a checkpoint file name or a piece of one, or a run folder's subfolder, as a whole string or a piece of an f-string
LAYOUT = re.compile(
    r"checkpoints|tensorboard|\.hydra|overrides\.yaml|(best|last)?\.safetensors|step_(\*\.safetensors)?|avg_(last|best|all)?"
)


def spelled(file: Path) -> list[str]:
    """The string constants and f-string pieces of `file` that spell a piece of a run folder's layout."""
    tree = ast.parse(file.read_text(), str(file))
    pieces = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    return [f"{file.relative_to(ROOT)}: {piece!r}" for piece in pieces if LAYOUT.fullmatch(piece)]


def test_only_the_run_folder_module_spells_the_layout():
    sources = [*(ROOT / "transformer").rglob("*.py"), *(ROOT / "scripts").rglob("*.py")]
    owner = ROOT / "transformer" / "runs" / "run_folder.py"
    assert spelled(owner), "the check finds nothing even in the owner: it checks nothing"
    assert [line for file in sources if file != owner for line in spelled(file)] == []


def test_paths_of_a_run_folder(tmp_path):
    run = RunFolder(tmp_path / "run")
    assert run.best == tmp_path / "run" / "checkpoints" / "best.safetensors"
    assert run.last == tmp_path / "run" / "checkpoints" / "last.safetensors"
    assert run.step(1200) == tmp_path / "run" / "checkpoints" / "step_0001200.safetensors"
    assert run.average(last=3) == run.checkpoints / "avg_last3.safetensors"
    assert run.average(best=2) == run.checkpoints / "avg_best2.safetensors"
    assert run.average() == run.checkpoints / "avg_all.safetensors"
    assert run.tensorboard == tmp_path / "run" / "tensorboard"
    assert run.overrides == tmp_path / "run" / ".hydra" / "overrides.yaml"


def test_holding_names_the_run_of_a_checkpoint_file_only(tmp_path):
    run = RunFolder(tmp_path / "run")
    assert RunFolder.holding(run.step(4)) == run
    assert RunFolder.holding(run.average(last=2)) == run
    assert RunFolder.holding(tmp_path / "model.safetensors") is None


def test_steps_trained_and_resumable_read_what_is_on_disk(tmp_path):
    run = RunFolder(tmp_path / "run")
    assert (run.steps(), run.trained(), run.resumable()) == ([], None, None)
    run.checkpoints.mkdir(parents=True)
    for path in (run.step(30), run.step(4), run.average(last=2), run.last):
        path.touch()
    assert run.steps() == [run.step(4), run.step(30)]  # in step order; the average and last are not steps
    assert (run.trained(), run.resumable()) == (run.last, run.last)
    run.best.touch()
    assert run.trained() == run.best


def test_resolve_checkpoint_reads_a_run_folder_through_it(tmp_path):
    run = RunFolder(tmp_path / "run")
    run.path.mkdir()
    with pytest.raises(UserError, match="no checkpoint in .*checkpoints"):
        resolve_checkpoint(str(run.path))
    run.checkpoints.mkdir()
    run.last.touch()
    assert resolve_checkpoint(str(run.path)) == run.last
