"""What a run directory is and what it holds: the one definition every package uses.

runs/NAME/
  config.json          the run's RunConfig (this or the event log makes a folder a run directory)
  events.jsonl         the event log (workbench.events)
  events.jsonl.index   where in the log its rare events and an anchor step every MiB are (EventWriter)
  checkpoints/step-NNNNNNN/   resumable checkpoints (workbench.runs.checkpoints)
  adapter/ | model/    what the run trained, saved at its end: the LoRA adapter (peft) | the full fine-tune's
                       model (transformers): ``trained_weights``
  merged/, exports/NAME/   the adapter merged into the base (checkpointing.merge), deployable exports
                       (workbench.export): model directories of the run's (``trained_at``)
  eval_results.json    task metrics of the run's model (workbench.runs.results: eval's and agent's)
  episodes/<stamp>/    phone-agent episodes of the run's model (workbench.agent.store)
  worker.pid, worker.log, foreground.pid, STOP   the process that trains it, and the stop request
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from ..config import ConfigError, RunConfig, config_from_dict, read_config_file
from ..config.arguments import existing_directory
from ..config.loading import with_renamed_keys

CONFIG_FILE = "config.json"
EVENTS_FILE = "events.jsonl"  # the run's event log (workbench.events: its writer and its one reader)
CHECKPOINTS_DIR = "checkpoints"
ADAPTER_DIR = "adapter"
ADAPTER_CONFIG = "adapter_config.json"  # peft writes it after the adapter's weights: present = saved
MODEL_DIR = "model"
MODEL_CONFIG = "config.json"  # transformers' model config inside model/ (not the run's own config.json)
# What a model directory holds beside its config.json and a run directory never does: it tells the two apart
MODEL_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "tokenizer_config.json",
    "model.onnx",
)
MERGED_DIR = "merged"
EXPORTS_DIR = "exports"
EPISODES_DIR = "episodes"
STOP_FILE = "STOP"  # created by RunHandle.stop(); polled between optimizer steps
WORKER_PID = "worker.pid"
WORKER_LOG = "worker.log"
# The pid of a run trained in the user's own process (not launched), so that `workbench runs` and the runs
# panel can tell a live foreground run from one that died; the launcher writes worker.pid instead.
FOREGROUND_PID = "foreground.pid"
LAUNCHED_ENV = "WORKBENCH_LAUNCHED"  # set by launch() for its worker process


def is_run_dir(path: str | Path) -> bool:
    """A run directory is a folder holding a run's config.json or its events.jsonl: the engine and the launcher
    write both as a run starts, and an event log copied on its own (to read or export it) is a run too. A model
    directory's config.json (transformers') does not make it one."""
    path = Path(path)
    return (path / EVENTS_FILE).is_file() or ((path / CONFIG_FILE).is_file() and not is_model_dir(path))


def is_model_dir(path: str | Path) -> bool:
    """A saved model (transformers: a config.json with weights or a tokenizer): a full fine-tune's model/, a merged
    or exported model, a base model on disk."""
    path = Path(path)
    return (path / MODEL_CONFIG).is_file() and any((path / name).is_file() for name in MODEL_FILES)


def run_dirs(runs_dir: str | Path) -> list[Path]:
    """The run directories under ``runs_dir``, sorted by name (= start time by default); none when the folder
    does not exist."""
    root = Path(runs_dir)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if is_run_dir(p))


def run_dir_of(path: str | Path) -> Path | None:
    """The run directory ``path`` is or belongs to: itself, or the run holding it as its adapter/, model/ or merged/
    folder or as one of its exports (exports/NAME); None for anything else (a plain adapter folder, a model
    directory of no run, a hub id)."""
    path = Path(path).expanduser()
    # the parent first: a run's model/ (transformers) holds a config.json of its own
    if path.name in (ADAPTER_DIR, MODEL_DIR, MERGED_DIR) and is_run_dir(path.parent):
        return path.parent
    if path.parent.name == EXPORTS_DIR and is_run_dir(path.parent.parent):
        return path.parent.parent
    return path if is_run_dir(path) else None


@dataclass(frozen=True)
class TrainedWeights:
    """What a run trained, as saved at its end."""

    kind: Literal["adapter", "model"]  # a LoRA adapter (peft format) | a full fine-tune (a transformers model)
    path: Path


def trained_weights(run_dir: str | Path) -> TrainedWeights | None:
    """The run's adapter/ (LoRA) or model/ (a full fine-tune, lora.enabled=false) once saved; None before that
    (the run is going, or ended before saving them)."""
    run_dir = Path(run_dir)
    if (run_dir / ADAPTER_DIR / ADAPTER_CONFIG).is_file():
        return TrainedWeights("adapter", run_dir / ADAPTER_DIR)
    if (run_dir / MODEL_DIR / MODEL_CONFIG).is_file():
        return TrainedWeights("model", run_dir / MODEL_DIR)
    return None


def whole_model(run_dir: str | Path) -> Path | None:
    """The whole model a run saved, for what starts from it (a recipe's start, a DAgger round): a full fine-tune's
    model/, else its merged/ (a LoRA run of checkpointing.merge_adapter true); None without."""
    weights = trained_weights(run_dir)
    if weights is not None and weights.kind == "model":
        return weights.path
    return Path(run_dir) / MERGED_DIR if is_model_dir(Path(run_dir) / MERGED_DIR) else None


@dataclass(frozen=True)
class TrainedAt:
    """What a path names to serve or evaluate: the trained weights (None: a run that saved none yet) and the run
    they belong to (None: an adapter or model directory of no run)."""

    weights: TrainedWeights | None
    run_dir: Path | None


def trained_at(path: str | Path) -> TrainedAt | None:
    """A run directory (its adapter/ or model/), a run's adapter/, model/ or merged/ folder or export, a peft adapter
    folder or a model directory; None when ``path`` is none of these."""
    path = Path(path).expanduser()
    run_dir = run_dir_of(path)
    if run_dir is not None and run_dir == path:
        return TrainedAt(trained_weights(path), path)
    if (path / ADAPTER_CONFIG).is_file():
        return TrainedAt(TrainedWeights("adapter", path), run_dir)
    if is_model_dir(path):
        return TrainedAt(TrainedWeights("model", path), run_dir)
    return None


def has_adapter(run_dir: str | Path) -> bool:
    """Whether the run saved a LoRA adapter (what serving it next to its base and exporting it start from)."""
    weights = trained_weights(run_dir)
    return weights is not None and weights.kind == "adapter"


def run_config(run_dir: str | Path) -> RunConfig:
    """The run's saved configuration (RUN_DIR/config.json), schema-checked only: its data files and devices need
    not exist where it is read; keys renamed since it was saved are read under their new names. ConfigError (every
    problem) when it is not a valid one."""
    return config_from_dict(with_renamed_keys(read_config_file(Path(run_dir) / CONFIG_FILE)), checks=False)


def base_model(run_dir: str | Path) -> str:
    """The model the run fine-tuned (its config's model.source: a built-in name, a local directory or a hub id),
    which serving or measuring its adapter loads first."""
    return run_config(run_dir).model.source


def exports_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / EXPORTS_DIR


def existing_run_dir(value: str) -> Path:
    """An argparse type: a run directory named on the command line (exit code 2 naming what is wrong)."""
    path = existing_directory(value)
    if not is_run_dir(path):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a run directory (it holds no {CONFIG_FILE} or {EVENTS_FILE})"
        )
    return path


def existing_trained(value: str) -> Path:
    """An argparse type: a run directory or a model a run made (its merged/ or an export), named on the command line
    (exit code 2 naming what is wrong)."""
    path = existing_directory(value)
    if trained_at(path) is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is neither a run directory (it holds no {CONFIG_FILE} or "
            f"{EVENTS_FILE}) nor a model directory or adapter a run saved"
        )
    return path


def new_run_dir(cfg: RunConfig) -> Path:
    name = cfg.output.run_name or datetime.now().strftime("%Y%m%d-%H%M%S-%f")[:-3]
    run_dir = Path(cfg.output.runs_dir) / name
    # The schema refuses path-like names; this also catches a symlink inside runs_dir pointing elsewhere.
    if run_dir.resolve().parent != Path(cfg.output.runs_dir).resolve():
        raise ConfigError(
            [
                (
                    "output.run_name",
                    f"{name!r}: the run directory {run_dir} resolves to "
                    f"{run_dir.resolve()}, outside output.runs_dir: use another name",
                )
            ]
        )
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # runs_dir is (under) a file, or not writable
        raise ConfigError([("output.runs_dir", f"cannot create {run_dir}: {err.strerror}")]) from None
    return run_dir


def refuse_existing_run(cfg: RunConfig, run_dir: Path) -> None:
    """A run directory that already holds a run is only reused to continue it."""
    if (run_dir / EVENTS_FILE).exists() and not cfg.checkpointing.resume_from:
        raise ConfigError(
            [
                (
                    "output.run_name",
                    f"{run_dir} already holds a run: choose another name, or continue it "
                    "with checkpointing.resume_from=latest",
                )
            ]
        )
