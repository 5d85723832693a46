"""Every test file of a marker that only a CI step runs (the default suite deselects it) is named in that step of
.ci/run: a file marked ``gguf``, ``vllm`` or ``browser`` and left out of its step would never run anywhere."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STEP_MARKERS = ("gguf", "vllm", "browser")  # each run whole by one CI step: `pytest -m MARKER FILES`


def marked_files(marker: str) -> list[str]:
    """The test files that mark a test (or the module) with ``marker``."""
    pattern = re.compile(rf"pytest\.mark\.{marker}\b")
    return sorted(
        str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py") if pattern.search(p.read_text("utf-8"))
    )


def step_files(run: str, marker: str) -> set[str]:
    """The files the ``pytest -m MARKER`` command of .ci/run names (its continuation lines included)."""
    command = re.search(rf"pytest -m {marker}\b((?:[^\n]*\\\n)*[^\n]*)", run)
    assert command, f".ci/run runs no `pytest -m {marker}`"
    return set(re.findall(r"tests/[\w/]+\.py", command.group(1)))


def test_every_file_of_a_step_marker_is_run_by_its_step():
    run = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    for marker in STEP_MARKERS:
        files = marked_files(marker)
        assert files, f"no test is marked {marker}"
        missing = sorted(set(files) - step_files(run, marker))
        assert not missing, f"marked {marker} but not in .ci/run's `pytest -m {marker}` step: {missing}"
