"""Reward functions by name. Each takes the prompt (an ``eval.task_protocol.Example``: the row, its reference answer) and
the phone-action verdict of one completion (``PhoneActionsTask.score``: computed once per completion and shared)
and returns a float, 0 where it does not apply (constant within a group: no advantage either way).

- ``format``: reasoning in ``<think>`` and exactly one ``<answer>`` that parses as an action;
- ``action_type``: the action type is the reference's;
- ``tap_in_box``: a tap (double tap, long press) lands inside the target element's box;
- ``tap_distance``: the same, shaped: 1 inside the box, falling linearly to 0 at ``SHAPING_RADIUS`` grid units away;
- ``text_match``: a Type action's text matches (case and surrounding space ignored);
- ``swipe_direction``: a swipe goes the reference's way (the dominant axis and its sign);
- ``episode_success``: the episode played on from this completion as the first action ends on a parsed finish
  with the task's final-state checks holding (``rl.prompts: phone_tasks``; ``rewards.phone_tasks`` plays it);
- ``episode_efficiency``: that success priced by its length, the oracle's steps over the episode's (at most 1): a
  detour the rest of the episode repairs (a needless swipe) scores below the direct action, where success scores
  both 1.
- ``episode_shortest``: that success priced by the shortest episode its prompt allows over its own length (MobileRL's
  shortest-path adjustment): the prompt's replayed steps plus the expert's shortest path from where they leave the
  phone (``phone.expert``; ``verdict["shortest"]``), at most 1; 0 for a failed episode.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..config.names import REWARDS
from ..phone.actions import POINT_ACTIONS, Action, parse_action, split_answer, target_box
from ..phone.openautoglm import reply_action

SHAPING_RADIUS = 250  # grid units (a quarter of the screen) at which tap_distance reaches 0

RewardFn = Callable[[object, str, dict], float]  # (example, completion, verdict) -> reward


class RewardError(RuntimeError):
    """A reward function raised: names the reward and the row, so the run stops saying which."""


def _expected(example) -> Action:
    return parse_action(split_answer(example.reference).answer)


def format_reward(example, completion: str, verdict: dict) -> float:
    one_answer = completion.count("<answer>") == 1
    return float(verdict["has_reasoning"] and verdict["has_answer_tag"] and one_answer and verdict["parsed"])


def action_type(example, completion: str, verdict: dict) -> float:
    return float(bool(verdict["type_match"]))


def tap_in_box(example, completion: str, verdict: dict) -> float:
    return float(bool(verdict["tap_in_box"]))


def tap_distance(example, completion: str, verdict: dict) -> float:
    expected = _expected(example)
    if expected.type not in POINT_ACTIONS or not verdict["type_match"]:
        return 0.0
    box = target_box(str(example.row.get("input") or ""), expected.point())
    if box is None:
        return 0.0
    x, y = reply_action(completion).point()
    dx = max(box[0] - x, 0, x - box[2])
    dy = max(box[1] - y, 0, y - box[3])
    return max(0.0, 1.0 - math.hypot(dx, dy) / SHAPING_RADIUS)


def text_match(example, completion: str, verdict: dict) -> float:
    return float(bool(verdict["text_match"]))


def _direction(action: Action) -> tuple[int, int]:
    (x1, y1), (x2, y2) = action.point("start"), action.point("end")
    dx, dy = x2 - x1, y2 - y1
    return (0, (dy > 0) - (dy < 0)) if abs(dy) >= abs(dx) else ((dx > 0) - (dx < 0), 0)


def swipe_direction(example, completion: str, verdict: dict) -> float:
    expected = _expected(example)
    if expected.type != "Swipe" or not verdict["type_match"]:
        return 0.0
    return float(_direction(reply_action(completion)) == _direction(expected))


def _played(verdict: dict, reward: str):
    episode = verdict.get("episode")
    if episode is None:
        raise ValueError(f"{reward} scores a played episode, and this prompt has none: it needs rl.prompts phone_tasks")
    return episode


def episode_success(example, completion: str, verdict: dict) -> float:
    return float(bool(_played(verdict, "episode_success").success))


def episode_efficiency(example, completion: str, verdict: dict) -> float:
    episode = _played(verdict, "episode_efficiency")
    if not episode.success:
        return 0.0
    # whole episodes, the prompt's replayed steps included: the oracle's count is the shortest the task allows
    return min(1.0, len(example.task.oracle()) / max(1, len(episode.steps)))


def episode_shortest(example, completion: str, verdict: dict) -> float:
    episode = _played(verdict, "episode_shortest")
    if not episode.success:
        return 0.0
    return min(1.0, verdict["shortest"] / max(1, len(episode.steps)))


REWARD_FUNCTIONS: dict[str, RewardFn] = {
    "format": format_reward,
    "action_type": action_type,
    "tap_in_box": tap_in_box,
    "tap_distance": tap_distance,
    "text_match": text_match,
    "swipe_direction": swipe_direction,
    "episode_success": episode_success,
    "episode_efficiency": episode_efficiency,
    "episode_shortest": episode_shortest,
}


def register_reward(name: str, fn: RewardFn) -> RewardFn:
    """A plug-in reward: usable in ``rl.rewards`` from now on."""
    REWARD_FUNCTIONS[name] = fn
    REWARDS.add(name)
    return fn


def unregister_reward(name: str) -> None:
    """Forget a plug-in reward (tests, notebooks that try one out)."""
    REWARD_FUNCTIONS.pop(name, None)
    REWARDS.remove(name)
