"""Phones of new names: none of the default phone's words (held-out names included) nor a held-out message's or
query's, the same shape as the default phone, deterministic, and tasks on them solved by their oracles and judged
on their own catalogues."""

from __future__ import annotations

import random

import pytest

from workbench.agent import OraclePolicy
from workbench.phone.actions import format_action
from workbench.phone.conversation import assistant_target
from workbench.phone.env import PhoneEnv
from workbench.phone.fresh import STATEFUL_APPS, _words, fresh_phone
from workbench.phone.sim import SimPhone
from workbench.phone.state import APPS, CONTACTS, DEFAULT_CONTENTS, PHOTOS, SONGS
from workbench.phone.tasks import make_task, more_training_tasks, select_tasks


def test_a_fresh_phone_has_the_default_shape_and_only_new_words():
    phone = fresh_phone(random.Random(7))
    assert phone == fresh_phone(random.Random(7)) and phone != fresh_phone(random.Random(8))
    d = DEFAULT_CONTENTS
    assert [len(phone.contacts), len(phone.songs), len(phone.photos), len(phone.apps)] == [
        len(d.contacts),
        len(d.songs),
        len(d.photos),
        len(d.apps),
    ]
    assert list(phone.contacts) == sorted(phone.contacts) and len(set(phone.contacts)) == len(phone.contacts)
    assert len({s.split(" - ")[0] for s in phone.songs}) == len(phone.songs)  # a title names one song
    assert set(STATEFUL_APPS) <= set(phone.apps) and len(set(phone.apps)) == len(phone.apps)
    assert "Mom" in phone.contacts and phone.favorites == ("Mom",)
    assert {who for who, _ in phone.threads} <= set(phone.contacts)
    new = (
        [c for c in phone.contacts if c != "Mom"]
        + list(phone.songs)
        + list(phone.photos)
        + [a for a in phone.apps if a not in STATEFUL_APPS]
    )
    default_words = _words(CONTACTS) | _words(SONGS) | _words(PHOTOS) | _words(APPS)
    held = select_tasks("heldout")
    held_words = _words(v for t in held for k, v in t.params.items() if k in ("text", "query"))
    assert not _words(new) & (default_words | held_words)


def test_a_task_is_validated_against_its_own_phone():
    phone = fresh_phone(random.Random(3))
    task = make_task("send_message", {"contact": phone.contacts[1], "text": "Hi"}, phone=phone)
    assert task.initial_state().contents == phone
    with pytest.raises(ValueError, match="unknown contact 'Alice Chen'"):
        make_task("send_message", {"contact": "Alice Chen", "text": "Hi"}, phone=phone)
    with pytest.raises(ValueError, match="Mom is a favorite already"):
        make_task("favorite_contact", {"contact": "Mom"}, phone=phone)


def test_more_training_tasks_on_fresh_phones_name_their_phones_and_their_oracles_solve_them():
    default = more_training_tasks(40, seed=5)
    mixed = more_training_tasks(40, seed=5, fresh_phones=0.75)
    assert {t.phone for t in default} == {DEFAULT_CONTENTS}  # the share 0 is the earlier set (screenshot data)
    fresh = [t for t in mixed if t.phone != DEFAULT_CONTENTS]
    assert 20 <= len(fresh) <= 38 and len({t.phone for t in fresh}) == len(fresh)  # a phone of its own each
    for t in fresh:
        named = [v for k, v in t.params.items() if k in ("contact", "song", "photo", "app")]
        catalogue = set(t.phone.contacts) | set(t.phone.songs) | set(t.phone.photos) | set(t.phone.apps)
        assert set(named) <= catalogue
    OraclePolicy(mixed)  # no two tasks share an instruction with different solutions
    env = PhoneEnv(SimPhone((112, 252)), max_steps=30)
    for task in fresh:
        env.reset(options={"task": task})
        for step in task.oracle():
            *_, info = env.step(assistant_target(step.thinking, format_action(step.action)))
        assert info["success"], task.id


def test_the_oracle_policy_refuses_one_instruction_for_two_different_tasks():
    phone = fresh_phone(random.Random(11))
    here = make_task("open_app", {"app": "Settings"}, task_id="default")
    there = make_task("open_app", {"app": "Settings"}, task_id="fresh", phone=phone)
    assert here.oracle() != there.oracle()  # the icon sits elsewhere on the fresh launcher
    with pytest.raises(ValueError, match="need different actions"):
        OraclePolicy([here, there])


def test_a_fresh_phone_is_the_same_in_every_process():
    """Its draw may not follow a set's order, which changes with each process's string hashing."""
    import os
    import subprocess
    import sys

    code = "import random; from workbench.phone.fresh import fresh_phone; print(fresh_phone(random.Random(5)))"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outs) == 1
