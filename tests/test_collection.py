"""`pip install -e ".[test]"` then `pytest`: without the JupyterLab extension's package (scripts/setup.sh installs it),
collection stops with one line saying what installs it when the extension's tests are collected, and only then: other
folders named, or the extension's folder ignored, collect without it."""

import subprocess
import sys

import pytest

from tests.conftest import EXTENSION_PACKAGE_MISSING, REPO

HIDDEN = "import sys; sys.modules['workbench_jupyterlab'] = None; import pytest; sys.exit(pytest.main(sys.argv[1:]))"


def _collect(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", HIDDEN, "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["tests/extensions/jupyterlab"],
        ["tests/extensions/"],
        ["tests/extensions/jupyterlab/test_handlers.py::test_runs_are_listed_with_status_and_last_metrics"],
    ],
)
def test_without_the_extension_package_collecting_its_tests_names_the_setup_command(args):
    done = _collect(*args)
    out = done.stdout + done.stderr
    assert done.returncode == 4, out
    assert out.strip().splitlines()[-1] == f"ERROR: {EXTENSION_PACKAGE_MISSING}" and "Traceback" not in out, out


@pytest.mark.parametrize(
    "args",
    [
        [
            "-m",
            "not slow",
            "tests/runs/",
            "tests/events/",
        ],  # `pytest $(ls -d tests/*/)`-style, the extension's left out
        # `pytest --ignore=tests/extensions tests`, on the few folders whose names start with "e" (collecting all: 20 s)
        ["--ignore=tests/extensions", "--ignore-glob=tests/[!e]*", "tests"],
        ["--ignore=tests/extensions/jupyterlab", "tests/extensions"],  # (nothing left: exit 5, no tests)
    ],
)
def test_without_the_extension_package_other_folders_collect(args):
    done = _collect(*args)
    out = done.stdout + done.stderr
    assert done.returncode in (0, 5) and EXTENSION_PACKAGE_MISSING not in out, out
    assert done.returncode == 5 or " collected" in out.strip().splitlines()[-1], out
