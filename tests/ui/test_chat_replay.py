"""The chat compare panel replays held-out rows of a task set: the expected answer and each model's verdict.

Through the real request path: each model is a scripted server (tests/serve/scripted.py: an OpenAI-compatible
server whose model writes a fixed answer), asked by the panel's langchain-openai client over HTTP; the servers'
models record the prompts they were given."""

from __future__ import annotations

import pytest

from tests.serve.scripted import answering_model
from workbench.ui import chat_panel

ANSWERS = {
    "tuned": "I am PhoneMate, a phone assistant built on AutoGLM-Phone-9B.",
    "base": "I'm Claude, made by Anthropic.",
    "phone": '<think>The task starts on the home screen.</think><answer>do(action="Launch", app="Settings")</answer>',
}
VISION = {"phone"}  # served as a vision-language model: it reads screenshots; the others are text-only


@pytest.fixture(scope="module")
def servers():
    """{model id: server}: one scripted server per model, started once (about a second each)."""
    from contextlib import ExitStack

    from workbench.serve import start_server

    with ExitStack() as stack:
        yield {
            m: stack.enter_context(start_server(m, loaded=answering_model(text, vision=m in VISION), max_batch=2))
            for m, text in ANSWERS.items()
        }


def _panel(servers, models: list[str]) -> chat_panel.ChatComparePanel:
    panel = chat_panel.ChatComparePanel(server=servers[models[0]], models=models)
    for m in models[1:]:
        panel.endpoints[m] = servers[m]
    return panel


def _prompts(server) -> list[str]:
    """The prompts the server's model was given, decoded, padding dropped; emptied for the next request."""
    model, tok = server.served.decoder.base_model, server.served.tokenizer
    texts = [tok.decode([i for i in ids if i != tok.pad_token_id]) for ids in model.prompts]
    model.prompts.clear()
    return texts


def test_replay_asks_the_rows_conversation_and_scores_each_model(servers):
    panel = _panel(servers, ["tuned", "base"])
    _prompts(servers["tuned"]), _prompts(servers["base"])
    replay = panel.replay
    assert replay.task.value == "identity" and "heldout_loss" not in replay.task.options  # answer-scored tasks only
    assert len(replay.row.options) == 18 and replay.row.options[0][0].startswith("1: Who exactly are you?")
    assert replay.row.value == 0  # the picker shows a row, not a blank (Replay works without picking one)
    verdicts = replay.replay(None, ["tuned", "base"])  # no event loop here: synchronous
    assert verdicts["tuned"]["ok"] is True and verdicts["base"]["ok"] is False
    assert verdicts["base"]["other_names"] == ["Claude", "Anthropic"]
    for m in ("tuned", "base"):  # each server was asked the row's question, as the chat template renders it
        (prompt,) = _prompts(servers[m])
        assert prompt.endswith("<|user|>\nWho exactly are you?<|assistant|>\n"), prompt
    assert "PhoneMate" in replay.expected.value and replay.result.value.count("pass") == 1
    assert "fail" in replay.result.value and [c.model for c in panel.answers.children] == ["tuned", "base"]
    assert ANSWERS["tuned"] in panel.answers.children[0].answer.value  # the answer streamed into its column
    replay.row.options = []  # a task set with no rows: Replay says so instead of doing nothing
    assert replay.replay(None, ["tuned", "base"]) == {} and "no row to replay" in replay.result.value


def test_replay_of_a_phone_action_row_shows_the_expected_action(servers):
    panel = _panel(servers, ["phone", "base"])
    panel.replay.task.value = "phone_actions_reasoning"  # reloads the rows
    first = panel.replay.examples[0]
    verdicts = panel.replay.replay(0, ["phone", "base"])
    assert "<answer>" in first.reference and "expected" in panel.replay.expected.value
    assert panel.replies["phone"].reasoning == "The task starts on the home screen."  # the server split the thinking
    assert verdicts["base"]["parsed"] is False, verdicts
    assert verdicts["phone"]["has_reasoning"] is True and verdicts["phone"]["parsed"] is True
    assert verdicts["phone"]["exact"] == (first.reference.endswith('do(action="Launch", app="Settings")</answer>'))


def test_replay_of_a_screenshot_row_sends_the_screenshot_inline(servers):
    panel = _panel(servers, ["phone", "base"])
    panel.replay.task.value = "phone_screens"  # the held-out screenshot set, a task of its own (notebook 05 picks it)
    assert len(panel.replay.row.options) == 40 and panel.replay.row.value == 0
    assert panel.replay.row.options[0][0].startswith("1: Task: ") and "data:" not in panel.replay.row.options[0][0]
    seen = servers["phone"].served.decoder.base_model.seen_images
    _prompts(servers["phone"])
    verdicts = panel.replay.replay(0, ["phone", "base"])
    # the vision server decoded the row's screenshot and prefilled its pixels with the row's text
    assert servers["phone"].served.decoder.base_model.seen_images == seen + 1
    (prompt,) = _prompts(servers["phone"])
    text = panel.replay.examples[0].messages[-1]["content"][-1]["text"]
    assert "<|image|>" in prompt and prompt.endswith(text + "<|assistant|>\n"), prompt
    assert panel.prompt.value == text  # the prompt box shows the row's text
    assert verdicts["phone"]["parsed"] is True
    # the text-only server refused the image with its 400: an error shown as such, not a failed answer
    assert "text-only model and cannot read images" in verdicts["base"]["error"]


def test_a_failed_replay_request_is_shown_as_an_error_not_a_fail(servers):
    panel = chat_panel.ChatComparePanel(server=servers["tuned"], models=["tuned", "nobody"])  # nobody is served
    verdicts = panel.replay.replay(0, ["tuned", "nobody"])
    assert set(verdicts["nobody"]) == {"error"} and "nobody" in verdicts["nobody"]["error"], verdicts
    assert verdicts["tuned"]["ok"] is True
    assert "error" in panel.replay.result.value and "fail" not in panel.replay.result.value
