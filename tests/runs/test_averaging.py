"""Checkpoint averaging (`transformer-average`): which checkpoints are picked, the mean, and the refusals."""

from pathlib import Path

import pytest
import torch

from tests.serve.serving import write_checkpoint
from transformer.core.errors import UserError
from transformer.runs.averaging import average, candidates, select
from transformer.runs.checkpoint import load_checkpoint

BLEU = {2: "10.0", 4: "30.0", 6: "20.0", 8: ""}  # step -> val BLEU ("": not validated)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A run folder whose step checkpoints hold different random weights."""
    run = tmp_path_factory.mktemp("avg") / "run"
    for step, bleu in BLEU.items():
        file = run / "checkpoints" / f"step_{step:07d}.safetensors"
        write_checkpoint(file, seed=step, step=step, epoch=1, train_minutes=step / 10, val_bleu=bleu)
    return run


def steps(files: list[Path]) -> list[int]:
    return [int(load_checkpoint(str(f)).meta["step"]) for f in files]


@pytest.mark.parametrize(("last", "best", "expected"), [(2, 0, [6, 8]), (0, 2, [4, 6]), (0, 0, [2, 4, 6, 8])])
def test_the_newest_the_best_or_all_in_step_order(run_dir, last, best, expected):
    assert steps(select(candidates([str(run_dir)]), last, best)) == expected


def test_files_and_run_folders_mix_without_repeats(run_dir):
    file = run_dir / "checkpoints" / "step_0000004.safetensors"
    assert sorted(candidates([str(file), str(run_dir)])) == candidates([str(run_dir)])
    assert steps(select(candidates([str(file)]), 3, 0)) == [4]


def test_the_average_is_the_mean_with_the_newest_progress(run_dir, tmp_path):
    files = select(candidates([str(run_dir)]), 3, 0)
    output = tmp_path / "avg.safetensors"
    assert average(files, output) == "4,6,8"
    averaged = load_checkpoint(str(output))
    states = [load_checkpoint(str(f)).model.state_dict() for f in files]
    for name, tensor in averaged.model.state_dict().items():
        torch.testing.assert_close(tensor, sum(s[name] for s in states) / len(states))
    assert {k: averaged.meta[k] for k in ("step", "epoch", "train_minutes", "averaged")} == {
        "step": "8",
        "epoch": "1",
        "train_minutes": "0.8",
        "averaged": "4,6,8",
    }
    assert [p.name for p in tmp_path.iterdir()] == ["avg.safetensors"]  # no temporary file left


@pytest.mark.parametrize(
    ("paths", "last", "best", "message"),
    [
        (["nope.safetensors"], 0, 0, "does not exist"),
        (["{empty}"], 0, 0, "no step checkpoints in"),
        ([], 0, 0, "names nothing"),
        (["{run}"], 1, 1, "give last=N or best=N"),
        (["{run}"], -1, 0, "give last=N or best=N"),
    ],
)
def test_refusals_name_the_problem(run_dir, tmp_path, paths, last, best, message):
    paths = [p.format(run=run_dir, empty=tmp_path) for p in paths]
    with pytest.raises(UserError, match=message):
        select(candidates(paths), last, best)


def test_checkpoints_of_different_models_are_refused(run_dir, tmp_path):
    other = write_checkpoint(tmp_path / "wide.safetensors", d_model=64, step=10)
    with pytest.raises(UserError, match="not the same model"):
        average([run_dir / "checkpoints" / "step_0000002.safetensors", other], tmp_path / "avg.safetensors")
    assert not (tmp_path / "avg.safetensors").exists()
