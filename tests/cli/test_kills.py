"""Killed at random moments: each command, SIGKILLed KILLS times (tests/cli/kills.py), leaves a complete result or
none, never a partial file under a final name, and changes nothing outside its target; training resumes to
exactly the weights of an uninterrupted run."""

import os
import random
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from safetensors.torch import load_file

from tests.cli.kills import Outcome, kill_chain, warm_starts
from tests.conftest import WORDS_EN, WORDS_FR, files_data, paused_process, write_corpus
from transformer.core.files import atomic_write, atomic_write_text
from transformer.data.preparation import PreparedData
from transformer.runs.checkpoint import load_checkpoint

MAX_STEPS = 6
TRAIN = [
    "model=tiny",
    "trainer.batch_tokens=256",
    "trainer.progress=false",
    "trainer.val_every=1",
    "trainer.val_max_sentences=2",
    f"trainer.max_steps={MAX_STEPS}",
    "trainer.keep_last=2",
    "trainer.keep_best=1",
    "trainer.num_threads=1",
    "trainer.attention_images=0",
    "optim.warmup_steps=2",
]


def data_args(root: Path) -> list[str]:
    """A toy corpus written below `root/inputs`, prepared into `root/prepared`."""
    inputs = root / "inputs"
    inputs.mkdir(parents=True, exist_ok=True)
    train, val = write_corpus(inputs, "train", 300, 1, True), write_corpus(inputs, "val", 20, 2)
    return files_data(train, val, root / "prepared")


def split_names(folder: Path) -> tuple[list[Path], list[Path]]:
    """The entries of `folder` under final names, and its hidden or temporary ones."""
    entries = sorted(folder.iterdir()) if folder.exists() else []
    temporary = [p for p in entries if p.name.startswith(".") or ".tmp" in p.name]
    return [p for p in entries if p not in temporary], temporary


def tensors(folder: Path) -> dict[str, dict]:
    """Every checkpoint of a run's checkpoints folder, by name: all its tensors (weights and training state)."""
    return {p.name: load_file(str(p)) for p in split_names(folder / "checkpoints")[0]}


