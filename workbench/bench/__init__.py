"""Benchmarks that print figures (speed targets live here, not in timed tests)."""

from __future__ import annotations

import json
import subprocess
import sys


def run_child(module: str, argv: list, name: str) -> dict | None:
    """Run ``python -m module *argv --only name`` (a benchmark's child-process mode, alone on the cores) and return
    the dict it printed on its ``RESULT`` line; None (its stderr printed) when it failed."""
    out = subprocess.run([sys.executable, "-m", module, *argv, "--only", name], capture_output=True, text=True)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode or not line:
        print(f"{name} failed:\n{out.stderr[-3000:]}", file=sys.stderr)
        return None
    return json.loads(line[0][len("RESULT ") :])
