"""Event-log exporters: write a run's events where other tools read them (CSV, TensorBoard, your own).

Exporters are found through the entry-point group ``workbench.event_exporters`` (``name = "module:Class"``
in a package's metadata; workbench declares its own there too), so a third-party package adds one by
declaring it, with no change here. An exporter is a class:

    class MyExporter:
        description = "one line for `workbench export-events --help`"
        default_dir = "my-format"            # output folder under the run directory when --out is not given
        def __init__(self, out_dir: Path): ...
        def write(self, events: list[dict]) -> None: ...   # plain event dicts, in log order, in batches
        def flush(self) -> None: ...         # make what was written visible to readers (follow mode)
        def close(self) -> None: ...

``export_events`` feeds it the log through ``events.reader`` (the one reader), once or following a live run.
Exporters ignore event types and fields they do not know and never import the engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Protocol

from ..reader import LogReader

ENTRY_POINT_GROUP = "workbench.event_exporters"
TERMINAL = frozenset({"run_finished", "run_failed"})


class EventExporter(Protocol):
    description: str
    default_dir: str

    def __init__(self, out_dir: Path) -> None: ...
    def write(self, events: list[dict]) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class ExporterError(LookupError):
    """An exporter name that no installed package declares, or one whose declared class does not load."""


def installed_exporters() -> dict[str, EntryPoint]:
    """{name: entry point} of every exporter declared in the installed packages' metadata."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def load_exporter(name: str) -> type:
    """The exporter class declared as ``name``; ExporterError lists the installed ones."""
    found = installed_exporters()
    if name not in found:
        known = ", ".join(sorted(found)) or "none"
        hint = (
            ""
            if found
            else (
                " (workbench declares csv and tensorboard in its metadata: reinstall it, "
                "`pip install -e .`, if its metadata predates them)"
            )
        )
        raise ExporterError(
            f"unknown exporter {name!r}: the installed exporters are {known}{hint}; a package "
            f"adds one through the entry-point group {ENTRY_POINT_GROUP!r}"
        )
    try:
        return found[name].load()
    except Exception as err:  # a third party's broken module: say whose and why, not a traceback
        raise ExporterError(
            f"exporter {name!r} ({found[name].value}) could not be loaded: {type(err).__name__}: {err}"
        ) from err


@dataclass
class ExportResult:
    out_dir: Path
    events: int  # events handed to the exporter


def export_events(
    log: str | Path,
    exporter: str | type,
    out_dir: str | Path | None = None,
    *,
    follow: bool = False,
    is_running: Callable[[], bool] | None = None,
    poll_s: float = 0.5,
) -> ExportResult:
    """Export the event log ``log`` (a run's: ``runs.layout.EVENTS_FILE`` in its run directory) with ``exporter`` (a
    name or a class) into ``out_dir`` (default: ``<exporter.default_dir>`` beside the log, in the run directory).

    ``follow``: keep exporting events as the run appends them, until the log holds the run's end
    (``run_finished``/``run_failed``) or ``is_running()`` (the worker's liveness, when the caller knows
    it) says the run is gone, and nothing new came since.
    """
    reader = LogReader(log)
    cls = load_exporter(exporter) if isinstance(exporter, str) else exporter
    out = Path(out_dir) if out_dir is not None else reader.path.parent / cls.default_dir
    out.mkdir(parents=True, exist_ok=True)
    sink = cls(out)
    count, ended = 0, False
    try:
        while True:
            # Liveness before the read: a run that was gone before an empty read has nothing left to write.
            running = is_running() if is_running is not None else True
            events = reader.read()
            if events:
                sink.write(events)
                sink.flush()
                count += len(events)
                ended = ended or any(e.get("type") in TERMINAL for e in events)
            elif not follow or ended or not running:
                return ExportResult(out, count)
            if not follow:
                continue  # drain what is there, then stop at the first empty read
            if not events:
                time.sleep(poll_s)
    finally:
        sink.close()


__all__ = [
    "ENTRY_POINT_GROUP",
    "EventExporter",
    "ExportResult",
    "ExporterError",
    "export_events",
    "installed_exporters",
    "load_exporter",
]
