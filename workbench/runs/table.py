"""The runs of a runs directory, one typed row each: what ``workbench runs`` prints (``runs_table``) and the runs
panel lists."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..events import finite_number
from ..events.reader import LogFollower, summarize_log
from ..user_output import text_table
from .handle import attach
from .layout import EVENTS_FILE, run_dirs


@dataclass(frozen=True)
class RunRow:
    name: str
    path: Path
    status: str  # running | finished | stopped | failed (RunHandle.status)
    step: int  # the last step logged (0 before the first)
    total_steps: int | None
    loss: float | None  # the last step's loss; None before the first step or when it was not finite
    model: str | None
    precision: str | None  # the resolved precision mode


def run_row(run_dir: str | Path, follower: LogFollower | None = None) -> RunRow:
    """One run's row from its event log (only rank 0's events) and its worker's liveness. The log is read at its
    head and tail only (``reader.summarize_log``), or, with a ``follower`` of this run's log (a stream that keeps one),
    only what was appended since that follower last looked: the cost does not grow with the run."""
    run_dir = Path(run_dir)
    summary = follower.poll() if follower is not None else summarize_log(run_dir / EVENTS_FILE)
    started, last = summary.started, summary.last_step
    return RunRow(
        name=run_dir.name,
        path=run_dir,
        status=attach(run_dir).status(summary),
        step=last.get("step", 0),
        total_steps=started.get("total_steps"),
        loss=finite_number(last.get("loss")),
        model=(started.get("config") or {}).get("model", {}).get("source"),
        precision=(started.get("precision") or {}).get("mode"),
    )


def list_runs(runs_dir: str | Path) -> list[RunRow]:
    """One row per run of ``run_dirs(runs_dir)``."""
    return [run_row(d) for d in run_dirs(runs_dir)]


def runs_table(runs_dir: str | Path) -> str:
    """The runs of ``runs_dir`` as a text table (run, status, step/total, last loss, model, precision): what
    ``workbench runs`` and ``%workbench_runs`` print."""
    rows = list_runs(runs_dir)
    if not rows:
        return f"no runs in {runs_dir}"
    table = [["run", "status", "step", "loss", "model", "precision"]]
    for r in rows:
        step = f"{r.step}/{r.total_steps}" if r.total_steps else str(r.step)
        loss = f"{r.loss:.4f}" if r.loss is not None else "-"
        table.append([r.name, r.status, step, loss, r.model or "-", r.precision or "-"])
    return "\n".join(text_table(table, right=(2, 3)))
