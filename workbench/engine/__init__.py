"""The training engine. Never imports ipywidgets: UIs read the event log it writes.

``run_engine`` is the bare loop (observers passed in); ``workbench.train`` composes it with the instruments a
config asks for (``workbench.training``)."""
from .census import parameter_census
from .launch import launch
from .run import RunResult, run_engine

__all__ = ["launch", "parameter_census", "RunResult", "run_engine"]
