"""The episode loop with policies whose replies are known: the turns it builds, the ways an episode ends, concurrent
episodes, the metrics and the episodes on disk."""

from __future__ import annotations

import base64
import copy
import io
import json

import pytest
from PIL import Image

from workbench.agent import OraclePolicy, run_episodes, sim_devices, summarize_episodes
from workbench.agent.metrics import false_finish, quoted_line, reached_apps
from workbench.agent.policy import first_instruction
from workbench.agent.store import EpisodeWriter, read_episodes
from workbench.phone.actions import parse_action, split_answer
from workbench.phone.conversation import runtime_problems
from workbench.phone.tasks import TASKS, select_tasks
from workbench.phone.uitree import element_line_at
from workbench.serve.remote import ModelReply

SMALL = sim_devices((112, 252))


class Scripted:
    """Answers every conversation with the next reply of its script; records each batch it was sent."""

    name = "scripted"

    def __init__(self, *script: ModelReply | str):
        self.script = [ModelReply(s) if isinstance(s, str) else s for s in script]
        self.batches: list[list[list[dict]]] = []

    def __call__(self, conversations):
        self.batches.append([json.loads(json.dumps(c)) for c in conversations])
        done = sum(1 for m in conversations[0] if m["role"] == "assistant")
        return [self.script[min(done, len(self.script) - 1)] for _ in conversations]


def _watched_oracle(tasks, seen: list):
    """The tasks' oracle, keeping a copy of every conversation it is sent in ``seen``."""
    oracle = OraclePolicy(tasks)

    def watching(conversations):
        seen.extend(json.loads(json.dumps(c)) for c in conversations)
        return oracle(conversations)

    watching.name = "oracle"
    return watching


def test_oracle_episodes_succeed_in_task_order_and_every_turn_is_in_the_runtime_format():
    tasks = select_tasks("send_message,open_app")[:5]
    seen = []
    watching = _watched_oracle(tasks, seen)

    episodes = run_episodes(tasks, watching, SMALL, concurrency=2)
    assert [e.task for e in episodes] == [t.id for t in tasks]
    assert all(e.success and e.end_reason == "finish" for e in episodes)
    for messages in seen:  # what the model is sent: the runtime format with the latest screenshot only
        images = [
            p["image_url"]["url"]
            for m in messages
            if isinstance(m["content"], list)
            for p in m["content"]
            if p["type"] == "image_url"
        ]
        assert len(images) == 1 and images[0] == messages[-1]["content"][0]["image_url"]["url"]
        png = base64.b64decode(images[0].removeprefix("data:image/png;base64,"))
        assert Image.open(io.BytesIO(png)).size == (112, 252)
        assert (
            runtime_problems(
                messages + [{"role": "assistant", "content": '<think>x</think>\n<answer>do(action="Back")'}]
            )
            == []
        )
    long = next(e for e in episodes if e.template == "send_message")
    assert [s.action.split(",")[0] for s in long.steps][:3] == [
        'do(action="Launch"',
        'do(action="Tap"',
        'do(action="Tap"',
    ]
    assert long.steps[0].current_app == "System Home" and long.steps[1].current_app == "Contacts"
    assert long.steps[1].element in {"Alice Chen", "Dana Lee", "Emma Wood", "Ivan Petrov", "Li Na"}
    assert long.steps[1].target_box is not None


def test_the_oracle_quotes_the_line_of_the_element_it_taps_when_it_reads_the_screen_as_text():
    """On a ui_tree screen the oracle's reasoning ends with the tapped element's line copied from the tree (the
    innermost element holding the point); other actions, and the same episodes shown as screenshots, quote
    nothing."""
    tasks = select_tasks("favorite_contact") + select_tasks("toggle_setting")[:2]
    quoted = 0
    for observation in ("ui_tree", "screenshot"):
        for episode in run_episodes(tasks, OraclePolicy(tasks), SMALL, observation=observation):
            for step in episode.steps:
                split = split_answer(step.content, step.reasoning)
                point = parse_action(split.answer).point()
                if observation == "ui_tree" and point is not None:
                    line = split.reasoning.split("\n")[-1]
                    assert line in step.ui_tree.split("\n") and line == element_line_at(step.ui_tree, point), (
                        step.content
                    )
                    assert line.endswith(f" tap [{point[0]},{point[1]}]") or f" tap [{point[0]},{point[1]}] " in line
                    quoted += 1
                else:
                    assert "\n" not in split.reasoning, step.content
    assert quoted >= len(tasks)  # every task taps at least once


