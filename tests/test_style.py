"""One style for the tree: ``ruff check`` and ``ruff format --check`` pass (pyproject's [tool.ruff]: line 120, the
E, F, W, I and UP rules at Python 3.10). Fix with ``.venv/bin/ruff check --fix . && .venv/bin/ruff format .``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_check_passes():
    result = _ruff("check", "--output-format", "concise", ".")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_ruff_format_leaves_every_file_as_it_is():
    result = _ruff("format", "--check", ".")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
