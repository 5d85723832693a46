"""Workbench in JupyterLab: a jupyter_server extension (REST + server-sent events over the runs directory,
``/workbench/api/``) and the prebuilt JupyterLab frontend that shows it (side panel, status bar, commands)."""

from __future__ import annotations

from .app import WorkbenchExtension

__version__ = "0.1.0"


def _jupyter_labextension_paths():
    return [{"src": "labextension", "dest": "workbench-jupyterlab"}]


def _jupyter_server_extension_points():
    return [{"module": "workbench_jupyterlab", "app": WorkbenchExtension}]
