"""The task set: size and lengths, every oracle solves its task through the gym interface, success is judged on
the final state, held-out tasks are not training tasks renamed, and task files report bad rows at file:line."""

from __future__ import annotations

import json
import statistics

import pytest

from workbench.phone.actions import format_action
from workbench.phone.conversation import assistant_target
from workbench.phone.env import PhoneEnv
from workbench.phone.sim import SimPhone
from workbench.phone.state import APPS, DEFAULT_CONTENTS
from workbench.phone.tasks import (
    MORE_FRESH_SHARE,
    TASKS,
    TEMPLATES,
    TaskFileError,
    _pairing,
    load_task_file,
    make_task,
    more_training_tasks,
    select_tasks,
)

ENV = PhoneEnv(SimPhone((112, 252)), max_steps=30)


def test_the_set_is_large_enough_and_long_enough():
    lengths = [len(t.oracle()) for t in TASKS]
    assert len(TASKS) >= 40 and statistics.median(lengths) >= 3 and sum(n >= 6 for n in lengths) >= 10
    assert len({t.id for t in TASKS}) == len(TASKS)
    assert len({t.instruction for t in TASKS}) == len(TASKS)  # the oracle policy finds a task by its instruction
    apps = {a for t in TASKS for a in t.apps}
    assert {"Settings", "Contacts", "Telegram", "Chrome", "RetroMusic", "Files"} <= apps


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_every_oracle_solves_its_task_and_the_start_does_not(task):
    obs, info = ENV.reset(options={"task": task})
    assert not all(ENV.judge().values()), "the task is solved before any action"
    steps = task.oracle()
    for i, step in enumerate(steps):
        obs, reward, terminated, truncated, info = ENV.step(assistant_target(step.thinking, format_action(step.action)))
        assert info["valid"], f"step {i + 1} {step.action} did nothing: {info['effect']}"
        assert terminated == (i == len(steps) - 1)
    assert reward == 1.0 and info["success"] and all(info["checks"].values())


def test_success_is_judged_on_the_final_state_not_the_actions():
    task = next(t for t in TASKS if t.id == "toggle_setting/wifi-off")
    ENV.reset(options={"task": task})
    for text in [
        'do(action="Launch", app="Settings")',
        'do(action="Tap", element=[500,192])',
        'do(action="Tap", element=[500,192])',
    ]:  # off, then on again: the goal does not hold
        ENV.step(text)
    *_, info = ENV.step('finish(message="done")')
    assert info["checks"] == {"wifi_off": False, "nothing_else_changed": True} and not info["success"]
    ENV.reset(options={"task": task})
    ENV.step('do(action="Launch", app="Settings")')
    ENV.step('do(action="Tap", element=[500,192])')  # Wi-Fi off
    ENV.step('do(action="Tap", element=[500,287])')  # and Bluetooth on, which nobody asked for
    *_, info = ENV.step('finish(message="done")')
    assert info["checks"] == {"wifi_off": True, "nothing_else_changed": False} and not info["success"]


def test_heldout_tasks_are_not_training_tasks_renamed():
    train = {(t.template, json.dumps(t.params, sort_keys=True)) for t in TASKS if t.split == "train"}
    heldout = [t for t in TASKS if t.split == "heldout"]
    assert len(heldout) >= 20
    for t in heldout:
        assert (t.template, json.dumps(t.params, sort_keys=True)) not in train
        # the value that names what to act on is one the template never trained on
        main = (
            t.params.get("app")
            or t.params.get("setting")
            or t.params.get("contact")
            or t.params.get("song")
            or t.params.get("photo")
            or t.params.get("query")
        )
        trained = {json.dumps(tt.params) for tt in TASKS if tt.split == "train" and tt.template == t.template}
        assert not any(json.dumps(main)[1:-1] in p for p in trained), t.id
    heldout_templates = {t.template for t in heldout} - {t.template for t in TASKS if t.split == "train"}
    assert heldout_templates == {"setting_then_message"}  # one template held out whole
    assert {a for t in heldout for a in t.apps} - {"Clock", "Gmail", "Broccoli", "VLC"} <= {
        a for t in TASKS if t.split == "train" for a in t.apps
    }  # held-out tasks use apps training has seen


def test_combos_pair_trained_values_in_ways_no_training_task_does():
    combos = select_tasks("combos")
    assert len(combos) >= 12 and {t.split for t in combos} == {"combos"}
    more = more_training_tasks(480)
    train = [t for t in TASKS if t.split == "train"] + more
    pairings = {_pairing(t.template, t.params) for t in train}
    trained_values = {(k, str(v)) for t in train for k, v in t.params.items() if k != "on"}
    trained_values |= {("app", a) for t in train for a in t.apps}  # an app opened on the way to another task
    for t in combos:
        assert _pairing(t.template, t.params) not in pairings, t.id  # the combination is new
        assert {(k, str(v)) for k, v in t.params.items() if k != "on"} <= trained_values, t.id  # each value is not
        assert set(t.apps) <= {a for tt in train for a in tt.apps}, t.id
    # more tasks keep a combos task's values in other pairings: what there is to recombine
    assert {"Dana Lee", "Li Na", "Sam Taylor"} <= {
        t.params.get("contact") for t in more if t.template == "send_message"
    }
    assert not {"Dana Lee", "Li Na", "Sam Taylor"} & {
        t.params["contact"] for t in more if t.template == "favorite_contact"
    }