def test_a_reply_that_does_not_parse_ends_the_episode_as_a_parse_failure():
    policy = Scripted('<think>Open it</think>\n<answer>do(action="Launch", app="Settings")', "I think I am done")
    [ep] = run_episodes([TASKS[0]], policy, SMALL)
    assert ep.end_reason == "parse_failure" and ep.success is False
    assert ep.checks == {
        "app_open": True,
        "nothing_else_changed": True,
    }  # the goal held, but a parse failure is no success
    assert ep.steps[-1].action == 'finish(message="I think I am done")'
    assert "neither do(...) nor finish(...)" in ep.steps[-1].parse_error
    assert ep.message == "I think I am done"
    # the reply is stored back in the conversation as the runtime stores it
    assert (
        policy.batches[1][0][2]["content"]
        == '<think><think>Open it</think>\n<answer></think><answer>do(action="Launch", app="Settings")</answer>'
    )


def test_step_limit_invalid_actions_and_server_failures():
    [ep] = run_episodes([TASKS[0]], Scripted('do(action="Tap", element=[500,990])'), SMALL, max_steps=3)
    assert ep.end_reason == "step_limit" and len(ep.steps) == 3 and not ep.success
    assert [s.valid for s in ep.steps] == [False, False, False] and "hit no element" in ep.steps[0].effect
    overflow = ModelReply(error="HTTP 400: maximum context length", context_overflow=True, prompt_tokens=30000)
    [ep] = run_episodes(
        [TASKS[0]], Scripted(ModelReply('do(action="Wait", duration="1 seconds")', prompt_tokens=900), overflow), SMALL
    )
    assert ep.end_reason == "context_overflow" and ep.success is False and ep.prompt_tokens_last == 30000
    assert ep.steps[-1].action is None and ep.steps[-1].error.startswith("HTTP 400")
    [ep] = run_episodes([TASKS[0]], Scripted(ModelReply(error="ConnectError: refused")), SMALL)
    assert ep.end_reason == "error" and ep.message == "ConnectError: refused"
    with pytest.raises(ValueError, match="max_steps must be at least 1"):
        run_episodes([TASKS[0]], Scripted("x"), SMALL, max_steps=0)


def test_the_same_action_on_the_same_screen_three_times_in_a_row_ends_the_episode_as_repeated():
    wait = 'do(action="Wait", duration="1 seconds")'
    [ep] = run_episodes([TASKS[0]], Scripted(wait), SMALL)
    assert ep.end_reason == "repeated" and len(ep.steps) == 3 and ep.success is False
    assert ep.message == 'do(action="Wait", duration="1 seconds") on the same screen 3 times in a row'
    [ep] = run_episodes([TASKS[0]], Scripted(wait), SMALL, max_steps=6, repeat_limit=0)  # 0: never
    assert ep.end_reason == "step_limit" and len(ep.steps) == 6
    # the same tap on a toggle changes the screen each time (Wi-Fi on, off, on): no loop
    toggle = Scripted('do(action="Launch", app="Settings")', 'do(action="Tap", element=[500,192])')
    [ep] = run_episodes([TASKS[0]], toggle, SMALL, max_steps=6)
    assert ep.end_reason == "step_limit" and [s.element for s in ep.steps[1:]] == ["Wi-Fi"] * 5
    # a different action on the same screen starts the count again
    [ep] = run_episodes([TASKS[0]], Scripted(wait, wait, 'do(action="Home")', wait, wait, wait), SMALL)
    assert ep.end_reason == "repeated" and len(ep.steps) == 6
    with pytest.raises(ValueError, match="repeat_limit must be 0 .never. or at least 2"):
        run_episodes([TASKS[0]], Scripted(wait), SMALL, repeat_limit=1)


def test_concurrent_episodes_are_batched_and_refilled():
    tasks = select_tasks("open_app")[:7]
    policy = Scripted('finish(message="done")')
    episodes = run_episodes(tasks, policy, SMALL, concurrency=3)
    assert [len(b) for b in policy.batches] == [3, 3, 1]
    assert [first_instruction(c) for b in policy.batches for c in b] == [t.instruction for t in tasks]
    assert [e.task for e in episodes] == [t.id for t in tasks]


