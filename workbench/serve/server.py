"""Start and stop our server: in the foreground (CLI, ``serve_forever``), or in the background from a notebook
(``start_server``, in a thread or a child process), with a ``ServerHandle`` to stop it. Talking to it goes through
the one client, ``workbench.serve.remote`` (``ServerHandle.client``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from ..config import config_from_dict
from .config import ServeConfig, ServeError
from .registry import ServedModels
from .remote import ServerClient, ServerError

API_KEY_ENV = "WORKBENCH_API_KEY"  # the key when no option names one (the CLI; a server in a subprocess)


def _bind(host: str, port: int) -> socket.socket:
    # Binding here (port 0 = any free port) and handing the socket to uvicorn leaves no window in
    # which another process could take the port between choosing and listening.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _bound_server(config: ServeConfig, loaded=None):
    """The served (model not loaded yet), the socket bound to the configured address, the uvicorn server for it
    and the host and port it listens on (port 0: the one the system picked)."""
    import uvicorn

    from .app import create_app

    served = ServedModels(config, loaded=loaded)
    sock = _bind(config.host, config.port)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(served),
            log_level=config.log_level,
            access_log=False,
            timeout_graceful_shutdown=2,
            lifespan="off",
        )
    )
    host, port = sock.getsockname()[:2]
    return served, sock, server, host, port


def serve_forever(config: ServeConfig, on_listening=None, loaded=None) -> None:
    """Blocking: bind, start loading the model in the background, serve until interrupted.

    A model or adapter that fails to load stops the server and raises that failure (a ConfigError or
    ServeError when the input was wrong): a server that can never answer must not keep running."""
    import asyncio

    served, sock, server, host, port = _bound_server(config, loaded)
    print(
        f"[workbench serve] listening on http://{host}:{port} (loading {config.model} ...)", file=sys.stderr, flush=True
    )
    if on_listening:
        on_listening(host, port)

    def load():
        served.load()
        if served.failure is not None:
            server.should_exit = True

    loader = threading.Thread(target=load, name="workbench-load", daemon=True)
    loader.start()
    try:
        asyncio.run(server.serve(sockets=[sock]))
    finally:
        served.shutdown()
        sock.close()
    if served.failure is not None:
        raise served.failure


class ServerHandle:
    """A server running in the background. ``url`` is the root; ``base_url`` is what OpenAI clients take."""

    def __init__(
        self,
        url: str,
        api_key: str | None,
        *,
        served: ServedModels | None = None,
        server=None,
        thread: threading.Thread | None = None,
        process: subprocess.Popen | None = None,
        sock=None,
        config_file: Path | None = None,
    ):
        self.url = url
        self.api_key = api_key
        self.served = served
        self._server, self._thread, self._process, self._sock = server, thread, process, sock
        self.config_file = config_file  # a subprocess server's configuration, removed on stop
        self._client: ServerClient | None = None

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    @property
    def client(self) -> ServerClient:
        """The server's client (``workbench.serve.remote``), made on first use and closed by ``stop``."""
        if self._client is None:
            self._client = ServerClient(self.url, self.api_key)
        return self._client

    def health(self) -> dict:
        return self.client.health()

    def models(self) -> list[str]:
        return list(self.client.models())

    def _check_process(self) -> None:
        if self._process is not None and self._process.poll() is not None:
            raise RuntimeError(f"the server process exited with code {self._process.returncode}")

    def wait_ready(self, timeout: float = 300.0) -> ServerHandle:
        self.client.wait_ready(timeout, check=self._check_process)
        return self

    def add_adapter(self, model_id: str, path: str | Path) -> dict:
        """Serve another adapter (a run directory or a peft adapter directory) under ``model_id``.

        In this process the path may lie anywhere (it is the caller's); a server in a subprocess is asked
        over HTTP, like any client, so the path must lie inside its adapter_root."""
        if self.served is not None:
            self.served.add_adapter(model_id, path)
            return next(c for c in self.served.cards() if c["id"] == model_id)
        try:
            return self.client.load_adapter(model_id, str(path))
        except ServerError as err:
            raise ServeError(err.message) from None

    def remove_adapter(self, model_id: str) -> None:
        if self.served is not None:
            try:
                self.served.remove_adapter(model_id)
            except KeyError:
                raise ServeError(f"no adapter {model_id!r} is loaded") from None
            return
        try:
            self.client.unload_adapter(model_id)
        except ServerError as err:
            raise ServeError(err.message) from None

    def openai_client(self, **kw):
        from openai import OpenAI

        return OpenAI(base_url=self.base_url, api_key=self.api_key or "EMPTY", **kw)

    def stop(self, timeout: float = 15.0) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._server is not None:
            self._server.should_exit = True
            if self._thread is not None:
                self._thread.join(timeout)
            if self.served is not None:
                self.served.shutdown()
            if self._sock is not None:
                self._sock.close()
            self._server = None
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self.config_file is not None:
            self.config_file.unlink(missing_ok=True)
            self.config_file = None

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ServerHandle({self.url!r})"


