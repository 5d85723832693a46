"""A handle on a run directory: status, stop, wait, events. Re-created from the directory alone (``attach``),
e.g. after a kernel restart; ``workbench.training.launch`` returns one for the worker it starts."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from ..events import EventWriter, RunFailed, read_events
from ..events.reader import LogSummary, summarize_log
from .layout import EVENTS_FILE, FOREGROUND_PID, STOP_FILE, WORKER_LOG, WORKER_PID
from .procfs import is_zombie


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a worker that exited but that its launcher (another process) has not reaped yet still answers kill(0): a
    # handle from attach() must see it as ended, not wait on it forever
    return not is_zombie(pid)


class RunHandle:
    def __init__(
        self, run_dir: Path, process: subprocess.Popen | None = None, pid: int | None = None, foreground: bool = False
    ):
        self.run_dir = Path(run_dir)
        self.process = process
        self.pid = process.pid if process is not None else pid
        # A run trained in a process of the user's own (a terminal, a notebook kernel): its pid tells whether it
        # is alive, but stop() only asks it to stop and never signals that process.
        self.foreground = foreground

    @property
    def events_path(self) -> Path:
        return self.run_dir / EVENTS_FILE

    def events(self, offset: int = 0) -> tuple[list, int]:
        return read_events(self.events_path, offset)

    def _terminal_event(self, summary: LogSummary | None = None) -> dict | None:
        # the end of the run's latest segment, from the log's tail (a resumed run's old end does not count)
        return (summary or summarize_log(self.events_path)).end

    def is_running(self, summary: LogSummary | None = None) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        if self.foreground and self._terminal_event(summary) is not None:
            return False  # ended; its pid may long since belong to another process
        return self.pid is not None and _pid_alive(self.pid)

    def status(self, summary: LogSummary | None = None) -> str:
        """running | finished | stopped | failed (a worker that died without a final event counts as failed).
        ``summary``: the log's, when the caller has it (``events.reader.summarize_log``), else read from the log's tail."""
        if self.is_running(summary):
            return "running"
        end = self._terminal_event(summary)
        if end is None:
            # Only a worker we know of can have died silently: with no process and no pid yet, a launch may be
            # between writing config.json and worker.pid, and writing its end here would make the worker refuse
            # its own run directory ("already holds a run").
            if self.process is not None or self.pid is not None:
                self._record_silent_death()
            return "failed"
        if end.get("type") == "run_failed":
            return "failed"
        return "stopped" if end.get("stopped") else "finished"

    def _record_silent_death(self) -> None:
        # Killed hard (OOM killer, SIGKILL): the worker could not log its own end, so the launcher does.
        code = self.process.returncode if self.process is not None else None
        log = self.run_dir / WORKER_LOG
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        with EventWriter(self.events_path) as w:
            w.emit(
                RunFailed(
                    step=-1,
                    error=f"worker process exited (code {code}) without a final event. Log tail:\n{tail}",
                    error_type="WorkerDied",
                )
            )

    def wait(self, timeout: float | None = None) -> str:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.is_running():
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run {self.run_dir.name} still running after {timeout} s")
            if self.process is not None:
                try:
                    self.process.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    pass
            else:
                time.sleep(0.2)
        return self.status()

    def stop(self, timeout: float = 120.0) -> str:
        """Ask the run to stop after its current step (it saves a checkpoint); force it if it won't."""
        (self.run_dir / STOP_FILE).touch()
        try:
            return self.wait(timeout)
        except TimeoutError:
            if self.pid is not None and not self.foreground:
                os.killpg(self.pid, signal.SIGTERM)
            return self.wait(30)

    def __repr__(self) -> str:
        return f"RunHandle({str(self.run_dir)!r}, pid={self.pid})"


def attach(run_dir: str | Path) -> RunHandle:
    """A handle on an existing run (running or not), e.g. after a kernel restart."""
    run_dir = Path(run_dir)
    for name, foreground in ((WORKER_PID, False), (FOREGROUND_PID, True)):
        if (run_dir / name).exists():
            return RunHandle(run_dir, None, int((run_dir / name).read_text()), foreground=foreground)
    return RunHandle(run_dir, None, None)
