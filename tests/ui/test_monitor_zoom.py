"""Zooming a step chart of the monitor reads that window of the log again at full resolution; live redraws keep the
zoom; a reset-zoom brings the run's overview back (issue 25). The front end's relayout messages are sent as plotly's
widget sends them."""

from workbench.bench.long_run import write_log
from workbench.ui.monitor_panel import RunMonitor
from workbench.ui.run_state import RECENT_STEPS


def _relayout(fig, data):
    fig._js2py_relayout = {"relayout_data": data, "source_view_id": "view"}


def test_a_zoomed_chart_shows_every_step_of_its_window_until_zoomed_out(tmp_path):
    run = tmp_path / "run"
    write_log(run, 12_000, total_steps=20_000)
    monitor = RunMonitor()
    monitor.attach(run)
    overview = list(monitor.charts.loss_fig.data[0].x)
    assert sum(1 for x in overview if 3000 <= x <= 3400) < 100  # thinned there (one step in 8)
    _relayout(monitor.charts.loss_fig, {"xaxis.range[0]": 3000.2, "xaxis.range[1]": 3399.7})
    assert list(monitor.charts.loss_fig.data[0].x) == list(range(3000, 3401))
    assert list(monitor.charts.lr_fig.data[0].x) == overview  # the other charts keep the overview
    write_log(run, 10, start=12_001)  # the run goes on: the redraw keeps the zoomed window and its range
    monitor.poll_once(force=True)
    assert list(monitor.charts.loss_fig.data[0].x) == list(range(3000, 3401))
    assert tuple(monitor.charts.loss_fig.layout.xaxis.range) == (3000.2, 3399.7)
    assert monitor.charts.lr_fig.data[0].x[-1] == 12_010 and tuple(monitor.charts.lr_fig.layout.xaxis.range) == (
        0,
        20_000,
    )
    _relayout(monitor.charts.loss_fig, {"xaxis.autorange": True})  # double-click: zoomed out
    assert (
        monitor.charts.loss_fig.data[0].x[-1] == 12_010
        and len(monitor.charts.loss_fig.data[0].x) < 2000 + RECENT_STEPS + 20
    )
    monitor.poller.redraw()
    assert tuple(monitor.charts.loss_fig.layout.xaxis.range) == (0, 20_000)
    _relayout(
        monitor.charts.scale_fig, {"xaxis.range[0]": 1990, "xaxis.range[1]": 2000}
    )  # the overflow at 1994 is there
    assert list(monitor.charts.scale_fig.data[1].x) == [1994] and len(monitor.charts.scale_fig.data[0].x) == 11
