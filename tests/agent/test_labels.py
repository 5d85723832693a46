"""An agent's states labelled by the expert (``agent.labels``): a row at exactly each state the agent was asked at, the
conversation as it saw it, the expert's reply the target (not the agent's, not the fixed oracle's); the kind of each
step that left a shortest path (a loop, a false finish, another detour) and a preference pair there; both files pass
``workbench data check``, which knows the pairs' format."""

from __future__ import annotations

import json

import pytest

from workbench.agent import ExpertPolicy, run_episodes, sim_devices
from workbench.agent.labels import KINDS, dagger_rows, label_states, preference_rows, write_labels
from workbench.agent.record import ImageFolder
from workbench.data.check import check_file
from workbench.data.formats import preference_sides, row_to_messages
from workbench.phone.conversation import assistant_target
from workbench.phone.tasks import select_tasks
from workbench.serve.remote import ModelReply

SIZE = (112, 252)
WRONG = {
    0: 'do(action="Launch", app="Gmail")',
    1: 'do(action="Tap", element=[500,990])',
    2: 'do(action="Tap", element=[500,990])',
}  # another app; a tap on nothing, twice on the same screen


class Careless:
    """Three wrong steps, then the expert's steps, but a finish at its 6th step whatever the phone shows; every
    conversation it was sent kept in ``seen``."""

    name = "careless"

    def __init__(self, expert: ExpertPolicy):
        self.expert, self.seen = expert, []

    def __call__(self, conversations):
        out = []
        for messages in conversations:
            self.seen.append(json.loads(json.dumps(messages)))
            done = sum(m["role"] == "assistant" for m in messages)
            if done in WRONG:
                out.append(ModelReply(assistant_target("I try this.", WRONG[done])))
            elif done == 5:
                out.append(ModelReply(assistant_target("Done.", 'finish(message="done")')))
            else:
                out.append(self.expert([messages])[0])
        return out


@pytest.fixture(scope="module")
def played():
    tasks = select_tasks("toggle_setting/wifi-off,send_message/alice-chen-on-my-way")
    expert = ExpertPolicy(tasks)
    agent = Careless(expert)
    episodes = run_episodes(tasks, agent, sim_devices(SIZE), max_steps=12, concurrency=1)
    return tasks, expert, agent, episodes


def test_a_label_at_exactly_each_state_the_agent_was_asked_at_with_the_experts_reply(played, tmp_path):
    tasks, expert, agent, episodes = played
    assert [(e.end_reason, e.success, len(e.steps)) for e in episodes] == [("finish", True, 6), ("finish", False, 6)]
    images = ImageFolder(tmp_path / "labels.jsonl")
    states = list(label_states(episodes, expert, images.path))
    assert len(states) == sum(len(e.steps) for e in episodes) == len(agent.seen)
    rows = dagger_rows(states)
    for row, sent, state in zip(rows, agent.seen, states):
        context = row["messages"][:-1]
        # the conversation the agent was sent there: its text, its own replies; the screenshot a file now
        assert [m["role"] for m in context] == [m["role"] for m in sent]
        assert [m["content"] for m in context if m["role"] == "assistant"] == [
            m["content"] for m in sent if m["role"] == "assistant"
        ]
        assert row["messages"][-1] == {"role": "assistant", "content": expert([sent])[0].content, "weight": 1}
        assert row["meta"]["label"] == "expert" and row["meta"]["agent_action"] == state.step.action
    # the labels are neither the agent's own replies nor the fixed oracle's step of that index
    targets = [r["messages"][-1]["content"] for r in rows]
    assert sum(t != s.agent_reply for t, s in zip(targets, states)) >= 6
    oracle = {t.id: t.oracle() for t in tasks}
    assert (
        sum(
            s.step.index <= len(oracle[s.episode.task])
            and oracle[s.episode.task][s.step.index - 1].action != s.expert.action
            for s in states
        )
        >= 4
    )


def test_each_step_off_a_shortest_path_is_a_pair_of_its_kind(played, tmp_path):
    tasks, expert, agent, episodes = played
    states = list(label_states(episodes, expert, ImageFolder(tmp_path / "x.jsonl").path))
    kinds = [[s.kind for s in states if s.episode is e] for e in episodes]
    # Gmail (other), a tap on nothing (other), the same tap on the same screen (loop), then the expert's way;
    # Wi-Fi's finish at step 6 is the expert's too; Alice's comes with the message unsent: a false finish
    assert kinds == [
        ["other", "other", "loop", None, None, None],
        ["other", "other", "loop", None, None, "false_finish"],
    ]
    pairs = preference_rows(states)
    assert [p["meta"]["kind"] for p in pairs] == ["other", "other", "loop"] * 2 + ["false_finish"]
    for pair, state in zip(pairs, [s for s in states if s.kind]):
        assert pair["prompt"] == state.messages and pair["rejected"][0]["content"] == state.agent_reply
        assert pair["chosen"][0]["content"] == state.expert_reply != state.agent_reply
        chosen, rejected = preference_sides(pair)
        assert chosen[:-1] == rejected[:-1]
    assert set(KINDS) == {p["meta"]["kind"] for p in pairs}


