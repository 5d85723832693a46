"""Run directories: the one definition of what a run directory is and holds (``layout``: is it one, what it
trained, its base model), the layout of its checkpoints (``checkpoints``), a handle on a run's process and its
status (``handle``) and a run's row (``table``).
Reads and writes files only: no torch, no model (``checkpoints`` alone imports torch, for its weight files)."""

from .handle import RunHandle, attach
from .layout import (
    STOP_FILE,
    TrainedAt,
    TrainedWeights,
    base_model,
    existing_run_dir,
    existing_trained,
    exports_dir,
    has_adapter,
    is_model_dir,
    is_run_dir,
    new_run_dir,
    run_config,
    run_dir_of,
    run_dirs,
    trained_at,
    trained_weights,
)
from .table import RunRow, list_runs, run_row, runs_table

__all__ = [
    "RunHandle",
    "attach",
    "STOP_FILE",
    "TrainedAt",
    "TrainedWeights",
    "base_model",
    "existing_run_dir",
    "existing_trained",
    "exports_dir",
    "has_adapter",
    "is_model_dir",
    "is_run_dir",
    "new_run_dir",
    "run_config",
    "run_dir_of",
    "run_dirs",
    "trained_at",
    "trained_weights",
    "RunRow",
    "list_runs",
    "runs_table",
    "run_row",
]
