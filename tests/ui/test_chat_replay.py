"""The chat compare panel replays held-out rows of a task set: the expected answer and each model's verdict."""
from __future__ import annotations

from types import SimpleNamespace

from workbench.ui import chat_panel

ANSWERS = {"tuned": "I am PhoneMate, a phone assistant built on AutoGLM-Phone-9B.", "base": "I'm Claude, made by Anthropic.",
           "phone": '<think>The task starts on the home screen.</think><answer>do(action="Launch", app="Settings")</answer>'}


def _fake_models(monkeypatch, sent: list):
    class Answering:
        def __init__(self, model):
            self.model = model

        async def astream(self, messages):
            sent.append((self.model, messages))
            yield SimpleNamespace(content=ANSWERS[self.model], additional_kwargs={})

    monkeypatch.setattr(chat_panel, "chat_model", lambda model, **kw: Answering(model))


def test_replay_asks_the_rows_conversation_and_scores_each_model(monkeypatch):
    sent = []
    _fake_models(monkeypatch, sent)
    panel = chat_panel.ChatComparePanel(base_url="http://127.0.0.1:9/v1", models=["tuned", "base"])
    replay = panel.replay
    assert replay.task.value == "identity" and "heldout_loss" not in replay.task.options  # answer-scored tasks only
    assert len(replay.row.options) == 18 and replay.row.options[0][0].startswith("1: Who exactly are you?")
    verdicts = replay.replay(0, ["tuned", "base"])  # no event loop here: synchronous
    assert verdicts["tuned"]["ok"] is True and verdicts["base"]["ok"] is False
    assert verdicts["base"]["other_names"] == ["Claude", "Anthropic"]
    assert [m for m, _ in sent] == ["tuned", "base"] and sent[0][1][-1] == {"role": "user", "content": "Who exactly are you?"}
    assert "PhoneMate" in replay.expected.value and replay.result.value.count("pass") == 1
    assert "fail" in replay.result.value and [c.model for c in panel.answers.children] == ["tuned", "base"]


def test_replay_of_a_phone_action_row_shows_the_expected_action(monkeypatch):
    sent = []
    _fake_models(monkeypatch, sent)
    panel = chat_panel.ChatComparePanel(base_url="http://127.0.0.1:9/v1", models=["phone", "base"])
    panel.replay.task.value = "phone_actions_reasoning"  # reloads the rows
    first = panel.replay.examples[0]
    verdicts = panel.replay.replay(0, ["phone", "base"])
    assert "<answer>" in first.reference and "expected" in panel.replay.expected.value
    assert verdicts["base"]["parsed"] is False
    assert verdicts["phone"]["has_reasoning"] is True and verdicts["phone"]["parsed"] is True
    assert verdicts["phone"]["exact"] == (first.reference.endswith('do(action="Launch", app="Settings")</answer>'))


def test_replay_of_a_screenshot_row_sends_the_screenshot_inline(monkeypatch, tmp_path):
    from workbench.eval.phone import PhoneActionsTask

    from ..conftest import SAMPLES

    sent = []
    _fake_models(monkeypatch, sent)
    screens = PhoneActionsTask("screens", SAMPLES / "phone_screens" / "heldout.jsonl")
    monkeypatch.setattr(chat_panel, "_task", lambda name: screens)
    panel = chat_panel.ChatComparePanel(base_url="http://127.0.0.1:9/v1", models=["phone", "base"])
    panel.replay.load_rows()
    assert panel.replay.row.options[0][0].startswith("1: Task: ") and "data:" not in panel.replay.row.options[0][0]
    verdicts = panel.replay.replay(0, ["phone", "base"])
    (image, text), = [m["content"] for m in sent[0][1] if m["role"] == "user"]
    assert image["image_url"]["url"].startswith("data:image/png;base64,") and "Task:" in text["text"]
    assert panel.prompt.value == text["text"]  # the prompt box shows the row's text
    assert verdicts["phone"]["parsed"] is True and verdicts["base"]["parsed"] is False  # answered, so scored


def test_a_failed_replay_request_is_shown_as_an_error_not_a_fail(monkeypatch):
    class Failing:
        async def astream(self, messages):
            raise RuntimeError("HTTP 400: refused")
            yield  # an async generator

    monkeypatch.setattr(chat_panel, "chat_model", lambda model, **kw: Failing())
    panel = chat_panel.ChatComparePanel(base_url="http://127.0.0.1:9/v1", models=["base", "tuned"])
    verdicts = panel.replay.replay(0, ["base", "tuned"])
    assert verdicts["base"] == {"error": "RuntimeError: HTTP 400: refused"} == verdicts["tuned"]
    assert "error" in panel.replay.result.value and "fail" not in panel.replay.result.value
