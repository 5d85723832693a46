"""The extension's TypeScript unit tests (extensions/jupyterlab/test/*.test.ts: the side panel's and status bar's
number formats and loss sparkline), compiled with the TypeScript the extension builds with (package.json's
devDependency) and run by Node's built-in test runner. Node and npm are on the CI image; a missing one fails here.

TypeScript comes from extensions/jupyterlab/node_modules when a build installed it, else npm installs that one
package (~1 s from npm's cache) into ~/.cache/workbench/typescript-VERSION."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

EXT = REPO / "extensions" / "jupyterlab"


def _tsc() -> Path:
    local = EXT / "node_modules" / ".bin" / "tsc"
    if local.exists():
        return local
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is not installed (Node 20 + npm are on the CI image): the TypeScript unit tests need it")
    version = json.loads((EXT / "package.json").read_text())["devDependencies"]["typescript"]
    prefix = Path.home() / ".cache" / "workbench" / f"typescript-{re.sub(r'[^0-9.]', '', version)}"
    tsc = prefix / "node_modules" / ".bin" / "tsc"
    if not tsc.exists():
        done = subprocess.run(
            [
                npm,
                "install",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--prefer-offline",
                "--prefix",
                str(prefix),
                f"typescript@{version}",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0 and tsc.exists(), done.stdout + done.stderr
    return tsc


def test_the_extensions_typescript_unit_tests_pass(tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (Node 20 is on the CI image): the TypeScript unit tests need it")
    compiled = subprocess.run(
        [str(_tsc()), "-p", str(EXT / "tsconfig.test.json"), "--outDir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    files = sorted(str(p) for p in (tmp_path / "test").glob("*.test.js"))
    assert files, "no compiled test files"
    ran = subprocess.run([node, "--test", *files], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    counts = dict(re.findall(r"^# (tests|pass|fail) (\d+)$", ran.stdout, re.M))
    assert int(counts["tests"]) >= 6 and counts["fail"] == "0" and counts["pass"] == counts["tests"], ran.stdout[-2000:]
