"""The step task: a model scored on recorded demonstrations step by step, with no phone and no emulator.

Each row of a recorded episode (``workbench agent record``, a ``Demonstrator``'s ``write_rows``) is one step: the
conversation up to it, and the action the demonstrator took. The model answers each step given the recorded
history (teacher forcing, as AndroidControl and AITW are judged offline); its action is matched to the recorded one
by the rules of **AgentCPM-GUI's evaluator** (OpenBMB/AgentCPM-GUI, ``eval/utils/evaluator.py``, itself after
Qwen2.5-VL's and AITW's action matching), with its **AndroidControl** tap threshold:

- *type match*: the predicted action is of the recorded one's class: click (Tap), double click (Double Tap; not in
  AgentCPM-GUI's set, matched as a click), long point (Long Press), scroll (Swipe), type (Type), press (Back, Home),
  open (Launch; AndroidControl's open_app), wait (Wait; AgentCPM-GUI counts a wait as a stop, here it is its own
  class: a finish is no wait), stop (finish);
- *exact match*: a point action inside the recorded target's box enlarged 1.2 times about its centre (the box of
  the element the demonstration hit, ``meta.target_box``), or within 0.04 of the screen (on each axis a fraction of
  it, as AITW normalises) of the recorded point; a row without a box (a real phone without its tree) is judged by the
  distance alone; a scroll by its direction (up, down, left, right: the axis the finger moves most along, and which
  way); a Type when one text contains the other, case and surrounding space ignored (Qwen2.5-VL's rule; their
  Levenshtein similarity is reported beside it); a press by its button, a Launch by its app (two names of one package in the
  runtime's table match); a wait and a stop by their class alone.

Per episode (AgentCPM-GUI's ``compute_episode_metrics``): an episode succeeds when every one of its steps is an
exact match, and its goal progress is the share of its steps matched before the first miss. Nothing here reads a
phone's state: rows recorded from a real phone, which no final-state check can judge, are scored the same way.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..config.samples import samples_dir
from ..phone.actions import GRID, parse_action, split_answer
from ..phone.openautoglm import launch_package, reply_action
from ..serve.remote import ModelReply
from .task_protocol import Example, mean, rate

EVALUATOR = "AgentCPM-GUI (OpenBMB/AgentCPM-GUI eval/utils/evaluator.py, after AITW's action matching)"
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


class StepMatchTask:
    description = (
        "recorded demonstrations step by step (AgentCPM-GUI's action matching): type match and exact match "
        "per action type, episode success and goal progress; no phone needed"
    )

    def __init__(
        self,
        name: str = "phone_steps",
        default_data: Path | None = None,
        box_scale: float = BOX_SCALE,
        tap_distance: float = TAP_DISTANCE,
    ):
        self.name = name
        self.default_data = default_data or samples_dir() / "own_app" / "heldout.jsonl"
        self.box_scale, self.tap_distance = box_scale, tap_distance

    @property
    def rules(self) -> str:
        """The evaluator and its thresholds, in one line (printed with every report of this task)."""
        return (
            f"{EVALUATOR}: type = action class; exact: a tap inside the target box x{self.box_scale:g} or within "
            f"{self.tap_distance:g} of the screen of the recorded point, a swipe by direction, Type by containment "
            "(case and space ignored), Back/Home by button, Launch by app; episode success = every step exact"
        )

    def score(self, example: Example, reply: ModelReply) -> dict:
        expected = parse_action(split_answer(example.reference).answer)  # a bad reference is a data error
        got = reply_action(reply.content)  # as Open-AutoGLM's runtime reads the reply (the runner and eval.phone too)
        meta = example.row.get("meta") if isinstance(example.row.get("meta"), dict) else {}
        type_match = got is not None and CLASSES[got.type] == CLASSES[expected.type]
        exact, distance, similarity = False, None, None
        if type_match:
            exact, distance, similarity = self._exact(expected, got, meta.get("target_box"))
        return {
            "expected_type": expected.type,
            "predicted_type": got.type if got else None,
            "parsed": got is not None,
            "type_match": type_match,
            "exact": exact,
            "tap_distance": distance,
            "text_similarity": similarity,
            "episode": f"{meta.get('task', '')}#{meta.get('episode', example.index)}",
            "step": meta.get("step", example.index),
        }

    def _exact(self, expected, got, box) -> tuple[bool, float | None, float | None]:
        """(exact match, the tap's distance in screen fractions, the texts' similarity) of two actions of one class."""
        kind = CLASSES[expected.type]
        if kind in ("click", "double_click", "long_point"):
            (ex, ey), (gx, gy) = expected.point(), got.point()
            distance = math.hypot((gx - ex) / (GRID + 1), (gy - ey) / (GRID + 1))
            if box:
                x1, y1, x2, y2 = enlarged(box, self.box_scale)
                if x1 <= gx <= x2 and y1 <= gy <= y2:
                    return True, distance, None
            return distance <= self.tap_distance, distance, None
        if kind == "scroll":
            return (
                (
                    direction(expected.args["start"], expected.args["end"])
                    == direction(got.args["start"], got.args["end"])
                ),
                None,
                None,
            )
        if kind == "type":
            a, b = got.args["text"].strip().casefold(), expected.args["text"].strip().casefold()
            return (a in b or b in a), None, text_similarity(a, b)
        if kind == "press":
            return got.type == expected.type, None, None
        if kind == "open":

            def app(name: str) -> str:  # the package the runtime's table launches for it; else the name itself
                return launch_package(name.strip()) or name.strip().casefold()

            return app(got.args["app"]) == app(expected.args["app"]), None, None
        return True, None, None  # wait, stop: the class is the match

    def summarize(self, verdicts: list[dict]) -> dict:
        by_type: dict[str, list[dict]] = {}
        episodes: dict[str, list[dict]] = {}
        for v in verdicts:
            by_type.setdefault(v["expected_type"], []).append(v)
            episodes.setdefault(v["episode"], []).append(v)
        success, progress = [], []
        for steps in episodes.values():
            steps = sorted(steps, key=lambda v: v["step"])
            matched = next((i for i, v in enumerate(steps) if not v["exact"]), len(steps))
            success.append(matched == len(steps))
            progress.append(matched / len(steps))
        return {
            "n": len(verdicts),
            "parse_rate": rate(v["parsed"] for v in verdicts),
            "type_match": rate(v["type_match"] for v in verdicts),
            "exact_match": rate(v["exact"] for v in verdicts),
            "episodes": len(episodes),
            "episode_success": rate(success),
            "goal_progress": mean(progress),
            "tap_distance": mean(v["tap_distance"] for v in verdicts),
            "text_similarity": mean(v["text_similarity"] for v in verdicts),
            "by_type": {
                t: {
                    "n": len(vs),
                    "type_match": rate(v["type_match"] for v in vs),
                    "exact_match": rate(v["exact"] for v in vs),
                }
                for t, vs in sorted(by_type.items())
            },
        }


__all__ = ["CLASSES", "EVALUATOR", "StepMatchTask", "direction", "enlarged", "text_similarity"]
