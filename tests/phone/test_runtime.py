"""The runtime message format, built turn by turn as Open-AutoGLM's agent builds it, the checker that says how a
training row departs from it, and the rewrite of legacy rows (tests/phone/test_openautoglm.py holds it to the
runtime's own package; tests/agent/test_openautoglm_loop.py to its whole loop)."""

from __future__ import annotations

import copy
import datetime
import json

import pytest

from workbench.phone.conversation import (
    FORMAT_NAME,
    LEGACY_FORMAT_NAME,
    Conversation,
    assistant_target,
    legacy_rows,
    runtime_problems,
    system_prompt,
)

DATE = datetime.date(2026, 12, 1)
LAUNCH = 'do(action="Launch", app="Settings")'


def two_step_conversation(lang: str = "en") -> Conversation:
    c = Conversation("Open Settings", DATE, lang=lang)
    c.observe("data:image/png;base64,AAA", "System Home")
    c.reply(assistant_target("I launch Settings.", LAUNCH))
    c.observe("data:image/png;base64,BBB", "AndroidSystemSettings")
    return c


def test_turns_are_built_as_the_runtime_builds_them():
    c = two_step_conversation()
    system, first, reply, later = c.messages
    assert system == {"role": "system", "content": system_prompt(DATE)}
    assert system["content"].startswith(
        "The current date: 2026-12-01, Tuesday\n# Setup\nYou are a professional Android"
    )
    assert first == {
        "role": "user",
        "content": [{"type": "text", "text": 'Open Settings\n\n{"current_app": "System Home"}'}],
    }
    # the runtime's client cuts the reply at do(action=: the thinking keeps the model's own tags
    assert reply == {
        "role": "assistant",
        "content": f"<think><think>I launch Settings.</think>\n<answer></think><answer>{LAUNCH}</answer>",
    }
    assert later == {
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,BBB"}},
            {"type": "text", "text": '** Screen Info **\n\n{"current_app": "AndroidSystemSettings"}'},
        ],
    }
    assert c.steps == 1
    with pytest.raises(RuntimeError):
        c.observe("x", "Settings")


def test_the_chinese_prompt_is_the_runtimes_default_form():
    prompt = two_step_conversation("cn").messages[0]["content"]
    assert prompt.startswith("今天的日期是: 2026年12月01日 星期二\n你是一个智能体分析专家")
    with pytest.raises(ValueError, match="cn, en"):
        Conversation("x", DATE, lang="zh")


def test_the_reply_to_learn_has_no_closing_answer_tag():
    assert assistant_target("Tap it.", 'do(action="Back")') == '<think>Tap it.</think>\n<answer>do(action="Back")'


def conforming_row() -> list[dict]:
    return two_step_conversation().messages + [
        {"role": "assistant", "content": assistant_target("ok", 'finish(message="done")')}
    ]


def test_a_conforming_row_has_no_problems_and_each_departure_is_named():
    c = two_step_conversation()
    c.reply(assistant_target("Settings is open.", 'finish(message="done")'))
    # a whole conversation is no training row: its last user turn lost the screenshot when the reply came
    assert "exactly one" in runtime_problems(c.messages)[0]
    assert runtime_problems(conforming_row()) == []

    def broken(change) -> list[str]:
        bad = copy.deepcopy(conforming_row())
        change(bad)
        return runtime_problems(bad)

    assert "Open-AutoGLM's system prompt" in broken(lambda m: m.pop(0))[0]
    assert "not Open-AutoGLM's" in broken(lambda m: m[0].update(content=m[0]["content"] + " "))[0]
    assert (
        "only the latest turn holds the screenshot"
        in broken(lambda m: m[1]["content"].insert(0, {"type": "image_url", "image_url": {"url": "x"}}))[0]
    )
    assert (
        "must start with '** Screen Info **'"
        in broken(lambda m: m[3]["content"][1].update(text='{"current_app": "Settings"}'))[0]
    )
    assert (
        "screen info must be JSON" in broken(lambda m: m[1]["content"][0].update(text="Open Settings\n\nSettings"))[0]
    )
    # an earlier reply must be as the runtime keeps it; the reply to learn as the model writes it
    assert "as the runtime keeps it" in broken(lambda m: m[2].update(content=assistant_target("x", LAUNCH)))[0]
    assert "no closing </answer>" in broken(lambda m: m[4].update(content=m[4]["content"] + "</answer>"))[0]
    assert "no closing </answer>" in broken(lambda m: m[4].update(content='finish(message="done")'))[0]
    assert (
        "the thinking holds one"
        in broken(lambda m: m[4].update(content=assistant_target('Not yet finish(message="x").', 'do(action="Back")')))[
            0
        ]
    )
    assert "unknown action 'Fly'" in broken(lambda m: m[4].update(content=assistant_target("x", 'do(action="Fly")')))[0]
    assert (
        "finishes the episode, yet"
        in broken(
            lambda m: m[2].update(
                content='<think><think>x</think>\n<answer></think><answer>finish(message="a")</answer>'
            )
        )[0]
    )
    assert "turns must alternate" in broken(lambda m: m.pop())[0]