def start_server(
    model: str = "smollm2-135m-instruct",
    *,
    adapters: dict[str, str] | None = None,
    runs: list[str] | None = None,
    port: int = 0,
    host: str = "127.0.0.1",
    api_key: str | None = None,
    subprocess_mode: bool = False,
    wait: bool = True,
    timeout: float = 300.0,
    log_level: str = "warning",
    loaded=None,
    **options,
) -> ServerHandle:
    """Start a server in the background and return its handle (``with start_server() as srv: ...``).

    ``adapters`` maps model ids to adapter or run directories; ``runs`` are run directories served under
    their names. ``port=0`` picks a free port. By default the server runs in a thread of this process
    (the model lives here too); ``subprocess_mode=True`` runs it in a child process instead, so a busy
    notebook kernel cannot slow it down. ``loaded`` (a workbench.models.LoadedModel) serves a model already
    in memory. Other options: the fields of ServeConfig (max_batch, dtype, threads, adapter_root...). Bad
    options raise ConfigError listing every problem with its field.
    """
    config = config_from_dict(
        {
            "model": model,
            "adapters": {k: str(v) for k, v in (adapters or {}).items()},
            "runs": [str(r) for r in runs or []],
            "port": port,
            "host": host,
            "api_key": api_key,
            "log_level": log_level,
            **options,
        },
        ServeConfig,
    )
    if config.engine == "vllm":  # workbench.serve.start_server starts vLLM (workbench.serve.backends)
        raise ValueError("engine vllm: call workbench.serve.start_server, which starts vLLM for these options")
    if subprocess_mode:
        if loaded is not None:
            raise ValueError("a preloaded model cannot be handed to a subprocess: pass its source instead")
        handle = _start_subprocess(config)
    else:
        handle = _start_thread(config, loaded, load_here=wait)
    if wait:
        try:
            handle.wait_ready(timeout)
        except BaseException:
            handle.stop()
            raise
    return handle


def _start_thread(config: ServeConfig, loaded, load_here: bool) -> ServerHandle:
    import asyncio

    served, sock, server, host, port = _bound_server(config, loaded)

    def run():
        asyncio.run(server.serve(sockets=[sock]))

    thread = threading.Thread(target=run, name="workbench-serve", daemon=True)
    thread.start()  # answers /health with 503 while the model loads
    if load_here:
        # In the caller's thread: in a notebook, transformers' loading progress bar is an ipywidget,
        # and widgets must not be created from a background thread.
        served.load()
    else:
        threading.Thread(target=_load_quietly, args=(served,), name="workbench-load", daemon=True).start()
    return ServerHandle(
        f"http://{_url_host(host)}:{port}", config.api_key, served=served, server=server, thread=thread, sock=sock
    )


def _load_quietly(served: ServedModels) -> None:
    """Background load without progress bars (which would be widgets in a notebook, from a thread)."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        served.load()
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _start_subprocess(config: ServeConfig) -> ServerHandle:
    if config.port == 0:
        probe = _bind(config.host, 0)
        config = config.model_copy(update={"port": probe.getsockname()[1]})
        probe.close()
    # The child reads the same validated configuration from a file (private to this user); the key travels
    # in its environment instead, so it is neither on disk nor on the command line, where ps shows it.
    fd, name = tempfile.mkstemp(prefix="workbench-serve-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(config.model_dump(mode="json", exclude={"api_key"}), fh)
    env = {k: v for k, v in os.environ.items() if k != API_KEY_ENV}
    if config.api_key:
        env[API_KEY_ENV] = config.api_key
    # this module is the child (as training.launch runs workbench.training): the parser of `workbench serve` is not
    # needed to read a configuration already validated. The package imports this module before runpy runs it as
    # __main__; runpy's warning about that says nothing here, hence -W.
    process = subprocess.Popen(
        [sys.executable, "-W", "ignore::RuntimeWarning:runpy", "-m", "workbench.serve.server", name], env=env
    )
    return ServerHandle(
        f"http://{_url_host(config.host)}:{config.port}", config.api_key, process=process, config_file=Path(name)
    )


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _serve_config_file(path: str) -> int:
    """The child of ``start_server(subprocess_mode=True)``: serve the configuration its parent wrote (the key, if
    any, comes in the environment). Exit 2 for a model or adapter that does not load (input), 1 otherwise."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    data["api_key"] = os.environ.get(API_KEY_ENV)
    try:
        serve_forever(config_from_dict(data, ServeConfig))
    except KeyboardInterrupt:
        pass
    except ServeError as err:
        print(f"workbench serve: error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # logged above with its traceback when the model failed to load
        print(f"workbench serve: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    return 0


__all__ = ["ServeConfig", "ServerHandle", "serve_forever", "start_server"]

if __name__ == "__main__":
    sys.exit(_serve_config_file(sys.argv[1]))
