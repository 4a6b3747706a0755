"""A harness that SIGKILLs real command processes at seeded random moments (used by tests/cli/test_kills.py).

Every attempt is a real process running a console script's `main()` with its own argv, forked from a warm
parent that imported the command's modules once: an attempt starts in milliseconds instead of the seconds
that importing torch, datasets and Hydra takes (imports write nothing). A kill is a SIGKILL of that process.

    KILLS=100 KILLS_SEED=7 pytest -m slow tests/cli/test_kills.py     # more kills, other moments

`python -m tests.cli.kills MODULE...` is the warm parent itself.
"""

import contextlib
import importlib
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tests import ROOT

KILLS = int(os.environ.get("KILLS", "20"))  # kills per command
SEED = int(os.environ.get("KILLS_SEED", "1"))
# where commands may write besides their targets: pointed into the test's folder, so a write there is seen
REDIRECTED = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "HF_HOME", "HF_DATASETS_CACHE", "MPLCONFIGDIR", "TORCH_HOME")


def serve_forks(modules: list[str]) -> None:
    """The warm parent: import `modules`; then for each stdin line `[argv, log, cwd]` fork a child that runs the first
    module's `main()` with `argv` in `cwd` (stdout and stderr to `log`), print the child's pid, wait, print its
    status."""
    for name in modules:
        importlib.import_module(name)
    main = importlib.import_module(modules[0]).main
    print("ready", flush=True)
    for line in sys.stdin:
        argv, log, cwd = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(main, argv, log, cwd)  # never returns: the child exits as any process does, atexit included
        print(pid, flush=True)
        print(os.waitpid(pid, 0)[1], flush=True)


def _child(main, argv: list[str], log: str, cwd: str | None) -> None:
    if cwd is not None:
        os.chdir(cwd)
    out, devnull = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    sys.argv = argv
    main()
    sys.exit(0)


@dataclass
class Outcome:
    """How one attempt ended."""

    killed: bool
    code: int  # exit status; -9 when killed
    seconds: float
    log: Path

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


class WarmStarts:
    """Runs one command's processes, each forked from a warm parent (`serve_forks`) in `cwd` with `env`."""

    def __init__(self, modules: list[str], cwd: Path, env: dict[str, str], logs: Path):
        self.logs, self.count = logs, 0
        logs.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "tests.cli.kills", *modules]
        self.parent = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
        )
        assert self._line() == "ready", "the warm parent did not start"

    def _line(self) -> str:
        line = self.parent.stdout.readline()  # unbuffered: reads no further than this line
        assert line, f"the warm parent ended (status {self.parent.wait()})"
        return line.decode().strip()

    def run(self, argv: list[str], kill_after: float | None = None, cwd: Path | None = None) -> Outcome:
        """Run `argv[0]`'s main with `argv` (in `cwd`, default the parent's); SIGKILL it `kill_after` seconds after
        its start unless it ended first."""
        self.count += 1
        log = self.logs / f"{self.count:03d}.log"
        self.parent.stdin.write(json.dumps([argv, str(log), cwd and str(cwd)]).encode() + b"\n")
        pid, start = int(self._line()), time.monotonic()
        if kill_after is not None and not select.select([self.parent.stdout], [], [], kill_after)[0]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        code = os.waitstatus_to_exitcode(int(self._line()))
        return Outcome(code == -signal.SIGKILL, code, time.monotonic() - start, log)

    def close(self) -> None:
        self.parent.stdin.close()
        self.parent.wait(timeout=60)


@contextlib.contextmanager
def warm_starts(modules: list[str], home: Path, logs: Path) -> Iterator[WarmStarts]:
    """`WarmStarts` in `home/cwd`, with HOME, TMPDIR and the caches pointed below `home`."""
    for name in ("cwd", "tmp", "home"):
        (home / name).mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in REDIRECTED}
    path = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(HOME=str(home / "home"), TMPDIR=str(home / "tmp"), PYTHONPATH=path)
    starts = WarmStarts(modules, home / "cwd", env, logs)
    try:
        yield starts
    finally:
        starts.close()


def snapshot(root: Path, skip: list[Path]) -> dict[str, tuple[int, int]]:
    """Size and modification time of every file and folder below `root`, except `skip` and what is below them."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if Path(dirpath, d) not in skip]
        for name in [*dirnames, *filenames]:
            path = Path(dirpath, name)
            if path not in skip:
                stat = path.lstat()
                out[str(path.relative_to(root))] = (stat.st_size if path.is_file() else 0, stat.st_mtime_ns)
    return out


class Target(Protocol):
    """What a kill chain needs to know of one command."""

    name: str

    def argv(self) -> list[str]:
        """The next attempt's command line (it may depend on what the killed ones left)."""

    def after_kill(self) -> str:
        """Check what a killed attempt left (assert); say what it was."""

    def after_completion(self, outcome: Outcome) -> str:
        """Check a completed attempt's result against the uninterrupted run's (assert), then start anew."""


def kill_chain(target: Target, starts: WarmStarts, seconds: float, watched: Path, skip: list[Path]) -> list[str]:
    """Attempts of `target` until KILLS of them were killed, each at a moment drawn uniformly from `seconds` (an
    uninterrupted run's length) with seed KILLS_SEED, then one that runs to its end; nothing below `watched` other
    than `skip` may change meanwhile (what libraries make once, on the first run, was made by the uninterrupted run
    before: matplotlib's font list in HOME, torch's folder in TMPDIR). Prints and returns one line per attempt."""
    rng, before = random.Random(f"{SEED}-{target.name}"), snapshot(watched, skip)
    lines, killed = [], 0
    print(f"{target.name}: {KILLS} kills, seed {SEED}, moments within {seconds:.2f} s of each start", flush=True)
    while killed < KILLS:
        assert len(lines) < 4 * KILLS + 10, "too few attempts were killed: the moments are later than the runs"
        moment = rng.uniform(0, seconds)
        outcome = starts.run(target.argv(), kill_after=moment)
        if outcome.killed:
            killed += 1
            lines.append(f"{target.name} kill {killed} at {moment:.3f} s: {target.after_kill()}")
        else:
            assert outcome.code == 0, f"{target.name} failed (status {outcome.code}):\n{outcome.tail()}"
            lines.append(f"{target.name} completed in {outcome.seconds:.2f} s: {target.after_completion(outcome)}")
        print(lines[-1], flush=True)
        changed = sorted(set(snapshot(watched, skip).items()) ^ set(before.items()))
        assert not changed, f"outside its targets, {target.name} changed {changed}"
    final = starts.run(target.argv())  # then one to its end, after whatever the last kill left
    assert final.code == 0, f"{target.name} failed (status {final.code}):\n{final.tail()}"
    lines.append(f"{target.name} last run, not killed: {target.after_completion(final)}")
    print(lines[-1], flush=True)
    return lines


if __name__ == "__main__":
    serve_forks(sys.argv[1:])
