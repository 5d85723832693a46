"""The screen as text: the compact tree of the simulated screens (exact: drawn from the same elements) and of a real
phone's ``uiautomator dump``, in one format; the ADB bridge reads it from the phone. Shuffled layouts of ui_tree
rows: same-size elements trade places, the reply's tap follows its element, and only rows whose target is a name
are moved."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from workbench.config.samples import resolve_sample_path
from workbench.phone.actions import Action, in_box, parse_action, split_answer
from workbench.phone.sim import SimPhone
from workbench.phone.tasks import TASKS, select_tasks
from workbench.phone.uitree import (
    KEYBOARD_LINE,
    compress_uiautomator,
    moved_elements,
    shuffled_layout,
    tree_boxes,
    turn_tree,
)

DUMP = Path(__file__).parent / "data" / "uiautomator_settings.xml"  # written in uiautomator's format (no phone here)
LINE = re.compile(r"^(?P<name>.+?) (?:\"[^\"]*\" )*\[(\d+),(\d+)\]\[(\d+),(\d+)\] tap \[(?P<x>\d+),(?P<y>\d+)\]")


def _tap_points(tree: str) -> dict[str, list[int]]:
    return {m["name"]: [int(m["x"]), int(m["y"])] for m in map(LINE.match, tree.splitlines()) if m}


def test_every_oracle_tap_is_a_tap_point_the_tree_names_on_that_screen():
    """What a text agent must do at each tap, copy the point of the line that names the target, is possible at
    every tap of every oracle; and the tree shows the values a task names (a held-out contact's row)."""
    taps = 0
    for task in TASKS:
        phone = SimPhone()
        phone.reset(task.initial_state())
        for step in task.oracle():
            if step.action.type in ("Tap", "Double Tap", "Long Press"):
                points = _tap_points(phone.ui_tree())
                assert step.action.args["element"] in points.values(), (task.id, phone.ui_tree())
                taps += 1
            phone.execute(step.action)
    assert taps > 200


def test_the_tree_lists_elements_in_reading_order_with_texts_gestures_and_the_keyboard():
    phone = SimPhone()
    phone.execute(Action("Launch", {"app": "Contacts"}))
    lines = phone.ui_tree().splitlines()
    rows = [line for line in lines if LINE.match(line)]
    tops = [int(LINE.match(line).group(3)) for line in rows]
    assert tops == sorted(tops)
    assert any(line.startswith("Alice Chen ") and line.endswith("long-press") for line in rows)
    assert 'text "Contacts"' in lines  # the title: a text outside every element
    assert not any(line == 'text "A"' for line in lines)  # one-letter glyphs (avatars, icons) are left out
    task = select_tasks("reply_message")[0]
    phone.reset(task.initial_state())
    for step in task.oracle()[:3]:  # Launch Messages, open the thread, tap the box: the keyboard is up
        phone.execute(step.action)
    assert phone.ui_tree().splitlines()[0] == KEYBOARD_LINE
    phone.execute(Action("Type", {"text": "On my way"}))
    assert any(line.startswith('Message box "On my way') for line in phone.ui_tree().splitlines())


def test_a_uiautomator_dump_compresses_to_the_same_format_on_the_grid():
    tree = compress_uiautomator(DUMP.read_text(encoding="utf-8"), 1080, 2400)
    lines = tree.splitlines()
    assert lines[0] == KEYBOARD_LINE  # the search field (an EditText) has the focus
    assert 'text "Settings"' in lines
    # a clickable row takes its title as name and its summary as text; pixels [0,927][1080,1138] -> grid
    assert 'Display "Dark theme, font size, brightness" [0,386][999,474] tap [499,430]' in lines
    assert "Search settings [38,125][961,183] tap [499,154]" in lines  # a content description names an icon field
    assert _tap_points(tree)["Network & internet"] == [499, 254]


TREE = """text "Settings"
Wi-Fi "On" [30,150][970,235] tap [500,192]
Bluetooth "Off" [30,245][970,330] tap [500,287]
Airplane mode "Off" [30,340][970,425] tap [500,382]"""


def _rows(name: str = "train.jsonl") -> list[dict]:
    with open(resolve_sample_path(f"data_samples/phone_episodes_tree/{name}"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _line_of(tree: str, name: str) -> str:
    return next(line for line in tree.split("\n") if line.startswith(name + " "))


def test_moved_elements_trade_places_and_keep_reading_order():
    moved = moved_elements(TREE, {(30, 150, 970, 235): (30, 340, 970, 425), (30, 340, 970, 425): (30, 150, 970, 235)})
    assert moved.split("\n") == [
        'text "Settings"',
        'Airplane mode "Off" [30,150][970,235] tap [500,192]',
        'Bluetooth "Off" [30,245][970,330] tap [500,287]',
        'Wi-Fi "On" [30,340][970,425] tap [500,382]',
    ]
    with pytest.raises(ValueError, match="permute"):
        moved_elements(TREE, {(30, 150, 970, 235): (30, 340, 970, 425)})


def _assert_same_elements_in_permuted_boxes(before: str, after: str) -> None:
    """A shuffled turn: the same screen info, the same elements (each name with its text, gestures and box size), the
    same boxes, each element in one of them: only which element sits in which box changed."""
    (head, tree), (new_head, new_tree) = turn_tree(before), turn_tree(after)
    assert new_head == head and tree and new_tree

    def elements(text: str) -> list:
        return sorted(
            (
                re.sub(r" \[\d+,\d+\]\[\d+,\d+\] tap \[\d+,\d+\]", "", line),
                None if box is None else (box[2] - box[0], box[3] - box[1]),
            )
            for line, box in zip(text.split("\n"), tree_boxes(text))
        )

    assert elements(new_tree) == elements(tree)
    assert sorted(map(str, tree_boxes(new_tree))) == sorted(map(str, tree_boxes(tree)))


def test_a_shuffled_row_taps_its_element_where_the_tree_now_draws_it():
    moved = 0
    for i, row in enumerate(_rows()):
        out = shuffled_layout(row, random.Random(i))
        assert out["messages"][:-2] == row["messages"][:-2] and row == json.loads(json.dumps(row))  # input untouched
        before, after = row["messages"][-2]["content"], out["messages"][-2]["content"]
        _assert_same_elements_in_permuted_boxes(before, after)
        action = parse_action(split_answer(row["messages"][-1]["content"]).answer)
        new = parse_action(split_answer(out["messages"][-1]["content"]).answer)
        if row["meta"]["template"] == "open_result":  # the first result is a position: never moved
            assert out == row
            continue
        box = row["meta"]["target_box"]
        if box is None or action.type == "Swipe":
            assert new == action
            continue
        # the element the recorded tap hit is, in the shuffled tree, at the point the new tap hits
        name = next(line for line in before.split("\n") if f"[{box[0]},{box[1]}][{box[2]},{box[3]}]" in line).split(
            " ["
        )[0]
        new_box = out["meta"]["target_box"]
        assert f"[{new_box[0]},{new_box[1]}][{new_box[2]},{new_box[3]}]" in _line_of(after, name)
        assert in_box(new.point(), tuple(new_box)) and new.type == action.type
        # the reasoning quotes the target's line as the shuffled tree draws it (quoted_target)
        assert split_answer(out["messages"][-1]["content"]).reasoning.endswith("\n" + _line_of(after, name))
        moved += tuple(new_box) != tuple(box)
    assert moved > 40  # most targets moved (a permutation may leave one in place)


def test_rows_that_are_not_ui_tree_are_left_as_they_are():
    row = _rows()[0]
    screenshot = {**row, "meta": {**row["meta"], "observation": "screenshot"}}
    assert shuffled_layout(screenshot, random.Random(0)) == screenshot
    assert all(b is None for b in tree_boxes('text "x"\nkeyboard open'))


def test_elements_sharing_a_box_stay_and_a_tap_on_an_unmoved_inner_element_stays():
    tree = "\n".join(
        [
            "A [0,0][100,100] tap [50,50]",
            "B [0,200][100,300] tap [50,250]",
            "Inner [10,210][40,240] tap [25,225]",
            "C [0,400][100,500] tap [50,450]",
            "D [0,400][100,500] tap [50,450]",
        ]
    )
    row = {
        "meta": {"observation": "ui_tree", "template": "x", "target_box": [10, 210, 40, 240]},
        "messages": [
            {"role": "user", "content": '{"current_app": "X"}\n' + tree},
            {"role": "assistant", "content": '<think>t</think><answer>do(action="Tap", element=[25,225])</answer>'},
        ],
    }
    for seed in range(8):
        out = shuffled_layout(row, random.Random(seed))
        lines = out["messages"][0]["content"].split("\n")[1:]
        assert "C [0,400][100,500] tap [50,450]" in lines and "D [0,400][100,500] tap [50,450]" in lines
        assert out["messages"][1] == row["messages"][1] and out["meta"] == row["meta"]  # Inner did not move
