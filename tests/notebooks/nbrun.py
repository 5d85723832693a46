"""Run a walkthrough notebook headless with its parameters cell overridden (PARAMETERS: the values the tests use)."""

from __future__ import annotations

import re
from pathlib import Path

import nbclient
import nbformat

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


# Run parameters per notebook: the one table both runners use (the browser step, tests/ui/test_browser.py, and the
# headless `pytest -m notebooks`); checks.py says what each run must show. "{runs}" stands for the run's own runs
# folder. A new notebook adds its row here and its check there; both runners take every notebooks/*.ipynb.
PARAMETERS = {
    "01_quickstart.ipynb": dict(MODEL="tiny-glm4", MAX_STEPS=3, MICRO_BATCH=2, MAX_LENGTH=64, MAX_TOKENS=6),
    "02_precision_lab.ipynb": dict(MAX_STEPS=2, COLLAPSE_STEPS=4),
    "03_zero_and_offload.ipynb": dict(MAX_STEPS=2),
    "04_side_by_side_chat.ipynb": dict(MODEL="tiny-glm4", MAX_STEPS=2, MICRO_BATCH=2, MAX_LENGTH=64, MAX_TOKENS=6),
    # 05 and 07 train a screenshot model from random: the fewest steps after which it visibly answers in the action
    # format, measured on 2 AVX2 cores, one each: 05 (~40 s of training): 300 steps 40 of 40 held-out answers parse,
    # 200 steps 34/40, 150 steps 32/40, 100 steps 2/40 (the check wants >= 30: 200 is too thin a margin for another
    # machine); 07 (~130 s): 300 steps 83% of held-out steps parse, 250 steps 4 of 4 replies in one run, 200 steps
    # 30%; at 150 steps with LEARNING_RATE 6e-3, at 100 with 1e-2, and at 300 steps of MICRO_BATCH 4 or 2 none (what it
    # needs is rows seen, not steps or step size)
    "05_screenshots_to_actions.ipynb": dict(MAX_STEPS=300, MAX_TOKENS=64, RUNS_DIR="{runs}"),
    "06_export_and_quantize.ipynb": dict(
        MODEL="tiny-glm4", MAX_STEPS=3, MICRO_BATCH=2, MAX_LENGTH=64, MAX_TOKENS=6, RUNS_DIR="{runs}"
    ),
    "07_phone_agent_episodes.ipynb": dict(
        MAX_STEPS=300,
        MAX_TOKENS=64,
        TASKS="web_search/exchange-rate,open_app/clock",
        EPISODE_STEPS=2,
        RUNS_DIR="{runs}",
    ),
    # 09 trains the screenshot agent as 07 does (300 steps), then two fine-tunes of 150 steps from it: on its rows with
    # the recorded demonstrations (x100) and, the control, on its rows alone (on 2 loaded cores, one thread each:
    # demonstrated steps exact 0.05 -> 0.45, control 0.05; held-out demonstrations 0.062 -> 0.188, control 0.062)
    "09_own_app.ipynb": dict(AGENT_STEPS=300, TUNE_STEPS=150, RUNS_DIR="{runs}"),
    "08_grpo_phone_actions.ipynb": dict(
        MODEL="tiny-glm4",
        SFT_STEPS=2,
        GRPO_STEPS=2,
        MISMATCH_STEPS=1,
        MICRO_BATCH=1,
        GROUP=2,
        MAX_NEW_TOKENS=6,
        EVAL_ROWS=2,
        MODES=["fp32", "bf16"],
        RUNS_DIR="{runs}",
    ),
}


def notebook_names() -> list[str]:
    """Every walkthrough notebook, the ones added later included."""
    return sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


def parameters(name: str, workdir: Path) -> dict:
    """``PARAMETERS[name]`` with "{runs}" made ``workdir/runs``; a notebook without a row is an error saying where to
    add one (its defaults may train for minutes)."""
    if name not in PARAMETERS:
        raise LookupError(f"{name} has no run parameters: add its row to PARAMETERS in {__file__}")
    runs = str(Path(workdir) / "runs")
    return {k: v.replace("{runs}", runs) if isinstance(v, str) else v for k, v in PARAMETERS[name].items()}


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
    # store_widget_state=False: each plotly FigureWidget's saved state carries plotly.js (5 MB of _esm), which made
    # an executed copy up to 200 MB to write; the tests read the outputs, where each widget view still shows.
    nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        store_widget_state=False,
        resources={"metadata": {"path": str(workdir)}},
    ).execute()
    nbformat.write(nb, path)  # executed copy, kept with the test's temporary files
    return nb


def text_output(nb, index: int) -> str:
    return "".join(o.get("text", "") for o in nb.cells[index].outputs if o.get("output_type") == "stream")


def all_text(nb) -> str:
    return "\n".join(text_output(nb, i) for i in range(len(nb.cells)) if nb.cells[i].cell_type == "code")
