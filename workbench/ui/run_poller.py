"""Following a run as it trains, with no widget: the poller of the monitor panel (``ui.monitor_panel``).

An asyncio task on the kernel's own event loop tails the run's event log, folds events into a ``RunState`` and has
its view redraw at most ``MAX_REDRAWS_PER_S`` times a second. Nothing runs in a thread that touches a widget, and
the kernel stays free between polls (clicks, other cells). Without an event loop (scripts, tests) ``poll_once`` and
``wait_sync`` do the same on demand.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..runs import RunHandle
from .run_log import EventTail, catch_up
from .run_state import RunState
from .view_helpers import Throttle

POLL_INTERVAL_S = 0.1
MAX_REDRAWS_PER_S = 4


class PollerView(Protocol):
    """What draws a followed run: told of each new run (its fresh state and its log), then asked to draw."""

    def reset(self, state: RunState, log_path: Path) -> None: ...

    def draw(self, state: RunState) -> None: ...


class RunPoller:
    """One run at a time (``watch``): its handle, its folded ``state``, the log's tail; ``view`` draws it.

    Args:
        view: what draws the state (``reset`` for a new run, ``draw`` when due).
        report: called with an exception a finished-callback raised (the poller goes on).
    """

    def __init__(self, view: PollerView, report: Callable[[Exception], None]):
        self.view, self.report = view, report
        self.handle: RunHandle | None = None
        self.state = RunState()
        self.tail: EventTail | None = None
        self._task: asyncio.Task | None = None
        self._throttle = Throttle(1.0 / MAX_REDRAWS_PER_S)
        self._drawn_version = -1
        self._finished_callbacks: list[Callable[[RunState], None]] = []
        self._fired_finished = False
        self.redraws = 0
        self.latencies: list[float] = []  # seconds from a step event's timestamp to the redraw that drew it

    def on_finished(self, callback: Callable[[RunState], None]) -> None:
        """``callback(state)`` once per run when it finishes, stops or fails (on the kernel's loop)."""
        self._finished_callbacks.append(callback)

    def watch(self, handle: RunHandle, status: str) -> None:
        """Follow ``handle``'s run from its log's start (caught up at once), on the kernel's loop when there is one."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self.handle = handle
        self.state = RunState(run_dir=str(handle.run_dir), status=status)
        self.tail = EventTail(handle.events_path, typed=False)
        self._drawn_version = -1
        self._fired_finished = False
        self.latencies = []
        self.view.reset(self.state, self.tail.path)
        catch_up(self.state, self.tail)  # what the run logged so far, folded at once (a long run: thinned as read)
        self.state.pending_step_times.clear()  # history, not the latency of a live redraw
        self.poll_once(force=True)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no kernel loop (plain script / tests): call poll_once() or wait_sync()
        self._task = loop.create_task(self._poll_loop())

    async def _poll_loop(self) -> None:
        while True:
            self.poll_once()
            if self._finished():
                self.poll_once(force=True)
                return
            await asyncio.sleep(POLL_INTERVAL_S)

    def _finished(self) -> bool:
        if self.handle is None:
            return True
        if self.handle.is_running():
            return False
        if not self.state.done:
            self.handle.status()  # logs run_failed for a worker that died silently
            self.state.apply(self.tail.poll())
        return True

    def poll_once(self, force: bool = False) -> int:
        """Read new events, fold them in, redraw if due. Returns how many events were read."""
        if self.tail is None:
            return 0
        events = self.tail.poll()
        if events:
            self.state.apply(events)
        if self.state.version != self._drawn_version and (force or self._throttle.ready()):
            self.redraw()
        if self.state.done and not self._fired_finished and (self.handle is None or not self.handle.is_running()):
            self._fired_finished = True
            for cb in list(self._finished_callbacks):
                try:
                    cb(self.state)
                except Exception as err:  # noqa: BLE001 - a callback error must not kill the poller
                    self.report(err)
        return len(events)

    def redraw(self) -> None:
        """Have the view draw the state now; the step events drawn for the first time give their latency."""
        now = time.time()
        self._drawn_version = self.state.version
        self.redraws += 1
        self.view.draw(self.state)
        for t in self.state.take_pending_step_times():
            if t is not None:
                self.latencies.append(now - t)

    async def wait(self, timeout: float | None = None) -> RunState:
        """Await the end of the watched run while the view keeps updating."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._task is not None and not self._task.done():
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run still going after {timeout} s")
            await asyncio.sleep(0.1)
        self.poll_once(force=True)
        return self.state

    def wait_sync(self, timeout: float | None = None) -> RunState:
        """Without an event loop (tests, scripts): poll until the run ends."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._finished():
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run still going after {timeout} s")
            self.poll_once()
            time.sleep(POLL_INTERVAL_S)
        self.poll_once(force=True)
        return self.state
