"""An OpenAI-compatible server run as a child process of another program (vLLM, llama.cpp's llama-server) behind the
same handle as ours: its start-up progress, its last log lines when it dies, and no orphan left behind (its own
process group, stopped at exit and on SIGTERM, and by a watchdog when the workbench process is killed outright).
Each engine's module builds the command line; this one owns the process."""

from __future__ import annotations

import atexit
import collections
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..runs.procfs import group_members
from .remote import ServerError
from .server import ServerHandle, _bind


@dataclass
class ChildLaunch:
    """What starting the server takes: the command, the environment variables it adds, and where it will answer."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    secret_env: tuple[str, ...] = ()  # variables kept out of shell() (an API key)

    def shell(self) -> str:
        """The command as one shell line (secrets stay out of it: export them)."""
        shown = {k: v for k, v in self.env.items() if k not in self.secret_env}
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in shown.items())
        return (prefix + " " if prefix else "") + shlex.join(self.argv)


class ChildDied(RuntimeError):
    """The server process exited; the message ends with its last log lines."""


def has_nvidia_gpu() -> bool:
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def free_port(host: str) -> int:
    probe = _bind(host, 0)
    port = probe.getsockname()[1]
    probe.close()
    return port


# The watchdog, a shell in a session of its own: while this process and the child's group live it looks every second;
# when this process dies (by any means: a kernel restart's SIGKILL runs no atexit) it stops the group, TERM then KILL;
# when the group is gone first (stop()) it ends. A parent-death signal is not enough: vLLM's server catches SIGTERM
# and, while its engine process is still compiling, does not exit.
_WATCHDOG = (
    'while kill -0 "$1" 2>/dev/null && kill -0 -"$2" 2>/dev/null; do sleep 1; done; '
    'kill -0 -"$2" 2>/dev/null || exit 0; kill -TERM -"$2" 2>/dev/null; sleep 15; kill -KILL -"$2" 2>/dev/null'
)


def watched(argv: list[str], name: str = "server") -> list[str]:
    """``argv`` run by a shell that first starts the watchdog over its own process group, then execs ``argv`` (same
    pid, same group): the server never runs unwatched, not even for the moment between its start and the
    watchdog's."""
    start_watchdog = f"setsid sh -c '{_WATCHDOG}' watchdog {os.getpid()} $$ </dev/null >/dev/null 2>&1 &"
    return ["sh", "-c", start_watchdog + ' exec "$@"', name, *argv]


class ChildServer(ServerHandle):
    """A server in a child process (its own process group), behind the same handle as ours. ``engine`` names it in
    messages; ``died_error`` is the exception a death raises."""

    engine = "server"
    died_error: type[ChildDied] = ChildDied
    id_flag = "--model"  # the command-line flag whose value is the served model id

    def __init__(self, launch: ChildLaunch, api_key: str | None, *, echo: bool = False, tail: int = 40):
        super().__init__(launch.url, api_key)
        self.launch = launch
        self.log_tail: collections.deque[str] = collections.deque(maxlen=tail)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # another program: its own packages
        self._process = subprocess.Popen(
            watched(launch.argv, self.engine),
            env={**env, **launch.env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read_log, args=(echo,), name=f"{self.engine}-log", daemon=True)
        self._reader.start()
        atexit.register(self.stop)

    def _read_log(self, echo: bool) -> None:
        for line in self._process.stdout:
            self.log_tail.append(line.rstrip())
            if echo:
                sys.stderr.write(line)

    def last_lines(self, n: int = 15) -> str:
        return "\n".join(list(self.log_tail)[-n:])

    def died(self) -> ChildDied:
        self._reader.join(5)  # the rest of its output
        return self.died_error(
            f"{self.engine} exited with code {self._process.returncode}; its last log lines:\n{self.last_lines()}"
        )

    def _ready(self) -> bool:
        try:
            self.client.health(timeout=2.0)  # 200 once the model is loaded (vLLM: empty; llama-server: a status)
            return True
        except ServerError:
            return False

    def served_model_id(self) -> str:
        return self.launch.argv[self.launch.argv.index(self.id_flag) + 1]

    def started(self, wait: bool = True, timeout: float = 600.0, progress=None):
        """This server, once ready when ``wait`` (stopped if it never gets there)."""
        if wait:
            try:
                self.wait_ready(timeout, progress)
            except BaseException:
                self.stop()
                raise
        return self

    def health(self) -> dict:
        """As our server answers: {"status": "ok", "model": id} once ready."""
        if self._ready():
            return {"status": "ok", "model": self.served_model_id()}
        return {"status": "error" if self._process.poll() is not None else "loading"}

    def wait_ready(self, timeout: float = 600.0, progress=None):
        """Until /health answers 200 (the one client's poll, ``ServerClient.wait_ready``); ``progress(seconds, last
        log line)`` every ~10 s. ``died_error`` with the last log lines when the process exits, TimeoutError (the
        process stopped) after ``timeout`` seconds."""
        start = time.monotonic()
        shown = [start]

        def check() -> None:
            if self._process.poll() is not None:
                raise self.died()
            if progress is not None and time.monotonic() - shown[0] >= 10:
                shown[0] = time.monotonic()
                progress(shown[0] - start, self.log_tail[-1] if self.log_tail else "")

        try:
            self.client.wait_ready(timeout, check=check)
        except TimeoutError:
            self.stop()
            raise TimeoutError(
                f"{self.engine} at {self.url} not ready after {timeout:.0f} s; its last log lines:\n{self.last_lines()}"
            ) from None
        self.after_ready()
        return self

    def after_ready(self) -> None:
        """What the server needs once it answers, before anyone else asks it (nothing by default)."""

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM to its whole process group (helper processes too), SIGKILL after ``timeout`` seconds."""
        atexit.unregister(self.stop)
        process = self._process
        if process is None or process.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(timeout)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # a helper process may outlive the server process by a moment
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        # A signal is delivered when its target next runs: on a loaded machine a member can live on for a moment after
        # killpg. Return only once the group has gone, so a new server can take the port and memory at once.
        deadline = time.monotonic() + timeout
        while group_members(process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)


def say(message: str) -> None:
    print(f"[workbench serve] {message}", file=sys.stderr, flush=True)


def serve_in_foreground(start: Callable[[], ChildServer]) -> int:
    """The CLI: start a child server and run it until Ctrl-C / SIGTERM; 1 when it dies."""
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # then the finally below stops it
    server = start()
    try:
        server.wait_ready(timeout=3600, progress=lambda s, line: say(f"{server.engine} starting ({s:.0f} s)"))
        say(f"ready at {server.url}: {', '.join(server.models())}")
        server._process.wait()
        raise server.died()
    except ChildDied as err:
        print(f"workbench serve: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)
