"""Writing files so that a crash or a full disk never leaves a half-written one: the one atomic-write helper."""

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from transformer.errors import UserError


def _free_space(directory: Path) -> str:
    try:
        return f"{shutil.disk_usage(directory).free / 2**20:.0f} MiB free"
    except OSError:
        return "free space unknown"


def _disk_full(path: Path) -> UserError:
    """The user error for a write that ran out of space (or quota), naming the file and the free space."""
    return UserError(
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


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Call `write(tmp)` on a temporary file beside `path`, fsync it, then rename it over `path`.

    `path` is either the complete new file or untouched; the temporary file never outlives a failure.
    """
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path} is a folder; give a file name to write to")
    with disk_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp" + path.suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        with disk_errors(path):
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would make every written file private
            write(tmp)
            _fsync(tmp)
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


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
