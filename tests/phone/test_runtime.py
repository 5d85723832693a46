"""The runtime message format, built turn by turn as Open-AutoGLM's agent builds it, and the checker that says how a
training row departs from it."""
from __future__ import annotations

import copy
import datetime

import pytest

from workbench.phone.runtime import Conversation, runtime_problems, system_prompt

DATE = datetime.date(2026, 12, 1)


def two_step_conversation() -> Conversation:
    c = Conversation("Open Settings", DATE)
    c.observe("data:image/png;base64,AAA", "System Home")
    c.reply("I launch Settings.", 'do(action="Launch", app="Settings")')
    c.observe("data:image/png;base64,BBB", "Settings")
    return c


def test_turns_are_built_as_the_runtime_builds_them():
    c = two_step_conversation()
    system, first, reply, later = c.messages
    assert system == {"role": "system", "content": system_prompt(DATE)}
    assert system["content"].startswith("The current date: 2026-12-01, Tuesday\n")
    assert 'do(action="Tap", element=[x,y])' in system["content"] and "0-999" in system["content"]
    assert first == {"role": "user", "content": [{"type": "text", "text": 'Open Settings\n\n{"current_app": "System Home"}'}]}
    assert reply == {"role": "assistant",
                     "content": '<think>I launch Settings.</think><answer>do(action="Launch", app="Settings")</answer>'}
    assert later == {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,BBB"}},
                                                 {"type": "text", "text": '** Screen Info **\n\n{"current_app": "Settings"}'}]}
    assert c.steps == 1
    with pytest.raises(RuntimeError):
        c.observe("x", "Settings")


def test_a_conforming_row_has_no_problems_and_each_departure_is_named():
    c = two_step_conversation()
    c.reply("Settings is open.", 'finish(message="done")')
    # a whole conversation is no training row: its last user turn lost the screenshot when the reply came
    assert "exactly one" in runtime_problems(c.messages)[0]
    row = two_step_conversation().messages + [{"role": "assistant", "content": '<think>ok</think><answer>finish(message="done")</answer>'}]
    assert runtime_problems(row) == []

    def broken(change) -> list[str]:
        bad = copy.deepcopy(row)
        change(bad)
        return runtime_problems(bad)

    assert "first message must be the system prompt" in broken(lambda m: m.pop(0))[0]
    assert "only the latest turn holds the screenshot" in broken(
        lambda m: m[1]["content"].insert(0, {"type": "image_url", "image_url": {"url": "x"}}))[0]
    assert "must start with '** Screen Info **'" in broken(lambda m: m[3]["content"][1].update(text='{"current_app": "Settings"}'))[0]
    assert "screen info must be JSON" in broken(lambda m: m[1]["content"][0].update(text="Open Settings\n\nSettings"))[0]
    assert "must be <think>...</think><answer>...</answer>" in broken(lambda m: m[2].update(content='do(action="Back")'))[0]
    assert "unknown action 'Fly'" in broken(lambda m: m[2].update(content='<think>x</think><answer>do(action="Fly")</answer>'))[0]
    assert "finishes the episode, yet" in broken(lambda m: m[2].update(content='<think>x</think><answer>finish(message="a")</answer>'))[0]
    assert "turns must alternate" in broken(lambda m: m.pop())[0]


def test_a_ui_tree_turn_carries_the_tree_in_its_screen_info_and_loses_it_once_answered():
    c = Conversation("Open Settings", DATE, observation="ui_tree")
    assert "its elements as text" in c.messages[0]["content"] and "screenshot" not in c.messages[0]["content"]
    c.observe(None, "System Home", 'Settings [50,260][245,365] tap [147,312]')
    assert c.messages[1] == {"role": "user", "content": 'Open Settings\n\n{"current_app": "System Home"}\n'
                                                        'Settings [50,260][245,365] tap [147,312]'}
    c.reply("I tap Settings.", 'do(action="Tap", element=[147,312])')
    assert c.messages[1]["content"] == 'Open Settings\n\n{"current_app": "System Home"}'  # the latest screen only
    c.observe(None, "Settings", 'Wi-Fi "On" [30,150][970,235] tap [500,192]')
    row = c.messages + [{"role": "assistant", "content": '<think>ok</think><answer>finish(message="done")</answer>'}]
    assert runtime_problems(row) == [] and runtime_problems(row, "ui_tree") == []
    assert runtime_problems(row, "both") == ["user turn 2 holds 0 image(s); observation both shows exactly one"]
    assert "holds 0 image(s); observation screenshot" in runtime_problems(row, "screenshot")[0]
    stale = copy.deepcopy(row)
    stale[1]["content"] += "\nSettings [50,260][245,365] tap [147,312]"
    assert "user turn 1 holds a screen tree; only the latest" in runtime_problems(stale)[0]
    assert "meta.observation 'xml'" in runtime_problems(row, "xml")[0]
    with pytest.raises(ValueError, match="needs the screen tree"):
        Conversation("x", DATE, observation="ui_tree").observe(None, "System Home")


def test_both_shows_the_screenshot_and_the_tree():
    c = Conversation("Open Settings", DATE, observation="both")
    c.observe("data:image/png;base64,AAA", "System Home", "Settings [50,260][245,365] tap [147,312]")
    image, text = c.messages[1]["content"]
    assert image["type"] == "image_url" and text["text"].endswith("\nSettings [50,260][245,365] tap [147,312]")
    row = c.messages + [{"role": "assistant", "content": '<think>ok</think><answer>do(action="Back")</answer>'}]
    assert runtime_problems(row, "both") == []
    c.reply("x", 'do(action="Back")')
    assert c.messages[1]["content"] == [{"type": "text", "text": 'Open Settings\n\n{"current_app": "System Home"}'}]
