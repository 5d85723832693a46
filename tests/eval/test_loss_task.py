"""The held-out loss task (measured on the model, not the server) and ``eval.tasks`` scored while a run trains."""

from __future__ import annotations

import math

import pytest

from workbench.eval.loss import HeldoutLossTask
from workbench.eval.runner import EvalError, evaluate
from workbench.events import read_events
from workbench.runs.results import read_results

from ..conftest import SAMPLES

HELDOUT = SAMPLES / "identity" / "heldout.jsonl"


def _eval_rows(path):
    """A held-out set that is not the task's own file and holds more rows than eval.limit's default (16): the
    identity held-out rows in reverse order, then four training rows."""
    held = HELDOUT.read_text(encoding="utf-8").splitlines()[::-1]
    train_rows = (SAMPLES / "identity" / "train.jsonl").read_text(encoding="utf-8").splitlines()[:4]
    path.write_text("\n".join(held + train_rows) + "\n", encoding="utf-8")
    return path, len(held) + len(train_rows)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny-GLM-4 run with eval loss and task metrics (held-out loss, identity) at step 3 and at the end (step 6);
    eval.limit and the task's data left at their defaults."""
    from workbench.config import load_config
    from workbench.training import train

    from ..conftest import tiny_run_overrides

    tmp = tmp_path_factory.mktemp("runs")
    eval_file, rows = _eval_rows(tmp / "eval.jsonl")
    cfg = load_config(
        None,
        tiny_run_overrides(
            tmp,
            **{
                "data.eval": str(eval_file),
                "schedule.eval_loss_every": 3,
                "output.run_name": "tasks",
                "eval.tasks": ["heldout_loss", "identity"],
                "eval.every": 3,
                "eval.max_new_tokens": 6,
            },
        ),
    )
    assert cfg.eval.limit == 16 < rows and HeldoutLossTask().default_data != eval_file
    result = train(cfg)
    return result, [e for e in read_events(result.run_dir / "events.jsonl")[0]], rows


def test_task_metrics_are_logged_during_training_and_the_loss_task_is_the_engines_eval_loss(trained):
    result, events, rows = trained
    tasks = [e for e in events if e.type == "eval_task"]
    assert [(e.step, e.task) for e in tasks] == [
        (3, "heldout_loss"),
        (3, "identity"),
        (6, "heldout_loss"),
        (6, "identity"),
    ]
    identity = tasks[1].metrics
    assert identity["n"] == 16  # eval.limit bounds the answers generated
    eval_loss = {e.step: e for e in events if e.type == "eval"}
    for e in tasks[::2]:  # the run's data.eval, whole, batched and measured as the engine's eval: the same loss
        assert e.metrics["n"] == rows and e.metrics["tokens"] == eval_loss[e.step].tokens
        assert e.metrics["loss"] == pytest.approx(eval_loss[e.step].loss, rel=1e-6)
        assert e.metrics["perplexity"] == pytest.approx(math.exp(e.metrics["loss"]))
    assert tasks[2].metrics["loss"] < tasks[0].metrics["loss"]  # training lowers it


def test_evaluate_measures_the_loss_task_on_base_and_adapter_in_process(trained):
    result, _, rows = trained
    report = evaluate("heldout_loss", runs=[result.run_dir], progress=False)  # default data: the run's data.eval
    base, tuned = report.metrics["tiny-glm4"]["default"], report.metrics["tasks"]["default"]
    assert report.data == str(result.run_dir.parent / "eval.jsonl")
    assert base["n"] == tuned["n"] == rows and base["tokens"] == tuned["tokens"]
    assert tuned["loss"] == pytest.approx(result.eval_losses[-1][1], rel=1e-6)  # the adapter as trained
    assert tuned["loss"] < base["loss"]
    assert read_results(result.run_dir)["tasks"]["heldout_loss"]["metrics"] == report.metrics
    own = evaluate("heldout_loss", runs=[result.run_dir], data=HELDOUT, progress=False, write=False)
    assert own.data == str(HELDOUT) and own.metrics["tasks"]["default"]["n"] == 18  # an explicit file wins
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
