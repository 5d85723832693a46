"""Notebooks the frontend's commands open: a fine-tune notebook from the packaged template, the dashboard, a
monitor attached to a run, two runs compared. Each is a few cells over the existing panels (``workbench.ui``):
the notebook shows what the user could have typed, and keeps working after the side panel is closed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from string import Template

import nbformat
from nbformat import v4

TEMPLATE = Path(__file__).parent / "templates" / "finetune.ipynb"
KINDS = ("finetune", "dashboard", "monitor", "compare")


def runs_dir_for(root_dir: Path, runs_dir: Path) -> str:
    # the kernel starts in the notebook's folder (the server root): a relative path there when the runs are inside it
    try:
        return (
            Path(os.path.relpath(runs_dir.resolve(), root_dir.resolve())).as_posix()
            if runs_dir.resolve().is_relative_to(root_dir.resolve())
            else str(runs_dir.resolve())
        )
    except ValueError:
        return str(runs_dir.resolve())


def _notebook(cells: list[tuple[str, str]]):
    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [v4.new_markdown_cell(src) if kind == "md" else v4.new_code_cell(src) for kind, src in cells]
    return nb


def build(kind: str, runs_dir: str, runs: list[str], template: Path | None = None):
    """The notebook of ``kind`` (one of KINDS) for ``runs`` (one run to monitor, two to compare)."""
    r = json.dumps(runs_dir)
    if kind == "finetune":
        # $runs_dir in the template's cells: the runs directory as a Python string literal
        nb = nbformat.read(str(template or TEMPLATE), as_version=4)
        for cell in nb.cells:
            cell.source = Template(cell.source).safe_substitute(runs_dir=r)
        return nb
    if kind == "dashboard":
        return _notebook(
            [
                ("md", f"# Workbench\nConfig, plan, launch & monitor, runs and chat over the runs in `{runs_dir}`."),
                ("code", f"from workbench.ui import Workbench\n\nWorkbench(runs_dir={r})"),
            ]
        )
    if kind == "monitor":
        (name,) = runs
        path = json.dumps(f"{runs_dir}/{name}")
        return _notebook(
            [
                (
                    "md",
                    f"# Run {name}\nThe live monitor attached to the run (it may already be running: "
                    "attaching does not disturb it).",
                ),
                (
                    "code",
                    f"from workbench.ui import RunMonitor\n\nmonitor = RunMonitor()\nmonitor.attach({path})\nmonitor",
                ),
            ]
        )
    if kind == "compare":
        names = json.dumps(list(runs))
        return _notebook(
            [
                ("md", f"# {runs[0]} vs {runs[1]}\nLoss curves and the configuration fields that differ."),
                ("code", f"from workbench.ui import RunsPanel\n\nruns = RunsPanel({r})\nruns.compare({names})\nruns"),
            ]
        )
    raise ValueError(kind)


def write_new(root_dir: Path, folder: Path, stem: str, nb, reuse: bool = False) -> Path:
    """Save ``nb`` as ``folder/stem.ipynb`` (``stem-1``, ``stem-2``... when taken: a user's notebook is never
    overwritten; with ``reuse``, an existing ``stem.ipynb`` is returned as it is); returns the path relative to
    ``root_dir``."""
    folder.mkdir(parents=True, exist_ok=True)
    path, n = folder / f"{stem}.ipynb", 0
    if reuse and path.is_file():
        return path.relative_to(root_dir)
    while path.exists():
        n += 1
        path = folder / f"{stem}-{n}.ipynb"
    nbformat.write(nb, str(path))
    return path.relative_to(root_dir)
