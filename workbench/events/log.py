"""Line-flushed JSONL event log: one writer (the engine), any number of tailing readers."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterator, Optional

from .schema import Event, event_from_dict

EVENTS_FILE = "events.jsonl"  # a run's event log, in its run directory (workbench.runs.layout)


def _clean(value):
    # JSON has no inf/nan; a skipped fp16 step has an infinite grad norm, so write null-free strings.
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def number(value: Any) -> Optional[float]:
    """A number field of an event as read from the log (``_clean`` writes inf/nan as strings): a float, or None
    for a missing or non-numeric value (booleans are not numbers here)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def finite_number(value: Any) -> Optional[float]:
    """``number(value)`` when it is finite, else None (a chart's or a table's loss: inf/nan are gaps)."""
    v = number(value)
    return v if v is not None and math.isfinite(v) else None


class EventWriter:
    """Appends events to a run's log; every process of a run (each rank, the launcher) may hold one.

    Each event is one ``write(2)`` on an ``O_APPEND`` descriptor: nothing is buffered, so a crash loses
    at most the line being written, and on Linux a regular-file write holds the inode lock for its
    whole length, so lines of concurrent writers never interleave, whatever their size. Multi-node
    runs need the run directory on a filesystem with local semantics (NFS does not make O_APPEND
    atomic across hosts: docs/distributed.md)."""

    def __init__(self, path: str | Path, rank: int = 0):
        self.path = Path(path)
        self.rank = rank
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def emit(self, event: Event) -> None:
        d = event.to_dict()
        d["rank"] = self.rank
        line = (json.dumps(_clean(d), ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
        written = os.write(self._fd, line)
        if written != len(line):  # a full disk; never leave half a line for readers to choke on
            raise OSError(f"short write to {self.path}: {written} of {len(line)} bytes")

    def close(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_events(path: str | Path, offset: int = 0, typed: bool = True) -> tuple[list, int]:
    """Complete events from byte ``offset``; returns them and the offset to continue from.

    A partially written last line is left for the next call.
    """
    path = Path(path)
    if not path.exists():
        return [], offset
    with open(path, "rb") as fh:
        fh.seek(offset)
        chunk = fh.read()
    end = chunk.rfind(b"\n")
    if end < 0:
        return [], offset
    events = []
    for line in chunk[: end + 1].splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        events.append(event_from_dict(d) if typed else d)
    return events, offset + end + 1


def iter_events(path: str | Path, typed: bool = True) -> Iterator:
    events, _ = read_events(path, 0, typed=typed)
    yield from events
