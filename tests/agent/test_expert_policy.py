"""The expert as a policy: it rebuilds the phone a conversation shows by replaying the conversation's replies from the
task's start, whoever wrote them, and answers the next step of a shortest path from there: after another agent's
mistakes too (what DAgger labels), shown screenshots or the screen as text."""

from __future__ import annotations

from workbench.agent import ExpertPolicy, run_episodes, sim_devices
from workbench.phone.actions import format_action
from workbench.phone.conversation import Conversation, assistant_target, replied_actions
from workbench.phone.expert import Expert
from workbench.phone.tasks import PERTURBED_TASKS, select_tasks
from workbench.serve.remote import ModelReply

SIZE = (112, 252)


class Careless:
    """Its own ``wrong`` replies first, then the expert's."""

    name = "careless"

    def __init__(self, wrong: list[str], expert: ExpertPolicy):
        self.wrong, self.expert = wrong, expert

    def __call__(self, conversations):
        out = []
        for messages in conversations:
            done = sum(m["role"] == "assistant" for m in messages)
            out.append(ModelReply(self.wrong[done]) if done < len(self.wrong) else self.expert([messages])[0])
        return out


def test_the_expert_finishes_what_another_agent_started_wrong():
    task = select_tasks("toggle_setting/wifi-off")[0]
    wrong = [
        assistant_target("Mail first.", 'do(action="Launch", app="Gmail")'),
        assistant_target("Settings.", 'do(action="Launch", app="Settings")'),
        assistant_target("Bluetooth.", 'do(action="Tap", element=[500,287])'),
    ]  # Bluetooth on: not asked
    expert = ExpertPolicy([task])
    (episode,) = run_episodes([task], Careless(wrong, expert), sim_devices(SIZE), max_steps=20)
    assert episode.success and len(episode.steps) == 3 + 3  # its own three, then Wi-Fi, Bluetooth back, finish
    assert sorted(s.element for s in episode.steps[3:5]) == ["Bluetooth", "Wi-Fi"]


def test_a_conversations_replies_replay_to_the_phone_it_shows():
    task = select_tasks("perturbed/popup/web_search/weather-tomorrow")[0]
    conversation = Conversation(task.instruction)
    expert = Expert()
    for step in expert.path(task)[:3]:
        conversation.observe("x.png", "Chrome")
        conversation.reply(assistant_target(step.thinking, 'do(action="Note", message="x")'))  # nothing done
        conversation.observe("x.png", "Chrome")
        conversation.reply(assistant_target(step.thinking, format_action(step.action)))
    actions = replied_actions(conversation.messages)
    assert actions[0::2] == [None] * 3 and actions[1::2] == [s.action for s in expert.path(task)[:3]]


def test_the_expert_plays_every_perturbed_task_and_reads_the_tree_when_shown_it():
    policy = ExpertPolicy(PERTURBED_TASKS)
    episodes = run_episodes(PERTURBED_TASKS, policy, sim_devices(SIZE), observation="ui_tree")
    assert all(e.success for e in episodes)
    assert [len(e.steps) for e in episodes] == [policy.expert.shortest(t) for t in PERTURBED_TASKS]
    taps = [s for e in episodes for s in e.steps if s.action and s.action.startswith('do(action="Tap"')]
    assert all(s.reasoning.split("\n")[-1] in s.ui_tree for s in taps)  # the element's line quoted, as the oracle
