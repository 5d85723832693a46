"""The runs panel: past and running runs of a runs directory; re-attach, compare loss curves and configs;
export a run's adapter (its Export section)."""

from __future__ import annotations

import html
from pathlib import Path

import ipywidgets as W
import plotly.graph_objects as go

from ..config.loading import flat_fields
from ..runs import RunRow, list_runs
from ..runs.results import metric_rows, result_tasks
from .lab_settings import chart_template
from .run_log import load_run_state
from .run_state import RunState
from .runs_export import ExportSection

PALETTE = ["#1e88e5", "#e53935", "#43a047", "#fb8c00", "#8e24aa", "#00897b"]


def _fmt_loss(loss: float | None) -> str:
    return "" if loss is None else f"{loss:.4f}"


def _fmt_metric(value) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def config_diff(configs: dict[str, dict]) -> dict[str, dict]:
    """{field path: {run: value}} for the fields whose values differ between the runs."""
    flats = {name: flat_fields(c) for name, c in configs.items()}
    keys = sorted({k for f in flats.values() for k in f})
    return {
        k: {n: f.get(k) for n, f in flats.items()} for k in keys if len({repr(f.get(k)) for f in flats.values()}) > 1
    }


class RunsPanel(W.VBox):
    """The runs of a runs directory: their rows, attach one to the monitor, compare loss curves, configs and task
    metrics, export one.

    Args:
        runs_dir: the runs directory listed.
        monitor: the ``RunMonitor`` that Attach monitor watches the selected run in (None: no Attach).
    """

    def __init__(self, runs_dir: str = "runs", monitor=None):
        self.monitor = monitor
        self.runs: list[RunRow] = []
        self.states: dict[str, RunState] = {}
        self.runs_dir = W.Text(value=runs_dir, description="runs dir", style={"description_width": "60px"})
        self.refresh_button = W.Button(description="Refresh", icon="refresh")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.table = W.HTML()
        self.select = W.SelectMultiple(
            options=[], rows=6, description="runs", style={"description_width": "60px"}, layout=W.Layout(width="420px")
        )
        self.attach_button = W.Button(
            description="Attach monitor", icon="link", tooltip="watch the (first) selected run in the monitor panel"
        )
        self.compare_button = W.Button(description="Compare", icon="columns")
        self.attach_button.on_click(lambda _: self.attach_selected())
        self.compare_button.on_click(lambda _: self.compare())
        self.message = W.HTML()
        # Shown only once runs are compared: an empty chart (plotly's default -1..6 axes) says nothing
        self.compare_fig = go.FigureWidget(
            layout=go.Layout(
                title=dict(text="loss (solid) and eval loss (dashed)"),
                height=320,
                template=chart_template(),
                xaxis=dict(title=dict(text="step")),
                yaxis=dict(title=dict(text="token loss")),
            )
        )
        self.compare_box = W.Box([self.compare_fig], layout=W.Layout(display="none"))
        self.compare_box.add_class("wb-compare-chart")
        self.diff = W.HTML()
        # task metrics (workbench eval) of every run, base models included: a table and a bar chart of one metric
        self.task_select = W.Dropdown(options=[], description="task", style={"description_width": "60px"})
        self.metric_select = W.Dropdown(options=[], description="metric", style={"description_width": "60px"})
        self.task_select.observe(lambda _: self.show_task_metrics(), names="value")
        self.metric_select.observe(lambda _: self._plot_metric(), names="value")
        self.metrics_table = W.HTML()
        self.metrics_fig = go.FigureWidget(
            layout=go.Layout(height=300, template=chart_template(), barmode="group", yaxis=dict(range=[0, 1]))
        )
        self.metrics_box = W.VBox(
            [
                W.HTML("<b>Task metrics</b> (workbench eval; phone_agent: workbench agent run)"),
                W.HBox([self.task_select, self.metric_select]),
                self.metrics_table,
                self.metrics_fig,
            ],
            layout=W.Layout(display="none"),
        )
        self.metrics_box.add_class("wb-task-metrics")
        self.metric_rows: list[dict] = []
        self.export = ExportSection()  # export a run's adapter, read its manifest (workbench.export)
        super().__init__(
            [
                W.HTML("<b>Runs</b>"),
                W.HBox([self.runs_dir, self.refresh_button]),
                self.table,
                W.HBox([self.select, W.VBox([self.attach_button, self.compare_button])]),
                self.message,
                self.compare_box,
                self.diff,
                self.metrics_box,
                self.export,
            ]
        )
        self.add_class("wb-runs-panel")
        self.refresh()

    def refresh(self) -> list[RunRow]:
        self.runs = list_runs(self.runs_dir.value)
        rows = "".join(
            f"<tr><td class='wb-run-name' title='{html.escape(r.name, quote=True)}' style='max-width:260px;"
            f"overflow:hidden;text-overflow:ellipsis;white-space:nowrap'>{html.escape(r.name)}</td><td class='wb-run-{r.status}'>{r.status}</td>"
            f"<td>{r.step}/{r.total_steps or '?'}</td><td>{_fmt_loss(r.loss)}</td>"
            f"<td>{html.escape(r.model or '')}</td><td>{html.escape(r.precision or '')}</td></tr>"
            for r in self.runs
        )
        self.table.value = (
            "<table class='wb-runs' style='font-size:90%;border-spacing:12px 2px'><tr><th>run</th><th>status</th><th>step</th>"
            f"<th>loss</th><th>model</th><th>precision</th></tr>{rows}</table>"
            if self.runs
            else f"<i>no runs in {html.escape(self.runs_dir.value)}</i>"
        )
        names = [r.name for r in self.runs]
        selected = tuple(v for v in self.select.value if v in names)
        self.select.options = names
        self.select.value = selected
        if set(self.states) - set(names):  # a compared run is gone: its curves go with it
            self._clear_comparison()
        tasks = result_tasks(r.path for r in self.runs)
        current = self.task_select.value
        self.task_select.options = tasks
        self.task_select.value = current if current in tasks else (tasks[0] if tasks else None)
        self.show_task_metrics()
        self.export.set_runs(r.path for r in self.runs)
        return self.runs

    def show_task_metrics(self) -> list[dict]:
        """The selected task's metrics of every run (and base model) as a table, and one metric as bars."""
        task = self.task_select.value
        self.metric_rows = metric_rows((r.path for r in self.runs), task) if task else []
        self.metrics_box.layout.display = None if self.metric_rows else "none"
        if not self.metric_rows:
            self.metrics_table.value = ""
            self.metrics_fig.data = []
            return []
        keys = list(dict.fromkeys(k for row in self.metric_rows for k in row if k not in ("label", "mode", "errors")))
        head = "".join(f"<th>{html.escape(k)}</th>" for k in ["model", "thinking", *keys])
        body = "".join(
            "<tr>"
            + "".join(f"<td>{html.escape(_fmt_metric(row.get(k)))}</td>" for k in ["label", "mode", *keys])
            + "</tr>"
            for row in self.metric_rows
        )
        # requests that got no answer are not scored: said beside the table, so a metric over fewer rows is seen
        failures = "".join(
            f"<div class='wb-task-failures' style='color:#c62828'>{html.escape(row['label'])} ({html.escape(row['mode'])})"
            f": {row['failed']} of {row['failed'] + (row.get('n') or 0)} requests failed, not scored (metrics over the "
            f"{row.get('n') or 0} answered): {html.escape('; '.join(row['errors']))}</div>"
            for row in self.metric_rows
            if row.get("failed")
        )
        self.metrics_table.value = (
            f"<table class='wb-task-metrics-table' style='font-size:90%;border-spacing:12px 2px'>"
            f"<tr>{head}</tr>{body}</table>{failures}"
        )
        rates = [k for k in keys if k not in ("n", "failed")]
        current = self.metric_select.value
        self.metric_select.options = rates
        self.metric_select.value = current if current in rates else (rates[0] if rates else None)
        self._plot_metric()
        return self.metric_rows

    def _plot_metric(self) -> None:
        metric = self.metric_select.value
        modes = list(dict.fromkeys(r["mode"] for r in self.metric_rows))
        with self.metrics_fig.batch_update():
            self.metrics_fig.data = []
            for i, mode in enumerate(modes):
                rows = [r for r in self.metric_rows if r["mode"] == mode]
                self.metrics_fig.add_trace(
                    go.Bar(
                        name=f"thinking {mode}",
                        x=[r["label"] for r in rows],
                        y=[r.get(metric) for r in rows],
                        marker_color=PALETTE[i % len(PALETTE)],
                    )
                )
            self.metrics_fig.layout.title = f"{self.task_select.value}: {metric}"
            values = [r.get(metric) for r in self.metric_rows if isinstance(r.get(metric), (int, float))]
            # rates on a fixed 0..1 axis, so bars of runs compare at a glance; counts (steps, tokens) scale to fit
            self.metrics_fig.layout.yaxis.range = [0, 1] if all(0 <= v <= 1 for v in values) else None

    def _clear_comparison(self) -> None:
        self.states = {}
        self.compare_fig.data = []
        self.compare_box.layout.display = "none"
        self.diff.value = ""

    def _path(self, name: str) -> Path:
        return Path(self.runs_dir.value) / name

    def attach_selected(self, name: str | None = None):
        name = name or (self.select.value[0] if self.select.value else None)
        if name is None or self.monitor is None:
            self.message.value = "select a run first" if self.monitor is not None else "no monitor panel to attach"
            return None
        return self.monitor.attach(self._path(name))

    def compare(self, names: list[str] | None = None) -> dict[str, dict]:
        names = list(names or self.select.value)
        if len(names) < 2:
            self.message.value = "select two or more runs to compare"
            self._clear_comparison()
            return {}
        self.message.value = ""
        self.states = {n: load_run_state(self._path(n)) for n in names}
        traces = []
        for i, (n, s) in enumerate(self.states.items()):
            color = PALETTE[i % len(PALETTE)]
            traces.append(go.Scatter(name=n, x=list(s.loss.x), y=list(s.loss.y), mode="lines", line=dict(color=color)))
            if s.eval_loss.x:
                traces.append(
                    go.Scatter(
                        name=f"{n} (eval)",
                        x=list(s.eval_loss.x),
                        y=list(s.eval_loss.y),
                        mode="lines+markers",
                        line=dict(color=color, dash="dash"),
                    )
                )
        with self.compare_fig.batch_update():
            self.compare_fig.data = []
            for t in traces:
                self.compare_fig.add_trace(t)
        has_points = any(s.loss.x or s.eval_loss.x for s in self.states.values())
        self.compare_box.layout.display = None if has_points else "none"
        if not has_points:
            self.message.value = "none of the selected runs has logged a step yet"
        diff = config_diff({n: s.config for n, s in self.states.items()})
        head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
        body = "".join(
            f"<tr><td>{html.escape(k)}</td>" + "".join(f"<td>{html.escape(repr(v[n]))}</td>" for n in names) + "</tr>"
            for k, v in diff.items()
            if not k.startswith("output.run_name")
        )
        self.diff.value = (
            f"<table class='wb-config-diff' style='font-size:90%;border-spacing:12px 2px'><tr><th>config field</th>{head}</tr>"
            f"{body}</table>"
            if body
            else "<i>same configuration</i>"
        )
        return diff
