"""Open-AutoGLM's own agent loop (``phone_agent.PhoneAgent.run``, its package installed by ``scripts/setup.sh --test``)
on the simulated phone, against the workbench's runner on the same tasks and the same server:

- the oracle's replies served over HTTP (``PolicyServer``): every task of every split ends the same in both loops
  (success, how it ended, the final state), and the conversation the runtime sent at every step is byte for byte the
  one the workbench's runner sent (``phone.conversation.Conversation``); the perturbed split's tasks the same with
  the expert's replies served (its pop-ups, renamed buttons, shuffled layouts, and slow apps the runtime's Wait
  waits for);
- replies the runtime cannot parse (a reply closed by ``</answer>``, as the workbench's targets were before) end both
  loops at once without success.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from workbench.agent import ExpertPolicy, OraclePolicy, ServedPolicy, run_episodes, sim_devices
from workbench.agent.openautoglm import run_in_runtime
from workbench.agent.policy_server import PolicyServer
from workbench.phone.expert import Expert
from workbench.phone.openautoglm import history_reply
from workbench.phone.tasks import PERTURBED_TASKS, TASKS
from workbench.serve.remote import ModelReply, ServerClient

SIZE = (112, 252)  # the screenshots' size (cheap to encode); gestures travel in pixels of a 1080x2400 touch screen


def _as_sent(messages: list[dict]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def _runner_episode(task, server: PolicyServer, max_steps: int = 100, size=SIZE):
    client = ServerClient(server.base_url.removesuffix("/v1"))
    (episode,) = run_episodes(
        [task],
        ServedPolicy(client, server.policy.name, max_tokens=3000),
        sim_devices(size),
        max_steps=max_steps,
        concurrency=1,
        repeat_limit=0,
    )
    return episode


@pytest.fixture(scope="module")
def oracle_server():
    with PolicyServer(OraclePolicy(TASKS)) as server:
        yield server


def _both_loops_alike(task, server: PolicyServer, steps: int) -> None:
    """The task played by the runtime's loop and by ours on the served replies (the oracle's, the expert's): both
    succeed in ``steps`` steps, end alike on the same final state, and sent the same conversation, byte for byte, at
    every step."""
    server.received.clear()
    theirs = run_in_runtime(task, server.base_url, "oracle", size=SIZE)
    sent_by_runtime = [_as_sent(m) for m in server.received]
    server.received.clear()
    ours = _runner_episode(task, server)
    sent_by_runner = [_as_sent(m) for m in server.received]
    assert theirs.success and ours.success, (task.id, theirs.end, theirs.message, ours.end_reason)
    assert (theirs.end, theirs.checks, theirs.final_app) == (ours.end_reason, ours.checks, ours.final_app), task.id
    assert len(sent_by_runtime) == len(ours.steps) == steps
    # byte for byte at every step: system prompt, task turn, screenshots, current_app names, the history
    assert sent_by_runtime == sent_by_runner, task.id
    # and the runtime's own context at the end: the last request, its screenshot dropped, then the last reply
    last = json.loads(sent_by_runner[-1])
    answered = {"role": "user", "content": [p for p in last[-1]["content"] if p["type"] == "text"]}
    assert theirs.context == last[:-1] + [
        answered,
        {"role": "assistant", "content": history_reply(server.policy([last])[0].content)},
    ]


@pytest.mark.parametrize("split", list(dict.fromkeys(t.split for t in TASKS)))
def test_every_task_of_every_split_ends_alike_in_both_loops_byte_for_byte(split, oracle_server):
    tasks = [t for t in TASKS if t.split == split]
    assert len(tasks) >= 15
    for task in tasks:
        _both_loops_alike(task, oracle_server, len(task.oracle()))


def test_every_perturbed_task_ends_alike_in_both_loops_with_the_experts_replies():
    """The perturbed split (pop-ups to dismiss, slow apps to wait for, renamed buttons, shuffled layouts) in
    Open-AutoGLM's own loop: the expert, served, solves each task there as in our runner, in its shortest path's
    steps; a slow app loads only when the runtime's Wait has waited (on the phone's clock)."""
    expert = Expert()
    with PolicyServer(ExpertPolicy(PERTURBED_TASKS, expert)) as server:
        for task in PERTURBED_TASKS:
            _both_loops_alike(task, server, expert.shortest(task))
    waits = [
        s
        for t in PERTURBED_TASKS
        if t.id.startswith("perturbed/slow/")
        for s in expert.path(t)
        if s.action.type == "Wait"
    ]
    assert len(waits) >= 5


def test_a_reply_the_runtime_cannot_parse_ends_both_loops_without_success():
    """The replies the workbench trained before (closed by </answer>): the runtime's parser rejects them and
    finishes; our runner reads them as the runtime does."""
    task = next(t for t in TASKS if t.id == "toggle_setting/wifi-off")

    class ClosedTags:
        name = "closed-tags"

        def __call__(self, conversations):
            return [
                ModelReply('<think>Wi-Fi is a setting.</think><answer>do(action="Launch", app="Settings")</answer>')
                for _ in conversations
            ]

    with PolicyServer(ClosedTags()) as server:
        theirs = run_in_runtime(task, server.base_url, "closed-tags", size=SIZE)
        ours = _runner_episode(task, server, size=SIZE)
    assert (theirs.end, theirs.success, theirs.actions) == ("parse_failure", False, [])
    assert (ours.end_reason, ours.success, len(ours.steps)) == ("parse_failure", False, 1)
    assert theirs.checks == ours.checks and not all(ours.checks.values())


def test_launch_names_outside_the_runtimes_table_open_nothing_in_either_loop():
    task = next(t for t in TASKS if t.id == "toggle_setting/wifi-off")
    replies = iter(
        [
            '<think>Open it.</think>\n<answer>do(action="Launch", app="settings")',
            '<think>Done.</think>\n<answer>finish(message="done")',
        ]
    )

    class Scripted:
        name = "scripted"

        def __call__(self, conversations):
            return [ModelReply(next(replies)) for _ in conversations]

    with PolicyServer(Scripted()) as server:
        theirs = run_in_runtime(task, server.base_url, "scripted", size=SIZE)
        assert theirs.final_app == "System Home" and theirs.end == "finish" and not theirs.success
        replies = iter(
            [
                '<think>Open it.</think>\n<answer>do(action="Launch", app="settings")',
                '<think>Done.</think>\n<answer>finish(message="done")',
            ]
        )
        ours = _runner_episode(task, server, size=SIZE)
    assert ours.final_app == "System Home" and ours.end_reason == "finish" and not ours.success
    assert not ours.steps[0].valid and "App not found" in ours.steps[0].effect


@pytest.mark.slow
def test_a_trained_screenshot_run_served_by_our_server_ends_alike_in_both_loops(tmp_path):
    """tiny-glm4v-agent trained briefly on the runtime-format episode rows, served by `workbench serve --reasoning
    inline`: on tasks of each split, Open-AutoGLM's loop and ours (asking the runtime's sampling) end alike, and the
    trained model does act (its replies parse where the untrained model's do not).
    `python -m workbench.bench.agent runtime --model RUN/model` prints the same for the whole recipe's run."""
    from workbench.agent.openautoglm import compare_loops
    from workbench.config import load_config
    from workbench.phone.tasks import select_tasks
    from workbench.serve import start_server
    from workbench.training import train

    from ..conftest import SAMPLES, tiny_run_overrides

    cfg = load_config(
        None,
        tiny_run_overrides(
            tmp_path / "runs",
            **{
                "model.source": "tiny-glm4v-agent",
                "lora.enabled": False,
                "data.max_length": 1024,
                "data.train": str(SAMPLES / "phone_episodes" / "train.jsonl"),
                "schedule.max_steps": 200,
                "schedule.micro_batch_size": 8,
                "schedule.learning_rate": 3e-3,
                "output.run_name": "screens",
            },
        ),
    )
    model = train(cfg).run_dir / "model"
    tasks = select_tasks("train")[:4] + select_tasks("heldout")[:2] + select_tasks("combos")[:2]
    with start_server(str(model), model_id="agent", reasoning="inline", max_context=2048) as srv:
        pairs = compare_loops(tasks, srv.base_url, "agent", max_steps=6, size=SIZE, max_tokens=64)
    assert [p.task for p in pairs if not p.same] == [], [(p.task, p.runtime.end, p.runner.end_reason) for p in pairs]
    assert sum(p.runner.end_reason != "parse_failure" for p in pairs) >= 4  # it acts: its replies parse


RUNTIME_TEXTS = [
    'do(action="Tap", element=[382,312])',
    'do(action="Tap", element=[617,312], message="pay")',
    'do(action="Tap", element=[1382,312])',
    'do(action="Tap", element=[852,312,7])',
    'do(action="Tap")',
    'do(action="Double Tap", element=[147,312])',
    'do(action="Long Press", element=[500,500])',
    'do(action="Swipe", start=[800,600], end=[200,600])',
    'do(action="Swipe", start=[800,600])',
    'do(action="Type", text="say "hi" \\\\ ok")',
    'do(action="Type_Name", text="Li Na")',
    'do(action = "Type", text="x")',
    'do(action="Launch", app="Settings")',
    'do(action="Launch", app="settings")',
    'do(action="Launch")',
    'do(action="Back")',
    'do(action="Home", extra=1)',
    'do(action="Wait", duration="0 seconds")',
    'do(action="Note", message="True")',
    'do(action="Interact")',
    'do(action="Take_over", message="log in")',
    'do(action="Fly")',
    'done(action="Back")',
    'do(action="Tap", element=[1,2]) and more',
    "do(action=name)",
    'finish(message="done")',
    "finish(message='done')",
    "finish(done)",
    "tap the wifi",
    "",
    # on the edges of the home screen's Contacts icon (grid box 285..480 x 260..365): the runtime's pixels
    # (int(v / 1000 * 1080) = 307 for x 285) lie inside it, so the tap opens Contacts; one grid unit off misses it
    'do(action="Tap", element=[285,300])',
    'do(action="Double Tap", element=[285,300])',
]


@pytest.mark.parametrize("text", RUNTIME_TEXTS)
def test_our_reading_of_an_action_is_what_the_runtimes_parser_and_handler_do(text):
    """``phone.openautoglm.runtime_action`` (the episode runner's reading) against Open-AutoGLM's own parser and
    ActionHandler carrying the text out on a simulated phone through its device factory."""
    from phone_agent.actions.handler import ActionHandler, parse_action

    from workbench.agent.openautoglm import _runtime_on
    from workbench.phone.actions import ActionSyntaxError
    from workbench.phone.openautoglm import runtime_action
    from workbench.phone.sim import SimPhone

    def seen(phone) -> tuple:  # what a step leaves on the phone
        return (
            phone.app,
            phone.home_page,
            [(p.kind, p.arg) for p in phone.stack],
            phone.focus,
            dict(phone.drafts),
            phone.state,
        )

    try:
        ours = runtime_action(text)
    except ActionSyntaxError:
        ours = "raises"
    theirs_phone, ours_phone = SimPhone(), SimPhone()
    with _runtime_on(theirs_phone), contextlib.redirect_stdout(io.StringIO()):
        try:
            parsed = parse_action(text)
        except ValueError:
            theirs = "raises"
        else:
            result = ActionHandler(confirmation_callback=lambda m: True, takeover_callback=lambda m: None).execute(
                parsed, 1080, 2400
            )
            theirs = ("finish", parsed["message"]) if result.should_finish else "goes on"
    if theirs == "raises" or ours == "raises":
        assert ours == theirs
    elif theirs != "goes on":
        assert (ours.type, ours.args["message"]) == theirs
    else:  # the same step on the phone: ours performs its action (or nothing), the runtime's handler did its own
        assert ours is None or ours.type != "finish"
        if ours is not None:
            ours_phone.execute(ours)
        assert seen(ours_phone) == seen(theirs_phone)
