"""The monitor panel's charts and tables (``ui.monitor_panel``), drawn from a ``RunState``: loss, task metrics, GRPO's
rewards, policy mismatch and task pool, DPO's reward margin and accuracy, loss scale, gradient norm, learning rate,
memory, the model state's breakdown, the parameter census, the alerts and GRPO's sample completions. No launching, no
polling (``ui.run_poller`` says when to draw); a zoom into a step chart reads that window of the log at full
resolution.
"""

from __future__ import annotations

import html
from pathlib import Path

import ipywidgets as W
import plotly.graph_objects as go

from ..events.schema import MODEL_STATE_FIELDS
from .lab_settings import chart_template
from .run_log import ChartZoom, relayout_x_range
from .run_state import RunState

# nf4 / int8: a quantized base's weights (quantization.base), with their quantization constants
DTYPE_COLORS = {
    "float32": "#1e88e5",
    "bfloat16": "#43a047",
    "float16": "#fb8c00",
    "int8": "#8e24aa",
    "uint8": "#8e24aa",
    "nf4": "#d81b60",
}
ALERT_COLORS = {"error": "#c62828", "warning": "#ef6c00", "info": "#1565c0", "success": "#2e7d32"}
MiB = 2**20
# Charts get a fixed width: a FigureWidget in a grid cell first draws at plotly's default 700 px and only
# refits on a window resize, so it would spill out of its cell. The grid fits as many such columns as the
# notebook is wide (2 on a ~1000 px notebook, 3 on a very wide one) and wraps to 1 on a narrow one.
CHART_WIDTH_PX = 440
WAITING = "waiting for the run's first events"
# charts of one training method or one kind of run only: hidden until the run says it is one (an SFT run never shows
# GRPO's rewards or DPO's margins, not even empty before its first events)
METHOD_FIGURES = ("rewards", "mismatch", "pool", "dpo_margin", "dpo_accuracy", "tasks")
CENSUS_WAITING = f"<i style='color:#999'>{WAITING}</i>"


def _figure(
    title: str,
    ytitle: str = "",
    traces: tuple = (),
    height: int = 280,
    log_y: bool = False,
    xtitle: str | None = "step",
    **layout,
) -> go.FigureWidget:
    # Everything is given to the constructor: the front end gets the whole figure in its first state.
    fig = go.FigureWidget(
        data=list(traces),
        layout=go.Layout(
            title=dict(text=title, font=dict(size=13)),
            width=CHART_WIDTH_PX,
            height=height,
            margin=dict(l=55, r=10, t=35, b=35),
            xaxis=dict(title=dict(text=xtitle) if xtitle else None, visible=False),
            yaxis=dict(title=dict(text=ytitle), type="log" if log_y else "linear", visible=False),
            legend=dict(orientation="h", y=-0.25),
            template=chart_template(),
            **layout,
            # An empty chart says it waits for data instead of showing bare -1..6 axes
            annotations=[
                dict(
                    text=WAITING,
                    showarrow=False,
                    xref="paper",
                    yref="paper",
                    x=0.5,
                    y=0.5,
                    font=dict(color="#999", size=13),
                    visible=True,
                )
            ],
        ),
    )
    return fig


def _show_waiting(fig: go.FigureWidget, waiting: bool) -> None:
    # The note is shown and hidden, never added and removed: the front end applies a changed flag reliably
    with fig.batch_update():
        fig.layout.annotations[0].visible = waiting
        fig.layout.xaxis.visible = fig.layout.yaxis.visible = not waiting


def samples_html(samples: list) -> str:
    """A table of sample completions: prompt (with its screenshot's thumbnail when the samples carry one),
    completion, each reward, total and advantage."""
    if not samples:
        return ""
    names = list(samples[0].get("rewards") or {})
    images = any(x.get("thumbnail") for x in samples)
    columns = ["step", *(["screen"] if images else []), "prompt", "completion", *names, "total", "advantage"]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in columns)
    rows = []
    for x in samples:
        thumb = str(x.get("thumbnail") or "")
        screen = [f"<img src='{html.escape(thumb)}' alt='screenshot'>" if thumb.startswith("data:image/") else ""]
        cells = [
            str(x.get("step")),
            *(screen if images else []),
            html.escape(str(x.get("prompt", ""))[:160]),
            f"<code>{html.escape(str(x.get('completion', '')))}</code>",
        ]
        cells += [f"{(x.get('rewards') or {}).get(n, float('nan')):.2f}" for n in names]
        cells += [f"{x.get('total', float('nan')):.2f}", f"{x.get('advantage', float('nan')):+.2f}"]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return f"<table class='wb-samples' style='font-size:12px'><tr>{head}</tr>{''.join(rows)}</table>"


