"""The one reader of an event log: every package reads a run's events through here (the monitor's state and its
zoomed charts, the runs list and the JupyterLab side panel, the run handles' status, the exporters, the report, the
benches); no other module opens a log to read or looks at its bytes. What it reads:

* forward from an offset (``LogReader``, ``read_events``): the lines completed since the last read; a reader that
  thins old steps can take a step line's step from its bytes without parsing it (``LogReader.scan``);
* the two ends (``summarize_log``, ``LogFollower``): what a run's row needs (its start, its last step, its end), in reads
  that do not grow with the log;
* a long log through the index its writer keeps (``read_overview``, ``read_window``): a chart of the whole run, or a
  zoomed step window, in bounded reads.

One rule for a line that is not a JSON object:

* the log's last line, before its newline is written, is one the writer is still writing (or was writing when it
  died): it is not read, and the next read from the same offset sees it whole. It waits, silently: that is normal.
* a complete line (its newline written) that does not parse is skipped and reported once per process: a warning on
  the ``workbench.events`` logger naming the log and the line's number (its byte offset when the read began mid-log,
  where line numbers are not known), and an entry in the reader's ``bad_lines``.

Skipped rather than raised, because one torn line (a writer killed mid-line and a resumed run appending after it, a
disk error) must not make a run's whole history unreadable to the monitor, ``workbench runs`` or an exporter;
reported rather than silent, because the events on it are lost (a gap in a chart, a run's end unseen) and the user is
told where to look.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .log import index_path, is_rare
from .schema import event_from_dict

log = logging.getLogger("workbench.events")
CHUNK = 64 << 10  # a backwards read of a log's tail, or a forward read of its head, goes a chunk at a time
WINDOW_BYTES = 4 << 10  # a window read at an offset (a sample of a long log, an indexed event's line)
WINDOW_MAX_BYTES = 1 << 20  # a window grows until it holds a complete line (a GRPO rollout's samples are long)
_reported: set = set()  # (log, offset) of the bad lines reported in this process


def report_bad_line(path: Path, offset: int, line_no: int | None, line: bytes, bad_lines: list | None = None):
    """Report a complete line that is not a JSON object, once per process and line (``bad_lines``: the reader's
    list it is recorded in, each time)."""
    if bad_lines is not None:
        bad_lines.append((line_no, offset))
    key = (str(path), offset)
    if key in _reported:
        return
    _reported.add(key)
    where = f"line {line_no}" if line_no is not None else f"the line at byte {offset}"
    log.warning("%s: %s is not a JSON event; skipped (%d bytes: %r)", path, where, len(line), line[:80])


def _loads(line: bytes) -> dict | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def parse_line(
    line: bytes, path: Path, offset: int, line_no: int | None = None, bad_lines: list | None = None
) -> dict | None:
    """The event of one complete line; None for a blank line, or for a bad one (reported: the module's rule)."""
    event = _loads(line)
    if event is None and line.strip():
        report_bad_line(path, offset, line_no, line, bad_lines)
    return event


def parse_block(
    data: bytes,
    path: Path,
    offset: int,
    line_no: int | None = None,
    bad_lines: list | None = None,
    offsets: bool = False,
) -> list:
    """The events of ``data``, complete lines read from byte ``offset`` of ``path`` (line ``line_no`` first, when
    known); with ``offsets``, (offset, event) pairs."""
    out = []
    for line in data.split(b"\n")[:-1]:
        event = parse_line(line, path, offset, line_no, bad_lines)
        if event is not None:
            out.append((offset, event) if offsets else event)
        offset += len(line) + 1
        if line_no is not None:
            line_no += 1
    return out


def typed_event(d: dict):
    """The event's dataclass, or the plain dict when it does not fit one (a writer newer or older than this reader):
    one such event must not stop a reader."""
    try:
        return event_from_dict(d)
    except (TypeError, ValueError):
        return d


class LogReader:
    """Reads one log forward: each ``read`` returns the events of the lines completed since the last one (a line being
    written waits). ``line``: the number of the next line (None when started mid-log); ``bad_lines``: (line number or
    None, byte offset) of each bad line met."""

    def __init__(self, path: str | Path, offset: int = 0, typed: bool = False):
        self.path = Path(path)
        self.offset = offset
        self.line: int | None = 1 if offset == 0 else None
        self.typed = typed
        self.bad_lines: list = []
        self._block = b""

    def read(self) -> list:
        events = [e for block in self.blocks() for e in self.parse(block)]
        return [typed_event(e) for e in events] if self.typed else events

    def blocks(self, chunk: int = 8 << 20) -> Iterator[bytes]:
        """Blocks of complete lines from ``offset`` on, a chunk at a time (never the whole log at once); ``offset`` and
        ``line`` are moved past a block once the next one is asked for (or the iteration ends)."""
        try:
            fh = open(self.path, "rb")
        except OSError:
            return
        with fh:
            fh.seek(self.offset)
            rest = b""
            while True:
                data = fh.read(chunk)
                buf = rest + data if rest else data
                end = buf.rfind(b"\n")
                block, rest = buf[: end + 1], buf[end + 1 :]
                if block:
                    self._block = block
                    yield block
                    self.offset += len(block)
                    if self.line is not None:
                        self.line += block.count(b"\n")
                if not data:
                    return

    def parse_line(self, line: bytes, offset: int) -> dict | None:
        """The event of the line at byte ``offset`` of the block ``blocks`` just yielded: this module's rule (the
        line's number is counted only for a bad line)."""
        event = _loads(line)
        if event is None and line.strip():
            line_no = None if self.line is None else self.line + self._block.count(b"\n", 0, offset - self.offset)
            report_bad_line(self.path, offset, line_no, line, self.bad_lines)
        return event

    def parse(self, block: bytes) -> list[dict]:
        """The events of a block ``blocks`` just yielded (before it moves on), by this module's rule."""
        return parse_block(block, self.path, self.offset, self.line, self.bad_lines)

    def scan(self, block: bytes, steps_up_to: int | None) -> Iterator:
        """The lines of a block ``blocks`` just yielded, in order: a ``StepLine`` for each of rank 0's unskipped step
        lines of a step up to ``steps_up_to`` (its step read from its bytes, ``step_of_line``: what a reader that thins
        old steps folds without parsing), the event of every other line (by this module's rule: a bad one skipped)."""
        at = self.offset
        for line in block.split(b"\n")[:-1]:
            line_at, at = at, at + len(line) + 1
            found = step_of_line(line) if steps_up_to is not None else None
            if found is not None and found[1] == 0 and found[0] <= steps_up_to:
                yield StepLine(found[0], self, line, line_at)
                continue
            event = self.parse_line(line, line_at)
            if event is not None:
                yield event


@dataclass
class StepLine:
    """One of rank 0's unskipped step lines met by ``LogReader.scan``: its step, read from its bytes; ``event()``
    parses the line when its other fields are wanted after all."""

    step: int
    reader: LogReader = field(repr=False)
    line: bytes = field(repr=False)
    offset: int = 0

    def event(self) -> dict | None:
        return self.reader.parse_line(self.line, self.offset)


# ---- a step line's step from its bytes ------------------------------------------------------------------------------
# An unskipped step event's step and rank, read from its line's bytes without parsing it, whatever the order of its
# fields. Only a flat line with no backslash is read so (no "{" after its first byte, no escaped quote): a quoted name
# followed by a colon is then one of its top-level keys, never text inside a string. Any other line is parsed. The
# writer's separators (", ", ": ") are found with bytes searches; other spacing takes regular expressions.
_KEYS = {name: re.compile(rb'"%s"\s*:\s*' % name) for name in (b"type", b"step", b"rank", b"skipped")}


def _raw_value(line: bytes, name: bytes) -> bytes | None:
    """The text of top-level key ``name``'s value in a flat line (None: no such key; a string value holding a comma
    comes back cut, which no step event's type is)."""
    found = _KEYS[name].search(line)
    return None if found is None else _number_at(line, found.end()).rstrip()


def step_of_line(line: bytes) -> tuple[int, int] | None:
    """(step, rank) of an unskipped step event's line, from its bytes; None for any other line (to be parsed)."""
    if line.find(b"{", 1) >= 0 or line.find(b"\\") >= 0:
        return None
    kind, skipped, step, rank = (
        line.find(b'"type": '),
        line.find(b'"skipped": '),
        line.find(b'"step": '),
        line.find(b'"rank": '),
    )
    if min(kind, skipped, step, rank) < 0:  # other spacing than the writer's, or a key missing
        return _step_of_spaced_line(line)
    if line[kind + 8 : kind + 15] not in (b'"step",', b'"step"}') or line.startswith(b"true", skipped + 11):
        return None
    step_text, rank_text = _number_at(line, step + 8), _number_at(line, rank + 8)
    return (int(step_text), int(rank_text)) if step_text.isdigit() and rank_text.isdigit() else None


def _number_at(line: bytes, start: int) -> bytes:
    end = line.find(b",", start)
    return line[start : end if end >= 0 else line.rfind(b"}")]


def _step_of_spaced_line(line: bytes) -> tuple[int, int] | None:
    """``step_of_line`` of a flat line whatever its spacing (a rank-less step is rank 0's)."""
    if _raw_value(line, b"type") != b'"step"' or _raw_value(line, b"skipped") == b"true":
        return None
    step, rank = _raw_value(line, b"step"), _raw_value(line, b"rank")
    if step is None or not step.isdigit() or not (rank is None or rank.isdigit()):
        return None
    return int(step), int(rank) if rank is not None else 0


# ---- whole reads, and reads at the ends and at offsets ---------------------------------------------------------------
def read_events(path: str | Path, offset: int = 0, typed: bool = True) -> tuple[list, int]:
    """The events of the complete lines from byte ``offset`` and the offset to continue from (a line being written is
    left for the next call)."""
    reader = LogReader(path, offset, typed)
    return reader.read(), reader.offset


def iter_events(path: str | Path, typed: bool = True) -> Iterator:
    yield from read_events(path, 0, typed)[0]


def complete_size(path: str | Path) -> int:
    """The size of the log up to its last newline (a line being written is not read yet); 0 when missing."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError:
        return 0
    if size == 0:
        return 0
    with open(path, "rb") as fh:
        back = min(size, CHUNK)
        while True:
            fh.seek(size - back)
            i = fh.read(back).rfind(b"\n")
            if i >= 0:
                return size - back + i + 1
            if back == size:
                return 0
            back = min(size, back * 2)


def first_event(path: str | Path, limit: int, wanted: Callable[[dict], bool]) -> tuple[dict, int]:
    """The first event within the log's first ``limit`` bytes that is ``wanted`` and the bytes read to find it;
    ({}, bytes) when there is none."""
    path, data, pos = Path(path), b"", 0
    try:
        with open(path, "rb") as fh:
            while pos < limit:
                chunk = fh.read(min(CHUNK, limit - pos))
                if not chunk:
                    break
                start = pos - len(data)
                pos += len(chunk)
                data += chunk
                end = data.rfind(b"\n")
                for e in parse_block(data[: end + 1], path, start, None) if end >= 0 else ():
                    if wanted(e):
                        return e, pos
                data = data[end + 1 :]
    except OSError:
        pass
    return {}, pos


def read_tail(path: str | Path, size: int, done: Callable[[list], bool] | None = None) -> tuple[list[dict], int]:
    """The events of the end of the log (up to byte ``size``, a line end), read backwards a chunk at a time until
    ``done(events)`` is true or the start is reached; returns them in log order and the offset they start at."""
    path, pos, data = Path(path), size, b""
    with open(path, "rb") as fh:
        while pos > 0:
            step = min(CHUNK, pos)
            pos -= step
            fh.seek(pos)
            data = fh.read(step) + data
            # the first line of the window may be cut: it starts after the first newline (unless at the start)
            start = 0 if pos == 0 else data.find(b"\n") + 1
            if pos > 0 and start == 0:
                continue  # no newline yet: one line longer than the window
            events = parse_block(data[start:], path, pos + start, 1 if pos + start == 0 else None)
            if done is None or done(events):
                return events, pos + start
    return parse_block(data, path, 0, 1), 0


class LogFile:
    """One log open for several bounded reads at byte offsets (a long log's samples and indexed events)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._fh = open(self.path, "rb")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()

    def span(self, lo: int, hi: int) -> tuple[list[dict], int]:
        """The events of bytes ``lo``..``hi`` (``lo`` a line start) and the bytes read."""
        self._fh.seek(lo)
        data = self._fh.read(hi - lo)
        return parse_block(data[: data.rfind(b"\n") + 1], self.path, lo, 1 if lo == 0 else None), len(data)

    def lines(self, start: int, stop: int, first_line_cut: bool, want: int | None = None) -> tuple[list, int]:
        """[(offset, event)] of the complete lines in bytes ``start``..``stop`` (``first_line_cut``: ``start`` may fall
        inside a line, which is then skipped); a window that holds no complete line is read further, up to
        WINDOW_MAX_BYTES. Returns them and the bytes read."""
        want = want or WINDOW_BYTES
        pos = start - 1 if first_line_cut and start > 0 else start  # the byte before: does ``start`` begin a line?
        while True:
            self._fh.seek(pos)
            data = self._fh.read(max(0, min(want, stop - pos)))
            newline = data.find(b"\n")
            begin = (newline + 1 if newline >= 0 else len(data)) if pos < start else 0
            end = data.rfind(b"\n") + 1
            if end > begin or pos + len(data) >= stop or want >= WINDOW_MAX_BYTES:
                break
            want *= 4
        lines = parse_block(data[begin:end], self.path, pos + begin, offsets=True) if end > begin else []
        return lines, len(data)


def read_index(log_file: str | Path) -> list[dict] | None:
    """The complete entries of the log's index in the order written (a torn entry skipped: the index is a hint, every
    entry is checked against the log), or None when the log has no index (an older writer's log)."""
    try:
        data = index_path(log_file).read_bytes()
    except OSError:
        return None
    entries = []
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict) and isinstance(e.get("offset"), int) and isinstance(e.get("type"), str):
            entries.append(e)
    return entries


# ---- the two ends of a log: what a run's row needs ------------------------------------------------------------------
# A row (status, last step, loss, total steps, model, precision) needs the run's ``run_started`` event, its last step
# and whether it ended: the head of the log and its tail. ``summarize_log`` reads those two ends only (a few KiB of a log of
# any length); a ``LogFollower`` keeps a byte offset and folds only what was appended since it last looked, so a side
# panel's stream that follows a running run reads each byte once. ``workbench runs``, the runs panel, the JupyterLab
# side panel and the run handles' status read a row through here.
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
    end: dict | None = None  # the run's end (run_finished / run_failed) if logged after its last start and step
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


def summarize_log(path: str | Path, size: int | None = None) -> LogSummary:
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
        summary.started, read = first_event(
            path, min(HEAD_BYTES, tail_start), lambda e: e.get("type") == "run_started" and _rank0(e)
        )
        summary.bytes_read += read
    summary.fold(tail)
    return summary


class LogFollower:
    """A run log's summary kept up to date by reading only what was appended since the last ``poll``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.summary: LogSummary | None = None
        self.bytes_read = 0  # all bytes this follower read from the log (the tests' witness that it reads little)

    def poll(self) -> LogSummary:
        size = complete_size(self.path)
        s = self.summary
        if s is None or size < s.offset or size - s.offset > CATCH_UP_BYTES:  # first look, replaced, or far behind
            self.summary = summarize_log(self.path, size)
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
# A log longer than SAMPLE_ABOVE_BYTES whose writer kept an index (events.log.EventWriter: the offsets of its rare events
# and of an anchor step every ANCHOR_BYTES) is read in three parts: its tail exactly, every rare event the index names
# (read one line each), and SAMPLE_WINDOWS small windows at evenly spaced byte offsets before the tail, of which the
# first event of each series type and rank is kept (the older part of each chart: one point per window). The bytes
# read do not grow with the log, only the index's rare events do. A log without an index is read whole by the caller.
SAMPLE_ABOVE_BYTES = 8 << 20  # ~25k steps: a shorter log is read whole (exactly what following it from its start draws)
SAMPLE_WINDOWS = 1000  # (each window: WINDOW_BYTES, grown to hold a complete line)
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


def _indexed(log: LogFile, entries: list, lo: int, hi: int) -> tuple[dict, int] | None:
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


def _rare_and_sampled(log: LogFile, entries: list, lo: int, hi: int, windows: int | None) -> tuple[list, int] | None:
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


def read_overview(path: str | Path, recent_steps: int, windows: int | None = None) -> LogSlice | None:
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
        steps = [
            e.get("step") for e in events if e.get("type") == "step" and _rank0(e) and isinstance(e.get("step"), int)
        ]
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


def read_window(
    path: str | Path, first: int, last: int, full_bytes: int | None = None, windows: int | None = None
) -> LogSlice | None:
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
