"""The IPython magics in a real kernel (nbclient): train from a YAML cell, list the runs, chat with the run."""

from __future__ import annotations

import json

import nbclient
import nbformat
import pytest
import yaml
from IPython.core.error import UsageError

from tests.conftest import tiny_run_overrides
from workbench.config import apply_overrides
from workbench.serve import start_server
from workbench.ui.magics import split_chat_line

WIDGET = "application/vnd.jupyter.widget-view+json"


def code(source: str, *tags: str):
    return nbformat.v4.new_code_cell(source, metadata={"tags": list(tags)})


def stream_text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


def test_train_runs_chat_and_dashboard_magics(tmp_path):
    runs = tmp_path / "runs"
    # the cell holds a run configuration as a YAML file would; the magic line overrides two of its values
    body = yaml.safe_dump(
        apply_overrides({}, tiny_run_overrides(runs, **{"output.run_name": "magic-run", "schedule.max_steps": 50}))
    )
    nb = nbformat.v4.new_notebook(
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    )
    nb.cells = [
        code("%load_ext workbench"),
        code(f"%%workbench_train --wait --schedule.max_steps 2 --set schedule.micro_batch_size=2\n{body}"),
        code(f"%workbench_runs --runs-dir {runs}"),
        code(f'%workbench_chat --runs-dir {runs} --max-tokens 12 magic-run "Who are you?"'),
        code(f"%workbench --runs-dir {runs}"),
        code('%workbench_chat --server {url} --max-tokens 3 tiny-glm4 "It\'s a question: who are you?"'),
        code("%%workbench_train --lora.r 0\nprecision: {mode: fp8}", "raises-exception"),
        code("%workbench_chat no-such-model hello", "raises-exception"),
        code("%workbench_chat --help"),
    ]
    with start_server("tiny-glm4") as srv:  # a server of this process, asked by URL from the kernel
        nb.cells[5].source = nb.cells[5].source.format(url=srv.base_url)
        nbclient.NotebookClient(
            nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        ).execute()
    load, train, listed, chat, dashboard, remote_chat, bad_config, bad_model, chat_help = nb.cells

    assert load.outputs == []
    assert any(WIDGET in o.get("data", {}) for o in train.outputs), "the monitor was not shown"
    assert f"run finished: {runs / 'magic-run'}" in stream_text(train)
    config = json.loads((runs / "magic-run" / "config.json").read_text())
    assert config["schedule"]["max_steps"] == 2 and config["schedule"]["micro_batch_size"] == 2  # the line won
    assert config["data"]["max_length"] == 128  # the cell's value
    row = next(line for line in stream_text(listed).splitlines() if line.startswith("magic-run")).split()
    assert row[1:3] == ["finished", "2/2"] and float(row[3]) > 0 and row[4] == "tiny-glm4"

    # the answer streams after the model's name: the run's adapter answers greedily, as it does in this process
    answer = stream_text(chat)
    assert answer.startswith("magic-run: ") and "[error]" not in answer, answer
    from peft import PeftModel

    from workbench.forward.generate import greedy_replies
    from workbench.models import load_for_inference

    base = load_for_inference("tiny-glm4")
    tuned = PeftModel.from_pretrained(base.model, str(runs / "magic-run" / "adapter"))
    expected = greedy_replies(tuned, base.tokenizer, [[{"role": "user", "content": "Who are you?"}]], 12)[0]
    assert answer[len("magic-run: ") :].strip() == expected, (answer, expected)
    assert any(WIDGET in o.get("data", {}) for o in dashboard.outputs), "the dashboard was not shown"
    remote = stream_text(remote_chat)
    assert remote.startswith("tiny-glm4: ") and remote.strip() != "tiny-glm4:" and "[error]" not in remote, remote

    # a bad line or configuration is IPython's UsageError: one message, every problem, no traceback
    config_error, model_error = stream_text(bad_config), stream_text(bad_model)
    assert (
        config_error.startswith("UsageError: 2 problem(s) in the run configuration:")
        and "Traceback" not in config_error
    )
    assert "  - lora.r: " in config_error and "  - precision.mode: " in config_error
    assert model_error.startswith("UsageError: %workbench_chat: 'no-such-model' is neither a run")
    assert "give --server URL" in model_error
    assert stream_text(chat_help).startswith(
        "usage: %workbench_chat [--server URL] [--max-tokens N] [--runs-dir DIR] MODEL PROMPT"
    )


@pytest.mark.parametrize(
    "line, expected",
    [
        ("tiny-glm4 hello there", ("", "tiny-glm4", "hello there")),
        (
            "--max-tokens 4 --server http://h:1/v1 run-a  What's up, doc ",
            ("--max-tokens 4 --server http://h:1/v1 ", "run-a", "What's up, doc"),
        ),
        ('--max-tokens=4 run-a "Who are you?"', ("--max-tokens=4 ", "run-a", "Who are you?")),
        ('run-a "It\'s \\"quoted\\""', ("", "run-a", 'It\'s "quoted"')),  # shell quoting rules
        ('run-a "a" and "b"', ("", "run-a", '"a" and "b"')),  # two quoted parts: the text as typed
    ],
)
def test_the_chat_line_splits_into_options_model_and_prompt(line, expected):
    assert split_chat_line(line) == expected


@pytest.mark.parametrize("line", ["", "tiny-glm4", "--max-tokens 4 tiny-glm4   "])
def test_a_chat_line_without_a_prompt_is_a_usage_error(line):
    with pytest.raises(UsageError, match="give a model and a prompt"):
        split_chat_line(line)
