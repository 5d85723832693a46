"""Prompts from the offline phone's tasks (their first step, as the episode runner sends it, screenshot included)
and the episode_success reward, which plays each sampled first action on through the episode runner."""

import datetime

import pytest
from PIL import ImageChops, ImageStat

from workbench.agent import OraclePolicy
from workbench.agent.runner import png_bytes
from workbench.config import ConfigError, load_config
from workbench.image_io import image_data_url, last_image_url, load_image
from workbench.phone.conversation import Conversation, runtime_problems
from workbench.phone.env import PhoneEnv
from workbench.phone.sim import SimPhone
from workbench.phone.tasks import select_tasks
from workbench.rewards import RewardError, scorer_for
from workbench.rewards.phone_tasks import PhoneTasksScorer, first_step_prompts, play_episodes

DATE = datetime.date(2026, 12, 1)
SIZE = (112, 252)
WRONG = '<think>Done already.</think>\n<answer>finish(message="done")'


@pytest.fixture(scope="module")
def tasks():
    return select_tasks("heldout")[:3]


def test_a_prompt_is_the_runners_first_step_with_its_screenshot_and_the_oracles_reply(tasks):
    prompts = first_step_prompts(tasks, SIZE, DATE)
    assert [p.task for p in prompts] == tasks and [p.index for p in prompts] == [1, 2, 3]
    for task, prompt in zip(tasks, prompts):
        env = PhoneEnv(SimPhone(SIZE), tasks=[task], max_steps=1)
        obs, _ = env.reset(options={"task": task})
        expected = Conversation(task.instruction, DATE)
        expected.observe(image_data_url(png_bytes(obs["screenshot"])), obs["current_app"])
        assert prompt.messages == expected.messages  # screenshot (data: URL), instruction, app: the runtime turn
        assert runtime_problems(prompt.messages + [{"role": "assistant", "content": prompt.reference}]) == []
        first = task.oracle()[0]
        assert first.thinking in prompt.reference
    taps = [p for p in prompts if "Tap" in p.reference]
    assert all(p.row["meta"]["target_box"] for p in taps)  # tap_in_box applies to these prompts


def test_the_oracles_first_action_wins_the_episode_and_a_wrong_one_loses_it(tasks):
    prompts = first_step_prompts(tasks, SIZE, DATE)
    s = PhoneTasksScorer(tasks, ["format", "action_type", "episode_success"], SIZE, 20, 32, date=DATE)
    s.continuation = OraclePolicy(tasks)  # the rest of each episode: the oracle's (a trained model's in a run)
    p = prompts[0]
    scored = s([p, p, p], [p.reference, WRONG, "no idea"])
    assert scored.rewards["episode_success"] == [1.0, 0.0, 0.0]
    assert scored.rewards["format"] == [1.0, 1.0, 0.0] and scored.rewards["action_type"] == [1.0, 0.0, 0.0]
    assert scored.parsed == [True, True, False]
    # the episodes behind the rewards: played from the given first reply, in order
    episodes = play_episodes([p, p], [p.reference, WRONG], OraclePolicy(tasks), SIZE, 20, DATE)
    assert episodes[0].success and episodes[0].end_reason == "finish" and len(episodes[0].steps) == len(p.task.oracle())
    assert not episodes[1].success and len(episodes[1].steps) == 1


def test_episode_success_without_the_trained_model_or_on_rows_says_why(tasks):
    s = PhoneTasksScorer(tasks, ["episode_success"], SIZE, 20, 32, date=DATE)
    with pytest.raises(RewardError, match="episode_success.*needs the model being trained"):
        s(s.prompts[:1], [WRONG])
    with pytest.raises(ConfigError, match=r"rl\.rewards\.episode_success: .*rl\.prompts phone_tasks"):
        load_config(None, {"training.method": "grpo", "lora.dropout": 0, "rl.rewards": {"episode_success": 1.0}})


