"""The launch and monitor panel: launch / stop / re-attach a run and watch it live.

Three parts: the launcher (this module: Launch and Stop, the message, progress and status lines; training runs in
a worker process, ``workbench.training.launch``), the poller that follows the run's event log with no widget
(``ui.run_poller.RunPoller``), and the charts that draw its state (``ui.monitor_charts.MonitorCharts``).
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable
from pathlib import Path

import ipywidgets as W

from ..config import RunConfig
from ..runs import RunHandle, attach
from ..training import launch
from .monitor_charts import MonitorCharts
from .run_poller import RunPoller
from .run_state import RunState


class RunMonitor(W.VBox):
    """Launch/attach, stop, progress and live charts for one run at a time.

    Args:
        config_source: returns the RunConfig to launch (the config panel's current one) or None.

    ``charts`` draws the run (its figures: ``charts.figures``), ``poller`` follows it (``poller.redraws``,
    ``poller.latencies``); ``state`` and ``handle`` are the run's.
    """

    def __init__(self, config_source: Callable[[], RunConfig | None] | None = None):
        self.config_source = config_source
        self.charts = MonitorCharts()
        self.poller = RunPoller(self, self._report)
        self._build_controls()
        self.poller.on_finished(lambda state: setattr(self.stop_button, "disabled", True))
        super().__init__(
            [
                W.HTML("<b>Launch and monitor</b>"),
                W.HBox([self.launch_button, self.stop_button, self.message]),
                W.HBox([self.progress, self.status]),
                self.charts.alerts,
                self.charts.grid,
            ]
        )
        self.add_class("wb-monitor-panel")

    def _build_controls(self) -> None:
        """Launch and Stop, the message line, the progress bar and the status."""
        self.launch_button = W.Button(
            description="Launch",
            icon="play",
            button_style="success",
            tooltip="start the configured run in a worker process",
        )
        self.stop_button = W.Button(
            description="Stop",
            icon="stop",
            button_style="danger",
            disabled=True,
            tooltip="stop after the current step (a checkpoint is saved)",
        )
        self.launch_button.add_class("wb-launch")
        self.stop_button.add_class("wb-stop")
        self.launch_button.on_click(lambda _: self.launch())
        self.stop_button.on_click(lambda _: self.stop())
        self.message = W.HTML()
        self.progress = W.FloatProgress(value=0.0, min=0.0, max=1.0, description="", layout=W.Layout(width="50%"))
        self.status = W.HTML("<span class='wb-run-status'>idle</span>")

    @property
    def state(self) -> RunState:
        """The watched run as its events say so far."""
        return self.poller.state

    @property
    def handle(self) -> RunHandle | None:
        """The watched run's handle (status, stop, wait), None before a launch or an attach."""
        return self.poller.handle

    # ---- actions --------------------------------------------------------------------------------
    def launch(self, cfg: RunConfig | None = None) -> RunHandle | None:
        """Start ``cfg`` (default: the config source's) in a worker process and watch it."""
        cfg = cfg or (self.config_source() if self.config_source else None)
        if cfg is None:
            self.message.value = "<span style='color:#c62828'>cannot launch: the configuration has problems</span>"
            return None
        if self.handle is not None and self.handle.is_running():
            self.message.value = "<span style='color:#c62828'>a run is already going: stop it first</span>"
            return None
        handle = launch(cfg)
        self.message.value = f"launched <code>{html.escape(str(handle.run_dir))}</code>"
        self._watch(handle, status="starting")
        return handle

    def attach(self, run_dir: str | Path) -> RunHandle:
        """Watch an existing run (running or not), e.g. after a kernel restart."""
        handle = attach(run_dir)
        self.message.value = f"attached to <code>{html.escape(str(handle.run_dir))}</code>"
        self._watch(handle, status="running" if handle.is_running() else "idle")
        return handle

    def stop(self) -> None:
        """Ask the run to stop; the worker saves a checkpoint first. Does not block the kernel."""
        if self.handle is None:
            return
        self.stop_button.disabled = True
        self.message.value = "stopping after the current step..."
        handle = self.handle
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            handle.stop()
            self.poll_once(force=True)
            return
        loop.run_in_executor(None, handle.stop)  # waits for the worker in a thread; touches no widget

    def on_finished(self, callback: Callable[[RunState], None]) -> None:
        """``callback(state)`` once per run when it finishes, stops or fails (on the kernel's loop)."""
        self.poller.on_finished(callback)

    def _watch(self, handle: RunHandle, status: str) -> None:
        self.stop_button.disabled = not handle.is_running()
        self.poller.watch(handle, status)

    # ---- following the run (the poller's) ------------------------------------------------------
    def poll_once(self, force: bool = False) -> int:
        """Read new events, fold them in, redraw if due. Returns how many events were read."""
        return self.poller.poll_once(force)

    async def wait(self, timeout: float | None = None) -> RunState:
        """Await the end of the watched run while the charts keep updating (``await monitor.wait()``)."""
        return await self.poller.wait(timeout)

    def wait_sync(self, timeout: float | None = None) -> RunState:
        """Without an event loop (tests, scripts): poll until the run ends."""
        return self.poller.wait_sync(timeout)

    # ---- the poller's view ----------------------------------------------------------------------
    def reset(self, state: RunState, log_path: Path) -> None:
        """A new run: empty charts, waiting for its events."""
        self.charts.reset(state, log_path)

    def draw(self, state: RunState) -> None:
        """The charts, the progress bar and the status line of ``state``."""
        self.charts.draw(state)
        self.progress.value = state.progress
        self.progress.bar_style = {"finished": "success", "failed": "danger", "stopped": "warning"}.get(
            state.status, "info"
        )
        rate = f" | {state.tokens_per_s:,.0f} tok/s" if state.tokens_per_s and not state.done else ""  # summary(): ETA
        self.status.value = (
            f"<span class='wb-run-status' data-status='{state.status}'>{html.escape(state.summary())}{rate}</span>"
        )
        self.stop_button.disabled = state.done or self.handle is None

    def _report(self, err: Exception) -> None:
        self.message.value = (
            f"<span style='color:#c62828'>{html.escape(type(err).__name__)}: {html.escape(str(err))}</span>"
        )