def test_task_files_and_their_errors(tmp_path):
    good = tmp_path / "tasks.jsonl"
    good.write_text(
        '{"template": "open_app", "app": "Joplin"}\n\n'
        '{"template": "send_message", "contact": "Mom", "text": "Hi", "id": "mine", "split": "heldout"}\n'
    )
    tasks = load_task_file(good)
    assert [(t.id, t.split) for t in tasks] == [("open_app/joplin", "train"), ("mine", "heldout")]
    assert select_tasks(str(good)) == tasks
    for row, why in [
        ('{"template": "open_app", "app": "TikTok"}', "3: unknown app 'TikTok'; known: Settings"),
        ('{"template": "fly", "app": "X"}', "3: unknown template 'fly'; templates: open_app"),
        ('{"app": "Joplin"}', "3: no 'template'"),
        ('{"template": "open_app"}', "3: template open_app takes app; missing app"),
        ('{"template": "toggle_setting", "setting": "wifi", "on": "yes"}', "3: 'on' must be true or false"),
        ("[1, 2]", "3: a row is a JSON object"),
        ('{"template": ', "3: not valid JSON (Expecting value"),
        ('{"template": "open_app", "app": "Joplin"}', "3: task id 'open_app/joplin' already used on line 1"),
    ]:
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"template": "open_app", "app": "Joplin"}\n\n' + row + "\n")
        with pytest.raises(TaskFileError, match=f"bad.jsonl:{why}".replace("(", r"\(").replace("[", r"\[")):
            load_task_file(bad)


def test_selecting_tasks_by_name():
    assert len(select_tasks("all")) == len(TASKS)
    assert {t.split for t in select_tasks("heldout")} == {"heldout"}
    assert {t.split for t in select_tasks("combos")} == {"combos"}
    assert {t.template for t in select_tasks("open_app,like_photo")} == {"open_app", "like_photo"}
    assert [t.id for t in select_tasks("open_app/settings")] == ["open_app/settings"]
    with pytest.raises(
        ValueError, match=r"unknown tasks 'nope': give all, train, heldout, combos, perturbed, a template \(open_app"
    ):
        select_tasks("train,nope")
    with pytest.raises(ValueError, match="unknown app 'Nope'"):
        make_task("open_app", {"app": "Nope"})
    # more:COUNT[:SEED]: seed 0 is the text agent's training draw itself, another seed a new draw with its own ids
    assert [t.id for t in select_tasks("more:5")] == [t.id for t in more_training_tasks(5, 0, MORE_FRESH_SHARE)]
    drawn = select_tasks("more:40:1")
    assert len(drawn) == 40 and drawn[0].id == "more-1/1" and {t.split for t in drawn} == {"train"}
    assert sum(t.phone != DEFAULT_CONTENTS for t in drawn) > 20  # most on phones of new names, as in training
    assert {t.instruction for t in drawn} != {t.instruction for t in select_tasks("more:40")}
    assert len(select_tasks("more:3:1,more:3:2,more:3")) == 9
    with pytest.raises(ValueError, match="more:COUNT"):
        select_tasks("more:0:1")
    with pytest.raises(ValueError, match=r"more:COUNT\[:SEED\]"):
        select_tasks("more:x")
    assert set(TEMPLATES) >= {"open_app", "toggle_setting", "send_message", "web_search", "play_song"}
    assert len(APPS) == 24


def test_more_training_tasks_use_no_held_out_value_and_their_oracles_solve_them():
    more = more_training_tasks(60, seed=3)
    assert [t.id for t in more] == [t.id for t in more_training_tasks(60, seed=3)]  # deterministic
    assert len({t.id for t in more}) == 60 and {t.split for t in more} == {"train"}
    assert "setting_then_message" not in {t.template for t in more}
    held = {
        (k, v)
        for t in select_tasks("heldout")
        for k, v in t.params.items()
        if k in ("contact", "song", "photo", "app", "text", "query")
    }
    used = {(k, v) for t in more for k, v in t.params.items()}
    assert not used & held
    assert len({t.params["text"] for t in more if "text" in t.params}) >= 10  # new messages to learn to copy

    # nor a word of a held-out message or query: copying one into Type is then never recall of a seen word
    def words(values):
        return {w.strip(",.?!'").lower() for v in values for w in v.split()}

    held_words = words(v for k, v in held if k in ("text", "query"))
    more_words = words(t.params[k] for t in more_training_tasks(240) for k in ("text", "query") if k in t.params)
    assert len(more_words) >= 150 and not more_words & held_words, more_words & held_words
    for task in more:
        ENV.reset(options={"task": task})
        for step in task.oracle():
            obs, reward, terminated, truncated, info = ENV.step(
                assistant_target(step.thinking, format_action(step.action))
            )
        assert info["success"], task.id
