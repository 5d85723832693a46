"""The expert (``phone.expert``): from any state of the simulated phone, the next action of a shortest path to the
task's checks. It solves every task of every split from its start, played through the gym environment; its path is
never longer than the fixed oracle's (and shorter where the oracle detours); a search started afresh from any state
of its path agrees with the rest of the path; it recovers from states no demonstration shows (a wrong switch
flipped, a wrong app open, a pop-up, a slow app, random actions); where something cannot be undone it reaches the
task's own goals and says so. ``python -m workbench.bench.agent expert`` prints its time per state."""

from __future__ import annotations

import random

import pytest

from workbench.phone.actions import Action
from workbench.phone.env import PhoneEnv
from workbench.phone.expert import Expert, moves, replay
from workbench.phone.sim import SimPhone
from workbench.phone.tasks import PERTURBED_TASKS, SPLITS, TASKS, centre, select_tasks

EXPERT = Expert()  # one for the module: its answers are kept across the tests, as DAgger's labelling keeps them


def task_of(task_id: str):
    return next(t for t in TASKS + PERTURBED_TASKS if t.id == task_id)


def play(task, prefix: list, steps: list) -> dict:
    """``prefix`` then the expert's ``steps`` through the gym environment from the task's start; the last info."""
    env = PhoneEnv(SimPhone((112, 252)), tasks=[task], max_steps=100)
    env.reset(options={"task": task})
    info = {}
    for action in prefix + [s.action for s in steps]:
        *_, info = env.step(action)
        assert info["valid"], f"{task.id}: {action} did nothing: {info['effect']}"
    return info


@pytest.mark.parametrize("split", SPLITS)
def test_the_expert_solves_every_task_from_its_start_never_longer_than_the_oracle(split):
    tasks = select_tasks(split)
    assert len(tasks) >= 15
    for task in tasks:
        path = EXPERT.path(task)
        assert path[-1].action.type == "finish" and all(s.solves for s in path)
        assert [s.steps_left for s in path] == list(range(len(path), 0, -1))
        assert len(path) <= len(task.oracle()), task.id
        info = play(task, [], path)
        assert info["success"], (task.id, info["checks"])


@pytest.mark.slow
def test_a_fresh_search_from_every_state_on_its_path_agrees_with_the_rest_of_the_path():
    """One task of each template and perturbation: a new expert (no answers kept) at each state of the path finds a
    path exactly as long as the rest, and playing it from there succeeds."""
    seen, tasks = set(), []
    for task in TASKS + PERTURBED_TASKS:
        kind = (task.template, task.split == "perturbed" and task.id.split("/")[1])
        if kind not in seen:
            seen.add(kind)
            tasks.append(task)
    for task in tasks:
        path = EXPERT.path(task)
        for k in range(1, len(path)):
            phone = replay(task, [s.action for s in path[:k]])
            rest = Expert().path(task, phone)
            assert len(rest) == len(path) - k, (task.id, k)
            assert play(task, [s.action for s in path[:k]], rest)["success"]


def test_it_finds_the_shorter_ways_the_oracle_does_not_take():
    """The oracle messages through Contacts; Alice Chen has a conversation in Telegram already, so Launch Telegram,
    her conversation, the box, Type, Send, finish: 6 steps, not 7. Dark mode is on the Display page: 4 steps."""
    assert EXPERT.shortest(task_of("send_message/alice-chen-on-my-way")) == 6
    assert len(task_of("send_message/alice-chen-on-my-way").oracle()) == 7
    assert EXPERT.shortest(task_of("toggle_setting/wifi-off")) == 3
    assert EXPERT.shortest(task_of("toggle_setting/dark-mode-on")) == 4
    shorter = [t.id for t in TASKS if EXPERT.shortest(t) < len(t.oracle())]
    assert len(shorter) >= 10, shorter


def test_where_the_oracle_is_a_shortest_way_the_expert_gives_its_steps():
    task = task_of("toggle_setting/dark-mode-on")
    assert [(s.action, s.thinking) for s in EXPERT.path(task)] == [(s.action, s.thinking) for s in task.oracle()]


def test_it_undoes_a_wrong_switch_and_leaves_a_wrong_app():
    task = task_of("toggle_setting/wifi-off")
    wrong = [Action("Launch", {"app": "Settings"}), Action("Tap", {"element": [500, 287]})]  # Bluetooth on: not asked
    path = EXPERT.path(task, replay(task, wrong))
    assert path[0].steps_left == 3 and path[0].solves  # Bluetooth back off, Wi-Fi off, finish
    assert play(task, wrong, path)["success"]
    elsewhere = [Action("Launch", {"app": "Gmail"})]
    assert play(task, elsewhere, EXPERT.path(task, replay(task, elsewhere)))["success"]


def test_where_nothing_can_undo_a_change_it_reaches_the_goals_and_says_it_cannot_solve():
    task = task_of("send_message/alice-chen-on-my-way")
    phone, wrong = replay(task, []), []

    def do(action: Action) -> None:
        assert phone.execute(action).valid
        wrong.append(action)

    do(Action("Launch", {"app": "Telegram"}))
    for label in ("Mom", "Message box"):
        do(Action("Tap", {"element": centre(phone.screen().elements[label])}))
    do(Action("Type", {"text": "hi"}))
    do(Action("Tap", {"element": centre(phone.screen().elements["Send"])}))  # sent to Mom: nothing unsends it
    path = EXPERT.path(task, phone)
    assert not path[0].solves and path[-1].action.type == "finish"
    info = play(task, wrong, path)
    assert info["checks"] == {"message_sent": True, "nothing_else_changed": False}


def test_pop_ups_and_slow_apps_cost_exactly_their_steps():
    """On its perturbed phone a task takes its own shortest path plus one step per pop-up dismissed or Wait; renamed
    buttons and shuffled layouts change where things are, and the paths stay as short."""
    detours = 0
    for task in PERTURBED_TASKS:
        kind, base = task.id.split("/")[1], task_of(task.id.split("/", 2)[2])
        path, phone, extra = EXPERT.path(task), replay(task, []), 0
        for step in path[:-1]:
            outcome = phone.execute(step.action)
            extra += step.action.type == "Wait" or outcome.element in ("Not now", "Rate now")
        detours += extra
        assert len(path) == EXPERT.shortest(base) + extra, task.id
        assert extra == 0 or kind in ("slow", "popup"), task.id
    assert detours >= 8


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_it_solves_from_states_random_actions_leave(seed):
    """Each training and perturbed task after a few random actions of the kinds an agent takes (any element's tap,
    a swipe, Back, Home, a Launch, a Type): the expert's way from there ends with the goals reached, and with every
    check holding wherever it says it solves."""
    rng = random.Random(seed)
    for task in select_tasks("train")[::3] + PERTURBED_TASKS[seed::3]:
        phone, done = replay(task, []), []
        for _ in range(rng.randint(1, 5)):
            screen = phone.screen()
            options = list(moves(phone, task, screen)) + [
                Action("Tap", {"element": centre(box)}) for box in screen.elements.values()
            ]
            action = rng.choice(options)
            if phone.execute(action).valid:
                done.append(action)
        path = EXPERT.path(task, phone)
        info = play(task, done, path)
        assert info["success"] == path[0].solves, (task.id, done, info["checks"])
        assert all(v for k, v in info["checks"].items() if k != "nothing_else_changed")
