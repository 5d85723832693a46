"""Reading the user's text files (run configurations, DeepSpeed JSON, training data): every way one
can be unreadable (missing, a directory, no permission, not UTF-8) is one message naming the file,
and the line where there is one, instead of an OSError or UnicodeDecodeError traceback."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Optional


class UnreadableFile(ValueError):
    def __init__(self, path: str | Path, line: Optional[int], reason: str):
        self.path, self.line, self.reason = str(path), line, reason
        super().__init__(f"{path}:{line}: {reason}" if line is not None else f"{path}: {reason}")


def _not_utf8(raw: bytes, err: UnicodeDecodeError) -> str:
    column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
    return f"not UTF-8 text (byte 0x{raw[err.start]:02x} at column {column}): save the file as UTF-8"


def _open(path: str | Path):
    if Path(path).is_dir():
        raise UnreadableFile(path, None, "is a directory, not a file")
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise UnreadableFile(path, None, "file not found") from None
    except OSError as err:
        raise UnreadableFile(path, None, f"cannot be read: {err.strerror or err}") from None


def read_text(path: str | Path) -> str:
    """The file's text (UTF-8, a leading byte-order mark dropped)."""
    with _open(path) as fh:
        raw = fh.read()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UnreadableFile(path, raw.count(b"\n", 0, err.start) + 1, _not_utf8(raw, err)) from None


def binary_lines(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) of each line, read as it goes; decode each with ``decode_line``."""
    with _open(path) as fh:
        yield from enumerate(fh, start=1)


def decode_line(raw: bytes, lineno: int) -> str:
    """One line's text; ValueError saying why when it is not UTF-8 (the caller names file:line)."""
    try:
        return raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(_not_utf8(raw, err)) from None
