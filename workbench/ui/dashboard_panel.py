"""``Workbench()``: the config, plan, monitor, runs and chat panels wired together in one dashboard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ipywidgets as W

from ..config import RunConfig, replace
from ..plan import DEFAULT_DEVICES, DeviceSet
from .chat_panel import ChatComparePanel
from .config_panel import ConfigPanel
from .monitor_panel import RunMonitor
from .plan_panel import PlanPanel
from .run_state import RunState
from .runs_panel import RunsPanel


class Workbench(W.Tab):
    """Tabs: Config | Plan | Launch & monitor | Runs | Chat. The panels are also attributes (``wb.config``,
    ``wb.plan``, ``wb.monitor``, ``wb.runs``, ``wb.chat``) to show one at a time in a walkthrough.

    Args:
        cfg: the configuration the config panel starts from.
        server: a ``workbench.serve.ServerHandle``: each finished run's adapter is added to it and to the chat
            panel's choices.
        devices: the plan panel's device set.
        runs_dir: the runs directory (default: the config's ``output.runs_dir``).
        max_tokens: the chat panel's initial answer length.
    """

    def __init__(
        self,
        cfg: RunConfig | None = None,
        server: Any = None,
        devices: DeviceSet = DEFAULT_DEVICES,
        runs_dir: str | None = None,
        max_tokens: int = 128,
    ):
        cfg = cfg or RunConfig()
        if runs_dir is not None:
            cfg = replace(cfg, **{"output.runs_dir": runs_dir})
        self.server = server
        self.config = ConfigPanel(cfg)
        self.plan = PlanPanel(self.config.config, devices)
        self.config.on_change(self.plan.set_config)
        self.monitor = RunMonitor(lambda: self.config.config)
        self.runs = RunsPanel(cfg.output.runs_dir, monitor=self.monitor)
        self.chat = ChatComparePanel(server=server, max_tokens=max_tokens, runs_dir=cfg.output.runs_dir)
        self.monitor.on_finished(self._run_ended)
        super().__init__(
            children=[self.config, self.plan, self.monitor, self.runs, self.chat],
            titles=("Config", "Plan", "Launch & monitor", "Runs", "Chat"),
        )
        self.add_class("wb-dashboard")

    def _run_ended(self, state: RunState) -> None:
        self.runs.refresh()
        self.chat.export_models.refresh()  # the run's adapter can be served beside its exports now
        self.chat.episodes.refresh()
        if self.server is None or state.status != "finished" or not state.run_dir:
            return
        model_id = Path(state.run_dir).name
        try:
            self.server.add_adapter(model_id, state.run_dir)
        except Exception as err:  # noqa: BLE001 - e.g. trained on another base than the one served
            self.chat.message.value = f"<span style='color:#c62828'>could not serve {model_id}: {err}</span>"
            return
        self.chat.add_model(model_id)
