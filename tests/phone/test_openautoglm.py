"""Every value workbench.phone.openautoglm copies from Open-AutoGLM's runtime against the runtime's own package
(``phone-agent``, installed by ``scripts/setup.sh --test``): its prompts, its app table and how its adb code names the
current app and launches one, its client's cut of a reply, and its parser's reading of every reply in data_samples/."""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path

import phone_agent.adb.device as runtime_adb  # noqa: E402  (the runtime's package: a test dependency)
import pytest
from phone_agent.actions.handler import parse_action as runtime_parse
from phone_agent.config import get_system_prompt
from phone_agent.config.apps import APP_PACKAGES as RUNTIME_APPS
from phone_agent.model.client import ModelClient, ModelConfig

from workbench.phone import openautoglm as ours
from workbench.phone.actions import Action, format_action, parse_action
from workbench.phone.conversation import assistant_target
from workbench.phone.sim import SimPhone, app_package
from workbench.phone.state import APPS

SAMPLES = Path(__file__).resolve().parents[2] / "data_samples"


def _runtime_date(prompt: str, lang: str) -> datetime.date:
    """The date the runtime stamped its prompt with at import (its module-level ``datetime.today()``)."""
    first = prompt.split("\n", 1)[0]
    if lang == "en":
        return datetime.datetime.strptime(first, "The current date: %Y-%m-%d, %A").date()
    return datetime.datetime.strptime(first.split(" ")[1], "%Y年%m月%d日").date()


@pytest.mark.parametrize("lang", ["cn", "en"])
def test_the_system_prompts_are_the_runtimes_byte_for_byte(lang):
    theirs = get_system_prompt(lang)
    assert ours.runtime_system_prompt(_runtime_date(theirs, lang), lang) == theirs


def test_the_app_table_is_the_runtimes_in_its_order():
    assert list(ours.APP_PACKAGES.items()) == list(RUNTIME_APPS.items())


def _dumpsys(package: str) -> str:
    return (
        f"  mCurrentFocus=Window{{4c1d u0 {package}/{package}.MainActivity}}\n"
        f"  mFocusedApp=ActivityRecord{{9a2 u0 {package}/.MainActivity t31}}\n"
    )


def test_the_current_app_is_named_as_the_runtimes_adb_code_names_it(monkeypatch):
    """Its own get_current_app reads ``dumpsys window`` (answered here for each screen's package)."""
    phone = SimPhone()
    packages = [app_package(app) for app in APPS] + [phone.focused_package(), "com.example.unknown"]
    for package in packages:
        monkeypatch.setattr(
            runtime_adb.subprocess,
            "run",
            lambda *a, **k: subprocess.CompletedProcess(a[0], 0, stdout=_dumpsys(package), stderr=""),
        )
        assert (
            ours.current_app_name(_dumpsys(package)) == runtime_adb.get_current_app() == ours.current_app_name(package)
        ), package


def test_every_app_of_the_simulated_phone_launches_through_the_runtimes_adb_code(monkeypatch):
    sent = []
    monkeypatch.setattr(runtime_adb.subprocess, "run", lambda cmd, **k: sent.append(cmd))
    for app in APPS:
        assert runtime_adb.launch_app(app, delay=0), f"the runtime cannot launch {app!r}"
        assert sent[-1][sent[-1].index("-p") + 1] == app_package(app) == ours.launch_package(app)
    for unknown in ("Messages", "Music", "Photos", "Browser", "settings"):  # the names the simulator had before
        assert not runtime_adb.launch_app(unknown, delay=0) and ours.launch_package(unknown) is None


REPLIES = [
    assistant_target("I open it.", 'do(action="Launch", app="Settings")'),
    assistant_target("Type.", 'do(action="Type", text="say "hi" \\ ok")'),
    assistant_target("Two lines.", 'do(action="Type", text="first\nsecond")'),
    assistant_target("Done.", 'finish(message="It\'s on, "really"")'),
    assistant_target("", 'do(action="Swipe", start=[500,800], end=[500,300])'),
    '<answer>do(action="Back")',
    'do(action="Home")',
    "no action at all",
    '<answer>finish(message="x")</answer>',
    '<think>a</think><answer>do(action="Tap", element=[1,2])</answer>',
]


@pytest.mark.parametrize("content", REPLIES)
def test_the_client_cuts_a_reply_as_the_runtimes_client_does(content):
    assert ours.runtime_split(content) == ModelClient(ModelConfig())._parse_response(content)


def _runtime_reading(action_text: str):
    """The runtime's parse of an action text as our Action, or None where it raises (it then finishes)."""
    try:
        parsed = runtime_parse(action_text)
    except ValueError:
        return None
    kind = parsed.pop("_metadata")
    if kind == "finish":
        return Action("finish", parsed)
    name = parsed.pop("action")
    return Action(name, {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in parsed.items()})


@pytest.mark.parametrize("content", REPLIES[:5])
def test_our_parser_reads_an_action_as_the_runtimes_parser_does(content):
    _, action_text = ours.runtime_split(content)
    assert parse_action(action_text) == _runtime_reading(action_text)
    assert _runtime_reading(format_action(parse_action(action_text))) == parse_action(action_text)


def _sample_replies():
    """(file:line, the reply to learn) of every agent row in data_samples/."""
    for path in sorted(SAMPLES.rglob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            row = json.loads(line)
            messages = row.get("messages") or []
            if messages and messages[-1].get("role") == "assistant" and "<answer>" in str(messages[-1]["content"]):
                yield f"{path.relative_to(SAMPLES)}:{number}", messages[-1]["content"]


def test_the_runtimes_client_and_parser_read_every_recorded_reply_in_data_samples():
    replies = list(_sample_replies())
    assert len(replies) > 5000  # phone_episodes, phone_episodes_tree, phone_screens, phone_actions_reasoning
    client = ModelClient(ModelConfig())
    unread = []
    for where, content in replies:
        thinking, action_text = client._parse_response(content)
        theirs = _runtime_reading(action_text)
        try:
            mine = parse_action(ours.runtime_split(content)[1])
        except ValueError:
            mine = None
        if theirs is None or theirs != mine:
            unread.append(where)
    assert not unread, f"{len(unread)} replies the runtime does not read as we do, e.g. {unread[:3]}"
