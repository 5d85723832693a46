"""Run directories: where a run's config, events, checkpoints and adapter live, and the stop request."""
from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from ..config import ConfigError, RunConfig, save_config
from ..distributed.context import AGENT_ENV

STOP_FILE = "STOP"  # created by RunHandle.stop(); polled between optimizer steps
# The pid of a run trained in the user's own process (not launched), so that `workbench runs` and the runs
# panel can tell a live foreground run from one that died; the launcher writes worker.pid instead.
FOREGROUND_PID = "foreground.pid"
LAUNCHED_ENV = "WORKBENCH_LAUNCHED"  # set by launch() for its worker process


def new_run_dir(cfg: RunConfig) -> Path:
    name = cfg.output.run_name or datetime.now().strftime("%Y%m%d-%H%M%S-%f")[:-3]
    run_dir = Path(cfg.output.runs_dir) / name
    # The schema refuses path-like names; this also catches a symlink inside runs_dir pointing elsewhere.
    if run_dir.resolve().parent != Path(cfg.output.runs_dir).resolve():
        raise ConfigError([("output.run_name", f"{name!r}: the run directory {run_dir} resolves to "
                            f"{run_dir.resolve()}, outside output.runs_dir: use another name")])
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # runs_dir is (under) a file, or not writable
        raise ConfigError([("output.runs_dir", f"cannot create {run_dir}: {err.strerror}")]) from None
    return run_dir


def refuse_existing_run(cfg: RunConfig, run_dir: Path) -> None:
    """A run directory that already holds a run is only reused to continue it."""
    if (run_dir / "events.jsonl").exists() and not cfg.checkpointing.resume_from:
        raise ConfigError([("output.run_name", f"{run_dir} already holds a run: choose another name, or continue it "
                            "with checkpointing.resume_from=latest")])


def open_run_dir(cfg: RunConfig, run_dir: str | Path | None, ctx) -> Path:
    """Rank 0 names the run directory, checks it and saves the config; every rank gets the same
    verdict (no rank left waiting)."""
    verdict = None
    if ctx.is_main:
        try:
            run_dir = Path(run_dir) if run_dir else new_run_dir(cfg)
            run_dir.mkdir(parents=True, exist_ok=True)
            refuse_existing_run(cfg, run_dir)
            save_config(cfg, run_dir / "config.json")
            (run_dir / STOP_FILE).unlink(missing_ok=True)
            if os.environ.get(LAUNCHED_ENV) != "1" and not os.environ.get(AGENT_ENV):
                (run_dir / FOREGROUND_PID).write_text(str(os.getpid()))
        except ConfigError as err:
            verdict = err.problems
    run_dir, verdict = ctx.broadcast_object((str(run_dir), verdict))
    if verdict:
        raise ConfigError(verdict)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)  # other nodes: the shared run directory may not be visible yet
    return run_dir