def test_episode_efficiency_prices_a_repaired_detour_below_the_direct_action(tasks):
    """Success alone scores a detour the rest of the episode repairs (a needless swipe, then the tap) as the direct
    tap: 1 both. episode_efficiency: success x the oracle's steps over the episode's, so the detour scores less; a
    failure 0. The scorer plays the episodes for it alone too (no episode_success beside it)."""
    from types import SimpleNamespace

    from workbench.rewards.functions import episode_efficiency

    task = tasks[0]
    n = len(task.oracle())
    prompt = SimpleNamespace(task=task)

    def played(success, steps):
        return {"episode": SimpleNamespace(success=success, steps=[None] * steps)}

    assert episode_efficiency(prompt, "", played(True, n)) == 1.0
    assert n >= 2 and episode_efficiency(prompt, "", played(True, n + 1)) == pytest.approx(n / (n + 1))
    assert episode_efficiency(prompt, "", played(True, n - 1)) == 1.0  # shorter than the oracle's way: capped at 1
    assert episode_efficiency(prompt, "", played(False, n)) == 0.0
    with pytest.raises(ValueError, match="episode_efficiency scores a played episode"):
        episode_efficiency(prompt, "", {})
    s = PhoneTasksScorer(tasks, ["episode_efficiency"], SIZE, 20, 32, date=DATE)
    s.continuation = OraclePolicy(tasks)
    p = first_step_prompts(tasks, SIZE, DATE)[0]
    assert s([p, p], [p.reference, WRONG]).rewards["episode_efficiency"] == [1.0, 0.0]
    with pytest.raises(ConfigError, match=r"rl\.rewards\.episode_efficiency: .*rl\.prompts phone_tasks"):
        load_config(None, {"training.method": "grpo", "lora.dropout": 0, "rl.rewards": {"episode_efficiency": 1.0}})


def test_episode_shortest_prices_a_success_by_the_experts_shortest_path_not_the_oracles():
    """Alice Chen has a conversation already: 6 steps through Telegram, where the oracle's solution (through Contacts)
    takes 7. The oracle's own episode from the task's first prompt then scores 6/7, a 6-step one 1, a longer one
    less, a failure 0; a prompt later in the oracle's episode is priced by its replayed steps plus the expert's path
    from there."""
    from types import SimpleNamespace

    from workbench.phone.expert import Expert
    from workbench.rewards.functions import episode_shortest

    task = select_tasks("send_message/alice-chen-on-my-way")[0]
    assert (Expert().shortest(task), len(task.oracle())) == (6, 7)
    s = PhoneTasksScorer([task], ["episode_shortest"], SIZE, 20, 32, date=DATE, prompt_steps="all")
    s.continuation = OraclePolicy([task])
    first = s.prompts[0]
    scored = s([first, first], [first.reference, WRONG])
    assert scored.rewards["episode_shortest"] == [pytest.approx(6 / 7), 0.0]
    assert [s.shortest(p) for p in s.prompts] == [6] + [7] * 6  # from step 2 on, the oracle's way is a shortest one

    def played(success, steps):
        return {"episode": SimpleNamespace(success=success, steps=[None] * steps), "shortest": 6}

    assert [episode_shortest(first, "", played(True, n)) for n in (6, 8)] == [1.0, 0.75]
    assert episode_shortest(first, "", played(False, 6)) == 0.0


@pytest.mark.parametrize(
    "field,value,says",
    [
        ("rl.tasks", "no_such_task", "unknown tasks 'no_such_task'"),
        ("rl.screen_size", "12x252", "at least 28"),
        ("rl.date", "2026-13-01", "not a date"),
    ],
)
def test_phone_task_settings_that_cannot_work_name_their_field(field, value, says):
    base = {"training.method": "grpo", "lora.dropout": 0, "rl.prompts": "phone_tasks", "rl.screen_size": "112x252"}
    with pytest.raises(ConfigError, match=rf"{field}: .*{says}"):
        scorer_for(load_config(None, {**base, field: value}))


def test_phone_tasks_prompts_come_from_the_config():
    s = scorer_for(
        load_config(
            None,
            {
                "training.method": "grpo",
                "lora.dropout": 0,
                "rl.prompts": "phone_tasks",
                "rl.tasks": "open_app",
                "rl.screen_size": "112x252",
                "rl.rewards": {"episode_success": 1.0},
                "rl.date": "2026-12-01",
            },
        )
    )
    assert isinstance(s, PhoneTasksScorer) and s.size == SIZE and s.date == DATE
    assert "The current date: 2026-12-01" in s.prompts[0].messages[0]["content"]  # the same prompts on any day
    assert s.prompts and {p.task.template for p in s.prompts} == {"open_app"}
    assert s.prompts[0].task.instruction in s.describe(s.prompts[0])  # the samples table shows the instruction


def test_a_phone_task_prompts_thumbnail_is_its_screenshot_small(tasks):
    prompt = first_step_prompts(tasks[:1], SIZE, DATE)[0]
    thumbnail = PhoneTasksScorer.thumbnail(prompt)
    assert thumbnail.startswith("data:image/png;base64,") and len(thumbnail) < 4000  # a few KB in the log
    small = load_image(thumbnail)
    assert small.size == (64, 144)  # 112x252 shrunk to 64 px wide, the aspect kept
    screen = load_image(last_image_url(prompt.messages)).resize(small.size)
    assert max(ImageStat.Stat(ImageChops.difference(small, screen)).mean) < 8  # the same picture, every channel


