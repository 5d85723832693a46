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


# ---- a long log's chart data without reading it whole ----------------------------------------------------------------
# A log longer than SAMPLE_ABOVE_BYTES whose writer kept an index (workbench.events.log: the offsets of its rare events
# and of an anchor step every ANCHOR_BYTES) is read in three parts: its tail exactly, every rare event the index names
# (read one line each), and SAMPLE_WINDOWS small windows at evenly spaced byte offsets before the tail, of which the
# first event of each series type and rank is kept (the older part of each chart: one point per window). The bytes
# read do not grow with the log, only the index's rare events do. A log without an index is read whole by the caller.
SAMPLE_ABOVE_BYTES = 8 << 20  # ~25k steps: a shorter log is read whole (exactly what following it from its start draws)
SAMPLE_WINDOWS = 1000
WINDOW_BYTES = 4 << 10
WINDOW_MAX_BYTES = 1 << 20  # a window grows until it holds a complete line (a GRPO rollout's samples are long)
ZOOM_FULL_BYTES = 4 << 20  # a zoomed step window this short in bytes is read whole: every step of it


@dataclass
class LogSlice:
    """Events of a log in log order (plain dicts, as logged), read without reading it whole; ``offset``: where a
    follower goes on from (the log's complete size when it was read); ``sampled``: older series events are one per
    window; ``bytes_read``: what reading it took."""

    events: list
    offset: int
    sampled: bool
    bytes_read: int = 0


def _lines_from(fh, start: int, stop: int, first_line_cut: bool, want: Optional[int] = None) -> tuple[list, int]:
    """[(offset, event)] of the complete lines in bytes ``start``..``stop`` (``first_line_cut``: ``start`` may fall
    inside a line, which is then skipped); a window that holds no complete line is read further, up to
    WINDOW_MAX_BYTES. Returns them and the bytes read."""
    want = want or WINDOW_BYTES
    pos = start - 1 if first_line_cut and start > 0 else start  # the byte before tells whether ``start`` begins a line
    while True:
        fh.seek(pos)
        data = fh.read(max(0, min(want, stop - pos)))
        newline = data.find(b"\n")
        begin = (newline + 1 if newline >= 0 else len(data)) if pos < start else 0
        end = data.rfind(b"\n") + 1
        if end > begin or pos + len(data) >= stop or want >= WINDOW_MAX_BYTES:
            break
        want *= 4
    out = []
    at = pos + begin
    for line in data[begin:end].split(b"\n")[:-1] if end > begin else ():
        try:
            e = json.loads(line)
        except ValueError:
            e = None
        if isinstance(e, dict):
            out.append((at, e))
        at += len(line) + 1
    return out, len(data)


def _sample(fh, lo: int, hi: int, windows: int) -> tuple[dict, int]:
    """{offset: event}: the first event of each series type and rank in each of ``windows`` evenly spaced windows of
    bytes ``lo``..``hi`` (rare events, skipped steps included, are the index's)."""
    from ..events.log import is_rare

    out, read = {}, 0
    for k in range(windows):
        start = lo + (hi - lo) * k // windows
        lines, n = _lines_from(fh, start, hi, first_line_cut=True)
        read += n
        seen = set()
        for offset, e in lines:
            key = (e.get("type"), e.get("rank") or 0)
            if not is_rare(e) and key not in seen:
                seen.add(key)
                out[offset] = e
    return out, read


def _indexed(fh, entries: list, lo: int, hi: int) -> Optional[tuple[dict, int]]:
    """{offset: event} of the index's entries in bytes ``lo``..``hi``, each read from the log; None when one does not
    match its line (the index is not this log's: a log replaced or cut, or a line torn by a crash)."""
    out, read = {}, 0
    for entry in entries:
        offset = entry["offset"]
        if not lo <= offset < hi or offset in out:
            continue
        lines, n = _lines_from(fh, offset, hi, first_line_cut=False, want=1024)  # (grown for a longer line)
        read += n
        if not lines or lines[0][0] != offset or lines[0][1].get("type") != entry["type"]:
            return None
        out[offset] = lines[0][1]
    return out, read


def _rare_and_sampled(fh, entries: list, lo: int, hi: int, windows: Optional[int]) -> Optional[tuple[list, int]]:
    """The events of bytes ``lo``..``hi`` in log order: every rare event the index names and one series event per type,
    rank and window; with the bytes read. None when the index does not match the log."""
    rare = _indexed(fh, entries, lo, hi)
    if rare is None:
        return None
    events, read = rare
    sampled, n = _sample(fh, lo, hi, windows or SAMPLE_WINDOWS)
    for offset, e in sampled.items():
        events.setdefault(offset, e)
    return [events[o] for o in sorted(events)], read + n


def read_overview(path: str | Path, recent_steps: int, windows: Optional[int] = None) -> Optional[LogSlice]:
    """What a chart of the whole log needs, in bounded reads: the tail holding rank 0's newest ``recent_steps`` steps
    exactly, every rare event, and one event per series type, rank and window before the tail. None when the log is
    short (read it whole, exactly) or has no usable index (an older writer's: read it whole)."""
    from ..events.log import read_index

    path = Path(path)
    size = _complete_size(path)
    if size <= SAMPLE_ABOVE_BYTES:
        return None
    entries = read_index(path)
    if not entries:
        return None

    def holds_recent_steps(events: list) -> bool:
        steps = [e.get("step") for e in events if e.get("type") == "step" and _rank0(e) and isinstance(e.get("step"), int)]
        return bool(steps) and steps[0] <= steps[-1] - recent_steps

    tail, tail_start = read_tail(path, size, holds_recent_steps)
    with open(path, "rb") as fh:
        older = _rare_and_sampled(fh, entries, 0, tail_start, windows)
    if older is None:
        return None
    events, read = older
    return LogSlice(events + tail, size, True, read + size - tail_start)


def _anchors(entries: list) -> list[tuple[int, int]]:
    """(step, offset) of rank 0's indexed steps as the final chart has them: a resumed run's steps logged again replace
    the later ones of the segment before (as ``Series.add`` does), so steps and offsets both grow."""
    out: list = []
    for e in entries:
        step = e.get("step")
        if e["type"] != "step" or e.get("rank") or not isinstance(step, int):
            continue
        while out and out[-1][0] >= step:
            out.pop()
        out.append((step, e["offset"]))
    return out


def read_window(path: str | Path, first: int, last: int, full_bytes: Optional[int] = None,
                windows: Optional[int] = None) -> Optional[LogSlice]:
    """The events of the bytes that hold steps ``first``..``last`` (and some steps around them), found through the
    index's anchors: all of them when that is at most ``full_bytes``, else the index's rare events of it and a sample
    of ``windows`` windows. None when the log has no index (read it whole)."""
    from ..events.log import read_index

    path = Path(path)
    entries = read_index(path)
    if entries is None:
        return None
    size = _complete_size(path)
    anchors = _anchors(entries)
    lo = max((o for s, o in anchors if s < first), default=0)
    hi = min((o for s, o in anchors if s > last and o > lo), default=size)
    with open(path, "rb") as fh:
        if hi - lo <= (full_bytes or ZOOM_FULL_BYTES):
            fh.seek(lo)
            data = fh.read(hi - lo)
            return LogSlice(parse_lines(data[: data.rfind(b"\n") + 1]), size, False, len(data))
        window = _rare_and_sampled(fh, entries, lo, hi, windows)
    if window is None:
        return None
    events, read = window
    return LogSlice(events, size, True, read)
