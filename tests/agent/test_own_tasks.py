"""Your own tasks on your own phone: a task file of free-form instructions (no template, no simulator checks) runs
with `workbench agent run --device adb:SERIAL` (a stand-in of the ADB server's socket protocol here), each episode
stored for a person to judge; the simulated phone and the oracle refuse such tasks, saying where they run."""

from __future__ import annotations

import json

import pytest

from workbench.agent import AgentError, evaluate_agent
from workbench.agent.store import read_episodes
from workbench.phone.tasks import TaskFileError, load_task_file, select_tasks

from ..phone.adb_standin import AdbStandIn

SERIAL = "R58M123"


@pytest.fixture
def own_tasks(tmp_path):
    path = tmp_path / "my_app.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(row, ensure_ascii=False)
            for row in [
                {"instruction": "Open MyShop and add the blue mug to the cart"},
                {"instruction": "打开 MyShop，查看我的订单", "id": "orders"},
                {"template": "open_app", "app": "Settings"},
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    return path


def test_a_task_file_takes_instructions_in_the_users_own_words(own_tasks, tmp_path):
    tasks = select_tasks(str(own_tasks))
    assert [t.instruction for t in tasks[:2]] == [
        "Open MyShop and add the blue mug to the cart",
        "打开 MyShop，查看我的订单",
    ]
    assert [t.free_form for t in tasks] == [True, True, False] and tasks[1].id == "orders"
    assert tasks[0].apps == () and tasks[0].spec.goals(None, tasks[0].params) == {}
    with pytest.raises(ValueError, match="no oracle"):
        tasks[0].oracle()
    bad = tmp_path / "bad.jsonl"
    for row, says in [
        ({"instruction": "  "}, "non-empty string"),
        ({"instruction": "x", "app": "y"}, "unknown app"),
        ({"task": "x"}, 'or your own task in words as {"instruction"'),
    ]:
        bad.write_text(json.dumps(row) + "\n")
        with pytest.raises(TaskFileError, match=rf"bad.jsonl:1: .*{said(says)}"):
            load_task_file(bad)


def said(text: str) -> str:
    import re

    return re.escape(text)


def test_the_simulated_phone_and_the_oracle_refuse_free_form_tasks(own_tasks):
    tasks = select_tasks(str(own_tasks))
    for options in ({"server": "http://127.0.0.1:9"}, {"oracle": True}):
        with pytest.raises(
            AgentError, match=r"2 free-form task\(s\).*run them with a model on a phone \(--device adb:"
        ):
            evaluate_agent(tasks, device="sim", progress=False, **options)


def test_they_run_on_a_phone_and_every_episode_is_stored_unjudged(own_tasks, tmp_path):
    """A served model plays each instruction on the phone until it finishes or the step limit; nothing is checked
    (a real phone's state is not read): success is None, the episodes are there to read and judge."""
    from workbench.serve import start_server

    tasks = select_tasks(str(own_tasks))[:2]
    with (
        AdbStandIn(serials=[SERIAL]) as adb,
        start_server("tiny-glm4v", max_context=8192, threads=1, dtype="float32") as srv,
    ):
        report = evaluate_agent(
            tasks,
            server=srv.url,
            device=f"adb:{SERIAL}",
            adb_port=adb.port,
            concurrency=1,
            max_steps=2,
            max_tokens=8,
            out=tmp_path / "episodes",
            progress=False,
        )
        assert "input keyevent KEYCODE_HOME" in adb.shell_commands()  # each episode starts from the home screen
    metrics = report.metrics["tiny-glm4v"]["default"]
    assert metrics["n"] == 2 and metrics["success_rate"] is None and metrics["reached_apps_rate"] is None
    episodes = read_episodes(report.episodes["tiny-glm4v"])
    assert sorted(e.instruction for e in episodes) == sorted(t.instruction for t in tasks)
    assert all(e.success is None and e.checks is None and e.steps for e in episodes)