def test_every_step_is_a_prompt_and_episode_success_plays_on_from_the_sampled_step(tasks):
    """rl.prompt_steps all: each step of the oracle's episode is a prompt (the earlier turns as the oracle played them,
    the screen as text with rl.observation ui_tree); the episode replays those turns, then the sampled reply, then
    the continuation: the oracle's reply at a late step wins, a wrong one there loses."""
    from workbench.rewards.phone_tasks import step_prompts

    prompts = step_prompts(tasks, SIZE, DATE, "ui_tree", "all")
    assert len(prompts) == sum(len(t.oracle()) for t in tasks)
    for prompt in prompts:
        step = prompt.row["meta"]["step"]
        assert sum(m["role"] == "assistant" for m in prompt.messages) == step - 1
        assert prompt.row["meta"]["observation"] == "ui_tree" and "image_url" not in str(prompt.messages)
        assert runtime_problems(prompt.messages + [{"role": "assistant", "content": prompt.reference}], "ui_tree") == []
    late = max((p for p in prompts if "finish(" not in p.reference), key=lambda p: p.row["meta"]["step"])
    k = late.row["meta"]["step"]
    assert k >= 2
    s = PhoneTasksScorer(tasks, ["episode_success"], SIZE, 20, 32, date=DATE, observation="ui_tree", prompt_steps="all")
    s.continuation = OraclePolicy(tasks)
    assert len(s.prompts) == len(prompts)
    assert s([late, late], [late.reference, WRONG]).rewards["episode_success"] == [1.0, 0.0]
    episodes = play_episodes([late, late], [late.reference, WRONG], OraclePolicy(tasks), SIZE, 20, DATE, "ui_tree")
    assert len(episodes[1].steps) == k and episodes[1].steps[k - 1].answer == 'finish(message="done")'
    assert [s.answer for s in episodes[0].steps[: k - 1]] == [s.answer for s in episodes[1].steps[: k - 1]]  # replayed


def test_rl_lang_cn_sends_the_chinese_prompt_in_every_prompt_and_every_played_turn(tasks):
    """rl.lang cn: the run's prompts, the pool's fresh instances and the turns the trained model plays on after the
    sampled one all carry Open-AutoGLM's Chinese system prompt (the model is trained and judged in one language)."""
    from workbench.phone.conversation import system_prompt

    s = scorer_for(
        load_config(
            None,
            {
                "training.method": "grpo",
                "lora.dropout": 0,
                "rl.prompts": "phone_tasks",
                "rl.tasks": "heldout",
                "rl.screen_size": "112x252",
                "rl.lang": "cn",
                "rl.rewards": {"episode_success": 1.0},
                "rl.date": "2026-12-01",
            },
        )
    )
    cn = system_prompt(DATE, lang="cn")
    assert {p.messages[0]["content"] for p in s.prompts} == {cn}
    fresh = s.task_prompts(tasks)
    assert {p.messages[0]["content"] for p in fresh} == {cn}
    seen, oracle = [], OraclePolicy(tasks)

    def continuation(conversations):
        seen.extend(c[0]["content"] for c in conversations)
        return oracle(conversations)

    s.continuation = continuation
    played = [p for p in fresh if len(p.task.oracle()) > 1][:1]
    assert s(played, [played[0].reference]).rewards["episode_success"] == [1.0]
    assert seen and set(seen) == {cn}


def test_rl_step_discount_prices_each_sampled_step_by_the_steps_left_after_it(tasks):
    """rl.step_discount 0.5 with rl.step_advantage_weight (scale_rewards none): three replies to a task's first screen
    (one anchor group), two that win in the oracle's n steps and one that gives up; a win's return at the sampled step
    is 0.5^(n - 1), so the step advantages are that return less the group's mean."""
    task = next(t for t in tasks if len(t.oracle()) >= 3)
    s = scorer_for(
        load_config(
            None,
            {
                "training.method": "grpo",
                "lora.dropout": 0,
                "rl.prompts": "phone_tasks",
                "rl.tasks": task.id,
                "rl.screen_size": "112x252",
                "rl.date": "2026-12-01",
                "rl.rewards": {"episode_success": 1.0},
                "rl.step_advantage_weight": 0.5,
                "rl.step_discount": 0.5,
                "rl.scale_rewards": "none",
            },
        )
    )
    s.continuation = OraclePolicy([task])
    p = s.prompts[0]
    scored = s([p, p, p], [p.reference, p.reference, WRONG])
    won = 0.5 ** (len(task.oracle()) - 1)
    assert scored.successes == [True, True, False]
    assert scored.step_advantages == pytest.approx([won / 3, won / 3, -2 * won / 3])