def contents(path: Path) -> dict[str, bytes]:
    """A file's bytes, or every file's below a folder, by relative path."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


class Training:
    """transformer-train, resumed (`trainer.resume=true`) after each kill that left a `last` checkpoint."""

    name = "transformer-train"

    def __init__(self, args: list[str], run: Path, reference: dict[str, dict]):
        self.args, self.run, self.reference, self.step = args, run, reference, 0

    def argv(self) -> list[str]:
        resume = ["trainer.resume=true"] if (self.run / "checkpoints" / "last.safetensors").exists() else []
        return [self.name, *self.args, f"hydra.run.dir={self.run}", *resume]

    def after_kill(self) -> str:
        final, temporary = split_names(self.run / "checkpoints")
        steps = {p.name: int(load_checkpoint(str(p)).meta["step"]) for p in final}  # every one loads
        if "last.safetensors" in steps:
            assert steps["last.safetensors"] >= self.step, "a kill took the resumable checkpoint back"
            self.step = steps["last.safetensors"]
        where = f"last at step {self.step}" if "last.safetensors" in steps else "no last checkpoint"
        left = f"{where}, {len(final)} checkpoint(s), {len(temporary)} temporary file(s)"
        if self.step == MAX_STEPS:  # killed while finishing: the run is complete
            return f"{left}; {self._finished()}"
        return left

    def after_completion(self, outcome: Outcome) -> str:
        _, temporary = split_names(self.run / "checkpoints")
        assert not temporary, f"left behind: {temporary}"
        return self._finished()

    def _finished(self) -> str:
        """Compare the run's checkpoints with the uninterrupted run's, then remove it: the next attempt starts anew."""
        done = tensors(self.run)
        assert done.keys() == self.reference.keys()
        for name, expected in self.reference.items():
            assert done[name].keys() == expected.keys(), name
            for key, tensor in expected.items():
                assert done[name][key].equal(tensor), f"{name}: {key} differs from the uninterrupted run"
        shutil.rmtree(self.run)
        self.step = 0
        return f"exactly the uninterrupted run's {len(done)} checkpoints; a new run follows"


class Preparing:
    """transformer-prepare: after a kill the cache folder is complete, or absent with at most one hidden partial
    folder that kept every shard finished before the kill; the next run goes on from it."""

    name = "transformer-prepare"

    def __init__(self, args: list[str], prepared: Path, reference: dict[str, bytes]):
        self.args, self.prepared, self.reference = args, prepared, reference
        self.finished = 0  # shards the partial folder held after the last kill

    def argv(self) -> list[str]:
        return [self.name, *self.args]

    def _check(self) -> tuple[bool, list[Path]]:
        """Whether a complete folder is there (then removed, so that the next run prepares again); partial ones."""
        final, temporary = split_names(self.prepared)
        assert len(final) <= 1, final
        if final:
            PreparedData(final[0]).split("train")  # loads
            assert contents(final[0]) == self.reference, "a prepared folder differs from an uninterrupted prepare"
            shutil.rmtree(final[0])
        partial = [p for p in temporary if p.is_dir()]
        assert len(partial) <= 1 and all(p.name.endswith(".partial") for p in partial), partial
        return bool(final), partial

    def after_kill(self) -> str:
        complete, partial = self._check()
        shards = len([p for p in partial[0].rglob("*") if p.name[:6] in ("screen", "shard-")]) if partial else 0
        assert complete or shards >= self.finished, f"{self.finished} finished shards before the kill, {shards} after"
        self.finished = 0 if complete else shards
        return f"{'a complete prepared folder' if complete else 'no prepared folder'}, {shards} finished shard(s)"

    def after_completion(self, outcome: Outcome) -> str:
        complete, partial = self._check()
        assert complete and not partial and "reusing prepared data" not in outcome.log.read_text()
        resumed = "continuing the preparation" in outcome.log.read_text()
        self.finished = 0
        return "complete, " + ("after what the kills left" if resumed else "from the start")


class Writing:
    """A command that writes one file or folder (transformer-export, transformer-average): whole or absent."""

    def __init__(self, name: str, args: list[str], output: Path, reference: dict[str, bytes]):
        self.name, self.args, self.output, self.reference = name, args, output, reference

    def argv(self) -> list[str]:
        return [self.name, *self.args, f"output={self.output}"]

    def _check(self) -> tuple[bool, int]:
        final, temporary = split_names(self.output.parent)
        assert [p.name for p in final] in ([], [self.output.name]), final
        if final:
            assert contents(self.output) == self.reference, f"{self.output} differs from an uninterrupted run's"
            if self.output.is_dir():
                shutil.rmtree(self.output)
            else:
                self.output.unlink()
        return bool(final), len(temporary)

    def after_kill(self) -> str:
        whole, temporary = self._check()
        return f"{'a complete output (removed)' if whole else 'no output'}, {temporary} temporary entr(ies)"

    def after_completion(self, outcome: Outcome) -> str:
        whole, temporary = self._check()
        assert whole and not temporary, f"{temporary} temporary entries left beside {self.output}"
        return "the uninterrupted run's output; removed"


class Resuming:
    """transformer-translate (or -score) output=FILE: after a kill, FILE is whole or absent and every finished chunk
    beside it is a whole chunk of the uninterrupted run's output; a rerun continues after them and ends with that
    output."""

    def __init__(self, name: str, args: list[str], output: Path, reference: bytes, chunk_lines: int):
        self.name, self.args, self.output, self.chunk_lines = name, args, output, chunk_lines
        self.reference = reference.decode().splitlines(keepends=True)

    def argv(self) -> list[str]:
        return [self.name, *self.args, f"output={self.output}"]

    def _check(self) -> tuple[bool, int]:
        """Whether FILE is there (then removed, so that the next run writes it again); how many chunks wait."""
        final, _ = split_names(self.output.parent)
        assert [p.name for p in final] in ([], [self.output.name]), final
        if final:
            assert self.output.read_text() == "".join(self.reference), f"{self.output} differs"
            self.output.unlink()
        chunks = sorted((self.output.parent / f".{self.output.name}.chunks").glob("*.txt"))
        for path in chunks:
            k = int(path.stem)
            expected = self.reference[k * self.chunk_lines : (k + 1) * self.chunk_lines]
            assert path.read_text() == "".join(expected), f"{path} is not a whole chunk of the output"
        return bool(final), len(chunks)

    def after_kill(self) -> str:
        whole, chunks = self._check()
        return f"{'a complete output (removed), ' if whole else ''}{chunks} finished chunk(s)"

    def after_completion(self, outcome: Outcome) -> str:
        whole, chunks = self._check()
        _, temporary = split_names(self.output.parent)
        assert whole and not chunks and not temporary, f"left beside {self.output}: {temporary}"
        resumed = re.search(r"resuming at line (\d+)", outcome.log.read_text())
        return f"the uninterrupted run's output ({'resumed at line ' + resumed[1] if resumed else 'from the start'})"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A run folder with three step checkpoints, best and last (trained in this process)."""
    from tests.training.test_training import train

    root = tmp_path_factory.mktemp("trained")
    train([*data_args(root), *TRAIN, "trainer.max_steps=3", "trainer.keep_last=3"], root / "run")
    return root / "run"


