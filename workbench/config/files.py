"""Reading the user's text files (run configurations, DeepSpeed JSON, training data): every way one
can be unreadable (missing, a directory, no permission, not UTF-8) is one message naming the file,
and the line where there is one, instead of an OSError or UnicodeDecodeError traceback.

JSONL files (training and eval rows, task files, stored episodes) are read here, one way: ``jsonl_lines`` (each
non-blank line parsed, or why it is not JSON, for a caller that reports or skips bad lines) and ``read_jsonl``
(the values, the first bad line an error). A run's event log has its own reader (``events.reader``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class UnreadableFile(ValueError):
    def __init__(self, path: str | Path, line: int | None, reason: str):
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


@dataclass(frozen=True)
class JsonLine:
    """One non-blank line of a JSONL file: its number, and its value or why it has none (``error``)."""

    number: int
    value: Any = None
    error: str | None = None


def jsonl_lines(path: str | Path) -> Iterator[JsonLine]:
    """Each non-blank line of the JSONL file at ``path``, read as it goes and parsed: its value, or ``error`` saying
    why not (not UTF-8; not valid JSON, with the column). UnreadableFile for a file that cannot be opened."""
    for number, raw in binary_lines(path):
        if not raw.strip():
            continue
        try:
            yield JsonLine(number, json.loads(decode_line(raw, number)))
        except json.JSONDecodeError as err:
            yield JsonLine(number, error=f"not valid JSON ({err.msg} at column {err.colno})")
        except ValueError as err:  # not UTF-8 (decode_line)
            yield JsonLine(number, error=str(err))


def read_jsonl(path: str | Path) -> list:
    """The values of the JSONL file at ``path``, blank lines skipped; UnreadableFile naming the file and the line of
    the first line that is not JSON (or the file, when it cannot be read)."""
    values = []
    for line in jsonl_lines(path):
        if line.error is not None:
            raise UnreadableFile(path, line.number, line.error)
        values.append(line.value)
    return values
