"""Line-flushed JSONL event log: one writer (the engine), any number of tailing readers (``events.reader``)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from .schema import Event

INDEX_SUFFIX = ".index"  # the log's name + this: where in the log its rare events and some steps are (EventWriter)
# The event types a chart draws one point of per step (or per few): a reader of a long log samples them. Every other
# event (an overflow, a diagnosis, an eval, a checkpoint, the run's start and end), and a skipped step, is rare: its
# byte offset goes into the index, so a reader finds all of them without reading the log between them.
SERIES_TYPES = frozenset({"step", "memory", "rollout", "policy_mismatch"})
ANCHOR_BYTES = 1 << 20  # rank 0 indexes its first step after every this many bytes of log: a coarse step -> offset map


def is_rare(event: dict) -> bool:
    """Whether a logged event is one the index names (not one point of a chart's series; a skipped step is rare)."""
    kind = event.get("type")
    return kind not in SERIES_TYPES or (kind == "step" and bool(event.get("skipped")))


def index_path(log: str | Path) -> Path:
    """The index of the event log ``log`` (its sidecar: one JSON line per indexed event)."""
    return Path(str(log) + INDEX_SUFFIX)


def _clean(value):
    # JSON has no inf/nan; a skipped fp16 step has an infinite grad norm, so write null-free strings.
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def number(value: Any) -> float | None:
    """A number field of an event as read from the log (``_clean`` writes inf/nan as strings): a float, or None
    for a missing or non-numeric value (booleans are not numbers here)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def finite_number(value: Any) -> float | None:
    """``number(value)`` when it is finite, else None (a chart's or a table's loss: inf/nan are gaps)."""
    v = number(value)
    return v if v is not None and math.isfinite(v) else None


class EventWriter:
    """Appends events to a run's log; every process of a run (each rank, the launcher) may hold one.

    Each event is one ``write(2)`` on an ``O_APPEND`` descriptor: nothing is buffered, so a crash loses
    at most the line being written, and on Linux a regular-file write holds the inode lock for its
    whole length, so lines of concurrent writers never interleave, whatever their size. Multi-node
    runs need the run directory on a filesystem with local semantics (NFS does not make O_APPEND
    atomic across hosts: docs/distributed.md).

    Beside the log it appends to its index (``index_path``): ``{"offset", "type", "step", "rank"}`` of each rare event
    and of an anchor step every ANCHOR_BYTES, each written after its event's line (an index line never names an event
    that is not in the log). The index exists from the log's first byte or not at all: a writer that finds a log an
    older writer began, without an index, starts none (readers then read that log whole)."""

    def __init__(self, path: str | Path, rank: int = 0):
        self.path = Path(path)
        self.rank = rank
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._index_fd = None
        self._next_anchor = 0
        index = index_path(self.path)
        if os.fstat(self._fd).st_size == 0 or index.exists():
            self._index_fd = os.open(index, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            size = os.fstat(self._index_fd).st_size
            if size and os.pread(self._index_fd, 1, size - 1) != b"\n":
                os.write(self._index_fd, b"\n")  # a writer that crashed mid-line: end it, never glue ours onto it

    def emit(self, event: Event) -> None:
        d = event.to_dict()
        d["rank"] = self.rank
        line = (json.dumps(_clean(d), ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
        written = os.write(self._fd, line)
        if written != len(line):  # a full disk; never leave half a line for readers to choke on
            raise OSError(f"short write to {self.path}: {written} of {len(line)} bytes")
        if self._index_fd is not None:
            self._index(d, written)

    def _index(self, d: dict, written: int) -> None:
        # O_APPEND put the line at the end of the log as it was, and leaves this descriptor's offset right after it
        kind = d.get("type")
        rare = is_rare(d)
        anchor = kind == "step" and self.rank == 0
        if not (rare or anchor):
            return
        end = os.lseek(self._fd, 0, os.SEEK_CUR)
        if not rare and end < self._next_anchor:
            return
        if anchor:
            self._next_anchor = end + ANCHOR_BYTES
        entry = {"offset": end - written, "type": kind, "step": d.get("step"), "rank": self.rank}
        os.write(self._index_fd, (json.dumps(entry) + "\n").encode())

    def close(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
        if self._index_fd is not None:
            os.close(self._index_fd)
            self._index_fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
