"""The server extension: its settings (traits, e.g. ``--WorkbenchExtension.runs_dir=...`` or in
``jupyter_server_config.py``) and its routes."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from jupyter_server.extension.application import ExtensionApp
from traitlets import Float, Unicode

from .handlers import setup_handlers
from .runs import RunsDirectory


class WorkbenchExtension(ExtensionApp):
    name = "workbench_jupyterlab"

    runs_dir = Unicode(
        "",
        config=True,
        help="The runs directory the routes serve; default: runs/ under the server's "
        "root directory (relative paths are taken from that root)",
    )
    chat_url = Unicode(
        "",
        config=True,
        help="The OpenAI-compatible chat server whose models GET /workbench/api/models "
        "lists; default: $WORKBENCH_SERVE_URL or http://127.0.0.1:8000/v1",
    )
    chat_api_key = Unicode("", config=True, help="Its API key, if it needs one (default: $WORKBENCH_API_KEY)")
    poll_interval = Float(0.2, config=True, help="Seconds between reads of the event logs for the streams")
    template = Unicode(
        "",
        config=True,
        help="The .ipynb of 'New fine-tune notebook' ($runs_dir in a cell becomes the "
        "runs directory); default: the packaged template",
    )

    def _default_chat_url(self) -> str:
        from workbench.serve.client import DEFAULT_BASE_URL

        return os.environ.get("WORKBENCH_SERVE_URL") or DEFAULT_BASE_URL

    def resolved_runs_dir(self) -> Path:
        root = Path(self.serverapp.root_dir).expanduser()
        path = Path(self.runs_dir or "runs").expanduser()
        return path if path.is_absolute() else root / path

    def initialize_handlers(self) -> None:
        runs_dir = self.resolved_runs_dir()
        setup_handlers(
            self.serverapp.web_app,
            RunsDirectory(runs_dir),
            {
                "chat_url": self.chat_url or self._default_chat_url(),
                "chat_api_key": self.chat_api_key or os.environ.get("WORKBENCH_API_KEY", ""),
                "poll_interval": self.poll_interval,
                "template": self.template,
            },
        )
        self.log.info("workbench: serving the runs in %s under /workbench/api/", runs_dir)
        # Launching imports the engine and torch (~2 s): load them now in the background rather than on the first
        # launch request (reading runs needs only workbench.runs, which imports no torch).
        threading.Thread(target=_warm_imports, daemon=True).start()


def _warm_imports() -> None:
    import workbench.engine  # noqa: F401
