"""Writing files so that a crash, a kill or a full disk never leaves a half-written one: the one atomic-write helper."""

import contextlib
import errno
import fcntl
import glob
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from transformer.core.errors import UserError


def _free_space(directory: Path) -> str:
    try:
        return f"{shutil.disk_usage(directory).free / 2**20:.0f} MiB free"
    except OSError:
        return "free space unknown"


class DiskFull(UserError):
    """A write ran out of space (or quota): the same command can go on once space is freed."""


def _disk_full(path: Path) -> UserError:
    """The user error for a write that ran out of space (or quota), naming the file and the free space."""
    return DiskFull(
        f"no space left to write {path} ({_free_space(path.parent)} in {path.parent}); "
        "free some space (or choose another folder) and run again"
    )


def _fsync(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


@contextlib.contextmanager
def disk_errors(path: Path) -> Iterator[None]:
    """Turn a full disk (ENOSPC, EDQUOT) or a refused permission while writing `path` into a user error."""
    try:
        yield
    except PermissionError as err:
        raise UserError(f"cannot write {path}: permission denied ({err.strerror}); choose another folder") from err
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _disk_full(path) from err
        raise


def remove_abandoned(path: Path) -> None:
    """Delete the temporary folders beside `path` that no live writer locks: those of killed processes."""
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        try:
            fd = os.open(tmp, os.O_RDONLY)
        except OSError:
            continue  # finished and removed meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(tmp, ignore_errors=True)
        except BlockingIOError:
            pass  # its writer is alive
        finally:
            os.close(fd)


def _locked_folder(path: Path) -> tuple[Path, int]:
    """A new temporary folder beside `path`, and the open descriptor whose lock marks it as this process'."""
    while True:
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(tmp, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX)
            if tmp.exists():
                return tmp, fd
            os.close(fd)
        # another writer of `path` removed it as abandoned in the moment before it was locked: make another


@contextlib.contextmanager
def folder_beside(path: Path) -> Iterator[Path]:
    """A new folder `.NAME.XXXXXXXX.tmp` beside `path` to build `path` in, locked while this process works in it and
    removed afterwards; whatever killed processes left in such folders beside `path` is removed first."""
    with disk_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_abandoned(path)
        tmp, fd = _locked_folder(path)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        os.close(fd)


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Call `write(tmp)` on a file in a temporary folder beside `path` (`folder_beside`), fsync it, then rename it
    over `path`.

    `path` is either the complete new file or untouched; the temporary folder never outlives a failure, and one
    that a killed process left is removed by the next write of `path`.
    """
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path} is a folder; give a file name to write to")
    with folder_beside(path) as folder, disk_errors(path):
        tmp = folder / path.name
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # writers that make their own temporary file (safetensors) make it private
        _fsync(tmp)
        os.replace(tmp, path)


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def atomic_copy(source: Path, path: Path) -> None:
    """Copy `source` to `path` atomically."""
    atomic_write(path, lambda tmp: shutil.copyfile(source, tmp))


def atomic_rename_dir(tmp: Path, path: Path) -> None:
    """Move the finished folder `tmp` to `path` (one rename; `path` must not exist)."""
    with disk_errors(path):
        os.rename(tmp, path)
