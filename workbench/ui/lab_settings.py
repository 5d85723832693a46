"""The JupyterLab theme the user chose, and the plotly template the panels' charts follow from it.

(The JupyterLab defaults a set-up installs: ``workbench lab-settings``, ``workbench/cli/lab_settings.py``.)
"""

from __future__ import annotations

import json
from pathlib import Path

THEMES_SETTINGS = Path("@jupyterlab") / "apputils-extension" / "themes.jupyterlab-settings"
LIGHT_TEMPLATE, DARK_TEMPLATE = "plotly_white", "plotly_dark"


def _settings_theme(path: Path) -> str | None:
    """The "theme" a JupyterLab settings file sets, or None (no file, or none set there). The files are JSON5:
    JupyterLab writes them with // comments, which are dropped before parsing."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if "@jupyterlab/apputils-extension:themes" in data:  # an overrides file: {plugin id: settings}
        data = data["@jupyterlab/apputils-extension:themes"]
    theme = data.get("theme") if isinstance(data, dict) else None
    return theme if isinstance(theme, str) else None


def lab_theme(user_settings_dir: str | Path | None = None, app_dir: str | Path | None = None) -> str:
    """The JupyterLab theme the user chose (their settings, else the defaults the environment overrides, else
    JupyterLab's own "JupyterLab Light"). A kernel cannot see the browser; this is the theme JupyterLab applies."""
    if user_settings_dir is None or app_dir is None:
        from jupyterlab.commands import get_app_dir, get_user_settings_dir

        user_settings_dir = user_settings_dir or get_user_settings_dir()
        app_dir = app_dir or get_app_dir()
    return (
        _settings_theme(Path(user_settings_dir) / THEMES_SETTINGS)
        or _settings_theme(Path(app_dir) / "settings" / "overrides.json")
        or "JupyterLab Light"
    )


def chart_template(theme: str | None = None) -> str:
    """The plotly template of the panels' charts: dark on a dark JupyterLab theme (its name says Dark), else white.
    The extension's stylesheet also follows a theme switched while a chart is shown (its background and text)."""
    try:
        theme = theme if theme is not None else lab_theme()
    except ImportError:  # workbench without JupyterLab (a plain kernel, a script): the light default
        theme = ""
    return DARK_TEMPLATE if "dark" in theme.lower() else LIGHT_TEMPLATE
