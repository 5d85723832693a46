"""`pip install -e ".[test]"` then `pytest`: without the JupyterLab extension's package (scripts/setup.sh installs it),
collection stops with one line saying what installs it (the other folders' tests collect without it: the check
fires only when this folder is asked for, as `pytest` alone asks for every folder)."""
import subprocess
import sys

from tests.conftest import REPO

HIDDEN = "import sys; sys.modules['workbench_jupyterlab'] = None; import pytest; sys.exit(pytest.main(sys.argv[1:]))"


def _collect(*paths: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HIDDEN, "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


def test_without_the_extension_package_collection_names_the_setup_command():
    done = _collect("tests/extensions/jupyterlab")
    assert done.returncode == 4, done.stdout + done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert lines == ["ERROR: tests/extensions/jupyterlab need the workbench_jupyterlab package, which "
                     "`bash scripts/setup.sh --test` installs (or: pip install -e extensions/jupyterlab)"]
