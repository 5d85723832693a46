"""JupyterLab panels over the run config, planner, launcher, event log and server.

``workbench.ui.run_state`` (folding) and ``workbench.ui.run_log`` (reading a log into it) are plain Python (no
widgets): the model any view can reuse.
The panels (ipywidgets + plotly FigureWidget) import lazily so ``import workbench.ui.run_log`` stays light.
"""
from __future__ import annotations

import importlib

# name -> module of this package that defines it, imported on first access
_LAZY = {"Workbench": "dashboard", "ConfigPanel": "config_panel", "PlanPanel": "plan_panel", "RunMonitor": "monitor_panel",
         "RunsPanel": "runs_panel", "ChatComparePanel": "chat_panel", "RunState": "run_state", "EpisodeReplay": "episodes",
         "EpisodeCompare": "episodes", "RecorderPanel": "recorder", "PrecisionCompare": "precision_compare",
         "PrecisionCompareView": "precision_compare_view"}
__all__ = list(_LAZY)


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(name)
    return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
