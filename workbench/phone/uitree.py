"""The screen as text: a compact accessibility tree, the observation a text-only model reads (AndroidLab's "XML
mode", AndroidWorld's a11y tree, ``adb shell uiautomator dump`` on a real phone).

One line per element in reading order (top to bottom, then left to right), coordinates on the 0-999 grid of the
actions::

    Wi-Fi "On" [30,150][970,235] tap [500,192]
    Ben Carter [20,304][980,386] tap [500,345] long-press
    text "Contacts"

- an element (what a gesture can hit): its name, the texts drawn inside it that are not its name, its bounds, the
  point a tap uses (the centre: a small model copies it instead of computing a midpoint), and the gestures besides
  a tap that do something (``long-press``, ``double-tap``);
- a text outside every element: ``text "..."``; one-character glyphs (an icon's letter, ``<``, a keyboard key) are
  left out;
- ``keyboard open`` first when a text field has the keyboard up (the screenshot shows it; the tree says it).

``screen_tree(Screen)`` reads the simulated phone's screens (exact: they are drawn from these elements);
``compress_uiautomator(xml, width, height)`` reads a real phone's ``uiautomator dump`` into the same text.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable

from .actions import format_action, hit_box, in_box, split_answer
from .openautoglm import reply_action
from .screen import GRID, Box, Screen

KEYBOARD_LINE = "keyboard open"


def _centre(box: Box) -> tuple[int, int]:
    return (box[0] + box[2]) // 2, (box[1] + box[3]) // 2


def _quote(text: str) -> str:
    return '"' + text.replace('"', "'") + '"'


def element_line(name: str, box: Box, texts: Iterable[str] = (), gestures: Iterable[str] = ()) -> str:
    """One element's line: name, its other texts, bounds, tap point, the other gestures."""
    x, y = _centre(box)
    parts = [name, *(_quote(t) for t in texts), f"[{box[0]},{box[1]}][{box[2]},{box[3]}]", f"tap [{x},{y}]", *gestures]
    return " ".join(parts)


def screen_tree(screen: Screen) -> str:
    """The compact tree of a simulated screen."""
    elements = list(screen.elements.items())
    texts: dict[str, list[str]] = {name: [] for name, _ in elements}
    free: list[tuple[tuple[int, int], str]] = []
    for op in screen.ops:
        if op[0] != "text" or len(op[2].strip()) < 2:
            continue
        point, text = op[1], op[2].strip()
        owner = next((name for name, box in reversed(elements) if in_box(point, box)), None)
        if owner is None:
            if text not in screen.elements:  # an icon's caption under its box names the element already
                free.append((point, text))
        elif text != owner and text not in texts[owner]:
            texts[owner].append(text)
    items = []
    for name, box in elements:
        handlers = screen.handlers.get(name)
        gestures = [
            g
            for g, on in (
                ("long-press", handlers and handlers.long_press),
                ("double-tap", handlers and handlers.double_tap),
            )
            if on
        ]
        items.append(((box[1], box[0]), element_line(name, box, texts[name], gestures)))
    items += [((y, x), f"text {_quote(text)}") for (x, y), text in free]
    lines = [line for _, line in sorted(items, key=lambda item: item[0])]
    return "\n".join(([KEYBOARD_LINE] if screen.keyboard else []) + lines)


_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")


