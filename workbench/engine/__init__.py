"""The training engine. Never imports ipywidgets: UIs read the event log it writes."""
from .census import parameter_census
from .launch import RunHandle, attach, launch
from .run import RunResult, train
from .rundir import STOP_FILE, new_run_dir

__all__ = ["RunHandle", "attach", "launch", "parameter_census", "STOP_FILE", "RunResult", "new_run_dir", "train"]
