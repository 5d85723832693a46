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

from pathlib import Path

from ..config.samples import samples_dir
from ..phone.action_match import BOX_SCALE, CLASSES, TAP_DISTANCE, direction, enlarged, match_action, text_similarity
from ..phone.actions import parse_action, split_answer
from ..phone.openautoglm import reply_action
from ..serve.remote import ModelReply
from ..stats import mean, rate
from .task_protocol import Example

EVALUATOR = "AgentCPM-GUI (OpenBMB/AgentCPM-GUI eval/utils/evaluator.py, after AITW's action matching)"


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
        match = match_action(expected, got, meta.get("target_box"), self.box_scale, self.tap_distance)
        return {
            "expected_type": expected.type,
            "predicted_type": got.type if got else None,
            "parsed": got is not None,
            "type_match": match.type_match,
            "exact": match.exact,
            "tap_distance": match.tap_distance,
            "text_similarity": match.text_similarity,
            "episode": f"{meta.get('task', '')}#{meta.get('episode', example.index)}",
            "step": meta.get("step", example.index),
        }

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
