"""The training engine. Never imports ipywidgets: UIs read the event log it writes.

``run_engine`` is the bare loop (observers passed in); ``workbench.train`` composes it with the instruments a
config asks for, and ``workbench.launch`` starts it in a worker process (``workbench.training``)."""

from .census import parameter_census
from .run import RunResult, run_engine

__all__ = ["parameter_census", "RunResult", "run_engine"]
