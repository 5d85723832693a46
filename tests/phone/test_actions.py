"""The action grammar: what parses, why the rest does not, the reply's <think>/<answer> split, writing an action
back (format_action) and grid points in pixels."""

from __future__ import annotations

import pytest

from workbench.phone.actions import (
    ACTION_ARGS,
    Action,
    ActionSyntaxError,
    format_action,
    parse_action,
    parse_legacy_action,
    split_answer,
    to_pixels,
)
from workbench.phone.openautoglm import reply_action


@pytest.mark.parametrize(
    "text, kind, args",
    [
        ('do(action="Tap", element=[880,200])', "Tap", {"element": [880, 200]}),
        ('  do(action="Long Press", element=[0, 999])\n', "Long Press", {"element": [0, 999]}),
        ('do(action="Swipe", start=[500,800], end=[500,300])', "Swipe", {"start": [500, 800], "end": [500, 300]}),
        ('do(action="Back")', "Back", {}),
        ('finish(message="done")', "finish", {"message": "done"}),
    ],
)
def test_valid_actions_parse(text, kind, args):
    action = parse_action(text)
    assert (action.type, action.args) == (kind, args)


@pytest.mark.parametrize(
    "text, why",
    [
        ("", "empty"),
        ("Tap the toggle", "not one call"),
        ('do(action="Fly")', "unknown action"),
        ('do(action="Tap", element=[1000,5])', "0..999"),
        ('do(action="Tap")', "takes"),
        ('do(action="Tap", element=[1,2], extra=1)', "takes"),
        ('do("Tap", [1,2])', "keywords"),
        ('do(action="Type", text=name)', "write Type as"),
        ("finish(message=done)", "write finish as"),
        ('do(action="Launch", app=name)', "literals"),
        ('print(action="Back")', "not a do"),
        ('do(action="Back") do(action="Home")', "not one call"),
    ],
)
def test_malformed_actions_say_why(text, why):
    with pytest.raises(ActionSyntaxError, match=why):
        parse_action(text)


def test_split_answer_forms():
    both = split_answer('<think>The toggle is on.</think><answer>do(action="Back")</answer>')
    assert (both.reasoning, both.answer, both.has_reasoning, both.has_answer_tag) == (
        "The toggle is on.",
        'do(action="Back")',
        True,
        True,
    )
    server_split = split_answer('<answer>do(action="Back")</answer>', reasoning="It is on.")
    assert (server_split.reasoning, server_split.answer) == ("It is on.", 'do(action="Back")')
    bare = split_answer('do(action="Back")')
    assert (bare.has_reasoning, bare.has_answer_tag, bare.answer) == (False, False, 'do(action="Back")')
    unclosed = split_answer("<think>still thinking")
    assert (unclosed.reasoning, unclosed.answer) == ("still thinking", "")


def test_reply_action_reads_a_replys_action_as_the_runtime_does_and_none_for_the_rest():
    assert reply_action('<think>On.</think>\n<answer>do(action="Tap", element=[5,6])') == Action(
        "Tap", {"element": [5, 6]}
    )
    assert reply_action('<answer>do(action="Back")') == Action("Back")
    assert reply_action('finish(message="done")') == Action("finish", {"message": "done"})
    # the runtime keeps everything from do(action= on: a closing tag reaches its parser, and ours, and fails
    for no_action in (
        None,
        "",
        "<think>still thinking",
        '<answer>do(action="Tap", element=[5000,6])',
        '<think>On.</think><answer>do(action="Tap", element=[5,6])</answer>',
        "do(\x00)",
        "(" * 10_000,
    ):
        assert reply_action(no_action) is None, no_action


@pytest.mark.parametrize(
    "action",
    [
        Action("Tap", {"element": [0, 999]}),
        Action("Double Tap", {"element": [5, 6]}),
        Action("Long Press", {"element": [500, 500]}),
        Action("Swipe", {"start": [500, 800], "end": [500, 300]}),
        Action("Type", {"text": 'say "hi" \\ 你好\nnext line'}),
        Action("Launch", {"app": "Settings"}),
        Action("Back"),
        Action("Home"),
        Action("Wait", {"duration": "2 seconds"}),
        Action("finish", {"message": "done: it's on"}),
    ],
)
def test_format_action_reads_back_as_the_same_action(action):
    text = format_action(action)
    assert parse_action(text) == action
    if action.type in ("Type", "finish"):  # written as it stands: the runtime types it as it stands between the quotes
        assert text.endswith(next(iter(action.args.values())) + '")')


def test_a_type_text_is_read_as_written_and_the_legacy_reading_unescapes_it():
    written = 'do(action="Type", text="say \\"hi\\"")'
    assert parse_action(written) == Action("Type", {"text": 'say \\"hi\\"'})  # the runtime types the backslashes
    assert parse_legacy_action(written) == Action("Type", {"text": 'say "hi"'})


def test_every_action_of_the_grammar_can_be_written():
    assert {a.split("(")[0] for a in ACTION_ARGS} == set(ACTION_ARGS)
    assert format_action(Action("Tap", {"element": [12, 34]})) == 'do(action="Tap", element=[12,34])'
    assert format_action(Action("Back")) == 'do(action="Back")'


def test_grid_points_become_pixels_as_autoglm_converts_them():
    assert to_pixels([500, 500], 1080, 2400) == (540, 1200)
    assert to_pixels([999, 999], 1080, 2400) == (1078, 2397)  # int(v / 1000 * size): never the edge pixel
    assert to_pixels([0, 0], 1080, 2400) == (0, 0)
    assert to_pixels([333, 667], 112, 252) == (37, 168)
