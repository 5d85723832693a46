"""AutoGLM-Phone's runtime message format: the conversation the agent loop sends the model at every step, as
Open-AutoGLM's ``phone_agent`` builds it (the facts matched here; the wording of the system prompt is ours).

- one system message: the action grammar, stamped with the date (``system_prompt``);
- the first user turn: ``"{task}\\n\\n{screen_info}"`` after the screenshot (an ``image_url`` part); each later
  user turn: ``"** Screen Info **\\n\\n{screen_info}"`` after the new screenshot; ``screen_info`` is the JSON
  ``{"current_app": "<app name>"}``;
- once the model has replied, the screenshot is removed from that user turn, so the model sees only the latest
  screenshot and the text of every earlier turn;
- each reply is stored back as ``<think>{thinking}</think><answer>{action}</answer>``.

``Conversation`` builds it turn by turn (the episode runner, the recorder of training rows); ``runtime_problems``
says how a message list departs from it (the data linter).
"""
from __future__ import annotations

import datetime
import json
import re
from typing import Optional

from .actions import ActionSyntaxError, parse_action, split_answer

LATER_TURN_PREFIX = "** Screen Info **\n\n"
FORMAT_NAME = "autoglm-runtime"  # meta.format of training rows in this format
CONTEXT_TOKENS = 25_480  # Open-AutoGLM's recommended server context (--max-model-len)
MAX_STEPS = 100  # Open-AutoGLM's default step limit

_GRAMMAR = """# Setup
You operate an Android phone to complete the user's task. At each step you see the current screenshot and the name of the app on screen. Look at the screen, reason briefly, then give exactly one action.

# Output format
<think>your short reasoning</think>
<answer>one action</answer>

# Actions (points are [x,y] on a 0-999 grid from the top-left to the bottom-right corner of the screen)
do(action="Launch", app="xxx")    open an app by its name
do(action="Tap", element=[x,y])    tap a point
do(action="Double Tap", element=[x,y])    tap a point twice quickly
do(action="Long Press", element=[x,y])    press and hold a point
do(action="Type", text="xxx")    type into the focused text field (tap the field first; its old text is replaced)
do(action="Swipe", start=[x1,y1], end=[x2,y2])    drag from start to end: scroll a list, turn a page
do(action="Back")    go back one screen
do(action="Home")    go to the home screen
do(action="Wait", duration="x seconds")    wait for the screen to load
finish(message="xxx")    end the task and say what was done

Answer with one action per turn. Check that the last action worked before the next one. Finish only when the task is done."""

_DATE_LINE = re.compile(r"^The current date: (\d{4}-\d{2}-\d{2}), \w+\n")


def system_prompt(date: Optional[datetime.date] = None) -> str:
    """The system message: the date line, then the action grammar."""
    today = date or datetime.date.today()
    return f"The current date: {today:%Y-%m-%d, %A}\n{_GRAMMAR}"


def screen_info(current_app: str) -> str:
    return json.dumps({"current_app": current_app}, ensure_ascii=False)


def assistant_content(thinking: str, action_text: str) -> str:
    return f"<think>{thinking}</think><answer>{action_text}</answer>"


def _image_part(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def _text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text")


def _images_of(message: dict) -> int:
    content = message.get("content")
    return 0 if isinstance(content, str) else sum(1 for p in content or [] if isinstance(p, dict)
                                                   and p.get("type") in ("image_url", "image"))


class Conversation:
    """One episode's messages in the runtime format: ``observe`` a screen, then ``reply``; repeat."""

    def __init__(self, task: str, date: Optional[datetime.date] = None):
        self.task = task
        self.messages: list[dict] = [{"role": "system", "content": system_prompt(date)}]

    @property
    def steps(self) -> int:
        return sum(1 for m in self.messages if m["role"] == "assistant")

    def observe(self, image_url: str, current_app: str) -> list[dict]:
        """Add the user turn showing a screen (``image_url``: a data: URL, or a file path in training rows); the
        messages to send the model."""
        if self.messages[-1]["role"] == "user":
            raise RuntimeError("observe() twice without a reply in between")
        text = (f"{self.task}\n\n" if self.steps == 0 else LATER_TURN_PREFIX) + screen_info(current_app)
        self.messages.append({"role": "user", "content": [_image_part(image_url), {"type": "text", "text": text}]})
        return self.messages

    def reply(self, thinking: str, action_text: str) -> None:
        """Store the model's reply; the screenshot leaves the turn it answered."""
        if self.messages[-1]["role"] != "user":
            raise RuntimeError("reply() without a screen observed first")
        last = self.messages[-1]
        last["content"] = [p for p in last["content"] if p.get("type") == "text"]
        self.messages.append({"role": "assistant", "content": assistant_content(thinking, action_text)})


def runtime_problems(messages: list[dict]) -> list[str]:
    """How ``messages`` (a training row: the conversation up to one reply) departs from the runtime format;
    empty when it conforms."""
    problems = []
    if not messages or messages[0].get("role") != "system" or not _DATE_LINE.match(_text_of(messages[0])):
        problems.append("the first message must be the system prompt starting 'The current date: YYYY-MM-DD, Day'")
        return problems
    turns = messages[1:]
    roles = [m.get("role") for m in turns]
    expected = ["user", "assistant"] * (len(turns) // 2)
    if roles != expected or not turns:
        problems.append(f"after the system prompt, turns must alternate user, assistant and end with the assistant's "
                        f"(got {', '.join(map(str, roles)) or 'none'})")
        return problems
    users, replies = turns[0::2], turns[1::2]
    for i, user in enumerate(users):
        text = _text_of(user)
        if i == 0:
            task, sep, info = text.rpartition("\n\n")
            if not sep or not task.strip():
                problems.append("the first user turn must be '{task}\\n\\n{screen_info}'")
        else:
            if not text.startswith(LATER_TURN_PREFIX):
                problems.append(f"user turn {i + 1} must start with '** Screen Info **' and a blank line")
            info = text[len(LATER_TURN_PREFIX):]
        try:
            parsed = json.loads(info)
            ok = isinstance(parsed, dict) and set(parsed) == {"current_app"} and isinstance(parsed["current_app"], str)
        except ValueError:
            ok = False
        if not ok:
            problems.append(f"user turn {i + 1}: the screen info must be JSON {{\"current_app\": \"<app name>\"}}")
        want = 1 if i == len(users) - 1 else 0
        if _images_of(user) != want:
            problems.append(f"user turn {i + 1} holds {_images_of(user)} image(s); only the latest turn holds the "
                            "screenshot (exactly one)")
    for i, reply in enumerate(replies):
        content = reply.get("content") if isinstance(reply.get("content"), str) else ""
        if not re.fullmatch(r"<think>.*</think><answer>.*</answer>", content, re.S):
            problems.append(f"assistant turn {i + 1} must be <think>...</think><answer>...</answer>")
            continue
        try:
            action = parse_action(split_answer(content).answer)
        except ActionSyntaxError as err:
            problems.append(f"assistant turn {i + 1}: {err}")
            continue
        if action.type == "finish" and i < len(replies) - 1:
            problems.append(f"assistant turn {i + 1} finishes the episode, yet the conversation goes on")
    return problems
