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

from transformer.core.errors import UserError


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


BLOCK = 1 << 20  # bytes read, split and decoded at a time


def read_lines(path: Path) -> Iterator[str]:
    """Lines of a UTF-8 text file (plain or compressed) without line endings (LF or CRLF)."""
    for lines in line_blocks(path):
        yield from lines


def line_blocks(path: Path) -> Iterator[list[str]]:
    """The lines of `read_lines`, a block at a time (a list each), so a line costs no Python step of its own."""
    number, rest = 0, b""
    for block in _blocks(path):
        block = rest + block
        cut = block.rfind(b"\n") + 1  # whole lines up to here; the rest waits for the next block
        block, rest = block[:cut], block[cut:]
        lines = _decoded(block, path, number)
        number += len(lines)
        if lines:
            yield lines
    if rest:
        yield _decoded(rest + b"\n", path, number)


def _blocks(path: Path) -> Iterator[bytes]:
    """A file's decompressed bytes, a block at a time; gzip through zlib itself (its members one after the other),
    which is twice as fast as the gzip module's reader."""
    if Path(path).suffix != ".gz":
        with open_text(path) as f:
            while block := _read(f, path):
                yield block
        return
    with open(path, "rb") as f:
        member, fed = zlib.decompressobj(wbits=31), False
        while data := _read(f, path):
            while data:
                try:
                    out = member.decompress(data)
                except zlib.error as err:
                    raise read_error(path, err) from None
                fed = True
                yield out
                if not member.eof:
                    break
                data, member, fed = member.unused_data, zlib.decompressobj(wbits=31), False
        if fed and not member.eof:
            raise read_error(path, EOFError("Compressed file ended before the end-of-stream marker was reached"))


def _read(f: IO[bytes], path: Path) -> bytes:
    try:
        return f.read(BLOCK)
    except READ_ERRORS as err:
        raise read_error(path, err) from None


def _decoded(block: bytes, path: Path, before: int) -> list[str]:
    """The lines of `block` (whole lines, each ending in LF) as text; `before` lines of `path` came before it."""
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError:  # find the line, and say which it is
        return [decode_line(raw, f"{path}:{before + i}") for i, raw in enumerate(block.split(b"\n")[:-1], start=1)]
    lines = text.split("\n")
    lines.pop()  # after the last LF
    return [line.rstrip("\r") for line in lines] if "\r" in text else lines


def plain_suffix(path: str | Path) -> str:
    """The suffix of a file's name before any compression suffix: `.tsv` for both a.tsv and a.tsv.gz."""
    path = Path(path)
    return Path(path.stem).suffix.lower() if path.suffix in OPENERS else path.suffix.lower()