def test_metrics_count_what_happened():
    tasks = select_tasks("open_app")[:2]
    good = run_episodes(tasks[:1], OraclePolicy(tasks), SMALL)
    bad = run_episodes(tasks[1:], Scripted('do(action="Tap", element=[500,990])', "nonsense"), SMALL)
    m = summarize_episodes(good + bad)
    assert m["n"] == 2 and m["success_rate"] == 0.5 and m["parse_failure_rate"] == 0.5
    # the oracle's one Tap is valid, the scripted Tap on nothing is not; finish is no action on the phone
    assert [s.action.split("(")[0] for s in good[0].steps] == ["do", "finish"]
    assert m["invalid_action_rate"] == 0.5
    assert m["mean_steps_success"] == len(good[0].steps) and m["end_reasons"] == {"finish": 1, "parse_failure": 1}
    assert m["by_template"] == {"open_app": {"n": 2, "success_rate": 0.5}}
    assert m["by_split"] == {"train": {"n": 2, "success_rate": 0.5}}
    combos = select_tasks("combos")[:1]
    assert summarize_episodes(run_episodes(combos, OraclePolicy(combos), SMALL) + good)["by_split"] == {
        "combos": {"n": 1, "success_rate": 1.0},
        "train": {"n": 1, "success_rate": 1.0},
    }
    assert m["prompt_tokens_last"] is None
    # a tap off the screen parses in the runtime and is executed to no effect: an invalid action, of type Tap
    off = summarize_episodes(
        run_episodes(tasks[:1], Scripted('do(action="Tap", element=[1200,5])', 'finish(message="x")'), SMALL)
    )
    assert off["action_types"] == {"Tap": 1} and off["invalid_action_rate"] == 1.0


def test_loop_and_false_finish_rates_and_steps_to_success_count_each_ending_once():
    """Four episodes of one task: the oracle's (success in its steps), a loop (the same tap on nothing three times:
    ended by the repeat rule), a false finish (finish at once: a check fails) and a reply that does not parse
    (ended, no success, but not a finish the agent claimed). A real phone's episode is not judged: no false finish
    either way."""
    task = select_tasks("toggle_setting/wifi-off")
    good = run_episodes(task, OraclePolicy(task), SMALL)
    loop = run_episodes(task, Scripted('do(action="Tap", element=[500,990])'), SMALL)
    false = run_episodes(task, Scripted('finish(message="Wi-Fi is off")'), SMALL)
    unparsed = run_episodes(task, Scripted("nonsense"), SMALL)
    m = summarize_episodes(good + loop + false + unparsed)
    assert [e.end_reason for e in good + loop + false + unparsed] == ["finish", "repeated", "finish", "parse_failure"]
    assert m["loop_rate"] == 0.25 and m["false_finish_rate"] == 0.25 and m["success_rate"] == 0.25
    assert m["mean_steps_success"] == len(task[0].oracle()) == 3 and m["mean_steps"] == (3 + 3 + 1 + 1) / 4
    unjudged = copy.deepcopy(false[0])
    unjudged.checks, unjudged.success = None, None  # as on a real phone
    assert false_finish(unjudged) is None and summarize_episodes([unjudged])["false_finish_rate"] is None
    assert summarize_episodes(loop * 3 + good)["loop_rate"] == 0.75


def test_episodes_round_trip_through_their_folder(tmp_path):
    episodes = run_episodes(TASKS[:2], OraclePolicy(TASKS[:2]), SMALL)
    writer = EpisodeWriter(tmp_path / "eps")
    for ep in episodes:
        writer.write(ep)
    writer.close({"metrics": summarize_episodes(episodes)})
    back = read_episodes(tmp_path / "eps")
    assert [e.to_dict() for e in back] == [e.to_dict() for e in episodes]
    first = back[0].steps[0]
    assert Image.open(tmp_path / "eps" / first.screenshot).size == (112, 252)
    assert (tmp_path / "eps" / back[0].final_screenshot).is_file()
    (tmp_path / "eps" / "episodes.jsonl").write_text("{broken\n")
    with pytest.raises(ValueError, match="episodes.jsonl:1: not an episode"):
        read_episodes(tmp_path / "eps")


def test_an_in_process_model_plugs_into_the_same_loop():
    from workbench.agent import InProcessPolicy
    from workbench.models import load_for_inference

    tiny = load_for_inference("tiny-glm4v")
    calls = []

    class Counting(InProcessPolicy):
        def __call__(self, conversations):
            calls.append(len(conversations))
            return super().__call__(conversations)

    policy = Counting(tiny.model, tiny.tokenizer, tiny.processor, name="tiny", max_tokens=2)
    episodes = run_episodes(select_tasks("open_app")[:2], policy, SMALL, max_steps=3, concurrency=2)
    assert calls == [2] and [e.model for e in episodes] == ["tiny"] * 2  # one batch of both conversations
    for ep in episodes:  # a random model's 2 tokens never parse: each episode ends there, on its first step
        assert ep.end_reason == "parse_failure" and len(ep.steps) == 1 and ep.success is False


def test_an_in_process_policy_batches_by_its_models_device():
    import torch

    from workbench.agent import InProcessPolicy
    from workbench.agent.policy import default_batch_size

    assert default_batch_size("cpu") == 8 and default_batch_size(torch.device("cuda", 0)) == 48
    model = torch.nn.Linear(2, 2)
    assert InProcessPolicy(model, None).batch_size == 8  # on the CPU
    assert InProcessPolicy(model, None, batch_size=3).batch_size == 3  # a caller's choice stands


