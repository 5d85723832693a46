"""The held-out loss task (measured on the model, not the server) and ``eval.tasks`` scored while a run trains."""
from __future__ import annotations

import math

import pytest

from workbench.events import read_events
from workbench.runs.results import read_results
from workbench.eval.runner import EvalError, evaluate

from ..conftest import SAMPLES

HELDOUT = SAMPLES / "identity" / "heldout.jsonl"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny-GLM-4 run with eval loss and task metrics (held-out loss on the eval file, identity) at step 3 and at
    the end (step 6)."""
    from workbench.config import load_config
    from workbench.training import train

    from ..conftest import tiny_run_overrides

    cfg = load_config(None, tiny_run_overrides(tmp_path_factory.mktemp("runs"), **{
        "data.eval": str(HELDOUT), "schedule.eval_every": 3, "output.run_name": "tasks",
        "eval.tasks": ["heldout_loss", "identity"], "eval.every": 3, "eval.limit": None, "eval.max_new_tokens": 6}))
    result = train(cfg)
    return result, [e for e in read_events(result.run_dir / "events.jsonl")[0]]


def test_task_metrics_are_logged_during_training_and_the_loss_task_is_the_engines_eval_loss(trained):
    result, events = trained
    tasks = [e for e in events if e.type == "eval_task"]
    assert [(e.step, e.task) for e in tasks] == [(3, "heldout_loss"), (3, "identity"), (6, "heldout_loss"), (6, "identity")]
    identity = tasks[1].metrics
    assert identity["n"] == 18 and 0.0 <= identity["identity_rate"] <= 1.0  # eval.limit null: every row
    eval_loss = dict(result.eval_losses)
    for e in tasks[::2]:  # same rows, same tokenization, same model as the engine's eval: the same loss
        assert e.metrics["loss"] == pytest.approx(eval_loss[e.step], rel=1e-5)
        assert e.metrics["perplexity"] == pytest.approx(math.exp(e.metrics["loss"]))
    assert tasks[2].metrics["loss"] < tasks[0].metrics["loss"]  # training lowers it


def test_evaluate_measures_the_loss_task_on_base_and_adapter_in_process(trained):
    result, _ = trained
    report = evaluate("heldout_loss", runs=[result.run_dir], progress=False)
    base, tuned = report.metrics["tiny-glm4"]["default"], report.metrics["tasks"]["default"]
    assert base["n"] == tuned["n"] == 18 and base["tokens"] == tuned["tokens"]
    assert tuned["loss"] == pytest.approx(result.eval_losses[-1][1], rel=1e-5)  # the adapter as trained
    assert tuned["loss"] < base["loss"]
    assert read_results(result.run_dir)["tasks"]["heldout_loss"]["metrics"] == report.metrics
    with pytest.raises(EvalError, match="not through a server"):
        evaluate("heldout_loss", server="http://127.0.0.1:9", progress=False)


def test_eval_tasks_are_validated_with_the_config():
    from workbench.config import ConfigError, load_config

    with pytest.raises(ConfigError) as err:
        load_config(None, {"eval.tasks": ["identity", "nope"], "lora.r": 0})
    text = str(err.value)
    assert "eval.tasks: unknown task 'nope'" in text and "lora.r" in text  # every problem at once


def test_cli_refuses_a_server_for_the_loss_task(capsys):
    from workbench.cli.main import main

    assert main(["eval", "--server", "http://127.0.0.1:9", "--task", "heldout_loss"]) == 2
    assert "measured on the model itself" in capsys.readouterr().err
