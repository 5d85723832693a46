"""Reading a run's event log in time that does not grow with the run: the one reader of a run's row.

A row (status, last step, loss, total steps, model, precision) needs the run's ``run_started`` event, its last step
and whether it ended: the head of the log and its tail. ``LogSummary`` reads those two ends only (a few KiB of a log
of any length); a ``LogFollower`` keeps a byte offset and folds only what was appended since it last looked, so a
side panel's stream that follows a running run reads each byte once. ``workbench runs``, the runs panel, the
JupyterLab side panel and the handles' status all read through here.

Every byte is read through ``workbench.events.reader`` (the one reader of a log, and its rule for a bad line).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..events.reader import LogFile, complete_size, first_event, read_index, read_tail

TERMINAL = frozenset({"run_finished", "run_failed"})
HEAD_BYTES = 1 << 20  # run_started carries the whole config: far below this; a log whose head has none has no start
# A follower that fell this far behind (or met a log it never saw) summarises from the ends instead of reading all.
CATCH_UP_BYTES = 4 << 20


def _rank0(e: dict) -> bool:
    return not e.get("rank")


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
    size = complete_size(path) if size is None else size
    summary = LogSummary(offset=size)
    if size == 0:
        return summary

    def reached_last_step(events: list[dict]) -> bool:
        # the window holds rank 0's last step (or its last start): nothing the row needs lies before it
        return any(e.get("type") in ("step", "run_started") and _rank0(e) for e in events)

    tail, tail_start = read_tail(path, size, reached_last_step)
    summary.bytes_read = size - tail_start
    if tail_start > 0 and not any(e.get("type") == "run_started" and _rank0(e) for e in tail):
        summary.started, read = first_event(path, min(HEAD_BYTES, tail_start),
                                            lambda e: e.get("type") == "run_started" and _rank0(e))
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
        size = complete_size(self.path)
        s = self.summary
        if s is None or size < s.offset or size - s.offset > CATCH_UP_BYTES:  # first look, replaced, or far behind
            self.summary = summarize(self.path, size)
            self.bytes_read += self.summary.bytes_read
            return self.summary
        if size > s.offset:
            with LogFile(self.path) as log:
                events, read = log.span(s.offset, size)
            self.bytes_read += read
            s.fold(events)
            s.offset = size
        return s


# ---- a long log's chart data without reading it whole ----------------------------------------------------------------
# A log longer than SAMPLE_ABOVE_BYTES whose writer kept an index (workbench.events.log: the offsets of its rare events
# and of an anchor step every ANCHOR_BYTES) is read in three parts: its tail exactly, every rare event the index names
# (read one line each), and SAMPLE_WINDOWS small windows at evenly spaced byte offsets before the tail, of which the
# first event of each series type and rank is kept (the older part of each chart: one point per window). The bytes
# read do not grow with the log, only the index's rare events do. A log without an index is read whole by the caller.
SAMPLE_ABOVE_BYTES = 8 << 20  # ~25k steps: a shorter log is read whole (exactly what following it from its start draws)
SAMPLE_WINDOWS = 1000  # (each window: events.reader.WINDOW_BYTES, grown to hold a complete line)
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


def _sample(log: LogFile, lo: int, hi: int, windows: int) -> tuple[dict, int]:
    """{offset: event}: the first event of each series type and rank in each of ``windows`` evenly spaced windows of
    bytes ``lo``..``hi`` (rare events, skipped steps included, are the index's)."""
    from ..events.log import is_rare

    out, read = {}, 0
    for k in range(windows):
        start = lo + (hi - lo) * k // windows
        lines, n = log.lines(start, hi, first_line_cut=True)
        read += n
        seen = set()
        for offset, e in lines:
            key = (e.get("type"), e.get("rank") or 0)
            if not is_rare(e) and key not in seen:
                seen.add(key)
                out[offset] = e
    return out, read


def _indexed(log: LogFile, entries: list, lo: int, hi: int) -> Optional[tuple[dict, int]]:
    """{offset: event} of the index's entries in bytes ``lo``..``hi``, each read from the log; None when one does not
    match its line (the index is not this log's: a log replaced or cut, or a line torn by a crash)."""
    out, read = {}, 0
    for entry in entries:
        offset = entry["offset"]
        if not lo <= offset < hi or offset in out:
            continue
        lines, n = log.lines(offset, hi, first_line_cut=False, want=1024)  # (grown for a longer line)
        read += n
        if not lines or lines[0][0] != offset or lines[0][1].get("type") != entry["type"]:
            return None
        out[offset] = lines[0][1]
    return out, read


def _rare_and_sampled(log: LogFile, entries: list, lo: int, hi: int, windows: Optional[int]) -> Optional[tuple[list, int]]:
    """The events of bytes ``lo``..``hi`` in log order: every rare event the index names and one series event per type,
    rank and window; with the bytes read. None when the index does not match the log."""
    rare = _indexed(log, entries, lo, hi)
    if rare is None:
        return None
    events, read = rare
    sampled, n = _sample(log, lo, hi, windows or SAMPLE_WINDOWS)
    for offset, e in sampled.items():
        events.setdefault(offset, e)
    return [events[o] for o in sorted(events)], read + n


def read_overview(path: str | Path, recent_steps: int, windows: Optional[int] = None) -> Optional[LogSlice]:
    """What a chart of the whole log needs, in bounded reads: the tail holding rank 0's newest ``recent_steps`` steps
    exactly, every rare event, and one event per series type, rank and window before the tail. None when the log is
    short (read it whole, exactly) or has no usable index (an older writer's: read it whole)."""
    path = Path(path)
    size = complete_size(path)
    if size <= SAMPLE_ABOVE_BYTES:
        return None
    entries = read_index(path)
    if not entries:
        return None

    def holds_recent_steps(events: list) -> bool:
        steps = [e.get("step") for e in events if e.get("type") == "step" and _rank0(e) and isinstance(e.get("step"), int)]
        return bool(steps) and steps[0] <= steps[-1] - recent_steps

    tail, tail_start = read_tail(path, size, holds_recent_steps)
    with LogFile(path) as log:
        older = _rare_and_sampled(log, entries, 0, tail_start, windows)
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
    path = Path(path)
    entries = read_index(path)
    if entries is None:
        return None
    size = complete_size(path)
    anchors = _anchors(entries)
    lo = max((o for s, o in anchors if s < first), default=0)
    hi = min((o for s, o in anchors if s > last and o > lo), default=size)
    with LogFile(path) as log:
        if hi - lo <= (full_bytes or ZOOM_FULL_BYTES):
            events, read = log.span(lo, hi)
            return LogSlice(events, size, False, read)
        window = _rare_and_sampled(log, entries, lo, hi, windows)
    if window is None:
        return None
    events, read = window
    return LogSlice(events, size, True, read)
