"""Whether a phone action matches another, by the rules of AgentCPM-GUI's evaluator (OpenBMB/AgentCPM-GUI,
``eval/utils/evaluator.py``, after Qwen2.5-VL's and AITW's action matching) with its AndroidControl tap threshold: the
one matching rule of the workbench. ``eval.steps`` scores a model's step against a recorded one with it, and an export's
action parity (``export.parity``) the export's action against the unexported model's.

*Type match*: the two actions are of one class (``CLASSES``). *Exact match*: a point action inside the expected
target's box enlarged ``BOX_SCALE`` times about its centre, or within ``TAP_DISTANCE`` of the screen (on each axis a
fraction of it) of the expected point; a scroll by its direction; a Type when one text contains the other (case and
surrounding space ignored); a press by its button; a Launch by its app (two names of one package in the runtime's table
match); a wait and a stop by their class alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .actions import GRID, Action
from .openautoglm import launch_package

# An action's class in AgentCPM-GUI's evaluator (our grammar's type -> its class name)
CLASSES = {
    "Tap": "click",
    "Double Tap": "double_click",
    "Long Press": "long_point",
    "Swipe": "scroll",
    "Type": "type",
    "Back": "press",
    "Home": "press",
    "Launch": "open",
    "Wait": "wait",
    "finish": "stop",
}
BOX_SCALE = 1.2  # AgentCPM-GUI's (and Qwen2.5-VL's, AITZ's) box enlargement; AITW's is 2.4 (1.4 added)
TAP_DISTANCE = 0.04  # AgentCPM-GUI's AndroidControl threshold (aligned with Qwen2.5-VL's); its AITW/AITZ one is 0.14


def enlarged(box, scale: float = BOX_SCALE) -> tuple[float, float, float, float]:
    """``box`` (x1, y1, x2, y2 on the grid) grown ``scale`` times about its centre, clipped to the screen."""
    x1, y1, x2, y2 = box
    dw, dh = (scale - 1) * (x2 - x1) / 2, (scale - 1) * (y2 - y1) / 2
    return max(0, x1 - dw), max(0, y1 - dh), min(GRID, x2 + dw), min(GRID, y2 + dh)


def direction(start, end) -> str:
    """The way a swipe's finger moves: up, down, left or right (the closest by angle, as AgentCPM-GUI reads it; none
    for a swipe that does not move)."""
    dx, dy = end[0] - start[0], end[1] - start[1]
    if dx == dy == 0:
        return "none"
    if abs(dx) > abs(dy):
        return "right" if dx > 0 else "left"
    return "down" if dy > 0 else "up"


def text_similarity(a: str, b: str) -> float:
    """Levenshtein's ratio (python-Levenshtein's ``ratio``: 1 - indel distance / total length, i.e. twice the longest
    common subsequence over the total length); 1.0 for two empty texts."""
    if not a and not b:
        return 1.0
    previous = [0] * (len(b) + 1)
    for ch in a:
        current = [0]
        for j, other in enumerate(b):
            current.append(previous[j] + 1 if ch == other else max(previous[j + 1], current[j]))
        previous = current
    return 2 * previous[-1] / (len(a) + len(b))


@dataclass(frozen=True)
class ActionMatch:
    type_match: bool  # of one class
    exact: bool  # the same action by the rules above
    tap_distance: float | None  # a point action's distance from the expected point, in screen fractions
    text_similarity: float | None  # two Types' texts' Levenshtein ratio


NO_MATCH = ActionMatch(False, False, None, None)


def match_action(
    expected: Action,
    got: Action | None,
    box=None,
    box_scale: float = BOX_SCALE,
    tap_distance: float = TAP_DISTANCE,
) -> ActionMatch:
    """``got`` (None: no action could be read) against ``expected``; ``box`` (x1, y1, x2, y2 on the grid): the
    element the expected point hit, when known."""
    if got is None or CLASSES[got.type] != CLASSES[expected.type]:
        return NO_MATCH
    kind = CLASSES[expected.type]
    if kind in ("click", "double_click", "long_point"):
        (ex, ey), (gx, gy) = expected.point(), got.point()
        distance = math.hypot((gx - ex) / (GRID + 1), (gy - ey) / (GRID + 1))
        inside = False
        if box:
            x1, y1, x2, y2 = enlarged(box, box_scale)
            inside = x1 <= gx <= x2 and y1 <= gy <= y2
        return ActionMatch(True, inside or distance <= tap_distance, distance, None)
    if kind == "scroll":
        same = direction(expected.args["start"], expected.args["end"]) == direction(got.args["start"], got.args["end"])
        return ActionMatch(True, same, None, None)
    if kind == "type":
        a, b = got.args["text"].strip().casefold(), expected.args["text"].strip().casefold()
        return ActionMatch(True, a in b or b in a, None, text_similarity(a, b))
    if kind == "press":
        return ActionMatch(True, got.type == expected.type, None, None)
    if kind == "open":
        return ActionMatch(True, _app(got.args["app"]) == _app(expected.args["app"]), None, None)
    return ActionMatch(True, True, None, None)  # wait, stop: the class is the match


def _app(name: str) -> str:
    """The package the runtime's table launches for an app name; else the name itself, case folded."""
    return launch_package(name.strip()) or name.strip().casefold()
