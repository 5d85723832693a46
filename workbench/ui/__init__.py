"""JupyterLab panels over the run config, planner, launcher, event log and server.

A file's name says its role (``tests/ui/test_roles.py`` holds it):

* ``<name>_panel.py``: a panel a notebook shows (ipywidgets, plotly ``FigureWidget``s): config, plan, monitor, runs,
  chat, episodes, recorder, precision compare, and the dashboard of them all;
* ``<panel>_<part>.py``: a part of one panel, widgets too: ``monitor_charts``, ``runs_export``, ``chat_exports``;
* every other module imports no widget library: the models any view can reuse (``run_state`` folds events,
  ``run_log`` reads a log into it, ``run_poller`` follows a running one, ``config_form`` is the config panel's form,
  ``precision_compare`` the compare panel's runs) and helpers (``drawing``, ``view_helpers``, ``lab_settings``);
  ``magics`` shows panels only through them.

The panels import lazily so ``import workbench.ui.run_log`` stays light.
"""

from __future__ import annotations

import importlib

# name -> module of this package that defines it, imported on first access
_LAZY = {
    "Workbench": "dashboard_panel",
    "ConfigPanel": "config_panel",
    "PlanPanel": "plan_panel",
    "RunMonitor": "monitor_panel",
    "RunsPanel": "runs_panel",
    "ChatComparePanel": "chat_panel",
    "RunState": "run_state",
    "EpisodeReplay": "episodes_panel",
    "EpisodeCompare": "episodes_panel",
    "RecorderPanel": "recorder_panel",
    "PrecisionCompare": "precision_compare",
    "PrecisionCompareView": "precision_compare_panel",
}
__all__ = list(_LAZY)


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(name)
    return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
