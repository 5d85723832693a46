"""Reading a run's event log in time that does not grow with the run: the one reader of a run's row.

A row (status, last step, loss, total steps, model, precision) needs the run's ``run_started`` event, its last step
and whether it ended: the head of the log and its tail. ``LogSummary`` reads those two ends only (a few KiB of a log
of any length); a ``LogFollower`` keeps a byte offset and folds only what was appended since it last looked, so a
side panel's stream that follows a running run reads each byte once. ``workbench runs``, the runs panel, the
JupyterLab side panel and the handles' status all read through here.

Lines that do not parse (a torn copy, a disk error) are skipped: a row must not fail on one bad line.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

TERMINAL = frozenset({"run_finished", "run_failed"})
HEAD_BYTES = 1 << 20  # run_started carries the whole config: far below this; a log whose head has none has no start
# The tail is read back a chunk at a time to rank 0's last step; a chunk holds hundreds of events, so an end that
# another rank logged just before that step is in it too.
TAIL_CHUNK = 64 << 10
# A follower that fell this far behind (or met a log it never saw) summarises from the ends instead of reading all.
CATCH_UP_BYTES = 4 << 20


def parse_lines(data: bytes) -> list[dict]:
    """The events of complete JSON lines; lines that do not parse as an object are skipped."""
    out = []
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict):
            out.append(d)
    return out


def _rank0(e: dict) -> bool:
    return not e.get("rank")


def read_started(path: Path, limit: int = HEAD_BYTES) -> tuple[dict, int]:
    """Rank 0's first run_started event within the first ``limit`` bytes (the log's first line, normally) and the
    bytes read to find it; ({}, bytes) when there is none."""
    data, pos = b"", 0
    try:
        with open(path, "rb") as fh:
            while pos < limit:
                chunk = fh.read(min(TAIL_CHUNK, limit - pos))
                if not chunk:
                    break
                pos += len(chunk)
                data += chunk
                end = data.rfind(b"\n")
                for e in parse_lines(data[: end + 1]) if end >= 0 else ():
                    if e.get("type") == "run_started" and _rank0(e):
                        return e, pos
                data = data[end + 1:]
    except OSError:
        pass
    return {}, pos


def read_tail(path: Path, size: int, done=None) -> tuple[list[dict], int]:
    """The complete events of the end of the log (up to byte ``size``), read backwards a chunk at a time until
    ``done(events)`` is true or the start is reached; returns them in log order and the offset they start at."""
    pos, data = size, b""
    with open(path, "rb") as fh:
        while pos > 0:
            step = min(TAIL_CHUNK, pos)
            pos -= step
            fh.seek(pos)
            data = fh.read(step) + data
            # the first line of the window may be cut: it starts after the first newline (unless at the start)
            start = 0 if pos == 0 else data.find(b"\n") + 1
            if pos > 0 and start == 0:
                continue  # no newline yet: one line longer than the window
            events = parse_lines(data[start:])
            if done is None or done(events):
                return events, pos + start
    return parse_lines(data), 0


def _complete_size(path: Path) -> int:
    """The size of the log up to its last newline (a line being written is not read yet)."""
    try:
        size = path.stat().st_size
    except OSError:
        return 0
    if size == 0:
        return 0
    with open(path, "rb") as fh:
        back = min(size, TAIL_CHUNK)
        while True:
            fh.seek(size - back)
            chunk = fh.read(back)
            i = chunk.rfind(b"\n")
            if i >= 0:
                return size - back + i + 1
            if back == size:
                return 0
            back = min(size, back * 2)


@dataclass
class LogSummary:
    """What a run's row needs from its log; ``offset``: the bytes it covers (complete lines)."""

    started: dict = field(default_factory=dict)  # rank 0's latest run_started (a resumed run logs one more)
    last_step: dict = field(default_factory=dict)  # rank 0's last step event
    end: Optional[dict] = None  # the run's end (run_finished / run_failed) if logged after its last start and step
    offset: int = 0
    bytes_read: int = 0  # what reading it took (the tests' witness that a long log is not read whole)

    def fold(self, events: list[dict]) -> None:
        """Events appended after what this summary covers, in log order."""
        for e in events:
            kind = e.get("type")
            if kind == "run_started" and _rank0(e):
                self.started, self.end = e, None  # resumed: a new run segment, not ended yet
            elif kind == "step" and _rank0(e):
                self.last_step = e
                if self.end is not None and self.end.get("type") == "run_finished":
                    self.end = None  # (a step after an end: a resumed segment whose start we did not see)
            elif kind in TERMINAL:
                self.end = e

    @property
    def ended(self) -> bool:
        return self.end is not None


def summarize(path: str | Path, size: Optional[int] = None) -> LogSummary:
    """The summary of a log from its head and tail only (bounded reads, whatever its length)."""
    path = Path(path)
    size = _complete_size(path) if size is None else size
    summary = LogSummary(offset=size)
    if size == 0:
        return summary

    def reached_last_step(events: list[dict]) -> bool:
        # the window holds rank 0's last step (or its last start): nothing the row needs lies before it
        return any(e.get("type") in ("step", "run_started") and _rank0(e) for e in events)

    tail, tail_start = read_tail(path, size, reached_last_step)
    summary.bytes_read = size - tail_start
    if tail_start > 0 and not any(e.get("type") == "run_started" and _rank0(e) for e in tail):
        summary.started, read = read_started(path, min(HEAD_BYTES, tail_start))
        summary.bytes_read += read
    summary.fold(tail)
    return summary


class LogFollower:
    """A run log's summary kept up to date by reading only what was appended since the last ``poll``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.summary: Optional[LogSummary] = None
        self.bytes_read = 0  # all bytes this follower read from the log (the tests' witness that it reads little)

    def poll(self) -> LogSummary:
        size = _complete_size(self.path)
        s = self.summary
        if s is None or size < s.offset or size - s.offset > CATCH_UP_BYTES:  # first look, replaced, or far behind
            self.summary = summarize(self.path, size)
            self.bytes_read += self.summary.bytes_read
            return self.summary
        if size > s.offset:
            with open(self.path, "rb") as fh:
                fh.seek(s.offset)
                data = fh.read(size - s.offset)
            self.bytes_read += len(data)
            s.fold(parse_lines(data))
            s.offset = size
        return s


def log_size(path: str | Path) -> int:
    """The log's size in bytes (-1 when it is missing): what changes when anything is logged."""
    try:
        return os.stat(path).st_size
    except OSError:
        return -1
