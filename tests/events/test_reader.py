"""The one reader of an event log and its rule: a torn last line waits; a corrupt complete line is skipped and reported
once, with its line number."""

from __future__ import annotations

import logging

from workbench.events import read_events
from workbench.events.reader import LogReader, read_tail

GOOD = b'{"type": "note", "step": %d}\n'


def test_a_last_line_being_written_waits_for_its_newline(tmp_path, caplog):
    log = tmp_path / "log.jsonl"
    log.write_bytes(GOOD % 1 + b'{"type": "note", "st')
    reader = LogReader(log)
    with caplog.at_level(logging.WARNING, logger="workbench.events"):
        assert [e["step"] for e in reader.read()] == [1]
        assert reader.offset == len(GOOD % 1) and reader.read() == []
        with open(log, "ab") as fh:
            fh.write(b'ep": 2}\n')
        assert [e["step"] for e in reader.read()] == [2]
    assert not caplog.records and reader.bad_lines == [] and reader.line == 3


def test_a_corrupt_middle_line_is_skipped_and_reported_once_with_its_number(tmp_path, caplog):
    log = tmp_path / "corrupt.jsonl"
    log.write_bytes(GOOD % 1 + GOOD % 2 + b'{"type": "no\n' + b"[1, 2]\n" + GOOD % 5)
    with caplog.at_level(logging.WARNING, logger="workbench.events"):
        for _ in range(3):  # the monitor, a row and an exporter read it again and again: one report per line
            events, end = read_events(log, 0, typed=False)
            assert [e["step"] for e in events] == [1, 2, 5] and end == log.stat().st_size
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2 and "line 3 " in messages[0] and "line 4 " in messages[1], messages
    reader = LogReader(log)
    reader.read()
    assert [n for n, _ in reader.bad_lines] == [3, 4]


def test_a_read_from_mid_log_names_the_bad_lines_byte_offset(tmp_path, caplog):
    log = tmp_path / "tail.jsonl"
    body = b"".join(GOOD % i for i in range(1, 5000))
    log.write_bytes(body + b"garbage\n" + GOOD % 5000)
    with caplog.at_level(logging.WARNING, logger="workbench.events"):
        events, start = read_tail(log, log.stat().st_size, lambda evs: len(evs) > 3)
    assert events[-1]["step"] == 5000 and start > 0
    assert [r.getMessage() for r in caplog.records if f"byte {len(body)}" in r.getMessage()]
