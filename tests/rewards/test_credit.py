"""Credit per step: GiGPO's anchor-state groups form from equal screens of one task, across episodes and steps, and
give a spread where every episode succeeds."""

import pytest

from workbench.agent.episode import Episode, Turn
from workbench.rewards.credit import anchor_step_advantages, screen_key


def _episode(screens: list[str], success: bool, task: str = "t/1") -> Episode:
    return Episode(
        task,
        "open_app",
        "train",
        ["Settings"],
        "Open Settings",
        "m",
        "2026-12-01",
        observation="ui_tree",
        steps=[Turn(i + 1, "Launcher", ui_tree=s) for i, s in enumerate(screens)],
        success=success,
    )


def test_an_anchor_group_forms_from_equal_screens_across_episodes_and_steps():
    """Three episodes of one task, each trained at step 0 on the home screen. The third went home again at its step
    2 (a detour): that step joins the home screen's anchor group, with its own return. The two that succeeded in 2
    and 4 steps differ in their discounted returns, so the group has a spread although the episode rewards of the
    successes are equal."""
    a = _episode(["home", "settings"], True)  # return at step 0: 0.9
    b = _episode(["home", "apps", "home", "settings"], True)  # at step 0: 0.9^3, at step 2: 0.9
    c = _episode(["home", "apps"], False)  # 0
    advantages, stats = anchor_step_advantages([a, b, c], [0, 0, 0], discount=0.9, scale=False)
    returns = [0.9, 0.9**3, 0.9, 0.0]  # the home screen's members: a@0, b@0, b@2, c@0
    mean = sum(returns) / 4
    assert advantages == pytest.approx([0.9 - mean, 0.9**3 - mean, 0.0 - mean])
    assert stats == {"anchor_groups": 1, "mean_size": 4.0, "with_spread": 1}
    # another task's home screen is another state; a step past an episode's end gets no step credit
    other, short = _episode(["home", "settings"], False, task="t/2"), _episode(["home"], False, task="t/3")
    advantages, stats = anchor_step_advantages([a, other, short], [0, 0, 5], discount=0.9, scale=False)
    assert advantages == [0.0, 0.0, 0.0] and stats == {"anchor_groups": 2, "mean_size": 1.0, "with_spread": 0}
    assert screen_key("t/1", a.steps[0]) != screen_key("t/2", other.steps[0])


def test_step_advantages_scaled_by_the_anchor_groups_std():
    won_short, won_long = _episode(["s0", "s1"], True), _episode(["s0", "x", "s1"], True)
    advantages, _ = anchor_step_advantages([won_short, won_long], [0, 0], discount=0.5, scale=True)
    assert advantages == pytest.approx([1.0, -1.0], abs=1e-3)  # two members: +-1 after the std, whatever the gap
