"""A run trained on the runtime format, served by ``workbench serve``, read by Open-AutoGLM's own client
(``phone_agent.model.ModelClient``, streamed as it asks) and parser: its reply parses into the trained action; with
``--reasoning inline`` (Open-AutoGLM's setup) the runtime keeps the reply in its history exactly as the training rows
hold earlier replies, while the default split leaves it an empty thinking. A run that learned the legacy form (closed
by ``</answer>``) fails the runtime's parser."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from workbench.phone.conversation import assistant_target
from workbench.phone.openautoglm import history_reply

from ..conftest import write_jsonl

PROMPT = [{"role": "user", "content": 'Open Settings\n\n{"current_app": "System Home"}'}]
LEGACY_PROMPT = [{"role": "user", "content": 'Open Chrome\n\n{"current_app": "System Home"}'}]
THINKING = "Settings is on the home screen."
ACTION = 'do(action="Launch", app="Settings")'
LEGACY_ACTION = 'do(action="Launch", app="Chrome")'


def _runtime_reply(base_url: str, model: str, prompt: list[dict]):
    from phone_agent.actions.handler import parse_action
    from phone_agent.model import ModelClient, ModelConfig

    with contextlib.redirect_stdout(io.StringIO()):  # the client prints its stream and timings
        response = ModelClient(ModelConfig(base_url=base_url, model_name=model, max_tokens=120)).request(prompt)
        try:
            action = parse_action(response.action)
        except ValueError:
            action = None
    return response, action


@pytest.fixture(scope="module")
def run_model(tmp_path_factory):
    """A tiny GLM-4 (a byte a token) that learned two replies by heart, all weights: one to a prompt in the runtime
    form, one to another prompt in the legacy form (closed by </answer>)."""
    from workbench.config import load_config
    from workbench.training import train

    from ..conftest import tiny_run_overrides

    tmp = tmp_path_factory.mktemp("runtime-served")
    rows = write_jsonl(
        tmp / "rows.jsonl",
        [
            json.dumps({"messages": PROMPT + [{"role": "assistant", "content": assistant_target(THINKING, ACTION)}]}),
            json.dumps(
                {
                    "messages": LEGACY_PROMPT
                    + [{"role": "assistant", "content": f"<think>{THINKING}</think><answer>{LEGACY_ACTION}</answer>"}]
                }
            ),
        ],
    )
    cfg = load_config(
        None,
        tiny_run_overrides(
            tmp / "runs",
            **{
                "data.train": str(rows),
                "data.max_length": 256,
                "lora.enabled": False,
                "schedule.max_steps": 150,
                "schedule.micro_batch_size": 2,
                "schedule.learning_rate": 1e-2,
                "schedule.min_lr_ratio": 0.05,
                "output.run_name": "memorised",
            },
        ),
    )
    return train(cfg).run_dir / "model"


@pytest.mark.parametrize("reasoning", ["inline", "split"])
def test_the_runtimes_client_parses_a_served_runtime_format_run(run_model, reasoning):
    from workbench.serve import start_server

    with start_server(str(run_model), model_id="agent", reasoning=reasoning, max_context=1024) as srv:
        response, action = _runtime_reply(srv.base_url, "agent", PROMPT)
    assert action == {"_metadata": "do", "action": "Launch", "app": "Settings"}, response.raw_content
    kept = history_reply(response.raw_content)
    if reasoning == "inline":  # the runtime's history holds the reply as the training rows hold an earlier one
        assert response.raw_content == assistant_target(THINKING, ACTION)
        assert kept == history_reply(assistant_target(THINKING, ACTION))
    else:  # the server took the thinking away: the runtime keeps an empty one
        assert kept == f"<think></think><answer>{ACTION}</answer>"


def test_a_reply_learned_in_the_legacy_form_fails_the_runtimes_parser(run_model):
    from workbench.serve import start_server

    with start_server(str(run_model), model_id="agent", reasoning="inline", max_context=1024) as srv:
        response, action = _runtime_reply(srv.base_url, "agent", LEGACY_PROMPT)
    assert response.action == f"{LEGACY_ACTION}</answer>" and action is None
