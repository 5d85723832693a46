"""Credit per step for phone episodes: GiGPO's anchor-state groups (arXiv 2505.10978, verl-agent).

**Anchor-state groups** (``rl.step_advantage_weight`` > 0). A window's completions each played an episode: the
prompt's earlier steps replayed, the sampled reply, the trained model's later steps. Every step of every one of those
episodes is a member of the anchor group of its state: the task and the screen it was taken on (the screen's tree
as text, else its screenshot's bytes: equal screens, one state, exactly). A member's return is the episode's success
(1 or 0) discounted to that step, ``rl.step_discount ** (steps after it)``. A trained step (the sampled reply) gets
the step advantage of its anchor group: its return minus the group's mean return (over the group's std too under
``rl.scale_rewards group``), added to its episode advantage with weight ``rl.step_advantage_weight``. The sampled
replies of one prompt share a screen, so they are always one anchor group; other steps that reach that screen (an
episode that went back to it, another prompt's episode of the same task passing through it) join it. Unlike the
episode reward, the discounted return tells apart two episodes that both succeed in a different number of steps:
a group whose episodes all succeed still has a spread.
"""

from __future__ import annotations

import hashlib

import torch


def screen_key(task: str, step) -> str:
    """One state of a task: the screen a step was taken on (its tree as text, else its screenshot's bytes)."""
    screen = step.ui_tree if step.ui_tree is not None else hashlib.sha1(step.png or b"").hexdigest()
    return f"{task}\n{screen}"


def anchor_step_advantages(
    episodes: list, trained_steps: list[int], discount: float, scale: bool, eps: float = 1e-4
) -> tuple[list[float], dict]:
    """The step advantage of each episode's trained step (``trained_steps[i]``: 0-based index of the sampled reply in
    ``episodes[i]``), from the anchor groups of all the episodes' steps; and what the grouping found (anchor groups of
    a trained step, their mean size, those with a spread) for the rollout event."""
    members: dict[str, list[float]] = {}
    for ep in episodes:
        won, n = 1.0 if ep.success else 0.0, len(ep.steps)
        for t, step in enumerate(ep.steps):
            members.setdefault(screen_key(ep.task, step), []).append(won * discount ** (n - 1 - t))
    out, anchors = [], {}
    for ep, k in zip(episodes, trained_steps):
        if k >= len(ep.steps):  # no trained step in the episode (it ended before): no step credit
            out.append(0.0)
            continue
        key = screen_key(ep.task, ep.steps[k])
        returns = torch.tensor(members[key], dtype=torch.float64)
        mine = (1.0 if ep.success else 0.0) * discount ** (len(ep.steps) - 1 - k)
        centred = mine - float(returns.mean())
        out.append(centred / (float(returns.std(unbiased=False)) + eps) if scale else centred)
        anchors[key] = returns
    stats = {
        "anchor_groups": len(anchors),
        "mean_size": sum(len(r) for r in anchors.values()) / len(anchors) if anchors else 0.0,
        "with_spread": sum(bool(r.max() > r.min()) for r in anchors.values()),
    }
    return out, stats
