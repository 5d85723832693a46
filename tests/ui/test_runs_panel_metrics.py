"""The runs panel's task metrics: eval results of two runs (and their base) as a table and a bar chart."""

from __future__ import annotations

from workbench.eval.runner import EvalReport
from workbench.runs.results import write_results
from workbench.ui.runs_panel import RunsPanel

from .test_panels import _write_synthetic_run


def _report(model: str, base_exact: float, exact: float, modes=("on", "off")) -> EvalReport:
    def metrics(value):
        return {"n": 4, "parse_rate": 1.0, "exact_match": value, "by_type": {"Tap": {"n": 4}}}

    return EvalReport(
        "phone_actions",
        "heldout.jsonl",
        "http://x/v1",
        {"base": "smol", "n": 4},
        1.0,
        {"smol": {m: metrics(base_exact) for m in modes}, model: {m: metrics(exact) for m in modes}},
    )


def test_runs_panel_shows_task_metrics_of_two_runs_with_the_base(tmp_path):
    runs = tmp_path / "runs"
    for name in ("a", "b"):
        _write_synthetic_run(runs / name)
    panel = RunsPanel(str(runs))
    assert panel.metrics_box.layout.display == "none" and panel.task_select.options == ()
    write_results(runs / "a", _report("a", 0.25, 0.5), "a")
    write_results(runs / "b", _report("b", 0.25, 0.75), "b")
    panel.refresh()
    assert panel.metrics_box.layout.display is None and panel.task_select.value == "phone_actions"
    assert [(r["label"], r["mode"], r["exact_match"]) for r in panel.metric_rows] == [
        ("smol (base)", "on", 0.25),
        ("smol (base)", "off", 0.25),
        ("a", "on", 0.5),
        ("a", "off", 0.5),
        ("b", "on", 0.75),
        ("b", "off", 0.75),
    ]
    table = panel.metrics_table.value
    assert table.count("smol (base)") == 2 and "0.750" in table and "by_type" not in table
    assert panel.metric_select.options == ("parse_rate", "exact_match")
    panel.metric_select.value = "exact_match"
    bars = {t.name: (list(t.x), list(t.y)) for t in panel.metrics_fig.data}
    assert bars == {
        "thinking on": (["smol (base)", "a", "b"], [0.25, 0.5, 0.75]),
        "thinking off": (["smol (base)", "a", "b"], [0.25, 0.5, 0.75]),
    }
    panel.metric_select.value = "parse_rate"
    assert list(panel.metrics_fig.data[0].y) == [1.0, 1.0, 1.0]


def test_runs_panel_shows_episode_metrics_next_to_single_step_ones(tmp_path):
    from workbench.agent.evaluate import TASK_NAME, AgentReport

    runs = tmp_path / "runs"
    _write_synthetic_run(runs / "a")
    write_results(runs / "a", _report("a", 0.25, 0.5), "a")
    episodes = {
        "n": 3,
        "success_rate": 2 / 3,
        "parse_failure_rate": 0.0,
        "mean_steps_success": 4.5,
        "prompt_tokens_last": 2900.0,
        "end_reasons": {"finish": 3},
        "by_template": {},
    }
    write_results(
        runs / "a",
        AgentReport(
            TASK_NAME,
            "heldout",
            "http://x/v1",
            {"base": "smol", "n": 3},
            1.0,
            {"smol": {"default": {**episodes, "success_rate": 0.0}}, "a": {"default": episodes}},
        ),
        "a",
    )
    panel = RunsPanel(str(runs))
    assert panel.task_select.options == ("phone_actions", TASK_NAME)
    panel.task_select.value = TASK_NAME
    assert [(r["label"], r["success_rate"]) for r in panel.metric_rows] == [("smol (base)", 0.0), ("a", 2 / 3)]
    assert "end_reasons" not in panel.metrics_table.value
    panel.metric_select.value = "success_rate"
    assert tuple(panel.metrics_fig.layout.yaxis.range) == (0, 1)
    panel.metric_select.value = "prompt_tokens_last"  # a count, not a rate: the axis fits it
    assert list(panel.metrics_fig.data[0].y) == [2900.0, 2900.0] and panel.metrics_fig.layout.yaxis.range is None


def test_runs_panel_shows_failed_requests_beside_the_metrics(tmp_path):
    runs = tmp_path / "runs"
    _write_synthetic_run(runs / "a")
    answered = {"n": 4, "parse_rate": 1.0, "failed": 0, "errors": []}
    refused = {"n": 1, "parse_rate": 0.0, "failed": 3, "errors": ["HTTP 400: local image paths are not accepted"]}
    write_results(
        runs / "a",
        EvalReport(
            "phone_actions",
            "heldout.jsonl",
            "http://x/v1",
            {"base": "smol", "n": 4},
            1.0,
            {"smol": {"default": answered}, "a": {"default": refused}},
        ),
        "a",
    )
    panel = RunsPanel(str(runs))
    assert [(r["label"], r["failed"]) for r in panel.metric_rows] == [("smol (base)", 0), ("a", 3)]
    assert panel.metric_rows[1]["errors"] == refused["errors"] and "errors" not in panel.metric_rows[0]
    table = panel.metrics_table.value
    assert "<th>failed</th>" in table and "a (default): 3 of 4 requests failed" in table
    assert "local image paths are not accepted" in table and "smol (base) (default)" not in table
    assert panel.metric_select.options == ("parse_rate",)  # counts are no rate to plot