def reference_run(starts, argv: list[str]) -> Outcome:
    outcome = starts.run(argv)
    assert outcome.code == 0, outcome.tail()
    return outcome


@pytest.mark.slow
def test_training_killed_at_random_moments_resumes_to_the_uninterrupted_weights(tmp_path):
    args = [*data_args(tmp_path), *TRAIN]
    with warm_starts(["transformer.cli.train", "transformer.training"], tmp_path, tmp_path / "logs") as starts:
        straight = reference_run(starts, ["transformer-train", *args, f"hydra.run.dir={tmp_path / 'reference'}"])
        target = Training(args, tmp_path / "run", tensors(tmp_path / "reference"))
        kill_chain(target, starts, straight.seconds, tmp_path, [tmp_path / "run", tmp_path / "logs"])


@pytest.mark.slow
def test_prepare_killed_at_random_moments_leaves_a_complete_cache_or_goes_on_from_its_shards(tmp_path):
    args = [*data_args(tmp_path), "data.shard_pairs=60"]  # 5 shards of the 300 training pairs
    modules = ["transformer.cli.prepare", "transformer.data.preparation"]
    with warm_starts(modules, tmp_path, tmp_path / "logs") as starts:
        first = reference_run(starts, ["transformer-prepare", *args])
        (folder,), _ = split_names(tmp_path / "prepared")
        target = Preparing(args, tmp_path / "prepared", contents(folder))
        shutil.rmtree(folder)
        kill_chain(target, starts, first.seconds, tmp_path, [tmp_path / "prepared", tmp_path / "logs"])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "modules", "output"),
    [
        ("transformer-export", ["transformer.cli.export", "transformer.export.ctranslate2"], "ct2"),
        ("transformer-average", ["transformer.cli.average", "transformer.runs.averaging"], "avg.safetensors"),
    ],
    ids=["export", "average"],
)
def test_export_and_average_killed_at_random_moments_write_all_or_nothing(trained, tmp_path, command, modules, output):
    if command == "transformer-export":
        pytest.importorskip("ctranslate2", reason="transformer-export needs the export extra")
    run = tmp_path / "inputs" / "run"
    shutil.copytree(trained, run)
    args = [f"checkpoint={run}"] if command == "transformer-export" else [f"checkpoints=[{run}]", "last=2"]
    out = tmp_path / "out"
    out.mkdir()
    with warm_starts(modules, tmp_path, tmp_path / "logs") as starts:
        first = reference_run(starts, [command, *args, f"output={out / output}"])
        target = Writing(command, args, out / output, contents(out / output))
        target.after_completion(first)
        kill_chain(target, starts, first.seconds, tmp_path, [out, tmp_path / "logs"])


