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


if __name__ == "__main__":
    print(f"JupyterLab defaults for workbench: {install(sys.argv[1] if len(sys.argv) > 1 else None)}")
