"""The one reader of JSONL files (config.files): rows, task files and stored episodes are read line by line, a bad
line named by its number with why it is not JSON."""

from __future__ import annotations

import pytest

from workbench.config.files import UnreadableFile, jsonl_lines, read_jsonl


def test_each_non_blank_line_is_read_with_its_number_or_why_it_is_not_json(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n\n  \n{"a": 2\n\xff\n[3]\n')
    lines = list(jsonl_lines(path))
    assert [(line.number, line.value) for line in lines] == [(1, {"a": 1}), (4, None), (5, None), (6, [3])]
    assert lines[1].error.startswith("not valid JSON (") and "column" in lines[1].error
    assert lines[2].error.startswith("not UTF-8 text (byte 0xff at column 1)")
    with pytest.raises(UnreadableFile, match=r"rows.jsonl:4: not valid JSON"):
        read_jsonl(path)


def test_read_jsonl_gives_the_values_and_names_a_file_it_cannot_read(tmp_path):
    (tmp_path / "ok.jsonl").write_text('{"a": 1}\n\n{"b": 2}\n', encoding="utf-8")
    assert read_jsonl(tmp_path / "ok.jsonl") == [{"a": 1}, {"b": 2}]
    with pytest.raises(UnreadableFile, match="missing.jsonl: file not found"):
        read_jsonl(tmp_path / "missing.jsonl")
