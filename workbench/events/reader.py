"""The one reader of an event log: every package reads a run's events through here (a run's row and chart slices in
``runs.reader``, the monitor's state, the exporters, the report, the benches); no other module opens a log to read.

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
from pathlib import Path
from typing import Callable, Iterator, Optional

from .log import index_path
from .schema import event_from_dict

log = logging.getLogger("workbench.events")
CHUNK = 64 << 10  # a backwards read of a log's tail, or a forward read of its head, goes a chunk at a time
WINDOW_BYTES = 4 << 10  # a window read at an offset (a sample of a long log, an indexed event's line)
WINDOW_MAX_BYTES = 1 << 20  # a window grows until it holds a complete line (a GRPO rollout's samples are long)
_reported: set = set()  # (log, offset) of the bad lines reported in this process


def report_bad_line(path: Path, offset: int, line_no: Optional[int], line: bytes, bad_lines: Optional[list] = None):
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


def _loads(line: bytes) -> Optional[dict]:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def parse_line(line: bytes, path: Path, offset: int, line_no: Optional[int] = None,
               bad_lines: Optional[list] = None) -> Optional[dict]:
    """The event of one complete line; None for a blank line, or for a bad one (reported: the module's rule)."""
    event = _loads(line)
    if event is None and line.strip():
        report_bad_line(path, offset, line_no, line, bad_lines)
    return event


def parse_block(data: bytes, path: Path, offset: int, line_no: Optional[int] = None,
                bad_lines: Optional[list] = None, offsets: bool = False) -> list:
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
        self.line: Optional[int] = 1 if offset == 0 else None
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
                block, rest = buf[: end + 1], buf[end + 1:]
                if block:
                    self._block = block
                    yield block
                    self.offset += len(block)
                    if self.line is not None:
                        self.line += block.count(b"\n")
                if not data:
                    return

    def parse_line(self, line: bytes, offset: int) -> Optional[dict]:
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
                data = data[end + 1:]
    except OSError:
        pass
    return {}, pos


def read_tail(path: str | Path, size: int, done: Optional[Callable[[list], bool]] = None) -> tuple[list[dict], int]:
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

    def lines(self, start: int, stop: int, first_line_cut: bool, want: Optional[int] = None) -> tuple[list, int]:
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


def read_index(log_file: str | Path) -> Optional[list[dict]]:
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
