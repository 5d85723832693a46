"""Reading a run's event log into a ``RunState`` (``ui.run_state`` folds): following it, catching up with a long one,
a zoomed window of it. Every read goes through ``workbench.events.reader``, the one reader of a log (its rule for a
bad line, its step lines read from their bytes, its index included): this module folds events, it reads no bytes.
Plain Python: no widgets, no plotting.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..events import reader
from ..events.reader import LogReader, StepLine
from ..runs.layout import EVENTS_FILE
from .run_state import RECENT_STEPS, RunState


class EventTail(LogReader):
    """The monitor's reader of one log: ``poll()`` returns the events completed since the last call, typed unless
    ``typed=False`` (RunState folds plain dicts as well: a monitor reads them as logged, typing 10^6 events costs
    seconds)."""

    def __init__(self, path: str | Path, offset: int = 0, typed: bool = True):
        super().__init__(path, offset, typed)

    def poll(self) -> list:
        return self.read()


def catch_up(state: RunState, tail: EventTail) -> int:
    """Fold everything logged after ``tail.offset`` into ``state`` and move the tail to the end: what a monitor
    attaching to a long run, or a panel's first look at one, does once. The same state as ``state.apply(tail.poll())``
    (the tests compare them), in a fraction of the time: a rank-0 step line older than the newest RECENT_STEPS steps
    that no series would keep (``Series.drops``) is folded from its step number alone (``LogReader.scan``'s
    ``StepLine``), without parsing the rest. Its other fields (eta, throughput) are overwritten by the later steps that
    are parsed; a skipped step is always parsed. Reads the log a block at a time, never the whole of it at once.
    Returns the number of events folded.

    A long log from its start whose writer kept an index is not read whole: ``events.reader.read_overview`` gives its
    tail exactly, every rare event (overflows, skipped steps, alerts, evals, checkpoints) and a sample of the older
    steps, one per window (a chart of the same shape, not the same points; the newest RECENT_STEPS steps exact)."""
    if tail.offset == 0:
        overview = reader.read_overview(tail.path, RECENT_STEPS)
        if overview is not None:
            state.apply(overview.events)
            tail.offset, tail.line = overview.offset, None  # (line numbers: not known past a sampled read)
            state.version += 1
            return len(overview.events)
    last = reader.summarize_log(tail.path).last_step.get("step")  # how old a step is to be thinned
    horizon = last - RECENT_STEPS if isinstance(last, int) else None
    folded = 0
    for block in tail.blocks():
        folded += _fold_block(state, tail, block, horizon)
    state.version += 1
    return folded


def _fold_block(state: RunState, tail: EventTail, block: bytes, horizon: int | None) -> int:
    """``catch_up`` of one block of complete lines, read from ``tail.offset``."""
    series = (state.loss, state.lr, state.grad_norm)
    folded, batch = 0, []
    for event in tail.scan(block, horizon):
        if isinstance(event, StepLine):
            if batch:  # the series must have seen every earlier point to tell what they drop
                state.apply(batch)
                batch = []
            x = event.step
            scaled = state.loss_scale.seen > 0  # loss scale logged with every step (fp16) or never
            if all(s.drops(x) for s in series) and (not scaled or state.loss_scale.drops(x)):
                for s in series + ((state.loss_scale,) if scaled else ()):
                    s.skip(x)
                state.step = x
                folded += 1
                continue
            event = event.event()
            if event is None:
                continue
        batch.append(event)
        folded += 1
    if batch:
        state.apply(batch)
    return folded


def load_run_state(run_dir: str | Path) -> RunState:
    """The state of a run from its whole log (past runs, the runs panel, a monitor attaching): ``catch_up``."""
    state = RunState(run_dir=str(run_dir))
    catch_up(state, EventTail(Path(run_dir) / EVENTS_FILE, typed=False))
    state.pending_step_times.clear()
    return state


WINDOW_POINTS = 4000  # a zoomed chart's series holds at most this many points (a 440 px chart shows fewer)


def load_window(log: str | Path, first: int, last: int) -> RunState:
    """The series of event log ``log`` between steps ``first`` and ``last`` at full resolution (every step, or a sample
    of at most about WINDOW_POINTS when the window is long), read through ``events.reader.read_window`` (by byte offsets:
    the log is not read whole). A log without an index (an older writer's) is read whole, more slowly, to the same
    result. Events of other steps are left out before folding: a resumed run's steps logged again still replace the
    earlier ones (both lie in the window)."""
    window = reader.read_window(log, first, last)
    events = window.events if window is not None else reader.read_events(log, 0, typed=False)[0]
    state = RunState(chart_points=None)
    state.apply(e for e in events if not isinstance(e.get("step"), int) or first <= e["step"] <= last)
    for series in state.all_series():
        keep = [i for i, x in enumerate(series.x) if isinstance(x, (int, float)) and first <= x <= last]
        if len(keep) > WINDOW_POINTS:  # evenly thinned, the last point kept
            keep = [keep[i * len(keep) // WINDOW_POINTS] for i in range(WINDOW_POINTS - 1)] + [keep[-1]]
        series.x, series.y = [series.x[i] for i in keep], [series.y[i] for i in keep]
    state.skipped_steps = [x for x in state.skipped_steps if first <= x <= last]
    state.overflows = [o for o in state.overflows if first <= (o["step"] or 0) <= last]
    return state


def relayout_x_range(relayout: dict) -> tuple | None:
    """What a plotly relayout (the front end's message: a zoom, a pan, a double-click) did to a chart's x-axis:
    ("zoom", (lo, hi)), ("reset", None), or None when it left the x-axis alone."""
    if relayout.get("xaxis.autorange") is True:
        return ("reset", None)
    lo, hi = relayout.get("xaxis.range[0]"), relayout.get("xaxis.range[1]")
    if lo is None and isinstance(relayout.get("xaxis.range"), (list, tuple)) and len(relayout["xaxis.range"]) == 2:
        lo, hi = relayout["xaxis.range"]
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        return ("zoom", (lo, hi))
    return None


class ChartZoom:
    """The step window each chart is zoomed into, and its series read at full resolution for that window
    (``load_window``); a chart not zoomed (or zoomed back out) draws the run's overview. Plain Python: the monitor
    tells it the x-ranges the user picks."""

    def __init__(self):
        self.windows: dict[str, tuple[int, int, RunState]] = {}  # chart -> (first step, last step, its state)

    def set_range(self, chart: str, log: str | Path, x_range, overview: RunState) -> bool:
        """The user set ``chart``'s x-range (None, or one spanning the whole run: zoomed out). Returns whether what the
        chart draws changed."""
        lo, hi = (tuple(x_range) + (None, None))[:2] if x_range else (None, None)
        xs = overview.loss.x or overview.lr.x
        start = xs[0] if xs else 0
        end = max(overview.total_steps or 0, overview.step or 0, xs[-1] if xs else 0)
        if lo is None or hi is None or (lo <= start and hi >= end):
            return self.windows.pop(chart, None) is not None
        first, last = max(0, math.floor(min(lo, hi))), math.ceil(max(lo, hi))
        if chart in self.windows and self.windows[chart][:2] == (first, last):
            return False
        self.windows[chart] = (first, last, load_window(log, first, last))
        return True

    def source(self, chart: str, overview: RunState) -> RunState:
        """The state ``chart`` draws its series from."""
        window = self.windows.get(chart)
        return window[2] if window is not None else overview

    def zoomed(self, chart: str) -> bool:
        return chart in self.windows

    def clear(self) -> None:
        self.windows.clear()
