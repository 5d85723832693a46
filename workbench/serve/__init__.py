"""An OpenAI-compatible server for a base model and its LoRA adapters, and chat helpers for notebooks.

``start_server(...)`` runs it in the background and returns a ``ServerHandle``; ``workbench.serve.client``
has ``chat`` and ``compare`` for notebooks. Nothing here imports ipywidgets.
"""

from .backends import start_server
from .config import ServeConfig, ServeError
from .server import ServerHandle, serve_forever

__all__ = ["ServeConfig", "ServeError", "ServerHandle", "serve_forever", "start_server"]
