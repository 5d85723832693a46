"""Task metrics stored with a run: RUN_DIR/eval_results.json (single-step task metrics from workbench.eval, episode
metrics from workbench.agent), the run directory a served adapter came from, and the comparison table the panels
show."""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Iterable
from pathlib import Path

from .layout import run_dir_of

RESULTS_FILE = "eval_results.json"


def write_results(run_dir: str | Path, report, model: str) -> Path:
    """Store ``report`` (a task's report: ``.task`` and ``.to_dict(records=False)``, whose ``metrics`` are
    {model id: {mode: metrics}} and whose ``settings`` name the ``base``) under its task in
    RUN_DIR/eval_results.json, keeping the other tasks' entries; ``model`` is the id this run's adapter was served
    as."""
    path = Path(run_dir) / RESULTS_FILE
    try:
        stored = _read(path)
    except (OSError, ValueError) as err:
        stored = {}
        if path.exists():  # unreadable: kept aside, not overwritten with this task's entry alone
            aside = path.with_suffix(".unreadable.json")
            path.replace(aside)
            warnings.warn(
                f"{path} could not be read ({err}): moved to {aside.name}, the other tasks' results it held are there",
                stacklevel=2,
            )
    stored.setdefault("tasks", {})[report.task] = {
        **report.to_dict(records=False),
        "model": model,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(stored, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)
    return path


def read_results(run_dir: str | Path) -> dict:
    """RUN_DIR/eval_results.json ({"tasks": {name: entry}}); empty when there is none, or (with a warning that
    names it) when it is unreadable."""
    path = Path(run_dir) / RESULTS_FILE
    try:
        return _read(path)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        warnings.warn(f"{path} could not be read ({err}): its task metrics are not shown", stacklevel=2)
        return {}


def _read(path: Path) -> dict:
    stored = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(stored, dict):
        raise ValueError(f"a JSON {type(stored).__name__}, not an object")
    return stored


def served_run_dir(card: dict) -> Path | None:
    """The run directory a served model came from, when it is a local run's: an adapter whose model card's ``root``
    is the run's adapter/ folder or the run itself, or a model served as a base whose root is a run's full
    fine-tune (model/), merged/ folder or export. None for a base model of no run and for plain adapter folders."""
    root = card.get("root")
    if not root:
        return None
    run_dir = run_dir_of(root)
    if card.get("parent"):
        return run_dir
    return run_dir if run_dir is not None and Path(root).expanduser() != run_dir else None


def metric_rows(run_dirs: Iterable[str | Path], task: str) -> list[dict]:
    """One row per evaluated model and thinking mode of ``task`` across runs: each run's adapter under the run's
    name, and each base model once (``"<id> (base)"``); the scalar metrics as columns (``failed``: requests that got
    no answer, the metrics being over the ``n`` answered ones), and ``errors``, the first reasons, when any failed."""
    rows, bases = [], set()
    for run_dir in run_dirs:
        entry = read_results(run_dir).get("tasks", {}).get(task)
        if not entry:
            continue
        base = entry.get("settings", {}).get("base")
        for model, by_mode in entry.get("metrics", {}).items():
            if model == entry.get("model"):
                label = Path(run_dir).name
            elif model == base and (model, tuple(by_mode)) not in bases:
                bases.add((model, tuple(by_mode)))
                label = f"{model} (base)"
            else:
                continue
            for mode, metrics in by_mode.items():
                row = {
                    "label": label,
                    "mode": mode,
                    **{k: v for k, v in metrics.items() if not isinstance(v, (dict, list))},
                }
                if metrics.get("failed"):
                    row["errors"] = list(metrics.get("errors") or [])
                rows.append(row)
    return rows


def result_tasks(run_dirs: Iterable[str | Path]) -> list[str]:
    """The tasks any of the runs was evaluated on."""
    return sorted({t for d in run_dirs for t in read_results(d).get("tasks", {})})
