"""The step task (phone_steps): AgentCPM-GUI's action matching on recorded demonstrations, per action, per type and
per episode; and `workbench eval --task phone_steps --server` printing its figures with the rules they follow."""

from __future__ import annotations

import json
import re

import pytest

from workbench.eval import Example, get_task, load_eval_examples
from workbench.eval.steps import StepMatchTask, enlarged, text_similarity
from workbench.serve.remote import ModelReply

from ..conftest import SAMPLES

BOX = [400, 400, 600, 500]  # 200 x 100 on the grid; x1.2 about its centre: [380, 390, 620, 510]


def example(answer: str, box=BOX, episode: int = 1, step: int = 1, task: str = "t") -> Example:
    return Example(
        step,
        [],
        f"<think>t</think><answer>{answer}</answer>",
        {"messages": [], "meta": {"task": task, "episode": episode, "step": step, "target_box": box}},
    )


def verdict(answer: str, reply: str, box=BOX) -> dict:
    return StepMatchTask().score(example(answer, box), ModelReply(reply))


TAP = 'do(action="Tap", element=[500,450])'


@pytest.mark.parametrize(
    "reply, exact",
    [
        ('do(action="Tap", element=[420,410])', True),  # inside the box
        ('do(action="Tap", element=[385,505])', True),  # outside the box, inside it enlarged 1.2 times
        ('do(action="Tap", element=[375,450])', False),  # outside the enlarged box, 0.125 of the screen away
        ('<answer>do(action="Double Tap", element=[500,450])', False),  # right place, another class
    ],
)
def test_a_tap_matches_inside_its_target_enlarged_1_2_times(reply, exact):
    v = verdict(TAP, reply)
    assert v["exact"] is exact and v["type_match"] is ("Double" not in reply)


def test_a_reply_is_read_as_open_autoglms_runtime_reads_it():
    # the runtime's client cuts from do(action= on and its parser fails on a closing </answer>: a step the phone
    # would not take is no match here either (eval.phone and the runner read replies the same way)
    assert verdict(TAP, '<think>t</think>\n<answer>do(action="Tap", element=[500,450])')["exact"]
    closed = verdict(TAP, '<think>t</think><answer>do(action="Tap", element=[500,450])</answer>')
    assert not closed["parsed"] and not closed["exact"]


def test_without_a_box_a_tap_matches_within_0_04_of_the_screen():
    assert verdict(TAP, 'do(action="Tap", element=[530,470])', box=None)["exact"]  # 0.036 away
    far = verdict(TAP, 'do(action="Tap", element=[540,450])', box=None)  # 0.040 away: the threshold is inclusive
    assert far["exact"] and far["tap_distance"] == pytest.approx(0.04)
    assert not verdict(TAP, 'do(action="Tap", element=[545,450])', box=None)["exact"]
    assert enlarged([0, 0, 100, 999]) == (0, 0, 110, 999)  # clipped to the screen


@pytest.mark.parametrize(
    "expected, reply, type_match, exact",
    [
        (
            'do(action="Swipe", start=[500,800], end=[500,300])',
            'do(action="Swipe", start=[100,900], end=[150,100])',
            True,
            True,
        ),  # both up: the way the finger moves
        (
            'do(action="Swipe", start=[500,800], end=[500,300])',
            'do(action="Swipe", start=[500,300], end=[500,800])',
            True,
            False,
        ),
        ('do(action="Type", text="Phone battery is low")', 'do(action="Type", text="  phone battery ")', True, True),
        ('do(action="Type", text="Good night")', 'do(action="Type", text="Good morning")', True, False),
        ('do(action="Type", text="Good night")', 'do(action="Type", text="good night, Mom")', True, True),  # either way
        ('do(action="Back")', 'do(action="Home")', True, False),  # both presses; another button
        (
            'do(action="Launch", app="Settings")',
            'do(action="Launch", app="AndroidSystemSettings")',
            True,
            True,
        ),  # one package
        ('do(action="Launch", app="Settings")', 'do(action="Launch", app="Contacts")', True, False),
        (
            'do(action="Launch", app="WeChat")',
            'do(action="Launch", app="微信")',
            True,
            True,
        ),  # one package in the runtime's table
        ('finish(message="Wi-Fi is off.")', 'finish(message="done")', True, True),  # a stop is its class
        ('finish(message="Wi-Fi is off.")', 'do(action="Wait", duration="1 seconds")', False, False),
        ('do(action="Tap", element=[500,450])', "Tap the Wi-Fi row", False, False),  # no action: no format hit
        # a press held on the right element is no tap, nor the other way round: another class, no match
        ('do(action="Long Press", element=[500,450])', 'do(action="Tap", element=[500,450])', False, False),
        ('do(action="Tap", element=[500,450])', 'do(action="Long Press", element=[500,450])', False, False),
        ('do(action="Long Press", element=[500,450])', 'do(action="Long Press", element=[420,410])', True, True),
    ],
)
def test_the_other_classes_match_as_agentcpm_gui_matches_them(expected, reply, type_match, exact):
    v = verdict(expected, reply)
    assert (v["type_match"], v["exact"]) == (type_match, exact)


