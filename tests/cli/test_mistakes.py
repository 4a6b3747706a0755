"""A careless user's mistakes through the real console scripts: each ends with one `error:` line, exit status 2,
no traceback and nothing half-written. A new mistake is one line in MISTAKES.

Each mistake is a real process running the command's `main()` with its argv, forked from a warm parent per command
(`tests.cli.kills.warm_starts`) that imported the library once, so that the imports (torch's seconds) are paid
once per command, not once per mistake. tests/cli/test_entry_points.py runs every console script by its name."""

import contextlib
import functools
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from tests.cli.kills import WarmStarts, warm_starts

NO_GPU = not torch.cuda.is_available()
# what the commands load after their settings are checked, imported once by each warm parent
LIBRARY = ["transformer.runs.loading", "transformer.runs.results_table", "transformer.training.trainer"]

# (command, arguments, a piece of the expected message). In the arguments: {data} = a working data=files setup,
# {tiny} = a tiny 2-step training, {ckpt} = a run folder with a checkpoint, {dir} = an empty folder, {run} = a
# fresh run folder, {tmp} = the scratch folder with the corpus files (train/val/test .fr/.en, fake.fr.gz ...).
MISTAKES = [
    ("translate", "'sentences=[un chien]'", "missing required setting checkpoint"),
    ("evaluate", "split=toy", "missing required setting checkpoint"),
    ("prepare", "data=files", "data.train names no corpus: give data.train.src and data.train.tgt"),
    ("train", "{data} {tiny} trainer.max_steps=abc hydra.run.dir={run}", "could not be converted to Integer"),
    ("train", "{data} {tiny} trainer.max_stepz=3 hydra.run.dir={run}", "did you mean trainer.max_steps"),
    ("prepare", "data=nonexistent", "Could not find 'data/nonexistent' Available options in 'data': files"),
    ("translate", "{ckpt} 'sentences=[Bonjour !,Un homme lit.]'", "cannot parse 'sentences=[Bonjour !,Un homme"),
    ("train", "{data} {tiny} decoding=sample decoding.temperature=0 hydra.run.dir={run}", "decoding.temperature=0"),
    ("translate", "{ckpt} decoding=sample decoding.top_p=1.5 'sentences=[un]'", "decoding.top_p=1.5"),
    ("translate", "{ckpt} decoding=sample decoding.top_k=-1 'sentences=[un]'", "decoding.top_k=-1"),
    ("translate", "{ckpt} decoding=greedy decoding.n_best=2 'sentences=[un]'", "needs decoding=beam"),
    ("translate", "{ckpt} decoding.min_len=-1 'sentences=[un]'", "decoding.min_len=-1"),
    ("translate", "{ckpt} decoding=sample decoding.alternatives=2 'sentences=[un]'", "does not take alternatives"),
    ("translate", "{ckpt} decoding=beam decoding.alternatives=2 decoding.n_best=2 'sentences=[un]'", "n_best at 1"),
    ("translate", "{ckpt} prefix=true split_sentences=true 'sentences=[un]'", "a prefix or constraints belong"),
    ("translate", "{ckpt} decoding=greedy constraints=true 'sentences=[un]'", "does not take constraints"),
    ("translate", "{ckpt} decoding=beam decoding.glossary={tmp}/test.fr 'sentences=[un]'", "test.fr:1: a glossary"),
    ("translate", "{ckpt} prefix_file={tmp}/nope.txt 'sentences=[un]'", "nope.txt is not a file"),
    ("train", "{data} {tiny} model.dropout=-0.1 hydra.run.dir={run}", "model.dropout=-0.1"),
    ("train", "{data} {tiny} model.d_model=33 model.n_heads=3 hydra.run.dir={run}", "even"),
    ("train", "{data} {tiny} optim.lr=0 hydra.run.dir={run}", "optim.lr=0.0"),
    ("train", "{data} {tiny} 'optim.betas=[0.9,1.5]' hydra.run.dir={run}", "optim.betas[1]=1.5"),
    ("train", "{data} {tiny} optim.label_smoothing=1 hydra.run.dir={run}", "optim.label_smoothing=1.0"),
    ("train", "{data} {tiny} data.max_len=2000 hydra.run.dir={run}", "must exceed data.max_len+1"),
    ("train", "{data} {tiny} trainer.precision=fp8 hydra.run.dir={run}", "trainer.precision='fp8'"),
    ("train", "{data} {tiny} trainer.resume=true hydra.run.dir={run}", "nothing to resume"),
    ("translate", "{ckpt} input={dir}", "is a folder"),
    ("translate", "{ckpt} input={tmp}/nope.txt", "missing corpus file"),
    ("translate", "checkpoint={dir} 'sentences=[un]'", "no checkpoint in"),
    ("translate", "checkpoint={tmp}/val.en 'sentences=[un]'", "is not a readable checkpoint"),
    ("translate", "{ckpt} plot_attention={tmp}/val.en 'sentences=[un]'", "is a file"),
    ("evaluate", "{ckpt} split=nope", "has no split 'nope'"),
    ("evaluate", "{ckpt} split=toy output={dir}", "is a folder"),
    ("evaluate", "{ckpt} src_file={tmp}/test.fr", "give both src_file=PATH and ref_file=PATH"),
    ("prepare", "{data} data.train.src={dir}", "is a folder"),
    ("prepare", "{data} data.train.src={tmp}/fake.fr.gz data.train.tgt={tmp}/fake.en.gz", "not a valid gzip file"),
    ("prepare", "{data} data.tokenizer.vocab_size=8", "raise data.tokenizer.vocab_size"),
    ("prepare", "data=tatoeba data.shared_dir={dir} data.dir={tmp}/tatoeba", "has no download source"),
    ("train", "{data_damaged} {tiny} hydra.run.dir={run}", "rm -r"),
    ("train", "{data} {tiny} trainer.init_from={tmp}/run trainer.resume=true hydra.run.dir={run}", "each other"),
    ("train", "{data} {tiny} trainer.init_from={tmp}/run model.n_heads=2 hydra.run.dir={run}", "model.n_heads=2 (the"),
    ("train", "{data} {tiny} trainer.init_from={tmp}/run data.tag=bt hydra.run.dir={run}", "lacks the tag <bt>"),
    ("train", "{data} {tiny} trainer.init_from={dir} hydra.run.dir={run}", "no checkpoint in"),
    ("translate", "{ckpt} decoding.tag=bt 'sentences=[un]'", "tag 'bt' is not in this model's vocabulary"),
    ("prepare", "{data} data.weight=0", "data.weight=0.0 must be a number greater than 0"),
    ("prepare", "{data} data.tag=s", "data.tag='s' is not a tag name"),
    ("prepare", "{data} +data.extra_train.more.src={tmp}/val.fr", "needs both data.extra_train.more.src and"),
    ("prepare", "{data} +data.extra_train.more.wieght=2", "data.extra_train.more.wieght is no setting"),
    ("prepare", "{data} data.train.format=csv", "data.train.format='csv' is not one of text, tsv, tmx, datasets"),
    ("prepare", "{data} +data.test.memory.path={tmp}/nope.tmx", "missing corpus file"),
    ("prepare", "{data} +data.test.memory.path={tmp}/val.fr +data.test.memory.format=tmx", "not well-formed XML"),
    ("average", "last=2", "missing required setting checkpoints"),
    ("average", "checkpoints=[{dir}] last=2", "no step checkpoints in"),
    ("average", "checkpoints=[{tmp}/run] last=2", "no step checkpoints in"),
    ("average", "checkpoints=[{tmp}/nope.safetensors]", "does not exist"),
    ("average", "checkpoints=[{tmp}/val.en] output={run}.safetensors", "is not a readable checkpoint"),
    ("average", "checkpoints=[{tmp}/run/checkpoints/best.safetensors] last=1 best=1", "give last=N or best=N"),
    ("average", "checkpoints=[{tmp}/run/checkpoints/best.safetensors]", "give output=FILE"),
    ("average", "checkpoints=[{tmp}/run/checkpoints/best.safetensors] output={dir}", "is a folder"),
    ("results", "output=r.md", "missing required setting checkpoints"),
    ("results", "checkpoints=[{tmp}/run] decodings=[nope]", "names no preset"),
    ("results", "checkpoints=[{tmp}/run] output={dir}", "is a folder"),
    ("results", "checkpoints=[{dir}]", "no checkpoint in"),
    ("results", "checkpoints=[{tmp}/run] tests=chosen", "tests=chosen needs val=true"),
    ("results", "checkpoints=[{tmp}/run] tests=some val=true", "tests='some' is not one of all, chosen"),
]
if NO_GPU:
    MISTAKES += [
        ("train", "{data} {tiny} trainer.device=cuda hydra.run.dir={run}", "no CUDA GPU is available here"),
        ("translate", "{ckpt} device=cuda 'sentences=[un]'", "no CUDA GPU is available here"),
        ("evaluate", "{ckpt} device=cuda split=toy", "no CUDA GPU is available here"),
    ]