def test_labels_and_pairs_pass_the_data_check_which_knows_the_pairs_format(played, tmp_path):
    tasks, expert, agent, episodes = played
    for observation in ("screenshot", "ui_tree"):
        if observation == "ui_tree":
            episodes = run_episodes(tasks, Careless(expert), sim_devices(SIZE), max_steps=12, observation="ui_tree")
        written = write_labels(episodes, expert, tmp_path / observation)
        assert (written.states, written.kinds) == (12, {"loop": 2, "false_finish": 1, "other": 4})
        labels, pairs = check_file(written.labels), check_file(written.pairs)
        assert (labels.problems, labels.rows, labels.forms) == ([], 12, {"open-autoglm": 12})
        assert (pairs.problems, pairs.rows, pairs.forms) == ([], 7, {"preference": 7})
        assert "preference pairs" in pairs.forms_line()
    # a pair is no supervised row; broken pairs say what is wrong, at their line
    pair = json.loads(written.pairs.read_text().splitlines()[0])
    with pytest.raises(ValueError, match="preference pair"):
        row_to_messages(pair)
    broken = [
        {**pair, "rejected": pair["chosen"]},
        {k: v for k, v in pair.items() if k != "rejected"} | {"x": 1},
        {**pair, "chosen": pair["chosen"] * 2},
        {**pair, "prompt": pair["prompt"] + pair["chosen"]},
    ]
    bad = tmp_path / "ui_tree" / "bad.jsonl"
    bad.write_text("".join(json.dumps(b) + "\n" for b in broken))
    problems = check_file(bad).problems
    assert len(problems) == 4 and "the same reply" in problems[0] and ":2:" in problems[1]
    assert "list of one assistant message" in problems[2] and "end with a user turn" in problems[3]


class FirstReply:
    """``first`` as its first reply, then the expert's; every conversation it was sent kept in ``seen``."""

    name = "first-reply"

    def __init__(self, expert: ExpertPolicy, first: str):
        self.expert, self.first, self.seen = expert, first, []

    def __call__(self, conversations):
        out = []
        for messages in conversations:
            self.seen.append(json.loads(json.dumps(messages)))
            done = sum(m["role"] == "assistant" for m in messages)
            out.append(ModelReply(self.first) if done == 0 else self.expert([messages])[0])
        return out


def _labelled(first: str, folder):
    tasks = select_tasks("open_app/settings")
    expert = ExpertPolicy(tasks)
    agent = FirstReply(expert, first)
    episodes = run_episodes(tasks, agent, sim_devices(SIZE), max_steps=6, concurrency=1)
    return agent, episodes, write_labels(episodes, expert, folder)


def test_a_reply_out_of_the_models_form_is_in_the_labels_context_as_the_runtime_kept_it(tmp_path):
    """A reply without its closing </think> (an undertrained agent's): the runtime reads its action and keeps it in
    its history its own way; the later states' rows show the agent exactly that history, and pass the check."""
    agent, episodes, labelled = _labelled('<think>do(action="Launch", app="Gmail")', tmp_path)
    assert episodes[0].success and labelled.states == len(agent.seen) == 3 and labelled.left_out == 0
    rows = [json.loads(line) for line in labelled.labels.read_text().splitlines()]
    for row, sent in zip(rows, agent.seen):
        assert [m["content"] for m in row["messages"][:-1] if m["role"] == "assistant"] == [
            m["content"] for m in sent if m["role"] == "assistant"
        ]
    assert check_file(labelled.labels).problems == []


def test_states_after_a_reply_the_runtime_went_on_from_but_the_grammar_refuses_are_left_out(tmp_path):
    """An action the runtime does not know (it answers "Unknown action" and goes on): the rows after it could join no
    training file, so they are left out, counted; the rest pass the check."""
    agent, episodes, labelled = _labelled('<think>Hm.</think>\n<answer>do(action="Note", message="x")', tmp_path)
    assert episodes[0].success and len(agent.seen) == 3
    assert (labelled.states, labelled.left_out) == (1, 2)
    assert check_file(labelled.labels).problems == [] and check_file(labelled.pairs).problems == []
