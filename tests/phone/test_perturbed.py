"""The perturbed split: training tasks on phones whose screens no demonstration shows (a pop-up to dismiss, a slow app
to wait for, renamed buttons, shuffled layouts), asked for as ``--tasks perturbed``, drawn in the screenshot and
the screen tree alike, and solved by the oracle with the detours they need."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from workbench.phone.actions import Action, format_action
from workbench.phone.conversation import assistant_target
from workbench.phone.env import PhoneEnv
from workbench.phone.openautoglm import wait_seconds
from workbench.phone.sim import SimPhone
from workbench.phone.tasks import PERTURBATIONS, PERTURBED_TASKS, TASKS, perturbed, select_tasks
from workbench.phone.uitree import screen_tree

SIZE = (112, 252)


def task_of(task_id: str):
    return next(t for t in TASKS + PERTURBED_TASKS if t.id == task_id)


def started(task) -> SimPhone:
    phone = SimPhone(SIZE)
    phone.reset(task.initial_state())
    return phone


def test_the_split_is_selected_by_name_and_varies_training_tasks():
    tasks = select_tasks("perturbed")
    assert tasks == PERTURBED_TASKS and len(tasks) == 20 and {t.split for t in tasks} == {"perturbed"}
    assert collections.Counter(t.id.split("/")[1] for t in tasks) == {k: 5 for k in PERTURBATIONS}
    for task in tasks:
        base = task_of(task.id.split("/", 2)[2])
        assert base.split == "train" and task.instruction == base.instruction and task.params == base.params
    assert not set(select_tasks("all")) & set(tasks)  # they read as their training tasks: asked for by name only
    assert select_tasks("perturbed/slow/toggle_setting/wifi-off")[0].phone.perturbation.slow == ("Settings",)
    with pytest.raises(ValueError, match="unknown perturbation 'rainy'"):
        perturbed(TASKS[0], "rainy")


def test_a_pop_up_covers_the_app_once_and_any_way_out_dismisses_it():
    task = task_of("perturbed/popup/web_search/weather-tomorrow")
    phone = started(task)
    plain = started(task_of("web_search/weather-tomorrow"))
    for p in (phone, plain):
        p.execute(Action("Launch", {"app": "Chrome"}))
    assert set(phone.screen().elements) == {"Not now", "Rate now"} and "Search box" in plain.screen().elements
    assert '"Enjoying Chrome? Rate it"' in screen_tree(phone.screen())
    assert not np.array_equal(np.asarray(phone.screenshot()), np.asarray(plain.screenshot()))
    assert phone.execute(Action("Back")).effect == "closed the menu"
    assert "Search box" in phone.screen().elements
    phone.execute(Action("Home"))
    phone.execute(Action("Launch", {"app": "Chrome"}))
    assert "Search box" in phone.screen().elements  # once an episode
    assert phone.state.key() == plain.state.key()  # neither button changes any data


def test_a_slow_app_shows_nothing_until_the_phone_has_waited():
    task = task_of("perturbed/slow/toggle_setting/wifi-off")
    phone = started(task)
    phone.execute(Action("Launch", {"app": "Settings"}))
    assert phone.screen().elements == {} and "Loading..." in screen_tree(phone.screen())
    assert not phone.execute(Action("Tap", {"element": [500, 192]})).valid
    assert phone.execute(Action("Wait", {"duration": "1 seconds"})).effect == "waited; Settings is still loading"
    assert phone.execute(Action("Wait", {"duration": "1 seconds"})).effect == "waited; Settings has loaded"
    assert "Wi-Fi" in phone.screen().elements
    phone.execute(Action("Back"))
    phone.execute(Action("Launch", {"app": "Settings"}))
    assert phone.screen().elements == {}  # slow each time it opens
    assert [wait_seconds(d) for d in ("2 seconds", "0.5 seconds", "two", "-3 seconds")] == [2.0, 0.5, 1.0, 0.0]


def test_renamed_buttons_are_drawn_and_named_anew_and_shuffled_layouts_move_things():
    renamed, plain = started(task_of("perturbed/renamed/open_app/chrome")), started(task_of("open_app/chrome"))
    for p in (renamed, plain):
        p.execute(Action("Launch", {"app": "Settings"}))
    assert "WLAN" in renamed.screen().elements and "Wi-Fi" not in renamed.screen().elements
    assert renamed.screen().elements["WLAN"] == plain.screen().elements["Wi-Fi"]
    tree = screen_tree(renamed.screen())
    assert 'WLAN "On" [30,150][970,235]' in tree and "Wi-Fi" not in tree  # the status bar's name too
    assert renamed.execute(Action("Tap", {"element": [500, 192]})).effect == "turned Wi-Fi off"
    shuffled = started(task_of("perturbed/shuffled/toggle_setting/wifi-on"))
    plain = started(task_of("toggle_setting/wifi-on"))
    assert list(shuffled.screen().elements) != list(plain.screen().elements)  # the launcher's order
    for p in (shuffled, plain):
        p.execute(Action("Launch", {"app": "Settings"}))
    assert sorted(shuffled.screen().elements) == sorted(plain.screen().elements)
    assert list(shuffled.screen().elements) != list(plain.screen().elements)


@pytest.mark.parametrize("task", PERTURBED_TASKS, ids=lambda t: t.id)
def test_the_oracle_solves_each_perturbed_task_with_its_detours(task):
    env = PhoneEnv(SimPhone(SIZE), max_steps=40, tasks=[task])
    env.reset(options={"task": task})
    steps = task.oracle()
    for step in steps:
        *_, info = env.step(assistant_target(step.thinking, format_action(step.action)))
        assert info["valid"], (step.action, info["effect"])
    assert info["success"]
    kind = task.id.split("/")[1]
    base = task_of(task.id.split("/", 2)[2])
    waits = sum(s.action.type == "Wait" for s in steps)
    dismissed = sum("pop-up" in s.thinking for s in steps)
    assert waits == 0 or kind == "slow"
    assert dismissed == 0 or kind == "popup"
    if kind in ("renamed", "shuffled"):
        assert len(steps) == len(base.oracle())