def _snapshot(root: Path) -> dict[str, int]:
    """Every file below `root` with its size; lock files (left on purpose, empty) aside."""
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file() and p.suffix != ".lock"}


@pytest.fixture(scope="module")
def commands(tmp_path_factory) -> Iterator[Callable[[str], WarmStarts]]:
    """The warm parent of a command (`train`, `translate`, ...), started at its first mistake."""
    home = tmp_path_factory.mktemp("warm")
    with contextlib.ExitStack() as stack:

        @functools.cache
        def parent(tool: str) -> WarmStarts:
            modules = [f"transformer.cli.{tool}", *LIBRARY]
            return stack.enter_context(warm_starts(modules, home / tool, home / tool / "logs"))

        yield parent


@pytest.mark.slow
@pytest.mark.parametrize("tool, args, message", MISTAKES, ids=[f"{t}: {a}" for t, a, _ in MISTAKES])
def test_a_mistake_ends_with_one_error_line_and_status_2(cli_setup, commands, tool, args, message, tmp_path):
    tmp = Path(cli_setup["tmp"])
    before = _snapshot(tmp)
    argv = shlex.split(args.format(**cli_setup, run=tmp_path / "run"))
    outcome = commands(tool).run([f"transformer-{tool}", *argv], kill_after=300, cwd=tmp_path)
    output = outcome.log.read_text(errors="replace")  # stdout and stderr
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert outcome.code == 2, outcome.tail()
    assert "Traceback" not in output, outcome.tail()
    assert len(errors) == 1 and message in errors[0], outcome.tail()
    assert _snapshot(tmp) == before  # nothing written beside the inputs: no temp files, no half-prepared data
    if "invalid settings" in errors[0] or "Error merging override" in errors[0]:
        assert not (tmp_path / "run").exists()  # refused before Hydra made the run folder
    assert not list(tmp_path.rglob("*.safetensors"))
