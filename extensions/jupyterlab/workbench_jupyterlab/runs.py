"""The runs directory as the server extension serves it: names checked, rows from the engine's own ``list_runs``
and ``launch``/``attach``, curves folded by ``workbench.ui.run_state`` from the same event log the notebook panels read.

Plain Python (no tornado): the handlers call it, the tests can too. The engine (and torch with it) is imported on
first use so that starting ``jupyter lab`` stays fast.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

SPARKLINE_POINTS = 120  # the side panel draws at most this many loss points per run (the whole run, thinned)


class RunsError(Exception):
    """Bad input, answered with ``status`` and ``message`` (no traceback)."""

    def __init__(self, status: int, message: str, problems: list | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.problems = problems or []


def _finite(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def thin(xs: list, ys: list, limit: int = SPARKLINE_POINTS) -> list[list]:
    """At most ``limit`` [x, y] points spread over the whole series, always keeping the newest."""
    points = [[x, _finite(y)] for x, y in zip(xs, ys)]
    if len(points) <= limit:
        return points
    stride = len(points) / (limit - 1)
    return [points[int(i * stride)] for i in range(limit - 1)] + [points[-1]]


class RunsDirectory:
    def __init__(self, runs_dir: str | Path):
        self.root = Path(runs_dir)
        self._states: dict[str, tuple[Any, Any]] = {}  # name -> (EventTail, RunState): logs are read incrementally
        self._followers: dict[str, Any] = {}  # name -> LogFollower: a row reads only what was appended since the last
        self._launched: dict[str, Any] = {}  # name -> RunHandle of runs this server started (their exit is reaped)
        self._ended: dict[str, tuple[int, dict]] = {}  # name -> (log size, row) of runs that are not running
        self._lock = threading.Lock()  # handlers run this in executor threads

    # ---- names -----------------------------------------------------------------------------------------------
    def run_dir(self, name: str) -> Path:
        """The directory of run ``name``: one name inside the runs directory (no '/', '..', or a symlink out)."""
        if not name or name in (".", "..") or "/" in name or "\\" in name or "\x00" in name:
            raise RunsError(400, f"{name!r} is not a run name: one directory name inside the runs directory")
        path = self.root / name
        if path.resolve().parent != self.root.resolve():
            raise RunsError(400, f"{name!r} resolves outside the runs directory {self.root}")
        from workbench.runs import is_run_dir

        if not is_run_dir(path):
            raise RunsError(404, f"no run {name!r} in {self.root}")
        return path

    # ---- rows ------------------------------------------------------------------------------------------------
    def signature(self) -> tuple:
        """Changes whenever a run appears or logs an event: when a stream must send the rows again."""
        from workbench.runs import run_dirs
        from workbench.runs.layout import EVENTS_FILE

        return tuple((d.name, _size(d / EVENTS_FILE)) for d in run_dirs(self.root))

    def _state(self, path: Path):
        from workbench.runs.layout import EVENTS_FILE
        from workbench.ui.run_log import EventTail, catch_up
        from workbench.ui.run_state import RunState

        with self._lock:
            tail, state = self._states.get(path.name, (None, None))
            if tail is None or tail.path != path / EVENTS_FILE:
                tail, state = EventTail(path / EVENTS_FILE, typed=False), RunState(run_dir=str(path))
                self._states[path.name] = (tail, state)
                catch_up(state, tail)  # the first look at a (long) run: thinned as it is read
            state.apply(tail.poll())
            state.pending_step_times.clear()
            return state

    def _row(self, row) -> dict:
        self._reap(row.name)
        state = self._state(row.path)
        scale = state.loss_scale.y[-1] if state.loss_scale.y else None
        return {
            "name": row.name,
            "status": row.status,
            "step": row.step,
            "total_steps": row.total_steps,
            "loss": row.loss,
            "model": row.model,
            "precision": row.precision,
            "loss_scale": _finite(scale),
            "overflows": len(state.overflows),
            "skipped_steps": len(state.skipped_steps),
            "loss_series": thin(state.loss.x, state.loss.y),
            "checkpoints": len(state.checkpoints),
            "error": state.error,
        }

    def _reap(self, name: str) -> None:
        # a worker this server launched is its child: poll() collects its exit status (no zombie left behind)
        handle = self._launched.get(name)
        if handle is not None and handle.process is not None:
            handle.process.poll()

    def _run_row(self, path: Path):
        # workbench's one row reader, with a follower per run: each update reads only the bytes logged since the last
        from workbench.events.reader import LogFollower
        from workbench.runs import run_row
        from workbench.runs.layout import EVENTS_FILE

        with self._lock:
            follower = self._followers.get(path.name)
            if follower is None or follower.path != path / EVENTS_FILE:
                follower = self._followers[path.name] = LogFollower(path / EVENTS_FILE)
            return run_row(path, follower)

    def rows(self) -> list[dict]:
        """Every run's row. A run that has ended keeps its row until its log changes (resumed): a stream re-reads
        only the logs of running runs, not every log of the directory at every step."""
        from workbench.runs import run_dirs
        from workbench.runs.layout import EVENTS_FILE

        rows = []
        for path in run_dirs(self.root):
            size = _size(path / EVENTS_FILE)
            cached = self._ended.get(path.name)
            row = cached[1] if cached and cached[0] == size else self._row(self._run_row(path))
            if row["status"] != "running":
                self._ended[path.name] = (size, row)
            rows.append(row)
        return rows

    def row(self, name: str) -> dict:
        return self._row(self._run_row(self.run_dir(name)))

    def detail(self, name: str) -> dict:
        from workbench.runs.layout import CONFIG_FILE

        path = self.run_dir(name)
        return {**self.row(name), "config": json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))}

    def events(self, name: str, offset: int = 0, types: set | None = None) -> tuple[list[dict], int]:
        from workbench.events import read_events
        from workbench.runs.layout import EVENTS_FILE

        if offset < 0:
            raise RunsError(400, f"offset must be >= 0 (got {offset})")
        events, end = read_events(self.run_dir(name) / EVENTS_FILE, offset, typed=False)
        return [e for e in events if not types or e.get("type") in types], end

    # ---- actions ---------------------------------------------------------------------------------------------
    def launch(self, config: dict | None = None, overrides: Any = ()) -> str:
        """Validate ``config`` (sections, as in a YAML file) with ``overrides`` (dotted keys) and launch it in a
        worker process, its run directory inside this runs directory."""
        from workbench.config import ConfigError, apply_overrides, config_from_dict
        from workbench.training import launch

        if config is not None and not isinstance(config, dict):
            raise RunsError(400, "'config' must be an object of config sections")
        if not isinstance(overrides, (dict, list)):
            raise RunsError(400, "'overrides' must be an object of dotted keys or a list of 'key=value'")
        try:
            data = apply_overrides(apply_overrides(config or {}, overrides), {"output.runs_dir": str(self.root)})
            cfg = config_from_dict(data)
            handle = launch(cfg)
        except ConfigError as err:
            raise RunsError(400, str(err), [{"field": f, "problem": p} for f, p in err.problems]) from None
        self._launched[handle.run_dir.name] = handle
        return handle.run_dir.name

    def handle(self, name: str):
        from workbench.runs import attach

        path = self.run_dir(name)
        launched = self._launched.get(name)
        return launched if launched is not None else attach(path)

    def stop(self, name: str) -> str:
        """Ask a running run to stop (it saves a checkpoint); blocks until it did: call it off the event loop."""
        return self.handle(name).stop()
