"""``workbench lab-settings [APP_DIR]``: JupyterLab defaults for a workbench session, installed by scripts/setup.sh
(registered by workbench.cli.main).

They go to ``<JupyterLab app dir>/settings/overrides.d/workbench.json`` (``<venv>/share/jupyter/lab/settings/...``
for a venv), the folder JupyterLab reads for defaults that packages ship: they change the defaults only, so
a user's own ``overrides.json`` and settings still win. What they set, and why:

* no "Would you like to receive official Jupyter news?" notification, and no news or update fetches: a
  workbench session (and its browser test) makes no request to the web, and no prompt covers the panels.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
}
FILE_NAME = "workbench.json"


def overrides_file(app_dir: str | Path | None = None) -> Path:
    """Where the defaults go: the JupyterLab application directory of this environment unless told."""
    if app_dir is None:
        from jupyterlab.commands import get_app_dir

        app_dir = get_app_dir()
    return Path(app_dir) / "settings" / "overrides.d" / FILE_NAME


def install(app_dir: str | Path | None = None) -> Path:
    """Write the defaults (the file is workbench's own: rewritten whole on every set-up)."""
    path = overrides_file(app_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(OVERRIDES, indent=2) + "\n", encoding="utf-8")
    return path


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "lab-settings",
        help="install workbench's JupyterLab defaults (no news prompt, no fetches)",
        description="Write workbench's JupyterLab defaults into overrides.d of the JupyterLab "
        "application directory (a user's own settings still win).",
    )
    p.add_argument("app_dir", nargs="?", help="the JupyterLab application directory (default: this environment's)")
    return p


def run(args) -> int:
    print(f"JupyterLab defaults for workbench: {install(args.app_dir)}")
    return 0