def test_ui_tree_episodes_show_the_tree_not_the_screenshot_and_keep_both_in_the_steps():
    tasks = select_tasks("send_message")[:1]
    seen = []
    watching = _watched_oracle(tasks, seen)

    (episode,) = run_episodes(tasks, watching, SMALL, observation="ui_tree")
    assert episode.success and episode.observation == "ui_tree"
    assert len(seen) == len(episode.steps)
    for step, messages in zip(episode.steps, seen):
        assert "image_url" not in json.dumps(messages)
        # the latest turn shows the tree of the screen the phone drew at this step; answered turns keep none
        assert (
            step.ui_tree
            and step.ui_tree.count("\n") >= 2
            and step.ui_tree in json.loads(json.dumps(messages[-1]["content"]))
        )
        earlier = [m["content"] for m in messages[1:-1] if m["role"] == "user"]
        assert len(earlier) == step.index - 1 and not any(s.ui_tree in text for s in episode.steps for text in earlier)
    contact = tasks[0].params["contact"]
    assert contact in episode.steps[1].ui_tree and episode.steps[1].png is not None  # replays show both
    with pytest.raises(ValueError, match="observation 'xml'"):
        run_episodes(tasks, watching, SMALL, observation="xml")


def test_reached_apps_counts_episodes_that_got_to_every_app_of_their_task_and_not_those_that_did_nothing():
    [task] = select_tasks("send_message")[:1]
    first, second = task.apps  # Contacts, then Messages
    launch = 'do(action="Launch", app="{}")'.format
    oracle = run_episodes([task], OraclePolicy([task]), SMALL)
    idle = run_episodes([task], Scripted('do(action="Wait", duration="1 seconds")', 'finish(message="done")'), SMALL)
    half = run_episodes([task], Scripted(launch(first), 'finish(message="done")'), SMALL)
    both = run_episodes([task], Scripted(launch(first), launch(second), 'finish(message="done")'), SMALL)
    assert [reached_apps(e) for e in oracle + idle + half + both] == [True, False, False, True]
    assert not both[0].success  # reaching the apps is not finishing the task
    assert summarize_episodes(idle + both)["reached_apps_rate"] == 0.5


def test_quoted_line_rate_counts_taps_whose_reasoning_copies_a_line_of_the_tree_and_not_made_up_ones():
    [task] = select_tasks("send_message")[:1]
    oracle = run_episodes([task], OraclePolicy([task]), SMALL, observation="ui_tree")
    taps = [s for s in oracle[0].steps if quoted_line(s) is not None]
    assert len(taps) >= 3 and summarize_episodes(oracle)["quoted_line_rate"] == 1.0
    launch = '<think>I open Contacts.</think>\n<answer>do(action="Launch", app="Contacts")'
    made_up = (
        f"<think>I open the card.\n{task.params['contact']} [20,150][980,240] tap [500,195]</think>"
        '<answer>do(action="Tap", element=[500,195])'
    )
    unquoted = '<think>I open the card.</think>\n<answer>do(action="Tap", element=[500,195])'
    invented = run_episodes([task], Scripted(launch, made_up, 'finish(message="done")'), SMALL, observation="ui_tree")
    bare = run_episodes([task], Scripted(launch, unquoted, 'finish(message="done")'), SMALL, observation="ui_tree")
    assert summarize_episodes(invented + bare)["quoted_line_rate"] == 0.0
    assert summarize_episodes(oracle + invented)["quoted_line_rate"] == len(taps) / (len(taps) + 1)
    shots = run_episodes([task], OraclePolicy([task]), SMALL)  # screenshots: no tree shown, nothing to quote
    assert summarize_episodes(shots)["quoted_line_rate"] is None


def test_paired_counts_tasks_each_model_alone_finished_and_the_sign_test():
    from workbench.agent import paired
    from workbench.agent.episode import Episode

    def episodes(won: str) -> list[Episode]:  # one episode a task, "1" where it succeeded
        return [
            Episode(f"t{i}", "open_app", "heldout", [], "", "m", "2026-12-01", success=c == "1")
            for i, c in enumerate(won)
        ]

    m = paired(episodes("1100110000"), episodes("1011111110"))
    assert (m["tasks"], m["both"], m["only_a"], m["only_b"], m["neither"]) == (10, 3, 1, 5, 1)
    assert abs(m["sign_test_p"] - 2 * 7 / 64) < 1e-12  # 1 of 6 discordant: P(X <= 1), both tails, n = 6
    assert paired(episodes("0" * 8), episodes("1" * 8))["sign_test_p"] == 2 / 256  # 8 of 8: p < 0.01
    assert paired(episodes("10"), episodes("10"))["sign_test_p"] == 1.0  # no task tells them apart
    with pytest.raises(ValueError, match="different tasks"):
        paired(episodes("10"), episodes("101"))