def _draw_trace(traces: dict, key: str, fig: go.FigureWidget, series, name: str, dashed: bool = False) -> None:
    """``series`` drawn as the line ``key`` of ``fig``, added on its first draw (``traces``: key -> (figure, trace
    index) of the lines added so far)."""
    if key not in traces:
        fig.add_scatter(name=name, mode="lines+markers", line=dict(dash="dash") if dashed else None)
        traces[key] = (fig, len(fig.data) - 1)
    fig, index = traces[key]
    with fig.batch_update():
        fig.data[index].x, fig.data[index].y = list(series.x), list(series.y)


# series whose key does not say what they are on their chart
TRACE_NAMES = {"is_capped": "share of tokens capped (rl.importance_sampling)"}


class MonitorCharts:
    """The charts (``figures``, each in a box of ``figure_boxes``, laid out in ``grid``), the census and samples
    tables and the ``alerts`` of one run at a time: ``reset`` for a new run, ``draw`` its state."""

    def __init__(self):
        self.state = RunState()
        self.log_path: Path | None = None
        self._census_traces: dict[str, int] = {}
        self._memory_traces: dict[str, int] = {}
        self._task_traces: dict[str, tuple[go.FigureWidget, int]] = {}  # "task metric" -> (figure, trace index)
        self._grpo_traces: dict[str, tuple[go.FigureWidget, int]] = {}
        self._dpo_traces: dict[str, tuple[go.FigureWidget, int]] = {}
        # What the census and alert views last drew: they are rebuilt only when that changes. RunState
        # replaces its census dict on each census event and only appends to its alerts list.
        self._drawn_census: dict | None = None
        self._drawn_alerts: tuple = (None, -1)  # (the alerts list, how many of its alerts)
        self._build_figures()
        self._build_tables()
        self._follow_zoom()
        self._chart_grid()

    def _build_figures(self) -> None:
        """One FigureWidget per chart, named in ``figures``."""
        self.loss_fig = _figure(
            "loss",
            "token loss",
            (
                go.Scatter(name="loss", mode="lines+markers", marker=dict(size=4)),
                go.Scatter(name="eval loss", mode="lines+markers", marker=dict(size=8, symbol="diamond")),
            ),
        )
        # eval.tasks scored during training: rates (0..1) here; a task's loss goes on the loss chart
        self.task_fig = _figure("task metrics (eval.tasks)", "rate", showlegend=True, yaxis_range=[0, 1.05])
        # GRPO runs (training.method grpo): each reward function's mean, and the training-inference mismatch
        self.reward_fig = _figure("rewards (GRPO rollouts)", "mean reward", showlegend=True)
        self.mismatch_fig = _figure(
            "policy mismatch: |logp sampler - logp trainer|", "nats per token", showlegend=True, log_y=True
        )
        # DPO runs (training.method dpo): the implicit rewards' margin (chosen and rejected beside it), reward accuracy
        self.dpo_margin_fig = _figure("DPO rewards: chosen - rejected", "beta x log-ratio", showlegend=True)
        self.dpo_accuracy_fig = _figure(
            "DPO reward accuracy: pairs ordered right", "share of pairs", yaxis_range=[0, 1.05]
        )
        # rl.pool: each task family's recent success, what the pool draws by (a failing family more often)
        # (taller: a legend of ten families under the chart leaves it its plot)
        self.pool_fig = _figure(
            "task pool: recent success per family", "recent success", height=400, showlegend=True, yaxis_range=[0, 1.05]
        )
        self.scale_fig = _figure(
            "loss scale",
            "scale",
            (
                go.Scatter(name="loss scale", mode="lines"),
                go.Scatter(
                    name="overflow (step skipped)", mode="markers", marker=dict(color="#c62828", size=10, symbol="x")
                ),
            ),
            log_y=True,
        )
        self.grad_fig = _figure("grad norm", "L2 norm (unscaled)", (go.Scatter(name="grad norm", mode="lines"),))
        self.lr_fig = _figure("learning rate", "lr", (go.Scatter(name="lr", mode="lines"),))
        self.memory_fig = _figure("memory per device", "MiB", showlegend=True)  # a lone series still says what it is
        self.breakdown_fig = _figure(
            "model state at the step's peak (rank 0)",
            "MiB",
            (
                go.Bar(
                    name="bytes",
                    x=[c.replace("_", " ") for c in MODEL_STATE_FIELDS],
                    y=[0] * len(MODEL_STATE_FIELDS),
                    marker=dict(color=["#5c6bc0", "#26a69a", "#ffa726", "#ab47bc"]),
                    textposition="outside",
                    cliponaxis=False,
                ),
            ),
            xtitle=None,
        )
        self.census_fig = _figure(
            "parameters by module group and dtype", "parameters", xtitle=None, barmode="stack", yaxis_tickformat="~s"
        )
        self.figures = {
            "loss": self.loss_fig,
            "tasks": self.task_fig,
            "rewards": self.reward_fig,
            "mismatch": self.mismatch_fig,
            "pool": self.pool_fig,
            "dpo_margin": self.dpo_margin_fig,
            "dpo_accuracy": self.dpo_accuracy_fig,
            "loss_scale": self.scale_fig,
            "grad_norm": self.grad_fig,
            "lr": self.lr_fig,
            "memory": self.memory_fig,
            "breakdown": self.breakdown_fig,
            "census": self.census_fig,
        }

    def _build_tables(self) -> None:
        """The census table, the alerts and the GRPO sample completions."""
        self.census_table = W.HTML(CENSUS_WAITING)
        self.alerts = W.HTML()
        self.alerts.add_class("wb-alerts")
        self.samples_table = W.HTML()
        self.samples_table.add_class("wb-grpo-samples")

    def _follow_zoom(self) -> None:
        """The step charts a user may zoom into: the zoomed window is read again at full resolution."""
        # The step charts a user may zoom into: the zoomed window is read again at full resolution (ChartZoom)
        self.zoom = ChartZoom()
        self.step_figures = {
            "loss": self.loss_fig,
            "loss_scale": self.scale_fig,
            "grad_norm": self.grad_fig,
            "lr": self.lr_fig,
        }
        for name, fig in self.step_figures.items():
            # the front end's relayout message, as the user sent it: plotly's layout callbacks cannot tell a reset-zoom
            # from the autorange that follows it (plotly's own handler has applied it to the layout before this runs)
            fig.observe(lambda change, name=name: self._on_relayout(name, change["new"]), names="_js2py_relayout")

    def _chart_grid(self) -> W.GridBox:
        """The charts, the census and the samples in a grid of fixed-width columns."""
        self.figure_boxes = {}
        for name, fig in self.figures.items():
            box = W.Box([fig])  # the class goes on a plain box: a FigureWidget's own view may not apply it
            box.add_class(f"wb-fig-{name}")
            if name in METHOD_FIGURES:  # shown once the run's method (or its first such event) is known
                box.layout.display = "none"
            self.figure_boxes[name] = box
        # In fp32/bf16 there is no loss scale to draw: the cell says so instead of showing empty axes
        self.scale_note = W.HTML(layout=W.Layout(display="none", width=f"{CHART_WIDTH_PX}px"))
        self.scale_note.add_class("wb-no-loss-scaling")
        cells = [
            W.VBox([box, self.scale_note]) if name == "loss_scale" else box for name, box in self.figure_boxes.items()
        ]
        census_cell = W.VBox(
            [W.HTML("<b>parameter census</b>"), self.census_table],
            layout=W.Layout(width=f"{CHART_WIDTH_PX}px", overflow="auto"),
        )
        self.samples_cell = W.VBox(
            [W.HTML("<b>sample completions (latest GRPO step)</b>"), self.samples_table],
            layout=W.Layout(width=f"{2 * CHART_WIDTH_PX}px", overflow="auto", display="none"),
        )
        self.grid = W.GridBox(
            cells + [census_cell, self.samples_cell],
            layout=W.Layout(grid_template_columns=f"repeat(auto-fill, {CHART_WIDTH_PX + 10}px)", grid_gap="4px"),
        )
        self.grid.add_class("wb-monitor-grid")
        return self.grid

    # ---- drawing ------------------------------------------------------------------------------
    def _on_relayout(self, name: str, message) -> None:
        # a zoom, a pan or a reset-zoom of a step chart: its series are read again for the window it shows
        change = relayout_x_range(((message or {}).get("relayout_data")) or {})
        if change is not None:
            self.zoom_chart(name, change[1])

    def zoom_chart(self, name: str, x_range) -> None:
        """Show step chart ``name`` (a key of ``step_figures``) between steps ``x_range`` = (lo, hi) at full
        resolution, read from the log for that window; None (or the whole run's range): the run's overview."""
        if self.log_path is not None and self.zoom.set_range(name, self.log_path, x_range, self.state):
            self._draw_step_series([name])

    def _draw_step_series(self, names) -> None:
        """The series of the step charts ``names``, from the run's state or the chart's zoomed window."""
        for name in names:
            s, fig = self.zoom.source(name, self.state), self.step_figures[name]
            with fig.batch_update():
                if name == "loss":
                    fig.data[0].x, fig.data[0].y = list(s.loss.x), list(s.loss.y)
                    fig.data[1].x, fig.data[1].y = list(s.eval_loss.x), list(s.eval_loss.y)
                elif name == "loss_scale":
                    fig.data[0].x, fig.data[0].y = list(s.loss_scale.x), list(s.loss_scale.y)
                    fig.data[1].x = [o["step"] for o in s.overflows]
                    fig.data[1].y = [o["scale_before"] for o in s.overflows]
                else:
                    series = getattr(s, name)
                    fig.data[0].x, fig.data[0].y = list(series.x), list(series.y)

    def reset(self, state: RunState, log_path: Path | None = None) -> None:
        """Empty charts for a new run (``state``, its log at ``log_path``), each saying it waits for data."""
        self.state, self.log_path = state, log_path
        self.zoom.clear()
        for fig in (self.loss_fig, self.scale_fig, self.grad_fig, self.lr_fig):
            with fig.batch_update():
                for trace in fig.data:
                    trace.x, trace.y = [], []
        for fig in (self.loss_fig, self.scale_fig, self.grad_fig, self.lr_fig, self.memory_fig):
            fig.layout.xaxis.range, fig.layout.xaxis.autorange = None, True
        self.memory_fig.data = []
        self.task_fig.data = []
        self.reward_fig.data, self.mismatch_fig.data, self.pool_fig.data, self._grpo_traces = [], [], [], {}
        self.dpo_margin_fig.data, self.dpo_accuracy_fig.data, self._dpo_traces = [], [], {}
        self.samples_table.value = ""
        self.loss_fig.data = self.loss_fig.data[:2]  # the task losses a previous run added
        self._task_traces = {}
        self.census_fig.data = []
        self.census_fig.layout.title.text = "parameters by module group and dtype"
        self.breakdown_fig.data[0].y = [0, 0, 0, 0]
        self.breakdown_fig.data[0].texttemplate = None
        self.census_table.value = CENSUS_WAITING
        self._memory_traces, self._census_traces = {}, {}
        for fig in self.figures.values():
            _show_waiting(fig, True)
        self._draw_loss_scaling_note()
        self._drawn_census, self._drawn_alerts = None, (None, -1)  # a new run always draws

    def draw(self, state: RunState) -> None:
        """Every chart and table of ``state`` (a zoomed step chart keeps its window)."""
        s = self.state = state
        self._draw_step_series([name for name in self.step_figures if not self.zoom.zoomed(name)])
        self.scale_fig.layout.title.text = f"loss scale: {len(s.overflows)} overflow(s)"
        self._draw_loss_scaling_note()
        self._draw_task_metrics()
        # the task chart only for runs that score tasks (config eval.tasks)
        scores_tasks = bool((s.config.get("eval") or {}).get("tasks") or s.task_metrics)
        self.figure_boxes["tasks"].layout.display = None if scores_tasks else "none"
        self._draw_grpo()
        self._draw_dpo()
        for fig, has_data in (
            (self.loss_fig, s.loss.x or s.eval_loss.x),
            (self.scale_fig, s.loss_scale.x),
            (self.task_fig, any(f is self.task_fig for f, _ in self._task_traces.values())),
            (self.reward_fig, s.rewards),
            (self.mismatch_fig, s.mismatch),
            (self.pool_fig, s.pool_success),
            (self.dpo_margin_fig, s.dpo),
            (self.dpo_accuracy_fig, s.dpo),
            (self.grad_fig, s.grad_norm.x),
            (self.lr_fig, s.lr.x),
            (self.memory_fig, s.memory_series),
            (self.breakdown_fig, s.memory),
            (self.census_fig, s.census),
        ):
            if bool(has_data) == fig.layout.annotations[0].visible:
                _show_waiting(fig, not has_data)
        self._fix_step_axes()
        self._draw_memory()
        self._draw_census()
        self._draw_alerts()

    def _draw_loss_scaling_note(self) -> None:
        s = self.state
        no_scaler = s.precision.get("use_grad_scaler") is False and not s.loss_scale.x
        mode = s.precision.get("mode") or "this precision"
        self.scale_note.value = (
            f"<div style='padding:40px 12px;color:#555;border:1px dashed #ccc'><b>loss scale</b><br>"
            f"no loss scaling in {html.escape(mode)}: bf16 and fp32 keep fp32's exponent range, so "
            f"gradients do not underflow and nothing is scaled (only fp16 uses a loss scaler)</div>"
            if no_scaler
            else ""
        )
        self.scale_note.layout.display = None if no_scaler else "none"
        self.figure_boxes["loss_scale"].layout.display = "none" if no_scaler else None

    def _fix_step_axes(self) -> None:
        # The step axes span the whole run once its length is known: the user sees how far it has got, and the
        # view never depends on the front end re-autoranging after each restyle (it can lag a batch behind).
        total = self.state.total_steps
        if not total:
            return
        zoomed = [self.step_figures[name] for name in self.zoom.windows]  # the user's zoom stays
        for fig in (
            self.loss_fig,
            self.task_fig,
            self.reward_fig,
            self.mismatch_fig,
            self.pool_fig,
            self.scale_fig,
            self.grad_fig,
            self.lr_fig,
            self.memory_fig,
            self.dpo_margin_fig,
            self.dpo_accuracy_fig,
        ):
            if not any(fig is z for z in zoomed) and tuple(fig.layout.xaxis.range or ()) != (0, total):
                fig.layout.xaxis.range = [0, total]

    def _draw_grpo(self) -> None:
        """Reward curves per function (the weighted total dashed), the mismatch figures, the latest samples: only
        for GRPO runs."""
        s = self.state
        grpo = (s.config.get("training") or {}).get("method") == "grpo" or bool(s.rewards)
        for name in ("rewards", "mismatch"):
            self.figure_boxes[name].layout.display = None if grpo else "none"
        self.figure_boxes["pool"].layout.display = None if grpo and s.pool_success else "none"
        self.samples_cell.layout.display = None if grpo and s.samples else "none"
        if not grpo:
            return
        for fig, prefix, series_of in (
            (self.reward_fig, "reward ", s.rewards),
            (self.mismatch_fig, "", s.mismatch),
            (self.pool_fig, "pool ", s.pool_success),
        ):
            for name, series in series_of.items():
                label = TRACE_NAMES.get(name, name.replace("_", " "))
                _draw_trace(self._grpo_traces, prefix + name, fig, series, label, dashed=name == "total")
        self.samples_table.value = samples_html(s.samples)

    def _draw_dpo(self) -> None:
        """The implicit rewards' mean margin (the chosen and rejected rewards dashed beside it) and the reward accuracy
        per step: only for DPO runs."""
        s = self.state
        dpo = (s.config.get("training") or {}).get("method") == "dpo" or bool(s.dpo)
        for name in ("dpo_margin", "dpo_accuracy"):
            self.figure_boxes[name].layout.display = None if dpo else "none"
        for key, series in s.dpo.items():
            fig = self.dpo_accuracy_fig if key == "accuracy" else self.dpo_margin_fig
            _draw_trace(self._dpo_traces, key, fig, series, key.replace("_", " "), dashed=key.startswith("reward_"))

    def _draw_task_metrics(self) -> None:
        """Each task metric as a trace: a held-out loss next to the eval loss on the loss chart, rates on the task
        chart (perplexity, which only restates the loss, is left out). The held-out loss task measures the run's
        data.eval, so it lies on the eval loss; a run without data.eval has it measured on the task's own file,
        which the legend says."""
        own_eval = bool((self.state.config.get("data") or {}).get("eval"))
        task_loss = "held-out loss (task)" if own_eval else "held-out loss (task's file: the run has no eval set)"
        for name, series in self.state.task_metrics.items():
            if name.endswith(" perplexity"):
                continue
            if name not in self._task_traces:
                fig = self.loss_fig if name.endswith(" loss") else self.task_fig
                fig.add_scatter(
                    name=name.replace("heldout_loss loss", task_loss),
                    mode="lines+markers",
                    marker=dict(size=7, symbol="square"),
                )
                self._task_traces[name] = (fig, len(fig.data) - 1)
            fig, index = self._task_traces[name]
            with fig.batch_update():
                fig.data[index].x, fig.data[index].y = list(series.x), list(series.y)

    def _draw_memory(self) -> None:
        s = self.state
        for name in s.memory_series:
            if name not in self._memory_traces:
                self.memory_fig.add_scatter(name=name, mode="lines+markers")
                self._memory_traces[name] = len(self.memory_fig.data) - 1
        with self.memory_fig.batch_update():
            for name, series in s.memory_series.items():
                trace = self.memory_fig.data[self._memory_traces[name]]
                trace.x, trace.y = list(series.x), [v / MiB for v in series.y]
        b = s.memory_breakdown()
        with self.breakdown_fig.batch_update():
            self.breakdown_fig.data[0].y = [v / MiB for v in b.values()]
            self.breakdown_fig.data[0].texttemplate = "%{y:.3~f} MiB" if s.memory else None

    def _draw_census(self) -> None:
        s = self.state
        if not s.census or s.census is self._drawn_census:
            return
        by_dtype = s.census_by_group()
        groups = sorted({g for d in by_dtype.values() for g in d})
        for dtype in by_dtype:
            if dtype not in self._census_traces:
                self.census_fig.add_bar(name=dtype, marker=dict(color=DTYPE_COLORS.get(dtype)))
                self._census_traces[dtype] = len(self.census_fig.data) - 1
        with self.census_fig.batch_update():
            for dtype, index in self._census_traces.items():
                counts = by_dtype.get(dtype, {})  # a dtype that disappeared (e.g. after a cast) drops to 0
                self.census_fig.data[index].x = groups
                self.census_fig.data[index].y = [counts.get(g, 0) for g in groups]
            self.census_fig.layout.title.text = f"parameters by module group and dtype (step {s.census['step']})"
        rows = "".join(
            f"<tr><td>{html.escape(r['group'])}</td><td>{html.escape(r['dtype'])}</td>"
            f"<td>{'yes' if r.get('trainable') else ''}</td><td style='text-align:right'>{r['count']:,}</td>"
            f"<td style='text-align:right'>{r['bytes'] / MiB:,.2f}</td></tr>"
            for r in s.census["rows"]
        )
        totals = ", ".join(f"{html.escape(k)}: {v:,}" for k, v in s.census["totals"].items())
        self.census_table.value = (
            f"<div style='font-size:85%;color:#555'>step {s.census['step']}; {totals}</div>"
            f"<table class='wb-census' style='font-size:85%;border-spacing:10px 1px'><tr><th>group</th><th>dtype</th>"
            f"<th>trained</th><th>params</th><th>MiB</th></tr>{rows}</table>"
        )
        self._drawn_census = s.census

    def _draw_alerts(self) -> None:
        alerts = self.state.alerts
        if self._drawn_alerts[0] is alerts and self._drawn_alerts[1] == len(alerts):
            return
        items = []
        for a in reversed(alerts[-30:]):
            color = ALERT_COLORS.get(a.level, "#444")
            detail = (
                f"<details><summary>details</summary><pre style='white-space:pre-wrap'>{html.escape(a.detail)}"
                f"</pre></details>"
                if a.detail and len(a.detail) > 160
                else f"<div style='color:#555'>{html.escape(a.detail)}</div>"
                if a.detail
                else ""
            )
            items.append(
                f"<div class='wb-alert wb-alert-{a.kind}' style='border-left:4px solid {color};padding:2px 8px;"
                f"margin:2px 0'><b style='color:{color}'>{html.escape(a.title)}</b>{detail}</div>"
            )
        self.alerts.value = f"<div style='max-height:220px;overflow-y:auto'>{''.join(items)}</div>" if items else ""
        self._drawn_alerts = (alerts, len(alerts))
