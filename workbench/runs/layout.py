"""What a run directory is and what it holds: the one definition every package uses.

    runs/NAME/
      config.json          the run's RunConfig (this or the event log makes a folder a run directory)
      events.jsonl         the event log (workbench.events)
      checkpoints/step-NNNNNNN/   resumable checkpoints (workbench.runs.checkpoints)
      adapter/ | model/    the trained LoRA adapter (peft) | the full fine-tune's weights
      merged/, exports/    merged copy, deployable exports (workbench.export)
      eval_results.json    task metrics of the run's model (workbench.eval)
      worker.pid, worker.log, foreground.pid, STOP   the process that trains it, and the stop request
"""
from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from ..config import ConfigError, RunConfig
from ..config.arguments import existing_directory

CONFIG_FILE = "config.json"
EVENTS_FILE = "events.jsonl"
CHECKPOINTS_DIR = "checkpoints"
ADAPTER_DIR = "adapter"
MODEL_DIR = "model"
MERGED_DIR = "merged"
STOP_FILE = "STOP"  # created by RunHandle.stop(); polled between optimizer steps
WORKER_PID = "worker.pid"
WORKER_LOG = "worker.log"
# The pid of a run trained in the user's own process (not launched), so that `workbench runs` and the runs
# panel can tell a live foreground run from one that died; the launcher writes worker.pid instead.
FOREGROUND_PID = "foreground.pid"
LAUNCHED_ENV = "WORKBENCH_LAUNCHED"  # set by launch() for its worker process


def is_run_dir(path: str | Path) -> bool:
    """A run directory is a folder holding a run's config.json or its events.jsonl: the engine and the launcher
    write both as a run starts, and an event log copied on its own (to read or export it) is a run too."""
    path = Path(path)
    return (path / CONFIG_FILE).is_file() or (path / EVENTS_FILE).is_file()


def run_dirs(runs_dir: str | Path) -> list[Path]:
    """The run directories under ``runs_dir``, sorted by name (= start time by default); none when the folder
    does not exist."""
    root = Path(runs_dir)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if is_run_dir(p))


def existing_run_dir(value: str) -> Path:
    """An argparse type: a run directory named on the command line (exit code 2 naming what is wrong)."""
    path = existing_directory(value)
    if not is_run_dir(path):
        raise argparse.ArgumentTypeError(f"{value!r} is not a run directory (it holds no {CONFIG_FILE} or {EVENTS_FILE})")
    return path


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
    if (run_dir / EVENTS_FILE).exists() and not cfg.checkpointing.resume_from:
        raise ConfigError([("output.run_name", f"{run_dir} already holds a run: choose another name, or continue it "
                            "with checkpointing.resume_from=latest")])
