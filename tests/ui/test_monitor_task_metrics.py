"""The monitor plots the task metrics scored during training (eval_task events) next to the eval loss."""

from __future__ import annotations

from workbench.events import EventWriter, RunStarted
from workbench.events.schema import Eval, EvalTask
from workbench.ui.monitor_panel import RunMonitor

from .run_logs import step_event


def _write_run(run_dir, tasks: bool, eval_file="heldout.jsonl"):
    run_dir.mkdir(parents=True)
    config = {
        "model": {"source": "tiny-glm4"},
        "data": {"eval": eval_file},
        "eval": {"tasks": ["identity", "heldout_loss"] if tasks else []},
    }
    with EventWriter(run_dir / "events.jsonl") as w:
        w.emit(
            RunStarted(
                run_dir=str(run_dir), config=config, hardware={}, versions={}, precision={"mode": "fp32"}, total_steps=4
            )
        )
        for n in (1, 2, 3, 4):
            w.emit(step_event(n, loss=3.0 - 0.5 * n, eta_s=4.0 - n))
            if tasks and n % 2 == 0:
                w.emit(Eval(step=n, loss=2.5 - 0.5 * n, tokens=50))
                w.emit(
                    EvalTask(
                        step=n,
                        task="identity",
                        wall_s=0.1,
                        metrics={"n": 8, "identity_rate": n / 4, "introduces_rate": n / 4, "claims_other_rate": 0.0},
                    )
                )
                w.emit(
                    EvalTask(
                        step=n,
                        task="heldout_loss",
                        wall_s=0.1,
                        metrics={"n": 8, "tokens": 50, "loss": 2.5 - 0.5 * n, "perplexity": 3.0},
                    )
                )


def test_task_rates_get_their_chart_and_a_task_loss_joins_the_eval_loss(tmp_path):
    _write_run(tmp_path / "with", tasks=True)
    m = RunMonitor()
    m.attach(tmp_path / "with")
    m.wait_sync(10)
    rates = {t.name: (list(t.x), list(t.y)) for t in m.charts.task_fig.data}
    assert rates == {
        "identity identity_rate": ([2, 4], [0.5, 1.0]),
        "identity introduces_rate": ([2, 4], [0.5, 1.0]),
        "identity claims_other_rate": ([2, 4], [0.0, 0.0]),
    }
    losses = {t.name: list(t.y) for t in m.charts.loss_fig.data}
    assert losses["eval loss"] == losses["held-out loss (task)"] == [1.5, 0.5]
    assert m.charts.figure_boxes["tasks"].layout.display is None and not m.charts.task_fig.layout.annotations[0].visible
    assert tuple(m.charts.task_fig.layout.xaxis.range) == (0, 4)

    m.attach(tmp_path / "with")  # a run attached again starts from clean charts
    m.wait_sync(10)
    assert (
        len(m.charts.task_fig.data) == 3 and [t.name for t in m.charts.loss_fig.data].count("held-out loss (task)") == 1
    )


def test_a_run_without_eval_tasks_hides_the_task_chart(tmp_path):
    _write_run(tmp_path / "without", tasks=False)
    m = RunMonitor()
    m.attach(tmp_path / "without")
    m.wait_sync(10)
    assert m.charts.figure_boxes["tasks"].layout.display == "none" and not m.charts.task_fig.data


def test_a_task_loss_of_a_run_without_an_eval_set_says_it_is_not_the_eval_loss(tmp_path):
    """Without data.eval the task measures its own file: its trace says so instead of posing as the eval loss."""
    _write_run(tmp_path / "no-eval", tasks=True, eval_file=None)
    m = RunMonitor()
    m.attach(tmp_path / "no-eval")
    m.wait_sync(10)
    names = [t.name for t in m.charts.loss_fig.data]
    assert "held-out loss (task)" not in names and "held-out loss (task's file: the run has no eval set)" in names
