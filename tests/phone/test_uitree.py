"""The screen as text: the compact tree of the simulated screens (exact: drawn from the same elements) and of a real
phone's ``uiautomator dump``, in one format; the ADB bridge reads it from the phone."""
from __future__ import annotations

import re
from pathlib import Path

from workbench.phone.actions import Action
from workbench.phone.sim import SimPhone
from workbench.phone.tasks import TASKS, select_tasks
from workbench.phone.uitree import KEYBOARD_LINE, compress_uiautomator

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
