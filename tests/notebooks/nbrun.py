"""Run a walkthrough notebook headless with its parameters cell overridden (short test values)."""
from __future__ import annotations

import re
from pathlib import Path

import nbclient
import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def parameters_cell(nb) -> int:
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            return i
    raise LookupError("the notebook has no cell tagged 'parameters'")


def with_parameters(nb, **overrides):
    """Replace ``NAME = ...`` lines of the parameters cell (every override must name an existing parameter)."""
    cell = nb.cells[parameters_cell(nb)]
    src = cell.source
    for name, value in overrides.items():
        pattern = re.compile(rf"^{name}\s*=.*$", re.M)
        if not pattern.search(src):
            raise KeyError(f"parameter {name} not in the parameters cell")
        src = pattern.sub(lambda _: f"{name} = {value!r}", src)
    cell.source = src
    return nb


def prepare(name: str, workdir: Path, **overrides) -> Path:
    """A copy of ``notebooks/NAME`` in ``workdir`` with the parameters overridden; returns its path."""
    nb = with_parameters(nbformat.read(NOTEBOOKS / name, as_version=4), **overrides)
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / name
    nbformat.write(nb, out)
    return out


def execute(name: str, workdir: Path, timeout: int = 600, **overrides):
    path = prepare(name, workdir, **overrides)
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir)}}).execute()
    nbformat.write(nb, path)  # executed copy, kept with the test's temporary files
    return nb


def text_output(nb, index: int) -> str:
    return "".join(o.get("text", "") for o in nb.cells[index].outputs if o.get("output_type") == "stream")


def all_text(nb) -> str:
    return "\n".join(text_output(nb, i) for i in range(len(nb.cells)) if nb.cells[i].cell_type == "code")
