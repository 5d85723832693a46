"""Line-flushed JSONL event log: one writer (the engine), any number of tailing readers."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Iterator

from .schema import Event, event_from_dict


def _clean(value):
    # JSON has no inf/nan; a skipped fp16 step has an infinite grad norm, so write null-free strings.
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


class EventWriter:
    """Appends events; each line is flushed so a crash loses at most the line being written."""

    def __init__(self, path: str | Path, rank: int = 0):
        self.path = Path(path)
        self.rank = rank
        self._fh = open(self.path, "a", encoding="utf-8", buffering=1)

    def emit(self, event: Event) -> None:
        d = event.to_dict()
        d["rank"] = self.rank
        self._fh.write(json.dumps(_clean(d), ensure_ascii=False, allow_nan=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()

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