@pytest.mark.slow
@pytest.mark.parametrize("command", ["translate", "score"])
def test_translate_or_score_into_a_file_killed_at_random_moments_resumes_to_the_uninterrupted_output(tmp_path, command):
    from tests.serve.serving import write_checkpoint

    inputs, out = tmp_path / "inputs", tmp_path / "out"
    out.mkdir()
    checkpoint = write_checkpoint(inputs / "tiny.safetensors")
    rng = random.Random(3)
    count = 144 if command == "translate" else 600  # scoring is fast: more pairs, so that kills land mid-way
    for side, words in (("fr", WORDS_FR), ("en", WORDS_EN)):
        lines = [" ".join(rng.choices(words, k=rng.randint(1, 9))) for _ in range(count)]
        (inputs / f"in.{side}").write_text("".join(line + "\n" for line in lines))
    args = [f"checkpoint={checkpoint}", "decoding=greedy", "decoding.precision=fp32", "chunk_lines=8", "device=cpu"]
    if command == "translate":
        args.append(f"input={inputs / 'in.fr'}")
    else:
        args += [f"source.src={inputs / 'in.fr'}", f"source.tgt={inputs / 'in.en'}", "tokens=true", "alignments=true"]
    modules = [f"transformer.cli.{command}", "transformer.runs.loading"]
    name = f"transformer-{command}"
    with warm_starts(modules, tmp_path, tmp_path / "logs") as starts:
        first = reference_run(starts, [name, *args, f"output={out / 'out.en'}"])
        target = Resuming(name, args, out / "out.en", (out / "out.en").read_bytes(), 8)
        target.after_completion(first)
        lines = kill_chain(target, starts, first.seconds, tmp_path, [out, tmp_path / "logs"])
    assert any("resumed at line" in line for line in lines), "no run continued after the chunks of a killed one"


WRITER = (
    "import sys, time; from pathlib import Path; from transformer.core.files import atomic_write; "
    "atomic_write(Path(sys.argv[1]), lambda tmp: (tmp.write_text('half'), print('writing', flush=True), "
    "time.sleep(600)))"
)


def writer(path: Path) -> subprocess.Popen:
    """Another process in the middle of writing `path` (atomic_write), until it is killed."""
    return paused_process(WRITER, path, "writing")


def killed(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait()


def test_a_write_removes_what_killed_writers_left_beside_its_file_but_not_a_live_writers(tmp_path):
    path = tmp_path / "last.safetensors"
    dead, alive = writer(path), writer(path)
    killed(dead)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == 2 and all(name.startswith(".last.safetensors.") for name in left)  # two temporary folders
    atomic_write_text(path, "whole")
    (live,) = [p for p in tmp_path.iterdir() if p != path]  # the dead writer's folder went, the live one's stayed
    assert (live / path.name).read_text() == "half" and path.read_text() == "whole"
    killed(alive)
    atomic_write(tmp_path / "other.txt", lambda tmp: tmp.write_text("x"))  # writes of other files leave it alone
    assert live.exists()
    atomic_write_text(path, "again")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.safetensors", "other.txt"]


def test_written_checkpoints_are_as_readable_as_the_umask_allows(tmp_path):
    from tests.serve.serving import write_checkpoint

    umask = os.umask(0o022)
    try:
        checkpoint = write_checkpoint(tmp_path / "tiny.safetensors")  # safetensors writes a private (0600) file
        atomic_write_text(tmp_path / "note.txt", "x")
    finally:
        os.umask(umask)
    assert [p.stat().st_mode & 0o777 for p in (checkpoint, tmp_path / "note.txt")] == [0o644, 0o644]
