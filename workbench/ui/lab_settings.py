"""JupyterLab defaults for a workbench session, installed by scripts/setup.sh (``python -m workbench.ui.lab_settings``).

They go to ``<JupyterLab app dir>/settings/overrides.d/workbench.json`` (``<venv>/share/jupyter/lab/settings/...``
for a venv), the folder JupyterLab reads for defaults that packages ship: they change the defaults only, so
a user's own ``overrides.json`` and settings still win. What they set, and why:

* no "Would you like to receive official Jupyter news?" notification, and no news or update fetches: a
  workbench session (and its browser test) makes no request to the web, and no prompt covers the panels.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}
FILE_NAME = "workbench.json"


def overrides_file(app_dir: Optional[str | Path] = None) -> Path:
    """Where the defaults go: the JupyterLab application directory of this environment unless told."""
    if app_dir is None:
        from jupyterlab.commands import get_app_dir

        app_dir = get_app_dir()
    return Path(app_dir) / "settings" / "overrides.d" / FILE_NAME


def install(app_dir: Optional[str | Path] = None) -> Path:
    """Write the defaults (the file is workbench's own: rewritten whole on every set-up)."""
    path = overrides_file(app_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(OVERRIDES, indent=2) + "\n", encoding="utf-8")
    return path


THEMES_SETTINGS = Path("@jupyterlab") / "apputils-extension" / "themes.jupyterlab-settings"
LIGHT_TEMPLATE, DARK_TEMPLATE = "plotly_white", "plotly_dark"


def _settings_theme(path: Path) -> Optional[str]:
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


def lab_theme(user_settings_dir: Optional[str | Path] = None, app_dir: Optional[str | Path] = None) -> str:
    """The JupyterLab theme the user chose (their settings, else the defaults the environment overrides, else
    JupyterLab's own "JupyterLab Light"). A kernel cannot see the browser; this is the theme JupyterLab applies."""
    if user_settings_dir is None or app_dir is None:
        from jupyterlab.commands import get_app_dir, get_user_settings_dir

        user_settings_dir = user_settings_dir or get_user_settings_dir()
        app_dir = app_dir or get_app_dir()
    return (_settings_theme(Path(user_settings_dir) / THEMES_SETTINGS)
            or _settings_theme(Path(app_dir) / "settings" / "overrides.json") or "JupyterLab Light")


def chart_template(theme: Optional[str] = None) -> str:
    """The plotly template of the panels' charts: dark on a dark JupyterLab theme (its name says Dark), else white.
    The extension's stylesheet also follows a theme switched while a chart is shown (its background and text)."""
    try:
        theme = theme if theme is not None else lab_theme()
    except ImportError:  # workbench without JupyterLab (a plain kernel, a script): the light default
        theme = ""
    return DARK_TEMPLATE if "dark" in theme.lower() else LIGHT_TEMPLATE


if __name__ == "__main__":
    print(f"JupyterLab defaults for workbench: {install(sys.argv[1] if len(sys.argv) > 1 else None)}")