def compress_uiautomator(xml: str, width: int, height: int) -> str:
    """A real phone's ``uiautomator dump`` (the XML of ``adb shell uiautomator dump /sdcard/x.xml``) as the compact
    tree: every node that is clickable or long-clickable (an element) or shows a text or description, named by its
    text, else its content description, else its resource id's last part; bounds in pixels mapped onto the 0-999
    grid (``width`` x ``height``: the screen's pixels). A clickable node takes the texts of the plain nodes inside
    it, as AndroidLab's compression merges a button with its label; a focused text field reads as the keyboard
    being open."""
    root = ET.fromstring(xml)
    nodes = []
    for node in root.iter("node"):
        match = _BOUNDS.fullmatch(node.get("bounds", ""))
        if not match:
            continue
        px = [int(v) for v in match.groups()]
        box = (_grid(px[0], width), _grid(px[1], height), _grid(px[2], width), _grid(px[3], height))
        label = (node.get("text") or "").strip() or (node.get("content-desc") or "").strip()
        clickable = node.get("clickable") == "true" or node.get("long-clickable") == "true"
        if not clickable and not label:
            continue
        nodes.append(
            {
                "box": box,
                "label": label,
                "clickable": clickable,
                "long": node.get("long-clickable") == "true",
                "focused": node.get("focused") == "true" and "EditText" in (node.get("class") or ""),
                "id": (node.get("resource-id") or "").rpartition("/")[2],
                "texts": [],
            }
        )
    elements = [n for n in nodes if n["clickable"]]
    items, focused_field = [], False
    for n in nodes:
        if n["clickable"]:
            continue
        owner = next((e for e in reversed(elements) if in_box(_centre(n["box"]), e["box"])), None)
        if owner is None:
            items.append(((n["box"][1], n["box"][0]), f"text {_quote(n['label'])}"))
        elif n["label"] not in (owner["label"], *owner["texts"]):
            owner["texts"].append(n["label"])
    for e in elements:
        name = e["label"] or (e["texts"].pop(0) if e["texts"] else e["id"] or "element")
        focused_field |= e["focused"]
        items.append(
            ((e["box"][1], e["box"][0]), element_line(name, e["box"], e["texts"], ["long-press"] if e["long"] else []))
        )
    lines = [line for _, line in sorted(items, key=lambda item: item[0])]
    return "\n".join(([KEYBOARD_LINE] if focused_field else []) + lines)


def _grid(pixels: int, extent: int) -> int:
    """A pixel coordinate on the 0-999 grid (the inverse of ``actions.to_pixels``)."""
    return max(0, min(GRID - 1, int(pixels * GRID / max(extent, 1))))


def tree_of(device) -> str | None:
    """The tree of a device's screen: ``device.ui_tree()`` when it has one; None otherwise."""
    read = getattr(device, "ui_tree", None)
    return read() if read is not None else None


_ELEMENT_LINE = re.compile(r"^(?P<head>.*?) \[(\d+),(\d+)\]\[(\d+),(\d+)\] tap \[\d+,\d+\](?P<tail>.*)$")


def tree_boxes(tree: str) -> list[Box | None]:
    """The bounds of each line of ``tree`` (None for a line that is not an element)."""
    out: list[Box | None] = []
    for line in tree.split("\n"):
        m = _ELEMENT_LINE.match(line)
        out.append(tuple(int(v) for v in m.groups()[1:5]) if m else None)
    return out


def element_line_at(tree: str, point) -> str | None:
    """The line of the element a tap at ``point`` hits (``hit_box``); None when none does."""
    boxes = tree_boxes(tree)
    hit = hit_box(boxes, point)
    return tree.split("\n")[boxes.index(hit)] if hit else None


def quoted_target(thinking: str, tree: str, action) -> str:
    """The oracle's reasoning on a ui_tree screen: its words, then the line of the element its action taps, copied
    from the tree. Naming the element and then copying the line that follows the name is what a small pretrained
    model does most readily (the words it has just written find the same words in the tree); without the quote it has
    to fetch the point from the tree while writing the action, and taps a neighbour instead (2026-12-03's episodes:
    "The Clock icon is on this home page; I tap it." then a tap on Notes)."""
    point = action.point()
    line = element_line_at(tree, point) if point else None
    return f"{thinking}\n{line}" if line else thinking


def moved_elements(tree: str, moves: dict[Box, Box]) -> str:
    """``tree`` with each element whose bounds are a key of ``moves`` at the value's bounds instead (tap point its
    centre), as if the screen had drawn it there. ``moves`` is a permutation of some of the screen's boxes (each
    value a key): the moved lines take each other's places, so the tree stays in reading order. A probe of whether
    a model reads where a name is or remembers where it was in training (``bench.agent grounding``)."""
    if sorted(moves) != sorted(moves.values()):
        raise ValueError("moves must permute boxes among themselves (every new box is one of the moved boxes)")
    lines, boxes = tree.split("\n"), tree_boxes(tree)
    slots = [i for i, box in enumerate(boxes) if box in moves]
    if len(slots) != len(moves):
        raise ValueError(f"{len(moves)} boxes to move, {len(slots)} of them are element lines of the tree")
    moved = []
    for i in slots:
        m, box = _ELEMENT_LINE.match(lines[i]), moves[boxes[i]]
        x, y = _centre(box)
        moved.append(((box[1], box[0]), f"{m['head']} [{box[0]},{box[1]}][{box[2]},{box[3]}] tap [{x},{y}]{m['tail']}"))
    for i, (_, line) in zip(slots, sorted(moved)):
        lines[i] = line
    return "\n".join(lines)


