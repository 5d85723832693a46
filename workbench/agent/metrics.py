"""Episode metrics: does the agent finish its tasks, and how it fails when it does not.

- ``success_rate``: episodes whose final state passed every check after a parsed finish (of the judged ones: a
  real phone's episodes are not judged);
- ``reached_apps_rate``: episodes whose screens showed every app the task needs at some step (or at the end): how
  far an agent that finishes nothing gets; doing nothing stays on the home screen and scores 0;
- ``quoted_line_rate``: of the taps (long presses, double taps) on screens shown as text, the share whose reasoning
  ends with a line of that screen's tree, copied exactly, as the oracle's rows do (``phone.uitree.quoted_target``):
  whether the agent reads the tree or makes a line up; None when no such tap was made;
- ``parse_failure_rate``: episodes ended by a reply that did not parse;
- ``loop_rate``: episodes ended by the repeat rule (``repeated``: the same action on the same screen
  ``phone.conversation.REPEAT_LIMIT`` times in a row): the agent stuck repeating itself;
- ``false_finish_rate``: of the judged episodes, those that ended on a parsed finish while a check of the task
  failed: the agent said it was done when it was not;
- ``invalid_action_rate``: executed actions (finish excluded) that did nothing: a tap on no element, Type with no
  focused field, a scroll at a list's end, an unknown app...;
- ``mean_steps_success``: the steps to success (the length of the successful episodes); ``mean_steps``: of all;
- ``prompt_tokens_last``: the prompt's token count at each episode's last step (the server's usage), mean and
  max: how close the runtime's growing history comes to the context;
- ``action_types``: the executed actions (finish excluded) by type: what a model does more or less of (a GRPO
  that swipes where its start tapped);
- ``end_reasons``, and ``by_split`` / ``by_template`` / ``by_app``: success rate and count per task split (train,
  heldout: values never trained, combos: trained values newly paired), per template and per app.

``paired`` compares two models task by task on the same tasks (which finished where the other did not), with the
sign test's p-value: whether a difference in success is more than the tasks' own noise.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable

from ..phone.actions import POINT_ACTIONS
from ..phone.openautoglm import runtime_action
from ..stats import mean, rate
from .episode import END_REASONS, Episode, Turn


def _groups(episodes: list[Episode], key) -> dict[str, dict]:
    groups: dict[str, list[Episode]] = {}
    for ep in episodes:
        for name in key(ep):
            groups.setdefault(name, []).append(ep)
    return {
        name: {"n": len(eps), "success_rate": rate([e.success for e in eps])} for name, eps in sorted(groups.items())
    }


def reached_apps(ep: Episode) -> bool | None:
    """Every app of the task was on screen at some step of ``ep`` or at its end; None for a task that names no app
    (a free-form instruction: not judged)."""
    if not ep.apps:
        return None
    shown = {s.current_app for s in ep.steps} | {ep.final_app}
    return set(ep.apps) <= shown


def quoted_line(step: Turn) -> bool | None:
    """For a point action on a screen shown as text: whether the reasoning's last line is a line of that screen's
    tree. None for any other step."""
    if step.ui_tree is None or not step.action or runtime_action(step.action).type not in POINT_ACTIONS:
        return None
    lines = step.reasoning.strip().split("\n")
    return len(lines) > 1 and lines[-1] in step.ui_tree.split("\n")


def false_finish(ep: Episode) -> bool | None:
    """Whether ``ep`` ended on a parsed finish while a check of its task failed; None for an episode not judged."""
    if ep.checks is None:
        return None
    return ep.end_reason == "finish" and not all(ep.checks.values())


def summarize_episodes(episodes: Iterable[Episode]) -> dict:
    episodes = list(episodes)
    actions = [s for ep in episodes for s in ep.steps if s.action and not s.action.startswith("finish(")]
    last_tokens = [ep.prompt_tokens_last for ep in episodes]
    reasons = {r: sum(ep.end_reason == r for ep in episodes) for r in END_REASONS}
    return {
        "n": len(episodes),
        "success_rate": rate([ep.success for ep in episodes]),
        "reached_apps_rate": rate([reached_apps(ep) for ep in episodes]),
        "quoted_line_rate": rate([quoted_line(s) for ep in episodes for s in ep.steps]),
        "parse_failure_rate": rate([ep.end_reason == "parse_failure" for ep in episodes]),
        "loop_rate": rate([ep.end_reason == "repeated" for ep in episodes]),
        "false_finish_rate": rate([false_finish(ep) for ep in episodes]),
        "invalid_action_rate": rate([not s.valid for s in actions]),
        "mean_steps_success": mean([len(ep.steps) for ep in episodes if ep.success]),
        "mean_steps": mean([len(ep.steps) for ep in episodes]),
        "prompt_tokens_last": mean(last_tokens),
        "prompt_tokens_last_max": max((t for t in last_tokens if t is not None), default=None),
        # an executed action read as the runtime read it (a point off the screen included: it was executed, to no effect)
        "action_types": dict(sorted(collections.Counter(runtime_action(s.action).type for s in actions).items())),
        "end_reasons": {r: n for r, n in reasons.items() if n},
        "by_split": _groups(episodes, lambda ep: [ep.split]),
        "by_template": _groups(episodes, lambda ep: [ep.template]),
        "by_app": _groups(episodes, lambda ep: ep.apps),
    }


def paired(a: Iterable[Episode], b: Iterable[Episode]) -> dict:
    """Two models' episodes of the same tasks, task by task: how many tasks both finished, only ``a``, only ``b``,
    neither, and the exact two-sided sign test's p-value on the tasks only one finished (the chance of a split at
    least this uneven if each such task were a fair coin): the evaluation's own spread, since greedy episodes
    repeat exactly. ValueError when the two did not play the same tasks."""
    won_a = {ep.task: bool(ep.success) for ep in a}
    won_b = {ep.task: bool(ep.success) for ep in b}
    if won_a.keys() != won_b.keys():
        raise ValueError(f"the two sets of episodes are of different tasks: {sorted(won_a.keys() ^ won_b.keys())[:5]}")
    only_a = sum(won_a[t] and not won_b[t] for t in won_a)
    only_b = sum(won_b[t] and not won_a[t] for t in won_a)
    both = sum(won_a[t] and won_b[t] for t in won_a)
    n = only_a + only_b
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2**n if n else 1.0
    return {
        "tasks": len(won_a),
        "both": both,
        "only_a": only_a,
        "only_b": only_b,
        "neither": len(won_a) - both - only_a - only_b,
        "sign_test_p": min(1.0, 2 * tail),
    }
