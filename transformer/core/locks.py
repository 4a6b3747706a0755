"""One writer at a time: OS file locks (flock) on a run folder and on a prepared corpus.

A flock belongs to the open file, so it ends with the process however the process ends (SIGKILL
included): a lock file left on disk never blocks anyone by merely existing.
"""

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from transformer.core.errors import UserError

RUN_LOCK = "train.lock"
_held: dict[Path, object] = {}  # run folder -> its open lock file, kept for the life of the process


def _holder() -> str:
    """Who holds a lock, as written into the lock file: pid, host and start time."""
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    return f"pid {os.getpid()} on {socket.gethostname()}, started {started}"


def _group_leader() -> bool:
    """True unless this is a torchrun worker other than rank 0 (rank 0 locks for its whole group)."""
    return int(os.environ.get("RANK", "0")) == 0


def lock_run_dir(run_dir: Path, job: str = "training", elsewhere: str = "hydra.run.dir=PATH") -> None:
    """Hold `run_dir/train.lock` until the process ends; refuse when another live `job` holds it (`elsewhere`:
    the setting that picks another folder)."""
    if not _group_leader():
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    path = (run_dir / RUN_LOCK).resolve()
    if path in _held:
        return
    f = open(path, "a+")  # noqa: SIM115 - kept open on purpose: the lock lives as long as the file is open
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        other = f.read().strip() or "another process"
        f.close()
        raise UserError(
            f"run folder {run_dir} is in use by another {job} ({other}); wait for it to end, stop it, "
            f"or give this run another folder ({elsewhere})"
        ) from None
    f.seek(0)
    f.truncate()
    f.write(_holder() + "\n")
    f.flush()
    _held[path] = f


@contextlib.contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created if missing) for the block, waiting for any other holder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