def same_size_boxes(boxes: list[Box]) -> dict[tuple[int, int], list[Box]]:
    """A tree's element boxes by (width, height): the elements that can trade places. A box two elements share (a
    real phone's nesting) is left out: it moves neither of them."""
    groups: dict[tuple[int, int], list[Box]] = {}
    for box in boxes:
        if boxes.count(box) == 1:
            groups.setdefault((box[2] - box[0], box[3] - box[1]), []).append(box)
    return groups


def turn_tree(content: str) -> tuple[str, str]:
    """A ui_tree user turn's text split after its screen info's JSON line: (everything up to the tree, the tree);
    the tree is "" in a turn that shows none."""
    start = content.find('{"current_app"')
    end = content.find("\n", start) + 1 if start >= 0 else 0
    return (content[:end], content[end:]) if end > 0 else (content, "")


POSITION_TARGETS = ("open_result",)  # templates whose target is a position (the first result), not a name


def shuffled_layout(row: dict, rng) -> dict:
    """A training row (runtime format, ``meta.observation`` ui_tree) as if its latest screen had drawn its elements
    of the same size in another order: a random permutation among each group of same-size boxes
    (``moved_elements``), the reply's tap moved with the element it hits, ``meta.target_box`` and the reasoning's
    quote of its line (``quoted_target``) with it. On the simulated phone every name always sits at one point, so a
    model can learn positions instead of reading the tree; on shuffled layouts only reading finds the name. Rows
    that are not ui_tree, show no tree, or whose target is a position (``POSITION_TARGETS``) come back as they are."""
    meta, messages = row.get("meta") or {}, row.get("messages") or []
    if (
        meta.get("observation") != "ui_tree"
        or meta.get("template") in POSITION_TARGETS
        or len(messages) < 2
        or messages[-1].get("role") != "assistant"
        or not isinstance(messages[-2].get("content"), str)
    ):
        return row
    head, tree = turn_tree(messages[-2]["content"])
    if not tree:
        return row
    boxes = [b for b in tree_boxes(tree) if b is not None]
    moves: dict[Box, Box] = {}
    for group in same_size_boxes(boxes).values():
        if len(group) > 1:
            order = list(group)
            rng.shuffle(order)
            moves.update(zip(group, order))
    if not moves:
        return row
    reply = messages[-1]["content"]
    split, action = split_answer(reply), reply_action(reply)
    if action is None:
        return row
    new_tree = moved_elements(tree, moves)
    point = action.point()  # a Tap's, Long Press's or Double Tap's element; None for a Swipe and the rest
    hit = hit_box(boxes, point)
    hit = hit if hit in moves else None  # the element a tap hits moves only if its box moved
    out = {
        **row,
        "meta": dict(meta),
        "messages": [*messages[:-2], {**messages[-2], "content": head + new_tree}, dict(messages[-1])],
    }
    if hit is not None:
        new = moves[hit]
        moved = type(action)(
            action.type, {**action.args, "element": [point[0] - hit[0] + new[0], point[1] - hit[1] + new[1]]}
        )
        # the reasoning's quote of the target's line (``quoted_target``) is the moved line now
        old_line, new_line = element_line_at(tree, point), element_line_at(new_tree, moved.point())
        reply = reply.replace(split.answer, format_action(moved))
        if old_line and new_line and old_line in split.reasoning:
            reply = reply.replace(old_line, new_line, 1)
        out["messages"][-1]["content"] = reply
        if meta.get("target_box") and tuple(meta["target_box"]) == hit:
            out["meta"]["target_box"] = list(new)
    return out
