"""The walkthrough notebooks: committed clean, each with run parameters (nbrun.py) and a check (checks.py); and, with
``-m notebooks``, each run top to bottom in a real kernel (nbclient) and checked, for a machine without Chromium. CI
runs them once, in JupyterLab (the browser step, tests/ui/test_browser.py), with the same parameters and checks."""

import json

import nbformat
import pytest

from .checks import CHECKS, check
from .nbrun import NOTEBOOKS, PARAMETERS, execute, notebook_names, parameters, parameters_cell

NAMES = notebook_names()


def test_every_notebook_has_run_parameters_and_a_check():
    assert len(NAMES) >= 8 and sorted(PARAMETERS) == NAMES and sorted(CHECKS) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_committed_clean_with_kernelspec_and_parameters(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert parameters_cell(nb) == 1
    raw = json.loads((NOTEBOOKS / name).read_text())  # nbformat.read fills missing ids in (with a warning)
    assert all("id" in cell for cell in raw["cells"]), f"{name}: a cell without an id (a future nbformat error)"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, f"{name}: commit notebooks with outputs cleared"


@pytest.mark.notebooks
@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_headless_and_shows_what_it_says(tmp_path, name):
    check(name, execute(name, tmp_path, **parameters(name, tmp_path)), tmp_path)
