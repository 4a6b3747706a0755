"""Reading corpus files: compressed ones by their suffix (`OPENERS`), lines decoded as UTF-8 with the file and
line named when one is not."""

import bz2
import gzip
import io
import lzma
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from transformer.errors import UserError


class _ZstdFile(io.RawIOBase):
    """A .zst file's decompressed bytes, frame after frame; a file cut short inside a frame is an EOFError, as gzip,
    xz and bzip2 say it (zstandard's own readers end silently there)."""

    def __init__(self, path: Path):
        import zstandard  # only where a .zst file is read

        self._file, self._errors = open(path, "rb"), zstandard.ZstdError
        self._new_frame = zstandard.ZstdDecompressor().decompressobj
        self._frame, self._in_frame, self._out, self._at = self._new_frame(), False, b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self._at == len(self._out):
            data = self._file.read(1 << 16)
            if not data:
                if self._in_frame:
                    raise EOFError("Compressed file ended before the end of its last zstd frame")
                return 0
            self._out, self._at = self._decompress(data), 0
        n = min(len(buffer), len(self._out) - self._at)
        buffer[:n] = self._out[self._at : self._at + n]
        self._at += n
        return n

    def _decompress(self, data: bytes) -> bytes:
        out = []
        try:
            while data:
                self._in_frame = True
                out.append(self._frame.decompress(data))
                if not self._frame.eof:
                    break
                data, self._frame, self._in_frame = self._frame.unused_data, self._new_frame(), False
        except self._errors as err:
            raise OSError(f"zstd: {err}") from None
        return b"".join(out)

    def close(self) -> None:
        self._file.close()
        super().close()


# Compressed files by their suffix: the tool's name (for messages) and how to open the file for reading bytes.
OPENERS: dict[str, tuple[str, Callable[[Path], IO[bytes]]]] = {
    ".gz": ("gzip", lambda path: gzip.open(path, "rb")),
    ".xz": ("xz", lambda path: lzma.open(path, "rb")),
    ".bz2": ("bzip2", lambda path: bz2.open(path, "rb")),
    ".zst": ("zstd", lambda path: io.BufferedReader(_ZstdFile(path))),
}
READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)  # what a damaged or cut-short compressed file raises


def open_text(path: Path) -> IO[bytes]:
    """A file's bytes, decompressed when its suffix says so (`OPENERS`)."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"missing corpus file {path}")
    if path.is_dir():
        raise UserError(f"{path} is a folder; give a text file (one sentence per line, plain or compressed)")
    _, opener = OPENERS.get(path.suffix, ("", lambda p: open(p, "rb")))
    return opener(path)


def read_error(path: Path, err: BaseException) -> UserError:
    """What a failure to read `path` means: a damaged compressed file, or an unreadable file."""
    path = Path(path)
    tool, _ = OPENERS.get(path.suffix, ("", None))
    if tool:
        return UserError(
            f"{path} is not a valid {tool} file ({err}): cut short or not compressed; compress it again with "
            f"{tool}, or drop the {path.suffix} from its name if it is plain text"
        )
    return UserError(f"cannot read {path} ({err})")


def raw_lines(path: Path) -> Iterator[bytes]:
    """The undecoded lines of a file, plain or compressed (by its suffix)."""
    with open_text(path) as f:
        try:
            yield from f
        except READ_ERRORS as err:
            raise read_error(path, err) from None


def count_lines(path: Path) -> int:
    """How many lines a file (plain or compressed) has."""
    return sum(1 for _ in raw_lines(path))


def decode_line(raw: bytes, where: str) -> str:
    """One line as text without its ending (LF or CRLF); `where` (e.g. "FILE:LINE") names it if it is not UTF-8."""
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise UserError(
            f"{where}: not valid UTF-8 ({err.reason} at byte {err.start + 1}); re-encode it as UTF-8"
        ) from None


def read_lines(path: Path) -> Iterator[str]:
    """Lines of a UTF-8 text file (plain or compressed) without line endings (LF or CRLF)."""
    for number, raw in enumerate(raw_lines(path), start=1):
        yield decode_line(raw, f"{path}:{number}")


def plain_suffix(path: str | Path) -> str:
    """The suffix of a file's name before any compression suffix: `.tsv` for both a.tsv and a.tsv.gz."""
    path = Path(path)
    return Path(path.stem).suffix.lower() if path.suffix in OPENERS else path.suffix.lower()