def test_a_ui_tree_turn_carries_the_tree_in_its_screen_info_and_loses_it_once_answered():
    c = Conversation("Open Settings", DATE, observation="ui_tree")
    assert "its elements, one a line" in c.messages[0]["content"] and "screenshot" not in c.messages[0]["content"]
    c.observe(None, "System Home", "Settings [50,260][245,365] tap [147,312]")
    assert c.messages[1] == {
        "role": "user",
        "content": 'Open Settings\n\n{"current_app": "System Home"}\nSettings [50,260][245,365] tap [147,312]',
    }
    c.reply(assistant_target("I tap Settings.", 'do(action="Tap", element=[147,312])'))
    assert c.messages[1]["content"] == 'Open Settings\n\n{"current_app": "System Home"}'  # the latest screen only
    c.observe(None, "AndroidSystemSettings", 'Wi-Fi "On" [30,150][970,235] tap [500,192]')
    row = c.messages + [{"role": "assistant", "content": assistant_target("ok", 'finish(message="done")')}]
    assert runtime_problems(row) == [] and runtime_problems(row, "ui_tree") == []
    assert (
        "not Open-AutoGLM's (en, observation both)" in runtime_problems(row, "both")[0]
    )  # the prompt says what it sees
    stale = copy.deepcopy(row)
    stale[1]["content"] += "\nSettings [50,260][245,365] tap [147,312]"
    assert "user turn 1 holds a screen tree; only the latest" in runtime_problems(stale)[0]
    assert "meta.observation 'xml'" in runtime_problems(row, "xml")[0]
    with pytest.raises(ValueError, match="needs the screen tree"):
        Conversation("x", DATE, observation="ui_tree").observe(None, "System Home")


def test_both_shows_the_screenshot_and_the_tree():
    c = Conversation("Open Settings", DATE, observation="both")
    assert (
        "Given a screenshot of the Android interface at each step and its elements as text" in c.messages[0]["content"]
    )
    c.observe("data:image/png;base64,AAA", "System Home", "Settings [50,260][245,365] tap [147,312]")
    image, text = c.messages[1]["content"]
    assert image["type"] == "image_url" and text["text"].endswith("\nSettings [50,260][245,365] tap [147,312]")
    row = c.messages + [{"role": "assistant", "content": assistant_target("ok", 'do(action="Back")')}]
    assert runtime_problems(row, "both") == []
    c.reply(assistant_target("x", 'do(action="Back")'))
    assert c.messages[1]["content"] == [{"type": "text", "text": 'Open Settings\n\n{"current_app": "System Home"}'}]


def _legacy_row() -> dict:
    """A row as the workbench wrote it before 2026-12-06 (its own prompt, closing tags, an escaped Type text)."""
    system = "The current date: 2026-12-01, Tuesday\n# Setup\nYou operate an Android phone ...\n# Output format\n..."
    return {
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": [{"type": "text", "text": 'Say hi\n\n{"current_app": "System Home"}'}]},
            {
                "role": "assistant",
                "content": '<think>Open it.</think><answer>do(action="Launch", app="Messages")</answer>',
                "weight": 0,
            },
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "images/a.png"}},
                    {"type": "text", "text": '** Screen Info **\n\n{"current_app": "Messages"}'},
                ],
            },
            {
                "role": "assistant",
                "content": '<think>Type.</think><answer>do(action="Type", text="say \\"hi\\"")</answer>',
                "weight": 1,
            },
        ],
        "meta": {"format": LEGACY_FORMAT_NAME, "task": "t", "step": 2},
    }


def test_legacy_rows_become_the_runtime_form_with_their_screens_and_actions():
    (new,) = legacy_rows([_legacy_row()])
    assert runtime_problems(new["messages"], "screenshot") == []
    assert new["meta"] == {"format": FORMAT_NAME, "lang": "en", "task": "t", "step": 2}
    system, first, reply, later, target = new["messages"]
    assert system["content"] == system_prompt(DATE)
    assert reply == {
        "role": "assistant",
        "weight": 0,
        "content": "<think><think>Open it.</think>\n<answer></think>"
        '<answer>do(action="Launch", app="Messages")</answer>',
    }
    assert later["content"][0] == {"type": "image_url", "image_url": {"url": "images/a.png"}}  # the screen kept
    # the escaped text now written as the runtime reads it: as it stands between the quotes
    assert target == {
        "role": "assistant",
        "weight": 1,
        "content": '<think>Type.</think>\n<answer>do(action="Type", text="say "hi"")',
    }
    with pytest.raises(ValueError, match="row 1: meta.format is 'open-autoglm'"):
        legacy_rows([new])


def test_data_convert_and_check_say_which_form_a_file_has(tmp_path, capsys):
    from workbench.cli.main import main

    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps(_legacy_row()) + "\n")
    (tmp_path / "images").mkdir()
    from PIL import Image

    Image.new("RGB", (8, 18)).save(tmp_path / "images" / "a.png")
    assert main(["data", "check", str(old)]) == 0
    assert "1 in the legacy form" in capsys.readouterr().err
    assert main(["data", "convert", str(old), str(tmp_path / "new.jsonl")]) == 0
    assert main(["data", "check", str(tmp_path / "new.jsonl")]) == 0
    assert "1 in Open-AutoGLM's runtime format" in capsys.readouterr().err


def test_data_convert_lang_cn_writes_the_chinese_prompt_it_names(tmp_path, capsys):
    from workbench.cli.main import main

    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_text(json.dumps(_legacy_row()) + "\n")
    assert main(["data", "convert", str(old), str(new), "--lang", "cn"]) == 0
    assert "(lang cn)" in capsys.readouterr().out
    row = json.loads(new.read_text())
    assert row["messages"][0]["content"] == system_prompt(DATE, lang="cn")  # 今天的日期是: 2026年12月01日 ...
    assert row["meta"]["lang"] == "cn"
