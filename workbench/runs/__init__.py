"""Run directories: the one definition of what a run directory is and holds (``layout``), the layout of its
checkpoints (``checkpoints``), a handle on a run's process (``handle``) and a run's row (``table``).
Reads and writes files only: no torch, no model (``checkpoints`` alone imports torch, for its weight files)."""
from .handle import RunHandle, attach
from .layout import STOP_FILE, existing_run_dir, is_run_dir, new_run_dir, run_dirs
from .table import RunRow, list_runs, run_row

__all__ = ["RunHandle", "attach", "STOP_FILE", "existing_run_dir", "is_run_dir", "new_run_dir", "run_dirs", "RunRow",
           "list_runs", "run_row"]
