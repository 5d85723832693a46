"""Run the ``workbench`` command as the user does: a separate process, this checkout's code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def run_cli(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