def test_text_similarity_is_levenshteins_ratio():
    assert text_similarity("kitten", "sitting") == pytest.approx(2 * 4 / 13)  # LCS "ittn"
    assert text_similarity("", "") == 1.0 and text_similarity("a", "") == 0.0


def test_summary_per_type_and_per_episode_success_and_goal_progress():
    task = StepMatchTask()
    rows = [
        (1, 1, TAP, TAP),
        (1, 2, 'do(action="Back")', 'do(action="Back")'),  # episode 1: all exact
        (2, 1, TAP, TAP),
        (2, 2, 'do(action="Back")', 'do(action="Home")'),  # episode 2: a miss at step 2 of 3
        (2, 3, 'finish(message="x")', 'finish(message="x")'),
    ]
    verdicts = [task.score(example(a, episode=e, step=s), ModelReply(r)) for e, s, a, r in rows]
    m = task.summarize(verdicts)
    assert (m["n"], m["episodes"], m["exact_match"], m["type_match"]) == (5, 2, 0.8, 1.0)
    assert m["episode_success"] == 0.5 and m["goal_progress"] == pytest.approx((1 + 1 / 3) / 2)
    assert m["by_type"]["Back"] == {"n": 2, "type_match": 1.0, "exact_match": 0.5}
    assert "0.04" in task.rules and "x1.2" in task.rules and "AgentCPM-GUI" in task.rules


def test_episodes_of_two_tasks_are_two_episodes_whatever_their_numbers():
    """Rows merged from two recordings (data merge) each number their episodes from 1: an episode is its task's, so
    the first episode of two tasks are two episodes, one finished and one not."""
    task = StepMatchTask()
    verdicts = [
        task.score(example(TAP, task="open_app/clock"), ModelReply(TAP)),
        task.score(example(TAP, task="toggle_setting/wifi-off"), ModelReply('do(action="Back")')),
    ]
    m = task.summarize(verdicts)
    assert (m["episodes"], m["episode_success"], m["goal_progress"]) == (2, 0.5, 0.5)


def test_the_recorded_set_scores_itself_exact_and_its_real_phone_twin_by_distance():
    task = get_task("phone_steps")
    examples = load_eval_examples(task.default_data)
    assert len(examples) == 32
    perfect = task.summarize([task.score(ex, ModelReply(ex.reference)) for ex in examples])
    assert perfect["exact_match"] == 1.0 and perfect["episode_success"] == 1.0 and perfect["episodes"] == 4
    # rows from a real phone have no box: the recorded point alone, 0.04 of the screen around it
    for ex in examples:
        ex.row["meta"]["target_box"] = None
    moved = [
        task.score(
            ex, ModelReply(re.sub(r"element=\[(\d+),", lambda m: f"element=[{int(m.group(1)) + 30},", ex.reference))
        )
        for ex in examples
    ]
    assert all(v["exact"] for v in moved)


@pytest.fixture(scope="module")
def tiny_agent_server():
    from workbench.serve import start_server

    with start_server("tiny-glm4v-agent", max_batch=8, threads=1) as srv:
        yield srv


def test_cli_prints_step_metrics_per_type_and_names_its_rules(tiny_agent_server, capsys):
    from workbench.cli.main import main

    assert (
        main(["eval", "--server", tiny_agent_server.url, "--task", "phone_steps", "--max-tokens", "8", "--no-write"])
        == 0
    )
    out = capsys.readouterr().out
    assert re.search(r"^tiny-glm4v-agent +default +32 +0\.000 +0\.000 +0\.000 +4 +0\.000 +0\.000", out, re.M), out
    assert re.search(r"^per expected action type .*\n.*Launch +Swipe +Tap +Type +finish", out, re.M), out
    assert re.search(r"^tiny-glm4v-agent +default +6: 0\.000 / 0\.000 +5: 0\.000 / 0\.000 +15: ", out, re.M), out
    assert "rules: AgentCPM-GUI" in out and "within 0.04 of the screen" in out
    assert (
        main(
            [
                "eval",
                "--server",
                tiny_agent_server.url,
                "--task",
                "phone_steps",
                "--max-tokens",
                "8",
                "--limit",
                "3",
                "--json",
                "--no-write",
                "--data",
                str(SAMPLES / "own_app" / "heldout_tree.jsonl"),
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["settings"]["rules"].startswith("AgentCPM-GUI") and report["metrics"]["tiny-glm4v-agent"]
