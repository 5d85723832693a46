"""The compare view of GRPO runs of the same seed under different precisions: the training-inference mismatch per
step (log scale: fp32's is ~10^4 below bf16's) and the reward curves, one colour per run, over
``precision_compare.PrecisionCompare``; the settings that differ between the runs are said above the charts."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import ipywidgets as W
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .lab_settings import chart_template
from .precision_compare import METRICS, PrecisionCompare

PANELS = ("mismatch", "kl", "reward")
COLOURS = {"fp32": "#1f77b4", "bf16": "#d62728", "fp16": "#2ca02c", "pure-bf16": "#9467bd"}


def figure(compare: PrecisionCompare, panels: Sequence[str] = PANELS, width: int = 980, height: int = 330) -> go.Figure:
    """The runs' ``panels`` (keys of ``precision_compare.METRICS``) side by side, one trace per run in each."""
    fig = make_subplots(
        rows=1, cols=len(panels), subplot_titles=[METRICS[p][1] for p in panels], horizontal_spacing=0.08
    )
    for col, panel in enumerate(panels, start=1):
        for label, (x, y) in compare.series(panel).items():
            fig.add_scatter(
                x=x,
                y=y,
                name=label,
                legendgroup=label,
                showlegend=col == 1,
                mode="lines+markers",
                line=dict(color=COLOURS.get(label)),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text="step", row=1, col=col)
        if panel != "reward":
            fig.update_yaxes(type="log", exponentformat="e", row=1, col=col)  # 1e-07, not SI "100n"
    fig.update_annotations(font_size=12)
    fig.update_layout(
        width=width,
        height=height,
        margin=dict(l=50, r=10, t=40, b=40),
        template=chart_template(),
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def _summary_html(compare: PrecisionCompare) -> str:
    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:.3g}"

    rows = "".join(
        f"<tr><td><b>{html.escape(r['run'])}</b></td><td>{html.escape(r['status'])}</td><td>{r['steps']}</td>"
        f"<td>{num(r['mismatch'])}</td><td>{num(r['reward'])}</td></tr>"
        for r in compare.summary()
    )
    notes = compare.differences()
    said = (
        "<div style='color:#a60'>not a same-seed comparison: " + "; ".join(html.escape(n) for n in notes) + "</div>"
        if notes
        else "<div style='color:#666'>same seed, prompts, rewards and schedule: the runs differ in precision only</div>"
    )
    return (
        f"{said}<table style='font-size:12px'><tr><th>run</th><th>status</th><th>steps</th>"
        f"<th>mean |delta logp|</th><th>mean reward</th></tr>{rows}</table>"
    )


class PrecisionCompareView(W.VBox):
    """GRPO runs of one seed under different precisions side by side; Refresh reads what their logs gained (runs
    still training are followed).

    Args:
        run_dirs: the runs compared.
        labels: their names on the chart (default: each run's precision).
    """

    def __init__(self, run_dirs: Sequence[str | Path], labels: Sequence[str] | None = None):
        self.compare = PrecisionCompare(run_dirs, labels)
        self.chart = go.FigureWidget(figure(self.compare))
        self.summary = W.HTML(_summary_html(self.compare))
        self.refresh_button = W.Button(description="Refresh", icon="refresh")
        self.refresh_button.on_click(lambda _: self.refresh())
        super().__init__([W.HTML("<b>GRPO precision compare</b>"), self.summary, self.chart, self.refresh_button])

    def refresh(self) -> None:
        self.compare.refresh()
        fresh = figure(self.compare)
        with self.chart.batch_update():
            self.chart.data = []
            self.chart.add_traces(
                list(fresh.data), rows=[1] * len(fresh.data), cols=[_column(self.chart, t) for t in fresh.data]
            )
        self.summary.value = _summary_html(self.compare)


def _column(fig: go.FigureWidget, trace) -> int:
    """The subplot column a trace of ``figure`` belongs to (its x axis: x, x2, x3...)."""
    axis = trace.xaxis or "x"
    return int(axis[1:] or 1)
