"""JupyterLab panels over the run config, planner, launcher, event log and server.

``workbench.ui.state`` is plain Python (no widgets): the event-folding model any view can reuse.
The panels (ipywidgets + plotly FigureWidget) import lazily so ``import workbench.ui.state`` stays light.
"""
from __future__ import annotations

__all__ = ["Workbench", "ConfigPanel", "PlanPanel", "RunMonitor", "RunsPanel", "ChatComparePanel", "RunState"]


def __getattr__(name: str):
    if name == "Workbench":
        from .dashboard import Workbench
        return Workbench
    if name == "ConfigPanel":
        from .config_panel import ConfigPanel
        return ConfigPanel
    if name == "PlanPanel":
        from .plan_panel import PlanPanel
        return PlanPanel
    if name == "RunMonitor":
        from .monitor import RunMonitor
        return RunMonitor
    if name == "RunsPanel":
        from .runs_panel import RunsPanel
        return RunsPanel
    if name == "ChatComparePanel":
        from .chat_panel import ChatComparePanel
        return ChatComparePanel
    if name == "RunState":
        from .state import RunState
        return RunState
    raise AttributeError(name)
