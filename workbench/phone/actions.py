"""The phone agent's language: AutoGLM-Phone actions. Parse one ``do(...)`` / ``finish(...)`` call, write one
(``format_action``), split ``<think>``/``<answer>`` wrapping, convert grid points to pixels, and read the element
boxes of a screen description. Used by the simulated phone, the ADB bridge, the episode runner, the scorers and
the data linter.

The syntax is AutoGLM-Phone's (``do(action="Tap", element=[x,y])``, coordinates on a 0-999 grid), read as
Open-AutoGLM's runtime reads it (``phone_agent/actions/handler.py``, ``parse_action``): the text of a ``Type`` and the
message of a ``finish`` are everything between ``text="`` (``message="``) and the closing ``")``, taken as written
(quotes, backslashes and newlines included: the runtime types them as they stand, so they are written unescaped);
any other call is parsed with Python's ``ast`` (never evaluated): keyword arguments of literal values only, the
arguments each action needs and nothing else, points inside the grid.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

GRID = 999  # AutoGLM-Phone's coordinate grid is 0..999 on both axes

# action type -> (required argument: expected kind); "point" is [x, y] on the grid
ACTION_ARGS: dict[str, dict[str, str]] = {
    "Launch": {"app": "text"},
    "Tap": {"element": "point"},
    "Double Tap": {"element": "point"},
    "Long Press": {"element": "point"},
    "Type": {"text": "text"},
    "Swipe": {"start": "point", "end": "point"},
    "Back": {},
    "Home": {},
    "Wait": {"duration": "text"},
    "finish": {"message": "text"},
}
POINT_ACTIONS = ("Tap", "Double Tap", "Long Press")

# An element in a screen description: "Label [x,y]" (a point) or "Label [x1,y1,x2,y2]" (a box)
_ELEMENT = re.compile(r"\[\s*(\d+)\s*,\s*(\d+)\s*(?:,\s*(\d+)\s*,\s*(\d+)\s*)?\]")
# Without boxes in the data, a point element stands for a square of this half-width around it: 4% of the
# grid, well under half the spacing of the sample screens' elements (>= 110), so no two targets overlap.
POINT_HALF_WIDTH = 40


@dataclass(frozen=True)
class Action:
    type: str  # a key of ACTION_ARGS
    args: dict = field(default_factory=dict, compare=True, hash=False)

    def point(self, name: str = "element") -> tuple[int, int] | None:
        value = self.args.get(name)
        return tuple(value) if value is not None else None


# The actions whose text the runtime slices out as written: (the call up to the text, what closes it)
RAW_TEXT_CALLS = {"Type": ('do(action="Type", text="', '")'), "finish": ('finish(message="', '")')}


def format_action(action: Action) -> str:
    """The text of ``action`` that ``parse_action`` (and the runtime) reads back: ``do(action="Tap",
    element=[500,120])``; a Type's text and a finish's message as they are (a newline in them stays one)."""
    if action.type in RAW_TEXT_CALLS:
        opening, closing = RAW_TEXT_CALLS[action.type]
        return opening + action.args["text" if action.type == "Type" else "message"] + closing

    def literal(value) -> str:
        if isinstance(value, (list, tuple)):
            return "[" + ",".join(str(int(v)) for v in value) + "]"
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a Python string literal too

    args = ", ".join(f"{name}={literal(action.args[name])}" for name in ACTION_ARGS[action.type])
    if action.type == "finish":
        return f"finish({args})"
    return f"do(action={literal(action.type)}{', ' + args if args else ''})"


def to_pixels(point, width: int, height: int) -> tuple[int, int]:
    """A 0-999 grid point in pixels of a ``width`` x ``height`` screen, as AutoGLM's runtime converts it
    (``int(v / 1000 * size)``, so 999 stays inside the screen)."""
    return int(point[0] / 1000 * width), int(point[1] / 1000 * height)


class ActionSyntaxError(ValueError):
    """Why a text is not one valid action."""


def parse_action(text: str) -> Action:
    """The one action ``text`` holds (surrounding whitespace allowed); ActionSyntaxError saying why otherwise."""
    source = text.strip()
    if not source:
        raise ActionSyntaxError("empty answer")
    for kind, (opening, closing) in RAW_TEXT_CALLS.items():
        if source.startswith(opening.split(",")[0] if kind == "Type" else "finish"):
            if not (source.startswith(opening) and source.endswith(closing) and len(source) >= len(opening) + 2):
                raise ActionSyntaxError(
                    f"write {kind} as {opening}...{closing}: its text is everything between the quotes, as written"
                )
            return Action(kind, {"text" if kind == "Type" else "message": source[len(opening) : -len(closing)]})
    return _parse_call(source)


def parse_legacy_action(text: str) -> Action:
    """An action as the workbench wrote it before it followed the runtime: every call, a Type's text and a
    finish's message included, a Python call of literals (their quotes, backslashes and newlines escaped)."""
    source = text.strip()
    if not source:
        raise ActionSyntaxError("empty answer")
    return _parse_call(source)


