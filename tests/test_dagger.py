"""DAgger over a tiny run (``workbench.dagger``, ``workbench agent dagger``): each round the agent plays, the expert labels
every state it was asked at (rows at exactly those states, the expert's replies: not the agent's, not the fixed
oracle's), the next round trains on the run's rows and every round's labels, and each round logs a ``dagger_round``
event that the run state folds."""

from __future__ import annotations

import datetime
import json

import pytest

from workbench.agent import ExpertPolicy
from workbench.agent.store import read_episodes
from workbench.dagger import DAGGER_DIR, run_dagger
from workbench.events import iter_events
from workbench.phone.conversation import assistant_target
from workbench.phone.tasks import select_tasks
from workbench.serve.remote import ModelReply
from workbench.training import train
from workbench.ui.run_state import RunState

from .conftest import AGENT_START_ROWS

SIZE, DATE = (112, 252), datetime.date(2026, 12, 1)
TASKS = "toggle_setting/wifi-off,open_app/settings"


@pytest.fixture(scope="module")
def start_run(agent_start_run, tmp_path_factory):
    """The tiny whole-model agent (conftest), copied: DAgger writes into the run it starts from."""
    import shutil

    run = tmp_path_factory.mktemp("dagger") / "start"
    shutil.copytree(agent_start_run, run)
    return run


def _trained(cfg):
    return train(cfg).run_dir, "finished"


class Careless:
    """Launches Gmail first, then taps nothing twice on the same screen, then hands over to the expert."""

    name = "careless"

    def __init__(self, tasks):
        self.expert = ExpertPolicy(tasks)

    def __call__(self, conversations):
        out = []
        for messages in conversations:
            done = sum(m["role"] == "assistant" for m in messages)
            wrong = ['do(action="Launch", app="Gmail")', 'do(action="Tap", element=[500,990])'][min(done, 1)]
            out.append(ModelReply(assistant_target("Hm.", wrong)) if done < 3 else self.expert([messages])[0])
        return out


def _rows(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_round_labels_exactly_the_states_visited_and_the_next_round_trains_on_them(start_run):
    tasks = select_tasks(TASKS)
    results = run_dagger(
        start_run,
        tasks,
        2,
        1,
        _trained,
        observation="screenshot",
        max_steps=6,
        max_tokens=16,
        size=SIZE,
        date=DATE,
        progress=False,
        policy_for=lambda model: Careless(tasks),
    )
    dagger = start_run / DAGGER_DIR
    expert, oracle = ExpertPolicy(tasks), {t.id: t.oracle() for t in tasks}
    for r in results:
        episodes = read_episodes(dagger / f"round-{r.round}" / "episodes" / "played")
        labels = _rows(r.labels)
        # one row at each state the agent was asked at: its conversation there, the expert's reply
        assert sorted((row["meta"]["task"], row["meta"]["step"]) for row in labels) == sorted(
            (e.task, s.index) for e in episodes for s in e.steps
        )
        for row in labels:
            context, target = row["messages"][:-1], row["messages"][-1]["content"]
            assert target == expert([context])[0].content
            step = next(
                s for e in episodes if e.task == row["meta"]["task"] for s in e.steps if s.index == row["meta"]["step"]
            )
            assert target != assistant_target(step.reasoning, step.answer) or row["meta"]["kind"] is None
        off_oracle = [
            row
            for row in labels
            if row["meta"]["step"] <= len(oracle[row["meta"]["task"]])
            and row["messages"][-1]["content"].split("<answer>")[1]
            != _action_text(oracle[row["meta"]["task"]][row["meta"]["step"] - 1].action)
        ]
        assert len(off_oracle) >= 2  # where the agent's own way left the oracle's, the labels are the expert's
        assert r.event.kinds == {"loop": 2, "false_finish": 0, "other": 4} and r.event.states == len(labels)
    # round 2 trained on the run's rows and both rounds' labels, round 1's rows among them as they were written
    one, two = results
    start_rows, merged = AGENT_START_ROWS, _rows(two.train)
    assert len(merged) == start_rows + len(_rows(one.labels)) + len(_rows(two.labels)) == two.event.rows
    first = _rows(one.labels)
    assert [r["messages"][-1] for r in first] == [
        r["messages"][-1] for r in merged[start_rows : start_rows + len(first)]
    ]
    started = next(e for e in iter_events(two.run_dir / "events.jsonl") if getattr(e, "type", "") == "run_started")
    assert started.data["train"]["rows"] == len(merged) and started.config["data"]["train"] == str(two.train)
    assert started.config["model"]["source"] == str(one.run_dir / "model")  # from where round 1 left it
    events = [e for e in iter_events(dagger / "events.jsonl")]
    assert [e.round for e in events] == [1, 2] and events[1].model == str(one.run_dir / "model")
    state = RunState()
    state.apply(events)
    assert [r["round"] for r in state.dagger_rounds] == [1, 2] and state.dagger_rounds[0]["states"] == len(first)
    with pytest.raises(Exception, match="holds an earlier DAgger"):
        run_dagger(start_run, tasks, 1, 1, _trained)


def _action_text(action):
    from workbench.phone.actions import format_action

    return format_action(action)


@pytest.mark.slow
def test_the_cli_plays_the_runs_own_model_in_process(start_run, tmp_path):
    """``workbench agent dagger`` end to end: the tiny model itself plays (its replies do not parse yet: one state
    a task, labelled), one round trains."""
    import shutil

    from workbench.cli.main import main

    run = tmp_path / "run"
    shutil.copytree(start_run, run, ignore=shutil.ignore_patterns(DAGGER_DIR))
    assert (
        main(
            [
                "agent",
                "dagger",
                "--run",
                str(run),
                "--tasks",
                TASKS,
                "--rounds",
                "1",
                "--steps",
                "1",
                "--max-steps",
                "3",
                "--max-tokens",
                "8",
                "--size",
                "112x252",
                "--date",
                "2026-12-01",
            ]
        )
        == 0
    )
    labels = _rows(run / DAGGER_DIR / "round-1" / "labels" / "labels.jsonl")
    assert len(labels) == 2 and {row["meta"]["step"] for row in labels} == {1}


@pytest.mark.slow
def test_headroom_plays_the_runs_model_k_times_and_writes_its_table(start_run, tmp_path, capsys):
    """``workbench agent headroom`` on the tiny run: k sampled runs and a greedy one stored, headroom.json per task (the
    untrained model's replies do not parse: pass@1 and pass@k 0, nothing to sharpen)."""
    from workbench.cli.main import main

    out = tmp_path / "headroom"
    assert (
        main(
            [
                "agent",
                "headroom",
                "--run",
                str(start_run),
                "--tasks",
                TASKS,
                "-k",
                "2",
                "--max-steps",
                "2",
                "--max-tokens",
                "8",
                "--size",
                "112x252",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    record = json.loads((out / "headroom.json").read_text())
    assert record["summary"] == {
        "tasks": 2,
        "k": 2,
        "greedy_success": 0.0,
        "pass_1": 0.0,
        "pass_k": 0.0,
        "sharpenable": 0,
        "never": 2,
        "always": 0,
    }
    assert record["settings"]["observation"] == "screenshot" and len(record["tasks"]) == 2
    assert sorted(p.name for p in out.iterdir()) == ["greedy", "headroom.json", "sample-1", "sample-2"]
    assert "RL can sharpen 0" in capsys.readouterr().out
