"""Merge training files into one: ``workbench data merge --out OUT.jsonl A.jsonl B.jsonl [--repeat B.jsonl=N]``.

What a run reads is one file (``data.train``); a person's demonstrations or corrections (``workbench.agent.demonstrate``)
join the rows an agent was trained on through this. Every input is checked first as ``workbench data check`` checks it
(rows, images, actions, runtime format): with any problem nothing is written and every problem is reported. Each
row is copied as it is, except its image paths: a path relative to its own file's folder is rewritten relative to the
output's folder, so the merged file shows the same screenshots wherever it is written (absolute paths and data: URLs
stay). ``--repeat FILE=N`` writes that file's rows N times: a few demonstrations among thousands of rows are
otherwise seen a handful of times in a run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.files import read_jsonl
from ..image_io import url_scheme
from .check import check_file


@dataclass
class Merged:
    path: str
    rows: int = 0  # rows written (repeats included)
    per_file: dict = field(default_factory=dict)  # input -> (its rows, times written)
    problems: list[str] = field(default_factory=list)  # "file:line: why" of the inputs; nothing written when any


def _moved(url: Any, source_dir: Path, out_dir: Path) -> Any:
    """An image reference of a row in ``source_dir`` as seen from ``out_dir``: a relative file path rewritten, the
    rest (absolute paths, data: URLs, what is no string) as it is."""
    if not isinstance(url, str) or not url.strip() or Path(url).is_absolute():
        return url
    if url_scheme(url):  # data: (or a scheme the checks refused already)
        return url
    return os.path.relpath(source_dir / url, out_dir)


def moved_row(row: dict, source_dir: Path, out_dir: Path) -> dict:
    """``row`` (a chat, instruction or preference row of a file in ``source_dir``) with its image paths relative to
    ``out_dir``."""
    row = dict(row)
    if isinstance(row.get("images"), list):
        row["images"] = [_moved(u, source_dir, out_dir) for u in row["images"]]
    for key in ("messages", "prompt", "chosen", "rejected"):  # a chat row's messages, a preference pair's three
        if isinstance(row.get(key), list):
            row[key] = _moved_messages(row[key], source_dir, out_dir)
    return row


def _moved_messages(messages: list, source_dir: Path, out_dir: Path) -> list:
    """``messages`` with their image parts' paths relative to ``out_dir``."""
    moved = []
    for m in messages:
        if isinstance(m, dict) and isinstance(m.get("content"), list):
            parts = []
            for p in m["content"]:
                if isinstance(p, dict) and p.get("type") == "image_url" and isinstance(p.get("image_url"), dict):
                    url = _moved(p["image_url"].get("url"), source_dir, out_dir)
                    p = {**p, "image_url": {**p["image_url"], "url": url}}
                parts.append(p)
            m = {**m, "content": parts}
        moved.append(m)
    return moved


def merge_files(out: str | Path, inputs: Sequence[str | Path], repeat: dict | None = None) -> Merged:
    """Write the rows of ``inputs`` (in order; ``repeat``: input -> times, default 1) to ``out``. Nothing is written
    when an input has a problem (``Merged.problems``) or ``out`` is one of the inputs."""
    out = Path(out)
    repeat = {str(Path(k)): v for k, v in (repeat or {}).items()}
    merged = Merged(str(out))
    unknown = sorted(set(repeat) - {str(Path(p)) for p in inputs})
    merged.problems += [f"--repeat {name}: not one of the files to merge" for name in unknown]
    merged.problems += [f"--repeat {name}={n}: give a count of at least 1" for name, n in repeat.items() if n < 1]
    if any(Path(p).resolve() == out.resolve() for p in inputs):
        merged.problems.append(f"{out}: the output is one of the inputs; write the merge to a new file")
    for path in inputs:
        merged.problems += check_file(path).problems
    if merged.problems:
        return merged
    out.parent.mkdir(parents=True, exist_ok=True)
    out_dir = out.parent.resolve()
    with open(out, "w", encoding="utf-8") as fh:
        for path in inputs:
            source_dir = Path(path).parent.resolve()
            rows = read_jsonl(path)  # checked above: every line is a row
            times = repeat.get(str(Path(path)), 1)
            lines = [json.dumps(moved_row(row, source_dir, out_dir), ensure_ascii=False) for row in rows]
            for _ in range(times):
                fh.write("".join(line + "\n" for line in lines))
            merged.per_file[str(path)] = (len(rows), times)
            merged.rows += len(rows) * times
    return merged
