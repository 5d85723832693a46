"""The RL task pool (rl.pool): families drawn by their recent success with a floor, the same draw on every rank,
fresh instances on phones of new names, replies kept for replay, and its state through a checkpoint."""

import collections
import datetime

import pytest

from workbench.phone.state import DEFAULT_CONTENTS
from workbench.phone.tasks import select_tasks
from workbench.rewards.phone_tasks import step_prompts
from workbench.rewards.task_pool import TaskPool, family, fresh_instance, prompt_key

DATE = datetime.date(2026, 12, 1)
SIZE = (112, 252)


@pytest.fixture(scope="module")
def prompts():
    tasks = select_tasks("open_app")[:3] + select_tasks("toggle_setting")[:3]
    return step_prompts([t for t in tasks if t.split == "train"], SIZE, DATE, "ui_tree")


def _pool(prompts, **options):
    settings = dict(floor=0.1, window=8, fresh_share=0.0, replay=False)
    return TaskPool(prompts, lambda tasks: step_prompts(tasks, SIZE, DATE, "ui_tree"), **{**settings, **options})


def test_the_weights_follow_each_familys_recent_success_with_a_floor(prompts):
    """open_app solved in every recent episode, toggle_setting in none: toggle_setting is drawn at weight 1, open_app
    at the floor (0.1), so ~10 toggles per app opening; before any episode both count as failing (1 each)."""
    pool = _pool(prompts)
    assert pool.families == ["open_app", "toggle_setting"] and pool.probabilities() == {
        "open_app": 0.5,
        "toggle_setting": 0.5,
    }
    assert pool.weight("open_app") == pool.weight("toggle_setting") == 1.0  # never played: failing, not solved
    opens = [p for p in prompts if family(p.task) == "open_app"][:1] * 8
    toggles = [p for p in prompts if family(p.task) == "toggle_setting"][:1] * 8
    played = _pool(prompts)  # one family solved, the other not played yet: the unplayed one is drawn at weight 1
    played.update(played.tally(opens, [True] * 8))
    assert played.probabilities() == pytest.approx({"open_app": 0.1 / 1.1, "toggle_setting": 1 / 1.1})
    pool.update(pool.tally(opens + toggles, [True] * 8 + [False] * 8))
    assert pool.success("open_app") == 1.0 and pool.success("toggle_setting") == 0.0
    assert pool.weight("open_app") == pytest.approx(0.1) and pool.weight("toggle_setting") == 1.0
    drawn = collections.Counter(family(p.task) for seed in range(40) for p in pool.draw(8, (0, seed, 0), slice(0, 8)))
    assert drawn["open_app"] > 0 and 6 < drawn["toggle_setting"] / drawn["open_app"] < 16, drawn
    # the window keeps the latest outcomes: two draws of open_app failing bring its success down to 6 of 8
    pool.update(pool.tally(opens[:2], [False, False]))
    assert pool.success("open_app") == 0.75 and pool.weight("open_app") == pytest.approx(0.1 + 0.9 * 0.25)


def test_a_window_shorter_than_a_draw_keeps_the_draws_share_of_successes(prompts):
    """rl.pool_window 2 and a draw of 8 open_app episodes of which 4 succeeded: the family's recent success is 0.5 (the
    draw's share), not 0 or 1 by which of its outcomes entered the window last."""
    opens = [p for p in prompts if family(p.task) == "open_app"][:1] * 8
    pool = _pool(prompts, window=2)
    pool.update(pool.tally(opens, [True, False] * 4))
    assert pool.success("open_app") == 0.5
    assert pool.weight("open_app") == pytest.approx(0.1 + 0.9 * 0.5)


def test_every_rank_draws_the_same_micro_batch_and_builds_its_own_slice(prompts):
    pool = _pool(prompts)
    whole = pool.draw(4, (3, 7, 1), slice(0, 4))
    halves = pool.draw(4, (3, 7, 1), slice(0, 2)) + pool.draw(4, (3, 7, 1), slice(2, 4))
    assert [p.index for p in halves] == [p.index for p in whole]
    assert [p.index for p in pool.draw(4, (3, 7, 2), slice(0, 4))] != [p.index for p in whole]  # another draw
    drawn = lambda state: sum(f["drawn"] for f in state["families"].values())  # noqa: E731
    assert drawn(pool.event_state()) == 16 and drawn(pool.event_state()) == 0  # 4 draws of 4; reset by the event


def test_fresh_instances_are_new_tasks_of_the_family_on_phones_of_new_names(prompts):
    pool = _pool(prompts, fresh_share=1.0)
    drawn = pool.draw(6, (0, 1, 0), slice(0, 6))
    known = {p.task.id for p in prompts}
    assert all(p.task.id not in known and p.task.id.startswith("more-") for p in drawn)
    assert all(p.task.phone != DEFAULT_CONTENTS and p.task.split == "train" for p in drawn)
    assert {family(p.task) for p in drawn} <= {"open_app", "toggle_setting"}
    assert pool.event_state()["fresh"] == 6
    task = fresh_instance("send_message", 5)
    contact = task.params["contact"]
    assert (
        task.template == "send_message" and contact in task.phone.contacts and contact not in DEFAULT_CONTENTS.contacts
    )
    assert fresh_instance("setting_then_message", 5) is None  # held out whole: no training instance


def test_replies_are_kept_per_prompt_and_the_state_survives_a_checkpoint(prompts):
    pool = _pool(prompts, replay=True)
    p = prompts[0]
    assert pool.kept_reply(p) is None
    pool.remember(p, [5, 6, 7])
    assert pool.kept_reply(p) == [5, 6, 7] and prompt_key(p) == f"{p.task.id}#0"
    pool.update(pool.tally([p, p], [True, False]))
    again = _pool(prompts, replay=True)
    again.load_state_dict(pool.state_dict())
    assert again.kept_reply(p) == [5, 6, 7] and again.success(family(p.task)) == 0.5
    assert _pool(prompts).kept_reply(p) is None  # without rl.pool_replay nothing is kept