def _parse_call(source: str) -> Action:
    """A ``do(...)`` / ``finish(...)`` call of literal keyword arguments, checked against ACTION_ARGS."""
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as err:
        raise ActionSyntaxError(f"not one call: {err.msg}") from None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.func.id not in ("do", "finish"):
        raise ActionSyntaxError("not a do(...) or finish(...) call")
    if call.args:
        raise ActionSyntaxError("arguments must be keywords")
    try:
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    except (ValueError, TypeError, SyntaxError):
        raise ActionSyntaxError("argument values must be literals") from None
    if None in kwargs:
        raise ActionSyntaxError("**arguments are not allowed")
    if call.func.id == "finish":
        kind = "finish"
    else:
        kind = kwargs.pop("action", None)
        if kind not in ACTION_ARGS or kind == "finish":
            raise ActionSyntaxError(f"unknown action {kind!r}")
    wanted = ACTION_ARGS[kind]
    if set(kwargs) != set(wanted):
        raise ActionSyntaxError(f"{kind} takes {sorted(wanted) or 'no arguments'}, got {sorted(kwargs)}")
    for name, expected in wanted.items():
        value = kwargs[name]
        if expected == "text" and not isinstance(value, str):
            raise ActionSyntaxError(f"{kind}: {name} must be a string")
        if expected == "point":
            if not (
                isinstance(value, (list, tuple))
                and len(value) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= GRID for v in value)
            ):
                raise ActionSyntaxError(f"{kind}: {name} must be [x, y] with integers in 0..{GRID}")
            kwargs[name] = [int(v) for v in value]
    return Action(kind, kwargs)


@dataclass(frozen=True)
class SplitAnswer:
    reasoning: str  # the <think> text; "" when there was none
    answer: str  # the text to parse as the action
    has_reasoning: bool
    has_answer_tag: bool


_THINK = re.compile(r"<think>(.*?)(?:</think>|$)", re.S)
_ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.S)


def split_answer(content: str, reasoning: str = "") -> SplitAnswer:
    """Separate reasoning from the answer. ``reasoning`` is what the server already split off
    (message.reasoning_content); ``content`` may still carry inline ``<think>`` and ``<answer>`` tags."""
    text = content or ""
    inline = _THINK.search(text)
    if inline:
        reasoning = (reasoning + inline.group(1)) if reasoning else inline.group(1)
        text = text[: inline.start()] + text[inline.end() :]
    tagged = _ANSWER.search(text)
    answer = tagged.group(1) if tagged else text
    reasoning = reasoning.strip()
    return SplitAnswer(reasoning, answer.strip(), bool(reasoning), tagged is not None)


Box = tuple[int, int, int, int]


def element_boxes(screen: str) -> list[Box]:
    """The boxes of the elements a screen description lists; a point element becomes a square of
    POINT_HALF_WIDTH around it."""
    boxes = []
    for m in _ELEMENT.finditer(screen or ""):
        x1, y1, x2, y2 = m.groups()
        if x2 is not None:
            boxes.append((int(x1), int(y1), int(x2), int(y2)))
        else:
            x, y, h = int(x1), int(y1), POINT_HALF_WIDTH
            boxes.append((x - h, y - h, x + h, y + h))
    return boxes


def hit_box(boxes: Iterable[Box | None], point: tuple[int, int] | None) -> Box | None:
    """The box a tap at ``point`` hits: the smallest holding it (an inner element before its container); None when
    none does (or there is no point). None entries of ``boxes`` are skipped."""
    return min(
        (b for b in boxes if b and point and in_box(point, b)),
        key=lambda b: (b[2] - b[0]) * (b[3] - b[1]),
        default=None,
    )


def target_box(screen: str, point: tuple[int, int]) -> Box | None:
    """The smallest listed element box containing the expected tap point; None when none does."""
    return hit_box(element_boxes(screen), point)


def in_box(point: tuple[int, int], box: Box) -> bool:
    return box[0] <= point[0] <= box[2] and box[1] <= point[1] <= box[3]
